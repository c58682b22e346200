/* cpu.c - which optional instruction sets the hot loops may use. */
#include <stdatomic.h>
#include "mem.h"

/* Tests clear bits here to run the code paths of older CPUs on this one. */
static _Atomic unsigned g_allowed = ~0u;

void lmc_cpu_restrict(unsigned allowed) { atomic_store_explicit(&g_allowed, allowed, memory_order_relaxed); }

unsigned lmc_cpu_features(void)
{
    unsigned const allowed = atomic_load_explicit(&g_allowed, memory_order_relaxed);
#if defined(__GNUC__) && defined(__x86_64__)
    /* threads may race to fill it: relaxed atomics make that defined (same value) */
    static _Atomic int cached = -1;
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        __builtin_cpu_init();
        c = (__builtin_cpu_supports("bmi2") ? (int)LMC_CPU_BMI2 : 0)
          | (__builtin_cpu_supports("avx2") ? (int)LMC_CPU_AVX2 : 0)
          | (__builtin_cpu_supports("bmi") ? (int)LMC_CPU_BMI1 : 0)
          /* libgcc checks XCR0 too: set only where the OS saves zmm state */
          | (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
             && __builtin_cpu_supports("popcnt") ? (int)LMC_CPU_AVX512 : 0)
          /* every CPU with VBMI but Cannon Lake has VBMI2 too; that one takes the AVX-512 paths */
          | (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2")
             && __builtin_cpu_supports("avx512dq") ? (int)LMC_CPU_VBMI : 0)
          | (__builtin_cpu_is("intel") ? (int)LMC_CPU_FASTGATHER : 0);
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return (unsigned)c & allowed;
#else
    (void)allowed;
    return 0;
#endif
}
