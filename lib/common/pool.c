/* pool.c - fork-join pool on pthreads. Jobs are chunk-sized (>= 1 MiB of
 * content), so a mutex-protected counter costs nothing measurable. What does
 * cost is waking a sleeping worker: on a VM that can take milliseconds, a
 * large share of a batch. So a worker that finishes a batch spins a little
 * while for the next one before it sleeps, and the caller can run serial
 * work (a checksum) while the workers already code. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#  include <immintrin.h>
#  define cpu_relax() _mm_pause()
#else
#  define cpu_relax() ((void)0)
#endif
#include "pool.h"

/* How long an idle worker polls for the next batch before sleeping: a few
 * times the caller's work between two batches. */
#define SPIN_NS 300000L

struct lmc_pool_s {
    pthread_mutex_t mu;
    pthread_cond_t  wake;     /* workers wait for a new generation */
    pthread_cond_t  done;     /* caller waits for all jobs */
    pthread_t*      tids;
    unsigned        nworkers;
    unsigned        generation;
    int             quit;
    lmc_job_fn      fn;
    void*           arg;
    size_t          count, next, finished;
};

static void drain(lmc_pool* p)
{
    /* called with p->mu held; returns with it held */
    while (p->next < p->count) {
        size_t const i = p->next++;
        lmc_job_fn const fn = p->fn; void* const arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, i);
        pthread_mutex_lock(&p->mu);
        if (++p->finished == p->count) pthread_cond_broadcast(&p->done);
    }
}

static long elapsed_ns(const struct timespec* t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* generation and quit change under the mutex, with atomic stores, so that
 * this poll outside it is well defined */
static void spin_for_work(lmc_pool* p, unsigned seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)) return;
        cpu_relax();
        if (!(n & 63) && elapsed_ns(&t0) > SPIN_NS) return;
    }
}

static void* worker(void* opaque)
{
    lmc_pool* const p = (lmc_pool*)opaque;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (seen && !p->quit && p->generation == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_for_work(p, seen);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        drain(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

lmc_pool* lmc_pool_create(unsigned threads)
{
    lmc_pool* p = (lmc_pool*)calloc(1, sizeof(*p));
    if (!p) return NULL;
    if (threads < 1) threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tids = (pthread_t*)calloc(threads, sizeof(pthread_t));
    if (!p->tids) { lmc_pool_free(p); return NULL; }
    for (unsigned i = 0; i + 1 < threads; i++) {
        if (pthread_create(&p->tids[i], NULL, worker, p) != 0) { lmc_pool_free(p); return NULL; }
        p->nworkers++;
    }
    return p;
}

unsigned lmc_pool_threads(const lmc_pool* p) { return p ? p->nworkers + 1 : 1; }

void lmc_pool_free(lmc_pool* p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nworkers; i++) pthread_join(p->tids[i], NULL);
    free(p->tids);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

void lmc_pool_run_with(lmc_pool* p, lmc_job_fn fn, void* arg, size_t count, lmc_serial_fn serial, void* sarg)
{
    if (!p || p->nworkers == 0 || count == 0 || (count == 1 && !serial)) {
        if (serial) serial(sarg);
        for (size_t i = 0; i < count; i++) fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn; p->arg = arg;
    p->count = count; p->next = 0; p->finished = 0;
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    if (serial) {
        pthread_mutex_unlock(&p->mu);
        serial(sarg);
        pthread_mutex_lock(&p->mu);
    }
    drain(p);
    while (p->finished < p->count) pthread_cond_wait(&p->done, &p->mu);
    p->count = 0; p->next = 0;
    pthread_mutex_unlock(&p->mu);
}

void lmc_pool_run(lmc_pool* p, lmc_job_fn fn, void* arg, size_t count)
{
    lmc_pool_run_with(p, fn, arg, count, NULL, NULL);
}
