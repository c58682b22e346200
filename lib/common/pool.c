/* pool.c - fork-join pool on pthreads. Jobs are chunk-sized (>= 1 MiB of
 * content), so a mutex-protected counter costs nothing measurable. What does
 * cost is waking a sleeping worker: on a VM that can take milliseconds, a
 * large share of a batch. So a worker that finishes a batch spins a little
 * while for the next one before it sleeps, yielding the core as it polls. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include "pool.h"

/* How long an idle worker polls for the next batch before sleeping: a few
 * times the caller's work between two batches. */
#define SPIN_NS 300000L

struct lmc_pool_s {
    pthread_mutex_t mu;
    pthread_cond_t  wake;     /* workers wait for a new generation */
    pthread_cond_t  done;     /* caller waits for all jobs */
    pthread_t*      tids;
    unsigned        nworkers, started;
    unsigned        generation;
    int             quit;
    lmc_job_fn      fn;
    void*           arg;
    size_t          count, next, finished;
    /* ordered pipeline (lmc_pool_pipeline); fields change under mu, and
     * pl_active / pl_prepared also with atomic stores for the workers' poll */
    int             pl_active, pl_stop;
    size_t          pl_prepared, pl_taken, pl_finished, pl_window;
    lmc_slot_fn     pl_job;
    void*           pl_arg;
    unsigned char   pl_done[LMC_POOL_MAX_WINDOW];
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

/* Every 64 polls: 1 once the spin has lasted SPIN_NS, else it yields the
 * core first. A spinning worker must not hold a core that another runnable
 * thread could use: with as many threads as cores, the CLI's writer thread
 * (and a reference being hashed) wait for one. Decoding a 200 MB bf16
 * delta to a file with -T2 on 2 cores took 219 ms instead of 232 (medians of
 * 12 alternated runs; 33 instead of 36 ms for a 27 MB optimizer delta);
 * compression, whose output is smaller, and in-memory coding did not move. */
static int spin_over(const struct timespec* t0)
{
    if (elapsed_ns(t0) > SPIN_NS) return 1;
    sched_yield();
    return 0;
}

/* generation and quit change under the mutex, with atomic stores, so that
 * this poll outside it is well defined */
static void spin_for_work(lmc_pool* p, unsigned seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)) return;
        lmc_cpu_relax();
        if (!(n & 63) && spin_over(&t0)) return;
    }
}

/* A worker with nothing to take in a pipeline polls a little for the next
 * prepared job (or the pipeline's end) before it sleeps. */
static void spin_for_prepared(lmc_pool* p, size_t seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&p->pl_prepared, __ATOMIC_ACQUIRE) != seen || !__atomic_load_n(&p->pl_active, __ATOMIC_ACQUIRE)) return;
        lmc_cpu_relax();
        if (!(n & 63) && spin_over(&t0)) return;
    }
}

static int pl_can_take(const lmc_pool* p) { return !p->pl_stop && p->pl_taken < p->pl_prepared; }

/* The caller, with no job left to take, polls for the next one to finish
 * before it sleeps: a sleeping caller's wake-up took 70-80 us on the 2-core
 * VM, 4 % of decoding a 6.6 MB delta with two threads. A job is at most a
 * chunk's work, a few milliseconds, and the caller has nothing else to do;
 * the poll yields its core as spin_over does. */
#define CALLER_SPIN_NS 4000000L
static void spin_for_finished(lmc_pool* p, size_t seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&p->pl_finished, __ATOMIC_ACQUIRE) != seen) return;
        lmc_cpu_relax();
        if (!(n & 63) && (elapsed_ns(&t0) > CALLER_SPIN_NS || (sched_yield(), 0))) return;
    }
}

/* Runs one prepared job; called and returns with mu held. */
static void pl_run_one(lmc_pool* p)
{
    size_t const i = p->pl_taken++;
    unsigned const slot = (unsigned)(i % p->pl_window);
    pthread_mutex_unlock(&p->mu);
    p->pl_job(p->pl_arg, i, slot);
    pthread_mutex_lock(&p->mu);
    p->pl_done[slot] = 1;
    __atomic_store_n(&p->pl_finished, p->pl_finished + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->done);
}

/* A worker's part of a pipeline: take jobs until the caller ends it. */
static void pl_work(lmc_pool* p)
{
    while (p->pl_active) {
        if (pl_can_take(p)) { pl_run_one(p); continue; }
        size_t const seen = p->pl_prepared;
        pthread_mutex_unlock(&p->mu);
        spin_for_prepared(p, seen);
        pthread_mutex_lock(&p->mu);
        while (p->pl_active && !pl_can_take(p)) pthread_cond_wait(&p->wake, &p->mu);
    }
}

