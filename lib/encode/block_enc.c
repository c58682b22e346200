/* block_enc.c - RAW / CONST / HUF / RLE_HUF block coder (doc/format.md, "Block").
 *
 * The mode is chosen by exact size, not by estimate: Huffman lengths give the
 * bit count of the payload before anything is written, so only the winner is
 * ever encoded. */
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#include "block_enc.h"
#include "mem.h"
#include "lmc.h"

void lmc_histogram(uint32_t hist[256], const uint8_t* src, size_t m)
{
    uint32_t c[4][256];
    memset(c, 0, sizeof(c));
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t const v = lmc_rd64(src + i);
        c[0][(uint8_t)v]++;         c[1][(uint8_t)(v >> 8)]++;
        c[2][(uint8_t)(v >> 16)]++; c[3][(uint8_t)(v >> 24)]++;
        c[0][(uint8_t)(v >> 32)]++; c[1][(uint8_t)(v >> 40)]++;
        c[2][(uint8_t)(v >> 48)]++; c[3][(uint8_t)(v >> 56)]++;
    }
    for (; i < m; i++) c[0][src[i]]++;
    for (int s = 0; s < 256; s++) hist[s] = c[0][s] + c[1][s] + c[2][s] + c[3][s];
}

int lmc_block_looks_raw(const uint8_t* src, size_t m)
{
    if (m < 16384) return 0;
    uint32_t h[256];
    memset(h, 0, sizeof(h));
    /* 8 contiguous windows: a strided sample can alias with the tensor's shape */
    size_t n = 0;
    size_t const step = m / 8;
    for (size_t w = 0; w < 8; w++)
        for (size_t i = w * step; i < w * step + 1024; i++, n++) h[src[i]]++;
    float bits = 0;
    for (int s = 0; s < 256; s++)
        if (h[s]) bits += (float)h[s] * lmc_fast_log2((float)n / (float)h[s]);
    /* a sample underestimates entropy (by ~0.02 bit here), never over */
    return bits > 7.95f * (float)n;
}

/*-*** Huffman code lengths ***-*/

/* Sorts the symbols with non-zero frequency by ascending frequency (two 9-bit
 * radix passes: frequencies are < 2^18). Returns how many there are. */
static unsigned sort_by_freq(lmc_block_ws* ws, const uint32_t* freq, unsigned alpha)
{
    unsigned cnt[513], n = 0;
    uint32_t* const a = ws->sort_a; uint32_t* const b = ws->sort_b;
    /* key in the high bits, symbol in the low 9 */
    for (unsigned s = 0; s < alpha; s++)
        if (freq[s]) a[n++] = (freq[s] << 9) | s;
    for (int pass = 0; pass < 2; pass++) {
        unsigned const shift = 9 + 9 * pass;
        memset(cnt, 0, sizeof(cnt));
        for (unsigned i = 0; i < n; i++) cnt[((a[i] >> shift) & 511) + 1]++;
        for (unsigned k = 1; k < 513; k++) cnt[k] += cnt[k - 1];
        for (unsigned i = 0; i < n; i++) b[cnt[(a[i] >> shift) & 511]++] = a[i];
        memcpy(a, b, n * sizeof(*a));
    }
    return n;
}

