/*
 * prefetch.c - maps file pages in ahead of the coder (see prefetch.h).
 */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14; older kernels answer EINVAL */
#endif

/* Mapped in per madvise call: small enough that a new request, or a
 * forget, waits for at most about a millisecond of it. */
#define STEP ((size_t)1 << 20)

typedef struct {
    const unsigned char* base;
    size_t next, end;   /* what is still to be mapped in: [next, end) */
} region_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;          /* 0 not started, 1 running, -1 unavailable */
    int busy;           /* the region mapped in outside the lock, or -1 */
    region_t r[PREFETCH_REGIONS];
} g_pf = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, { { NULL, 0, 0 }, { NULL, 0, 0 } } };

static void* prefetch_main(void* arg)
{
    int turn = 0;
    (void)arg;
    pthread_mutex_lock(&g_pf.mu);
    for (;;) {
        int k = -1;
        /* take the regions in turn, a step each, so that neither waits for
         * the other's whole range */
        for (int i = 0; i < PREFETCH_REGIONS; i++) {
            int const c = (turn + i) % PREFETCH_REGIONS;
            if (g_pf.r[c].base && g_pf.r[c].next < g_pf.r[c].end) { k = c; break; }
        }
        if (k < 0) { pthread_cond_wait(&g_pf.cv, &g_pf.mu); continue; }
        turn = k + 1;
        region_t* const r = &g_pf.r[k];
        size_t const n = r->end - r->next < STEP ? r->end - r->next : STEP;
        void* const p = (void*)(r->base + r->next);
        r->next += n;
        g_pf.busy = k;
        pthread_mutex_unlock(&g_pf.mu);
        int const rc = madvise(p, n, MADV_POPULATE_READ);
        int const e = errno;
        pthread_mutex_lock(&g_pf.mu);
        g_pf.busy = -1;
        if (rc != 0) {
            /* EINVAL: a kernel without it; stop for good. Otherwise (a file
             * cut short under us, no memory) give up this request: the coder
             * faults the pages in, or meets the error, itself. */
            if (e == EINVAL) g_pf.state = -1;
            r->next = r->end;
        }
        pthread_cond_broadcast(&g_pf.cv);
        if (g_pf.state < 0) {
            for (int i = 0; i < PREFETCH_REGIONS; i++) g_pf.r[i].base = NULL;
            pthread_mutex_unlock(&g_pf.mu);
            return NULL;
        }
    }
}

/* With g_pf.mu held: 0 if the thread runs. */
static int start_locked(void)
{
    pthread_t tid;
    sigset_t all, old;
    if (g_pf.state) return g_pf.state > 0 ? 0 : -1;
    /* the thread takes no signals: they stay with the threads that handle them */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int const rc = pthread_create(&tid, NULL, prefetch_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) { g_pf.state = -1; return -1; }
    pthread_detach(tid);
    g_pf.state = 1;
    return 0;
}

void prefetch_want(int region, const unsigned char* base, size_t size, size_t from, size_t to)
{
    size_t const page = (size_t)sysconf(_SC_PAGESIZE);
    if (region < 0 || region >= PREFETCH_REGIONS || !base) return;
    if (to > size) to = size;
    if (from >= to) return;
    from -= from % page;   /* the mapping starts on a page; its last page is whole */
    pthread_mutex_lock(&g_pf.mu);
    if (start_locked() == 0) {
        region_t* const r = &g_pf.r[region];
        r->base = base;
        r->next = from;
        r->end = to;
        pthread_cond_broadcast(&g_pf.cv);
    }
    pthread_mutex_unlock(&g_pf.mu);
}

void prefetch_forget(int region)
{
    if (region < 0 || region >= PREFETCH_REGIONS) return;
    pthread_mutex_lock(&g_pf.mu);
    g_pf.r[region].base = NULL;
    g_pf.r[region].next = g_pf.r[region].end = 0;
    while (g_pf.busy == region) pthread_cond_wait(&g_pf.cv, &g_pf.mu);
    pthread_mutex_unlock(&g_pf.mu);
}
