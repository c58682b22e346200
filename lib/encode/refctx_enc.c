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
#include "rans_lanes.h"
#include "mem.h"
#if LMC_HAS_AVX512_DISPATCH
#  include <immintrin.h>
#endif
#if LMC_HAS_AVX2_DISPATCH
#  include <immintrin.h>
#endif

/* The analysis pass writes the raw-bit stream as it goes (LSB-first); whole
 * bytes leave after every put, so at most 7 bits wait in acc between puts. */
typedef struct { uint64_t acc; unsigned nacc; uint8_t* o; } rawwriter;

/* nb <= 31 bits (one value) */
LMC_FORCE_INLINE void raw_put(rawwriter* rw, uint64_t bits, unsigned nb)
{
    rw->acc |= (bits & ((1ull << nb) - 1)) << rw->nacc;
    rw->nacc += nb;
    lmc_wr64(rw->o, rw->acc);
    rw->o += rw->nacc >> 3;
    rw->acc >>= rw->nacc & ~7u;
    rw->nacc &= 7;
}

#if LMC_HAS_AVX2_DISPATCH
/* Several values' bits at once, already masked, nb <= 63: the writer's
 * serial chain (shift, or, shift) then runs once per 2 or 4 values. With
 * the waiting bits they may pass 64: the 8 bytes stored are then all whole
 * and what is left over is the top of `bits` (spill, which is 0 otherwise). */
LMC_FORCE_INLINE void raw_put_wide(rawwriter* rw, uint64_t bits, unsigned nb)
{
    uint64_t const s = rw->acc | bits << rw->nacc;
    unsigned const t = rw->nacc + nb;
    uint64_t const spill = (bits >> 1) >> (63 - rw->nacc);
    lmc_wr64(rw->o, s);
    rw->acc = t >= 64 ? spill : s >> (t & 56);   /* rare enough for a branch, even on fp32 */
    rw->o += t >> 3;
    rw->nacc = t & 7;
}
#endif

/* The lanes of a vector stored to the array a are read back with scalar
 * loads: otherwise gcc turns each read into an extract and a move, which
 * run on the same two ports as the 512-bit arithmetic (VIA_MEMORY) */
#if defined(__GNUC__)
#  define LMC_VIA_MEMORY(a) __asm__("" : "+m"(a))
#else
#  define LMC_VIA_MEMORY(a) ((void)0)
#endif

/* Bounds of the contexts met, for collecting the counts afterwards. */
typedef struct { unsigned lo, hi; } ctxrange;

/* The 16-bit values counted: those at 0, 3, 5 and 6 of each 8, half of
 * them, as many of each parity and of each residue mod 4. Every other
 * value would see only one half of f32 values that are coded as pairs of
 * 16-bit halves (encode_piece's upcast bf16, whose low halves are all 0). */
#define LMC_REFCTX_COUNTED 0x69u
#define LMC_REFCTX_SAMPLE_MIN 8192

/* One value: key (context and token), count, raw bits. The raw bits are
 * e = t - base(token): the bits of |t| below its leading one, complemented
 * when t < 0. */
LMC_FORCE_INLINE void analyse_value(lmc_refctx_ws* ws, rawwriter* rw, ctxrange* cr, size_t i, uint64_t c, uint64_t r,
                                    unsigned bits)
{
    uint64_t mag;
    int64_t sm;
    unsigned k;
    unsigned const tok = lmc_refctx_diff(c, r, bits, &mag, &sm, &k);
    unsigned const ctx = lmc_refctx_ctx((uint32_t)r, bits);
    unsigned const key = ctx * LMC_REFCTX_ALPHA_MAX + tok;
    ws->key[i] = (uint16_t)key;
    if (bits == 32 || !ws->sampled)          ws->lcount[(i & 3) * LMC_REFCTX_KEYS + key]++;   /* as count_keys(_all) */
    else if (LMC_REFCTX_COUNTED >> (i & 7) & 1) ws->lcount[((i >> 1) & 3) * LMC_REFCTX_KEYS + key]++;
    else                                     ws->seen[key] = 1;
    cr->lo = LMC_MIN(cr->lo, ctx);
    cr->hi = LMC_MAX(cr->hi, ctx);
    raw_put(rw, mag ^ (uint64_t)sm, k - (k != 0));
}

/* Counts n keys (n a multiple of 4) of 32-bit values starting at an index
 * that is a multiple of 4, from the key array just written: each a load
 * and an increment, the lane table a constant offset. */
LMC_FORCE_INLINE void count_keys_all(uint16_t* lc, const uint16_t* key, int n)
{
    for (int j = 0; j < n; j += 4) {
        lc[key[j]]++;
        lc[LMC_REFCTX_KEYS + key[j + 1]]++;
        lc[2 * LMC_REFCTX_KEYS + key[j + 2]]++;
        lc[3 * LMC_REFCTX_KEYS + key[j + 3]]++;
    }
}

/* Counts n keys (n a multiple of 8) of 16-bit values starting at a
 * multiple of 8, from the key array just written: in a block of
 * LMC_REFCTX_SAMPLE_MIN values or more (ws->sampled), a counted value's
 * key a load and an increment, the lane table a constant offset, and
 * another's only marks its key seen, a store (collect_counts). Half the
 * increments, which were the analysis loop's largest cost, and their
 * store-to-load chains: bf16 delta compression about 5 % faster, for the
 * frequencies of half the values, which code about as well (0.02-0.03 %
 * larger). (The loops of 32-bit values, which wait on the raw-bit writer,
 * not on the counting, were 1-2 % slower this way, the stores being as
 * many.) A smaller block counts all: a key met once, counted or not, would
 * weigh twice or half its share, and the estimate of a block of 1000
 * values was 8 % over its size. */
LMC_FORCE_INLINE void count_keys(lmc_refctx_ws* ws, const uint16_t* key, int n)
{
    uint16_t* const lc = ws->lcount;
    uint8_t* const seen = ws->seen;
    if (!ws->sampled) {
        count_keys_all(lc, key, n);
        return;
    }
    for (int j = 0; j < n; j += 8) {
        lc[key[j]]++;
        lc[LMC_REFCTX_KEYS + key[j + 3]]++;
        lc[2 * LMC_REFCTX_KEYS + key[j + 5]]++;
        lc[3 * LMC_REFCTX_KEYS + key[j + 6]]++;
        seen[key[j + 1]] = 1; seen[key[j + 2]] = 1; seen[key[j + 4]] = 1; seen[key[j + 7]] = 1;
    }
}

#if defined(__SSE2__)
/* Folds byte-wise minima and maxima of contexts into cr. */
static void range_u8(__m128i vmin, __m128i vmax, ctxrange* cr)
{
    uint8_t lo[16], hi[16];
    _mm_storeu_si128((__m128i*)(void*)lo, vmin);
    _mm_storeu_si128((__m128i*)(void*)hi, vmax);
    for (int j = 0; j < 16; j++) { cr->lo = LMC_MIN(cr->lo, lo[j]); cr->hi = LMC_MAX(cr->hi, hi[j]); }
}

/* 16-bit values, 8 at a time: t, |t|, its bit length (from the exponent of
 * |t| converted to float), the token and the key in SIMD lanes; counting
 * and raw bits stay scalar. */
