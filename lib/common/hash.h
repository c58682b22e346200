/* hash.h - the frame's checksums: XXH3-64 (Debian's libxxhash), inlined for speed. */
#ifndef LMC_HASH_H
#define LMC_HASH_H

#include <stddef.h>
#include <stdint.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static inline uint64_t lmc_h64(const void* p, size_t n) { return XXH3_64bits(p, n); }
static inline uint32_t lmc_h32(const void* p, size_t n) { return (uint32_t)XXH3_64bits(p, n); }

#endif
