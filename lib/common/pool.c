/* pool.c - fork-join pool on pthreads. Jobs are chunk-sized (>= 1 MiB of
 * content), so a mutex-protected counter costs nothing measurable. */
#include <pthread.h>
#include <stdlib.h>
#include "pool.h"

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

static void* worker(void* opaque)
{
    lmc_pool* const p = (lmc_pool*)opaque;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
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
    p->quit = 1;
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
    if (count == 0) return;
    if (!p || p->nworkers == 0 || count == 1) {
        for (size_t i = 0; i < count; i++) fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn; p->arg = arg;
    p->count = count; p->next = 0; p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    drain(p);
    while (p->finished < p->count) pthread_cond_wait(&p->done, &p->mu);
    p->count = 0; p->next = 0;
    pthread_mutex_unlock(&p->mu);
}
