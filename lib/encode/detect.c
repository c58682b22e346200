/* detect.c - float runs in bytes of unknown layout (detect.h). */
#include <string.h>
#include "detect.h"
#include "lmc.h"
#include "mem.h"

/* Spans sampled in a window: 8 of 256 bytes, 512 bytes for each position
 * modulo 4, enough to tell a byte that takes a few dozen values from one
 * that takes them all; the whole window when it is this short. */
#define SPANS      8
#define SPAN_BYTES 256

/* Order-0 entropy in bits a byte, with the Miller-Madow correction, so
 * that a sample's near-uniform bytes come out near 8 bits. */
static float entropy(const uint32_t* h)
{
    float s = 0;   /* sum of c log2 c: H = log2 n - s / n, without a division a byte value */
    unsigned d = 0;
    uint32_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        n += h[b];
        if (h[b] > 1) { s += (float)h[b] * lmc_fast_log2((float)h[b]); d++; }
        else d += h[b];
    }
    if (!n) return 0;
    float const fn = (float)n;
    return lmc_fast_log2(fn) - s / fn + (float)(d - 1) * 0.7213475f / fn;
}

/* Entropy of the sum of the histograms listed in `which` (a bit each of 16). */
static float entropy_of(const uint32_t (*h)[256], unsigned which)
{
    uint32_t t[256];
    memset(t, 0, sizeof(t));
    for (unsigned k = 0; k < 16; k++)
        if (which >> k & 1)
            for (unsigned b = 0; b < 256; b++) t[b] += h[k][b];
    return entropy(t);
}

/* Counts the whole 4-byte groups (aligned on content offsets) of bytes
 * [a, b): hx[4 * (group mod 4) + position] the coded bytes (XOR with the
 * reference when there is one), hp[position] the plain ones (only with a
 * reference; hx is the plain bytes without one). Returns the groups. */
static size_t count_span(uint32_t (*hx)[256], uint32_t (*hp)[256], const uint8_t* src, const uint8_t* ref, size_t a,
                         size_t b, uint64_t off, size_t g)
{
    size_t i = a + ((4 - (unsigned)((off + a) & 3)) & 3);
    size_t const g0 = g;
    for (; i + 4 <= b; i += 4, g++) {
        uint32_t (*const h)[256] = hx + 4 * (g & 3);
        if (ref) {
            for (unsigned k = 0; k < 4; k++) { h[k][src[i + k] ^ ref[i + k]]++; hp[k][src[i + k]]++; }
        } else {
            for (unsigned k = 0; k < 4; k++) h[k][src[i + k]]++;
        }
    }
    return g - g0;
}

lmc_layout_guess lmc_detect_layout(const uint8_t* src, const uint8_t* ref, size_t len, uint64_t off)
{
    lmc_layout_guess g = { 1, 0, LMC_DTYPE_BYTES };
    uint32_t hx[16][256], hp[4][256];
    memset(hx, 0, sizeof(hx));
    if (ref) memset(hp, 0, sizeof(hp));
    size_t groups = 0;
    if (len <= (size_t)SPANS * SPAN_BYTES * 2) {
        groups = count_span(hx, hp, src, ref, 0, len, off, 0);
    } else {
        size_t const step = (len - SPAN_BYTES - 4) / (SPANS - 1);
        for (size_t k = 0; k < SPANS; k++) groups += count_span(hx, hp, src, ref, k * step, k * step + SPAN_BYTES + 3, off, groups);
    }
    if (groups < 64) return g;

    /* Bits for 4 bytes coded as 4 streams (32-bit values), 2 (16-bit values,
     * either phase) and 1 (bytes). Each estimate sums 4 histograms of as many
     * bytes (by position; by position modulo 2 and group parity; by group
     * modulo 4), so that their small-sample biases are alike: near-uniform
     * bytes in 4 histograms of a quarter of the sample each would otherwise
     * look a third of a bit a byte cheaper than in one. */
    float c4 = 0, c2 = 0, c1 = 0;
    for (unsigned p = 0; p < 4; p++) c4 += entropy_of((const uint32_t (*)[256])hx, 0x1111u << p);
    /* near 8 bits at every position (compressed or random bytes): merging
     * streams never lowers the estimate much, so no layout can win */
    if (c4 > 31.0f) return g;
    for (unsigned q = 0; q < 2; q++)
        for (unsigned j = 0; j < 2; j++) c2 += entropy_of((const uint32_t (*)[256])hx, 0x0505u << (q + 4 * j));
    for (unsigned j = 0; j < 4; j++) c1 += entropy_of((const uint32_t (*)[256])hx, 0x000Fu << (4 * j));
    /* a wider layout must save 3 % and a twentieth of a bit: ties (zeros,
     * text, compressed bytes) stay bytes; bf16 looks as good as 4 streams
     * as 2, and stays 16 bits unless 4 save 3 % more */
    int const w2 = c2 < c1 * 0.97f - 0.05f;
    int const w4 = c4 < c1 * 0.97f - 0.05f && (!w2 || c4 < c2 * 0.97f);
    if (!w2 && !w4) return g;

    /* Where values start: their high byte (sign and exponent of a float,
     * zeros of a small integer) takes the fewest values among the plain
     * bytes. For 32 bits, the byte below it breaks ties: both high bytes of
     * a small integer are 0, and the higher is the one above the busier. */
    uint32_t plain[4][256];
    for (unsigned p = 0; p < 4; p++)
        for (unsigned b = 0; b < 256; b++)
            plain[p][b] = ref ? hp[p][b] : hx[p][b] + hx[4 + p][b] + hx[8 + p][b] + hx[12 + p][b];
    if (w4) {
        float hp1[4];
        for (unsigned p = 0; p < 4; p++) hp1[p] = entropy(plain[p]);
        unsigned top = 0;
        float best = 0;
        for (unsigned t = 0; t < 4; t++) {
            float const s = hp1[t] + 0.5f * hp1[(t + 3) & 3];
            if (t == 0 || s < best) { best = s; top = t; }
        }
        g.width = 4; g.phase = (top + 1) & 3; g.dtype = LMC_DTYPE_F32;
    } else {
        for (unsigned b = 0; b < 256; b++) { plain[0][b] += plain[2][b]; plain[1][b] += plain[3][b]; }
        unsigned const top = entropy(plain[1]) <= entropy(plain[0]) ? 1 : 0;
        g.width = 2; g.phase = (top + 1) & 1; g.dtype = LMC_DTYPE_BF16;
    }
    return g;
}

