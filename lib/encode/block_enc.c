/* block_enc.c - RAW / CONST / HUF / RLE_HUF block coder (doc/format.md, "Block").
 *
 * The mode is chosen by exact size, not by estimate: Huffman lengths give the
 * bit count of the payload before anything is written, so only the winner is
 * ever encoded. Where ANS wins by far, lower bounds of the other sizes settle
 * that without computing them. */
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#include "block_enc.h"
#include "mem.h"
#include "lmc.h"
#if LMC_HAS_AVX2_DISPATCH
#  include <immintrin.h>
#endif

/* Several count tables: consecutive equal bytes would otherwise chain
 * every increment on the previous one's store. (Eight tables measured
 * slower than four.) Adds the m bytes at src to the tables c. */
LMC_FORCE_INLINE void count4(uint32_t c[4][256], const uint8_t* src, size_t m)
{
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t const v = lmc_rd64(src + i);
        c[0][(uint8_t)v]++;         c[1][(uint8_t)(v >> 8)]++;
        c[2][(uint8_t)(v >> 16)]++; c[3][(uint8_t)(v >> 24)]++;
        c[0][(uint8_t)(v >> 32)]++; c[1][(uint8_t)(v >> 40)]++;
        c[2][(uint8_t)(v >> 48)]++; c[3][(uint8_t)(v >> 56)]++;
    }
    for (; i < m; i++) c[0][src[i]]++;
}

LMC_FORCE_INLINE void fold4(uint32_t hist[256], uint32_t c[4][256])
{
    for (int s = 0; s < 256; s++) hist[s] = c[0][s] + c[1][s] + c[2][s] + c[3][s];
}

static void histogram_plain(uint32_t hist[256], const uint8_t* src, size_t m)
{
    uint32_t c[4][256];
    memset(c, 0, sizeof(c));
    count4(c, src, m);
    fold4(hist, c);
}

#if LMC_HAS_BMI2_DISPATCH && defined(__SSE2__)
#include <immintrin.h>
/* For a byte mask k, the positions of its set bits, packed low first: the
 * pshufb control that moves the selected bytes of an 8-byte group to its front. */
#define LMC_B(k, i) (((k) >> (i)) & 1u)
#define LMC_POS(k, i) (LMC_B(k, 0) * ((i) > 0) + LMC_B(k, 1) * ((i) > 1) + LMC_B(k, 2) * ((i) > 2) + LMC_B(k, 3) * ((i) > 3) \
                     + LMC_B(k, 4) * ((i) > 4) + LMC_B(k, 5) * ((i) > 5) + LMC_B(k, 6) * ((i) > 6))
#define LMC_E1(k, i) ((uint64_t)(LMC_B(k, i) * (i)) << (8 * LMC_POS(k, i)))
#define LMC_E(k) (LMC_E1(k, 0) | LMC_E1(k, 1) | LMC_E1(k, 2) | LMC_E1(k, 3) | LMC_E1(k, 4) | LMC_E1(k, 5) | LMC_E1(k, 6) | LMC_E1(k, 7))
#define LMC_E4(k) LMC_E(k), LMC_E(k + 1), LMC_E(k + 2), LMC_E(k + 3)
#define LMC_E16(k) LMC_E4(k), LMC_E4(k + 4), LMC_E4(k + 8), LMC_E4(k + 12)
#define LMC_E64(k) LMC_E16(k), LMC_E16(k + 16), LMC_E16(k + 32), LMC_E16(k + 48)
static const uint64_t compact_ctl[256] = { LMC_E64(0), LMC_E64(64), LMC_E64(128), LMC_E64(192) };

/* Skewed blocks (80-95 % one byte value g: a delta's high byte): the bytes
 * other than g are packed out 4 KiB at a time with pshufb and only they go
 * through the count tables; g's count is what remains. */
