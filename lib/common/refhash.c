/* refhash.c - see refhash.h. */
#include "refhash.h"

#include "error.h"

void lmc_refhash_init(lmc_refhash* h)
{
    pthread_mutex_init(&h->mu, NULL);
    h->st = NULL;
    h->active = 0;
}

void lmc_refhash_destroy(lmc_refhash* h)
{
    if (h->st) XXH3_freeState(h->st);
    h->st = NULL;
    pthread_mutex_destroy(&h->mu);
}

size_t lmc_refhash_begin(lmc_refhash* h, const void* p, size_t size)
{
    if (!h->st) { h->st = XXH3_createState(); LMC_RETURN_IF(!h->st, MEMORY); }
    XXH3_64bits_reset(h->st);
    h->p = (const uint8_t*)p;
    h->size = size;
    h->pos = 0;
    __atomic_store_n(&h->owed, 0, __ATOMIC_RELAXED);
    h->active = 1;
    return 0;
}

/* With the lock held: hashes up to what is owed. */
static void hash_owed(lmc_refhash* h)
{
    for (;;) {
        size_t const owed = __atomic_load_n(&h->owed, __ATOMIC_RELAXED);
        size_t const upto = owed < h->size ? owed : h->size;
        if (h->pos >= upto) return;
        lmc_hstate_update(h->st, h->p + h->pos, upto - h->pos);
        h->pos = upto;
    }
}

void lmc_refhash_step(lmc_refhash* h, size_t n)
{
    __atomic_fetch_add(&h->owed, n, __ATOMIC_RELAXED);
    if (pthread_mutex_trylock(&h->mu) != 0) return;   /* its holder takes this debt too, or finish does */
    hash_owed(h);
    pthread_mutex_unlock(&h->mu);
}

uint64_t lmc_refhash_finish(lmc_refhash* h)
{
    pthread_mutex_lock(&h->mu);
    if (h->pos < h->size) lmc_hstate_update(h->st, h->p + h->pos, h->size - h->pos);
    h->pos = h->size;
    h->active = 0;
    uint64_t const r = XXH3_64bits_digest(h->st);
    pthread_mutex_unlock(&h->mu);
    return r;
}
