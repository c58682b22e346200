/*
 * store.c - the snapshot store (doc/store.md): many snapshots of checkpoint
 * files kept as lmc frames, each a keyframe or a delta against the previous
 * snapshot of the same file name.
 *
 * Crash safety: a frame file is written under a temporary name, fsync()ed and
 * renamed to a name no committed manifest uses; the manifest is then replaced
 * the same way (temp, fsync, rename, fsync of the directory). Until that last
 * rename the old manifest, and every frame it names, is untouched; frames it
 * no longer names are removed only after it. Files left by an interrupted
 * operation (temporaries, frames no manifest names) are removed under the
 * store's lock by the next operation that changes the store, by open and by
 * verify.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "lmc.h"
#include "error.h"
#include "hash.h"
#include "frame.h"
#include "store/manifest.h"

#define MANIFEST_NAME "manifest.json"
#define MANIFEST_TMP  "manifest.json.tmp"
#define LOCK_NAME     "lock"
#define FRAMES_DIR    "frames"
#define CACHE_DIR     "cache"
/* The output buffer of compression takes a whole run of chunks (a job slot
 * each: threads + 2) and at least 8 MiB, as the lmc command's: with 2 MiB,
 * room for one chunk's bound, every run coded one chunk and threads idled
 * (adding a 200 MB delta took 0.73 s with -T2, as with -T1). */
#define IO_BUF_MIN    ((size_t)8 << 20)

struct lmc_store_s {
    int dirfd;
    int lockfd;
    int locked;           /* 0, LOCK_SH or LOCK_EX */
    lmc_manifest m;
    int have_mst;
    struct stat mst;      /* manifest file as loaded */
    int threads;
    int cache;
    int fsync_on;
    lmc_cctx* cctx;
    lmc_dctx* dctx;
    unsigned char* iobuf;
    size_t iobuf_size;
    char err[1024];
};

static const unsigned char k_empty[1];

/*-************************************************************
 * Errors
 **************************************************************/
static size_t seterr(lmc_store* s, size_t code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static size_t seterr(lmc_store* s, size_t code, const char* fmt, ...)
{
    if (s) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof s->err, fmt, ap);
        va_end(ap);
    }
    return code;
}

static size_t io_err(lmc_store* s, const char* what, const char* name)
{
    return seterr(s, LMC_ERR(IO), "%s %s: %s", what, name, strerror(errno));
}

const char* lmc_store_last_error(const lmc_store* s)
{
    return s ? s->err : "";
}

/*-************************************************************
 * File helpers
 **************************************************************/
static int write_all(int fd, const void* buf, size_t n)
{
    const char* p = (const char*)buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void* buf, size_t n)
{
    char* p = (char*)buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) { errno = EIO; return -1; }  /* shorter than its size: changed under us */
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int sync_dir(lmc_store* s, const char* sub)
{
    int fd, r;
    if (!s->fsync_on) return 0;
    fd = sub ? openat(s->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : dup(s->dirfd);
    if (fd < 0) return -1;
    r = fsync(fd);
    close(fd);
    return r;
}

/* A read-only view of a whole file: mmap()ed, or k_empty when empty. */
typedef struct { const unsigned char* p; size_t n; int mapped; } fview;

static void fview_close(fview* v)
{
    if (v->mapped) munmap((void*)v->p, v->n);
    v->p = NULL; v->n = 0; v->mapped = 0;
}

static int fview_fd(fview* v, int fd)
{
    struct stat st;
    v->p = k_empty; v->n = 0; v->mapped = 0;
    if (fstat(fd, &st) != 0) return -1;
    if (!S_ISREG(st.st_mode)) { errno = EINVAL; return -1; }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) { errno = EFBIG; return -1; }
    if (st.st_size == 0) return 0;
    {
        void* p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) return -1;
        v->p = (const unsigned char*)p;
        v->n = (size_t)st.st_size;
        v->mapped = 1;
    }
    return 0;
}

static int fview_at(fview* v, int dirfd, const char* name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    int r, saved;
    if (fd < 0) return -1;
    r = fview_fd(v, fd);
    saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/*-************************************************************
 * Contents in bounded memory
 **************************************************************/
/* Contents are whole checkpoint files, many GB. Where one lies in a file (an
 * input, the cache, a frame, the restored output, or a temporary file for a
 * snapshot decoded for the store's own use) its pages are dropped from this
 * process's memory (MADV_DONTNEED) behind the work; they stay in the page
 * cache, dirty ones included, and come back from the file if touched again.
 * Memory then holds the library's workspaces and a window or two, whatever
 * the size, as for the lmc command; before, a restore through deltas held
 * two whole contents on the heap. */
#define WINDOW ((size_t)8 << 20)

/* p[0, n). drop: its pages come from a file (they may be dropped). */
typedef struct {
    unsigned char* p;
    size_t n;
    int drop;
    int kind;
} cbuf;
enum { CB_BORROWED, CB_HEAP, CB_MAP };   /* freed by: nobody, free(), munmap() */

static cbuf cbuf_borrow(const void* p, size_t n, int drop)
{
    cbuf c;
    c.p = (unsigned char*)p; c.n = n; c.drop = drop; c.kind = CB_BORROWED;
    return c;
}

static void cbuf_free(cbuf* c)
{
    if (c->kind == CB_HEAP) free(c->p);
    else if (c->kind == CB_MAP && c->n) munmap(c->p, c->n);
    *c = cbuf_borrow(NULL, 0, 0);
}

/* Drops the pages of c that lie whole in [0, to), from the one holding `from`
 * on (its bytes before `from` were done with before). */
static void cbuf_drop(const cbuf* c, size_t from, size_t to)
{
    uintptr_t const pg = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)c->p;
    uintptr_t const first = (base + pg - 1) / pg * pg;   /* no page that begins before c */
    uintptr_t a = (base + from) / pg * pg, b = (base + to) / pg * pg;
    if (a < first) a = first;
    if (c->drop && b > a) madvise((void*)a, b - a, MADV_DONTNEED);
}

/* Maps the pages of c in [from, to) before they are used (a content in a
 * file): one call instead of a fault a page (verifying a chain of two 200 MB
 * snapshots took 151k page faults on the heap, 4.8k with this). A hint
 * only, where the kernel has it (Linux 5.14). */
static void cbuf_populate(const cbuf* c, size_t from, size_t to, int write)
{
    uintptr_t const pg = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)c->p;
    uintptr_t a = (base + from) / pg * pg, b;
    if (!c->drop || to > c->n || from >= to) return;
    b = (base + to + pg - 1) / pg * pg;
    if (a < base / pg * pg) a = base / pg * pg;
#ifdef MADV_POPULATE_WRITE
    madvise((void*)a, b - a, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
    (void)a; (void)b; (void)write;
#endif
}

/* XXH3-64 of a content, a window at a time, dropping pages behind. */
static uint64_t cbuf_hash(const cbuf* c)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (size_t at = 0; at < c->n;) {
        size_t const k = LMC_MIN(WINDOW, c->n - at);
        lmc_hstate_update(&st, c->p + at, k);
        cbuf_drop(c, at, at + k);
        at += k;
    }
    return XXH3_64bits_digest(&st);
}

/* Room for a content of n bytes that the store decodes for its own use: an
 * unlinked temporary file in DIR/cache (O_TMPFILE, else a name unlinked at
 * once), its blocks reserved first (a full disk is then an error here, not a
 * SIGBUS in the mapping), mapped shared; where the file system cannot, the
 * heap. */