__attribute__((target("avx2,popcnt"))) static void histogram_skewed(uint32_t hist[256], const uint8_t* src, size_t m, uint8_t g)
{
    uint8_t buf[4096 + 16];
    uint32_t c[256];
    size_t others = 0;
    memset(hist, 0, 256 * sizeof(*hist));
    __m128i const k = _mm_set1_epi8((char)g), eight = _mm_set1_epi8(8);
    size_t i = 0;
    while (i + 16 <= m) {
        size_t const stop = LMC_MIN(m & ~(size_t)15, i + 4096);
        uint8_t* o = buf;
        for (; i < stop; i += 16) {
            __m128i const v = _mm_loadu_si128((const __m128i*)(src + i));
            unsigned const nm = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, k)) & 0xFFFF;
            unsigned const a = nm & 0xFF, b = nm >> 8;
            __m128i const ca = _mm_loadl_epi64((const __m128i*)&compact_ctl[a]);
            __m128i const cb = _mm_add_epi8(_mm_loadl_epi64((const __m128i*)&compact_ctl[b]), eight);
            _mm_storel_epi64((__m128i*)o, _mm_shuffle_epi8(v, ca));
            o += __builtin_popcount(a);
            _mm_storel_epi64((__m128i*)o, _mm_shuffle_epi8(v, cb));
            o += __builtin_popcount(b);
        }
        size_t const n = (size_t)(o - buf);
        histogram_plain(c, buf, n);
        for (int s = 0; s < 256; s++) hist[s] += c[s];
        others += n;
    }
    for (; i < m; i++) if (src[i] != g) { hist[src[i]]++; others++; }
    hist[g] += (uint32_t)(m - others);
}

/* The most frequent of three probes in the first 256 bytes, if it covers
 * at least 3/4 of them; else -1. */
static int skew_guess(const uint8_t* src, size_t m)
{
    if (m < 4096) return -1;
    uint8_t const probe[3] = { src[0], src[m / 2], src[m - 1] };
    int best = -1;
    unsigned best_n = 0;
    for (int j = 0; j < 3; j++) {
        unsigned n = 0;
        for (int i = 0; i < 256; i++) n += src[i] == probe[j];
        if (n > best_n) { best_n = n; best = probe[j]; }
    }
    return best_n >= 192 ? best : -1;
}
#endif

#if LMC_HAS_AVX512_DISPATCH
enum { NCAND = 12 };

/* The NCAND most frequent byte values of a sample histogram h (n bytes), as
 * long as they hold at least 95 % of it; made up to NCAND distinct values
 * with absent ones. Returns 0 when the sample is too flat. */
static int pick_candidates(uint8_t cand[NCAND], const uint32_t h[256], uint32_t n)
{
    uint32_t cnt[NCAND];
    unsigned k = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const c = h[s];
        if (!c || (k == NCAND && c <= cnt[NCAND - 1])) continue;
        unsigned j = k < NCAND ? k++ : NCAND - 1;   /* insertion, largest first */
        for (; j > 0 && cnt[j - 1] < c; j--) { cnt[j] = cnt[j - 1]; cand[j] = cand[j - 1]; }
        cnt[j] = c;
        cand[j] = (uint8_t)s;
    }
    uint64_t covered = 0;
    for (unsigned j = 0; j < k; j++) covered += cnt[j];
    for (unsigned s = 0; k < NCAND; s++)   /* fewer than NCAND present: absent ones */
        if (!h[s]) cand[k++] = (uint8_t)s;
    return covered * 20 >= (uint64_t)n * 19;
}

/* Adds the bytes src[0, m) to hist, counting the NCAND distinct values cand
 * (which hold most of them: an exponent stream) by a byte compare per 64
 * bytes and a popcount of its mask, off the count tables; only the other
 * bytes are counted one at a time. The count tables' increments wait on
 * each other when a few values repeat (1.5-2 cycles a byte here); this
 * needs about 0.2. Exact for any cand: the result does not depend on it. */
LMC_TARGET_AVX512 static void count_candidates(uint32_t hist[256], const uint8_t* src, size_t m, const uint8_t cand[NCAND])
{
    __m512i cv[NCAND];
    uint64_t n[NCAND];
    for (unsigned j = 0; j < NCAND; j++) { cv[j] = _mm512_set1_epi8((char)cand[j]); n[j] = 0; }
    size_t i = 0;
    for (; i + 64 <= m; i += 64) {
        __m512i const v = _mm512_loadu_si512((const void*)(src + i));
        uint64_t any = 0;
#pragma GCC unroll 12
        for (unsigned j = 0; j < NCAND; j++) {
            uint64_t const k = _mm512_cmpeq_epi8_mask(v, cv[j]);
            n[j] += (uint64_t)_mm_popcnt_u64(k);
            any |= k;
        }
        for (uint64_t rest = ~any; rest; rest &= rest - 1) hist[src[i + (size_t)__builtin_ctzll(rest)]]++;
    }
    for (; i < m; i++) hist[src[i]]++;
    for (unsigned j = 0; j < NCAND; j++) hist[cand[j]] += (uint32_t)n[j];
}
#endif

