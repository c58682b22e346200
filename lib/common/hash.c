#include "lmc.h"
#include "hash.h"

uint64_t lmc_hash64(const void* data, size_t size) { return lmc_h64(data, size); }
