/* hash.h - the frame's checksums: XXH3-64 (Debian's libxxhash, header-only use).
 * The long-input loops run with AVX-512 or AVX2 where the CPU has them
 * (hash_avx512.c and hash_avx2.c are compiled with -mavx512f and -mavx2 and
 * only called after a run-time check). */
#ifndef LMC_HASH_H
#define LMC_HASH_H

#include <stddef.h>
#include <stdint.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t lmc_h64(const void* p, size_t n);
static inline uint32_t lmc_h32(const void* p, size_t n) { return (uint32_t)lmc_h64(p, n); }
void lmc_hstate_update(XXH3_state_t* st, const void* p, size_t n);

/* implemented in hash_avx2.c and hash_avx512.c */
uint64_t lmc_h64_avx2(const void* p, size_t n);
void lmc_hstate_update_avx2(XXH3_state_t* st, const void* p, size_t n);
uint64_t lmc_h64_avx512(const void* p, size_t n);
void lmc_hstate_update_avx512(XXH3_state_t* st, const void* p, size_t n);

#endif
