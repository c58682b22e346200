/* hash_avx512.c - XXH3 compiled for AVX-512 (the Makefile adds -mavx512f for
 * this file only). Called only when the CPU reports AVX-512. XXH3's value and
 * state layout do not depend on the vector width, so this gives the same
 * hashes as hash.c and hash_avx2.c. Measured on an Intel Xeon (Emerald Rapids
 * class) VM (bench/hash_speed.c): the chunk and frame hashes of a 6.6 MB
 * input 15-22 % faster than with AVX2; on the AMD EPYC VM an earlier
 * session measured no gain. */
#include "hash.h"

/* XXH3 picks its AVX-512 loop from -mavx512f; built without the flag
 * (another compiler or architecture) this is the baseline loop */
uint64_t lmc_h64_avx512(const void* p, size_t n) { return XXH3_64bits(p, n); }
void lmc_hstate_update_avx512(XXH3_state_t* st, const void* p, size_t n) { XXH3_64bits_update(st, p, n); }