void lmc_histogram(uint32_t hist[256], const uint8_t* src, size_t m)
{
#if LMC_HAS_AVX512_DISPATCH
    if (m >= 4096 && lmc_cpu_has_avx512()) {
        /* the first KiB picks the candidates, and is counted */
        uint32_t c[4][256];
        uint8_t cand[NCAND];
        memset(c, 0, sizeof(c));
        count4(c, src, 1024);
        fold4(hist, c);
        if (pick_candidates(cand, hist, 1024)) { count_candidates(hist, src + 1024, m - 1024, cand); return; }
    }
#endif
#if LMC_HAS_BMI2_DISPATCH && defined(__SSE2__)
    if (lmc_cpu_features() & LMC_CPU_AVX2) {
        int const g = skew_guess(src, m);
        if (g >= 0) { histogram_skewed(hist, src, m, (uint8_t)g); return; }
    }
#endif
    histogram_plain(hist, src, m);
}

/* A block whose sample (8 windows of 1024 bytes) has more than RAW_BITS bits
 * of order-0 entropy a byte is stored raw without being counted or coded.
 * A sample underestimates entropy (by ~0.02 bit here), never over, so such
 * a block has at least ~7.94 bits a byte: no Huffman code beats 8 bits on
 * it, and rANS would save at most 0.8 % of the block, less its table (a few
 * hundred bytes). Raised from 7.95: the low bytes of bf16 and fp32 weights
 * sample at 7.937-7.955, and each was counted and coded only to be stored
 * raw (output identical on the bench checkpoints; keyframe compression,
 * `lmc -b -T1`, medians of 6 alternated runs: bf16 727 -> 841 MB/s, fp32
 * 942 -> 1128). */
#define RAW_BITS 7.92f
#define RAW_SKEW_DIV 20     /* one byte value in 1/20 of the sample: not raw */

int lmc_block_looks_raw(const uint8_t* src, size_t m)
{
    if (m < 16384) return 0;
    uint32_t h[256];
    memset(h, 0, sizeof(h));
    /* 8 contiguous windows: a strided sample can alias with the tensor's shape */
    size_t n = 0;
    size_t const step = m / 8;
    for (size_t w = 0; w < 8; w++) {
        for (size_t i = w * step; i < w * step + 1024; i++, n++) h[src[i]]++;
        /* A byte value holding 5 % of the sample caps its entropy below 7.89
         * bits (the rest spread evenly over 255 values), short of the
         * threshold even with fast_log2's error: skewed blocks (a delta's
         * high byte) are settled on the first window. */
        if (w == 0) {
            uint32_t mx = 0;
            for (int s = 0; s < 256; s++) mx = h[s] > mx ? h[s] : mx;
            if (mx >= 8 * 1024 / RAW_SKEW_DIV) return 0;
        }
    }
    float bits = 0;
    for (int s = 0; s < 256; s++)
        if (h[s]) bits += (float)h[s] * lmc_fast_log2((float)n / (float)h[s]);
    return bits > RAW_BITS * (float)n;
}

/* How many of the first m bytes equal src[0]; stops at the first 16 bytes
 * with another value, so that a block that is not constant costs a compare. */
static size_t leading_run(const uint8_t* src, size_t m)
{
    size_t i = 0;
#if defined(__SSE2__)
    __m128i const k = _mm_set1_epi8((char)src[0]);
    for (; i + 16 <= m; i += 16) {
        unsigned const ne = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(src + i)), k)) & 0xFFFF;
        if (ne) return i + (unsigned)__builtin_ctz(ne);
    }
#endif
    while (i < m && src[i] == src[0]) i++;
    return i;
}

/* The sample of lmc_block_looks_raw is counted as part of the block's
 * histogram, so a block that is coded reads its bytes once, not its sample
 * twice: its 8 windows first, for the decision (the same counts, the same
 * float sums in the same order, so the same answer), then the gaps between
 * them. A block that starts with a run of one byte value (all of a
 * constant block, the zero high bytes of small deltas) is counted by a
 * compare per 16 bytes; a run of 1024 fills the first window, which settles
 * "not raw" (see the 5 % rule there). */
