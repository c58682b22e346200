/* detect.c - float runs in bytes of unknown layout (detect.h). */
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
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
    /* sum of c log2 c: H = log2 n - s / n, without a division a byte value */
    float s = 0;
    uint32_t d = 0, n = 0;
#if defined(__SSE2__)
    /* 4 byte values at a time: 12 to 16 of these a window made the scalar
     * loop's chain of adds most of the detection's time */
    __m128 vs = _mm_setzero_ps();
    __m128i vd = _mm_setzero_si128(), vn = _mm_setzero_si128();
    __m128i const zero = _mm_setzero_si128(), one = _mm_set1_epi32(1);
    __m128 const fone = _mm_set1_ps(1.0f);
    for (unsigned b = 0; b < 256; b += 4) {
        __m128i const c = _mm_loadu_si128((const __m128i*)(const void*)(h + b));
        __m128 const cf = _mm_cvtepi32_ps(c);
        __m128i const bits = _mm_castps_si128(_mm_max_ps(cf, fone));
        __m128 const e = _mm_cvtepi32_ps(_mm_sub_epi32(_mm_srli_epi32(bits, 23), _mm_set1_epi32(128)));
        __m128 const m = _mm_castsi128_ps(_mm_or_si128(_mm_and_si128(bits, _mm_set1_epi32(0x007FFFFF)), _mm_set1_epi32(0x3F800000)));
        __m128 const poly = _mm_add_ps(_mm_mul_ps(_mm_add_ps(_mm_mul_ps(_mm_set1_ps(LMC_LOG2_K0), m), _mm_set1_ps(LMC_LOG2_K1)), m),
                                       _mm_set1_ps(-LMC_LOG2_K2));
        __m128 const l = _mm_and_ps(_mm_add_ps(e, poly), _mm_cmpgt_ps(cf, fone));   /* log2 1 = 0 exactly */
        vs = _mm_add_ps(vs, _mm_mul_ps(cf, l));
        vd = _mm_add_epi32(vd, _mm_add_epi32(one, _mm_cmpeq_epi32(c, zero)));
        vn = _mm_add_epi32(vn, c);
    }
    float fs[4];
    uint32_t ud[4], un[4];
    _mm_storeu_ps(fs, vs);
    _mm_storeu_si128((__m128i*)(void*)ud, vd);
    _mm_storeu_si128((__m128i*)(void*)un, vn);
    s = (fs[0] + fs[1]) + (fs[2] + fs[3]);
    d = ud[0] + ud[1] + ud[2] + ud[3];
    n = un[0] + un[1] + un[2] + un[3];
#else
    for (unsigned b = 0; b < 256; b++) {
        if (h[b] > 1) s += (float)h[b] * lmc_fast_log2((float)h[b]);
        d += h[b] != 0;
        n += h[b];
    }
#endif
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
 * [a, b) into hx[4 * (group mod 4) + position]: the coded bytes, XORed with
 * the reference when there is one. Returns the groups. */
static size_t count_span(uint32_t (*hx)[256], const uint8_t* src, const uint8_t* ref, size_t a, size_t b, uint64_t off,
                         size_t g)
{
    size_t i = a + ((4 - (unsigned)((off + a) & 3)) & 3);
    size_t const g0 = g;
    for (; i + 4 <= b; i += 4, g++) {
        uint32_t (*const h)[256] = hx + 4 * (g & 3);
        if (ref) for (unsigned k = 0; k < 4; k++) h[k][src[i + k] ^ ref[i + k]]++;
        else     for (unsigned k = 0; k < 4; k++) h[k][src[i + k]]++;
    }
    return g - g0;
}

