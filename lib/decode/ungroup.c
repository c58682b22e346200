/* ungroup.c - the last pass of decoding, fused like the encoder's first. */
#include <string.h>
#include "ungroup.h"
#include "mem.h"
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

LMC_FORCE_INLINE uint16_t unrot16(uint16_t v) { return (uint16_t)((v >> 1) | (v << 15)); }
LMC_FORCE_INLINE uint32_t unrot32(uint32_t v) { return (v >> 1) | (v << 31); }
LMC_FORCE_INLINE uint64_t unrot64(uint64_t v) { return (v >> 1) | (v << 63); }

#define UNGROUP2(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint16_t v = (uint16_t)(s0[i] | (s1[i] << 8)); \
        if (ROT) v = unrot16(v); \
        if (REF) v ^= lmc_rd16(ref + 2 * i); \
        lmc_wr16(dst + 2 * i, v); \
    }
#define UNGROUP4(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint32_t v = (uint32_t)s0[i] | ((uint32_t)s1[i] << 8) | ((uint32_t)s2[i] << 16) | ((uint32_t)s3[i] << 24); \
        if (ROT) v = unrot32(v); \
        if (REF) v ^= lmc_rd32(ref + 4 * i); \
        lmc_wr32(dst + 4 * i, v); \
    }

#if defined(__SSE2__)
/* Both loops prefetch the output for writing (LMC_PREFETCH_W): the lines are
 * new (the caller's buffer), and the pass is bound by memory, not by its
 * shuffles (keyframe decompression, alternated pairs in both orders: bf16
 * +5 %, fp32 +11 %). */
static size_t ungroup2_sse2(uint8_t* dst, const uint8_t* s0, const uint8_t* s1, const uint8_t* ref, size_t n, int rot)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        LMC_PREFETCH_W(dst + 2 * i);
        __m128i const a = _mm_loadu_si128((const __m128i*)(s0 + i));
        __m128i const b = _mm_loadu_si128((const __m128i*)(s1 + i));
        __m128i v0 = _mm_unpacklo_epi8(a, b), v1 = _mm_unpackhi_epi8(a, b);
        if (rot) {
            v0 = _mm_or_si128(_mm_srli_epi16(v0, 1), _mm_slli_epi16(v0, 15));
            v1 = _mm_or_si128(_mm_srli_epi16(v1, 1), _mm_slli_epi16(v1, 15));
        }
        if (ref) {
            v0 = _mm_xor_si128(v0, _mm_loadu_si128((const __m128i*)(ref + 2 * i)));
            v1 = _mm_xor_si128(v1, _mm_loadu_si128((const __m128i*)(ref + 2 * i + 16)));
        }
        _mm_storeu_si128((__m128i*)(dst + 2 * i), v0);
        _mm_storeu_si128((__m128i*)(dst + 2 * i + 16), v1);
    }
    return i;
}

static size_t ungroup4_sse2(uint8_t* dst, const uint8_t* s0, const uint8_t* s1, const uint8_t* s2, const uint8_t* s3,
                            const uint8_t* ref, size_t n, int rot)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        LMC_PREFETCH_W(dst + 4 * i);
        __m128i const a = _mm_loadu_si128((const __m128i*)(s0 + i)), b = _mm_loadu_si128((const __m128i*)(s1 + i));
        __m128i const c = _mm_loadu_si128((const __m128i*)(s2 + i)), d = _mm_loadu_si128((const __m128i*)(s3 + i));
        __m128i const L0 = _mm_unpacklo_epi8(a, b), L1 = _mm_unpackhi_epi8(a, b);
        __m128i const H0 = _mm_unpacklo_epi8(c, d), H1 = _mm_unpackhi_epi8(c, d);
        __m128i v[4] = { _mm_unpacklo_epi16(L0, H0), _mm_unpackhi_epi16(L0, H0),
                         _mm_unpacklo_epi16(L1, H1), _mm_unpackhi_epi16(L1, H1) };
        for (int k = 0; k < 4; k++) {
            if (rot) v[k] = _mm_or_si128(_mm_srli_epi32(v[k], 1), _mm_slli_epi32(v[k], 31));
            if (ref) v[k] = _mm_xor_si128(v[k], _mm_loadu_si128((const __m128i*)(ref + 4 * i + 16 * k)));
            _mm_storeu_si128((__m128i*)(dst + 4 * i + 16 * k), v[k]);
        }
    }
    return i;
}
#endif

#if LMC_HAS_AVX2_DISPATCH
#  include <immintrin.h>
/* 32 values a step: the SSE2 loops' unpacks in both 128-bit lanes (values
 * 0-15 in lane 0, 16-31 in lane 1), then the lanes' halves put in order. */
LMC_TARGET_AVX2 LMC_FORCE_INLINE __m256i fix_avx2(__m256i v, const uint8_t* ref, int rot, unsigned bits)
{
    if (rot) v = bits == 16 ? _mm256_or_si256(_mm256_srli_epi16(v, 1), _mm256_slli_epi16(v, 15))
                            : _mm256_or_si256(_mm256_srli_epi32(v, 1), _mm256_slli_epi32(v, 31));
    if (ref) v = _mm256_xor_si256(v, _mm256_loadu_si256((const __m256i*)(const void*)ref));
    return v;
}

