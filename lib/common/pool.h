/* pool.h - a minimal fork-join thread pool: run fn(arg, i) for i in [0, count). */
#ifndef LMC_POOL_H
#define LMC_POOL_H

#include <stddef.h>

typedef struct lmc_pool_s lmc_pool;
typedef void (*lmc_job_fn)(void* arg, size_t index);
typedef void (*lmc_serial_fn)(void* arg);

/* threads includes the calling thread: threads == 1 starts no worker. NULL on failure. */
lmc_pool* lmc_pool_create(unsigned threads);
void      lmc_pool_free(lmc_pool* pool);
unsigned  lmc_pool_threads(const lmc_pool* pool);
/* Blocks until every index has run. Indices are handed out in increasing order,
 * so early jobs finish first; the caller thread works too. pool may be NULL (serial). */
/* Jobs per fork-join batch for `threads` threads. Two per thread: the pool
 * hands indices out as threads free up, so one slow chunk no longer leaves
 * the other threads idle until the batch ends, and a file of a few chunks
 * still spreads over all threads. One thread needs no more than one slot. */
static inline unsigned lmc_pool_batch(unsigned threads) { return threads > 1 ? 2 * threads : 1; }
void      lmc_pool_run(lmc_pool* pool, lmc_job_fn fn, void* arg, size_t count);
/* The same, and the caller runs serial(sarg) while the workers start on the
 * jobs (before it takes jobs itself). serial must not touch what jobs write. */
void      lmc_pool_run_with(lmc_pool* pool, lmc_job_fn fn, void* arg, size_t count, lmc_serial_fn serial, void* sarg);

#endif