unsigned lmc_huf_lengths(lmc_block_ws* ws, uint8_t* len, const uint32_t* freq, unsigned alpha, unsigned maxbits)
{
    memset(len, 0, alpha);
    unsigned const n = sort_by_freq(ws, freq, alpha);
    uint32_t* const sym = ws->sort_a;      /* ascending by freq, symbol in low 9 bits */
    uint32_t* const A = ws->sort_b;
    if (n == 0) return 0;
    if (n == 1) { len[sym[0] & 511] = 1; return 1; }
    for (unsigned i = 0; i < n; i++) A[i] = sym[i] >> 9;

    /* In-place minimum-redundancy lengths (Moffat & Katajainen, 1995):
     * pass 1 builds the tree with parent pointers, pass 2 turns them into
     * internal depths, pass 3 into leaf depths. A[i] ends as the length of
     * the i-th least frequent symbol. */
    unsigned root = 0, leaf = 2, next;
    A[0] += A[1];
    for (next = 1; next < n - 1; next++) {
        if (leaf >= n || A[root] < A[leaf]) { A[next] = A[root]; A[root++] = next; }
        else A[next] = A[leaf++];
        if (leaf >= n || (root < next && A[root] < A[leaf])) { A[next] += A[root]; A[root++] = next; }
        else A[next] += A[leaf++];
    }
    A[n - 2] = 0;
    for (int j = (int)n - 3; j >= 0; j--) A[j] = A[A[j]] + 1;
    {
        int avail = 1, used = 0, depth = 0, r = (int)n - 2, nx = (int)n - 1;
        while (avail > 0) {
            while (r >= 0 && (int)A[r] == depth) { used++; r--; }
            while (avail > used) { A[nx--] = (uint32_t)depth; avail--; }
            avail = 2 * used; depth++; used = 0;
        }
    }
    unsigned maxlen = A[0];
    if (maxlen > maxbits) {
        /* Clamp, then repay the Kraft debt by lengthening the longest codes that
         * are still short of the limit (the cheapest to lengthen), then spend any
         * surplus by shortening the most frequent codes where it fits exactly. */
        int64_t const one = (int64_t)1 << maxbits;
        int64_t kraft = 0;
        for (unsigned i = 0; i < n; i++) {
            if (A[i] > maxbits) A[i] = maxbits;
            kraft += one >> A[i];
        }
        while (kraft > one) {
            for (unsigned i = 0; i < n && kraft > one; i++) {
                /* A is non-increasing: find the first code shorter than maxbits */
                if (A[i] < maxbits) { kraft -= (one >> A[i]) >> 1; A[i]++; break; }
            }
        }
        for (int i = (int)n - 1; i >= 0 && kraft < one; i--) {
            while (A[i] > 1 && kraft + ((one >> A[i])) <= one) { kraft += one >> A[i]; A[i]--; }
        }
        maxlen = maxbits;
    }
    for (unsigned i = 0; i < n; i++) len[sym[i] & 511] = (uint8_t)A[i];
    return maxlen;
}

/*-*** table writer ***-*/

/* Writes nsym + nibble-coded lengths; returns bytes written. */
static size_t write_table(uint8_t* dst, const uint8_t* len, unsigned alpha)
{
    unsigned nsym = alpha;
    while (nsym > 0 && len[nsym - 1] == 0) nsym--;
    lmc_wr16(dst, (uint16_t)nsym);
    uint8_t* p = dst + 2;
    unsigned nib = 0, half = 0;
#define PUT_NIBBLE(v) do { if (half) { *p++ = (uint8_t)(nib | ((v) << 4)); half = 0; } else { nib = (v); half = 1; } } while (0)
    for (unsigned s = 0; s < nsym;) {
        if (len[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && len[s + z] == 0 && z < 18) z++;
            if (z >= 3) { PUT_NIBBLE(LMC_NIBBLE_ZRUN); PUT_NIBBLE(z - 3); s += z; continue; }
        }
        PUT_NIBBLE(len[s]); s++;
    }
    if (half) *p++ = (uint8_t)nib;
#undef PUT_NIBBLE
    return (size_t)(p - dst);
}

static size_t table_size(const uint8_t* len, unsigned alpha)
{
    unsigned nsym = alpha, nibbles = 0;
    while (nsym > 0 && len[nsym - 1] == 0) nsym--;
    for (unsigned s = 0; s < nsym;) {
        if (len[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && len[s + z] == 0 && z < 18) z++;
            if (z >= 3) { nibbles += 2; s += z; continue; }
        }
        nibbles++; s++;
    }
    return 2 + (nibbles + 1) / 2;
}

/*-*** bit writer: LSB-first into 64-bit little-endian words ***-*/
typedef struct { uint8_t* p; uint64_t bits; unsigned n; } bitw;

LMC_FORCE_INLINE void bw_put(bitw* w, uint32_t code, unsigned len) { w->bits |= (uint64_t)code << w->n; w->n += len; }
LMC_FORCE_INLINE void bw_flush(bitw* w)
{
    lmc_wr64(w->p, w->bits);
    w->p += w->n >> 3;
    w->bits >>= (w->n & ~7u);   /* callers keep n <= 63 between flushes */
    w->n &= 7;
}
LMC_FORCE_INLINE uint8_t* bw_close(bitw* w)
{
    lmc_wr64(w->p, w->bits);
    return w->p + ((w->n + 7) >> 3);
}