static void analyse16_sse2(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src, const uint8_t* ref,
                           size_t m, size_t* done)
{
    __m128i const lo15 = _mm_set1_epi32(0x7FFF), zero = _mm_setzero_si128(), ff = _mm_set1_epi32(0xFF);
    __m128i const expo = _mm_set1_epi32(126), one = _mm_set1_epi32(1);
    __m128i vmin = _mm_set1_epi8(-1), vmax = zero;
    rawwriter rw = *rwp;
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        __m128i const c16 = _mm_loadu_si128((const __m128i*)(const void*)(src + 2 * i));
        __m128i const r16 = _mm_loadu_si128((const __m128i*)(const void*)(ref + 2 * i));
        uint32_t low[8];
        __m128i keyv[2], nbv2[2];
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
            __m128i const tok = _mm_and_si128(_mm_add_epi32(_mm_sub_epi32(_mm_add_epi32(k, k), one), _mm_and_si128(sm, one)), nz);
            /* key: context (r >> 7) & 255, times 65, plus the token */
            __m128i const ctx = _mm_and_si128(_mm_srli_epi32(r, 7), ff);
            keyv[h] = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(ctx, 6), ctx), tok);
            nbv2[h] = _mm_add_epi32(k, nz);   /* k - 1 where k > 0 (nz is -1 there) */
            _mm_storeu_si128((__m128i*)(void*)(low + 4 * h), _mm_xor_si128(mag, sm));
        }
        uint8_t nbv[16];
        _mm_storeu_si128((__m128i*)(void*)(ws->key + i), _mm_packs_epi32(keyv[0], keyv[1]));   /* keys < 2^15 */
        _mm_storeu_si128((__m128i*)(void*)nbv, _mm_packus_epi16(_mm_packs_epi32(nbv2[0], nbv2[1]), zero));
        /* contexts as bytes, for their range: the high bytes' low 7 bits and the next bit down */
        __m128i const ctx8 = _mm_packus_epi16(_mm_and_si128(_mm_srli_epi16(r16, 7), _mm_set1_epi16(0xFF)), zero);
        vmin = _mm_min_epu8(vmin, ctx8);
        vmax = _mm_max_epu8(vmax, ctx8);
        count_keys(ws, ws->key + i, 8);
        for (int j = 0; j < 8; j++) raw_put(&rw, low[j], nbv[j]);
    }
    /* the unused upper bytes of ctx8 are 0: they must not lower the minimum */
    if (i) range_u8(_mm_unpacklo_epi64(vmin, vmin), vmax, cr);
    *rwp = rw;
    *done = i;
}

/* 32-bit values, 4 at a time. Where the sign changes, t = -(|c| + |r| + 1)
 * needs 33 bits as a signed number, so lanes keep |t| (32 bits, unsigned)
 * and the sign apart. The bit length comes from the float exponent of |t|'s
 * top bit alone (smeared down, then isolated), which converts exactly. */
static void analyse32_sse2(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src, const uint8_t* ref,
                           size_t m, size_t* done)
{
    __m128i const lo31 = _mm_set1_epi32(0x7FFFFFFF), zero = _mm_setzero_si128();
    __m128i const expo = _mm_set1_epi32(126), one = _mm_set1_epi32(1), ff = _mm_set1_epi32(0xFF);
    __m128i vmin = _mm_set1_epi32(255), vmax = zero;
    uint16_t* const lc = ws->lcount;
    rawwriter rw = *rwp;
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
        __m128i const key = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(ctx, 6), ctx), tok);
        vmin = _mm_min_epi16(vmin, ctx);   /* contexts < 2^15: 16-bit compares do */
        vmax = _mm_max_epi16(vmax, ctx);
        uint32_t low[4];
        uint8_t nbv[16];
        _mm_storeu_si128((__m128i*)(void*)low, _mm_xor_si128(mag, sm));
        _mm_storel_epi64((__m128i*)(void*)(ws->key + i), _mm_packs_epi32(key, zero));
        _mm_storeu_si128((__m128i*)(void*)nbv, _mm_packus_epi16(_mm_packs_epi32(nb, zero), zero));
        count_keys_all(lc, ws->key + i, 4);
        for (int j = 0; j < 4; j++) raw_put(&rw, low[j], nbv[j]);
    }
    if (i) {
        uint32_t lo[4], hi[4];
        _mm_storeu_si128((__m128i*)(void*)lo, vmin);
        _mm_storeu_si128((__m128i*)(void*)hi, vmax);
        for (int j = 0; j < 4; j++) { cr->lo = LMC_MIN(cr->lo, lo[j]); cr->hi = LMC_MAX(cr->hi, hi[j]); }
    }
    *rwp = rw;
    *done = i;
}
#endif

#if LMC_HAS_AVX2_DISPATCH
/* The raw bits of 8 values in 32-bit lanes (masked) and their lengths,
 * joined pairwise into 64-bit lanes: value 2j's bits, then 2j+1's above. */
LMC_TARGET_AVX2 static inline void join_pairs(__m256i low, __m256i nb, __m256i* p, __m256i* np)
{
    __m256i const lo32 = _mm256_set1_epi64x(0xFFFFFFFF);
    __m256i const ne = _mm256_and_si256(nb, lo32);
    *p = _mm256_or_si256(_mm256_and_si256(low, lo32), _mm256_sllv_epi64(_mm256_srli_epi64(low, 32), ne));
    *np = _mm256_add_epi64(ne, _mm256_srli_epi64(nb, 32));
}

/* 8 16-bit values (zero-extended to 32-bit lanes c, r): keys, and their raw
 * bits joined into 2 groups of 4 values (at most 60 bits) in 64-bit lanes 0
 * and 2 of q, lengths in nq. */
LMC_TARGET_AVX2 static inline void half16(__m256i c, __m256i r, __m256i* key, __m256i* q, __m256i* nq,
                                          __m256i* vmin, __m256i* vmax)
{
    __m256i const lo15 = _mm256_set1_epi32(0x7FFF), zero = _mm256_setzero_si256(), ff = _mm256_set1_epi32(0xFF);
    __m256i const expo = _mm256_set1_epi32(126), one = _mm256_set1_epi32(1);
    __m256i const cross = _mm256_srai_epi32(_mm256_slli_epi32(_mm256_xor_si256(c, r), 16), 31);
    __m256i const t = _mm256_sub_epi32(_mm256_xor_si256(_mm256_and_si256(c, lo15), cross), _mm256_and_si256(r, lo15));
    __m256i const sm = _mm256_srai_epi32(t, 31);
    __m256i const mag = _mm256_abs_epi32(t);
    /* bit length: float exponent - 126 for mag >= 1; float 0.0 gives -126, clamped to 0 */
    __m256i const k = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(mag)), 23), expo), zero);
    __m256i const nz = _mm256_cmpgt_epi32(k, zero);
    __m256i const tok = _mm256_and_si256(_mm256_sub_epi32(_mm256_sub_epi32(_mm256_add_epi32(k, k), one), sm), nz);
    __m256i const nb = _mm256_add_epi32(k, nz);   /* k - 1 where k > 0 (nz is -1 there) */
    __m256i const ctx = _mm256_and_si256(_mm256_srli_epi32(r, 7), ff);
    *vmin = _mm256_min_epu32(*vmin, ctx);
    *vmax = _mm256_max_epu32(*vmax, ctx);
    *key = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(ctx, 6), ctx), tok);
    __m256i const low = _mm256_and_si256(_mm256_xor_si256(mag, sm), _mm256_sub_epi32(_mm256_sllv_epi32(one, nb), one));
    __m256i p, np;
    join_pairs(low, nb, &p, &np);
    /* pairs 2j and 2j+1 of each 128-bit half: 4 values in the low 64 bits */
    *q = _mm256_or_si256(p, _mm256_sllv_epi64(_mm256_unpackhi_epi64(p, p), np));
    *nq = _mm256_add_epi64(np, _mm256_unpackhi_epi64(np, np));
}

#if LMC_HAS_AVX512_DISPATCH
/* The common tail of the AVX-512 analysis steps, 16 values from value i:
 * keys (context * 65 + token) stored as 16 bits, and each value's raw bits
 * (|t| below its leading one, complemented when t < 0: mag ^ sm, nb bits)
 * joined pairwise into 64-bit lanes, lengths in *np. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE void keys_and_pairs(lmc_refctx_ws* ws, size_t i, __m512i ctx, __m512i tok, __m512i mag,
                                                       __m512i sm, __m512i nb, __m512i* p, __m512i* np)
{
    __m512i const one = _mm512_set1_epi32(1), lo32 = _mm512_set1_epi64(0xFFFFFFFF);
    __m512i const key = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(ctx, 6), ctx), tok);
    _mm256_storeu_si256((__m256i*)(void*)(ws->key + i), _mm512_cvtepi32_epi16(key));
    __m512i const low = _mm512_and_si512(_mm512_xor_si512(mag, sm), _mm512_sub_epi32(_mm512_sllv_epi32(one, nb), one));
    __m512i const ne = _mm512_and_si512(nb, lo32);
    *p = _mm512_or_si512(_mm512_and_si512(low, lo32), _mm512_sllv_epi64(_mm512_srli_epi64(low, 32), ne));
    *np = _mm512_add_epi64(ne, _mm512_srli_epi64(nb, 32));
}
#endif

/* The AVX-512 analysis loops read 128 bytes a step and do little with them:
 * they prefetch both inputs (LMC_PREFETCH_R; bf16 delta compression +2-5 %). */
