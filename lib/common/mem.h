/* mem.h - little-endian access and small helpers shared by encoder and decoder. */
#ifndef LMC_MEM_H
#define LMC_MEM_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#  define LMC_LIKELY(x)   __builtin_expect(!!(x), 1)
#  define LMC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define LMC_FORCE_INLINE static inline __attribute__((always_inline))
#else
#  define LMC_LIKELY(x)   (x)
#  define LMC_UNLIKELY(x) (x)
#  define LMC_FORCE_INLINE static inline
#endif

/* Keeps gcc from vectorising a loop of table lookups (into extracts and
 * inserts on the vector ports, which the vector work beside it needs):
 * the value is made opaque, so each lookup stays a scalar load */
#if defined(__GNUC__)
#  define LMC_SCALAR_ONLY(v) __asm__("" : "+r"(v))
#else
#  define LMC_SCALAR_ONLY(v) ((void)0)
#endif

/* Passes that stream through memory doing little with each byte (grouping,
 * the REFCTX analysis, bf16 values, ungrouping) wait on it on the VMs
 * measured, whose hardware prefetchers do not run far enough ahead: they
 * prefetch this many bytes ahead, to read (R) or to write (W). Measured in
 * README, "What changed in the morning session (2026-12-02)". */
#define LMC_PREFETCH_AHEAD 1024
#if defined(__GNUC__)
#  define LMC_PREFETCH_R(p) __builtin_prefetch((const char*)(p) + LMC_PREFETCH_AHEAD)
#  define LMC_PREFETCH_W(p) __builtin_prefetch((char*)(p) + LMC_PREFETCH_AHEAD, 1)
#else
#  define LMC_PREFETCH_R(p) ((void)0)
#  define LMC_PREFETCH_W(p) ((void)0)
#endif

/* The format is little-endian; memcpy keeps unaligned access defined and compiles to one move. */
#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#  define LMC_BIG_ENDIAN 1
#else
#  define LMC_BIG_ENDIAN 0
#endif

LMC_FORCE_INLINE uint16_t lmc_rd16(const void* p) { uint16_t v; memcpy(&v, p, 2);
#if LMC_BIG_ENDIAN
    v = __builtin_bswap16(v);
#endif
    return v; }
LMC_FORCE_INLINE uint32_t lmc_rd32(const void* p) { uint32_t v; memcpy(&v, p, 4);
#if LMC_BIG_ENDIAN
    v = __builtin_bswap32(v);
#endif
    return v; }
LMC_FORCE_INLINE uint64_t lmc_rd64(const void* p) { uint64_t v; memcpy(&v, p, 8);
#if LMC_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v; }
LMC_FORCE_INLINE uint32_t lmc_rd24(const void* p) {
    const uint8_t* b = (const uint8_t*)p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16); }

LMC_FORCE_INLINE void lmc_wr16(void* p, uint16_t v) {
#if LMC_BIG_ENDIAN
    v = __builtin_bswap16(v);
#endif
    memcpy(p, &v, 2); }
LMC_FORCE_INLINE void lmc_wr32(void* p, uint32_t v) {
#if LMC_BIG_ENDIAN
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4); }
LMC_FORCE_INLINE void lmc_wr64(void* p, uint64_t v) {
#if LMC_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8); }
LMC_FORCE_INLINE void lmc_wr24(void* p, uint32_t v) {
    uint8_t* b = (uint8_t*)p; b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8); b[2] = (uint8_t)(v >> 16); }

/* Hot loops are compiled twice: as baseline x86-64 and with BMI2 (shlx/shrx
 * take any register for the shift count, which frees the bit readers and
 * writers from %cl); the BMI2 copy is chosen at run time. */
/* CPU features, detected once (cpu.c). */
#define LMC_CPU_BMI2 1u
#define LMC_CPU_AVX2 2u
#define LMC_CPU_BMI1 4u
#define LMC_CPU_AVX512 8u   /* AVX-512 F, BW and VL, with the OS saving the zmm registers */
#define LMC_CPU_VBMI 16u    /* AVX-512 VBMI, VBMI2 and DQ (byte permutes across a zmm, double shifts, quadword multiplies), with LMC_CPU_AVX512 */
/* Not an instruction set: gathers cost about as much as the shuffles that
 * could replace them (Intel cores, whose 512-bit shuffles share one port
 * with the rest of the loops' work), so a loop keeps its gathers there. Set
 * for Intel CPUs; on the AMD EPYC VMs of this project a 16-lane gather
 * costs about 14 TSC cycles. */