/* Codes src[0..m) with (code,len) into one bitstream at dst; returns its end. */
LMC_FORCE_INLINE uint8_t* huf_encode_stream_body(uint8_t* dst, const uint8_t* src, size_t m, const uint16_t* code, const uint8_t* len)
{
    bitw w = { dst, 0, 0 };
    size_t i = 0;
    /* 4 codes of <= 11 bits plus < 8 pending bits fit the 64-bit buffer */
    for (; i + 4 <= m; i += 4) {
        bw_put(&w, code[src[i]], len[src[i]]);
        bw_put(&w, code[src[i + 1]], len[src[i + 1]]);
        bw_put(&w, code[src[i + 2]], len[src[i + 2]]);
        bw_put(&w, code[src[i + 3]], len[src[i + 3]]);
        bw_flush(&w);
    }
    for (; i < m; i++) { bw_put(&w, code[src[i]], len[src[i]]); bw_flush(&w); }
    return bw_close(&w);
}

static uint8_t* huf_encode_stream_plain(uint8_t* dst, const uint8_t* src, size_t m, const uint16_t* code, const uint8_t* len)
{ return huf_encode_stream_body(dst, src, m, code, len); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static uint8_t* huf_encode_stream_bmi2(uint8_t* dst, const uint8_t* src, size_t m, const uint16_t* code, const uint8_t* len)
{ return huf_encode_stream_body(dst, src, m, code, len); }
#endif
static uint8_t* huf_encode_stream(uint8_t* dst, const uint8_t* src, size_t m, const uint16_t* code, const uint8_t* len)
{
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) return huf_encode_stream_bmi2(dst, src, m, code, len);
#endif
    return huf_encode_stream_plain(dst, src, m, code, len);
}

static uint64_t cost_bits(const uint32_t* freq, const uint8_t* len, unsigned alpha)
{
    uint64_t bits = 0;
    for (unsigned s = 0; s < alpha; s++) bits += (uint64_t)freq[s] * len[s];
    return bits;
}

/* RLE tokens: runs of the block's most frequent byte `rb` (see huf.h), and
 * literals for every other byte. Runs of one fixed byte, rather than of the
 * previous byte, let a run follow any literal: in a delta's high-byte stream
 * zero runs are separated by single non-zero bytes. */
LMC_FORCE_INLINE void emit_run(lmc_block_ws* ws, size_t* t, size_t r, uint64_t* ext)
{
    uint16_t* const sym = ws->tok_sym;
    if (r <= LMC_RUN_EXACT) {
        sym[*t] = (uint16_t)(LMC_ALPHA_LIT + r - 1);
        ws->freq[LMC_ALPHA_LIT + r - 1]++;
    } else {
        /* c = floor(log2((r - 1) / 16)): r in [16*2^c + 1, 16*2^(c+1)] */
        unsigned const c = 31u - (unsigned)__builtin_clz((unsigned)((r - 1) / LMC_RUN_EXACT));
        sym[*t] = (uint16_t)(LMC_ALPHA_LIT + LMC_RUN_EXACT + c);
        ws->tok_ext[*t] = (uint16_t)(r - ((size_t)LMC_RUN_EXACT << c) - 1);
        ws->freq[LMC_ALPHA_LIT + LMC_RUN_EXACT + c]++;
        *ext += 4 + c;
    }
    (*t)++;
}

/* One pass, 16 bytes at a time: the mask of bytes that are not the run byte
 * gives the literals; the gaps between them are the runs. */
