/*
 * prefetch.c - maps file pages in ahead of the coder and hashes the
 * reference (see prefetch.h).
 */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lmc.h"
#include "cpuplace.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14; older kernels answer EINVAL */
#endif

/* Mapped in, or read for the hash, per call: small enough that a new
 * request, a forget or a cancel waits for at most about a millisecond. */
#define STEP ((size_t)1 << 20)

enum { BUSY_NONE = -1, BUSY_HASH = PREFETCH_REGIONS };   /* else the region */

typedef struct {
    const unsigned char* base;
    size_t next, end;   /* what is still to be mapped in: [next, end) */
    /* the caller's drops of pages of the mapping (prefetch_dropping):
     * begun and ended so far, and the highest end of a range dropped */
    unsigned drops_begun, drops_ended;
    size_t dropped_below;
} region_t;

typedef struct {
    int active;         /* started, result not yet taken */
    int done;           /* err and result final */
    int urgent;         /* someone waits for the result */
    int fd;
    const unsigned char* map;   /* the file mapped, NULL: read it all */
    size_t size, pos;   /* [0, pos) hashed */
    int err;
    uint64_t result;
    lmc_hash_state* state;
} hash_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;          /* 0 not started, 1 running, -1 unavailable */
    int no_populate;    /* the kernel cannot (MADV_POPULATE_*): hash only */
    int busy;           /* what the thread works on outside the lock */
    region_t r[PREFETCH_REGIONS];
    hash_t h;
    unsigned char* buf; /* STEP bytes, for pread */
} g_pf = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .busy = BUSY_NONE };

/* With the lock held: the hash is over (err 0: complete). */
static void hash_finish_locked(int err)
{
    hash_t* const h = &g_pf.h;
    h->err = err;
    if (!err) h->result = lmc_hash_digest(h->state);
    lmc_hash_free(h->state);
    h->state = NULL;
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
    h->done = 1;
    pthread_cond_broadcast(&g_pf.cv);
}

/* With the lock held: how much of the reference the thread should read for
 * its hash now, from h->pos (0: nothing). Only what the coder has asked for
 * (below the end of its latest request, which the thread has mapped in
 * already: reading it catches the hash up with the mapping, so that it
 * hashes the next request's pages as it maps them), unless nothing else
 * will: the file is not mapped (or no longer used), or someone waits for
 * the result. Before the coder's first request it waits: reading ahead
 * then would leave nothing for the mapped pages to save. */
static size_t hash_read_now_locked(void)
{
    hash_t const* const h = &g_pf.h;
    region_t const* const r = &g_pf.r[PREFETCH_REF];
    size_t const left = h->size - h->pos;
    size_t const most = left < STEP ? left : STEP;
    if (!h->active || h->done) return 0;
    if (h->urgent || !h->map) return most;
    if (r->base != h->map || h->pos >= r->end) return 0;
    return r->end - h->pos < most ? r->end - h->pos : most;
}