int lmc_block_scan(uint32_t hist[256], const uint8_t* src, size_t m)
{
    size_t const run = leading_run(src, m);
    if (run == m) {
        memset(hist, 0, 256 * sizeof(*hist));
        hist[src[0]] = (uint32_t)m;
        return 0;
    }
    if (run >= 1024) {
        lmc_histogram(hist, src + run, m - run);
        hist[src[0]] += (uint32_t)run;
        return 0;
    }
    if (m < 16384) { lmc_histogram(hist, src, m); return 0; }
    enum { WIN = 1024 };
    uint32_t c[4][256], h[256];
    memset(c, 0, sizeof(c));
    size_t const step = m / 8;
    count4(c, src, WIN);
    fold4(h, c);
    uint32_t mx = 0;
    for (int s = 0; s < 256; s++) mx = h[s] > mx ? h[s] : mx;
    if (mx >= 8 * WIN / RAW_SKEW_DIV) {
        /* skewed: the rest through lmc_histogram, which has a path for that */
        lmc_histogram(hist, src + WIN, m - WIN);
        for (int s = 0; s < 256; s++) hist[s] += h[s];
        return 0;
    }
    for (size_t w = 1; w < 8; w++) count4(c, src + w * step, WIN);
    fold4(h, c);
    size_t const n = 8 * WIN;
    float bits = 0;
    for (int s = 0; s < 256; s++)
        if (h[s]) bits += (float)h[s] * lmc_fast_log2((float)n / (float)h[s]);
    if (bits > RAW_BITS * (float)n) return 1;
#if LMC_HAS_AVX512_DISPATCH
    uint8_t cand[NCAND];
    if (lmc_cpu_has_avx512() && pick_candidates(cand, h, (uint32_t)n)) {
        memcpy(hist, h, sizeof(h));
        for (size_t w = 0; w < 8; w++) {
            size_t const a = w * step + WIN, b = w == 7 ? m : (w + 1) * step;
            count_candidates(hist, src + a, b - a, cand);
        }
        return 0;
    }
#endif
    for (size_t w = 0; w < 8; w++) {
        size_t const a = w * step + WIN, b = w == 7 ? m : (w + 1) * step;
        count4(c, src + a, b - a);
    }
    fold4(hist, c);
    return 0;
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
    /* 5 codes of <= 11 bits plus < 8 pending bits fit the 64-bit buffer */
    for (; i + 5 <= m; i += 5) {
        bw_put(&w, code[src[i]], len[src[i]]);
        bw_put(&w, code[src[i + 1]], len[src[i + 1]]);
        bw_put(&w, code[src[i + 2]], len[src[i + 2]]);
        bw_put(&w, code[src[i + 3]], len[src[i + 3]]);
        bw_put(&w, code[src[i + 4]], len[src[i + 4]]);
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

#if LMC_HAS_AVX2_DISPATCH
/* lmc_count_runs, 32 bytes a step: a run starts where a byte is b and the one
 * before it is not; the masks' bits give both, and popcnt counts them. */
__attribute__((target("avx2,popcnt"))) static size_t count_runs_avx2(const uint8_t* src, size_t m, uint8_t b)
{
    __m256i const k = _mm256_set1_epi8((char)b);
    size_t runs = 0, i = 0;
    uint32_t before = 0;   /* bit 0: the byte before this step is b */
    for (; i + 32 <= m; i += 32) {
        uint32_t const cur = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i*)(const void*)(src + i)), k));
        runs += (size_t)__builtin_popcount(cur & ~(cur << 1 | before));
        before = cur >> 31;
    }
    for (; i < m; i++) runs += (src[i] == b) & !(i ? src[i - 1] == b : 0);
    return runs;
}
#endif