static size_t rle_tokenize(lmc_block_ws* ws, const uint8_t* src, size_t m, uint8_t rb, uint64_t* extra_bits)
{
    size_t t = 0, i = 0, run = 0;
    uint64_t ext = 0;
    uint16_t* const sym = ws->tok_sym;
    memset(ws->freq, 0, sizeof(ws->freq));
#if defined(__SSE2__)
    __m128i const k = _mm_set1_epi8((char)rb);
    for (; i + 16 <= m; i += 16) {
        unsigned lit = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(src + i)), k)) & 0xFFFF;
        unsigned prev = 0;
        while (lit) {
            unsigned const b = (unsigned)__builtin_ctz(lit);
            lit &= lit - 1;
            run += b - prev;
            if (run) { emit_run(ws, &t, run, &ext); run = 0; }
            uint8_t const v = src[i + b];
            sym[t++] = v; ws->freq[v]++;
            prev = b + 1;
        }
        run += 16 - prev;
    }
#endif
    for (; i < m; i++) {
        if (src[i] == rb) { run++; continue; }
        if (run) { emit_run(ws, &t, run, &ext); run = 0; }
        sym[t++] = src[i]; ws->freq[src[i]]++;
    }
    if (run) emit_run(ws, &t, run, &ext);
    *extra_bits = ext;
    return t;
}

/* Number of maximal runs of byte b (transitions into b). */
static size_t count_runs(const uint8_t* src, size_t m, uint8_t b)
{
    size_t runs = src[0] == b, i = 1;
#if defined(__SSE2__)
    __m128i const k = _mm_set1_epi8((char)b);
    for (; i + 16 <= m; i += 16) {
        unsigned const cur = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(src + i)), k));
        unsigned const prev = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(src + i - 1)), k));
        unsigned x = cur & ~prev & 0xFFFF;
        x = x - ((x >> 1) & 0x5555); x = (x & 0x3333) + ((x >> 2) & 0x3333);
        x = (x + (x >> 4)) & 0x0F0F; runs += (x + (x >> 8)) & 0x1F;
    }
#endif
    for (; i < m; i++) runs += (src[i] == b) & (src[i - 1] != b);
    return runs;
}

/* Bits of an order-0 code of the RLE tokens, without tokenising. */
static double rle_estimate_bits(const uint32_t hist[256], unsigned top, size_t m, size_t runs)
{
    if (runs == 0) return 8.0 * (double)m;
    double const tokens = (double)(m - hist[top]) + (double)runs;
    double bits = 0;
    for (unsigned s = 0; s < 256; s++)
        if (s != top && hist[s]) bits += hist[s] * lmc_fast_log2((float)(tokens / hist[s]));
    double const mu = (double)hist[top] / (double)runs;  /* mean run length */
    double const p = 1.0 / mu;
    double const hgeo = p >= 1.0 ? 0.0 : (-(1 - p) * lmc_fast_log2((float)(1 - p)) - p * lmc_fast_log2((float)p)) / p;
    bits += (double)runs * (lmc_fast_log2((float)(tokens / runs)) + hgeo);
    return bits;
}

