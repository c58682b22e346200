/* group.c - the first pass over the input: delta, rotate, scatter bytes. */
#include <string.h>
#include "group.h"
#include "mem.h"
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#if LMC_HAS_AVX2_DISPATCH
#  include <immintrin.h>
#endif

LMC_FORCE_INLINE uint16_t rot16(uint16_t v) { return (uint16_t)((v << 1) | (v >> 15)); }
LMC_FORCE_INLINE uint32_t rot32(uint32_t v) { return (v << 1) | (v >> 31); }
LMC_FORCE_INLINE uint64_t rot64(uint64_t v) { return (v << 1) | (v >> 63); }

/* Specialised per (width, ref?, rotated?) so the inner loops carry no branches. */
#define GROUP2(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint16_t v = lmc_rd16(src + 2 * i); \
        if (REF) v ^= lmc_rd16(ref + 2 * i); \
        if (ROT) v = rot16(v); \
        d0[i] = (uint8_t)v; d1[i] = (uint8_t)(v >> 8); \
    }
#define GROUP4(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint32_t v = lmc_rd32(src + 4 * i); \
        if (REF) v ^= lmc_rd32(ref + 4 * i); \
        if (ROT) v = rot32(v); \
        d0[i] = (uint8_t)v; d1[i] = (uint8_t)(v >> 8); d2[i] = (uint8_t)(v >> 16); d3[i] = (uint8_t)(v >> 24); \
    }

#if defined(__SSE2__)
/* 16 values per step: XOR, rotate, then split bytes with the pack trick
 * (mask/shift the 16-bit lanes, packus to bytes). SSE2 is baseline on x86-64. */
static size_t group2_sse2(uint8_t* d0, uint8_t* d1, const uint8_t* src, const uint8_t* ref, size_t n, int rot)
{
    __m128i const lo = _mm_set1_epi16(0xFF);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i*)(src + 2 * i));
        __m128i b = _mm_loadu_si128((const __m128i*)(src + 2 * i + 16));
        if (ref) {
            a = _mm_xor_si128(a, _mm_loadu_si128((const __m128i*)(ref + 2 * i)));
            b = _mm_xor_si128(b, _mm_loadu_si128((const __m128i*)(ref + 2 * i + 16)));
        }
        if (rot) {
            a = _mm_or_si128(_mm_slli_epi16(a, 1), _mm_srli_epi16(a, 15));
            b = _mm_or_si128(_mm_slli_epi16(b, 1), _mm_srli_epi16(b, 15));
        }
        _mm_storeu_si128((__m128i*)(d0 + i), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
        _mm_storeu_si128((__m128i*)(d1 + i), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
    }
    return i;
}

/* 8 values per step: split 32-bit lanes into 16-bit halves, then into bytes. */
static size_t group4_sse2(uint8_t* d0, uint8_t* d1, uint8_t* d2, uint8_t* d3, const uint8_t* src, const uint8_t* ref, size_t n, int rot)
{
    __m128i const lo8 = _mm_set1_epi16(0xFF);
    __m128i const lo16 = _mm_set1_epi32(0xFFFF);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = _mm_loadu_si128((const __m128i*)(src + 4 * i + 16 * k));
            if (ref) v[k] = _mm_xor_si128(v[k], _mm_loadu_si128((const __m128i*)(ref + 4 * i + 16 * k)));
            if (rot) v[k] = _mm_or_si128(_mm_slli_epi32(v[k], 1), _mm_srli_epi32(v[k], 31));
        }
        /* packus_epi32 is SSE4.1: sign-safe narrowing via shift pairs instead */
        __m128i l0 = _mm_srai_epi32(_mm_slli_epi32(_mm_and_si128(v[0], lo16), 16), 16);
        __m128i l1 = _mm_srai_epi32(_mm_slli_epi32(_mm_and_si128(v[1], lo16), 16), 16);
        __m128i l2 = _mm_srai_epi32(_mm_slli_epi32(_mm_and_si128(v[2], lo16), 16), 16);
        __m128i l3 = _mm_srai_epi32(_mm_slli_epi32(_mm_and_si128(v[3], lo16), 16), 16);
        __m128i h0 = _mm_srai_epi32(v[0], 16), h1 = _mm_srai_epi32(v[1], 16);
        __m128i h2 = _mm_srai_epi32(v[2], 16), h3 = _mm_srai_epi32(v[3], 16);
        __m128i const L01 = _mm_packs_epi32(l0, l1), L23 = _mm_packs_epi32(l2, l3);  /* low 16-bit halves */
        __m128i const H01 = _mm_packs_epi32(h0, h1), H23 = _mm_packs_epi32(h2, h3);  /* high 16-bit halves */
        _mm_storeu_si128((__m128i*)(d0 + i), _mm_packus_epi16(_mm_and_si128(L01, lo8), _mm_and_si128(L23, lo8)));
        _mm_storeu_si128((__m128i*)(d1 + i), _mm_packus_epi16(_mm_srli_epi16(L01, 8), _mm_srli_epi16(L23, 8)));
        _mm_storeu_si128((__m128i*)(d2 + i), _mm_packus_epi16(_mm_and_si128(H01, lo8), _mm_and_si128(H23, lo8)));
        _mm_storeu_si128((__m128i*)(d3 + i), _mm_packus_epi16(_mm_srli_epi16(H01, 8), _mm_srli_epi16(H23, 8)));
    }
    return i;
}
#endif