/* Which thread of which pool runs here: workspaces are per thread, not per
 * job slot (a slot only holds a chunk's output until its commit). */
static _Thread_local const lmc_pool* tls_pool;
static _Thread_local unsigned tls_index;

unsigned lmc_pool_self(const lmc_pool* p) { return p && tls_pool == p ? tls_index : 0; }

static void* worker(void* opaque)
{
    lmc_pool* const p = (lmc_pool*)opaque;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    tls_pool = p;
    tls_index = ++p->started;
    for (;;) {
        if (seen && !p->quit && p->generation == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_for_work(p, seen);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        if (p->pl_active) pl_work(p); else drain(p);
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

void lmc_pool_run(lmc_pool* p, lmc_job_fn fn, void* arg, size_t count)
{
    if (!p || p->nworkers == 0 || count <= 1) {
        for (size_t i = 0; i < count; i++) fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn; p->arg = arg;
    p->count = count; p->next = 0; p->finished = 0;
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    drain(p);
    while (p->finished < p->count) pthread_cond_wait(&p->done, &p->mu);
    p->count = 0; p->next = 0;
    pthread_mutex_unlock(&p->mu);
}

int lmc_pool_pipeline(lmc_pool* p, unsigned window, lmc_prep_fn prepare, lmc_slot_fn job, lmc_commit_fn commit, void* arg)
{
    if (!p || p->nworkers == 0 || window < 2) {
        for (size_t i = 0;; i++) {
            int const r = prepare(arg, i, 0);
            if (r) return r > 0 ? 0 : r;
            job(arg, i, 0);
            int const c = commit(arg, i, 0);
            if (c) return c;
        }
    }
    if (window > LMC_POOL_MAX_WINDOW) window = LMC_POOL_MAX_WINDOW;
    pthread_mutex_lock(&p->mu);
    p->pl_job = job; p->pl_arg = arg; p->pl_window = window;
    __atomic_store_n(&p->pl_prepared, 0, __ATOMIC_RELEASE);
    p->pl_taken = 0; __atomic_store_n(&p->pl_finished, 0, __ATOMIC_RELAXED); p->pl_stop = 0;
    for (unsigned s = 0; s < window; s++) p->pl_done[s] = 0;
    __atomic_store_n(&p->pl_active, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    size_t committed = 0;
    int end = 0, prep_err = 0, err = 0;
    for (;;) {
        /* 1. keep the window full of prepared jobs (in order, on this thread) */
        if (!end && !p->pl_stop && p->pl_prepared < committed + window) {
            size_t const i = p->pl_prepared;
            pthread_mutex_unlock(&p->mu);
            int const r = prepare(arg, i, (unsigned)(i % window));
            pthread_mutex_lock(&p->mu);
            if (r) { end = 1; if (r < 0) prep_err = r; }   /* earlier jobs still commit first */
            else {
                __atomic_store_n(&p->pl_prepared, i + 1, __ATOMIC_RELEASE);
                pthread_cond_broadcast(&p->wake);
            }
            continue;
        }
        /* 2. commit the oldest job once it is done (in order, on this thread) */
        if (!p->pl_stop && committed < p->pl_prepared && p->pl_done[committed % window]) {
            unsigned const slot = (unsigned)(committed % window);
            p->pl_done[slot] = 0;
            pthread_mutex_unlock(&p->mu);
            int const c = commit(arg, committed, slot);
            pthread_mutex_lock(&p->mu);
            committed++;
            if (c) { err = c; p->pl_stop = 1; }
            continue;
        }
        /* 3. finished: everything prepared is committed, or stopped with no job running */
        if (p->pl_stop ? p->pl_finished == p->pl_taken : end && committed == p->pl_prepared) break;
        /* 4. help with a job, else wait for one to finish */
        if (pl_can_take(p)) { pl_run_one(p); continue; }
        size_t const fin = p->pl_finished;
        pthread_mutex_unlock(&p->mu);
        spin_for_finished(p, fin);
        pthread_mutex_lock(&p->mu);
        /* under the mutex: a job that finishes from here on broadcasts after this wait begins */
        if (p->pl_finished == fin) pthread_cond_wait(&p->done, &p->mu);
    }
    __atomic_store_n(&p->pl_active, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    return err ? err : prep_err;
}