/* The first offset from rel on (relative to the piece at content offset
 * off) where a value of guess g starts. */
static uint64_t align_to(uint64_t rel, uint64_t off, lmc_layout_guess g)
{
    return rel + ((g.phase + g.width - (unsigned)((off + rel) % g.width)) % g.width);
}

static size_t emit(lmc_piece* out, size_t k, const lmc_piece* in, uint64_t a, uint64_t b, lmc_layout_guess g)
{
    lmc_piece* const p = &out[k];
    *p = *in;
    p->off = in->off + a;
    p->len = (uint32_t)(b - a);
    p->ref_off = in->ref_off + a;
    p->row = 0;
    p->detect = 0;
    if (p->len < LMC_MIN_PIECE) g.width = 1, g.dtype = LMC_DTYPE_BYTES;
    p->width = (uint8_t)g.width;
    p->dtype = (uint8_t)g.dtype;
    p->float_like = g.width > 1;
    return k + 1;
}

size_t lmc_detect_split(const lmc_piece* in, const uint8_t* src, const uint8_t* ref, lmc_piece* out)
{
    uint64_t const len = in->len;
    out[0] = *in;
    out[0].detect = 0;
    if (len < LMC_DETECT_MIN) return 1;
    uint64_t const win = LMC_MAX((uint64_t)LMC_DETECT_WINDOW, (len + LMC_DETECT_MAX_WINDOWS - 1) / LMC_DETECT_MAX_WINDOWS);
    uint64_t const nwin = LMC_MAX((uint64_t)1, len / win);   /* the last window takes the rest */
    size_t k = 0;
    int any = 0;
    uint64_t cur = 0;
    lmc_layout_guess cg = { 1, 0, LMC_DTYPE_BYTES };
    for (uint64_t w = 0; w < nwin; w++) {
        uint64_t const a = w * win, b = w + 1 == nwin ? len : a + win;
        lmc_layout_guess const g = lmc_detect_layout(src + a, ref ? ref + a : NULL, (size_t)(b - a), in->off + a);
        any |= g.width > 1;
        if (w == 0) {
            cur = align_to(0, in->off, g);
            if (cur) k = emit(out, k, in, 0, cur, (lmc_layout_guess){ 1, 0, LMC_DTYPE_BYTES });
            cg = g;
            continue;
        }
        if (g.width == cg.width && g.phase == cg.phase) continue;
        uint64_t const s = align_to(a, in->off, g);
        if (s >= len) break;
        k = emit(out, k, in, cur, s, cg);
        cur = s;
        cg = g;
    }
    if (!any) { out[0] = *in; out[0].detect = 0; return 1; }
    return emit(out, k, in, cur, len, cg);
}
