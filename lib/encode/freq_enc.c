/* freq_enc.c - rANS frequency tables (doc/format.md, "ANS"). */
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#include "freq_enc.h"
#include "mem.h"

void lmc_freq_normalise(uint16_t* f, const uint32_t* hist, unsigned alpha, uint64_t total)
{
    uint32_t sum = 0;
    unsigned top = 0;
    for (unsigned s = 0; s < alpha; s++) {
        if (!hist[s]) { f[s] = 0; continue; }
        uint64_t const v = ((uint64_t)hist[s] * LMC_ANS_M + total / 2) / total;
        f[s] = (uint16_t)(v ? v : 1);
        sum += f[s];
        if (hist[s] > hist[top]) top = s;
    }
    /* rounding leaves the sum a little off: settle the difference on the
     * largest frequencies, where it costs the least */
    if (sum < LMC_ANS_M) { f[top] = (uint16_t)(f[top] + (LMC_ANS_M - sum)); sum = LMC_ANS_M; }
    while (sum > LMC_ANS_M) {
        unsigned big = top;
        for (unsigned s = 0; s < alpha; s++) if (f[s] > f[big]) big = s;
        uint32_t const take = LMC_MIN(sum - LMC_ANS_M, (uint32_t)f[big] - 1);
        if (take == 0) break;   /* cannot happen: at most 256 symbols of 1 */
        f[big] = (uint16_t)(f[big] - take);
        sum -= take;
    }
}

static unsigned used_symbols(const uint16_t* f, unsigned alpha)
{
    while (alpha > 0 && f[alpha - 1] == 0) alpha--;
    return alpha;
}

size_t lmc_freq_size(const uint16_t* f, unsigned alpha)
{
    unsigned const nsym = used_symbols(f, alpha);
    size_t n = 2;
    for (unsigned s = 0; s < nsym;) {
        if (f[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && f[s + z] == 0 && z < 256) z++;
            n += 2; s += z;
            continue;
        }
        n += f[s] < 128 ? 1 : 2;
        s++;
    }
    return n;
}

size_t lmc_freq_write(uint8_t* dst, const uint16_t* f, unsigned alpha)
{
    unsigned const nsym = used_symbols(f, alpha);
    uint8_t* p = dst;
    lmc_wr16(p, (uint16_t)nsym); p += 2;
    for (unsigned s = 0; s < nsym;) {
        if (f[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && f[s + z] == 0 && z < 256) z++;
            *p++ = 0; *p++ = (uint8_t)(z - 1);
            s += z;
            continue;
        }
        if (f[s] < 128) *p++ = (uint8_t)f[s];
        else { *p++ = (uint8_t)(0x80 | (f[s] >> 8)); *p++ = (uint8_t)f[s]; }
        s++;
    }
    return (size_t)(p - dst);
}

