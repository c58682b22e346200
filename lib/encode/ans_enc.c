/* ans_enc.c - order-0 rANS with 4 interleaved 32-bit states and byte-wise
 * renormalisation. Division by the symbol frequency is replaced by a
 * multiplication with a precomputed reciprocal (Alverson's method), so the
 * per-symbol cost is the high half of a multiply, a multiply and an add. */
#include <string.h>
#include "ans_enc.h"
#include "freq_enc.h"
#include "mem.h"
#include "rans_lanes.h"

size_t lmc_ans_prepare(lmc_ans_ws* ws, const uint32_t hist[256], size_t m)
{
    lmc_freq_normalise(ws->freq, hist, 256, m);
    float bits = 0;
    for (unsigned s = 0; s < 256; s++)
        if (hist[s]) bits += (float)hist[s] * (LMC_ANS_PROB_BITS - lmc_fast_log2((float)ws->freq[s]));
    return lmc_freq_size(ws->freq, 256) + 4 * LMC_ANS_STATES + (size_t)(bits / 8) + 2;
}

/* One symbol, coded into state xs. A state emits a word at random, every
 * ~16 bits of information; instead of a branch (mispredicted at each word)
 * the word is stored unconditionally at the write position and the position
 * moves only when it was needed (a compare, a conditional move and a
 * subtract with borrow, written out because compilers emit a branch). The
 * position feeds nothing but stores, so the states' dependency chains stay
 * short: compare, select, multiply, multiply, add. */
#if defined(__GNUC__) && defined(__x86_64__)
#  define ANS_FLUSH(xs, e)                                                                \
    do {                                                                                  \
        uint64_t const hi_ = (xs) >> 16;                                                  \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                 \
        __asm__("cmpq %[x], %[m]\n\tcmovbq %[h], %[x]\n\tsbbq $0, %[k]"                   \
                : [x] "+r"(xs), [k] "+r"(nk) : [m] "m"(e), [h] "r"(hi_) : "cc");          \
    } while (0)
#else
#  define ANS_FLUSH(xs, e)                                                                \
    do {                                                                                  \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                 \
        size_t const f_ = (xs) > (e);                                                     \
        (xs) = f_ ? (xs) >> 16 : (xs);                                                    \
        nk -= f_;                                                                         \
    } while (0)
#endif
#if defined(__SIZEOF_INT128__)
#  define ANS_QUOT(x, s) ((uint64_t)(((unsigned __int128)(x) * S->rcp[s]) >> 64))
#else
/* exact division; f = 1 takes q = x - 1 like its reciprocal, for the bias */
#  define ANS_QUOT(x, s) ((x) / (LMC_ANS_M - S->cmpl[s]) - (S->cmpl[s] == LMC_ANS_M - 1))
#endif
#define ANS_PUT(xs, sym)                                                                  \
    do {                                                                                  \
        unsigned const s_ = (sym);                                                        \
        ANS_FLUSH(xs, S->xmax_m1[s_]);                                                    \
        uint64_t const q_ = ANS_QUOT(xs, s_);                                             \
        (xs) = (xs) + S->bias[s_] + q_ * S->cmpl[s_];                                     \
    } while (0)

#define ANS_FULL ((size_t)1)   /* never a word count: nk is 0 or negative */

/* Codes src[0..i) backwards, i a multiple of 4. Word k (k = 0, 1, ...) is
 * written at wp - 2k; nk is -k. Returns the new nk, or ANS_FULL if the words
 * would come within 16 bytes of lo. */