/* the page size, and where the touches' sum goes (so that they happen) */
static size_t g_page = 4096;
static volatile unsigned g_touch_sink;
static void* prefetch_main(void* arg)
{
    int turn = 0;
    hash_t* const h = &g_pf.h;
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
        if (k >= 0) {
            region_t* const r = &g_pf.r[k];
            size_t const a = r->next;
            size_t const n = r->end - a < STEP ? r->end - a : STEP;
            const unsigned char* const base = r->base;
            /* the hash takes these pages while they are mapped in, when
             * they are the next it needs */
            int const hash_it = k == PREFETCH_REF && h->active && !h->done && h->map == base
                                && a <= h->pos && h->pos < a + n;
            size_t const hfrom = h->pos;
            turn = k + 1;
            unsigned const begun = r->drops_begun, ended = r->drops_ended;
            r->next += n;
            g_pf.busy = k;
            pthread_mutex_unlock(&g_pf.mu);
            int const rc = madvise((void*)(base + a), n, MADV_POPULATE_READ);
            int const e = errno;
            /* A byte of each page read here too: on a PVM guest the host
             * shadows each new page table entry on its first access, about
             * 1.2-2.5 us a page after the populate, and this thread takes
             * that instead of the coder (2026-12-02, AMD EPYC VM, 53 MB bf16
             * file to a file, -T1, medians of 11 alternated runs: keyframe
             * decompression 67 -> 60 ms, delta 88 -> 83; -T2 within noise). */
            if (rc == 0) {
                unsigned sum = 0;
                for (size_t o = 0; o < n; o += g_page) sum += ((const volatile unsigned char*)base)[a + o];
                g_touch_sink += sum;
            }
            if (rc == 0 && hash_it) lmc_hash_update(h->state, base + hfrom, a + n - hfrom);
            pthread_mutex_lock(&g_pf.mu);
            /* a drop by the caller overlapped this step (one began during
             * it, or was under way when it began): pages mapped in after the
             * caller dropped them would stay in the process's memory, so drop
             * them again */
            if (r->base == base && (r->drops_begun != begun || begun != ended) && r->dropped_below > a) {
                size_t const upto = r->dropped_below < a + n ? r->dropped_below : a + n;
                pthread_mutex_unlock(&g_pf.mu);
                madvise((void*)(base + a), upto - a, MADV_DONTNEED);
                pthread_mutex_lock(&g_pf.mu);
            }
            g_pf.busy = BUSY_NONE;
            if (rc == 0 && hash_it && !h->done) {
                h->pos = a + n;
                if (h->pos == h->size) hash_finish_locked(0);
            }
            if (rc != 0) {
                /* EINVAL: a kernel without it; map nothing more. Otherwise
                 * (a file cut short under us, no memory) drop this request:
                 * the coder faults the pages in, or meets the error, itself;
                 * the hash reads the rest of the file, and sees it shrink. */
                if (e == EINVAL) g_pf.no_populate = 1;
                if (k == PREFETCH_REF && h->map == base) h->map = NULL;
                r->next = r->end;
            }
            if (g_pf.no_populate) {   /* the hash reads the file from now on */
                for (int i = 0; i < PREFETCH_REGIONS; i++) g_pf.r[i].base = NULL;
                h->map = NULL;
            }
            pthread_cond_broadcast(&g_pf.cv);
            continue;
        }
        size_t const n = hash_read_now_locked();
        if (n) {
            size_t const off = h->pos;
            g_pf.busy = BUSY_HASH;
            pthread_mutex_unlock(&g_pf.mu);
            ssize_t const got = pread(h->fd, g_pf.buf, n, (off_t)off);
            int const e = errno;
            if (got > 0) lmc_hash_update(h->state, g_pf.buf, (size_t)got);
            pthread_mutex_lock(&g_pf.mu);
            g_pf.busy = BUSY_NONE;
            if (got > 0) {
                h->pos += (size_t)got;
                if (h->pos == h->size) hash_finish_locked(0);
            } else if (!(got < 0 && e == EINTR)) {
                hash_finish_locked(got < 0 ? e : -1);
            }
            pthread_cond_broadcast(&g_pf.cv);
            continue;
        }
        pthread_cond_wait(&g_pf.cv, &g_pf.mu);
    }
    return NULL;
}

/* With the lock held: 0 if the thread runs. */
static int start_locked(void)
{
    pthread_t tid;
    sigset_t set, old;
    if (g_pf.state) return g_pf.state > 0 ? 0 : -1;
    long const ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) g_page = (size_t)ps;
    /* the thread takes no asynchronous signals: they stay with the threads
     * that handle them. A SIGBUS of its own (a file cut short) still reaches
     * the CLI's handler. */
    sigfillset(&set);
    sigdelset(&set, SIGBUS);
    sigdelset(&set, SIGSEGV);
    pthread_sigmask(SIG_SETMASK, &set, &old);
    pthread_attr_t attr;
    int const have_attr = cpuplace_attr(&attr) == 0;
    int const rc = pthread_create(&tid, have_attr ? &attr : NULL, prefetch_main, NULL);
    if (have_attr) pthread_attr_destroy(&attr);
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
    if (start_locked() == 0 && !g_pf.no_populate) {
        region_t* const r = &g_pf.r[region];
        r->base = base;
        r->next = from;
        r->end = to;
        pthread_cond_broadcast(&g_pf.cv);
    }
    pthread_mutex_unlock(&g_pf.mu);
}