#if LMC_HAS_AVX512_DISPATCH
/* 16-bit values, 32 at a time in the word lanes of one vector (half16's
 * arithmetic in 16 bits: a third fewer operations on the two ports that
 * 512-bit work uses than with 16 values in 32-bit lanes). |t| fits a word
 * (at most 2^16 - 1, when the signs differ) and its sign is a mask; the bit
 * length comes from the float exponent of each half of a 32-bit lane. The
 * raw bits are joined in the lanes: pairs in 32 bits, fours (at most 60
 * bits) in 64, so the writer runs once per 4 values. */
LMC_TARGET_AVX512 static void analyse16_avx512(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src,
                                               const uint8_t* ref, size_t m, size_t* done)
{
    __m512i const lo15 = _mm512_set1_epi16(0x7FFF), one = _mm512_set1_epi16(1), ff = _mm512_set1_epi16(0xFF);
    __m512i const ones = _mm512_set1_epi16(-1), expo = _mm512_set1_epi16(126);
    __m512i const lo16 = _mm512_set1_epi32(0xFFFF), lo32 = _mm512_set1_epi64(0xFFFFFFFF);
    __m512i vmin = _mm512_set1_epi16(255), vmax = _mm512_setzero_si512();
    rawwriter rw = *rwp;
    size_t i = 0;
    for (; i + 32 <= m; i += 32) {
        LMC_PREFETCH_R(src + 2 * i);
        LMC_PREFETCH_R(ref + 2 * i);
        __m512i const c = _mm512_loadu_si512((const void*)(src + 2 * i));
        __m512i const r = _mm512_loadu_si512((const void*)(ref + 2 * i));
        __mmask32 const cross = _mm512_movepi16_mask(_mm512_xor_si512(c, r));
        __m512i const ca = _mm512_and_si512(c, lo15), ra = _mm512_and_si512(r, lo15);
        /* signs alike: |ca - ra|, negative when ca < ra; unlike: ca + ra + 1, negative */
        __m512i const mag = _mm512_mask_add_epi16(_mm512_abs_epi16(_mm512_sub_epi16(ca, ra)), cross,
                                                  _mm512_add_epi16(ca, ra), one);
        __mmask32 const neg = cross | _mm512_cmplt_epi16_mask(ca, ra);
        __mmask32 const nz = _mm512_test_epi16_mask(mag, mag);
        /* bit length: exponents of the two halves (exact as floats), less 126, at least 0 */
        __m512i const el = _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_and_si512(mag, lo16))), 23);
        __m512i const eh = _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_srli_epi32(mag, 16))), 23);
        __m512i const k = _mm512_subs_epu16(_mm512_or_si512(el, _mm512_slli_epi32(eh, 16)), expo);
        __m512i const t2 = _mm512_sub_epi16(_mm512_add_epi16(k, k), one);
        __m512i const tok = _mm512_maskz_mov_epi16(nz, _mm512_mask_add_epi16(t2, neg, t2, one));
        __m512i const nb = _mm512_maskz_sub_epi16(nz, k, one);
        __m512i const ctx = _mm512_and_si512(_mm512_srli_epi16(r, 7), ff);
        vmin = _mm512_min_epu16(vmin, ctx);
        vmax = _mm512_max_epu16(vmax, ctx);
        _mm512_storeu_si512((void*)(ws->key + i), _mm512_add_epi16(_mm512_add_epi16(_mm512_slli_epi16(ctx, 6), ctx), tok));
        /* |t| below its leading one, complemented when t < 0 */
        __m512i const bits = _mm512_and_si512(_mm512_mask_mov_epi16(mag, neg, _mm512_xor_si512(mag, ones)),
                                              _mm512_sub_epi16(_mm512_sllv_epi16(one, nb), one));
        /* pairs: value 2j's bits, then 2j+1's above (at most 30 bits) */
        __m512i const nbl = _mm512_and_si512(nb, lo16);
        __m512i const p = _mm512_or_si512(_mm512_and_si512(bits, lo16), _mm512_sllv_epi32(_mm512_srli_epi32(bits, 16), nbl));
        __m512i const np = _mm512_add_epi32(nbl, _mm512_srli_epi32(nb, 16));
        /* fours */
        __m512i const npl = _mm512_and_si512(np, lo32);
        __m512i const q4 = _mm512_or_si512(_mm512_and_si512(p, lo32), _mm512_sllv_epi64(_mm512_srli_epi64(p, 32), npl));
        __m512i const n4 = _mm512_add_epi64(npl, _mm512_srli_epi64(np, 32));
        /* eights, in the even lanes, where all four fit the writer (63 bits) */
        __m512i const n8 = _mm512_add_epi64(n4, _mm512_shuffle_epi32(n4, _MM_PERM_BADC));
        int const eights = !_mm512_mask_cmpgt_epu64_mask(0x55, n8, _mm512_set1_epi64(63));
        uint64_t q[8], nq[8];
        if (eights) {
            _mm512_storeu_si512((void*)q, _mm512_or_si512(q4, _mm512_sllv_epi64(_mm512_shuffle_epi32(q4, _MM_PERM_BADC), n4)));
            _mm512_storeu_si512((void*)nq, n8);
        } else {
            _mm512_storeu_si512((void*)q, q4);
            _mm512_storeu_si512((void*)nq, n4);
        }
        LMC_VIA_MEMORY(q); LMC_VIA_MEMORY(nq);
        /* the keys of the step before (see analyse16_avx2) */
        if (i) count_keys(ws, ws->key + i - 32, 32);
        if (eights) for (int j = 0; j < 8; j += 2) raw_put_wide(&rw, q[j], (unsigned)nq[j]);
        else        for (int j = 0; j < 8; j++) raw_put_wide(&rw, q[j], (unsigned)nq[j]);
    }
    if (i) {
        count_keys(ws, ws->key + i - 32, 32);
        cr->lo = LMC_MIN(cr->lo, _mm512_reduce_min_epu32(_mm512_min_epu32(_mm512_and_si512(vmin, lo16), _mm512_srli_epi32(vmin, 16))));
        cr->hi = LMC_MAX(cr->hi, _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_and_si512(vmax, lo16), _mm512_srli_epi32(vmax, 16))));
    }
    *rwp = rw;
    *done = i;
}
#endif

#if LMC_HAS_AVX512_DISPATCH
/* The raw-bit writer's state in vectors, for raw_put8: the bits waiting
 * (lane 0 of acc, the others 0) and their count (every lane of nacc). */
typedef struct { __m512i acc, nacc; uint8_t* o; } rawwriter8;

LMC_TARGET_AVX512 LMC_FORCE_INLINE rawwriter8 raw8_begin(const rawwriter* rw)
{
    rawwriter8 v;
    v.acc = _mm512_maskz_set1_epi64(1, (long long)rw->acc);
    v.nacc = _mm512_set1_epi64(rw->nacc);
    v.o = rw->o;
    return v;
}

LMC_TARGET_AVX512 LMC_FORCE_INLINE void raw8_end(const rawwriter8* v, rawwriter* rw)
{
    rw->acc = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(v->acc));
    rw->nacc = (unsigned)_mm_cvtsi128_si64(_mm512_castsi512_si128(v->nacc));
    rw->o = v->o;
}

/* Lanes moved up by k (lane j takes lane j - k), fill in the lanes below k. */
#define LMC_UP(x, fill, k) _mm512_alignr_epi64((x), (fill), 8 - (k))