LMC_FORCE_INLINE size_t ans_rounds(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                                   uint8_t* wp, size_t nk, const uint8_t* lo)
{
    uint64_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    while (i) {
        if (wp + 2 * (ptrdiff_t)nk - lo < 16) return ANS_FULL;
        i -= 4;
        ANS_PUT(x3, src[i + 3]); ANS_PUT(x2, src[i + 2]); ANS_PUT(x1, src[i + 1]); ANS_PUT(x0, src[i]);
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    return nk;
}

static size_t ans_rounds_plain(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                               uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans_rounds(S, src, i, x, wp, nk, lo); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans_rounds_bmi2(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                                              uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans_rounds(S, src, i, x, wp, nk, lo); }
#endif

/* The coder's view of each symbol of a table. */
static void build_esym(lmc_ans_esym* e, const uint16_t* freq)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = freq[s];
        if (!f) continue;
        e->xmax_m1[s] = ((uint64_t)(LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * f - 1;
        e->cmpl[s] = LMC_ANS_M - f;
        if (f < 2) {
            /* x / 1 == x: the reciprocal 1 - 2^-32 gives q = x - 1, fixed by the bias */
            e->rcp[s] = (uint64_t)0xFFFFFFFFu << 32; e->bias[s] = cum + LMC_ANS_M - 1;
        } else {
            /* Alverson: ceil(2^(31+s) / f) with 2^(s-1) < f <= 2^s is exact for
             * x < 2^31; shifted so that the quotient is the high 64 bits */
            unsigned shift = 0;
            while (f > (1u << shift)) shift++;
            uint64_t const r = ((1ull << (shift + 31)) + f - 1) / f;
            e->rcp[s] = r << (33 - shift);
            e->bias[s] = cum;
        }
        cum += f;
    }
}

size_t lmc_ans_encode(lmc_ans_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m)
{
    build_esym(&ws->sym, ws->freq);
    uint8_t* const end = ws->scratch + sizeof(ws->scratch);
    uint8_t* const wp = end - 2;
    size_t nk = 0;
    uint8_t* const lo = ws->scratch + 16;
    const lmc_ans_esym* const S = &ws->sym;
    uint64_t x[LMC_ANS_STATES] = { LMC_ANS_L, LMC_ANS_L, LMC_ANS_L, LMC_ANS_L };
    size_t i = m;
    while (i & 3) {               /* the tail first: coding runs backwards */
        i--;
        uint64_t xs = x[i & 3];
        ANS_PUT(xs, src[i]);
        x[i & 3] = xs;
    }
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) nk = ans_rounds_bmi2(S, src, i, x, wp, nk, lo);
    else
#endif
    nk = ans_rounds_plain(S, src, i, x, wp, nk, lo);
    if (nk == ANS_FULL) return 0;
    uint8_t* const p = wp + 2 + 2 * (ptrdiff_t)nk;
    size_t const body = (size_t)(end - p);
    size_t const tsz = lmc_freq_size(ws->freq, 256);
    size_t const total = tsz + 4 * LMC_ANS_STATES + body;
    if (total > cap) return 0;
    uint8_t* o = dst + lmc_freq_write(dst, ws->freq, 256);
    for (int j = 0; j < LMC_ANS_STATES; j++) { lmc_wr32(o, (uint32_t)x[j]); o += 4; }
    memcpy(o, p, body);
    return total;
}

/* ---- ANS1: order-1 rANS ------------------------------------------------ */

/* The tables come from every 4th symbol, and every byte of the block gets at
 * least a count of 1 in every group (a pair missing from the sample may
 * still occur). Against counting every symbol, on the whole Adam moments of
 * bench/data/traj-3m: 0.04 % larger, compression 8 % faster. */
#define ANS1_STEP 4

/* Empirical bits of the counts in rows[0..n) (nsym wide), each row coded
 * with its own table (tables not counted). */
static float rows_bits(const uint32_t* rows, unsigned n, unsigned nsym)
{
    float bits = 0;
    for (unsigned r = 0; r < n; r++) {
        const uint32_t* const c = rows + (size_t)r * nsym;
        uint32_t t = 0;
        float s = 0;
        for (unsigned k = 0; k < nsym; k++) if (c[k]) { t += c[k]; s += (float)c[k] * lmc_fast_log2((float)c[k]); }
        if (t) bits += (float)t * lmc_fast_log2((float)t) - s;
    }
    return bits;
}

/* Counts (context row, symbol) of src[i] for i = start, start + step, ...
 * below m into ws->count (cells rows x nsym, flat): in 4 tables of 16-bit
 * counts taken in turn, so that a run of equal pairs (an exponent stream has
 * many) increments four counters, not one through the store-to-load chain;
 * then summed. A table sees at most 16384 of a 65536-symbol block. */
static void count_lanes(lmc_ans1_ws* ws, const uint8_t* src, size_t dist, size_t m, size_t step, unsigned cells, unsigned nsym)
{
    uint16_t* const l = &ws->lane[0][0];
    size_t const L = LMC_ANS1_MAX_CTX * LMC_ANS1_MAX_CTX;
    uint16_t rowoff[256];   /* the context's first cell: no multiply per symbol */
    for (unsigned c = 0; c < 256; c++) rowoff[c] = (uint16_t)(ws->row[c] * nsym);
    const uint8_t* const sidx = ws->sidx;
    for (int k = 0; k < 4; k++) memset(l + k * L, 0, cells * sizeof(uint16_t));
    size_t i = dist;
    for (; i + 3 * step < m; i += 4 * step) {
        l[rowoff[src[i - dist]] + sidx[src[i]]]++;
        l[L + rowoff[src[i + step - dist]] + sidx[src[i + step]]]++;
        l[2 * L + rowoff[src[i + 2 * step - dist]] + sidx[src[i + 2 * step]]]++;
        l[3 * L + rowoff[src[i + 3 * step - dist]] + sidx[src[i + 3 * step]]]++;
    }
    for (; i < m; i += step) l[rowoff[src[i - dist]] + sidx[src[i]]]++;
    uint32_t* const cnt = &ws->count[0][0];
    for (unsigned j = 0; j < cells; j++) cnt[j] = (uint32_t)l[j] + l[L + j] + l[2 * L + j] + l[3 * L + j];
}

/* The sample's bits for context distance dist, corrected (see below). */
static float sample_bits(lmc_ans1_ws* ws, const uint8_t* src, size_t m, unsigned n, unsigned nsym, size_t dist)
{
    uint32_t* const cnt = &ws->count[0][0];
    count_lanes(ws, src, dist, m, 8, n * nsym, nsym);
    unsigned cells = 0;
    for (unsigned j = 0; j < n * nsym; j++) cells += cnt[j] != 0;
    return rows_bits(cnt, n, nsym) + 0.72f * (float)cells;
}

size_t lmc_ans1_prepare(lmc_ans1_ws* ws, const uint8_t* src, size_t m, const uint32_t hist[256],
                        const unsigned* dists, unsigned ndist)
{
    /* symbols as dense indices, and a row for every context: each byte of
     * the block, and 0 (the context of the first dist symbols), in order */
    unsigned nsym = 0, n = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (hist[c]) {
            if (nsym == LMC_ANS1_MAX_CTX) return SIZE_MAX;
            ws->sidx[c] = (uint8_t)nsym; ws->sym_of[nsym++] = (uint8_t)c;
        }
        if (!hist[c] && c) continue;
        if (n == LMC_ANS1_MAX_CTX) return SIZE_MAX;
        ws->row[c] = (uint8_t)n;
        ws->first[n++] = (uint8_t)c;
    }
    size_t const rowsz = (size_t)nsym * sizeof(uint32_t);
    uint32_t* const cnt = &ws->count[0][0];
#define CNT(r) (cnt + (size_t)(r) * nsym)
    /* a sample first (every 8th symbol), for each distance: the best must
     * save 10 % of the order-0 bits, or the tables would eat most of it. (A
     * sample's entropy is low by about 0.72 bits per count cell in use:
     * Miller and Madow's correction, so that many thin rows do not pass.) */
    size_t dist = 0;
    float best = 0;
    for (unsigned d = 0; d < ndist; d++) {
        if (!dists[d] || m <= (size_t)dists[d] + 8 * 1024) continue;
        float const b = sample_bits(ws, src, m, n, nsym, dists[d]);
        if (!dist || b < best) { dist = dists[d]; best = b; }
    }
    if (!dist) return SIZE_MAX;
    {
        /* four tables in turn: an exponent stream's sample is mostly one
         * symbol, and one counter made each increment wait on the last
         * (a fifth of this function's time) */
        uint32_t o4[4][LMC_ANS1_MAX_CTX] = { { 0 } }, o0[LMC_ANS1_MAX_CTX];
        size_t i = dist;
        for (; i + 24 < m; i += 32) {
            o4[0][ws->sidx[src[i]]]++; o4[1][ws->sidx[src[i + 8]]]++;
            o4[2][ws->sidx[src[i + 16]]]++; o4[3][ws->sidx[src[i + 24]]]++;
        }
        for (; i < m; i += 8) o4[0][ws->sidx[src[i]]]++;
        for (unsigned j = 0; j < nsym; j++) o0[j] = o4[0][j] + o4[1][j] + o4[2][j] + o4[3][j];
        unsigned used = 0;
        for (unsigned j = 0; j < nsym; j++) used += o0[j] != 0;
        if (best > 0.9f * (rows_bits(o0, 1, nsym) + 0.72f * (float)used)) return SIZE_MAX;
    }
    count_lanes(ws, src, dist, m, ANS1_STEP, n * nsym, nsym);
    size_t const head = LMC_MIN(dist, m);
    uint32_t* const row0 = CNT(ws->row[0]);
    for (size_t i = 0; i < head; i += ANS1_STEP) row0[ws->sidx[src[i]]]++;
    /* a byte met only in the last dist places (or not in the counted
     * symbols) is no context seen: drop its row; the map gives it a group */
    unsigned k = 0;
    for (unsigned j = 0; j < n; j++) {
        uint32_t any = 0;
        for (unsigned s = 0; s < nsym; s++) any |= CNT(j)[s];
        if (!any) continue;
        if (k != j) { memmove(CNT(k), CNT(j), rowsz); ws->first[k] = ws->first[j]; }
        k++;
    }
    unsigned const G = lmc_freq_merge(cnt, nsym, ws->first, k, nsym, LMC_ANS1_MAX_GROUPS);
    ws->ngroups = G; ws->dist = dist;
    /* contexts absent from the block never occur: they join whichever group */
    for (unsigned g = 0, c = 0; c < 256; c++) {
        if (g + 1 < G && c == ws->first[g + 1]) g++;
        ws->map[c] = (uint8_t)g;
    }
    size_t size = 2 + 1 + (G - 1) + 2;
    float bits = 0;
    for (unsigned g = 0; g < G; g++) {
        uint64_t tot = 0;
        uint16_t f[LMC_ANS1_MAX_CTX];
        for (unsigned s = 0; s < nsym; s++) if (!CNT(g)[s]) CNT(g)[s] = 1;
        for (unsigned s = 0; s < nsym; s++) tot += CNT(g)[s];
        lmc_freq_normalise(f, CNT(g), nsym, tot);
        memset(ws->freq[g], 0, sizeof(ws->freq[g]));
        for (unsigned s = 0; s < nsym; s++) {
            ws->freq[g][ws->sym_of[s]] = f[s];
            if (CNT(g)[s] && f[s] < LMC_ANS_M)
                bits += (float)(CNT(g)[s] * ANS1_STEP) * (LMC_ANS_PROB_BITS - lmc_fast_log2((float)f[s]));
        }
        size += lmc_freq_size(ws->freq[g], 256);
    }
#undef CNT
    size += (size_t)(bits / 8);
    ws->states = dist >= LMC_ANS1_WIDE_DIST && size >= LMC_ANS1_WIDE_MIN ? LMC_ANS1_STATES_WIDE : LMC_ANS_STATES;
    return size + 4 * ws->states;
}

