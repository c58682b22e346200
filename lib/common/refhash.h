/* refhash.h - a reference's H64 computed during a one-shot call, a slice
 * at a time between chunk jobs.
 *
 * A delta frame records the H64 of its reference, a sequential pass over
 * it: done before coding, it is a single-threaded prelude to a parallel
 * call (a 200 MB reference costs about 34 ms of one core on the bench box,
 * against 87 ms to decode the delta on two threads). Here each chunk job,
 * once done, asks for as many more reference bytes hashed as it coded, and
 * whichever thread gets the lock (a try-lock: no thread waits for another)
 * hashes what is owed, in order. A reference laid out as its content is
 * then hashed just after the jobs read the same bytes, from cache; the
 * caller finishes whatever is left at the end. */
#ifndef LMC_REFHASH_H
#define LMC_REFHASH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

typedef struct {
    pthread_mutex_t mu;
    XXH3_state_t*   st;      /* allocated on first use, kept */
    const uint8_t*  p;
    size_t          size, pos;   /* [0, pos) hashed */
    size_t          owed;        /* bytes asked for so far (atomic) */
    int             active;
} lmc_refhash;

void   lmc_refhash_init(lmc_refhash* h);
void   lmc_refhash_destroy(lmc_refhash* h);
/* Starts hashing p[0, size). 0, or LMC_ERR(MEMORY). */
size_t lmc_refhash_begin(lmc_refhash* h, const void* p, size_t size);
/* Asks for n more bytes hashed; hashes what is owed unless another thread
 * is hashing. Any thread, while active. */
void   lmc_refhash_step(lmc_refhash* h, size_t n);
/* Hashes the rest; the H64 of all size bytes. The caller, after the jobs. */
uint64_t lmc_refhash_finish(lmc_refhash* h);

#endif
