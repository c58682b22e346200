/* test_pool.c - the fork-join pool (lib/common/pool.c): every index runs
 * exactly once, batches keep working whether the workers are still polling
 * for the next one or have gone to sleep, the ordered pipeline keeps its
 * promises, and each thread knows its index (per-thread workspaces). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <cmocka.h>

#include "pool.h"

#define MAXJ 256

typedef struct {
    int hits[MAXJ];
    int started;        /* jobs begun */
} probe;

static void job(void* arg, size_t i)
{
    probe* const p = (probe*)arg;
    __atomic_add_fetch(&p->started, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&p->hits[i], 1, __ATOMIC_SEQ_CST);
}

static void check_once(const probe* p, size_t count)
{
    for (size_t i = 0; i < MAXJ; i++) assert_int_equal(p->hits[i], i < count ? 1 : 0);
}

static void test_every_index_once(void** state)
{
    (void)state;
    static const size_t counts[] = { 0, 1, 2, 3, 7, 64, MAXJ };
    for (unsigned t = 1; t <= 4; t++) {
        lmc_pool* const pool = lmc_pool_create(t);
        assert_non_null(pool);
        assert_int_equal(lmc_pool_threads(pool), t);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            probe p;
            memset(&p, 0, sizeof(p));
            lmc_pool_run(pool, job, &p, counts[c]);
            check_once(&p, counts[c]);
        }
        lmc_pool_free(pool);
    }
    /* no pool: the caller runs them */
    probe p;
    memset(&p, 0, sizeof(p));
    lmc_pool_run(NULL, job, &p, 5);
    check_once(&p, 5);
}

/* Back-to-back batches (workers still polling) and batches after a pause
 * longer than the poll (workers asleep) both complete. */
static void test_polling_and_sleeping_workers(void** state)
{
    (void)state;
    lmc_pool* const pool = lmc_pool_create(3);
    assert_non_null(pool);
    for (int rep = 0; rep < 400; rep++) {
        probe p;
        memset(&p, 0, sizeof(p));
        size_t const count = 1 + (size_t)rep % 9;
        lmc_pool_run(pool, job, &p, count);
        check_once(&p, count);
        if (rep % 50 == 49) {
            struct timespec const pause = { 0, 5 * 1000 * 1000 };   /* 5 ms */
            nanosleep(&pause, NULL);
        }
    }
    lmc_pool_free(pool);
}

/* The ordered pipeline: every job once, prepares and commits in order and
 * one at a time (on any thread), a slot reused only after its commit, and
 * errors from commit and prepare. */
typedef struct {
    size_t n, window;
    size_t fail_commit, fail_prepare;   /* index that fails, or SIZE_MAX */
    size_t prepared, committed;
    long   owner[64];                   /* job prepared into each slot, -1 when free */
    int    ran[512];
    int    running;
    int    sequencing;                  /* inside a prepare or commit */
    int    bad;                         /* a broken promise seen */
} pipe_probe;

/* a prepare or commit that starts while another runs breaks the promise */
static void seq_enter(pipe_probe* p)
{
    if (__atomic_exchange_n(&p->sequencing, 1, __ATOMIC_SEQ_CST)) __atomic_store_n(&p->bad, 1, __ATOMIC_SEQ_CST);
}

static void seq_leave(pipe_probe* p) { __atomic_store_n(&p->sequencing, 0, __ATOMIC_SEQ_CST); }

static int pp_prepare_in(pipe_probe* p, size_t i, unsigned slot)
{
    if (i != p->prepared) p->bad = 1;
    if (i == p->n) return 1;
    if (i == p->fail_prepare) return -7;
    if (p->owner[slot] != -1 || slot >= p->window) p->bad = 1;   /* slot still in use */
    p->owner[slot] = (long)i;
    p->prepared++;
    return 0;
}

static int pp_prepare(void* arg, size_t i, unsigned slot)
{
    pipe_probe* const p = (pipe_probe*)arg;
    seq_enter(p);
    int const r = pp_prepare_in(p, i, slot);
    seq_leave(p);
    return r;
}

static void pp_job(void* arg, size_t i, unsigned slot)
{
    pipe_probe* const p = (pipe_probe*)arg;
    __atomic_add_fetch(&p->running, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->owner[slot], __ATOMIC_SEQ_CST) != (long)i) __atomic_store_n(&p->bad, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&p->ran[i], 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&p->running, 1, __ATOMIC_SEQ_CST);
}

static int pp_commit(void* arg, size_t i, unsigned slot)
{
    pipe_probe* const p = (pipe_probe*)arg;
    seq_enter(p);
    if (i % 5 == 0) {   /* a slow commit: room for another thread to start a step beside it */
        struct timespec const t = { 0, 20000 };
        nanosleep(&t, NULL);
    }
    if (i != p->committed || p->owner[slot] != (long)i || __atomic_load_n(&p->ran[i], __ATOMIC_SEQ_CST) != 1) p->bad = 1;
    p->owner[slot] = -1;
    p->committed++;
    seq_leave(p);
    return i == p->fail_commit ? -5 : 0;
}