size_t lmc_count_runs(const uint8_t* src, size_t m, uint8_t b)
{
#if LMC_HAS_AVX2_DISPATCH
    if (lmc_cpu_has_avx2()) return count_runs_avx2(src, m, b);
#endif
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

/* A run of len >= 1: symbol and extra bits without a branch on the length,
 * which is unpredictable. */
#define RLE_COUNT_RUN(F, len)                                                           \
    do {                                                                                \
        unsigned const lm1_ = (unsigned)(len) - 1;                                      \
        unsigned const c_ = 31u - (unsigned)__builtin_clz((lm1_ / LMC_RUN_EXACT) | 1u); \
        unsigned const big_ = lm1_ >= LMC_RUN_EXACT;                                    \
        (F)[big_ ? LMC_RUN_EXACT + c_ : lm1_]++;                                        \
        ext += big_ ? 4 + c_ : 0;                                                       \
    } while (0)

/* The frequencies of the RLE tokens and their extra bits, as rle_tokenize
 * gives them, without writing the tokens: literal counts are the
 * histogram's, and only the runs need a pass. The transitions of a 64-bit
 * "is the run byte" mask (a run starts and ends at consecutive ones) are
 * listed in order, 8 per 32-bit half without a branch per transition, and
 * the runs are then read off as differences of neighbours. */

/* Bit j set where p[j] == rb, for the r <= 64 bytes at p. */
LMC_FORCE_INLINE uint64_t eq_mask64(const uint8_t* p, size_t r, uint8_t rb)
{
    uint64_t M = 0;
#if defined(__SSE2__)
    if (r == 64) {
        __m128i const k = _mm_set1_epi8((char)rb);
        for (int j = 0; j < 4; j++)
            M |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(const void*)(p + 16 * j)), k)) << (16 * j);
        return M;
    }
#endif
    for (size_t j = 0; j < r; j++) M |= (uint64_t)(p[j] == rb) << j;
    return M;
}

LMC_FORCE_INLINE void rle_count_body(lmc_block_ws* ws, const uint8_t* src, size_t m, uint8_t rb,
                                     const uint32_t hist[256], uint64_t* extra_bits)
{
    enum { BATCH = 4096 };
    uint32_t pos[BATCH + 64 + 16];
    uint32_t runf[2][LMC_RUN_CODES];   /* two tables: equal neighbours do not chain */
    memset(runf, 0, sizeof(runf));
    uint64_t ext = 0, carry = 0;
    size_t np = 0;
    for (size_t i = 0; i < m; i += 64) {
        uint64_t const M = eq_mask64(src + i, LMC_MIN((size_t)64, m - i), rb);
        uint64_t T = M ^ ((M << 1) | carry);
        carry = M >> 63;
        /* two halves, two independent bit-clearing chains */
        uint64_t lo = T & 0xFFFFFFFFu, hi = T >> 32;
        unsigned const nl = (unsigned)__builtin_popcountll(lo), n = nl + (unsigned)__builtin_popcountll(hi);
        uint32_t* const o = pos + np;
        uint32_t* const oh = o + nl;
        uint32_t const il = (uint32_t)i, ih = (uint32_t)i + 32;
        /* bit 32 keeps ctz defined once a half runs out: those entries lie
         * past the half's count, and the high half's, written after, and
         * the next word's overwrite them */
        for (int j = 0; j < 8; j++) { o[j] = il + (uint32_t)__builtin_ctzll(lo | ((uint64_t)1 << 32)); lo &= lo - 1; }
        if (LMC_UNLIKELY(nl > 8)) for (unsigned j = 8; lo; j++) { o[j] = il + (uint32_t)__builtin_ctzll(lo); lo &= lo - 1; }
        for (int j = 0; j < 8; j++) { oh[j] = ih + (uint32_t)__builtin_ctzll(hi | ((uint64_t)1 << 32)); hi &= hi - 1; }
        if (LMC_UNLIKELY(n - nl > 8)) for (unsigned j = 8; hi; j++) { oh[j] = ih + (uint32_t)__builtin_ctzll(hi); hi &= hi - 1; }
        np += n;
        if (np >= BATCH || i + 64 >= m) {
            size_t j = 0;
            for (; j + 4 <= np; j += 4) {
                RLE_COUNT_RUN(runf[0], pos[j + 1] - pos[j]);
                RLE_COUNT_RUN(runf[1], pos[j + 3] - pos[j + 2]);
            }
            if (j + 2 <= np) { RLE_COUNT_RUN(runf[0], pos[j + 1] - pos[j]); j += 2; }
            /* an open run carries over */
            if (j < np) pos[0] = pos[j];
            np -= j;
        }
    }
    if (np) RLE_COUNT_RUN(runf[0], m - pos[0]);   /* a run to the block's end */
    uint32_t* const freq = ws->freq;
    memcpy(freq, hist, 256 * sizeof(*freq));
    freq[rb] = 0;
    for (int k = 0; k < LMC_RUN_CODES; k++) freq[LMC_ALPHA_LIT + k] = runf[0][k] + runf[1][k];
    *extra_bits = ext;
}

