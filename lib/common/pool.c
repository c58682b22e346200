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
     * pl_active / pl_prepared / pl_events also with atomic stores for the
     * threads' polls */
    int             pl_active, pl_stop, pl_end, pl_seq;
    int             pl_err, pl_prep_err;
    size_t          pl_prepared, pl_taken, pl_finished, pl_committed, pl_window;
    size_t          pl_events;   /* bumped by every finished job, prepare and commit */
    lmc_prep_fn     pl_prepare;
    lmc_slot_fn     pl_job;
    lmc_commit_fn   pl_commit;
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

/* The caller, with no job left to take, polls for the pipeline's next event
 * (a job finished, a prepare or a commit) before it sleeps: a sleeping
 * caller's wake-up took 70-80 us on the 2-core VM, 4 % of decoding a 6.6 MB
 * delta with two threads. A job is at most a chunk's work, a few
 * milliseconds, and the caller has nothing else to do; the poll yields its
 * core as spin_over does. */
#define CALLER_SPIN_NS 4000000L
static void spin_for_event(lmc_pool* p, size_t seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned n = 1;; n++) {
        if (__atomic_load_n(&p->pl_events, __ATOMIC_ACQUIRE) != seen) return;
        lmc_cpu_relax();
        if (!(n & 63) && (elapsed_ns(&t0) > CALLER_SPIN_NS || (sched_yield(), 0))) return;
    }
}

/* Called with mu held, after a change the caller may be waiting for. */
static void pl_event(lmc_pool* p)
{
    __atomic_store_n(&p->pl_events, p->pl_events + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->done);
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
    pl_event(p);
}

/* Prepares and commits, each in order and one at a time (pl_seq), on
 * whichever thread gets here: the one that finished a job commits it. With
 * only the caller sequencing, nothing was committed or prepared while it
 * ran a job of its own, so the other threads ran out of prepared jobs after
 * the window's spare two, and chunks that finished out of order waited for
 * the caller to copy them out in its commits. On a 16-core Xeon
 * (2026-12-04, two alternated runs each) 16 threads compressed a 304 MB
 * bf16 delta at 8530-8621 MB/s this way against 6517-6650, and decoded a
 * 1.2 GB moments delta at 16651-19002 against 12893-13967. Called and
 * returns with mu held. Every change that makes a step possible (a job
 * done, a prepare or commit finished) is followed by a call here from the
 * thread that made it, and a thread inside a step looks again when it
 * ends, so no step is left waiting for a thread that sleeps. */
static void pl_sequence(lmc_pool* p)
{
    size_t const window = p->pl_window;
    while (!p->pl_seq) {
        if (!p->pl_end && !p->pl_stop && p->pl_prepared < p->pl_committed + window) {
            size_t const i = p->pl_prepared;
            p->pl_seq = 1;
            pthread_mutex_unlock(&p->mu);
            int const r = p->pl_prepare(p->pl_arg, i, (unsigned)(i % window));
            pthread_mutex_lock(&p->mu);
            p->pl_seq = 0;
            if (r) { p->pl_end = 1; if (r < 0) p->pl_prep_err = r; }   /* earlier jobs still commit first */
            else {
                __atomic_store_n(&p->pl_prepared, i + 1, __ATOMIC_RELEASE);
                pthread_cond_broadcast(&p->wake);
            }
            pl_event(p);
            continue;
        }
        if (!p->pl_stop && p->pl_committed < p->pl_prepared && p->pl_done[p->pl_committed % window]) {
            size_t const i = p->pl_committed;
            unsigned const slot = (unsigned)(i % window);
            p->pl_done[slot] = 0;
            p->pl_seq = 1;
            pthread_mutex_unlock(&p->mu);
            int const c = p->pl_commit(p->pl_arg, i, slot);
            pthread_mutex_lock(&p->mu);
            p->pl_seq = 0;
            p->pl_committed = i + 1;
            if (c) { p->pl_err = c; p->pl_stop = 1; }
            pl_event(p);
            continue;
        }
        break;
    }
}

/* A worker's part of a pipeline: take jobs, and prepare and commit, until
 * the caller ends it. */
static void pl_work(lmc_pool* p)
{
    while (p->pl_active) {
        pl_sequence(p);
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
    p->pl_prepare = prepare; p->pl_job = job; p->pl_commit = commit; p->pl_arg = arg; p->pl_window = window;
    __atomic_store_n(&p->pl_prepared, 0, __ATOMIC_RELEASE);
    p->pl_taken = 0; __atomic_store_n(&p->pl_finished, 0, __ATOMIC_RELAXED);
    p->pl_committed = 0; p->pl_stop = 0; p->pl_end = 0; p->pl_seq = 0; p->pl_err = 0; p->pl_prep_err = 0;
    for (unsigned s = 0; s < window; s++) p->pl_done[s] = 0;
    __atomic_store_n(&p->pl_active, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    for (;;) {
        pl_sequence(p);
        /* finished: everything prepared is committed, or stopped with no job
         * running; and no thread inside a prepare or commit */
        if (!p->pl_seq && (p->pl_stop ? p->pl_finished == p->pl_taken : p->pl_end && p->pl_committed == p->pl_prepared)) break;
        if (pl_can_take(p)) { pl_run_one(p); continue; }
        size_t const ev = p->pl_events;
        pthread_mutex_unlock(&p->mu);
        spin_for_event(p, ev);
        pthread_mutex_lock(&p->mu);
        /* under the mutex: an event from here on broadcasts after this wait begins */
        if (p->pl_events == ev) pthread_cond_wait(&p->done, &p->mu);
    }
    __atomic_store_n(&p->pl_active, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    int const err = p->pl_err ? p->pl_err : p->pl_prep_err;
    pthread_mutex_unlock(&p->mu);
    return err;
}