static size_t cbuf_room(lmc_store* s, cbuf* c, uint64_t n)
{
    *c = cbuf_borrow(NULL, 0, 0);
    if (n > (uint64_t)SIZE_MAX - 1 || n > (uint64_t)INT64_MAX)
        return seterr(s, LMC_ERR(LIMIT), "content of %llu bytes too large for this system", (unsigned long long)n);
    if (n) {
        int fd = openat(s->dirfd, CACHE_DIR, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        /* DIR/cache removed by hand (it only holds copies): made again, or
         * a restore would decode a whole parent onto the heap (a 213 MB
         * keyframe held 230 MiB) */
        if (fd < 0 && errno == ENOENT && mkdirat(s->dirfd, CACHE_DIR, 0777) == 0)
            fd = openat(s->dirfd, CACHE_DIR, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) {
            static unsigned counter;
            char nm[64];
            snprintf(nm, sizeof nm, CACHE_DIR "/.content-%ld-%x", (long)getpid(),
                     __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
            fd = openat(s->dirfd, nm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd >= 0) unlinkat(s->dirfd, nm, 0);
        }
        if (fd >= 0) {
            void* p = MAP_FAILED;
            if (fallocate(fd, 0, 0, (off_t)n) == 0) p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (p != MAP_FAILED) { c->p = (unsigned char*)p; c->n = (size_t)n; c->drop = 1; c->kind = CB_MAP; return 0; }
        }
    }
    c->p = (unsigned char*)malloc(n ? (size_t)n : 1);
    if (!c->p) return seterr(s, LMC_ERR(MEMORY), "out of memory (%llu bytes)", (unsigned long long)n);
    c->n = (size_t)n; c->kind = CB_HEAP;
    return 0;
}

static void cache_name(const char* name, char out[32])
{
    snprintf(out, 32, CACHE_DIR "/%016llx", (unsigned long long)lmc_h64(name, strlen(name)));
}

static void frame_name(uint64_t id, char out[LMC_FRAME_NAME_LEN + 1])
{
    snprintf(out, LMC_FRAME_NAME_LEN + 1, FRAMES_DIR "/%016llx.lmc", (unsigned long long)id);
}

/*-************************************************************
 * Manifest on disk
 **************************************************************/
static size_t manifest_clone(lmc_manifest* dst, const lmc_manifest* src)
{
    lmc_manifest_init(dst);
    dst->keyframe_every = src->keyframe_every;
    dst->next_id = src->next_id;
    if (src->count == 0) return 0;
    dst->e = (lmc_mentry*)calloc(src->count + 1, sizeof *dst->e);
    if (!dst->e) return LMC_ERR(MEMORY);
    dst->cap = src->count + 1;
    for (size_t i = 0; i < src->count; i++) {
        dst->e[i] = src->e[i];
        dst->e[i].name = strdup(src->e[i].name);
        if (!dst->e[i].name) { dst->count = i; lmc_manifest_free(dst); return LMC_ERR(MEMORY); }
    }
    dst->count = src->count;
    return 0;
}

static size_t manifest_append(lmc_manifest* m, const lmc_mentry* e)
{
    lmc_mentry copy = *e;
    copy.name = strdup(e->name);
    if (!copy.name) return LMC_ERR(MEMORY);
    size_t const r = lmc_manifest_push(m, &copy);
    if (LMC_IS_ERR(r)) free(copy.name);
    return r;
}

/* Reads and checks DIR/manifest.json into s->m (replacing it only on success). */
static size_t load_manifest(lmc_store* s)
{
    int fd = openat(s->dirfd, MANIFEST_NAME, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char* buf;
    lmc_manifest nm;
    char msg[512];
    size_t r;
    if (fd < 0) {
        if (errno == ENOENT) return seterr(s, LMC_ERR(STORE), "not an lmc store: no " MANIFEST_NAME);
        return io_err(s, "cannot open", MANIFEST_NAME);
    }
    if (fstat(fd, &st) != 0) { r = io_err(s, "cannot stat", MANIFEST_NAME); close(fd); return r; }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > LMC_MANIFEST_MAX_SIZE) {
        close(fd);
        return seterr(s, LMC_ERR(STORE), MANIFEST_NAME " is not a regular file of at most %zu bytes", LMC_MANIFEST_MAX_SIZE);
    }
    buf = (char*)malloc((size_t)st.st_size + 1);
    if (!buf) { close(fd); return seterr(s, LMC_ERR(MEMORY), "out of memory"); }
    if (read_all(fd, buf, (size_t)st.st_size) != 0) {
        r = io_err(s, "cannot read", MANIFEST_NAME);
        free(buf); close(fd);
        return r;
    }
    close(fd);
    msg[0] = 0;
    r = lmc_manifest_parse(&nm, buf, (size_t)st.st_size, msg, sizeof msg);
    free(buf);
    if (LMC_IS_ERR(r)) return seterr(s, r, MANIFEST_NAME ": %s", msg);
    lmc_manifest_free(&s->m);
    s->m = nm;
    s->mst = st;
    s->have_mst = 1;
    return 0;
}

/* Reloads the manifest if another handle or process replaced it. */
static size_t refresh(lmc_store* s)
{
    struct stat st;
    if (s->have_mst && fstatat(s->dirfd, MANIFEST_NAME, &st, 0) == 0
        && st.st_ino == s->mst.st_ino && st.st_dev == s->mst.st_dev && st.st_size == s->mst.st_size
        && st.st_mtim.tv_sec == s->mst.st_mtim.tv_sec && st.st_mtim.tv_nsec == s->mst.st_mtim.tv_nsec)
        return 0;
    return load_manifest(s);
}

static size_t write_file_at(lmc_store* s, const char* tmp, const char* final, const void* data, size_t n, int do_sync)
{
    int fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return io_err(s, "cannot create", tmp);
    if (write_all(fd, data, n) != 0 || (do_sync && s->fsync_on && fsync(fd) != 0)) {
        size_t r = io_err(s, "cannot write", tmp);
        close(fd);
        unlinkat(s->dirfd, tmp, 0);
        return r;
    }
    if (close(fd) != 0) { size_t r = io_err(s, "cannot write", tmp); unlinkat(s->dirfd, tmp, 0); return r; }
    if (renameat(s->dirfd, tmp, s->dirfd, final) != 0) {
        size_t r = io_err(s, "cannot rename into place", final);
        unlinkat(s->dirfd, tmp, 0);
        return r;
    }
    return 0;
}

/* Commits `nm` as the store's manifest (atomic replacement), then adopts it. */
static size_t save_manifest(lmc_store* s, lmc_manifest* nm)
{
    char* text = lmc_manifest_dump(nm);
    size_t r;
    struct stat st;
    if (!text) return seterr(s, LMC_ERR(MEMORY), "out of memory");
    r = write_file_at(s, MANIFEST_TMP, MANIFEST_NAME, text, strlen(text), 1);
    free(text);
    if (LMC_IS_ERR(r)) return r;
    if (sync_dir(s, NULL) != 0) return io_err(s, "cannot sync", "the store directory");
    lmc_manifest_free(&s->m);
    s->m = *nm;
    lmc_manifest_init(nm);
    if (fstatat(s->dirfd, MANIFEST_NAME, &st, 0) == 0) { s->mst = st; s->have_mst = 1; }
    else s->have_mst = 0;
    return 0;
}

/*-************************************************************
 * Locking and clean-up
 **************************************************************/
static size_t lock_store(lmc_store* s, int how)
{
    if (s->lockfd < 0) return 0;  /* read-only store without a lock file */
    while (flock(s->lockfd, how) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return LMC_ERR(GENERIC);
        return io_err(s, "cannot lock", LOCK_NAME);
    }
    s->locked = how & (LOCK_SH | LOCK_EX);
    return 0;
}

static void unlock_store(lmc_store* s)
{
    if (s->lockfd >= 0 && s->locked) flock(s->lockfd, LOCK_UN);
    s->locked = 0;
}

static int qcmp_str(const void* a, const void* b)
{
    return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Removes what an interrupted operation left behind: temporaries, frames the
 * manifest does not name, caches of no chain. Needs the exclusive lock. Best effort. */
static void cleanup(lmc_store* s)
{
    const char** frames = NULL;
    const char** caches = NULL;
    char (*cnames)[32] = NULL;
    size_t nf = 0, nc = 0;
    const char* subs[2] = { FRAMES_DIR, CACHE_DIR };

    unlinkat(s->dirfd, MANIFEST_TMP, 0);
    if (s->m.count) {
        frames = (const char**)malloc(s->m.count * sizeof *frames);
        caches = (const char**)malloc(s->m.count * sizeof *caches);
        cnames = (char (*)[32])malloc(s->m.count * sizeof *cnames);
        if (!frames || !caches || !cnames) goto out;
        for (size_t i = 0; i < s->m.count; i++) {
            frames[nf++] = s->m.e[i].frame + 7;  /* without "frames/" */
            if (s->m.e[i].next < 0) {  /* chain head: the cache holds its content */
                cache_name(s->m.e[i].name, cnames[nc]);
                caches[nc] = cnames[nc] + 6;  /* without "cache/" */
                nc++;
            }
        }
        qsort(frames, nf, sizeof *frames, qcmp_str);
        qsort(caches, nc, sizeof *caches, qcmp_str);
    }
    for (int k = 0; k < 2; k++) {
        int fd = openat(s->dirfd, subs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR* d;
        struct dirent* de;
        if (fd < 0) continue;
        d = fdopendir(fd);
        if (!d) { close(fd); continue; }
        while ((de = readdir(d)) != NULL) {
            const char* nm = de->d_name;
            const char** keep = k == 0 ? frames : caches;
            size_t nk = k == 0 ? nf : nc;
            if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
            if (nk && bsearch(&nm, keep, nk, sizeof *keep, qcmp_str)) continue;
            unlinkat(dirfd(d), nm, 0);
        }
        closedir(d);
    }
out:
    free(frames);
    free(caches);
    free(cnames);
}

/* Takes the exclusive lock, reloads the manifest, cleans up. */
static size_t begin_change(lmc_store* s)
{
    size_t r;
    s->err[0] = 0;
    if (s->lockfd < 0) return seterr(s, LMC_ERR(IO), "store is read-only (no lock file)");
    r = lock_store(s, LOCK_EX);
    if (LMC_IS_ERR(r)) return r;
    r = refresh(s);
    if (LMC_IS_ERR(r)) { unlock_store(s); return r; }
    cleanup(s);
    return 0;
}

static size_t begin_read(lmc_store* s)
{
    size_t r;
    s->err[0] = 0;
    r = lock_store(s, LOCK_SH);
    if (LMC_IS_ERR(r)) return r;
    r = refresh(s);
    if (LMC_IS_ERR(r)) { unlock_store(s); return r; }
    return 0;
}

/*-************************************************************
 * Init, open, close, parameters
 **************************************************************/
size_t lmc_store_init(const char* dir)
{
    int dfd, fd;
    lmc_manifest m;
    char* text;
    size_t r = 0;
    if (!dir || !*dir) return LMC_ERR(PARAM);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return LMC_ERR(IO);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return LMC_ERR(IO);
    if (faccessat(dfd, MANIFEST_NAME, F_OK, 0) == 0) { close(dfd); return LMC_ERR(EXISTS); }
    if ((mkdirat(dfd, FRAMES_DIR, 0777) != 0 && errno != EEXIST)
        || (mkdirat(dfd, CACHE_DIR, 0777) != 0 && errno != EEXIST)) { close(dfd); return LMC_ERR(IO); }
    fd = openat(dfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) { close(dfd); return LMC_ERR(IO); }
    close(fd);
    lmc_manifest_init(&m);
    text = lmc_manifest_dump(&m);
    if (!text) { close(dfd); return LMC_ERR(MEMORY); }
    fd = openat(dfd, MANIFEST_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0) r = LMC_ERR(IO);
    if (fd >= 0 && close(fd) != 0) r = LMC_ERR(IO);
    free(text);
    if (!r) {
        /* link() fails if a concurrent init got there first: never replace a manifest */
        if (linkat(dfd, MANIFEST_TMP, dfd, MANIFEST_NAME, 0) != 0) r = errno == EEXIST ? LMC_ERR(EXISTS) : LMC_ERR(IO);
    }
    unlinkat(dfd, MANIFEST_TMP, 0);
    if (!r && fsync(dfd) != 0) r = LMC_ERR(IO);
    close(dfd);
    return r;
}

size_t lmc_store_open(lmc_store** sp, const char* dir)
{
    lmc_store* s;
    size_t r;
    if (!sp) return LMC_ERR(PARAM);
    *sp = NULL;
    if (!dir || !*dir) return LMC_ERR(PARAM);
    s = (lmc_store*)calloc(1, sizeof *s);
    if (!s) return LMC_ERR(MEMORY);
    lmc_manifest_init(&s->m);
    s->threads = 1;
    s->cache = 1;
    s->fsync_on = 1;
    s->lockfd = -1;
    s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) { r = errno == ENOENT || errno == ENOTDIR ? LMC_ERR(STORE) : LMC_ERR(IO); free(s); return r; }
    s->lockfd = openat(s->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (s->lockfd < 0) s->lockfd = openat(s->dirfd, LOCK_NAME, O_RDONLY | O_CLOEXEC);
    r = load_manifest(s);
    if (!LMC_IS_ERR(r) && s->lockfd >= 0) {
        /* clean up after a crash, unless another process is changing the store right now */
        if (lock_store(s, LOCK_EX | LOCK_NB) == 0) {
            r = refresh(s);
            if (!LMC_IS_ERR(r)) cleanup(s);
            unlock_store(s);
        }
    }
    if (LMC_IS_ERR(r)) { lmc_store_close(s); return r; }
    s->err[0] = 0;
    *sp = s;
    return 0;
}

void lmc_store_close(lmc_store* s)
{
    if (!s) return;
    unlock_store(s);
    if (s->lockfd >= 0) close(s->lockfd);
    if (s->dirfd >= 0) close(s->dirfd);
    lmc_manifest_free(&s->m);
    lmc_cctx_free(s->cctx);
    lmc_dctx_free(s->dctx);
    free(s->iobuf);
    free(s);
}

size_t lmc_store_set_param(lmc_store* s, lmc_store_param p, long long value)
{
    if (!s) return LMC_ERR(PARAM);
    switch (p) {
    case LMC_STORE_P_THREADS:
        if (value < 1 || value > LMC_THREADS_MAX) return LMC_ERR(PARAM);
        s->threads = (int)value;
        return 0;
    case LMC_STORE_P_CACHE:
        if (value != 0 && value != 1) return LMC_ERR(PARAM);
        s->cache = (int)value;
        return 0;
    case LMC_STORE_P_FSYNC:
        if (value != 0 && value != 1) return LMC_ERR(PARAM);
        s->fsync_on = (int)value;
        return 0;
    default:
        return LMC_ERR(PARAM);
    }
}

/*-************************************************************
 * Listing
 **************************************************************/
size_t lmc_store_count(const lmc_store* s) { return s ? s->m.count : 0; }

int64_t lmc_store_last_step(const lmc_store* s)
{
    if (!s || s->m.count == 0) return -1;
    return s->m.e[s->m.count - 1].step;
}

size_t lmc_store_get(const lmc_store* s, size_t i, lmc_store_entry* out)
{
    const lmc_mentry* e;
    if (!s || !out || i >= s->m.count) return LMC_ERR(PARAM);
    e = &s->m.e[i];
    memset(out, 0, sizeof *out);
    out->step = e->step;
    out->name = e->name;
    out->frame = e->frame;
    out->parent_step = e->parent;
    out->keyframe = e->parent < 0;
    out->chain_depth = e->depth;
    out->content_size = e->content_size;
    out->content_hash = e->content_hash;
    out->frame_size = e->frame_size;
    out->ratio = e->frame_size ? (double)e->content_size / (double)e->frame_size : 0.0;
    return 0;
}

/*-************************************************************
 * Decoding chains
 **************************************************************/
/* One coding context at a time: the store decodes (a chain restored) and
 * encodes (a snapshot added or re-encoded) in turn, never both at once, and
 * each context keeps a workspace per thread. Held together, `store rm` of
 * a chain of 84 MB torch zips at -T4 peaked at 72.0 MiB, over the 72 MiB
 * bound; with the decoder freed first, 56 MiB. Made again, a context costs
 * its workspaces' first touches, once per switch. */
static size_t ensure_dctx(lmc_store* s)
{
    if (s->cctx) { lmc_cctx_free(s->cctx); s->cctx = NULL; }
    if (!s->dctx) {
        s->dctx = lmc_dctx_create();
        if (!s->dctx) return seterr(s, LMC_ERR(MEMORY), "out of memory");
    }
    LMC_FORWARD(lmc_dctx_set_param(s->dctx, LMC_D_THREADS, s->threads));
    return 0;
}

static size_t ensure_cctx(lmc_store* s)
{
    if (s->dctx) { lmc_dctx_free(s->dctx); s->dctx = NULL; }
    if (!s->cctx) {
        s->cctx = lmc_cctx_create();
        if (!s->cctx) return seterr(s, LMC_ERR(MEMORY), "out of memory");
    }
    {
        size_t const want = LMC_MAX(IO_BUF_MIN, (size_t)(s->threads + 2) * lmc_compress_bound((size_t)1 << 20));
        if (s->iobuf_size < want) {
            free(s->iobuf);
            s->iobuf_size = 0;
            s->iobuf = (unsigned char*)malloc(want);
            if (!s->iobuf) return seterr(s, LMC_ERR(MEMORY), "out of memory");
            s->iobuf_size = want;
        }
    }
    LMC_FORWARD(lmc_cctx_set_param(s->cctx, LMC_P_THREADS, s->threads));
    return 0;
}

/* Decodes snapshot e of manifest m into dst (e->content_size bytes), with `ref`
 * the content of its parent (NULL for a keyframe). Checks the frame against the
 * manifest: size, reference size and hash, content size and hash. The frame
 * is decoded a window at a time (hashed as it comes), and the pages of the
 * frame, of dst and of ref dropped behind. */
static size_t decode_entry(lmc_store* s, const lmc_manifest* m, const lmc_mentry* e,
                           const cbuf* ref, const cbuf* dst)
{
    fview v;
    lmc_frame_header h;
    const lmc_mentry* p = e->parent >= 0 ? &m->e[e->prev] : NULL;
    size_t r;
    uint64_t fhash, chash = 0;

    if (fview_at(&v, s->dirfd, e->frame) != 0)
        return seterr(s, errno == ENOENT ? LMC_ERR(STORE) : LMC_ERR(IO), "step %lld '%s': cannot read %s: %s",
                      (long long)e->step, e->name, e->frame, strerror(errno));
    if ((uint64_t)v.n != e->frame_size) {
        r = seterr(s, LMC_ERR(TRUNCATED), "step %lld '%s': %s has %zu bytes, the manifest says %llu",
                   (long long)e->step, e->name, e->frame, v.n, (unsigned long long)e->frame_size);
        goto out;
    }
    r = lmc_get_frame_header(&h, v.p, v.n);
    if (LMC_IS_ERR(r)) goto lib;
    if (v.n < LMC_FRAME_HEADER_SIZE + LMC_FOOTER_SIZE) { r = LMC_ERR(TRUNCATED); goto lib; }
    /* before format 5 the footer holds H64 of the content, the manifest's
     * hash; from 5 on a hash of the chunks' hashes, so the content is
     * checked after decoding */
    fhash = lmc_rd64(v.p + v.n - LMC_FOOTER_SIZE + 16);
    if (!h.content_size_known || h.content_size != e->content_size || (h.version < 5 && fhash != e->content_hash)) {
        r = seterr(s, LMC_ERR(STORE), "step %lld '%s': %s does not hold the content the manifest records (size or hash)",
                   (long long)e->step, e->name, e->frame);
        goto out;
    }
    if (h.has_ref != (p != NULL) || (p && (h.ref_size != p->content_size || h.ref_hash != p->content_hash))) {
        r = seterr(s, LMC_ERR(STORE), "step %lld '%s': %s %s",
                   (long long)e->step, e->name, e->frame, p ? "is not a delta against its parent in the manifest" : "should be a keyframe but has a reference");
        goto out;
    }
    r = ensure_dctx(s);
    if (LMC_IS_ERR(r)) goto lib;
    lmc_dctx_reset(s->dctx);
    r = p ? lmc_dctx_set_ref_hashed(s->dctx, ref && ref->p ? ref->p : k_empty, (size_t)p->content_size, p->content_hash)
          : lmc_dctx_set_ref(s->dctx, NULL, 0);
    if (LMC_IS_ERR(r)) goto lib;
    {
        cbuf const fv = cbuf_borrow(v.p, v.n, v.mapped);
        size_t const n = (size_t)e->content_size;
        /* a chunk and a half a thread (1 MiB chunks), 8 to 16 MiB: a window
         * holds its output's pages, its reference's and its frame's, and
         * two chunks a thread took -T16 to 122 MiB, over the command's
         * 64 + 16 x 2 MiB bound */
        size_t const win = LMC_MIN(LMC_MAX(WINDOW, (size_t)(s->threads + s->threads / 2) << 20), 2 * WINDOW);
        size_t done = 0, ref_mark = 0;
        unsigned stuck = 0;
        lmc_inbuf in;
        XXH3_state_t hs;
        XXH3_64bits_reset(&hs);
        in.src = v.p; in.size = v.n; in.pos = 0;
        for (;;) {
            lmc_outbuf out;
            size_t const in_before = in.pos;
            out.dst = dst->p + done; out.size = LMC_MIN(win, n - done); out.pos = 0;
            cbuf_populate(dst, done, done + out.size, 1);
            if (ref) cbuf_populate(ref, done, LMC_MIN(done + out.size, ref->n), 0);   /* same layout: same place */
            r = lmc_decompress_stream(s->dctx, &out, &in);
            if (LMC_IS_ERR(r)) break;
            lmc_hstate_update(&hs, dst->p + done, out.pos);
            cbuf_drop(dst, done, done + out.pos);
            cbuf_drop(&fv, in_before, in.pos);
            done += out.pos;
            if (ref && done - ref_mark >= win) { cbuf_drop(ref, 0, ref->n); ref_mark = done; }
            if (r == 0) break;
            if (out.pos || in.pos != in_before) stuck = 0;
            else if (++stuck > 1000000u) { r = LMC_ERR(TRUNCATED); break; }
        }
        lmc_dctx_set_ref(s->dctx, NULL, 0);
        if (ref) cbuf_drop(ref, 0, ref->n);
        if (LMC_IS_ERR(r)) goto lib;
        if (done != n) { r = LMC_ERR(SIZE_MISMATCH); goto lib; }
        chash = XXH3_64bits_digest(&hs);
    }
    if (h.version >= 5 && chash != e->content_hash) {
        r = seterr(s, LMC_ERR(STORE), "step %lld '%s': %s does not hold the content the manifest records (size or hash)",
                   (long long)e->step, e->name, e->frame);
        goto out;
    }
    r = 0;
    goto out;
lib:
    seterr(s, r, "step %lld '%s' (%s): %s", (long long)e->step, e->name, e->frame, lmc_error_name(r));
out:
    fview_close(&v);
    return r;
}

/* Restores snapshot `target` of m by decoding from its keyframe. The content
 * goes to final_dst if given (e->content_size bytes), else to *out (room from
 * cbuf_room; the caller frees it). If `capture` >= 0 is on the way, its
 * content is kept in *captured (the caller frees it). *nframes receives the
 * frames decoded. */
static size_t restore_chain(lmc_store* s, const lmc_manifest* m, long target, const cbuf* final_dst,
                            cbuf* out, long capture, cbuf* captured, unsigned* nframes)
{
    long* chain;
    size_t n = 0, r = 0, maxn = (size_t)m->e[target].depth + 1;
    cbuf cur = cbuf_borrow(NULL, 0, 0);
    long at = target;
    if (out) *out = cur;
    if (captured) *captured = cur;
    chain = (long*)malloc(maxn * sizeof *chain);
    if (!chain) return seterr(s, LMC_ERR(MEMORY), "out of memory");
    for (;;) {
        chain[n++] = at;
        if (m->e[at].parent < 0) break;
        if (n >= maxn || m->e[at].prev < 0) { free(chain); return seterr(s, LMC_ERR(STORE), "broken chain"); }
        at = m->e[at].prev;
    }
    for (size_t k = n; k-- > 0;) {
        const lmc_mentry* e = &m->e[chain[k]];
        cbuf buf;
        if (k == 0 && final_dst) buf = cbuf_borrow(final_dst->p, final_dst->n, final_dst->drop);
        else if (LMC_IS_ERR(r = cbuf_room(s, &buf, e->content_size))) break;
        r = decode_entry(s, m, e, e->parent >= 0 ? &cur : NULL, &buf);
        if (k + 1 < n && chain[k + 1] == capture && captured) *captured = cur;
        else cbuf_free(&cur);
        cur = buf;
        if (LMC_IS_ERR(r)) break;
        if (nframes) *nframes = (unsigned)(n - k);
    }
    free(chain);
    if (LMC_IS_ERR(r)) {
        cbuf_free(&cur);   /* final_dst is borrowed: nothing freed */
        if (captured) cbuf_free(captured);
        return r;
    }
    if (out && !final_dst) *out = cur;
    else cbuf_free(&cur);
    return 0;
}

/* Restores entry i into dst (its content size). The head of a chain (the
 * latest snapshot of its name, the one a resumed run wants) is usually in the
 * cache: then it is copied from there, a window at a time, and hashed as it
 * goes; it counts only if the size and hash are the manifest's (else, or
 * without a cache, the chain is decoded over what was copied). *frames: the
 * frames decoded, 0 for the copy. Restoring the head of a chain of 200 MB
 * bf16 checkpoints at depth 2 took 0.92 s decoding and takes 0.16 s from the
 * cache (medians of 5 alternated runs, on tmpfs). */
static size_t restore_entry(lmc_store* s, long i, const cbuf* dst, unsigned* frames)
{
    const lmc_mentry* e = &s->m.e[i];
    if (e->next < 0) {
        char cn[32];
        fview cv;
        cache_name(e->name, cn);
        if (fview_at(&cv, s->dirfd, cn) == 0) {
            cbuf const c = cbuf_borrow(cv.p, cv.n, cv.mapped);
            int same = cv.n == e->content_size;
            if (same) {
                XXH3_state_t hs;
                XXH3_64bits_reset(&hs);
                for (size_t at = 0; at < c.n;) {
                    size_t const k = LMC_MIN(WINDOW, c.n - at);
                    cbuf_populate(dst, at, at + k, 1);
                    memcpy(dst->p + at, c.p + at, k);
                    lmc_hstate_update(&hs, dst->p + at, k);
                    cbuf_drop(&c, at, at + k);
                    cbuf_drop(dst, at, at + k);
                    at += k;
                }
                same = XXH3_64bits_digest(&hs) == e->content_hash;
            }
            fview_close(&cv);
            if (same) { if (frames) *frames = 0; return 0; }
        }
    }
    return restore_chain(s, &s->m, i, dst, NULL, -1, NULL, frames);
}

static long find_entry(lmc_store* s, int64_t step, const char* name)
{
    if (name) {
        long i = lmc_manifest_find(&s->m, step, name);
        if (i < 0) seterr(s, LMC_ERR(NOT_FOUND), "no snapshot '%s' at step %lld", name, (long long)step);
        return i;
    } else {
        long found = -1;
        size_t n = 0;
        for (size_t i = 0; i < s->m.count; i++)
            if (s->m.e[i].step == step) { found = (long)i; n++; }
        if (n == 0) seterr(s, LMC_ERR(NOT_FOUND), "no step %lld in the store", (long long)step);
        else if (n > 1) { seterr(s, LMC_ERR(PARAM), "step %lld holds %zu files: give a name", (long long)step, n); found = -2; }
        return found;
    }
}

size_t lmc_store_restore_buffer(lmc_store* s, int64_t step, const char* name,
                                void* dst, size_t cap, unsigned* frames)
{
    long i;
    size_t r;
    if (frames) *frames = 0;
    if (!s) return LMC_ERR(PARAM);
    r = begin_read(s);
    if (LMC_IS_ERR(r)) return r;
    i = find_entry(s, step, name);
    if (i < 0) { unlock_store(s); return i == -2 ? LMC_ERR(PARAM) : LMC_ERR(NOT_FOUND); }
    if (!dst) { unlock_store(s); return (size_t)s->m.e[i].content_size; }
    if (cap < s->m.e[i].content_size) {
        unlock_store(s);
        return seterr(s, LMC_ERR(DST_TOO_SMALL), "buffer of %zu bytes for %llu", cap, (unsigned long long)s->m.e[i].content_size);
    }
    {
        cbuf const d = cbuf_borrow(dst, (size_t)s->m.e[i].content_size, 0);   /* the caller's memory: kept */
        r = restore_entry(s, i, &d, frames);
    }
    unlock_store(s);
    return LMC_IS_ERR(r) ? r : (size_t)s->m.e[i].content_size;
}

/* Creates a new temporary file next to `path`; its name goes to tmp. */
static int create_tmp_next_to(const char* path, char* tmp, size_t cap)
{
    const char* slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char* base = slash ? slash + 1 : path;
    static unsigned counter;
    for (int tries = 0; tries < 100; tries++) {
        struct timespec ts;
        int fd;
        clock_gettime(CLOCK_REALTIME, &ts);
        if ((size_t)snprintf(tmp, cap, "%.*s.%.200s.tmp-%ld-%lx%x", (int)dirlen, path, base, (long)getpid(),
                             (unsigned long)ts.tv_nsec, __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED)) >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

/* Restores entry i into the open file fd from offset 0 (sized to the content,
 * its blocks reserved first where the file system can: a full disk fails
 * here, not as a SIGBUS in the mapping), through a shared mapping whose pages
 * are dropped behind the decoder. `what` names the file in messages. */
static size_t restore_to_fd(lmc_store* s, long i, int fd, const char* what, unsigned* frames)
{
    uint64_t const n = s->m.e[i].content_size;
    size_t r;
    if (n > (uint64_t)SIZE_MAX || n > (uint64_t)INT64_MAX) return seterr(s, LMC_ERR(LIMIT), "file too large for this system");
    if (ftruncate(fd, (off_t)n) != 0) return io_err(s, "cannot size", what);
    if (n > 0) {
        void* map;
        cbuf d;
        if (fallocate(fd, 0, 0, (off_t)n) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
            return io_err(s, "cannot extend", what);
        map = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) return io_err(s, "cannot map", what);
        d = cbuf_borrow(map, (size_t)n, 1);
        r = restore_entry(s, i, &d, frames);
        if (munmap(map, (size_t)n) != 0 && !LMC_IS_ERR(r)) r = io_err(s, "cannot write", what);
    } else {
        unsigned char one;
        cbuf const d = cbuf_borrow(&one, 0, 0);
        r = restore_chain(s, &s->m, i, &d, NULL, -1, NULL, frames);
    }
    return r;
}

size_t lmc_store_restore_file(lmc_store* s, int64_t step, const char* name, const char* out_path, unsigned* frames)
{
    long i;
    size_t r;
    char tmp[4200];
    int fd;
    if (frames) *frames = 0;
    if (!s || !out_path || !*out_path) return LMC_ERR(PARAM);
    r = begin_read(s);
    if (LMC_IS_ERR(r)) return r;
    i = find_entry(s, step, name);
    if (i < 0) { unlock_store(s); return i == -2 ? LMC_ERR(PARAM) : LMC_ERR(NOT_FOUND); }
    fd = create_tmp_next_to(out_path, tmp, sizeof tmp);
    if (fd < 0) { r = io_err(s, "cannot create a temporary file for", out_path); unlock_store(s); return r; }
    r = restore_to_fd(s, i, fd, tmp, frames);
    if (LMC_IS_ERR(r)) goto fail;
    if (s->fsync_on && fsync(fd) != 0) { r = io_err(s, "cannot write", tmp); goto fail; }
    if (close(fd) != 0) { fd = -1; r = io_err(s, "cannot write", tmp); goto fail; }
    fd = -1;
    if (rename(tmp, out_path) != 0) { r = io_err(s, "cannot rename into place", out_path); goto fail; }
    unlock_store(s);
    return (size_t)s->m.e[i].content_size;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    unlock_store(s);
    return r;
}

size_t lmc_store_restore_fd(lmc_store* s, int64_t step, const char* name, int fd, unsigned* frames)
{
    long i;
    size_t r;
    struct stat st;
    if (frames) *frames = 0;
    if (!s || fd < 0) return LMC_ERR(PARAM);
    s->err[0] = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return seterr(s, LMC_ERR(PARAM), "restore_fd: descriptor %d is not an open regular file", fd);
    r = begin_read(s);
    if (LMC_IS_ERR(r)) return r;
    i = find_entry(s, step, name);
    if (i < 0) { unlock_store(s); return i == -2 ? LMC_ERR(PARAM) : LMC_ERR(NOT_FOUND); }
    r = restore_to_fd(s, i, fd, "the output file", frames);
    unlock_store(s);
    return LMC_IS_ERR(r) ? r : (size_t)s->m.e[i].content_size;
}

/*-************************************************************
 * Encoding
 **************************************************************/
/* Compresses src (against ref when ref_entry != NULL) into a new frame file.
 * Fills e->frame, e->frame_size, e->content_size, e->content_hash (hashed as
 * the compressor goes: the pages of src and ref are dropped behind it) and
 * bumps m->next_id. The frame is durable (fsync) before this returns. */
static size_t encode_frame(lmc_store* s, lmc_manifest* m, const cbuf* src,
                           const cbuf* ref, const lmc_mentry* ref_entry, lmc_mentry* e)
{
    char tmp[LMC_FRAME_NAME_LEN + 8];
    lmc_inbuf in;
    lmc_outbuf out;
    lmc_frame_stats st;
    uint64_t total = 0;
    size_t const size = src->n;
    size_t hashed = 0, ref_mark = 0, r;
    XXH3_state_t hs;
    int fd;

    XXH3_64bits_reset(&hs);
    r = ensure_cctx(s);
    if (LMC_IS_ERR(r)) return seterr(s, r, "cannot set up compression: %s", lmc_error_name(r));
    lmc_cctx_reset(s->cctx);
    r = lmc_cctx_set_param(s->cctx, LMC_P_CONTENT_SIZE, (long long)size);
    if (!LMC_IS_ERR(r))
        r = ref_entry ? lmc_cctx_set_ref_hashed(s->cctx, ref && ref->p ? ref->p : k_empty, (size_t)ref_entry->content_size, ref_entry->content_hash)
                      : lmc_cctx_set_ref(s->cctx, NULL, 0);
    if (LMC_IS_ERR(r)) return seterr(s, r, "cannot set up compression: %s", lmc_error_name(r));

    frame_name(m->next_id, e->frame);
    snprintf(tmp, sizeof tmp, "%s.tmp", e->frame);
    fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) { r = io_err(s, "cannot create", tmp); goto done; }
    in.src = size ? src->p : k_empty;
    in.size = size;
    in.pos = 0;
    /* The header alone first (no room for output: the call returns once the
     * container is parsed), then its pages dropped. A torch zip's local
     * headers lie at each tensor's start, and reading one mapped up to 2 MiB
     * there (kernel 6.18, most likely a large folio of the page cache mapped
     * whole), in the content and in the reference alike: those pages stayed
     * until the chunks came to them, and `store rm` of an 84 MB zip of 8
     * tensors at -T2 peaked at 76 MiB, over the 68 MiB bound. */
    out.dst = s->iobuf;
    out.size = 0;
    out.pos = 0;
    r = lmc_compress_stream(s->cctx, &out, &in, 1);
    if (LMC_IS_ERR(r)) { seterr(s, r, "compression failed: %s", lmc_error_name(r)); goto written; }
    cbuf_drop(src, 0, size);
    if (ref) cbuf_drop(ref, 0, ref->n);
    for (;;) {
        out.dst = s->iobuf;
        out.size = s->iobuf_size;
        out.pos = 0;
        r = lmc_compress_stream(s->cctx, &out, &in, 1);
        if (LMC_IS_ERR(r)) { seterr(s, r, "compression failed: %s", lmc_error_name(r)); break; }
        if (out.pos && write_all(fd, s->iobuf, out.pos) != 0) { r = io_err(s, "cannot write", tmp); break; }
        total += out.pos;
        lmc_hstate_update(&hs, src->p + hashed, in.pos - hashed);   /* just coded: still in cache */
        cbuf_drop(src, hashed, in.pos);
        hashed = in.pos;
        if (ref && hashed - ref_mark >= WINDOW) { cbuf_drop(ref, 0, ref->n); ref_mark = hashed; }
        if (r == 0) break;
    }
written:
    if (!LMC_IS_ERR(r) && s->fsync_on && fsync(fd) != 0) r = io_err(s, "cannot write", tmp);
    if (close(fd) != 0 && !LMC_IS_ERR(r)) r = io_err(s, "cannot write", tmp);
    if (!LMC_IS_ERR(r)) {
        r = lmc_cctx_last_stats(s->cctx, &st);
        if (LMC_IS_ERR(r)) seterr(s, r, "compression failed: %s", lmc_error_name(r));
        else if (st.frame_size != total) r = seterr(s, LMC_ERR(GENERIC), "internal: frame size mismatch");
    }
    if (!LMC_IS_ERR(r) && renameat(s->dirfd, tmp, s->dirfd, e->frame) != 0) r = io_err(s, "cannot rename into place", e->frame);
    if (!LMC_IS_ERR(r) && sync_dir(s, FRAMES_DIR) != 0) r = io_err(s, "cannot sync", FRAMES_DIR);
    if (LMC_IS_ERR(r)) { unlinkat(s->dirfd, tmp, 0); unlinkat(s->dirfd, e->frame, 0); goto done; }
    e->frame_size = total;
    e->content_size = size;
    e->content_hash = XXH3_64bits_digest(&hs);   /* the file's H64, not the frame's hash (format 5) */
    m->next_id++;
    r = 0;
done:
    lmc_cctx_set_ref(s->cctx, NULL, 0);
    if (ref) cbuf_drop(ref, 0, ref->n);
    return r;
}

/* Writes the new head content of chain `name` to the cache (best effort, not synced:
 * it is checked against the manifest's hash before each use). */
static void cache_put(lmc_store* s, const char* name, int srcfd, const void* src, size_t size)
{
    char cn[32], tmp[40];
    int fd, ok = 1;
    cache_name(name, cn);
    if (!s->cache) { unlinkat(s->dirfd, cn, 0); return; }
    snprintf(tmp, sizeof tmp, "%s.tmp", cn);
    fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) { unlinkat(s->dirfd, cn, 0); return; }
    if (srcfd >= 0 && size) {
        loff_t off = 0;
        while ((size_t)off < size) {
            ssize_t c = copy_file_range(srcfd, &off, fd, NULL, size - (size_t)off, 0);
            if (c <= 0) { if (c < 0 && errno == EINTR) continue; break; }
        }
        if ((size_t)off < size) {  /* no copy_file_range across these file systems: write */
            if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0 || write_all(fd, src, size) != 0) ok = 0;
        }
    } else if (size && write_all(fd, src, size) != 0) {
        ok = 0;
    }
    if (close(fd) != 0) ok = 0;
    if (!ok || renameat(s->dirfd, tmp, s->dirfd, cn) != 0) {
        unlinkat(s->dirfd, tmp, 0);
        unlinkat(s->dirfd, cn, 0);
    }
}

/* Content of snapshot i for use as a reference: the cache when it holds exactly
 * that content, else decoded from the chain. The caller frees *v. */
static size_t get_content(lmc_store* s, long i, cbuf* v)
{
    const lmc_mentry* e = &s->m.e[i];
    char cn[32];
    fview cv;
    *v = cbuf_borrow(NULL, 0, 0);
    if (e->next < 0) {
        cache_name(e->name, cn);
        if (fview_at(&cv, s->dirfd, cn) == 0) {
            cbuf const c = cbuf_borrow(cv.p, cv.n, cv.mapped);
            if (cv.n == e->content_size && cbuf_hash(&c) == e->content_hash) {
                *v = c;
                v->kind = cv.mapped ? CB_MAP : CB_BORROWED;   /* now ours to unmap */
                return 0;
            }
            fview_close(&cv);
        }
    }
    return restore_chain(s, &s->m, i, NULL, v, -1, NULL, NULL);
}

static size_t add_common(lmc_store* s, int srcfd, const cbuf* src, int64_t step,
                         unsigned keyframe_every, const char* name)
{
    lmc_manifest nm;
    lmc_mentry e;
    long last;
    size_t r;
    size_t const size = src->n;
    cbuf pv = cbuf_borrow(NULL, 0, 0);
    int delta;

    if (!name || !lmc_store_name_ok(name, strlen(name)))
        return seterr(s, LMC_ERR(PARAM), "invalid file name '%s' (a relative path without '.', '..' or empty parts)", name ? name : "");
    if (keyframe_every > LMC_STORE_K_MAX) return seterr(s, LMC_ERR(PARAM), "keyframe interval above %u", LMC_STORE_K_MAX);
    if (step > LMC_STORE_STEP_MAX) return seterr(s, LMC_ERR(PARAM), "step too large");
    if ((uint64_t)size > (uint64_t)INT64_MAX) return seterr(s, LMC_ERR(PARAM), "file too large");
    r = begin_change(s);
    if (LMC_IS_ERR(r)) return r;
    if (step < 0) step = s->m.count ? s->m.e[s->m.count - 1].step + 1 : 0;
    if (step > LMC_STORE_STEP_MAX) { unlock_store(s); return seterr(s, LMC_ERR(PARAM), "step too large"); }
    last = lmc_manifest_last_of(&s->m, name);
    if (last >= 0 && s->m.e[last].step >= step) {
        unlock_store(s);
        return seterr(s, LMC_ERR(EXISTS), "'%s' already has step %lld: a new snapshot needs a larger step",
                      name, (long long)s->m.e[last].step);
    }
    if (keyframe_every == 0) keyframe_every = s->m.keyframe_every;
    delta = last >= 0 && s->m.e[last].depth + 1 < keyframe_every;

    memset(&e, 0, sizeof e);
    e.step = step;
    e.name = (char*)name;
    e.parent = -1;
    if (delta) {
        r = get_content(s, last, &pv);
        if (LMC_IS_ERR(r)) goto out;
        e.parent = s->m.e[last].step;
        e.depth = s->m.e[last].depth + 1;
    }
    r = manifest_clone(&nm, &s->m);
    if (LMC_IS_ERR(r)) { seterr(s, r, "out of memory"); goto out; }
    r = encode_frame(s, &nm, src, delta ? &pv : NULL, delta ? &s->m.e[last] : NULL, &e);
    cbuf_free(&pv);
    if (!LMC_IS_ERR(r)) {
        cache_put(s, name, srcfd, src->p, size);
        r = manifest_append(&nm, &e);
        if (LMC_IS_ERR(r)) seterr(s, r, "out of memory");
    }
    if (!LMC_IS_ERR(r)) {
        char msg[256];
        r = lmc_manifest_link(&nm, 0, msg, sizeof msg);
        if (LMC_IS_ERR(r)) seterr(s, r, "internal: %s", msg);
    }
    if (!LMC_IS_ERR(r)) r = save_manifest(s, &nm);
    if (LMC_IS_ERR(r)) unlinkat(s->dirfd, e.frame, 0);  /* never named by a committed manifest */
    else r = (size_t)e.frame_size;
    lmc_manifest_free(&nm);
out:
    cbuf_free(&pv);
    unlock_store(s);
    return r;
}

size_t lmc_store_add_buffer(lmc_store* s, const void* src, size_t size, int64_t step,
                            unsigned keyframe_every, const char* name)
{
    cbuf c;
    if (!s || (!src && size)) return LMC_ERR(PARAM);
    c = cbuf_borrow(size ? src : k_empty, size, 0);   /* the caller's memory: kept */
    return add_common(s, -1, &c, step, keyframe_every, name);
}

size_t lmc_store_add_file(lmc_store* s, const char* path, int64_t step,
                          unsigned keyframe_every, const char* name)
{
    fview v;
    int fd;
    size_t r;
    if (!s || !path) return LMC_ERR(PARAM);
    s->err[0] = 0;
    if (!name) {
        const char* slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_err(s, "cannot open", path);
    if (fview_fd(&v, fd) != 0) { r = io_err(s, "cannot read", path); close(fd); return r; }
    {
        cbuf const c = cbuf_borrow(v.p, v.n, v.mapped);
        r = add_common(s, fd, &c, step, keyframe_every, name);
    }
    fview_close(&v);
    close(fd);
    return r;
}

/*-************************************************************
 * Removal
 **************************************************************/
/* Removes the snapshots flagged in `rm` (indices of s->m). Every kept delta
 * whose parent is removed is re-encoded against its nearest kept ancestor on
 * its delta path, or as a keyframe when that path reaches a removed keyframe.
 * One manifest replacement commits everything. Returns the count removed. */
static size_t remove_flagged(lmc_store* s, const unsigned char* rm)
{
    typedef char fname_t[LMC_FRAME_NAME_LEN + 1];
    lmc_manifest nm;
    size_t r, removed = 0;
    fname_t* old = NULL;  /* frame files to delete once the new manifest is committed */
    size_t nold = 0;
    char msg[256];

    r = manifest_clone(&nm, &s->m);
    if (LMC_IS_ERR(r)) return seterr(s, r, "out of memory");
    old = (fname_t*)calloc(s->m.count * 2 + 1, sizeof *old);
    if (!old) { lmc_manifest_free(&nm); return seterr(s, LMC_ERR(MEMORY), "out of memory"); }

    for (size_t i = 0; i < s->m.count; i++) {
        const lmc_mentry* d = &s->m.e[i];
        long a;
        cbuf dbuf = cbuf_borrow(NULL, 0, 0), abuf = cbuf_borrow(NULL, 0, 0);
        if (rm[i]) { memcpy(old[nold++], d->frame, sizeof *old); removed++; continue; }
        if (d->parent < 0 || !rm[d->prev]) continue;
        /* nearest kept ancestor on the delta path */
        a = d->prev;
        while (a >= 0 && rm[a]) a = s->m.e[a].parent >= 0 ? s->m.e[a].prev : -1;
        r = restore_chain(s, &s->m, (long)i, NULL, &dbuf, a, a >= 0 ? &abuf : NULL, NULL);
        if (!LMC_IS_ERR(r)) {
            lmc_mentry ne = nm.e[i];
            r = encode_frame(s, &nm, &dbuf, a >= 0 ? &abuf : NULL, a >= 0 ? &s->m.e[a] : NULL, &ne);
            if (!LMC_IS_ERR(r) && (ne.content_hash != d->content_hash || ne.content_size != d->content_size)) {
                unlinkat(s->dirfd, ne.frame, 0);
                r = seterr(s, LMC_ERR(CHECKSUM), "step %lld '%s': re-encoded content differs", (long long)d->step, d->name);
            }
            if (!LMC_IS_ERR(r)) {
                memcpy(old[nold++], d->frame, sizeof *old);  /* replaced */
                memcpy(nm.e[i].frame, ne.frame, sizeof ne.frame);
                nm.e[i].frame_size = ne.frame_size;
                nm.e[i].parent = a >= 0 ? s->m.e[a].step : -1;
            }
        }
        cbuf_free(&dbuf);
        cbuf_free(&abuf);
        if (LMC_IS_ERR(r)) goto out;  /* frames written so far are orphans: removed by the next clean-up */
    }
    /* drop the removed entries, then recompute links and depths */
    {
        size_t w = 0;
        for (size_t i = 0; i < nm.count; i++) {
            if (rm[i]) { free(nm.e[i].name); continue; }
            nm.e[w++] = nm.e[i];
        }
        nm.count = w;
    }
    r = lmc_manifest_link(&nm, 1, msg, sizeof msg);
    if (LMC_IS_ERR(r)) { seterr(s, r, "internal: %s", msg); goto out; }
    r = save_manifest(s, &nm);
    if (LMC_IS_ERR(r)) goto out;
    for (size_t k = 0; k < nold; k++) unlinkat(s->dirfd, old[k], 0);
    sync_dir(s, FRAMES_DIR);
    cleanup(s);  /* caches of chains whose head changed or vanished */
    r = removed;
out:
    free(old);
    lmc_manifest_free(&nm);
    return r;
}

size_t lmc_store_rm(lmc_store* s, int64_t step)
{
    unsigned char* rm;
    size_t r, n = 0;
    if (!s) return LMC_ERR(PARAM);
    r = begin_change(s);
    if (LMC_IS_ERR(r)) return r;
    rm = (unsigned char*)calloc(s->m.count + 1, 1);
    if (!rm) { unlock_store(s); return seterr(s, LMC_ERR(MEMORY), "out of memory"); }
    for (size_t i = 0; i < s->m.count; i++)
        if (s->m.e[i].step == step) { rm[i] = 1; n++; }
    if (n == 0) r = seterr(s, LMC_ERR(NOT_FOUND), "no step %lld in the store", (long long)step);
    else r = remove_flagged(s, rm);
    free(rm);
    unlock_store(s);
    return r;
}

size_t lmc_store_prune(lmc_store* s, size_t keep_last)
{
    unsigned char* rm;
    size_t r, distinct = 0;
    int64_t cutoff = -1;
    if (!s || keep_last == 0) return seterr(s, LMC_ERR(PARAM), "keep_last must be at least 1");
    r = begin_change(s);
    if (LMC_IS_ERR(r)) return r;
    /* entries are sorted by step: walk back over keep_last distinct steps */
    for (size_t i = s->m.count; i-- > 0;) {
        if (i + 1 == s->m.count || s->m.e[i].step != s->m.e[i + 1].step) {
            if (++distinct > keep_last) { cutoff = s->m.e[i].step; break; }
        }
    }
    if (cutoff < 0) { unlock_store(s); return 0; }
    rm = (unsigned char*)calloc(s->m.count + 1, 1);
    if (!rm) { unlock_store(s); return seterr(s, LMC_ERR(MEMORY), "out of memory"); }
    for (size_t i = 0; i < s->m.count; i++) rm[i] = s->m.e[i].step <= cutoff;
    r = remove_flagged(s, rm);
    free(rm);
    unlock_store(s);
    return r;
}

/*-************************************************************
 * Verify
 **************************************************************/
size_t lmc_store_verify(lmc_store* s)
{
    size_t r;
    if (!s) return LMC_ERR(PARAM);
    s->err[0] = 0;
    /* clean up first if nobody is changing the store */
    if (s->lockfd >= 0 && lock_store(s, LOCK_EX | LOCK_NB) == 0) {
        r = refresh(s);
        if (!LMC_IS_ERR(r)) cleanup(s);
        unlock_store(s);
        if (LMC_IS_ERR(r)) return r;
    }
    r = begin_read(s);
    if (LMC_IS_ERR(r)) return r;
    for (size_t i = 0; i < s->m.count && !LMC_IS_ERR(r); i++) {
        cbuf prev = cbuf_borrow(NULL, 0, 0);
        long at;
        if (s->m.e[i].prev >= 0) continue;  /* start of a chain (a name's first snapshot) */
        for (at = (long)i; at >= 0; at = s->m.e[at].next) {
            const lmc_mentry* e = &s->m.e[at];
            cbuf buf;
            r = cbuf_room(s, &buf, e->content_size);
            if (LMC_IS_ERR(r)) break;
            r = decode_entry(s, &s->m, e, e->parent >= 0 ? &prev : NULL, &buf);
            cbuf_free(&prev);
            prev = buf;
            if (LMC_IS_ERR(r)) break;
        }
        cbuf_free(&prev);
    }
    unlock_store(s);
    return r;
}