void prefetch_dropping(int region, size_t upto)
{
    size_t const page = (size_t)sysconf(_SC_PAGESIZE);
    if (region < 0 || region >= PREFETCH_REGIONS) return;
    upto -= upto % page;
    pthread_mutex_lock(&g_pf.mu);
    g_pf.r[region].drops_begun++;
    if (upto > g_pf.r[region].dropped_below) g_pf.r[region].dropped_below = upto;
    pthread_mutex_unlock(&g_pf.mu);
}

void prefetch_dropped(int region)
{
    if (region < 0 || region >= PREFETCH_REGIONS) return;
    pthread_mutex_lock(&g_pf.mu);
    g_pf.r[region].drops_ended++;
    pthread_mutex_unlock(&g_pf.mu);
}

void prefetch_forget(int region)
{
    if (region < 0 || region >= PREFETCH_REGIONS) return;
    pthread_mutex_lock(&g_pf.mu);
    if (region == PREFETCH_REF && g_pf.h.map == g_pf.r[region].base) g_pf.h.map = NULL;
    g_pf.r[region].base = NULL;
    g_pf.r[region].next = g_pf.r[region].end = 0;
    g_pf.r[region].dropped_below = 0;
    while (g_pf.busy == region) pthread_cond_wait(&g_pf.cv, &g_pf.mu);
    pthread_cond_broadcast(&g_pf.cv);   /* the hash may now read what it mapped */
    pthread_mutex_unlock(&g_pf.mu);
}

int prefetch_hash_start(int fd, const unsigned char* map, size_t size)
{
    hash_t* const h = &g_pf.h;
    int rc = -1;
    pthread_mutex_lock(&g_pf.mu);
    if (!h->active && start_locked() == 0) {
        if (!g_pf.buf) g_pf.buf = (unsigned char*)malloc(STEP);
        h->state = g_pf.buf ? lmc_hash_create() : NULL;
        if (h->state) {
            h->active = 1;
            h->done = h->urgent = 0;
            h->fd = fd;
            h->map = g_pf.no_populate ? NULL : map;
            h->size = size;
            h->pos = 0;
            h->err = 0;
            if (size == 0) hash_finish_locked(0);
            pthread_cond_broadcast(&g_pf.cv);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&g_pf.mu);
    return rc;
}

int prefetch_hash_result(uint64_t* hash)
{
    hash_t* const h = &g_pf.h;
    int err;
    pthread_mutex_lock(&g_pf.mu);
    if (!h->active) { pthread_mutex_unlock(&g_pf.mu); return EINVAL; }
    h->urgent = 1;
    pthread_cond_broadcast(&g_pf.cv);
    while (!h->done) pthread_cond_wait(&g_pf.cv, &g_pf.mu);
    *hash = h->result;
    err = h->err;
    h->active = 0;
    pthread_mutex_unlock(&g_pf.mu);
    return err;
}

void prefetch_hash_cancel(void)
{
    hash_t* const h = &g_pf.h;
    pthread_mutex_lock(&g_pf.mu);
    if (h->active) {
        /* the thread hashes outside the lock while busy with the file */
        while (g_pf.busy == BUSY_HASH || g_pf.busy == PREFETCH_REF) pthread_cond_wait(&g_pf.cv, &g_pf.mu);
        if (!h->done) hash_finish_locked(ECANCELED);
        h->active = 0;
    }
    pthread_mutex_unlock(&g_pf.mu);
}