LMC_TARGET_AVX2 static size_t ungroup2_avx2(uint8_t* dst, const uint8_t* s0, const uint8_t* s1, const uint8_t* ref,
                                            size_t n, int rot)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        LMC_PREFETCH_W(dst + 2 * i);
        LMC_PREFETCH_W(dst + 2 * i + 32);
        __m256i const a = _mm256_loadu_si256((const __m256i*)(const void*)(s0 + i));
        __m256i const b = _mm256_loadu_si256((const __m256i*)(const void*)(s1 + i));
        __m256i const L0 = _mm256_unpacklo_epi8(a, b), L1 = _mm256_unpackhi_epi8(a, b);
        __m256i const v0 = _mm256_permute2x128_si256(L0, L1, 0x20), v1 = _mm256_permute2x128_si256(L0, L1, 0x31);
        _mm256_storeu_si256((__m256i*)(void*)(dst + 2 * i), fix_avx2(v0, ref ? ref + 2 * i : NULL, rot, 16));
        _mm256_storeu_si256((__m256i*)(void*)(dst + 2 * i + 32), fix_avx2(v1, ref ? ref + 2 * i + 32 : NULL, rot, 16));
    }
    return i;
}

LMC_TARGET_AVX2 static size_t ungroup4_avx2(uint8_t* dst, const uint8_t* s0, const uint8_t* s1, const uint8_t* s2,
                                            const uint8_t* s3, const uint8_t* ref, size_t n, int rot)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        LMC_PREFETCH_W(dst + 4 * i);
        LMC_PREFETCH_W(dst + 4 * i + 64);
        __m256i const a = _mm256_loadu_si256((const __m256i*)(const void*)(s0 + i));
        __m256i const b = _mm256_loadu_si256((const __m256i*)(const void*)(s1 + i));
        __m256i const c = _mm256_loadu_si256((const __m256i*)(const void*)(s2 + i));
        __m256i const d = _mm256_loadu_si256((const __m256i*)(const void*)(s3 + i));
        __m256i const L0 = _mm256_unpacklo_epi8(a, b), L1 = _mm256_unpackhi_epi8(a, b);
        __m256i const H0 = _mm256_unpacklo_epi8(c, d), H1 = _mm256_unpackhi_epi8(c, d);
        /* lane 0 / lane 1: values 0-3 / 16-19, 4-7 / 20-23, 8-11 / 24-27, 12-15 / 28-31 */
        __m256i const V0 = _mm256_unpacklo_epi16(L0, H0), V1 = _mm256_unpackhi_epi16(L0, H0);
        __m256i const V2 = _mm256_unpacklo_epi16(L1, H1), V3 = _mm256_unpackhi_epi16(L1, H1);
        __m256i const v[4] = { _mm256_permute2x128_si256(V0, V1, 0x20), _mm256_permute2x128_si256(V2, V3, 0x20),
                               _mm256_permute2x128_si256(V0, V1, 0x31), _mm256_permute2x128_si256(V2, V3, 0x31) };
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i*)(void*)(dst + 4 * i + 32 * k), fix_avx2(v[k], ref ? ref + 4 * i + 32 * k : NULL, rot, 32));
    }
    return i;
}
#endif

void lmc_ungroup(uint8_t* dst, const uint8_t* streams, const uint8_t* ref, size_t n, unsigned w, int rotated)
{
    const uint8_t* sp[8];
    for (unsigned k = 0; k < w && k < 8; k++) sp[k] = streams + (size_t)k * n;
    lmc_ungroup_from(dst, sp, ref, n, w, rotated);
}

void lmc_ungroup_from(uint8_t* dst, const uint8_t* const* sp, const uint8_t* ref, size_t n, unsigned w, int rotated)
{
    const uint8_t* const streams = sp[0];
    if (w == 1) {
        if (!ref) { memcpy(dst, streams, n); return; }
        for (size_t i = 0; i < n; i++) dst[i] = streams[i] ^ ref[i];
        return;
    }
    if (w == 2) {
        const uint8_t* s0 = sp[0]; const uint8_t* s1 = sp[1];
#if LMC_HAS_AVX2_DISPATCH
        if (lmc_cpu_has_avx2()) {
            size_t const d2 = ungroup2_avx2(dst, s0, s1, ref, n, rotated);
            s0 += d2; s1 += d2; dst += 2 * d2; if (ref) ref += 2 * d2; n -= d2;
        }
#endif
#if defined(__SSE2__)
        size_t const done = ungroup2_sse2(dst, s0, s1, ref, n, rotated);
        s0 += done; s1 += done; dst += 2 * done; if (ref) ref += 2 * done; n -= done;
#endif
        if (ref) { if (rotated) { UNGROUP2(1, 1) } else { UNGROUP2(1, 0) } }
        else     { if (rotated) { UNGROUP2(0, 1) } else { UNGROUP2(0, 0) } }
        return;
    }
    if (w == 4) {
        const uint8_t* s0 = sp[0]; const uint8_t* s1 = sp[1];
        const uint8_t* s2 = sp[2]; const uint8_t* s3 = sp[3];
#if LMC_HAS_AVX2_DISPATCH
        if (lmc_cpu_has_avx2()) {
            size_t const d4 = ungroup4_avx2(dst, s0, s1, s2, s3, ref, n, rotated);
            s0 += d4; s1 += d4; s2 += d4; s3 += d4; dst += 4 * d4; if (ref) ref += 4 * d4; n -= d4;
        }
#endif
#if defined(__SSE2__)
        size_t const done = ungroup4_sse2(dst, s0, s1, s2, s3, ref, n, rotated);
        s0 += done; s1 += done; s2 += done; s3 += done; dst += 4 * done; if (ref) ref += 4 * done; n -= done;
#endif
        if (ref) { if (rotated) { UNGROUP4(1, 1) } else { UNGROUP4(1, 0) } }
        else     { if (rotated) { UNGROUP4(0, 1) } else { UNGROUP4(0, 0) } }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (unsigned k = 0; k < 8; k++) v |= (uint64_t)sp[k][i] << (8 * k);
        if (rotated) v = unrot64(v);
        if (ref) v ^= lmc_rd64(ref + 8 * i);
        lmc_wr64(dst + 8 * i, v);
    }
}
