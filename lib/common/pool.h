/* pool.h - a minimal fork-join thread pool: run fn(arg, i) for i in [0, count). */
#ifndef LMC_POOL_H
#define LMC_POOL_H

#include <stddef.h>
#if defined(__x86_64__) || defined(__i386__)
#  include <immintrin.h>
#  define lmc_cpu_relax() _mm_pause()
#else
#  define lmc_cpu_relax() ((void)0)
#endif

typedef struct lmc_pool_s lmc_pool;
typedef void (*lmc_job_fn)(void* arg, size_t index);

/* threads includes the calling thread: threads == 1 starts no worker. NULL on failure. */
lmc_pool* lmc_pool_create(unsigned threads);
void      lmc_pool_free(lmc_pool* pool);
unsigned  lmc_pool_threads(const lmc_pool* pool);
/* Job slots (pipeline window, streaming batch) for `threads` threads: two
 * more than threads, so a slow chunk does not leave the others idle, and
 * no more, since each slot holds a chunk's output until it is committed
 * (memory: 64 MiB + threads x 2 chunks). One thread needs one slot. */
static inline unsigned lmc_pool_batch(unsigned threads) { return threads > 1 ? threads + 2 : 1; }
/* The index of the calling thread in `pool`: 0 for the thread that runs
 * lmc_pool_run / lmc_pool_pipeline, 1 .. threads - 1 for the workers. Jobs
 * use it to pick a per-thread workspace. */
unsigned lmc_pool_self(const lmc_pool* pool);
/* Blocks until every index has run. Indices are handed out in increasing order,
 * so early jobs finish first; the caller thread works too. pool may be NULL (serial). */
void      lmc_pool_run(lmc_pool* pool, lmc_job_fn fn, void* arg, size_t count);

/* Ordered pipeline, without a barrier between batches. prepare(arg, i,
 * slot) runs for i = 0, 1, ... in order and returns 0 when job i is ready,
 * > 0 when there is no job i (the end), < 0 to stop (an error). job(arg, i,
 * slot) then runs on any thread. commit(arg, i, slot) runs in order, after
 * job i; non-zero stops. Prepares and commits run one at a time, each
 * after the one before it has returned, but on any of the pool's threads
 * (the caller's included), while the caller is inside this call: they must
 * not depend on which thread runs them. Slot = i % window (0 without
 * workers): job i + window is prepared only after commit(i), so `window`
 * sets of buffers suffice. Every thread also takes jobs when it has nothing
 * to prepare or commit. Returns 0, or the first non-zero commit result, or
 * else the prepare error (commits of the jobs before it come first). No
 * workers: prepare, job, commit one after another. */
#define LMC_POOL_MAX_WINDOW 1024
typedef void (*lmc_slot_fn)(void* arg, size_t index, unsigned slot);
typedef int (*lmc_prep_fn)(void* arg, size_t index, unsigned slot);
typedef int (*lmc_commit_fn)(void* arg, size_t index, unsigned slot);
int lmc_pool_pipeline(lmc_pool* pool, unsigned window, lmc_prep_fn prepare, lmc_slot_fn job, lmc_commit_fn commit, void* arg);

#endif