#define LMC_CPU_FASTGATHER 32u
unsigned lmc_cpu_features(void);
/* Only the features in `allowed` are reported from now on (tests: ~0u restores). */
void lmc_cpu_restrict(unsigned allowed);

#if defined(__GNUC__) && defined(__x86_64__) && !defined(LMC_NO_BMI2)
#  define LMC_HAS_BMI2_DISPATCH 1
#  define LMC_TARGET_BMI2 __attribute__((target("bmi2")))
static inline int lmc_cpu_has_bmi2(void) { return (lmc_cpu_features() & LMC_CPU_BMI2) != 0; }
#else
#  define LMC_HAS_BMI2_DISPATCH 0
#endif
/* AVX2 copies (with BMI1 and BMI2, which every AVX2 x86-64 CPU has, but
 * checked too) */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(LMC_NO_AVX2)
#  define LMC_HAS_AVX2_DISPATCH 1
#  define LMC_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2")))
#  define LMC_CPU_AVX2_SET (LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2)
static inline int lmc_cpu_has_avx2(void) { return (lmc_cpu_features() & LMC_CPU_AVX2_SET) == LMC_CPU_AVX2_SET; }
#else
#  define LMC_HAS_AVX2_DISPATCH 0
#endif
/* AVX-512 copies (REFCTX's 32-state coder: 16-lane gathers); F, BW and VL,
 * which every AVX-512 CPU but the Xeon Phi has, and AVX2, BMI and POPCNT */
#if LMC_HAS_AVX2_DISPATCH && !defined(LMC_NO_AVX512)
#  define LMC_HAS_AVX512_DISPATCH 1
#  define LMC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,bmi,bmi2,popcnt")))
#  define LMC_CPU_AVX512_SET (LMC_CPU_AVX2_SET | LMC_CPU_AVX512)
static inline int lmc_cpu_has_avx512(void) { return (lmc_cpu_features() & LMC_CPU_AVX512_SET) == LMC_CPU_AVX512_SET; }
/* AVX-512 VBMI: a 256-entry byte table in four registers, looked up 64 at
 * a time, where the AVX-512 set alone would gather. With DQ (quadword
 * multiplies), which every CPU with VBMI has. */
#  define LMC_TARGET_AVX512VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,avx2,bmi,bmi2,popcnt")))
#  define LMC_CPU_VBMI_SET (LMC_CPU_AVX512_SET | LMC_CPU_VBMI)
static inline int lmc_cpu_has_avx512vbmi(void) { return (lmc_cpu_features() & LMC_CPU_VBMI_SET) == LMC_CPU_VBMI_SET; }
static inline int lmc_cpu_gathers_fast(void) { return (lmc_cpu_features() & LMC_CPU_FASTGATHER) != 0; }
#else
#  define LMC_HAS_AVX512_DISPATCH 0
#endif

/* log2 for cost estimates only: exponent from the float's bits plus a
 * polynomial on the mantissa (max error about 0.005). The coefficients are
 * shared with the SIMD copy in freq_enc.c. */
#define LMC_LOG2_K0 (-0.34484843f)
#define LMC_LOG2_K1 2.02466578f
#define LMC_LOG2_K2 0.67487759f
static inline float lmc_fast_log2(float x)
{
    union { float f; uint32_t u; } v = { x };
    float const e = (float)((int)((v.u >> 23) & 0xFF) - 128);  /* the polynomial adds the 1 back */
    v.u = (v.u & 0x007FFFFF) | 0x3F800000;              /* mantissa in [1, 2) */
    float const m = v.f;
    return e + (LMC_LOG2_K0 * m + LMC_LOG2_K1) * m - LMC_LOG2_K2;
}

#define LMC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LMC_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