static void pipe_run(lmc_pool* pool, size_t n, unsigned window, size_t fail_commit, size_t fail_prepare, int expect)
{
    static pipe_probe p;
    memset(&p, 0, sizeof(p));
    p.n = n; p.window = window; p.fail_commit = fail_commit; p.fail_prepare = fail_prepare;
    for (int s = 0; s < 64; s++) p.owner[s] = -1;
    int const r = lmc_pool_pipeline(pool, window, pp_prepare, pp_job, pp_commit, &p);
    assert_int_equal(r, expect);
    assert_int_equal(p.bad, 0);
    assert_int_equal(__atomic_load_n(&p.running, __ATOMIC_SEQ_CST), 0);   /* nothing left running */
    size_t const last = fail_commit < n ? fail_commit + 1 : fail_prepare < n ? fail_prepare : n;
    assert_int_equal(p.committed, last);                                   /* and nothing committed after a failure */
    for (size_t i = 0; i < last; i++) assert_int_equal(p.ran[i], 1);
}

static void test_pipeline(void** state)
{
    (void)state;
    for (unsigned t = 1; t <= 4; t++) {
        lmc_pool* const pool = lmc_pool_create(t);
        assert_non_null(pool);
        for (unsigned w = 1; w <= 8; w++) {
            static const size_t ns[] = { 0, 1, 2, 5, 100, 500 };
            for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
                pipe_run(pool, ns[k], w, SIZE_MAX, SIZE_MAX, 0);
            pipe_run(pool, 100, w, 37, SIZE_MAX, -5);    /* commit fails: its result, no later commit */
            pipe_run(pool, 100, w, SIZE_MAX, 37, -7);    /* prepare fails: jobs before it commit first */
            pipe_run(pool, 100, w, 20, 37, -5);          /* an earlier commit failure wins */
            lmc_pool_run(pool, job, &(probe){ 0 }, 3);   /* batches still work in between */
        }
        lmc_pool_free(pool);
    }
}

static void test_batch_size(void** state)
{
    (void)state;
    assert_int_equal(lmc_pool_batch(1), 1);
    assert_int_equal(lmc_pool_batch(2), 4);
    assert_int_equal(lmc_pool_batch(16), 18);
}

/* Workspaces are per thread: a job's lmc_pool_self() is below the thread
 * count, no two running jobs share it, the calling thread is 0, and a
 * worker of one pool is 0 to another pool. */
typedef struct {
    lmc_pool* pool;
    lmc_pool* other;
    unsigned threads;
    int busy[8];
    int clashes, out_of_range, caller_not_zero, other_not_zero;
    int used[8];
    pthread_t caller;
} self_probe;

static void self_job(void* arg, size_t i)
{
    self_probe* const p = (self_probe*)arg;
    unsigned const me = lmc_pool_self(p->pool);
    (void)i;
    if (me >= p->threads) { __atomic_add_fetch(&p->out_of_range, 1, __ATOMIC_SEQ_CST); return; }
    if (pthread_equal(pthread_self(), p->caller) && me != 0) __atomic_add_fetch(&p->caller_not_zero, 1, __ATOMIC_SEQ_CST);
    if (lmc_pool_self(p->other) != 0) __atomic_add_fetch(&p->other_not_zero, 1, __ATOMIC_SEQ_CST);
    if (__atomic_exchange_n(&p->busy[me], 1, __ATOMIC_SEQ_CST)) __atomic_add_fetch(&p->clashes, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->used[me], 1, __ATOMIC_SEQ_CST);
    struct timespec const t = { 0, 200000 };
    nanosleep(&t, NULL);
    __atomic_store_n(&p->busy[me], 0, __ATOMIC_SEQ_CST);
}

static int self_prep(void* arg, size_t i, unsigned slot) { (void)arg; (void)slot; return i >= 60; }
static void self_slot(void* arg, size_t i, unsigned slot) { (void)slot; self_job(arg, i); }
static int self_commit(void* arg, size_t i, unsigned slot) { (void)arg; (void)i; (void)slot; return 0; }

static void test_self_index(void** state)
{
    (void)state;
    self_probe p;
    memset(&p, 0, sizeof(p));
    p.threads = 4;
    p.pool = lmc_pool_create(p.threads);
    p.other = lmc_pool_create(2);
    assert_non_null(p.pool);
    assert_non_null(p.other);
    p.caller = pthread_self();
    assert_int_equal(lmc_pool_self(p.pool), 0);
    lmc_pool_run(p.pool, self_job, &p, 60);
    assert_int_equal(lmc_pool_pipeline(p.pool, 6, self_prep, self_slot, self_commit, &p), 0);
    assert_int_equal(p.out_of_range, 0);
    assert_int_equal(p.clashes, 0);
    assert_int_equal(p.caller_not_zero, 0);
    assert_int_equal(p.other_not_zero, 0);
    int nused = 0;
    for (unsigned t = 0; t < p.threads; t++) nused += p.used[t];
    assert_true(nused >= 2);   /* workers took jobs under their own index */
    lmc_pool_free(p.other);
    lmc_pool_free(p.pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_index_once),
        cmocka_unit_test(test_polling_and_sleeping_workers),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_batch_size),
        cmocka_unit_test(test_self_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
