/* rans_lanes.h - rANS encoding of 16 states at once with AVX-512, for the
 * 32-state blocks of REFCTX (refctx_enc.c) and ANS1 (ans_enc.c): M = 2^12,
 * 32-bit states in [L, 2^31), L = 2^15, one 16-bit word out per symbol at
 * most. Fields of a symbol: f | cum << 13. */
#ifndef LMC_RANS_LANES_H
#define LMC_RANS_LANES_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"
#include "mem.h"

#if LMC_HAS_AVX512_DISPATCH
#include <immintrin.h>

/* The state after coding a token of frequency f and cumulative frequency
 * cum into x, 16 lanes; out: the lanes where x >= f << 19, which first
 * send their low word out (x' = x >> 16; else x' = x, and 1 <= x' < f << 19
 * either way). The new state is x' + cum + q (M - f) with q = x' div f,
 * which is cum + (x' mod f) + q M. q comes from single floats: x rounded
 * (2^-24 relative), 1/f from the 14-bit estimate and a Newton step whose
 * 2 is raised by 2^-20 (r (2 + 2^-20 - f r): the step's result plus
 * r 2^-20), so that the estimate of x / f is above it (the errors below
 * add to about 4 * 2^-24) by less than 2^-19 relative, which for a
 * quotient under 2^19 is less than 1: its floor q' is q or q + 1. The
 * remainder x' - q' f is below 0 exactly when q' is one too many, and
 * taking M - f corrects it. The quotient of x >> 16 is estimated from x
 * too, as x / f scaled by 2^-16 (the floor of x / (f 2^16) is that of
 * (x >> 16) / f, and the estimate's error is as small), and the lane's is
 * picked after: the compare is not on the chain from one state to the
 * next, which is what a block's coding waits on (its two vectors of states
 * depend each on itself). Until 2026-12-05 the shifted state was converted
 * after the compare and q' corrected both ways: this is about 2 % faster
 * compressing the bf16 deltas, 3 % the fp32 delta (bench/ab.sh), the same
 * states. Two double-precision halves with two Newton steps each cost
 * twice the vector work (+7 % for the whole bf16 delta on the AMD EPYC VM). */
LMC_TARGET_AVX512 LMC_FORCE_INLINE __m512i rc_next(__m512i x, __m512i f, __m512i cum, __mmask16 out)
{
    __m512 const ff = _mm512_cvtepu32_ps(f);
    __m512 r = _mm512_rcp14_ps(ff);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(ff, r, _mm512_set1_ps(2.0f + 1.0f / 1048576.0f)));
    __m512 const xf = _mm512_cvtepu32_ps(x);
    __m512i const q = _mm512_mask_blend_epi32(out, _mm512_cvttps_epu32(_mm512_mul_ps(xf, r)),
                                              _mm512_cvttps_epu32(_mm512_mul_ps(xf, _mm512_mul_ps(r, _mm512_set1_ps(1.0f / 65536.0f)))));
    __m512i const x1 = _mm512_mask_srli_epi32(x, out, x, 16);
    __m512i const mf = _mm512_sub_epi32(_mm512_set1_epi32(LMC_ANS_M), f);
    __m512i const y = _mm512_add_epi32(_mm512_add_epi32(x1, cum), _mm512_mullo_epi32(q, mf));
    __m512i const rem = _mm512_sub_epi32(x1, _mm512_mullo_epi32(q, f));
    return _mm512_mask_sub_epi32(y, _mm512_cmplt_epi32_mask(rem, _mm512_setzero_si512()), y, mf);
}

/* 16 symbols (tokens) of fields fc into the states *xs, one per lane, as
 * the scalar coders do each: the word out first where x >= f << 19 (the lanes' words, in lane
 * order, end at word nk: written as 16 words whose unused low ones later
 * words overwrite), then rc_next. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE size_t rc_lanes_fc(__m512i fc, __m512i* xs, uint8_t* wp, size_t nk)
{
    __m512i x = *xs;
    __m512i const f = _mm512_and_si512(fc, _mm512_set1_epi32(0x1FFF));
    __m512i const cum = _mm512_srli_epi32(fc, 13);
    __mmask16 const out = _mm512_cmpge_epu32_mask(x, _mm512_slli_epi32(f, 19));
    unsigned const n = (unsigned)_mm_popcnt_u32(out);
    _mm256_mask_storeu_epi16((void*)(wp + 2 * ((ptrdiff_t)nk + 1 - (ptrdiff_t)n)), (__mmask16)((1u << n) - 1),
                             _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(out, x)));
    nk -= n;
    *xs = rc_next(x, f, cum, out);
    return nk;
}
#endif

#endif
