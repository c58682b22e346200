/* refctx_enc.c - REFCTX value blocks (doc/format.md, "Layout 2: reference-modelled").
 *
 * One pass turns each value into a token (sign and bit length of its
 * difference to the reference), its raw low bits and its context (the
 * reference's exponent), counting tokens per context. Neighbouring contexts
 * are then merged greedily while a merge costs fewer bits than the table it
 * saves, so a block carries only as many tables as its data pays for. Tokens
 * are coded backwards with 4 interleaved rANS states; raw bits go forwards
 * into their own stream. */
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#include "refctx_enc.h"
#include "mem.h"

/* The analysis pass writes the raw-bit stream as it goes (LSB-first); whole
 * bytes leave after every value, so at most 7 + 31 bits wait in acc. */
typedef struct { uint64_t acc; unsigned nacc; uint8_t* o; } rawwriter;

LMC_FORCE_INLINE void raw_put(rawwriter* rw, uint64_t bits, unsigned nb)
{
    rw->acc |= (bits & ((1ull << nb) - 1)) << rw->nacc;
    rw->nacc += nb;
    lmc_wr64(rw->o, rw->acc);
    rw->o += rw->nacc >> 3;
    rw->acc >>= rw->nacc & ~7u;
    rw->nacc &= 7;
}

/* One value: token, context, count, raw bits. The raw bits are
 * e = t - base(token): the bits of |t| below its leading one, complemented
 * when t < 0. */
LMC_FORCE_INLINE void analyse_value(lmc_refctx_ws* ws, rawwriter* rw, size_t i, uint64_t c, uint64_t r, unsigned bits)
{
    uint64_t mag;
    int64_t sm;
    unsigned k;
    unsigned const tok = lmc_refctx_diff(c, r, bits, &mag, &sm, &k);
    unsigned const ctx = lmc_refctx_ctx((uint32_t)r, bits);
    ws->tok[i] = (uint8_t)tok;
    ws->ctx[i] = (uint8_t)ctx;
    ws->count[ctx][tok]++;
    ws->seen[ctx] = 1;
    raw_put(rw, mag ^ (uint64_t)sm, k - (k != 0));
}

#if defined(__SSE2__)
/* 16-bit values, 8 at a time: t, |t|, its bit length (from the exponent of
 * |t| converted to float) and the token in SIMD lanes; counting and raw bits
 * stay scalar. */