/* The raw bits of 8 groups of values (lane j of p, its length in lane j of
 * n, at most 62 bits), after those waiting, written as whole 64-bit words:
 * the same bytes as 8 raw_put_wide in turn, without their serial chain
 * (a shift, an or and a shift a put, on the bit count that the put before
 * left), which held the loop of 32-bit values, whose raw bits are most of
 * their size. Each group's bit offset is a prefix sum of the lengths; its
 * bits below and above a word boundary are ORed with the other groups' in
 * the same words by a scan within runs of groups that start in one word,
 * and the last group of each run, holding the run's bits, is compressed
 * into its word's place (every word has a group starting in it: a group
 * is shorter than a word). Stores 64 bytes at the write position. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE void raw_put8(rawwriter8* v, __m512i p, __m512i n)
{
    __m512i const zero = _mm512_setzero_si512(), ones = _mm512_set1_epi64(-1);
    __m512i s = n;
    s = _mm512_add_epi64(s, LMC_UP(s, zero, 1));
    s = _mm512_add_epi64(s, LMC_UP(s, zero, 2));
    s = _mm512_add_epi64(s, LMC_UP(s, zero, 4));
    __m512i const at = _mm512_add_epi64(_mm512_sub_epi64(s, n), v->nacc);   /* each group's first bit */
    __m512i const total = _mm512_add_epi64(_mm512_permutexvar_epi64(_mm512_set1_epi64(7), s), v->nacc);
    __m512i const sh = _mm512_and_si512(at, _mm512_set1_epi64(63));
    __m512i const t = _mm512_srli_epi64(at, 6);   /* its word */
    __m512i lo = _mm512_sllv_epi64(p, sh);
    __m512i hi = _mm512_srlv_epi64(p, _mm512_sub_epi64(_mm512_set1_epi64(64), sh));   /* 0 where sh = 0 */
    __mmask8 same = _mm512_cmpeq_epi64_mask(t, LMC_UP(t, ones, 1));
    lo = _mm512_mask_or_epi64(lo, same, lo, LMC_UP(lo, zero, 1));
    hi = _mm512_mask_or_epi64(hi, same, hi, LMC_UP(hi, zero, 1));
    same = _mm512_cmpeq_epi64_mask(t, LMC_UP(t, ones, 2));
    lo = _mm512_mask_or_epi64(lo, same, lo, LMC_UP(lo, zero, 2));
    hi = _mm512_mask_or_epi64(hi, same, hi, LMC_UP(hi, zero, 2));
    same = _mm512_cmpeq_epi64_mask(t, LMC_UP(t, ones, 4));
    lo = _mm512_mask_or_epi64(lo, same, lo, LMC_UP(lo, zero, 4));
    hi = _mm512_mask_or_epi64(hi, same, hi, LMC_UP(hi, zero, 4));
    __mmask8 const last = _mm512_cmpneq_epi64_mask(t, _mm512_alignr_epi64(ones, t, 1));
    __m512i const hw = _mm512_maskz_compress_epi64(last, hi);   /* word w's, for word w + 1 */
    __m512i const out = _mm512_ternarylogic_epi64(_mm512_maskz_compress_epi64(last, lo), LMC_UP(hw, zero, 1), v->acc, 0xFE);
    _mm512_storeu_si512((void*)v->o, out);
    uint64_t const tb = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(total));
    v->o += tb >> 3;
    /* what waits: the bits of the last byte begun, from its word */
    __m512i const word = _mm512_permutexvar_epi64(_mm512_srli_epi64(total, 6), out);
    v->nacc = _mm512_and_si512(total, _mm512_set1_epi64(7));
    __m512i const keep = _mm512_sub_epi64(_mm512_sllv_epi64(_mm512_set1_epi64(1), v->nacc), _mm512_set1_epi64(1));
    v->acc = _mm512_maskz_and_epi64(1, _mm512_srlv_epi64(word, _mm512_and_si512(total, _mm512_set1_epi64(56))), keep);
}
#undef LMC_UP

/* 32-bit values, 16 at a time: analyse32_avx2's arithmetic on twice the
 * lanes. The raw bits reach the writer in pairs of values, 8 pairs at once
 * (raw_put8: fp32 delta compression 1.13-1.15x as fast as with a
 * raw_put_wide a pair, Adam moments' 1.06x; bench/ab.sh on traj-3m and
 * t19m). analyse16_avx512's 4 puts of up to 8 values each were faster than
 * raw_put8 (bf16 delta compression 0.92-0.99x with it). */
LMC_TARGET_AVX512 static void analyse32_avx512(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src,
                                               const uint8_t* ref, size_t m, size_t* done)
{
    __m512i const lo31 = _mm512_set1_epi32(0x7FFFFFFF), zero = _mm512_setzero_si512(), ff = _mm512_set1_epi32(0xFF);
    __m512i const expo = _mm512_set1_epi32(126), one = _mm512_set1_epi32(1), k32 = _mm512_set1_epi32(32);
    __m512i vmin = _mm512_set1_epi32(255), vmax = zero;
    uint16_t* const lc = ws->lcount;
    rawwriter rw = *rwp;
    rawwriter8 rw8 = raw8_begin(&rw);
    size_t i = 0;
    for (; i + 16 <= m; i += 16) {
        LMC_PREFETCH_R(src + 4 * i);
        LMC_PREFETCH_R(ref + 4 * i);
        __m512i const c = _mm512_loadu_si512((const void*)(src + 4 * i));
        __m512i const r = _mm512_loadu_si512((const void*)(ref + 4 * i));
        __mmask16 const cross = _mm512_test_epi32_mask(_mm512_xor_si512(c, r), _mm512_set1_epi32((int)0x80000000u));
        __m512i const ca = _mm512_and_si512(c, lo31), ra = _mm512_and_si512(r, lo31);
        __m512i const t = _mm512_sub_epi32(ca, ra);
        __m512i const mag = _mm512_mask_add_epi32(_mm512_abs_epi32(t), cross, _mm512_add_epi32(ca, ra), one);
        __m512i const sm = _mm512_mask_mov_epi32(_mm512_srai_epi32(t, 31), cross, _mm512_set1_epi32(-1));
        __m512i const y = _mm512_andnot_si512(_mm512_srli_epi32(mag, 1), mag);
        __m512i const e = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(y)), 23), ff);
        __m512i const k = _mm512_max_epi32(_mm512_sub_epi32(e, expo), _mm512_and_si512(_mm512_srai_epi32(mag, 31), k32));
        __mmask16 const nz = _mm512_cmpgt_epi32_mask(k, zero);
        __m512i const tok = _mm512_maskz_sub_epi32(nz, _mm512_sub_epi32(_mm512_add_epi32(k, k), one), sm);
        __m512i const nb = _mm512_mask_sub_epi32(k, nz, k, one);
        __m512i const ctx = _mm512_and_si512(_mm512_srli_epi32(r, 23), ff);
        vmin = _mm512_min_epu32(vmin, ctx);
        vmax = _mm512_max_epu32(vmax, ctx);
        __m512i pv, npv;
        keys_and_pairs(ws, i, ctx, tok, mag, sm, nb, &pv, &npv);
        if (i) count_keys_all(lc, ws->key + i - 16, 16);   /* the step before's, as in analyse16_avx2 */
        raw_put8(&rw8, pv, npv);
    }
    raw8_end(&rw8, &rw);
    if (i) {
        count_keys_all(lc, ws->key + i - 16, 16);
        cr->lo = LMC_MIN(cr->lo, _mm512_reduce_min_epu32(vmin));
        cr->hi = LMC_MAX(cr->hi, _mm512_reduce_max_epu32(vmax));
    }
    *rwp = rw;
    *done = i;
}
#endif

/* 16-bit values, 16 at a time, in two halves of 8 32-bit lanes. The raw
 * bits (at most 15 a value) reach the writer in groups of 4 values. */