#if LMC_HAS_AVX2_DISPATCH
/* Both AVX2 loops prefetch their input (LMC_PREFETCH_R): the first pass over a
 * file's bytes waits on memory on the VMs measured (keyframe compression,
 * alternated pairs in both orders: bf16 about +3 %, Adam moments no worse). */
/* 32 values per step: pshufb gathers each 128-bit lane's low bytes into its
 * first 8 bytes and high bytes into its last 8, then whole 64-bit quarters
 * move into place (twice the SSE2 pack's values per instruction). */
LMC_TARGET_AVX2 static size_t group2_avx2(uint8_t* d0, uint8_t* d1, const uint8_t* src, const uint8_t* ref, size_t n, int rot)
{
    __m256i const split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                           0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        LMC_PREFETCH_R(src + 2 * i);
        if (ref) LMC_PREFETCH_R(ref + 2 * i);
        __m256i a = _mm256_loadu_si256((const __m256i*)(src + 2 * i));
        __m256i b = _mm256_loadu_si256((const __m256i*)(src + 2 * i + 32));
        if (ref) {
            a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i*)(ref + 2 * i)));
            b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i*)(ref + 2 * i + 32)));
        }
        if (rot) {
            a = _mm256_or_si256(_mm256_slli_epi16(a, 1), _mm256_srli_epi16(a, 15));
            b = _mm256_or_si256(_mm256_slli_epi16(b, 1), _mm256_srli_epi16(b, 15));
        }
        /* quarters lo0 hi0 lo1 hi1 -> lo0 lo1 hi0 hi1 */
        a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, split), 0xD8);
        b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, split), 0xD8);
        _mm256_storeu_si256((__m256i*)(d0 + i), _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256((__m256i*)(d1 + i), _mm256_permute2x128_si256(a, b, 0x31));
    }
    return i;
}

/* 32 values per step: pshufb and a dword permute leave each register as four
 * 64-bit quarters (byte k of its 8 values in quarter k); a 4x4 transpose of
 * quarters across the four registers gives the four streams. */
LMC_TARGET_AVX2 static size_t group4_avx2(uint8_t* d0, uint8_t* d1, uint8_t* d2, uint8_t* d3, const uint8_t* src,
                                          const uint8_t* ref, size_t n, int rot)
{
    __m256i const split = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                           0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m256i const perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v[4];
        LMC_PREFETCH_R(src + 4 * i);
        LMC_PREFETCH_R(src + 4 * i + 64);
        if (ref) { LMC_PREFETCH_R(ref + 4 * i); LMC_PREFETCH_R(ref + 4 * i + 64); }
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_si256((const __m256i*)(src + 4 * i + 32 * k));
            if (ref) v[k] = _mm256_xor_si256(v[k], _mm256_loadu_si256((const __m256i*)(ref + 4 * i + 32 * k)));
            if (rot) v[k] = _mm256_or_si256(_mm256_slli_epi32(v[k], 1), _mm256_srli_epi32(v[k], 31));
            v[k] = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v[k], split), perm);
        }
        __m256i const t0 = _mm256_unpacklo_epi64(v[0], v[1]), t1 = _mm256_unpackhi_epi64(v[0], v[1]);
        __m256i const t2 = _mm256_unpacklo_epi64(v[2], v[3]), t3 = _mm256_unpackhi_epi64(v[2], v[3]);
        _mm256_storeu_si256((__m256i*)(d0 + i), _mm256_permute2x128_si256(t0, t2, 0x20));
        _mm256_storeu_si256((__m256i*)(d1 + i), _mm256_permute2x128_si256(t1, t3, 0x20));
        _mm256_storeu_si256((__m256i*)(d2 + i), _mm256_permute2x128_si256(t0, t2, 0x31));
        _mm256_storeu_si256((__m256i*)(d3 + i), _mm256_permute2x128_si256(t1, t3, 0x31));
    }
    return i;
}
#endif