size_t lmc_block_encode(lmc_block_ws* ws, uint8_t* dst, const uint8_t* src, size_t m,
                        const uint32_t hist[256], unsigned coders)
{
    unsigned nsymbols = 0, top = 0;
    for (unsigned s = 0; s < 256; s++) {
        nsymbols += hist[s] != 0;
        if (hist[s] > hist[top]) top = s;
    }
    if (nsymbols == 1 && (coders & (1u << LMC_CODER_CONST))) {
        dst[0] = LMC_CODER_CONST; dst[1] = src[0];
        return 2;
    }
    size_t best = 1 + m;  /* RAW */
    int mode = LMC_CODER_RAW;

    size_t huf_size = (size_t)-1;
    if ((coders & (1u << LMC_CODER_HUF)) && nsymbols > 1) {
        lmc_huf_lengths(ws, ws->len_lit, hist, LMC_ALPHA_LIT, LMC_HUF_MAXBITS);
        uint64_t const bits = cost_bits(hist, ws->len_lit, LMC_ALPHA_LIT);
        /* each of the 4 bitstreams may round up to a byte */
        huf_size = 1 + 3 + table_size(ws->len_lit, LMC_ALPHA_LIT) + 6 + (size_t)((bits + 7) >> 3) + 3;
        if (huf_size < best) { best = huf_size; mode = LMC_CODER_HUF; }
    }
    size_t ntok = 0;
    /* The tokeniser is the costliest step here, so it only runs when an
     * entropy estimate of the token stream (literals, plus runs with a
     * geometric length model) beats the exact Huffman cost by 4 %. */
    int try_rle = 0;
    if ((coders & (1u << LMC_CODER_RLE_HUF)) && (uint64_t)hist[top] * 4 > m) {
        size_t const runs = count_runs(src, m, (uint8_t)top);
        double const est = rle_estimate_bits(hist, top, m, runs);
        double const huf_bits = huf_size == (size_t)-1 ? 8.0 * m : 8.0 * (double)huf_size;
        try_rle = est < 0.96 * huf_bits;
    }
    if (try_rle) {
        uint64_t ext;
        ntok = rle_tokenize(ws, src, m, (uint8_t)top, &ext);
        lmc_huf_lengths(ws, ws->len_rle, ws->freq, LMC_ALPHA_RLE, LMC_HUF_MAXBITS);
        uint64_t const bits = cost_bits(ws->freq, ws->len_rle, LMC_ALPHA_RLE) + ext;
        size_t const sz = 1 + 3 + table_size(ws->len_rle, LMC_ALPHA_RLE) + 1 + 3 + (size_t)((bits + 7) >> 3);
        if (sz < best) { best = sz; mode = LMC_CODER_RLE_HUF; }
    }

    /* rANS: fractional bits. It codes and decodes at about half Huffman's
     * speed, so it is only used where it saves over 3 %: skewed bytes (a
     * delta's high byte), not the flat mantissa bytes where Huffman is within
     * a percent or two of the entropy. */
    if ((coders & (1u << LMC_CODER_ANS)) && nsymbols > 1 && (uint64_t)hist[top] * 8 > m) {
        size_t const est = 4 + lmc_ans_prepare(&ws->ans, hist, m);
        if ((double)est < 0.97 * (double)best) {
            size_t const sz = lmc_ans_encode(&ws->ans, dst + 4, best - 5, src, m);
            if (sz) {
                dst[0] = LMC_CODER_ANS;
                lmc_wr24(dst + 1, (uint32_t)sz);
                return 4 + sz;
            }
        }
    }

    if (mode == LMC_CODER_RAW) {
        dst[0] = LMC_CODER_RAW;
        memcpy(dst + 1, src, m);
        return 1 + m;
    }
    if (mode == LMC_CODER_HUF) {
        uint8_t* p = dst + 4;
        p += write_table(p, ws->len_lit, LMC_ALPHA_LIT);
        lmc_huf_canonical(ws->code, ws->len_lit, LMC_ALPHA_LIT);
        size_t const q = m >> 2;
        uint8_t* const sizes = p;
        p += 6;
        for (int j = 0; j < 4; j++) {
            size_t const cnt = j < 3 ? q : m - 3 * q;
            uint8_t* const e = huf_encode_stream(p, src + (size_t)j * q, cnt, ws->code, ws->len_lit);
            if (j < 3) lmc_wr16(sizes + 2 * j, (uint16_t)(e - p));
            p = e;
        }
        size_t const payload = (size_t)(p - (dst + 4));
        dst[0] = LMC_CODER_HUF;
        lmc_wr24(dst + 1, (uint32_t)payload);
        return 4 + payload;
    }
    /* RLE_HUF */
    {
        uint8_t* p = dst + 4;
        p += write_table(p, ws->len_rle, LMC_ALPHA_RLE);
        lmc_huf_canonical(ws->code, ws->len_rle, LMC_ALPHA_RLE);
        *p++ = (uint8_t)top;
        lmc_wr24(p, (uint32_t)ntok);
        p += 3;
        bitw w = { p, 0, 0 };
        for (size_t t = 0; t < ntok; t++) {
            unsigned const s = ws->tok_sym[t];
            bw_put(&w, ws->code[s], ws->len_rle[s]);
            if (s >= LMC_ALPHA_LIT + LMC_RUN_EXACT) bw_put(&w, ws->tok_ext[t], s - (LMC_ALPHA_LIT + LMC_RUN_EXACT) + 4);
            bw_flush(&w);
        }
        p = bw_close(&w);
        size_t const payload = (size_t)(p - (dst + 4));
        dst[0] = LMC_CODER_RLE_HUF;
        lmc_wr24(dst + 1, (uint32_t)payload);
        return 4 + payload;
    }
}
