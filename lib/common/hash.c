#include <stdlib.h>
#include "lmc.h"
#include "hash.h"
#include "mem.h"

static int use_avx2(void) { return (lmc_cpu_features() & LMC_CPU_AVX2) != 0; }
static int use_avx512(void) { return (lmc_cpu_features() & LMC_CPU_AVX512) != 0; }

uint64_t lmc_h64(const void* p, size_t n)
{
    if (n >= 1024) {
        if (use_avx512()) return lmc_h64_avx512(p, n);
        if (use_avx2()) return lmc_h64_avx2(p, n);
    }
    return XXH3_64bits(p, n);
}

void lmc_hstate_update(XXH3_state_t* st, const void* p, size_t n)
{
    if (n >= 1024) {
        if (use_avx512()) { lmc_hstate_update_avx512(st, p, n); return; }
        if (use_avx2()) { lmc_hstate_update_avx2(st, p, n); return; }
    }
    XXH3_64bits_update(st, p, n);
}

uint64_t lmc_hash64(const void* data, size_t size) { return lmc_h64(data, size); }

struct lmc_hash_state_s { XXH3_state_t* st; };

lmc_hash_state* lmc_hash_create(void)
{
    lmc_hash_state* const h = (lmc_hash_state*)malloc(sizeof(*h));
    if (!h) return NULL;
    h->st = XXH3_createState();
    if (!h->st) { free(h); return NULL; }
    XXH3_64bits_reset(h->st);
    return h;
}

void lmc_hash_update(lmc_hash_state* h, const void* data, size_t size)
{
    if (h && size) lmc_hstate_update(h->st, data, size);
}

uint64_t lmc_hash_digest(const lmc_hash_state* h) { return h ? XXH3_64bits_digest(h->st) : 0; }

void lmc_hash_free(lmc_hash_state* h)
{
    if (!h) return;
    XXH3_freeState(h->st);
    free(h);
}