void lmc_group(uint8_t* dst, const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int rotated)
{
    if (w == 1) {
        if (!ref) { memcpy(dst, src, n); return; }
        for (size_t i = 0; i < n; i++) dst[i] = src[i] ^ ref[i];
        return;
    }
    if (w == 2) {
        uint8_t* d0 = dst; uint8_t* d1 = dst + n;
#if LMC_HAS_AVX2_DISPATCH
        if (lmc_cpu_has_avx2()) {
            size_t const done = group2_avx2(d0, d1, src, ref, n, rotated);
            d0 += done; d1 += done; src += 2 * done; if (ref) ref += 2 * done;
            n -= done;
        }
#endif
#if defined(__SSE2__)
        {
            size_t const done = group2_sse2(d0, d1, src, ref, n, rotated);
            d0 += done; d1 += done; src += 2 * done; if (ref) ref += 2 * done;
            n -= done;
        }
#endif
        if (ref) { if (rotated) { GROUP2(1, 1) } else { GROUP2(1, 0) } }
        else     { if (rotated) { GROUP2(0, 1) } else { GROUP2(0, 0) } }
        return;
    }
    if (w == 4) {
        size_t const total = n;
        uint8_t* d0 = dst; uint8_t* d1 = dst + total; uint8_t* d2 = dst + 2 * total; uint8_t* d3 = dst + 3 * total;
#if LMC_HAS_AVX2_DISPATCH
        if (lmc_cpu_has_avx2()) {
            size_t const done = group4_avx2(d0, d1, d2, d3, src, ref, n, rotated);
            d0 += done; d1 += done; d2 += done; d3 += done; src += 4 * done; if (ref) ref += 4 * done;
            n -= done;
        }
#endif
#if defined(__SSE2__)
        {
            size_t const done = group4_sse2(d0, d1, d2, d3, src, ref, n, rotated);
            d0 += done; d1 += done; d2 += done; d3 += done; src += 4 * done; if (ref) ref += 4 * done;
            n -= done;
        }
#endif
        if (ref) { if (rotated) { GROUP4(1, 1) } else { GROUP4(1, 0) } }
        else     { if (rotated) { GROUP4(0, 1) } else { GROUP4(0, 0) } }
        return;
    }
    /* w == 8 */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = lmc_rd64(src + 8 * i);
        if (ref) v ^= lmc_rd64(ref + 8 * i);
        if (rotated) v = rot64(v);
        for (unsigned k = 0; k < 8; k++) dst[k * n + i] = (uint8_t)(v >> (8 * k));
    }
}

/* Order-0 bits of a byte histogram of `total` samples, as
 * total log2(total) - sum h log2(h): no division and no branch a bin, so
 * that the compiler vectorizes the loop (an empty bin adds 0 log2 1). A
 * piece of a few thousand values spent a sixth of its compression time
 * here with a division a bin. */
static double entropy_bits(const uint32_t* h, uint32_t total)
{
    float acc[8] = { 0 };
    for (int s = 0; s < 256; s += 8)
        for (int l = 0; l < 8; l++) {
            uint32_t const c = h[s + l];
            acc[l] += (float)c * lmc_fast_log2((float)(c | (c == 0)));
        }
    float sum = 0;
    for (int l = 0; l < 8; l++) sum += acc[l];
    return (double)total * lmc_fast_log2((float)total) - (double)sum;
}

/* Counts the sampled values [a, b) into the byte histograms h[c] of the
 * candidates c that are in play: compiled per width and candidate set, so
 * that loads, rotations and byte loops are fixed, and no histogram is kept
 * for a candidate that will not be compared (without a reference, XOR would
 * only repeat plain). */