static void rle_count_plain(lmc_block_ws* ws, const uint8_t* src, size_t m, uint8_t rb,
                            const uint32_t hist[256], uint64_t* extra_bits)
{ rle_count_body(ws, src, m, rb, hist, extra_bits); }
#if LMC_HAS_BMI2_DISPATCH
/* BMI2 machines have POPCNT (and LZCNT, TZCNT) */
__attribute__((target("bmi2,popcnt"))) static void rle_count_bmi2(lmc_block_ws* ws, const uint8_t* src, size_t m, uint8_t rb,
                                                                  const uint32_t hist[256], uint64_t* extra_bits)
{ rle_count_body(ws, src, m, rb, hist, extra_bits); }
#endif
static void rle_count(lmc_block_ws* ws, const uint8_t* src, size_t m, uint8_t rb,
                      const uint32_t hist[256], uint64_t* extra_bits)
{
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) { rle_count_bmi2(ws, src, m, rb, hist, extra_bits); return; }
#endif
    rle_count_plain(ws, src, m, rb, hist, extra_bits);
}

/* How many runs of the byte rb are at least L long, for L = 1..17, into
 * ge[0..16], without a branch per run: ge[L-1] counts the run bytes at
 * offset L-1 from their run's start. Within a 64-byte word, B_1 marks the
 * runs that start there and B_(L+1) = (B_L << 1) & M the bytes that carry
 * them on; a run that comes in from the previous word, already `open`
 * bytes long, covers offsets open .. open+t-1 here (t its bytes in this
 * word), which go into a difference array instead. */
#define RL_STEP2(La, Lb)                                                   \
    do {                                                                   \
        cnt[La] += (uint64_t)__builtin_popcountll(A); A = (A << 2) & M2;   \
        cnt[Lb] += (uint64_t)__builtin_popcountll(B); B = (B << 2) & M2;   \
    } while (0)
LMC_FORCE_INLINE void run_lengths16_body(const uint8_t* src, size_t m, uint8_t rb, uint32_t ge[17])
{
    uint64_t cnt[17] = { 0 };
    int32_t diff[19] = { 0 };
    size_t open = 0;
    for (size_t i = 0; i < m; i += 64) {
        uint64_t const M = eq_mask64(src + i, LMC_MIN((size_t)64, m - i), rb);
        if (open) {
            size_t const t = ~M ? (size_t)__builtin_ctzll(~M) : 64;
            size_t const hi = LMC_MIN(open + t, (size_t)17);
            if (open < hi) { diff[open]++; diff[hi]--; }   /* offsets open .. hi-1 */
        }
        /* two chains, odd and even offsets, each stepping by 2 */
        uint64_t const M2 = M & (M << 1);
        uint64_t A = M & ~((M << 1) | (open != 0));
        uint64_t B = (A << 1) & M;
        RL_STEP2(0, 1); RL_STEP2(2, 3); RL_STEP2(4, 5); RL_STEP2(6, 7);
        RL_STEP2(8, 9); RL_STEP2(10, 11); RL_STEP2(12, 13); RL_STEP2(14, 15);
        cnt[16] += (uint64_t)__builtin_popcountll(A);
        /* rb bytes at the word's end: the run still open */
        open = ~M ? (size_t)__builtin_clzll(~M) : open + 64;
    }
    int32_t run = 0;
    for (int L = 0; L < 17; L++) { run += diff[L]; ge[L] = (uint32_t)cnt[L] + (uint32_t)run; }
}
#undef RL_STEP2

static void run_lengths16_plain(const uint8_t* src, size_t m, uint8_t rb, uint32_t ge[17])
{ run_lengths16_body(src, m, rb, ge); }
#if LMC_HAS_BMI2_DISPATCH
__attribute__((target("bmi2,popcnt"))) static void run_lengths16_bmi2(const uint8_t* src, size_t m, uint8_t rb, uint32_t ge[17])
{ run_lengths16_body(src, m, rb, ge); }
#endif

/* A lower bound on the bytes of the RLE_HUF block. The token counts are
 * known but for how the runs longer than 16 spread over the 12 length
 * classes: merging those into one symbol can only lower the order-0
 * entropy, no prefix code beats the entropy, and each such run carries at
 * least 4 extra bits. */
static size_t rle_lower_bound(const uint32_t hist[256], unsigned top, size_t m, const uint8_t* src)
{
    uint32_t ge[17];
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) run_lengths16_bmi2(src, m, (uint8_t)top, ge);
    else