LMC_TARGET_AVX2 static void analyse16_avx2(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src,
                                           const uint8_t* ref, size_t m, size_t* done)
{
    __m256i vmin = _mm256_set1_epi32(255), vmax = _mm256_setzero_si256();
    rawwriter rw = *rwp;
    size_t i = 0;
    for (; i + 16 <= m; i += 16) {
        uint64_t q[4], nq[4];
        __m256i k0, k1, q0, q1, n0, n1;
        half16(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(src + 2 * i))),
               _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(ref + 2 * i))), &k0, &q0, &n0, &vmin, &vmax);
        half16(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(src + 2 * i + 16))),
               _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(ref + 2 * i + 16))), &k1, &q1, &n1, &vmin, &vmax);
        /* keys (< 2^15) as 16 bits, in order */
        __m256i const k16 = _mm256_packs_epi32(k0, k1);   /* 0-3 8-11 | 4-7 12-15 */
        _mm256_storeu_si256((__m256i*)(void*)(ws->key + i), _mm256_permute4x64_epi64(k16, 0xD8));
        /* groups 0-3, 8-11 | 4-7, 12-15 */
        _mm256_storeu_si256((__m256i*)(void*)q, _mm256_unpacklo_epi64(q0, q1));
        _mm256_storeu_si256((__m256i*)(void*)nq, _mm256_unpacklo_epi64(n0, n1));
        /* the keys of the step before: those just stored would be read
         * back before the store could pass them on (measured: the loads
         * stalled, a fifth of this loop's time) */
        if (i) count_keys(ws, ws->key + i - 16, 16);
        raw_put_wide(&rw, q[0], (unsigned)nq[0]);
        raw_put_wide(&rw, q[2], (unsigned)nq[2]);
        raw_put_wide(&rw, q[1], (unsigned)nq[1]);
        raw_put_wide(&rw, q[3], (unsigned)nq[3]);
    }
    if (i) {
        count_keys(ws, ws->key + i - 16, 16);
        uint32_t lo[8], hi[8];
        _mm256_storeu_si256((__m256i*)(void*)lo, vmin);
        _mm256_storeu_si256((__m256i*)(void*)hi, vmax);
        for (int j = 0; j < 8; j++) { cr->lo = LMC_MIN(cr->lo, lo[j]); cr->hi = LMC_MAX(cr->hi, hi[j]); }
    }
    *rwp = rw;
    *done = i;
}

/* 32-bit values, 8 at a time; |t| and the sign apart as in analyse32_sse2.
 * The bit length: clearing every bit with a one above it leaves the top bit
 * and no run of ones, which converts to float without rounding up into the
 * next power of two; |t| >= 2^31 (negative as int) is 32. Raw bits (at most
 * 31 a value) reach the writer in pairs. */
LMC_TARGET_AVX2 static void analyse32_avx2(lmc_refctx_ws* ws, rawwriter* rwp, ctxrange* cr, const uint8_t* src,
                                           const uint8_t* ref, size_t m, size_t* done)
{
    __m256i const lo31 = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256(), ff = _mm256_set1_epi32(0xFF);
    __m256i const expo = _mm256_set1_epi32(126), one = _mm256_set1_epi32(1), k32 = _mm256_set1_epi32(32);
    __m256i vmin = _mm256_set1_epi32(255), vmax = zero;
    uint16_t* const lc = ws->lcount;
    rawwriter rw = *rwp;
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        __m256i const c = _mm256_loadu_si256((const __m256i*)(const void*)(src + 4 * i));
        __m256i const r = _mm256_loadu_si256((const __m256i*)(const void*)(ref + 4 * i));
        __m256i const cross = _mm256_srai_epi32(_mm256_xor_si256(c, r), 31);
        __m256i const ca = _mm256_and_si256(c, lo31), ra = _mm256_and_si256(r, lo31);
        __m256i const t = _mm256_sub_epi32(ca, ra);                       /* same sign: fits */
        __m256i const mag_cross = _mm256_add_epi32(_mm256_add_epi32(ca, ra), one);   /* unsigned */
        __m256i const mag = _mm256_blendv_epi8(_mm256_abs_epi32(t), mag_cross, cross);
        __m256i const sm = _mm256_or_si256(cross, _mm256_srai_epi32(t, 31));
        __m256i const y = _mm256_andnot_si256(_mm256_srli_epi32(mag, 1), mag);
        __m256i const e = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(y)), 23), ff);
        /* mag = 0: -126, clamped to 0 */
        __m256i const k = _mm256_max_epi32(_mm256_sub_epi32(e, expo), _mm256_and_si256(_mm256_srai_epi32(mag, 31), k32));
        __m256i const nz = _mm256_cmpgt_epi32(k, zero);
        __m256i const tok = _mm256_and_si256(_mm256_sub_epi32(_mm256_sub_epi32(_mm256_add_epi32(k, k), one), sm), nz);
        __m256i const nb = _mm256_add_epi32(k, nz);
        __m256i const ctx = _mm256_and_si256(_mm256_srli_epi32(r, 23), ff);
        vmin = _mm256_min_epu32(vmin, ctx);
        vmax = _mm256_max_epu32(vmax, ctx);
        __m256i const key = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(ctx, 6), ctx), tok);
        uint64_t p[4], np[4];
        _mm_storeu_si128((__m128i*)(void*)(ws->key + i),
                         _mm_packus_epi32(_mm256_castsi256_si128(key), _mm256_extracti128_si256(key, 1)));
        __m256i const low = _mm256_and_si256(_mm256_xor_si256(mag, sm), _mm256_sub_epi32(_mm256_sllv_epi32(one, nb), one));
        __m256i pv, npv;
        join_pairs(low, nb, &pv, &npv);
        _mm256_storeu_si256((__m256i*)(void*)p, pv);
        _mm256_storeu_si256((__m256i*)(void*)np, npv);
        if (i) count_keys_all(lc, ws->key + i - 8, 8);   /* the step before's, as in analyse16_avx2 */
        for (int j = 0; j < 4; j++) raw_put_wide(&rw, p[j], (unsigned)np[j]);
    }
    if (i) {
        count_keys_all(lc, ws->key + i - 8, 8);
        uint32_t lo[8], hi[8];
        _mm256_storeu_si256((__m256i*)(void*)lo, vmin);
        _mm256_storeu_si256((__m256i*)(void*)hi, vmax);
        for (int j = 0; j < 8; j++) { cr->lo = LMC_MIN(cr->lo, lo[j]); cr->hi = LMC_MAX(cr->hi, hi[j]); }
    }
    *rwp = rw;
    *done = i;
}
#endif

#if LMC_HAS_AVX2_DISPATCH
/* collect_counts' row of context c, 8 symbols a step from s = 0 while
 * whole steps fit alpha; returns where it stopped. */
LMC_TARGET_AVX2 static unsigned collect_row_avx2(uint16_t* l, uint8_t* seen, uint32_t* row, unsigned alpha, unsigned sh,
                                                 uint32_t* any)
{
    __m256i acc = _mm256_setzero_si256();
    __m128i const z = _mm_setzero_si128();
    unsigned s = 0;
    for (; s + 8 <= alpha; s += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(l + s)));
        v = _mm256_add_epi32(v, _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(l + s + LMC_REFCTX_KEYS))));
        v = _mm256_add_epi32(v, _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(l + s + 2 * LMC_REFCTX_KEYS))));
        v = _mm256_add_epi32(v, _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(l + s + 3 * LMC_REFCTX_KEYS))));
        /* 16-bit values: twice the counted values' count, or 1 for a key only seen */
        v = _mm256_max_epu32(_mm256_slli_epi32(v, (int)sh), _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(const void*)(seen + s))));
        _mm_storel_epi64((__m128i*)(void*)(seen + s), z);
        _mm256_storeu_si256((__m256i*)(void*)(row + s), v);
        acc = _mm256_or_si256(acc, v);
        _mm_storeu_si128((__m128i*)(void*)(l + s), z);
        _mm_storeu_si128((__m128i*)(void*)(l + s + LMC_REFCTX_KEYS), z);
        _mm_storeu_si128((__m128i*)(void*)(l + s + 2 * LMC_REFCTX_KEYS), z);
        _mm_storeu_si128((__m128i*)(void*)(l + s + 3 * LMC_REFCTX_KEYS), z);
    }
    *any |= (uint32_t)!_mm256_testz_si256(acc, acc);
    return s;
}
#endif

/* The counts of the contexts in cr, summed over the lane tables into
 * count[] (whole rows of alpha), which leaves the lane tables zero; the
 * contexts with a count are the present ones. The range may hold many
 * absent contexts (a few odd values, or a zip header coded among a
 * tensor's values, span most of the 256): with AVX2 a row costs about
 * twenty instructions instead of eight a symbol. */