void lmc_freq_esyms(lmc_freq_esym* e, const uint16_t* f, unsigned alpha)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < alpha; s++) {
        uint32_t const fs = f[s];
        if (!fs) continue;
        e[s].xmax = ((LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * fs;
        e[s].cmpl = (uint16_t)(LMC_ANS_M - fs);
        if (fs < 2) {
            /* x / 1 == x: a reciprocal of ~0 with shift 0 gives q = x - 1, fixed by the bias */
            e[s].rcp = ~0u; e[s].shift = 0; e[s].bias = cum + LMC_ANS_M - 1;
        } else {
            unsigned shift = 0;
            while (fs > (1u << shift)) shift++;
            e[s].rcp = (uint32_t)(((1ull << (shift + 31)) + fs - 1) / fs);
            e[s].shift = (uint8_t)(shift - 1);
            e[s].bias = cum;
        }
        cum += fs;
    }
}

/* Bits to code a group's symbols with its own table, plus the table: the
 * entropy, then lmc_freq_write's bytes roughly (a frequency >= 128 of 4096,
 * two bytes, goes to roughly the symbols above 1/32; a run of zeros before a
 * present symbol, two). Merging calls this about four times per context
 * present, so with SSE2 it runs 4 symbols a step without branches (c log2 c
 * is 0 for c = 0: the log is finite there). The lanes' sums are added at
 * the end, so a build without SSE2 may round differently and, rarely, merge
 * differently: both outputs are valid, and each build's output is the same
 * for every thread count. */
LMC_FORCE_INLINE float cost_terms(uint32_t v, uint32_t before, uint32_t big, uint32_t* t)
{
    *t += (v != 0) + 2 * (v != 0 && before == 0) + (v >= big);
    return (float)v * lmc_fast_log2((float)v);
}

static float group_cost(const uint32_t* c, unsigned alpha)
{
    uint32_t n = 0;
    for (unsigned a = 0; a < alpha; a++) n += c[a];
    if (!n) return 0;
    uint32_t const big = (uint32_t)(((uint64_t)n + 31) / 32);   /* v * 32 >= n */
    uint32_t t = 0;
    float s = cost_terms(c[0], 1, big, &t);
    unsigned a = 1;
#if defined(__SSE2__)
    __m128 sv = _mm_setzero_ps();
    __m128i tv = _mm_setzero_si128();
    __m128i const z = _mm_setzero_si128(), bigm1 = _mm_set1_epi32((int)big - 1);
    __m128i const ff = _mm_set1_epi32(0xFF), e128 = _mm_set1_epi32(128);
    __m128i const mant = _mm_set1_epi32(0x007FFFFF), one = _mm_set1_epi32(0x3F800000);
    __m128 const k0 = _mm_set1_ps(LMC_LOG2_K0), k1 = _mm_set1_ps(LMC_LOG2_K1), k2 = _mm_set1_ps(LMC_LOG2_K2);   /* lmc_fast_log2 */
    for (; a + 4 <= alpha; a += 4) {
        __m128i const v = _mm_loadu_si128((const __m128i*)(const void*)(c + a));
        __m128i const pv = _mm_loadu_si128((const __m128i*)(const void*)(c + a - 1));
        __m128i const isz = _mm_cmpeq_epi32(v, z), pz = _mm_cmpeq_epi32(pv, z);
        /* counts < 2^31: signed compares and conversions do */
        __m128i const nzv = _mm_andnot_si128(isz, _mm_set1_epi32(1));
        __m128i const run = _mm_and_si128(_mm_andnot_si128(isz, pz), _mm_set1_epi32(2));
        __m128i const bg = _mm_srli_epi32(_mm_cmpgt_epi32(v, bigm1), 31);
        tv = _mm_add_epi32(tv, _mm_add_epi32(_mm_add_epi32(nzv, run), bg));
        __m128 const f = _mm_cvtepi32_ps(v);
        __m128i const u = _mm_castps_si128(f);
        __m128 const e = _mm_cvtepi32_ps(_mm_sub_epi32(_mm_and_si128(_mm_srli_epi32(u, 23), ff), e128));
        __m128 const m = _mm_castsi128_ps(_mm_or_si128(_mm_and_si128(u, mant), one));
        __m128 const lg = _mm_sub_ps(_mm_add_ps(e, _mm_mul_ps(_mm_add_ps(_mm_mul_ps(k0, m), k1), m)), k2);
        sv = _mm_add_ps(sv, _mm_mul_ps(f, lg));
    }
    float sl[4];
    uint32_t tl[4];
    _mm_storeu_ps(sl, sv);
    _mm_storeu_si128((__m128i*)(void*)tl, tv);
    s += (sl[0] + sl[1]) + (sl[2] + sl[3]);
    t += tl[0] + tl[1] + tl[2] + tl[3];
#endif
    for (; a < alpha; a++) s += cost_terms(c[a], c[a - 1], big, &t);
    size_t const table = 3 + (size_t)t;
    return (float)n * lmc_fast_log2((float)n) - s + 8.0f * (float)table;
}

static float merged_cost(const uint32_t* a, const uint32_t* b, unsigned alpha)
{
    uint32_t t[256];
    for (unsigned s = 0; s < alpha; s++) t[s] = a[s] + b[s];
    return group_cost(t, alpha);
}

/* The groups form a list over the rows: a merge adds the right neighbour's
 * row into its left one and unlinks it, so no row moves until the end.
 * (Shifting the rows down after every merge cost a quarter of the merge's
 * time with 256 contexts, which float16's exponent and top mantissa bits
 * give.) The choice is the same as on a packed array: the cheapest merge,
 * the leftmost of equals. */
unsigned lmc_freq_merge(uint32_t* rows, size_t stride, uint8_t* first, unsigned n, unsigned alpha, unsigned max_groups)
{
    unsigned G = n;
    float cost[256], delta[256];
    uint16_t next[256], prev[256];
#define ROW(g) (rows + (size_t)(g) * stride)
    for (unsigned g = 0; g < n; g++) {
        cost[g] = group_cost(ROW(g), alpha);
        next[g] = (uint16_t)(g + 1);
        prev[g] = (uint16_t)(g - 1);   /* row 0, the head, is never absorbed: its prev is unused */
    }
    for (unsigned g = 0; g + 1 < n; g++) delta[g] = merged_cost(ROW(g), ROW(g + 1), alpha) - cost[g] - cost[g + 1];
    while (G > 1) {
        unsigned best = 0;
        for (unsigned g = next[0]; next[g] < n; g = next[g]) if (delta[g] < delta[best]) best = g;
        if (G <= max_groups && delta[best] >= 0) break;
        unsigned const b = next[best];
        for (unsigned s = 0; s < alpha; s++) ROW(best)[s] += ROW(b)[s];
        cost[best] += cost[b] + delta[best];
        next[best] = next[b];
        if (next[b] < n) prev[next[b]] = (uint16_t)best;
        G--;
        if (best > 0) {
            unsigned const p = prev[best];
            delta[p] = merged_cost(ROW(p), ROW(best), alpha) - cost[p] - cost[best];
        }
        if (next[best] < n) delta[best] = merged_cost(ROW(best), ROW(next[best]), alpha) - cost[best] - cost[next[best]];
    }
    unsigned k = 0;
    for (unsigned g = 0; g < n; g = next[g], k++) {
        if (g == k) continue;
        first[k] = first[g];
        memcpy(ROW(k), ROW(g), alpha * sizeof(uint32_t));
    }
#undef ROW
    return G;
}
