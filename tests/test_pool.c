/* test_pool.c - the fork-join pool (lib/common/pool.c): every index runs
 * exactly once, the serial function runs once per call and while workers
 * already take jobs, and batches keep working whether the workers are still
 * polling for the next one or have gone to sleep. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "pool.h"

#define MAXJ 256

typedef struct {
    int hits[MAXJ];
    int serial_runs;
    int started;        /* jobs begun, read by the serial function */
    int serial_saw_job; /* the serial function saw a job begin before it returned */
    int wait_for_job;   /* the serial function waits (bounded) for a job to begin */
} probe;

static void job(void* arg, size_t i)
{
    probe* const p = (probe*)arg;
    __atomic_add_fetch(&p->started, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&p->hits[i], 1, __ATOMIC_SEQ_CST);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void serial(void* arg)
{
    probe* const p = (probe*)arg;
    p->serial_runs++;
    if (!p->wait_for_job) return;
    double const t0 = now();
    while (now() - t0 < 10.0)
        if (__atomic_load_n(&p->started, __ATOMIC_SEQ_CST) > 0) { p->serial_saw_job = 1; return; }
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
            memset(&p, 0, sizeof(p));
            lmc_pool_run_with(pool, job, &p, counts[c], serial, &p);
            check_once(&p, counts[c]);
            assert_int_equal(p.serial_runs, 1);   /* also when there is no job */
        }
        lmc_pool_free(pool);
    }
    /* no pool: serial in the caller */
    probe p;
    memset(&p, 0, sizeof(p));
    lmc_pool_run_with(NULL, job, &p, 5, serial, &p);
    check_once(&p, 5);
    assert_int_equal(p.serial_runs, 1);
}

/* With workers, the serial function runs while they code: here it waits for
 * a job to begin, which only a worker can do (the caller takes jobs after
 * it returns). Running it before waking the workers would time out. */
static void test_serial_overlaps_jobs(void** state)
{
    (void)state;
    for (unsigned t = 2; t <= 3; t++) {
        lmc_pool* const pool = lmc_pool_create(t);
        assert_non_null(pool);
        for (int rep = 0; rep < 20; rep++) {
            probe p;
            memset(&p, 0, sizeof(p));
            p.wait_for_job = 1;
            size_t const count = rep % 2 ? 1 : 8;   /* one job alone goes to a worker too */
            lmc_pool_run_with(pool, job, &p, count, serial, &p);
            assert_int_equal(p.serial_saw_job, 1);
            check_once(&p, count);
        }
        lmc_pool_free(pool);
    }
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

static void test_batch_size(void** state)
{
    (void)state;
    assert_int_equal(lmc_pool_batch(1), 1);
    assert_int_equal(lmc_pool_batch(2), 4);
    assert_int_equal(lmc_pool_batch(16), 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_index_once),
        cmocka_unit_test(test_serial_overlaps_jobs),
        cmocka_unit_test(test_polling_and_sleeping_workers),
        cmocka_unit_test(test_batch_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