static void collect_counts(lmc_refctx_ws* ws, ctxrange cr)
{
    unsigned const alpha = ws->alpha, sh = (unsigned)ws->sampled;   /* count_keys: half the values */
    unsigned np = 0;
#if LMC_HAS_AVX2_DISPATCH
    int const avx2 = lmc_cpu_has_avx2();
#endif
    for (unsigned c = cr.lo; c <= cr.hi; c++) {
        uint16_t* const l = ws->lcount + c * LMC_REFCTX_ALPHA_MAX;
        uint8_t* const seen = ws->seen + c * LMC_REFCTX_ALPHA_MAX;
        uint32_t* const row = ws->count[c];
        uint32_t any = 0;
        unsigned s = 0;
#if LMC_HAS_AVX2_DISPATCH
        if (avx2) s = collect_row_avx2(l, seen, row, alpha, sh, &any);
#endif
        for (; s < alpha; s++) {
            uint32_t const v = (uint32_t)l[s] + l[s + LMC_REFCTX_KEYS] + l[s + 2 * LMC_REFCTX_KEYS] + l[s + 3 * LMC_REFCTX_KEYS];
            row[s] = LMC_MAX(v << sh, seen[s]);   /* as collect_row_avx2 */
            any |= row[s];
            l[s] = 0; l[s + LMC_REFCTX_KEYS] = 0; l[s + 2 * LMC_REFCTX_KEYS] = 0; l[s + 3 * LMC_REFCTX_KEYS] = 0;
            seen[s] = 0;
        }
        if (any) ws->present[np++] = (uint8_t)c;
    }
    ws->npresent = np;
}

static void build_groups(lmc_refctx_ws* ws)
{
    unsigned const alpha = ws->alpha;
    unsigned G = 0;
    uint8_t first[LMC_REFCTX_CONTEXTS];
    unsigned const sh = ws->ctx_join;
    for (unsigned k = 0; k < ws->npresent; k++) {
        unsigned const c = ws->present[k];
        if (G && (c >> sh) == ((unsigned)first[G - 1] >> sh)) {
            for (unsigned s = 0; s < alpha; s++) ws->gcount[G - 1][s] += ws->count[c][s];
            continue;
        }
        first[G] = (uint8_t)c;
        memcpy(ws->gcount[G], ws->count[c], alpha * sizeof(uint32_t));
        G++;
    }
    G = lmc_freq_merge(&ws->gcount[0][0], LMC_REFCTX_ALPHA_MAX, first, G, alpha, LMC_REFCTX_MAX_GROUPS);
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
    ws->m = m; ws->w = w; ws->alpha = lmc_refctx_alpha(w);
    ws->sampled = w == 2 && m >= LMC_REFCTX_SAMPLE_MIN;
    rawwriter rw = { 0, 0, ws->raw };
    ctxrange cr = { 255, 0 };
    size_t i = 0;
    if (w == 2) {
#if LMC_HAS_AVX2_DISPATCH
#if LMC_HAS_AVX512_DISPATCH
        if (lmc_cpu_has_avx512()) analyse16_avx512(ws, &rw, &cr, src, ref, m, &i);
        else
#endif
        if (lmc_cpu_has_avx2()) analyse16_avx2(ws, &rw, &cr, src, ref, m, &i);
        else
#endif
        {
#if defined(__SSE2__)
            analyse16_sse2(ws, &rw, &cr, src, ref, m, &i);
#endif
        }
        for (; i < m; i++) analyse_value(ws, &rw, &cr, i, lmc_rd16(src + 2 * i), lmc_rd16(ref + 2 * i), 16);
    } else {
#if LMC_HAS_AVX2_DISPATCH
#if LMC_HAS_AVX512_DISPATCH
        if (lmc_cpu_has_avx512()) analyse32_avx512(ws, &rw, &cr, src, ref, m, &i);
        else
#endif
        if (lmc_cpu_has_avx2()) analyse32_avx2(ws, &rw, &cr, src, ref, m, &i);
        else
#endif
        {
#if defined(__SSE2__)
            analyse32_sse2(ws, &rw, &cr, src, ref, m, &i);
#endif
        }
        for (; i < m; i++) analyse_value(ws, &rw, &cr, i, lmc_rd32(src + 4 * i), lmc_rd32(ref + 4 * i), 32);
    }
    if (rw.nacc) *rw.o++ = (uint8_t)rw.acc;
    ws->raw_bits = (uint64_t)(rw.o - ws->raw) * 8;   /* whole bytes: all that the size needs */
    uint64_t const raw = ws->raw_bits;
    collect_counts(ws, cr);
    build_groups(ws);

    size_t size = 1 + 3 + 1 + (ws->ngroups - 1) + 4 + (size_t)((raw + 7) / 8);
    float bits = 0;
    for (unsigned g = 0; g < ws->ngroups; g++) {
        size += lmc_freq_size(ws->freq[g], ws->alpha);
        for (unsigned s = 0; s < ws->alpha; s++)
            if (ws->gcount[g][s] && ws->freq[g][s] < LMC_ANS_M)   /* log2 is approximate: keep M/M free */
                bits += (float)ws->gcount[g][s] * LMC_MAX(0.0f, LMC_ANS_PROB_BITS - lmc_fast_log2((float)ws->freq[g][s]));
    }
    size += (size_t)(bits / 8) + 2;
    ws->states = size >= LMC_REFCTX_WIDE_MIN ? LMC_REFCTX_STATES_WIDE : LMC_ANS_STATES;
    ws->sparse = size * 16 <= m;
    return size + 4 * ws->states;
}

/* The coder's fields of group g's tokens, in the rows of the contexts of g:
 * the same arithmetic as lmc_freq_esyms, with the reciprocal shifted so that
 * the quotient is the high 64 bits of the product. The AVX-512 loop of a
 * wide block reads only efc: the scalar fields (RC_PUT's) are filled only
 * where scalar is set (that loop is not used, or a tail of tokens goes
 * through RC_PUT): they cost a 64-bit division per symbol of each group. */
static void key_tables(lmc_refctx_ws* ws, int scalar)
{
    unsigned const alpha = ws->alpha;
    uint64_t rc[LMC_REFCTX_ALPHA_MAX];
    uint32_t xm[LMC_REFCTX_ALPHA_MAX], bi[LMC_REFCTX_ALPHA_MAX], cm[LMC_REFCTX_ALPHA_MAX], fc[LMC_REFCTX_ALPHA_MAX];
    int const lanes = ws->states == LMC_REFCTX_STATES_WIDE;
    unsigned c = 0;
    for (unsigned g = 0; g < ws->ngroups; g++) {
        const uint16_t* const f = ws->freq[g];
        uint32_t cum = 0;
        for (unsigned s = 0; s < alpha; s++) {
            uint32_t const fs = f[s];
            rc[s] = 0; xm[s] = 0; bi[s] = 0; cm[s] = 0; fc[s] = 0;
            if (!fs) continue;
            fc[s] = fs | cum << 13;
            if (!scalar) { cum += fs; continue; }
            xm[s] = ((LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * fs - 1;
            cm[s] = LMC_ANS_M - fs;
            if (fs < 2) {
                rc[s] = (uint64_t)0xFFFFFFFFu << 32;    /* q = x - 1 */
                bi[s] = cum + LMC_ANS_M - 1;
            } else {
                unsigned shift = 0;
                while (fs > (1u << shift)) shift++;
                rc[s] = (((1ull << (shift + 31)) + fs - 1) / fs) << (33 - shift);
                bi[s] = cum;
            }
            cum += fs;
        }
        /* present contexts of group g: those below the next bound */
        unsigned const end = g + 1 < ws->ngroups ? ws->bound[g + 1] : LMC_REFCTX_CONTEXTS;
        for (; c < ws->npresent && ws->present[c] < end; c++) {
            unsigned const row = ws->present[c] * LMC_REFCTX_ALPHA_MAX;
            if (scalar) {
                memcpy(ws->erc + row, rc, alpha * sizeof(rc[0]));
                memcpy(ws->exm + row, xm, alpha * sizeof(xm[0]));
                memcpy(ws->ebias + row, bi, alpha * sizeof(bi[0]));
                memcpy(ws->ecmpl + row, cm, alpha * sizeof(cm[0]));
            }
            if (lanes) memcpy(ws->efc + row, fc, alpha * sizeof(fc[0]));
        }
    }
}

/* One token coded into state xs. Renormalisation without a branch: the word
 * is always stored at the write position, which moves (nk, words written,
 * negated) only when the state was >= xmax; compilers emit a branch for the
 * select, hence the compare, conditional move and subtract with borrow. */
#if defined(__GNUC__) && defined(__x86_64__)
#  define RC_FLUSH(xs, xm1)                                                                  \
    do {                                                                                     \
        uint32_t const hi_ = (xs) >> sh16;                                                   \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                    \
        __asm__("cmpl %[x], %[m]\n\tcmovbl %[h], %[x]\n\tsbbq $0, %[k]"                      \
                : [x] "+r"(xs), [k] "+r"(nk) : [m] "m"(xm1), [h] "r"(hi_) : "cc");           \
    } while (0)
#else
#  define RC_FLUSH(xs, xm1)                                                                  \
    do {                                                                                     \
        size_t const f_ = (xs) > (xm1);                                                      \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                    \
        (xs) = f_ ? (xs) >> sh16 : (xs);                                                     \
        nk -= f_;                                                                            \
    } while (0)
#endif
#if defined(__SIZEOF_INT128__)
#  define RC_QUOT(xs, k) ((uint32_t)(((unsigned __int128)(xs) * ws->erc[k]) >> 64))
#else
#  define RC_QUOT(xs, k) ((uint32_t)(((uint64_t)(xs) * (uint32_t)(ws->erc[k] >> 32)                       \
                                    + (((uint64_t)(xs) * (uint32_t)ws->erc[k]) >> 32)) >> 32))