/* ANS1's rounds: 4 symbols, each with the table of its context's group,
 * through ANS_PUT (branch-free renormalisation); the same word bookkeeping
 * as ans_rounds. Codes src[lo_i..i) backwards (i - lo_i a multiple of 4,
 * lo_i >= dist). */
LMC_FORCE_INLINE size_t ans1_rounds(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i, size_t dist,
                                    uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{
    uint64_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    const uint8_t* const map = ws->map;
    while (i > lo_i) {
        if (wp + 2 * (ptrdiff_t)nk - lo < 16) return ANS_FULL;
        i -= 4;
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + 3 - dist]]]; ANS_PUT(x3, src[i + 3]); }
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + 2 - dist]]]; ANS_PUT(x2, src[i + 2]); }
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + 1 - dist]]]; ANS_PUT(x1, src[i + 1]); }
        { const lmc_ans_esym* const S = &ws->esym[map[src[i - dist]]]; ANS_PUT(x0, src[i]); }
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    return nk;
}

static size_t ans1_rounds_plain(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i, size_t dist,
                                uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans1_rounds(ws, src, i, lo_i, dist, x, wp, nk, lo); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans1_rounds_bmi2(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i,
                                               size_t dist, uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans1_rounds(ws, src, i, lo_i, dist, x, wp, nk, lo); }
#endif

/* 32 states: symbols [lo_i, i) backwards (i - lo_i a multiple of 32,
 * lo_i >= dist), four states at a time in registers, in the order of 32
 * states one symbol at a time. */
LMC_FORCE_INLINE size_t ans1_rounds32(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i, size_t dist,
                                      uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{
    const uint8_t* const map = ws->map;
    uint64_t xs[LMC_ANS1_STATES_WIDE];   /* not aliased by the word stores */
    memcpy(xs, x, sizeof(xs));
#define ANS1_SUB(b)                                                                                          \
    do {                                                                                                     \
        uint64_t x0 = xs[b], x1 = xs[b + 1], x2 = xs[b + 2], x3 = xs[b + 3];                                 \
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + b + 3 - dist]]]; ANS_PUT(x3, src[i + b + 3]); } \
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + b + 2 - dist]]]; ANS_PUT(x2, src[i + b + 2]); } \
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + b + 1 - dist]]]; ANS_PUT(x1, src[i + b + 1]); } \
        { const lmc_ans_esym* const S = &ws->esym[map[src[i + b - dist]]]; ANS_PUT(x0, src[i + b]); }         \
        xs[b] = x0; xs[b + 1] = x1; xs[b + 2] = x2; xs[b + 3] = x3;                                          \
    } while (0)
    while (i > lo_i) {
        if (wp + 2 * (ptrdiff_t)nk - lo < 80) return ANS_FULL;
        i -= LMC_ANS1_STATES_WIDE;
        ANS1_SUB(28); ANS1_SUB(24); ANS1_SUB(20); ANS1_SUB(16); ANS1_SUB(12); ANS1_SUB(8); ANS1_SUB(4); ANS1_SUB(0);
    }