static void analyse16_sse2(lmc_refctx_ws* ws, rawwriter* rw, const uint8_t* src, const uint8_t* ref, size_t m, size_t* done)
{
    __m128i const lo15 = _mm_set1_epi32(0x7FFF), zero = _mm_setzero_si128();
    __m128i const expo = _mm_set1_epi32(126), one = _mm_set1_epi32(1);
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        __m128i const c16 = _mm_loadu_si128((const __m128i*)(const void*)(src + 2 * i));
        __m128i const r16 = _mm_loadu_si128((const __m128i*)(const void*)(ref + 2 * i));
        uint32_t low[8];
        __m128i tokv[2], nbv2[2];
        for (int h = 0; h < 2; h++) {
            __m128i const c = h ? _mm_unpackhi_epi16(c16, zero) : _mm_unpacklo_epi16(c16, zero);
            __m128i const r = h ? _mm_unpackhi_epi16(r16, zero) : _mm_unpacklo_epi16(r16, zero);
            __m128i const cross = _mm_srai_epi32(_mm_slli_epi32(_mm_xor_si128(c, r), 16), 31);
            __m128i const t = _mm_sub_epi32(_mm_xor_si128(_mm_and_si128(c, lo15), cross), _mm_and_si128(r, lo15));
            __m128i const sm = _mm_srai_epi32(t, 31);
            __m128i const mag = _mm_sub_epi32(_mm_xor_si128(t, sm), sm);
            /* bit length: float exponent - 126 for mag >= 1, 0 for mag = 0 (float 0.0) */
            __m128i k = _mm_sub_epi32(_mm_srli_epi32(_mm_castps_si128(_mm_cvtepi32_ps(mag)), 23), expo);
            k = _mm_and_si128(k, _mm_cmpgt_epi32(mag, zero));
            __m128i const nz = _mm_cmpgt_epi32(k, zero);
            tokv[h] = _mm_and_si128(_mm_add_epi32(_mm_sub_epi32(_mm_add_epi32(k, k), one), _mm_and_si128(sm, one)), nz);
            nbv2[h] = _mm_add_epi32(k, nz);   /* k - 1 where k > 0 (nz is -1 there) */
            _mm_storeu_si128((__m128i*)(void*)(low + 4 * h), _mm_xor_si128(mag, sm));
        }
        uint8_t tk[16], nbv[16];
        _mm_storeu_si128((__m128i*)(void*)tk, _mm_packus_epi16(_mm_packs_epi32(tokv[0], tokv[1]), zero));
        _mm_storeu_si128((__m128i*)(void*)nbv, _mm_packus_epi16(_mm_packs_epi32(nbv2[0], nbv2[1]), zero));
        /* contexts: the high bytes' low 7 bits and the next bit down: (r >> 7) & 255 */
        __m128i const ctx16 = _mm_and_si128(_mm_srli_epi16(r16, 7), _mm_set1_epi16(0xFF));
        __m128i const ctx8 = _mm_packus_epi16(ctx16, zero);
        _mm_storel_epi64((__m128i*)(void*)(ws->ctx + i), ctx8);
        memcpy(ws->tok + i, tk, 8);
        for (int j = 0; j < 8; j++) {
            unsigned const cx = ws->ctx[i + j];
            ws->count[cx][tk[j]]++;
            ws->seen[cx] = 1;
            raw_put(rw, low[j], nbv[j]);
        }
    }
    *done = i;
}

/* 32-bit values, 4 at a time. Where the sign changes, t = -(|c| + |r| + 1)
 * needs 33 bits as a signed number, so lanes keep |t| (32 bits, unsigned)
 * and the sign apart. The bit length comes from the float exponent of |t|'s
 * top bit alone (smeared down, then isolated), which converts exactly. */