#endif
#define RC_PUT(xs, i)                                                                        \
    do {                                                                                     \
        size_t const k_ = key[i];                                                            \
        RC_FLUSH(xs, ws->exm[k_]);                                                           \
        uint32_t const q_ = RC_QUOT(xs, k_);                                                 \
        (xs) += ws->ebias[k_];                                                               \
        (xs) += q_ * ws->ecmpl[k_];                                                          \
    } while (0)

/* RC_PUT for a sparse block (few words: ws->sparse): the word out as a
 * branch, which then almost always goes the same way, instead of a word
 * stored for every token. */
#define RC_PUT_SPARSE(xs, i)                                                                 \
    do {                                                                                     \
        size_t const k_ = key[i];                                                            \
        if (LMC_UNLIKELY((xs) > ws->exm[k_])) {                                              \
            lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                \
            (xs) >>= 16;                                                                     \
            nk--;                                                                            \
        }                                                                                    \
        uint32_t const q_ = RC_QUOT(xs, k_);                                                 \
        (xs) += ws->ebias[k_];                                                               \
        (xs) += q_ * ws->ecmpl[k_];                                                          \
    } while (0)

/* Tokens [0, i) backwards (i a multiple of 4), word k at wp - 2k; returns nk = -k.
 * sh16 is 16; the BMI2 copy hides that from the compiler, which then shifts
 * with shrx (no copy of the state first). sparse: RC_PUT_SPARSE. */
LMC_FORCE_INLINE size_t rc_rounds(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk, unsigned sh16,
                                  int sparse)
{
    const uint16_t* const key = ws->key;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    while (i) {
        i -= 4;
        if (sparse) { RC_PUT_SPARSE(x3, i + 3); RC_PUT_SPARSE(x2, i + 2); RC_PUT_SPARSE(x1, i + 1); RC_PUT_SPARSE(x0, i); }
        else        { RC_PUT(x3, i + 3); RC_PUT(x2, i + 2); RC_PUT(x1, i + 1); RC_PUT(x0, i); }
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    return nk;
}
#undef RC_PUT_SPARSE

/* 32 states: tokens [0, i) backwards (i a multiple of 32), four states at a
 * time in registers, in the same order as 32 states one token at a time. */
LMC_FORCE_INLINE size_t rc_rounds32(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk, unsigned sh16)
{
    const uint16_t* const key = ws->key;
    uint32_t xs[LMC_REFCTX_STATES_WIDE];   /* not aliased by the word stores */
    memcpy(xs, x, sizeof(xs));
#define RC_SUB(b)                                                                            \
    do {                                                                                     \
        uint32_t x0 = xs[b], x1 = xs[b + 1], x2 = xs[b + 2], x3 = xs[b + 3];                 \
        RC_PUT(x3, i + b + 3); RC_PUT(x2, i + b + 2); RC_PUT(x1, i + b + 1); RC_PUT(x0, i + b); \
        xs[b] = x0; xs[b + 1] = x1; xs[b + 2] = x2; xs[b + 3] = x3;                          \
    } while (0)
    while (i) {
        i -= LMC_REFCTX_STATES_WIDE;
        RC_SUB(28); RC_SUB(24); RC_SUB(20); RC_SUB(16); RC_SUB(12); RC_SUB(8); RC_SUB(4); RC_SUB(0);
    }
#undef RC_SUB
    memcpy(x, xs, sizeof(xs));
    return nk;
}

#if LMC_HAS_AVX512_DISPATCH
/* For test_refctx: rc_next against exact division, for every f in 1..M
 * and, for each, x at both ends of every quotient of a spread of
 * quotients (all below 2^12, then a stride) and the top of the range;
 * then states that renormalise first (x >= f << 19), x >> 16 at both ends
 * of every quotient below 2^15, with the low word all zeros or all ones.
 * Returns the number of wrong states. */
LMC_TARGET_AVX512 static long rc_next_batch(uint32_t* xs, uint32_t* fs, uint32_t* cs)
{
    uint32_t out[16];
    __m512i const x = _mm512_loadu_si512((const void*)xs), f = _mm512_loadu_si512((const void*)fs);
    __mmask16 const sh = _mm512_cmpge_epu32_mask(x, _mm512_slli_epi32(f, 19));
    _mm512_storeu_si512((void*)out, rc_next(x, f, _mm512_loadu_si512((const void*)cs), sh));
    long bad = 0;
    for (unsigned j = 0; j < 16; j++) {
        uint32_t const x1 = xs[j] >= (uint64_t)fs[j] << 19 ? xs[j] >> 16 : xs[j];
        bad += out[j] != cs[j] + x1 % fs[j] + (x1 / fs[j]) * LMC_ANS_M;
    }
    return bad;
}

LMC_TARGET_AVX512 static long rc_next_misses_avx512(void)
{
    long bad = 0;
    uint32_t xs[16], fs[16], cs[16];
    unsigned n = 0;
    for (uint32_t f = 1; f <= LMC_ANS_M; f++) {
        uint32_t const cum = (f * 2654435761u) % (LMC_ANS_M - f + 1);
        for (uint32_t q = 0; q < (1u << 19); q = q < 4096 ? q + 1 : q + 997 + (q & 255)) {
            for (int e = 0; e < 7; e++) {
                uint64_t x;
                if (e < 3) {
                    x = e == 2 ? ((uint64_t)f << 19) - 1 : (uint64_t)q * f + (e ? f - 1 : 0);
                    if (x == 0 || x >= ((uint64_t)f << 19)) continue;
                } else {
                    uint64_t const x1 = (uint64_t)q * f + (e & 1 ? f - 1 : 0);
                    x = x1 << 16 | (e < 5 ? 0 : 0xFFFF);
                    if (x1 >= (1u << 15) || x < ((uint64_t)f << 19) || x >= (1ull << 31)) continue;
                }
                xs[n] = (uint32_t)x; fs[n] = f; cs[n] = cum;
                if (++n < 16) continue;
                bad += rc_next_batch(xs, fs, cs);
                n = 0;
            }
        }
    }
    return bad;
}
#endif

long lmc_refctx_next_misses(void)
{
#if LMC_HAS_AVX512_DISPATCH
    if (lmc_cpu_has_avx512()) return rc_next_misses_avx512();
#endif
    return -1;
}

#if LMC_HAS_AVX512_DISPATCH
/* rc_lanes_fc with the fields gathered from efc by key */
LMC_TARGET_AVX512 LMC_FORCE_INLINE size_t rc_lanes(const lmc_refctx_ws* ws, __m512i k, __m512i* xs, uint8_t* wp, size_t nk)
{
    return rc_lanes_fc(_mm512_i32gather_epi32(k, (const int*)(const void*)ws->efc, 4), xs, wp, nk);
}

/* rc_rounds32 with AVX-512: states 0-15 and 16-31 in two vectors; a round
 * codes tokens i+16..i+31 first (their words lie above those of i..i+15). */
LMC_TARGET_AVX512 static size_t rc_rounds32_avx512(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk)
{
    __m512i xa = _mm512_loadu_si512((const void*)x), xb = _mm512_loadu_si512((const void*)(x + 16));
    while (i) {
        i -= LMC_REFCTX_STATES_WIDE;
        __m512i const kb = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(ws->key + i + 16)));
        __m512i const ka = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(ws->key + i)));
        nk = rc_lanes(ws, kb, &xb, wp, nk);
        nk = rc_lanes(ws, ka, &xa, wp, nk);
    }
    _mm512_storeu_si512((void*)x, xa);
    _mm512_storeu_si512((void*)(x + 16), xb);
    return nk;
}
#endif