LMC_FORCE_INLINE void choose_count(uint32_t (*h)[8][256], const uint8_t* src, const uint8_t* ref,
                                   size_t a, size_t b, unsigned w, int use_ref, int use_rot)
{
    unsigned const bits = 8 * w;
    for (size_t i = a; i < b; i++) {
        uint64_t const v = w == 1 ? src[i] : w == 2 ? lmc_rd16(src + 2 * i) : w == 4 ? lmc_rd32(src + 4 * i) : lmc_rd64(src + 8 * i);
        uint64_t r = 0;
        if (use_ref) r = w == 1 ? ref[i] : w == 2 ? lmc_rd16(ref + 2 * i) : w == 4 ? lmc_rd32(ref + 4 * i) : lmc_rd64(ref + 8 * i);
        /* unrolled: gcc -O2 keeps both loops, at several times the instructions */
#pragma GCC unroll 4
        for (unsigned c = 0; c < 4; c++) {
            if (((c & LMC_CODING_XOR) && !use_ref) || ((c & LMC_CODING_ROT) && !use_rot)) continue;
            uint64_t x = (c & LMC_CODING_XOR) ? v ^ r : v;
            if (c & LMC_CODING_ROT) x = bits == 64 ? ((x << 1) | (x >> 63)) : (((x << 1) | (x >> (bits - 1))) & ((1ull << bits) - 1));
#pragma GCC unroll 8
            for (unsigned k = 0; k < w; k++) h[c][k][(uint8_t)(x >> (8 * k))]++;
        }
    }
}

static void choose_count_any(uint32_t (*h)[8][256], const uint8_t* src, const uint8_t* ref,
                             size_t a, size_t b, unsigned w, int use_rot)
{
#define CC(W, REF, ROT) choose_count(h, src, ref, a, b, W, REF, ROT)
    int const use_ref = ref != NULL;
    switch (w) {
    case 1: CC(1, 1, 0); break;   /* a byte has no rotation: here only with a reference */
    case 2: if (!use_ref) CC(2, 0, 1); else if (use_rot) CC(2, 1, 1); else CC(2, 1, 0); break;
    case 4: if (!use_ref) CC(4, 0, 1); else if (use_rot) CC(4, 1, 1); else CC(4, 1, 0); break;
    default: if (!use_ref) CC(8, 0, 1); else if (use_rot) CC(8, 1, 1); else CC(8, 1, 0); break;
    }
#undef CC
}

unsigned lmc_choose_coding(const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int float_like)
{
    int const try_rot = float_like && w >= 2;
    if (n < 16 || (!try_rot && !ref)) return ref ? LMC_CODING_XOR : 0;
    /* Candidates: {plain, XOR} x {grouped, rotated}, compared by the order-0
     * entropy of their byte streams on evenly spaced windows of the piece.
     * XOR is not always better: Adam moments change by more than their
     * magnitude, and then the delta is noisier than the values. */
    enum { WINDOW = 256, WINDOWS = 4 };
    uint32_t h[4][8][256];
    for (unsigned c = 0; c < 4; c++)
        if (!((c & LMC_CODING_XOR) && !ref) && !((c & LMC_CODING_ROT) && !try_rot)) memset(h[c], 0, sizeof(h[c][0]) * w);
    size_t const nwin = n <= (size_t)WINDOW * WINDOWS ? 1 : WINDOWS;
    size_t const span = nwin == 1 ? n : WINDOW;
    size_t const stride = nwin == 1 ? 0 : (n - span) / (nwin - 1);
    for (size_t wi = 0; wi < nwin; wi++) choose_count_any(h, src, ref, wi * stride, wi * stride + span, w, try_rot);
    uint32_t const total = (uint32_t)(nwin * span);
    unsigned best = ref ? LMC_CODING_XOR : 0;
    double best_e = 0;
    for (unsigned k = 0; k < w; k++) best_e += entropy_bits(h[best][k], total);
    for (unsigned c = 0; c < 4; c++) {
        if (((c & LMC_CODING_XOR) && !ref) || ((c & LMC_CODING_ROT) && !try_rot) || c == best) continue;
        /* the terms are never negative (fast_log2 of a ratio >= 1 is), so a
         * partial sum that reaches the bar already loses: the rest of the
         * streams need not be summed, and the choice is the same */
        double const bar = best_e * 0.995;
        double e = 0;
        unsigned k = 0;
        for (; k < w && e < bar; k++) e += entropy_bits(h[c][k], total);
        if (k == w && e < bar) { best_e = e; best = c; }
    }
    return best;
}