static void analyse32_sse2(lmc_refctx_ws* ws, rawwriter* rw, const uint8_t* src, const uint8_t* ref, size_t m, size_t* done)
{
    __m128i const lo31 = _mm_set1_epi32(0x7FFFFFFF), zero = _mm_setzero_si128();
    __m128i const expo = _mm_set1_epi32(126), one = _mm_set1_epi32(1), ff = _mm_set1_epi32(0xFF);
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
        __m128i const c = _mm_loadu_si128((const __m128i*)(const void*)(src + 4 * i));
        __m128i const r = _mm_loadu_si128((const __m128i*)(const void*)(ref + 4 * i));
        __m128i const cross = _mm_srai_epi32(_mm_xor_si128(c, r), 31);
        __m128i const ca = _mm_and_si128(c, lo31), ra = _mm_and_si128(r, lo31);
        __m128i const t = _mm_sub_epi32(ca, ra);                       /* same sign: fits */
        __m128i const ts = _mm_srai_epi32(t, 31);
        __m128i const mag_same = _mm_sub_epi32(_mm_xor_si128(t, ts), ts);
        __m128i const mag_cross = _mm_add_epi32(_mm_add_epi32(ca, ra), one);   /* unsigned */
        __m128i const mag = _mm_or_si128(_mm_and_si128(cross, mag_cross), _mm_andnot_si128(cross, mag_same));
        __m128i const sm = _mm_or_si128(cross, ts);
        __m128i x = _mm_or_si128(mag, _mm_srli_epi32(mag, 1));
        x = _mm_or_si128(x, _mm_srli_epi32(x, 2));
        x = _mm_or_si128(x, _mm_srli_epi32(x, 4));
        x = _mm_or_si128(x, _mm_srli_epi32(x, 8));
        x = _mm_or_si128(x, _mm_srli_epi32(x, 16));
        __m128i const top = _mm_add_epi32(_mm_srli_epi32(x, 1), one);   /* 2^(k-1); 1 for mag = 0 */
        /* 2^31 converts as -2^31: the exponent field is still right */
        __m128i k = _mm_sub_epi32(_mm_and_si128(_mm_srli_epi32(_mm_castps_si128(_mm_cvtepi32_ps(top)), 23), ff), expo);
        __m128i const nz = _mm_xor_si128(_mm_cmpeq_epi32(mag, zero), _mm_set1_epi32(-1));
        k = _mm_and_si128(k, nz);
        __m128i const tok = _mm_and_si128(_mm_add_epi32(_mm_sub_epi32(_mm_add_epi32(k, k), one), _mm_and_si128(sm, one)), nz);
        __m128i const nb = _mm_add_epi32(k, nz);
        __m128i const ctx = _mm_and_si128(_mm_srli_epi32(r, 23), ff);
        uint32_t low[4];
        uint8_t tk[16], nbv[16], cx[16];
        _mm_storeu_si128((__m128i*)(void*)low, _mm_xor_si128(mag, sm));
        _mm_storeu_si128((__m128i*)(void*)tk, _mm_packus_epi16(_mm_packs_epi32(tok, zero), zero));
        _mm_storeu_si128((__m128i*)(void*)nbv, _mm_packus_epi16(_mm_packs_epi32(nb, zero), zero));
        _mm_storeu_si128((__m128i*)(void*)cx, _mm_packus_epi16(_mm_packs_epi32(ctx, zero), zero));
        memcpy(ws->tok + i, tk, 4);
        memcpy(ws->ctx + i, cx, 4);
        for (int j = 0; j < 4; j++) {
            ws->count[cx[j]][tk[j]]++;
            ws->seen[cx[j]] = 1;
            raw_put(rw, low[j], nbv[j]);
        }
    }
    *done = i;
}
#endif

/* Bits to code a group's tokens with its own order-0 table, plus the table
 * and its bound byte. */
static float group_cost(const uint32_t* c, unsigned alpha)
{
    uint32_t n = 0;
    float s = 0;
    size_t table = 2 + 1;
    unsigned zeros = 0;
    for (unsigned a = 0; a < alpha; a++) {
        if (!c[a]) { zeros++; continue; }
        if (zeros) { table += 2; zeros = 0; }
        n += c[a];
        s += (float)c[a] * lmc_fast_log2((float)c[a]);
        table += 1;
    }
    if (!n) return 0;
    /* a frequency >= 128 of 4096 takes two bytes: roughly the symbols above 1/32 */
    for (unsigned a = 0; a < alpha; a++) table += (uint64_t)c[a] * 32 >= n;
    return (float)n * lmc_fast_log2((float)n) - s + 8.0f * (float)table;
}

static float merged_cost(const uint32_t* a, const uint32_t* b, unsigned alpha)
{
    uint32_t t[LMC_REFCTX_ALPHA_MAX];
    for (unsigned s = 0; s < alpha; s++) t[s] = a[s] + b[s];
    return group_cost(t, alpha);
}