#if LMC_HAS_AVX512_DISPATCH
/* rc_rounds32_avx512 with each token's fields (efc) looked up by scalar
 * loads and stores, a round of 64 tokens ahead, into a ring of two rounds
 * that the vector loop then loads whole: the rANS arithmetic keeps the
 * vector ports busy, and the integer ports and the load and store units
 * have room for the lookups beside it. For where gathers are slow (the AMD
 * EPYC VMs, Zen 5): the two 16-lane gathers of a round took about a
 * quarter of bf16 delta compression. Until 2026-12-05 the fields came from
 * byte permutes of per-group planes (about 5 permutes a pair of groups for
 * 64 tokens, on the ports the arithmetic uses): this is 3.3-4.3 % faster
 * compressing the bf16 deltas of traj-3m and t19m, 2.7 % the fp32 delta,
 * 1.1-1.6 % the moments delta (bench/ab.sh), the same bytes. Filling the ring after the round's
 * coding instead of before was 13 % slower; two rounds ahead, no faster;
 * two fields a 64-bit store, slower. */
LMC_TARGET_AVX512 static size_t rc_rounds32_ring(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk)
{
    uint32_t ring[2][64] __attribute__((aligned(64)));
    const uint32_t* const efc = ws->efc;
    const uint16_t* const key = ws->key;
    __m512i xa = _mm512_loadu_si512((const void*)x), xb = _mm512_loadu_si512((const void*)(x + 16));
    if (i & 32) {   /* an odd round first: the loop below takes two */
        i -= LMC_REFCTX_STATES_WIDE;
        __m512i const kb = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(key + i + 16)));
        __m512i const ka = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(key + i)));
        nk = rc_lanes(ws, kb, &xb, wp, nk);
        nk = rc_lanes(ws, ka, &xa, wp, nk);
    }
    unsigned cur = 0;   /* the ring's round to code */
    if (i)
        for (unsigned j = 0; j < 64; j++) ring[0][j] = efc[key[i - 64 + j]];
    while (i) {
        i -= 2 * LMC_REFCTX_STATES_WIDE;
        if (i) {
            uint32_t* const nx = ring[cur ^ 1];
            const uint16_t* const k = key + i - 64;
            for (unsigned j = 0; j < 64; j += 4) {
                uint64_t kk = lmc_rd64(k + j);   /* four keys */
                LMC_SCALAR_ONLY(kk);
                nx[j] = efc[kk & 0xFFFF]; nx[j + 1] = efc[(kk >> 16) & 0xFFFF];
                nx[j + 2] = efc[(kk >> 32) & 0xFFFF]; nx[j + 3] = efc[kk >> 48];
            }
        }
        const uint32_t* const r = ring[cur];
        nk = rc_lanes_fc(_mm512_load_si512((const void*)(r + 48)), &xb, wp, nk);   /* tokens i + 48 .. i + 63 */
        nk = rc_lanes_fc(_mm512_load_si512((const void*)(r + 32)), &xa, wp, nk);
        nk = rc_lanes_fc(_mm512_load_si512((const void*)(r + 16)), &xb, wp, nk);
        nk = rc_lanes_fc(_mm512_load_si512((const void*)r), &xa, wp, nk);
        cur ^= 1;
    }
    _mm512_storeu_si512((void*)x, xa);
    _mm512_storeu_si512((void*)(x + 16), xb);
    return nk;
}
#endif

static size_t rc_rounds_plain(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk)
{
    if (ws->states == LMC_ANS_STATES) return ws->sparse ? rc_rounds(ws, i, x, wp, nk, 16, 1) : rc_rounds(ws, i, x, wp, nk, 16, 0);
    return rc_rounds32(ws, i, x, wp, nk, 16);
}
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t rc_rounds_bmi2(const lmc_refctx_ws* ws, size_t i, uint32_t* x, uint8_t* wp, size_t nk)
{
    unsigned sh16 = 16;
    __asm__("" : "+r"(sh16));
    if (ws->states == LMC_ANS_STATES) return ws->sparse ? rc_rounds(ws, i, x, wp, nk, sh16, 1) : rc_rounds(ws, i, x, wp, nk, sh16, 0);
    return rc_rounds32(ws, i, x, wp, nk, sh16);
}
#endif

size_t lmc_refctx_encode(lmc_refctx_ws* ws, uint8_t* dst, size_t cap)
{
    unsigned const alpha = ws->alpha, G = ws->ngroups;
    size_t const m = ws->m;
    size_t const raw_bytes = (size_t)((ws->raw_bits + 7) / 8);

    size_t head = 1 + 3 + 1 + (G - 1);
    for (unsigned g = 0; g < G; g++) head += lmc_freq_size(ws->freq[g], alpha);
    unsigned const S = ws->states;
    size_t const raw_at = head + 4 * S + 4;
    if (raw_at + raw_bytes > cap) return 0;
    int lanes512 = 0;
#if LMC_HAS_AVX512_DISPATCH
    lanes512 = S == LMC_REFCTX_STATES_WIDE && lmc_cpu_has_avx512();
#endif
    key_tables(ws, !lanes512 || (m & (S - 1)));

    /* tokens, backwards; symbol i uses state i mod S and the table of its context */
    uint8_t* const wend = ws->words + sizeof(ws->words);
    uint8_t* const wp = wend - 2;
    size_t nk = 0;
    unsigned const sh16 = 16;
    const uint16_t* const key = ws->key;
    uint32_t x[LMC_REFCTX_STATES_MAX];
    for (unsigned j = 0; j < S; j++) x[j] = LMC_ANS_L;
    size_t i = m;
    while (i & (S - 1)) {         /* the tail first: coding runs backwards */
        i--;
        uint32_t xs = x[i & (S - 1)];
        RC_PUT(xs, i);
        x[i & (S - 1)] = xs;
    }
#if LMC_HAS_AVX512_DISPATCH
    if (lanes512 && !lmc_cpu_gathers_fast()) nk = rc_rounds32_ring(ws, i, x, wp, nk);
    else if (lanes512) nk = rc_rounds32_avx512(ws, i, x, wp, nk);
    else
#endif
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) nk = rc_rounds_bmi2(ws, i, x, wp, nk);
    else
#endif
    nk = rc_rounds_plain(ws, i, x, wp, nk);
#undef RC_PUT
#undef RC_QUOT
#undef RC_FLUSH
    uint8_t* const p = wp + 2 + 2 * (ptrdiff_t)nk;
    size_t const nwords = (size_t)(wend - p);
    size_t const total = raw_at + raw_bytes + nwords;
    if (total > cap) return 0;

    uint8_t* o = dst;
    *o++ = LMC_KIND_REFCTX;
    lmc_wr24(o, (uint32_t)(total - 4)); o += 3;
    *o++ = (uint8_t)(G | (S == LMC_ANS_STATES ? 0 : LMC_REFCTX_WIDE));
    for (unsigned g = 1; g < G; g++) *o++ = ws->bound[g];
    for (unsigned g = 0; g < G; g++) o += lmc_freq_write(o, ws->freq[g], alpha);
    for (unsigned j = 0; j < S; j++) { lmc_wr32(o, x[j]); o += 4; }
    lmc_wr32(o, (uint32_t)raw_bytes); o += 4;

    memcpy(o, ws->raw, raw_bytes);
    o += raw_bytes;
    memcpy(o, p, nwords);
    return total;
}