#undef ANS1_SUB
    memcpy(x, xs, sizeof(xs));
    return nk;
}

static size_t ans1_rounds32_plain(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i, size_t dist,
                                  uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans1_rounds32(ws, src, i, lo_i, dist, x, wp, nk, lo); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans1_rounds32_bmi2(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i,
                                                 size_t dist, uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans1_rounds32(ws, src, i, lo_i, dist, x, wp, nk, lo); }
#endif

#if LMC_HAS_AVX512_DISPATCH

/* The fields of symbols [i, i + 32) into f, by scalar loads. */
LMC_FORCE_INLINE void ans1_fields(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t dist, uint32_t* f)
{
    for (unsigned j = 0; j < LMC_ANS1_STATES_WIDE; j++) {
        unsigned k = (unsigned)ws->map[src[i + j - dist]] << 8 | src[i + j];
        LMC_SCALAR_ONLY(k);
        f[j] = ws->efc[k];
    }
}

/* ans1_rounds32 with AVX-512: states 0-15 and 16-31 in two vectors,
 * symbols i+16..i+31 coded first (their words lie above those of i..i+15).
 * Each round's fields are looked up by scalar loads (gathers are slow on the
 * AMD EPYC VMs) a round ahead, into a ring of two rounds, so that the
 * vector loads of a round do not wait on the stores just made (as in
 * refctx_enc.c's rc_rounds32_ring). The same states and words as
 * ans1_rounds32. */
LMC_TARGET_AVX512 static size_t ans1_rounds32_avx512(const lmc_ans1_ws* ws, const uint8_t* src, size_t i, size_t lo_i,
                                                     size_t dist, uint64_t* x, uint8_t* wp, size_t nk, const uint8_t* lo)
{
    uint32_t xs[LMC_ANS1_STATES_WIDE], ring[2][LMC_ANS1_STATES_WIDE] __attribute__((aligned(64)));
    for (unsigned j = 0; j < LMC_ANS1_STATES_WIDE; j++) xs[j] = (uint32_t)x[j];
    __m512i xa = _mm512_loadu_si512((const void*)xs), xb = _mm512_loadu_si512((const void*)(xs + 16));
    unsigned cur = 0;
    if (i > lo_i) ans1_fields(ws, src, i - LMC_ANS1_STATES_WIDE, dist, ring[0]);
    while (i > lo_i) {
        if (wp + 2 * (ptrdiff_t)nk - lo < 80) return ANS_FULL;
        i -= LMC_ANS1_STATES_WIDE;
        if (i > lo_i) ans1_fields(ws, src, i - LMC_ANS1_STATES_WIDE, dist, ring[cur ^ 1]);
        nk = rc_lanes_fc(_mm512_load_si512((const void*)(ring[cur] + 16)), &xb, wp, nk);
        nk = rc_lanes_fc(_mm512_load_si512((const void*)ring[cur]), &xa, wp, nk);
        cur ^= 1;
    }
    _mm512_storeu_si512((void*)xs, xa);
    _mm512_storeu_si512((void*)(xs + 16), xb);
    for (unsigned j = 0; j < LMC_ANS1_STATES_WIDE; j++) x[j] = xs[j];
    return nk;
}
#endif

/* One symbol, slowly: its state (of S, a power of 2), its context (0 before dist). */
#define ANS1_PUT_ONE(i)                                                                   \
    do {                                                                                  \
        const lmc_ans_esym* const S = &ws->esym[ws->map[(i) >= dist ? src[(i) - dist] : 0]]; \
        uint64_t xs = x[(i) & (NS - 1)];                                                  \
        ANS_PUT(xs, src[i]);                                                              \
        x[(i) & (NS - 1)] = xs;                                                           \
    } while (0)

size_t lmc_ans1_encode(lmc_ans1_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m)
{
    unsigned const G = ws->ngroups;
    size_t const dist = ws->dist;
    unsigned const NS = ws->states == LMC_ANS1_STATES_WIDE ? LMC_ANS1_STATES_WIDE : LMC_ANS_STATES;
    if (m > sizeof(ws->scratch) / 2 - 32) return 0;   /* a word per symbol at most: never with blocks of 64 KiB */
    for (unsigned g = 0; g < G; g++) build_esym(&ws->esym[g], ws->freq[g]);
    uint8_t* const end = ws->scratch + sizeof(ws->scratch);
    uint8_t* const wp = end - 2;
    size_t nk = 0;
    uint8_t* const lo = ws->scratch + 16;
    uint64_t x[LMC_ANS1_STATES_MAX];
    for (unsigned j = 0; j < NS; j++) x[j] = LMC_ANS_L;
    /* backwards: symbol i's context src[i - dist] is still to be coded, so
     * the decoder has it when it meets symbol i. The tail, the rounds down
     * to the first multiple of NS at or above dist, then the head. */
    size_t i = m;
    while (i & (NS - 1)) { i--; ANS1_PUT_ONE(i); }
    size_t const lo_i = LMC_MIN(i, (dist + NS - 1) & ~(size_t)(NS - 1));
    if (NS == LMC_ANS_STATES) {
#if LMC_HAS_BMI2_DISPATCH
        if (lmc_cpu_has_bmi2()) nk = ans1_rounds_bmi2(ws, src, i, lo_i, dist, x, wp, nk, lo);
        else
#endif
        nk = ans1_rounds_plain(ws, src, i, lo_i, dist, x, wp, nk, lo);
    } else {
#if LMC_HAS_AVX512_DISPATCH
        if (lmc_cpu_has_avx512()) {
            for (unsigned g = 0; g < G; g++) {
                uint32_t cum = 0;
                for (unsigned s = 0; s < 256; s++) {
                    ws->efc[g << 8 | s] = ws->freq[g][s] | cum << 13;
                    cum += ws->freq[g][s];
                }
            }
            nk = ans1_rounds32_avx512(ws, src, i, lo_i, dist, x, wp, nk, lo);
        } else
#endif
#if LMC_HAS_BMI2_DISPATCH
        if (lmc_cpu_has_bmi2()) nk = ans1_rounds32_bmi2(ws, src, i, lo_i, dist, x, wp, nk, lo);
        else
#endif
        nk = ans1_rounds32_plain(ws, src, i, lo_i, dist, x, wp, nk, lo);
    }
    if (nk == ANS_FULL) return 0;
    for (i = lo_i; i;) { i--; ANS1_PUT_ONE(i); }
    uint8_t* const p = wp + 2 + 2 * (ptrdiff_t)nk;
    size_t const body = (size_t)(end - p);
    size_t total = 2 + 1 + (G - 1) + 4 * (size_t)NS + body;
    for (unsigned g = 0; g < G; g++) total += lmc_freq_size(ws->freq[g], 256);
    if (total > cap) return 0;
    uint8_t* o = dst;
    lmc_wr16(o, (uint16_t)dist); o += 2;
    *o++ = (uint8_t)(G | (NS == LMC_ANS1_STATES_WIDE ? LMC_ANS1_WIDE : 0));
    for (unsigned g = 1; g < G; g++) *o++ = ws->first[g];
    for (unsigned g = 0; g < G; g++) o += lmc_freq_write(o, ws->freq[g], 256);
    for (unsigned j = 0; j < NS; j++) { lmc_wr32(o, (uint32_t)x[j]); o += 4; }
    memcpy(o, p, body);
    return total;
}