static void build_groups(lmc_refctx_ws* ws)
{
    unsigned const alpha = ws->alpha;
    unsigned G = ws->npresent;
    uint8_t first[LMC_REFCTX_CONTEXTS];
    float cost[LMC_REFCTX_CONTEXTS], delta[LMC_REFCTX_CONTEXTS];
    for (unsigned g = 0; g < G; g++) {
        first[g] = ws->present[g];
        memcpy(ws->gcount[g], ws->count[ws->present[g]], alpha * sizeof(uint32_t));
        cost[g] = group_cost(ws->gcount[g], alpha);
    }
    for (unsigned g = 0; g + 1 < G; g++) delta[g] = merged_cost(ws->gcount[g], ws->gcount[g + 1], alpha) - cost[g] - cost[g + 1];
    while (G > 1) {
        unsigned best = 0;
        for (unsigned g = 1; g + 1 < G; g++) if (delta[g] < delta[best]) best = g;
        if (G <= LMC_REFCTX_MAX_GROUPS && delta[best] >= 0) break;
        for (unsigned s = 0; s < alpha; s++) ws->gcount[best][s] += ws->gcount[best + 1][s];
        cost[best] += cost[best + 1] + delta[best];
        for (unsigned g = best + 1; g + 1 < G; g++) {
            first[g] = first[g + 1];
            cost[g] = cost[g + 1];
            delta[g] = delta[g + 1];
            memcpy(ws->gcount[g], ws->gcount[g + 1], alpha * sizeof(uint32_t));
        }
        G--;
        if (best > 0) delta[best - 1] = merged_cost(ws->gcount[best - 1], ws->gcount[best], alpha) - cost[best - 1] - cost[best];
        if (best + 1 < G) delta[best] = merged_cost(ws->gcount[best], ws->gcount[best + 1], alpha) - cost[best] - cost[best + 1];
    }
    /* contexts absent from the block never occur: they join whichever group */
    ws->ngroups = G;
    ws->bound[0] = 0;
    for (unsigned g = 1; g < G; g++) ws->bound[g] = first[g];
    for (unsigned g = 0, c = 0; c < LMC_REFCTX_CONTEXTS; c++) {
        if (g + 1 < G && c == ws->bound[g + 1]) g++;
        ws->map[c] = (uint8_t)g;
    }
    for (unsigned g = 0; g < G; g++) {
        uint64_t n = 0;
        for (unsigned s = 0; s < alpha; s++) n += ws->gcount[g][s];
        lmc_freq_normalise(ws->freq[g], ws->gcount[g], alpha, n);
    }
}

size_t lmc_refctx_prepare(lmc_refctx_ws* ws, const uint8_t* src, const uint8_t* ref, size_t m, unsigned w)
{
    for (unsigned i = 0; i < ws->npresent; i++) memset(ws->count[ws->present[i]], 0, sizeof(ws->count[0]));
    ws->m = m; ws->w = w; ws->alpha = lmc_refctx_alpha(w);
    rawwriter rw = { 0, 0, ws->raw };
    size_t i = 0;
    memset(ws->seen, 0, sizeof(ws->seen));
    if (w == 2) {
#if defined(__SSE2__)
        analyse16_sse2(ws, &rw, src, ref, m, &i);
#endif
        for (; i < m; i++) analyse_value(ws, &rw, i, lmc_rd16(src + 2 * i), lmc_rd16(ref + 2 * i), 16);
    } else {
#if defined(__SSE2__)
        analyse32_sse2(ws, &rw, src, ref, m, &i);
#endif
        for (; i < m; i++) analyse_value(ws, &rw, i, lmc_rd32(src + 4 * i), lmc_rd32(ref + 4 * i), 32);
    }
    if (rw.nacc) *rw.o++ = (uint8_t)rw.acc;
    ws->raw_bits = (uint64_t)(rw.o - ws->raw) * 8;   /* whole bytes: all that the size needs */
    uint64_t const raw = ws->raw_bits;
    unsigned np = 0;
    for (unsigned c = 0; c < LMC_REFCTX_CONTEXTS; c++)
        if (ws->seen[c]) ws->present[np++] = (uint8_t)c;
    ws->npresent = np;
    build_groups(ws);

    size_t size = 1 + 3 + 1 + (ws->ngroups - 1) + 4 * LMC_ANS_STATES + 4 + (size_t)((raw + 7) / 8);
    float bits = 0;
    for (unsigned g = 0; g < ws->ngroups; g++) {
        size += lmc_freq_size(ws->freq[g], ws->alpha);
        for (unsigned s = 0; s < ws->alpha; s++)
            if (ws->gcount[g][s] && ws->freq[g][s] < LMC_ANS_M)   /* log2 is approximate: keep M/M free */
                bits += (float)ws->gcount[g][s] * LMC_MAX(0.0f, LMC_ANS_PROB_BITS - lmc_fast_log2((float)ws->freq[g][s]));
    }
    return size + (size_t)(bits / 8) + 2;
}