#endif
    run_lengths16_plain(src, m, (uint8_t)top, ge);
    double const tokens = (double)(m - hist[top]) + (double)ge[0];
    double bits = 0;
    for (unsigned s = 0; s < 256; s++)
        if (s != top && hist[s]) bits += hist[s] * lmc_fast_log2((float)(tokens / hist[s]));
    for (int L = 0; L < 17; L++) {
        double const c = L < 16 ? (double)(ge[L] - ge[L + 1]) : (double)ge[16];
        if (c > 0) bits += c * lmc_fast_log2((float)(tokens / c));
    }
    bits += 4.0 * ge[16] - 0.01 * tokens;   /* fast_log2 is within 0.005 of log2 */
    /* coder byte, size, the table's symbol count, run byte, token count */
    return 1 + 3 + 2 + 1 + 3 + (bits > 0 ? (size_t)(bits / 8) : 0);
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

LMC_FORCE_INLINE size_t ans_block(uint8_t* dst, size_t sz)
{
    dst[0] = LMC_CODER_ANS;
    lmc_wr24(dst + 1, (uint32_t)sz);
    return 4 + sz;
}

/* A lower bound on the bytes of the HUF block. Every code is at least a
 * bit long; where the top byte covers half the block or more, the cheapest
 * prefix code gives it exactly one bit (the other lengths then share half
 * the code space), so the rest cost their own entropy plus a bit each. */
static size_t huf_lower_bound(const uint32_t hist[256], unsigned top, size_t m)
{
    double bits = (double)m;
    size_t const rest = m - hist[top];
    if (2 * (size_t)hist[top] >= m && rest) {
        double e = 0;
        for (unsigned s = 0; s < 256; s++)
            if (s != top && hist[s]) e += hist[s] * lmc_fast_log2((float)((double)rest / hist[s]));
        e -= 0.01 * (double)rest;   /* fast_log2 is within 0.005 of log2 */
        if (e > 0) bits += e;
    }
    /* coder byte, size, the table's symbol count, 3 stream sizes, 4 streams */
    return 1 + 3 + 2 + 6 + (size_t)(bits / 8);
}

/* Exact RLE_HUF block size from the token frequencies in ws->freq (lengths
 * left in ws->len_rle). */
static size_t rle_size(lmc_block_ws* ws, uint64_t ext)
{
    lmc_huf_lengths(ws, ws->len_rle, ws->freq, LMC_ALPHA_RLE, LMC_HUF_MAXBITS);
    uint64_t const bits = cost_bits(ws->freq, ws->len_rle, LMC_ALPHA_RLE) + ext;
    return 1 + 3 + table_size(ws->len_rle, LMC_ALPHA_RLE) + 1 + 3 + (size_t)((bits + 7) >> 3);
}

/* ANS1 in place of a block of `limit` bytes, when its estimate (est) beats
 * that by 5 % (it decodes slower than Huffman) and it codes within it; 0
 * otherwise, dst untouched. */
static size_t try_ans1(lmc_block_ws* ws, uint8_t* dst, const uint8_t* src, size_t m, size_t est, size_t limit)
{
    if (est == SIZE_MAX || (double)est >= 0.95 * (double)limit) return 0;
    size_t const sz = lmc_ans1_encode(&ws->ans1, dst + 4, limit - 5, src, m);
    if (!sz) return 0;
    dst[0] = LMC_CODER_ANS1;
    lmc_wr24(dst + 1, (uint32_t)sz);
    return 4 + sz;
}

