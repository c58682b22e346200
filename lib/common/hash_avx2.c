/* hash_avx2.c - XXH3 compiled for AVX2 (the Makefile adds -mavx2 for this file
 * only). Called only when the CPU reports AVX2. The XXH3 state layout does not
 * depend on the vector width, so states are shared with hash.c. */
#include "hash.h"

#if defined(__AVX2__)
uint64_t lmc_h64_avx2(const void* p, size_t n) { return XXH3_64bits(p, n); }
void lmc_hstate_update_avx2(XXH3_state_t* st, const void* p, size_t n) { XXH3_64bits_update(st, p, n); }
#else
/* built without -mavx2 (another compiler or architecture): plain versions */
uint64_t lmc_h64_avx2(const void* p, size_t n) { return XXH3_64bits(p, n); }
void lmc_hstate_update_avx2(XXH3_state_t* st, const void* p, size_t n) { XXH3_64bits_update(st, p, n); }
#endif