size_t lmc_refctx_encode(lmc_refctx_ws* ws, uint8_t* dst, size_t cap)
{
    unsigned const alpha = ws->alpha, G = ws->ngroups;
    size_t const m = ws->m;
    size_t const raw_bytes = (size_t)((ws->raw_bits + 7) / 8);
    for (unsigned g = 0; g < G; g++) lmc_freq_esyms(ws->esym[g], ws->freq[g], alpha);

    size_t head = 1 + 3 + 1 + (G - 1);
    for (unsigned g = 0; g < G; g++) head += lmc_freq_size(ws->freq[g], alpha);
    size_t const raw_at = head + 4 * LMC_ANS_STATES + 4;
    if (raw_at + raw_bytes > cap) return 0;

    /* tokens, backwards; symbol i uses state i mod 4 and the table of its context */
    uint8_t* const wend = ws->words + sizeof(ws->words);
    uint8_t* p = wend;
    const uint8_t* const tok = ws->tok;
    const uint8_t* const ctx = ws->ctx;
    const uint8_t* const map = ws->map;
    const lmc_freq_esym* const E = &ws->esym[0][0];
#define RC_PUT(xs, i)                                                                              \
    do {                                                                                           \
        const lmc_freq_esym* const e_ = E + map[ctx[i]] * LMC_REFCTX_ALPHA_MAX + tok[i];           \
        uint32_t const big_ = (xs) >= e_->xmax;                                                    \
        lmc_wr16(p - 2, (uint16_t)(xs));                                                           \
        p -= 2 * big_;                                                                             \
        (xs) >>= 16 * big_;                                                                        \
        uint32_t const q_ = (uint32_t)(((uint64_t)(xs) * e_->rcp) >> 32) >> e_->shift;             \
        (xs) = (xs) + e_->bias + q_ * e_->cmpl;                                                    \
    } while (0)
    uint32_t x0 = LMC_ANS_L, x1 = LMC_ANS_L, x2 = LMC_ANS_L, x3 = LMC_ANS_L;
    size_t i = m;
    /* branch-free renormalisation: the word is always stored below p, and p
     * only moves when it counts (the next word overwrites it otherwise) */
    while (i & 3) {               /* the tail first: coding runs backwards */
        i--;
        switch (i & 3) { case 0: RC_PUT(x0, i); break; case 1: RC_PUT(x1, i); break;
                         case 2: RC_PUT(x2, i); break; default: RC_PUT(x3, i); break; }
    }
    while (i) {
        i -= 4;
        RC_PUT(x3, i + 3); RC_PUT(x2, i + 2); RC_PUT(x1, i + 1); RC_PUT(x0, i);
    }
#undef RC_PUT
    uint32_t const x[LMC_ANS_STATES] = { x0, x1, x2, x3 };
    size_t const nwords = (size_t)(wend - p);
    size_t const total = raw_at + raw_bytes + nwords;
    if (total > cap) return 0;

    uint8_t* o = dst;
    *o++ = LMC_KIND_REFCTX;
    lmc_wr24(o, (uint32_t)(total - 4)); o += 3;
    *o++ = (uint8_t)G;
    for (unsigned g = 1; g < G; g++) *o++ = ws->bound[g];
    for (unsigned g = 0; g < G; g++) o += lmc_freq_write(o, ws->freq[g], alpha);
    for (int j = 0; j < LMC_ANS_STATES; j++) { lmc_wr32(o, x[j]); o += 4; }
    lmc_wr32(o, (uint32_t)raw_bytes); o += 4;

    memcpy(o, ws->raw, raw_bytes);
    o += raw_bytes;
    memcpy(o, p, nwords);
    return total;
}