size_t lmc_block_encode(lmc_block_ws* ws, uint8_t* dst, const uint8_t* src, size_t m,
                        const uint32_t hist[256], unsigned coders, unsigned row)
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
    int const use_ans = (coders & (1u << LMC_CODER_ANS)) && nsymbols > 1 && (uint64_t)hist[top] * 8 > m;
    int const rle_cand = (coders & (1u << LMC_CODER_RLE_HUF)) && (uint64_t)hist[top] * 4 > m;
    size_t ans_est = 0, ans_sz = 0, rle_sz = (size_t)-1;
    int ans_done = 0;
    /* ANS1 (order 1) on streams of few distinct bytes, where a byte predicts
     * others (the exponents of Adam's second moment, by row and column): its
     * estimate, and it replaces whatever the order-0 choice below would
     * return when it beats that by 5 % (try_ans1). Its sample needs 8 Ki
     * symbols past the context distance. */
    size_t ans1_est = SIZE_MAX;
    if ((coders & (1u << LMC_CODER_ANS1)) && nsymbols > 1 && nsymbols < LMC_ANS1_MAX_CTX && m > 8192 + LMC_ANS1_DIST) {
        /* the byte 32 back (LMC_ANS1_DIST), or the one a row up (where rows have a scale per column) */
        unsigned const dists[2] = { LMC_ANS1_DIST, row };
        unsigned const nd = row > LMC_ANS1_DIST && row <= 65535 && (size_t)row * 4 <= m ? 2 : 1;
        size_t const e = lmc_ans1_prepare(&ws->ans1, src, m, hist, dists, nd);
        if (e != SIZE_MAX) ans1_est = 4 + e;
    }

    /* The choice is: the smallest of RAW, HUF and RLE_HUF (sizes exact;
     * RLE_HUF only where an estimate says it may pay), then ANS instead if its
     * estimate beats that by 3 % and it codes within it. Where ANS wins, it
     * wins by far (on a delta's high byte, by 15-20 %): then lower bounds of
     * HUF (a bit per symbol) and RLE_HUF already show the outcome, and
     * neither Huffman code is built nor the runs tokenised. The output is
     * the same byte for byte. */
    if (use_ans) {
        ans_est = 4 + lmc_ans_prepare(&ws->ans, hist, m);
        size_t lb = 1 + m;
        if (coders & (1u << LMC_CODER_HUF)) lb = LMC_MIN(lb, huf_lower_bound(hist, top, m));
        if ((double)ans_est < 0.97 * (double)lb && rle_cand) lb = LMC_MIN(lb, rle_lower_bound(hist, top, m, src));
        if ((double)ans_est < 0.97 * (double)lb) {
            /* ANS1 far ahead of ANS's estimate: no need to code ANS first */
            if (ans1_est != SIZE_MAX && (double)ans1_est < 0.95 * (double)ans_est) {
                size_t const a1 = try_ans1(ws, dst, src, m, ans1_est, LMC_MIN(lb, ans_est));
                if (a1) return a1;
            }
            ans_sz = lmc_ans_encode(&ws->ans, dst + 4, m - 4, src, m);
            ans_done = 1;
            if (ans_sz && ans_sz + 5 <= lb) {
                size_t const a1 = try_ans1(ws, dst, src, m, ans1_est, 4 + ans_sz);
                return a1 ? a1 : ans_block(dst, ans_sz);
            }
        }
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
    /* RLE_HUF is only sized when an entropy estimate of its tokens (literals,
     * plus runs with a geometric length model) beats the exact Huffman cost
     * by 4 %. */
    int try_rle = 0;
    if (rle_cand) {
        size_t const runs = lmc_count_runs(src, m, (uint8_t)top);
        double const est = rle_estimate_bits(hist, top, m, runs);
        double const huf_bits = huf_size == (size_t)-1 ? 8.0 * m : 8.0 * (double)huf_size;
        try_rle = est < 0.96 * huf_bits;
    }
    if (try_rle) {
        if (rle_sz == (size_t)-1) {
            uint64_t ext;
            rle_count(ws, src, m, (uint8_t)top, hist, &ext);
            rle_sz = rle_size(ws, ext);
        }
        if (rle_sz < best) { best = rle_sz; mode = LMC_CODER_RLE_HUF; }
    }

    /* rANS: fractional bits. It codes and decodes at about half Huffman's
     * speed, so it is only used where it saves over 3 %: skewed bytes (a
     * delta's high byte), not the flat mantissa bytes where Huffman is within
     * a percent or two of the entropy. */
    if (use_ans && (double)ans_est < 0.97 * (double)best) {
        /* already coded above with a looser limit: the payload is the same,
         * only whether it fits differs */
        if (!ans_done) ans_sz = lmc_ans_encode(&ws->ans, dst + 4, best - 5, src, m);
        if (ans_sz && ans_sz + 5 <= best) {
            size_t const a1 = try_ans1(ws, dst, src, m, ans1_est, 4 + ans_sz);
            return a1 ? a1 : ans_block(dst, ans_sz);
        }
    }
    {
        size_t const a1 = try_ans1(ws, dst, src, m, ans1_est, best);
        if (a1) return a1;
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
    /* RLE_HUF: the tokens give the same frequencies as rle_count, so the
     * lengths in ws->len_rle stand */
    {
        uint64_t ext;
        size_t const ntok = rle_tokenize(ws, src, m, (uint8_t)top, &ext);
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