lmc_layout_guess lmc_detect_layout(const uint8_t* src, const uint8_t* ref, size_t len, uint64_t off)
{
    lmc_layout_guess g = { 1, 0, LMC_DTYPE_BYTES };
    uint32_t hx[16][256];
    memset(hx, 0, sizeof(hx));
    size_t groups = 0;
    if (len <= (size_t)SPANS * SPAN_BYTES * 2) {
        groups = count_span(hx, src, ref, 0, len, off, 0);
    } else {
        size_t const step = (len - SPAN_BYTES - 4) / (SPANS - 1);
        for (size_t k = 0; k < SPANS; k++) groups += count_span(hx, src, ref, k * step, k * step + SPAN_BYTES + 3, off, groups);
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
     * zeros of a small integer; in a delta, the bits that change least)
     * takes the fewest values. For 32 bits, the byte below it breaks ties:
     * both high bytes of a small integer are 0, and the higher is the one
     * above the busier. */
    uint32_t at[4][256];   /* the sampled bytes by position */
    for (unsigned p = 0; p < 4; p++)
        for (unsigned b = 0; b < 256; b++) at[p][b] = hx[p][b] + hx[4 + p][b] + hx[8 + p][b] + hx[12 + p][b];
    if (w4) {
        float hp1[4];
        for (unsigned p = 0; p < 4; p++) hp1[p] = entropy(at[p]);
        unsigned top = 0;
        float best = 0;
        for (unsigned t = 0; t < 4; t++) {
            float const s = hp1[t] + 0.5f * hp1[(t + 3) & 3];
            if (t == 0 || s < best) { best = s; top = t; }
        }
        g.width = 4; g.phase = (top + 1) & 3; g.dtype = LMC_DTYPE_F32;
    } else {
        for (unsigned b = 0; b < 256; b++) { at[0][b] += at[2][b]; at[1][b] += at[3][b]; }
        unsigned const top = entropy(at[1]) <= entropy(at[0]) ? 1 : 0;
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

static int same_layout(lmc_layout_guess a, lmc_layout_guess b) { return a.width == b.width && a.phase == b.phase; }

static lmc_layout_guess probe(const lmc_piece* in, const uint8_t* src, const uint8_t* ref, uint64_t a, uint64_t n)
{
    return lmc_detect_layout(src + a, ref ? ref + a : NULL, (size_t)n, in->off + a);
}

/* Where, in [lo, end), values of layout `left` give way to others: the
 * probe windows at lo and near end are taken to be on either side; halving
 * the distance with probes of LMC_DETECT_PROBE bytes finds a boundary to
 * within about half a probe. */
static uint64_t bisect(const lmc_piece* in, const uint8_t* src, const uint8_t* ref, uint64_t lo, uint64_t end,
                       lmc_layout_guess left)
{
    uint64_t const P = LMC_DETECT_PROBE;
    if (end - lo < 2 * P) return lo + (end - lo) / 2;
    uint64_t hi = end - P;
    while (hi - lo > P) {
        uint64_t const mid = lo + (hi - lo) / 2;
        if (same_layout(probe(in, src, ref, mid, P), left)) lo = mid; else hi = mid;
    }
    return lo + (hi - lo) / 2 + P / 2;
}

size_t lmc_detect_split(const lmc_piece* in, const uint8_t* src, const uint8_t* ref, lmc_piece* out)
{
    uint64_t const len = in->len, P = LMC_DETECT_PROBE;
    out[0] = *in;
    out[0].detect = 0;
    if (len < LMC_DETECT_MIN) return 1;
    uint64_t const win = LMC_MAX((uint64_t)LMC_DETECT_WINDOW, (len + LMC_DETECT_MAX_WINDOWS - 1) / LMC_DETECT_MAX_WINDOWS);
    size_t const nwin = (size_t)LMC_MAX((uint64_t)1, len / win);   /* the last window takes the rest */
    uint64_t const sub = win / LMC_DETECT_SUBS;

    /* 1. A guess for each window, and for the piece's first and last bytes. */
    lmc_layout_guess wg[LMC_DETECT_MAX_WINDOWS];
    for (size_t w = 0; w < nwin; w++) {
        uint64_t const a = w * win, b = w + 1 == nwin ? len : a + win;
        wg[w] = probe(in, src, ref, a, b - a);
    }
    int const edges = len >= 4 * P;
    lmc_layout_guess const head = edges ? probe(in, src, ref, 0, P) : wg[0];
    lmc_layout_guess const tail = edges ? probe(in, src, ref, len - P, P) : wg[nwin - 1];

    /* 2. Segments: a window whose guess differs from a neighbour's (or from
     * the probe at its end of the piece) holds a change, and is looked at
     * in LMC_DETECT_SUBS parts; the others are one segment each. */
    struct { uint64_t a; lmc_layout_guess g; } seg[LMC_DETECT_MAX_SEGS];
    size_t ns = 0;
    int any = 0;
    if (!same_layout(head, wg[0])) { seg[0].a = 0; seg[0].g = head; ns = 1; }   /* its end is found below */
    for (size_t w = 0; w < nwin; w++) {
        uint64_t const a = w * win, b = w + 1 == nwin ? len : a + win;
        int const mixed = (w > 0 && !same_layout(wg[w], wg[w - 1])) || (w + 1 < nwin && !same_layout(wg[w], wg[w + 1]))
                          || (w == 0 && !same_layout(wg[w], head)) || (w + 1 == nwin && !same_layout(wg[w], tail));
        if (!mixed || b - a < 2 * sub) {
            seg[ns].a = a; seg[ns].g = wg[w]; ns++;
            continue;
        }
        for (uint64_t x = a; x < b; x += sub) {
            uint64_t const y = b - x < 2 * sub ? b : x + sub;   /* the last part takes the rest */
            seg[ns].a = x; seg[ns].g = probe(in, src, ref, x, y - x); ns++;
            if (y == b) break;
        }
    }
    if (!same_layout(tail, wg[nwin - 1])) { seg[ns].a = len - P; seg[ns].g = tail; ns++; }
    for (size_t i = 0; i < ns; i++) any |= seg[i].g.width > 1;
    if (!any) return 1;

    /* A part that matches neither neighbour, both floats, is most likely the
     * two of them mixed (values of two phases look like bytes, or like the
     * other width): the change between them lies inside it. */
    for (size_t i = 1; i + 1 < ns; i++)
        if (seg[i + 1].a - seg[i].a <= 2 * sub && seg[i - 1].g.width > 1 && seg[i + 1].g.width > 1
            && !same_layout(seg[i].g, seg[i - 1].g) && !same_layout(seg[i].g, seg[i + 1].g))
            seg[i].g = seg[i - 1].g;

    /* 3. Each change between segments, found to within about half a probe
     * (bisect) in the two parts around it. */
    for (size_t i = 1; i < ns; i++) {
        if (same_layout(seg[i - 1].g, seg[i].g)) continue;
        uint64_t const lo = LMC_MAX(seg[i - 1].a, seg[i].a >= sub ? seg[i].a - sub : 0);
        uint64_t const end = LMC_MIN(i + 1 < ns ? seg[i + 1].a : len, seg[i].a + sub);
        seg[i].a = bisect(in, src, ref, lo, end, seg[i - 1].g);
    }

    /* 4. Runs: a segment's values start at its first offset of the right
     * phase; the bytes before go to the run before (its tail), or at the
     * start of the piece to a width-1 piece. */
    size_t k = 0;
    uint64_t cur = 0;
    lmc_layout_guess cg = { 1, 0, LMC_DTYPE_BYTES };
    for (size_t i = 0; i < ns; i++) {
        if (i > 0 && same_layout(seg[i].g, cg)) continue;
        uint64_t const st = align_to(LMC_MAX(seg[i].a, cur), in->off, seg[i].g);
        if (st >= len) break;
        if (st > cur) k = emit(out, k, in, cur, st, cg);
        cur = st;
        cg = seg[i].g;
    }
    return emit(out, k, in, cur, len, cg);
}
