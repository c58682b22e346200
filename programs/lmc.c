/*
 * lmc.c - command-line interface of liblmc (zstd conventions).
 *
 *   lmc [OPTIONS] FILE...          compress each FILE to FILE.lmc
 *   lmc -d [OPTIONS] FILE.lmc...   decompress (suffix stripped)
 *
 * Uses only the public API in include/lmc.h. Memory is bounded whatever the
 * file size: data goes through the streaming API in fixed-size buffers, and a
 * reference checkpoint is mmap()ed read-only. Output is written to a
 * temporary file next to the target and renamed only after success; it is
 * removed on any error and on SIGINT/SIGTERM/SIGHUP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "lmc.h"
#include "store_cmd.h"
#include "analyze.h"
#include "dir_cmd.h"
#include "prefetch.h"
#include "cpuplace.h"
#include "zipsig.h"

#ifndef PATH_MAX
#  define PATH_MAX 4096
#endif
#ifndef RENAME_NOREPLACE
#  define RENAME_NOREPLACE (1 << 0)
#endif

#define SUFFIX     ".lmc"
#define SUFFIX_LEN 4
#define IN_BUF_SIZE  ((size_t)2 << 20)
#define OUT_BUF_SIZE ((size_t)2 << 20)
#define STUCK_LIMIT  1000000u  /* calls without progress before giving up */

enum { MODE_COMPRESS, MODE_DECOMPRESS, MODE_TEST, MODE_LIST, MODE_BENCH };

static struct {
    int mode;
    int decompress_flag;
    int to_stdout;
    int rm;
    int force;
    int threads;       /* resolved (>= 1) */
    int verbose;
    int quiet;
    int progress;      /* -1 auto, 0 off, 1 on */
    int format;        /* lmc_format */
    int format_set;
    int dtype;         /* lmc_dtype */
    int dtype_set;
    int no_refctx;     /* --no-refctx: the paper's LMC coding of deltas */
    int iters;
    int bench_threads[8];  /* -b -T 1,2: thread counts benchmarked side by side */
    int nbench_threads;
    const char* out_name;
    const char* ref_name;
} g_opt;

static const char* g_prog = "lmc";

/* Reference checkpoint, mmap()ed once for all files. */
static const void* g_ref = NULL;
static size_t g_ref_size = 0;
static int g_ref_mapped = 0;
static uint64_t g_ref_hash = 0;
/* The reference's hash, while the prefetch thread computes it (see
 * load_ref); ref_hash_wait() takes the result. */
static struct {
    int running;          /* started and its result not yet taken */
    int pending;          /* not started: left to the library where a frame allows (give_dctx_ref) */
    int fd;               /* the reference, for a hash computed here */
    int err;              /* 0, an errno, or -1: the file shrank */
    uint64_t hash;
} g_rh = { .fd = -1 };
/* Decompression with a coding thread on every core: the library hashes
 * the reference between its chunk jobs (LMC_D_REF_CHECK_LAST), for the
 * frames that allow it (give_dctx_ref); bit 0: g_dctx has g_ref. */
static int g_ref_lib_given = 0;
static int g_ref_lib_frame = 0;   /* the current frame goes that way */
/* Decompression of the current file trusts the frame's reference hash
 * (g_defer_expect) until the thread's hash is compared with it. */
static int g_defer_active = 0;
static uint64_t g_defer_expect = 0;
#define REF_WINDOW ((size_t)4 << 20)
#define REF_AHEAD ((size_t)2 << 20)
static size_t g_ref_keep_lo = 0, g_ref_keep_hi = 0;   /* the latest want_ref range */
static const unsigned char g_empty[1];

/* Directory inputs (programs/dir_cmd.c): -r REFDIR, and the reference path
 * looked for but missing for the current file (named in REF_REQUIRED errors). */
static const char* g_refdir = NULL;
static const char* g_missing_ref = NULL;

/* Contexts and buffers, created on first use and reused for every file. */
static lmc_cctx* g_cctx = NULL;
static lmc_dctx* g_dctx = NULL;
static unsigned char* g_inbuf = NULL;
static unsigned char* g_outbuf = NULL;
/* The writer thread (see job_write) and its two output buffers. */
static struct {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, busy, err;
    int fd;
    const unsigned char* p;
    size_t n;
    unsigned char* buf[2];
    int cur;
} g_wr = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
/* The largest input window read from a regular file (read_input_instead). */
#define READ_BUF_MAX ((size_t)8 << 20)
/* The reader thread (see run_compress_ahead): it reads a regular file's
 * next window into one buffer while the library codes the other. */
static struct {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, busy;      /* busy: a read requested and not yet taken */
    int done;               /* the requested read is over: n, err hold its outcome */
    int fd;
    unsigned char* p;
    size_t size;
    ssize_t n;
    int err;
    unsigned char* buf[2];  /* buf[0] is g_inbuf */
} g_rd = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* Temporary output file: removed by the signal handler. */
static char g_tmp_path[PATH_MAX + 64];
static volatile sig_atomic_t g_tmp_active = 0;

static mode_t g_umask = 022;
static int g_listed = 0;  /* files printed by -l so far */

/*-************************************************************
 * Messages
 **************************************************************/
static void errmsg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void errmsg(const char* fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void usage(FILE* f)
{
    fprintf(f,
"Usage: lmc [OPTIONS] [FILE...]          compress each FILE to FILE.lmc\n"
"       lmc -d [OPTIONS] [FILE.lmc...]   decompress (the .lmc suffix is stripped)\n"
"       lmc -t|-l [OPTIONS] FILE.lmc...  test / list compressed files\n"
"       lmc [-r REFDIR] DIR              compress every file REL under DIR to\n"
"                                        DIR.lmc/REL.lmc, against REFDIR/REL\n"
"       lmc -d [-r REFDIR] DIR.lmc       restore DIR (REFDIR uncompressed); -t, -l too\n"
"       lmc -b [OPTIONS] FILE...         benchmark in memory\n"
"       lmc store COMMAND DIR ...        snapshot store (lmc store --help)\n"
"       lmc analyze [--ref PREV] CKPT|DIR  bit/entropy/ratio analysis (lmc analyze --help)\n"
"With no FILE, or when FILE is -, read standard input and write standard output.\n"
"\n"
"Operations:\n"
"  -d, --decompress      decompress\n"
"  -t, --test            decode and verify, write nothing\n"
"  -l, --list            show frame information: sizes, ratio, dtypes, coders\n"
"  -b, --bench           benchmark compression and decompression of FILE\n"
"  -i N, --iterations=N  benchmark iterations (default 5)\n"
"\n"
"Options:\n"
"  -r, --ref FILE        delta against (with -d: restore from) the reference\n"
"                        checkpoint FILE; --ref=FILE also accepted. With a\n"
"                        directory input, a directory REFDIR: each file is\n"
"                        coded against REFDIR/REL, the file of the same relative\n"
"                        path (coded whole where that file is missing)\n"
"  -o FILE, --output=FILE  write to FILE (only with one input; - is stdout); with\n"
"                        a directory input, the output directory\n"
"  -c, --stdout          write to standard output\n"
"  -k, --keep            keep input files (default)\n"
"      --rm              remove input files after success (compression output\n"
"                        is verified by decoding it first); ignored with -c\n"
"  -f, --force           overwrite existing outputs, allow terminal I/O\n"
"  -T N, --threads=N     worker threads, 1 to 256 (default and 0: online cores,\n"
"                        at most 256);\n"
"                        with -b, a list such as 1,2 runs the counts side by\n"
"                        side (alternated) and prints their speed ratios\n"
"      --format=F        input format: auto (default), safetensors, torch, raw,\n"
"                        generic (unknown bytes: runs of 16- and 32-bit floats\n"
"                        in them are detected and coded as floats)\n"
"      --dtype=D         value type for --format=raw: bf16, f16, f32, f64, u8,\n"
"                        i8, i16, u16, i32, u32, i64, u64, bool, f8_e4m3,\n"
"                        f8_e5m2 (implies --format=raw unless --format is given;\n"
"                        raw without it detects floats as generic does, u8\n"
"                        codes plain bytes)\n"
"      --no-refctx       code float deltas as the paper's LMC does (XOR, byte\n"
"                        groups, per-block entropy codes) instead of modelling\n"
"                        value differences on the reference's exponent (REFCTX)\n"
"  -v, --verbose         print a summary line per file (-l: more detail)\n"
"  -q, --quiet           print only errors\n"
"      --progress        show a progress line on stderr\n"
"      --no-progress     never show progress\n"
"  -h, --help            show this help and exit\n"
"  -V, --version         show the version and exit\n"
"  --                    end of options\n"
"\n"
"Exit status: 0 on success, 1 on any error.\n");
}

static void usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char* fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", g_prog);
    exit(1);
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*-************************************************************
 * Signals and temporary files
 **************************************************************/
static void on_fatal_signal(int sig)
{
    (void)sig;
    if (g_tmp_active) unlink(g_tmp_path);
    _exit(1);
}

/* Inputs and the reference are mmap()ed: a file cut short while in use
 * faults on the pages past its new end. */
static void on_bus_error(int sig)
{
    static const char msg[] = "lmc: an input or reference file shrank while it was being read (SIGBUS); stopped, unfinished output file removed\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    on_fatal_signal(sig);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    {
        /* like gzip: SIGINT/SIGHUP ignored at start (nohup, background jobs) stay ignored */
        static const int sigs[] = { SIGINT, SIGHUP, SIGTERM };
        unsigned k;
        for (k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
            struct sigaction cur;
            if (sigs[k] != SIGTERM && sigaction(sigs[k], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
                continue;
            sigaction(sigs[k], &sa, NULL);
        }
    }
    sa.sa_handler = on_bus_error;
    sigaction(SIGBUS, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
}

static void block_signals(sigset_t* old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, old);
}

static void restore_signals(const sigset_t* old) { sigprocmask(SIG_SETMASK, old, NULL); }

/* Creates ".BASENAME.tmp-XXXXXX" in the folder of `out`. Returns an fd (O_RDWR) or -1. */
static int tmp_create(const char* out)
{
    const char* slash = strrchr(out, '/');
    size_t dirlen = slash ? (size_t)(slash - out) + 1 : 0;
    const char* base = slash ? slash + 1 : out;
    size_t baselen = strlen(base);
    sigset_t old;
    int fd, saved;

    if (baselen > 200) baselen = 200;  /* keep the name under NAME_MAX */
    if (dirlen + baselen + 16 >= sizeof g_tmp_path) { errno = ENAMETOOLONG; return -1; }
    memcpy(g_tmp_path, out, dirlen);
    g_tmp_path[dirlen] = '.';
    memcpy(g_tmp_path + dirlen + 1, base, baselen);
    strcpy(g_tmp_path + dirlen + 1 + baselen, ".tmp-XXXXXX");

    block_signals(&old);
    fd = mkostemp(g_tmp_path, O_CLOEXEC);
    saved = errno;
    if (fd >= 0) g_tmp_active = 1;
    restore_signals(&old);
    errno = saved;
    return fd;
}

static void tmp_discard(void)
{
    sigset_t old;
    block_signals(&old);
    if (g_tmp_active) unlink(g_tmp_path);
    g_tmp_active = 0;
    restore_signals(&old);
}

/* Moves the temporary file to `out`. Without force, never replaces an existing file. */
static int tmp_commit(const char* out, int force)
{
    sigset_t old;
    int r, saved;
    block_signals(&old);
    if (force) {
        r = rename(g_tmp_path, out);
    } else {
        r = renameat2(AT_FDCWD, g_tmp_path, AT_FDCWD, out, RENAME_NOREPLACE);
        if (r != 0 && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)) {
            /* file system without RENAME_NOREPLACE: check, then rename */
            struct stat st;
            if (lstat(out, &st) == 0) { errno = EEXIST; r = -1; }
            else r = rename(g_tmp_path, out);
        }
    }
    saved = errno;
    if (r == 0) g_tmp_active = 0;
    restore_signals(&old);
    errno = saved;
    return r;
}

/*-************************************************************
 * I/O helpers
 **************************************************************/
/* Reads up to n bytes, stopping early only at end of file. Returns bytes or -1. */
static ssize_t read_full(int fd, void* buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char*)buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int write_all(int fd, const void* buf, size_t n)
{
    const char* p = (const char*)buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static uint64_t rd64le(const unsigned char* p)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void wr_le(unsigned char* p, uint64_t v, int n)
{
    int i;
    for (i = 0; i < n; i++, v >>= 8) p[i] = (unsigned char)v;
}

static int parse_int(const char* s, long* out)
{
    char* end;
    long v;
    if (!s || !*s) return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1000000) return -1;
    *out = v;
    return 0;
}

/*-************************************************************
 * Progress
 **************************************************************/
typedef struct {
    int enabled;
    const char* name;
    double start, last;
    uint64_t total;     /* input size, or 0 if unknown */
    int known;
    int shown;         /* width of the line on screen, 0 if none */
} progress_t;

static void progress_init(progress_t* p, const char* name, uint64_t total, int known)
{
    memset(p, 0, sizeof *p);
    p->enabled = g_opt.progress > 0 || (g_opt.progress < 0 && !g_opt.quiet && isatty(2));
    p->name = name;
    p->total = total;
    p->known = known && total > 0;
    p->start = p->last = now_sec();
}

static void progress_update(progress_t* p, uint64_t in_done, uint64_t out_done)
{
    double t, el;
    int w;
    if (!p->enabled) return;
    t = now_sec();
    if (t - p->last < 0.1) return;
    p->last = t;
    el = t - p->start;
    if (el <= 0) el = 1e-9;
    if (p->known)
        w = fprintf(stderr, "\r%s: %5.1f%%  %.1f MB -> %.1f MB  %.1f MB/s   ", p->name,
                100.0 * (double)in_done / (double)p->total, (double)in_done / 1e6,
                (double)out_done / 1e6, (double)in_done / 1e6 / el);
    else
        w = fprintf(stderr, "\r%s: %.1f MB -> %.1f MB  %.1f MB/s   ", p->name,
                    (double)in_done / 1e6, (double)out_done / 1e6, (double)in_done / 1e6 / el);
    if (w > p->shown) p->shown = w;
}

static void progress_clear(progress_t* p)
{
    if (p->shown) {
        fprintf(stderr, "\r%*s\r", p->shown, "");
        p->shown = 0;
    }
}

/*-************************************************************
 * Reference and contexts
 **************************************************************/
static int online_cores(void);

/* The reference's hash, from g_rh.fd, which it closes: here, when the
 * prefetch thread cannot do it. */
static void* ref_hash_main(void* arg)
{
    lmc_hash_state* h = lmc_hash_create();
    size_t const bs = (size_t)1 << 20;
    unsigned char* b = (unsigned char*)malloc(bs);
    uint64_t off = 0;
    (void)arg;
    if (!h || !b) g_rh.err = ENOMEM;
    while (!g_rh.err && off < g_ref_size) {
        size_t const want = g_ref_size - off < bs ? (size_t)(g_ref_size - off) : bs;
        ssize_t const r = pread(g_rh.fd, b, want, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { g_rh.err = r < 0 ? errno : -1; break; }
        lmc_hash_update(h, b, (size_t)r);
        off += (uint64_t)r;
    }
    if (!g_rh.err) g_rh.hash = lmc_hash_digest(h);
    lmc_hash_free(h);
    free(b);
    close(g_rh.fd);
    g_rh.fd = -1;
    return NULL;
}

/* After ref_hash_main: g_ref_hash, or -1 after a message. */
static int ref_hash_result(void)
{
    if (g_rh.err == ENOMEM) { errmsg("out of memory"); return -1; }
    if (g_rh.err) {
        errmsg("%s: cannot read reference: %s", g_opt.ref_name, g_rh.err > 0 ? strerror(g_rh.err) : "file shrank");
        return -1;
    }
    g_ref_hash = g_rh.hash;
    return 0;
}

/* Waits for the reference's hash if a thread computes it. 0 (g_ref_hash
 * set), or -1 after a message. */
static void ref_hash_kick(void);
static int ref_hash_wait(void)
{
    ref_hash_kick();
    if (!g_rh.running) return 0;
    g_rh.err = prefetch_hash_result(&g_rh.hash);
    g_rh.running = 0;
    return ref_hash_result();
}

/* Starts the hash that load_ref left pending, on the prefetch thread
 * (reading the file), or here if the thread cannot run. */
static void ref_hash_kick(void)
{
    if (!g_rh.pending) return;
    g_rh.pending = 0;
    if (prefetch_hash_start(g_rh.fd, NULL, g_ref_size) == 0) { g_rh.running = 1; return; }
    (void)ref_hash_main(NULL);
    if (ref_hash_result() != 0) { g_rh.running = 0; g_ref_hash = 0; g_rh.err = g_rh.err ? g_rh.err : -1; }
}

static int load_ref(void)
{
    struct stat st;
    int fd;
    if (!g_opt.ref_name) return 0;
    fd = open(g_opt.ref_name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { errmsg("%s: cannot open reference: %s", g_opt.ref_name, strerror(errno)); return -1; }
    if (fstat(fd, &st) != 0) {
        errmsg("%s: cannot stat reference: %s", g_opt.ref_name, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        errmsg("%s: reference is not a regular file", g_opt.ref_name);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        errmsg("%s: reference too large for this system", g_opt.ref_name);
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        g_ref = g_empty;  /* non-NULL: an empty reference, not "no reference" */
        g_ref_size = 0;
    } else {
        void* p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            errmsg("%s: cannot map reference: %s", g_opt.ref_name, strerror(errno));
            close(fd);
            return -1;
        }
        g_ref = p;
        g_ref_size = (size_t)st.st_size;
        g_ref_mapped = 1;
    }
    /* The prefetch thread hashes the reference: the pages it maps in for
     * the coder while they are mapped, and the rest with pread(), which
     * copies from the page cache faster than the mapping faults pages in
     * (prefetch.h). The contexts then take the hash as given.
     * Coding need not wait for it, when its output stays private until the
     * end (process_file): decompression takes the frame's own reference hash
     * on trust and compares it with this one before it keeps any output (a
     * reference of a different size is still refused at once); compression
     * writes a placeholder in the frame header and the hash over it at the
     * end. With output to stdout or a pipe both wait for it. */
    g_rh.err = 0;
    g_rh.fd = fd;
    g_rh.pending = 0;
    g_ref_lib_given = 0;
    if (g_opt.mode == MODE_COMPRESS || g_opt.mode == MODE_DECOMPRESS || g_opt.mode == MODE_TEST) {
        /* Hashing the mapped pages saves the copy, but needs a core to
         * spare: with a coding thread on every core the prefetch thread
         * falls behind the coder, reads what the coder dropped anyway and
         * finishes late (200 MB bf16 delta on 2 cores, medians of 25
         * alternated runs: -T1 decompression 288 -> 254 ms, -T2 263 -> 274).
         * There, decompression leaves the hash to the library's coding
         * threads, between their chunk jobs, where the frame allows
         * (give_dctx_ref); the thread starts only for a frame that does
         * not (ref_hash_kick). Compression hashes the mapped pages either
         * way: reading the reference once more into the thread's fresh
         * buffer cost a small file more than the thread's lag (AMD EPYC
         * VM, 2026-12-03, -T2, medians of alternated runs: 6.6 MB bf16
         * delta 28.1 -> 23.4 ms; 26.6 MB optimizer delta 71.3 -> 70.4;
         * 213 MB raw bf16 delta 239.6 -> 238.2). */
        int const spare_core = g_opt.threads < online_cores();
        if (!spare_core && g_ref_mapped && g_opt.mode != MODE_COMPRESS) {
            g_rh.pending = 1;
            return 0;
        }
        int const hash_mapped = g_ref_mapped && (spare_core || g_opt.mode == MODE_COMPRESS);
        if (prefetch_hash_start(fd, hash_mapped ? (const unsigned char*)g_ref : NULL, g_ref_size) == 0) {
            g_rh.running = 1;
            return 0;
        }
    }
    (void)ref_hash_main(NULL);
    return ref_hash_result();
}

/* Drops the reference's pages from this process's memory every REF_WINDOW
 * bytes of progress (in practice after every library call, which codes at
 * most 16 MiB), all but the next call's first pages (REF_AHEAD), which the
 * prefetch thread may have mapped in ahead of the coder (want_ref). They
 * come back from the page cache when touched again, so peak memory stays
 * near one call's worth whatever the reference size. */
static uint64_t g_ref_released_at;   /* the progress of the last drop; 0 for each file */
static void ref_release(uint64_t progress)
{
    uint64_t const last = g_ref_released_at;
    if (!g_ref_mapped || progress < last + REF_WINDOW) return;
    /* kept: from the progress on, what the latest want_ref asked for beyond
     * it (the next call's first pages, where the layouts match) */
    size_t const page = (size_t)sysconf(_SC_PAGESIZE), margin = (size_t)256 << 10;
    size_t lo = progress > margin ? (size_t)progress - margin : 0, hi = g_ref_keep_hi;
    if (lo < g_ref_keep_lo) lo = g_ref_keep_lo;
    if (hi > lo + REF_AHEAD + 2 * margin) hi = lo + REF_AHEAD + 2 * margin;
    lo = lo / page * page;
    hi = (hi + page - 1) / page * page;
    if (hi > g_ref_size || hi < lo) hi = g_ref_size;
    if (lo > hi) lo = hi;
    prefetch_dropping(PREFETCH_REF, lo);
    if (lo) madvise((void*)g_ref, lo, MADV_DONTNEED);
    if (hi < g_ref_size) madvise((void*)((const unsigned char*)g_ref + hi), g_ref_size - hi, MADV_DONTNEED);
    prefetch_dropped(PREFETCH_REF);
    g_ref_released_at = progress;
}

static void unload_ref(void)
{
    if (g_rh.running) { prefetch_hash_cancel(); g_rh.running = 0; }
    if (g_rh.pending) { close(g_rh.fd); g_rh.fd = -1; g_rh.pending = 0; }
    prefetch_forget(PREFETCH_REF);
    if (g_ref_mapped) munmap((void*)g_ref, g_ref_size);
    g_ref_keep_lo = g_ref_keep_hi = 0;
    g_ref = NULL;
    g_ref_size = 0;
    g_ref_mapped = 0;
}

static lmc_cctx* make_cctx(int threads)
{
    size_t r;
    lmc_cctx* const c = lmc_cctx_create();
    if (!c) { errmsg("cannot create compression context: out of memory"); return NULL; }
    r = lmc_cctx_set_param(c, LMC_P_THREADS, threads);
    if (!lmc_is_error(r)) r = lmc_cctx_set_param(c, LMC_P_FORMAT, g_opt.format);
    if (!lmc_is_error(r) && g_opt.dtype_set) r = lmc_cctx_set_param(c, LMC_P_DTYPE, g_opt.dtype);
    if (!lmc_is_error(r) && g_opt.no_refctx) r = lmc_cctx_set_param(c, LMC_P_CODERS, 0xFF & ~(1 << LMC_CODER_REFCTX));
    if (lmc_is_error(r)) { errmsg("cannot set compression parameters: %s", lmc_error_name(r)); lmc_cctx_free(c); return NULL; }
    if (g_ref && !g_rh.running && !g_rh.pending) {   /* else process_file gives it, frame by frame */
        r = lmc_cctx_set_ref_hashed(c, g_ref, g_ref_size, g_ref_hash);
        if (lmc_is_error(r)) { errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r)); lmc_cctx_free(c); return NULL; }
    }
    return c;
}

static lmc_dctx* make_dctx(int threads)
{
    size_t r;
    lmc_dctx* const d = lmc_dctx_create();
    if (!d) { errmsg("cannot create decompression context: out of memory"); return NULL; }
    r = lmc_dctx_set_param(d, LMC_D_THREADS, threads);
    if (lmc_is_error(r)) { errmsg("cannot set decompression parameters: %s", lmc_error_name(r)); lmc_dctx_free(d); return NULL; }
    if (g_ref && !g_rh.running && !g_rh.pending) {   /* else process_file gives it, frame by frame */
        r = lmc_dctx_set_ref_hashed(d, g_ref, g_ref_size, g_ref_hash);
        if (lmc_is_error(r)) { errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r)); lmc_dctx_free(d); return NULL; }
    }
    return d;
}

static int setup_cctx(void)
{
    if (!g_cctx) g_cctx = make_cctx(g_opt.threads);
    return g_cctx ? 0 : -1;
}

static int setup_dctx(void)
{
    if (!g_dctx) g_dctx = make_dctx(g_opt.threads);
    return g_dctx ? 0 : -1;
}

/* With the frame's reference hash trusted: 1 if the reference's own hash
 * differs from it (after a message naming the file), 0 if it matches or
 * nothing was trusted, -1 if the reference could not be read (after a
 * message). */
static int ref_deferred_check(const char* name)
{
    if (!g_defer_active) return 0;
    g_defer_active = 0;
    if (ref_hash_wait() != 0) return -1;
    if (g_ref_hash == g_defer_expect) return 0;
    errmsg("%s: wrong reference: %s is not the checkpoint this delta was made against (its hash differs)",
           name, g_opt.ref_name ? g_opt.ref_name : "?");
    return 1;
}

/* The I/O buffers in whole 2 MiB pages, marked for transparent huge pages:
 * page faults took about a seventh of the samples of decoding a 6.6 MB bf16
 * delta to a file (2158 faults; 539 with this, and that run takes about 6 %
 * less time: medians of 30 alternated runs). Where THP is off this is plain
 * aligned memory. */
static void* big_alloc(size_t n)
{
    void* p = NULL;
    size_t const a = (size_t)2 << 20;
    if (posix_memalign(&p, a, (n + a - 1) / a * a) != 0) return NULL;
    madvise(p, (n + a - 1) / a * a, MADV_HUGEPAGE);
    return p;
}

static size_t g_in_size = IN_BUF_SIZE, g_out_size = OUT_BUF_SIZE;

/* Reads a whole batch of chunks per call when compressing from a pipe, so
 * the library codes straight from this buffer. The output buffer takes
 * several chunks: the library codes them straight into it, as one run with
 * no barrier between batches, until it is full; the writer thread writes
 * it while the next run fills the other buffer.
 * Compression: 8 MiB, or a chunk per thread up to 16 MiB: with fewer,
 * threads past the eighth would wait out every run.
 * Decompression: two chunks (1 MiB each) per thread, 2 to 16 MiB. Its
 * output is as large as its content, so with the 8 MiB runs it had before,
 * a small file filled one run and nothing overlapped its write: decoding a
 * 6.6 MB bf16 delta to a file took 17.7 ms with -T1 and 16.7 ms with -T2,
 * and takes 14.0 and 14.1 ms with these runs (medians of 15 alternated
 * runs); a 200 MB delta is no slower (medians of 4: -T1 322 -> 309 ms,
 * -T2 240 -> 236 ms). Above 4 threads a chunk and a half per thread: its
 * output is held twice and its reference pages once, and two chunks per
 * thread held 76.5 MiB of the 80 MiB bound at -T8 (213 MB optimizer
 * delta, -r; 60 with these runs). */
#define OUT_BUF_RUN ((size_t)8 << 20)
#define DEC_READ_MIN ((size_t)8 << 20)
#define OUT_BUF_RUN_MAX ((size_t)16 << 20)
static int setup_buffers(void)
{
    if (!g_inbuf) {
        if (g_cctx && lmc_cstream_in_size(g_cctx) > g_in_size) g_in_size = lmc_cstream_in_size(g_cctx);
        size_t const per_thread = g_cctx ? (size_t)g_opt.threads << 20
                                  : g_opt.threads > 4 ? (size_t)(g_opt.threads + g_opt.threads / 2) << 20
                                  : (size_t)g_opt.threads << 21;
        g_out_size = g_cctx ? OUT_BUF_RUN : (size_t)2 << 20;
        if (per_thread > g_out_size) g_out_size = per_thread < OUT_BUF_RUN_MAX ? per_thread : OUT_BUF_RUN_MAX;
        if (g_cctx && g_out_size < lmc_compress_bound(g_in_size)) g_out_size = lmc_compress_bound(g_in_size);
        /* a frame read from a pipe comes in windows of many chunks: the
         * library decodes those that lie whole in a window in place, and
         * copies only the one across its end (lmc_decompress_stream) */
        if (!g_cctx && g_in_size < DEC_READ_MIN) g_in_size = DEC_READ_MIN;
        if (!g_cctx && g_in_size < g_out_size) g_in_size = g_out_size;
        g_inbuf = (unsigned char*)big_alloc(g_in_size);
        g_outbuf = (unsigned char*)big_alloc(g_out_size);
        g_wr.buf[0] = g_outbuf;
        g_wr.buf[1] = (unsigned char*)big_alloc(g_out_size);   /* none: writes stay synchronous */
    }
    if (!g_inbuf || !g_outbuf) { errmsg("out of memory"); return -1; }
    return 0;
}

/* Prints a library error about `name` with a hint for reference errors. */
static void lib_error(const char* name, size_t code)
{
    /* decoding against a reference not yet checked: a wrong one shows up as
     * a checksum error; say what it really is */
    if (g_defer_active && ref_deferred_check(name) != 0) return;
    lmc_error e = lmc_get_error(code);
    const char* msg = lmc_error_name(code);
    int says_ref = strstr(msg, "reference") != NULL;
    if (e == LMC_ERR_REF_WRONG && g_ref_lib_frame)   /* the library's hash differs (sizes were checked) */
        errmsg("%s: wrong reference: %s is not the checkpoint this delta was made against (its hash differs)",
               name, g_opt.ref_name ? g_opt.ref_name : "?");
    else if (e == LMC_ERR_REF_REQUIRED && g_missing_ref)
        errmsg("%s: %s (reference %s not found)", name, msg, g_missing_ref);
    else if (e == LMC_ERR_REF_REQUIRED)
        errmsg("%s: %s%s", name, msg,
               says_ref ? "" : " (this delta frame needs its reference checkpoint: use -r REF)");
    else if (e == LMC_ERR_REF_WRONG)
        errmsg("%s: %s%s (-r %s)", name, msg,
               says_ref ? "" : ": the reference checkpoint does not match", g_opt.ref_name ? g_opt.ref_name : "?");
    else
        errmsg("%s: %s", name, msg);
}

/*-************************************************************
 * Coding loops
 **************************************************************/
typedef struct {
    const char* in_name;   /* for messages */
    const char* out_name;  /* for messages; NULL when output is discarded */
    int infd, outfd;       /* outfd < 0: discard output */
    const unsigned char* map;  /* the whole input, mmap()ed, or NULL: read() infd */
    int regular;               /* infd is a regular file (reads end promptly) */
    size_t map_size;
    uint64_t in_bytes, out_bytes;
    progress_t* prog;
} job_t;

static int job_write(job_t* j, const void* p, size_t n);
static unsigned char* out_buffer(void);

/* Drops the input pages the library is done with (it returns after a
 * bounded amount of input or output): they stay in the page cache, but not
 * in this process's memory. */
static void map_release(job_t* j, size_t done, size_t* released)
{
    size_t const page = (size_t)sysconf(_SC_PAGESIZE);
    size_t const upto = done / page * page;
    if (upto > *released) {
        prefetch_dropping(PREFETCH_INPUT, upto);
        madvise((void*)(j->map + *released), upto - *released, MADV_DONTNEED);
        prefetch_dropped(PREFETCH_INPUT);
    }
    *released = upto;
}

/* Tells the prefetch thread which bytes of the reference the next call
 * will read: those of the content range [pos, pos + len) for an input laid
 * out as its reference (a safetensors file's header may be a little longer
 * or shorter, hence the margin), and up to REF_AHEAD more, so that the
 * thread maps the call after's pages in while this call codes: asked for
 * only the call's own range, it started on the pages the coder was about
 * to read, and the coder, faster, took most of their first touches itself.
 * A reference laid out otherwise is faulted in by the coder as before. */
static void want_ref(uint64_t pos, size_t len)
{
    size_t const margin = (size_t)256 << 10;
    size_t const ahead = len < REF_AHEAD ? len : REF_AHEAD;
    if (!g_ref_mapped || pos >= g_ref_size) return;
    g_ref_keep_lo = pos > margin ? (size_t)pos - margin : 0;
    g_ref_keep_hi = (size_t)pos + len + ahead + margin;
    prefetch_want(PREFETCH_REF, (const unsigned char*)g_ref, g_ref_size, g_ref_keep_lo, g_ref_keep_hi);
}

/* Compression straight from the mapped file: the library takes it whole and
 * codes chunks in place, as many per call as the output buffer holds. */
static int run_compress_mapped(job_t* j)
{
    lmc_inbuf in;
    size_t released = 0, took = g_out_size;
    unsigned stuck = 0;
    in.src = j->map; in.size = j->map_size; in.pos = 0;
    for (;;) {
        lmc_outbuf out;
        size_t before = in.pos, r;
        /* the next call reads about as much as the last one did */
        prefetch_want(PREFETCH_INPUT, j->map, j->map_size, in.pos, in.pos + took);
        want_ref(in.pos, took);
        out.dst = out_buffer(); out.size = g_out_size; out.pos = 0;
        r = lmc_compress_stream(g_cctx, &out, &in, 1);
        if (lmc_is_error(r)) { lib_error(j->in_name, r); return -1; }
        if (in.pos > before) took = in.pos - before;
        if (r != 0 && in.pos == before && out.pos == 0 && ++stuck > STUCK_LIMIT) {
            errmsg("%s: internal error: the compressor makes no progress", j->in_name);
            return -1;
        }
        if (in.pos != before || out.pos != 0) stuck = 0;
        j->in_bytes = in.pos;
        if (job_write(j, out.dst, out.pos) != 0) return -1;
        progress_update(j->prog, j->in_bytes, j->out_bytes);
        ref_release(j->in_bytes);
        map_release(j, in.pos, &released);
        if (r == 0) return 0;
    }
}

/* Decompression straight from the mapped frame into the output buffer. */
static int run_decompress_mapped(job_t* j)
{
    lmc_inbuf in;
    size_t released = 0, took = g_out_size;
    unsigned stuck = 0;
    in.src = j->map; in.size = j->map_size; in.pos = 0;
    if (j->map_size == 0) { errmsg("%s: empty input: not an lmc frame", j->in_name); return -1; }
    for (;;) {
        lmc_outbuf out;
        size_t before = in.pos, r;
        /* a call writes at most the output buffer; it reads about as much
         * input as the last one did */
        prefetch_want(PREFETCH_INPUT, j->map, j->map_size, in.pos, in.pos + took);
        want_ref(j->out_bytes, g_out_size);
        out.dst = out_buffer(); out.size = g_out_size; out.pos = 0;
        r = lmc_decompress_stream(g_dctx, &out, &in);
        if (lmc_is_error(r)) { lib_error(j->in_name, r); return -1; }
        if (in.pos > before) took = in.pos - before;
        j->in_bytes = in.pos;
        if (job_write(j, out.dst, out.pos) != 0) return -1;
        progress_update(j->prog, j->in_bytes, j->out_bytes);
        ref_release(j->out_bytes);
        map_release(j, in.pos, &released);
        if (r == 0) {
            if (in.pos < in.size) {
                errmsg("%s: unexpected data after the end of the frame (trailing bytes)", j->in_name);
                return -1;
            }
            return 0;
        }
        if (in.pos == in.size && out.pos < out.size) {
            errmsg("%s: input is truncated: the frame is incomplete", j->in_name);
            return -1;
        }
        if (in.pos == before && out.pos == 0 && ++stuck > STUCK_LIMIT) {
            errmsg("%s: internal error: the decompressor makes no progress", j->in_name);
            return -1;
        }
        if (in.pos != before || out.pos != 0) stuck = 0;
    }
}

/* Output is written by a writer thread, so that writing overlaps coding:
 * the coding loops fill one of two buffers (out_buffer()) while the other
 * is being written. job_write hands a filled buffer over and flips; the
 * write's outcome is reported at the next hand-over or at writer_wait(). */

static void* writer_main(void* arg)
{
    (void)arg;
    pthread_mutex_lock(&g_wr.mu);
    for (;;) {
        while (!g_wr.busy) pthread_cond_wait(&g_wr.cv, &g_wr.mu);
        int const fd = g_wr.fd;
        const unsigned char* const p = g_wr.p;
        size_t const n = g_wr.n;
        pthread_mutex_unlock(&g_wr.mu);
        int const e = write_all(fd, p, n) != 0 ? (errno ? errno : EIO) : 0;
        pthread_mutex_lock(&g_wr.mu);
        if (e && !g_wr.err) g_wr.err = e;
        g_wr.busy = 0;
        pthread_cond_broadcast(&g_wr.cv);
    }
    return NULL;
}

static unsigned char* out_buffer(void) { return g_wr.buf[g_wr.cur]; }

/* Waits for the write in flight; reports (once) a write error. */
static int writer_wait(job_t* j)
{
    int e;
    if (!g_wr.started) return 0;
    pthread_mutex_lock(&g_wr.mu);
    while (g_wr.busy) pthread_cond_wait(&g_wr.cv, &g_wr.mu);
    e = g_wr.err;
    g_wr.err = 0;
    pthread_mutex_unlock(&g_wr.mu);
    if (e && j) errmsg("%s: write error: %s", j->out_name, strerror(e));
    return e ? -1 : 0;
}

static int job_write(job_t* j, const void* p, size_t n)
{
    if (n == 0) return 0;
    j->out_bytes += n;
    if (j->outfd < 0) return 0;
    if (!g_wr.buf[1] || p != g_wr.buf[g_wr.cur]) {   /* not ours, or no second buffer: write now */
        if (writer_wait(j) != 0) return -1;
        if (write_all(j->outfd, p, n) != 0) {
            errmsg("%s: write error: %s", j->out_name, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (!g_wr.started) {
        pthread_attr_t attr;
        int const have_attr = cpuplace_attr(&attr) == 0;
        int const rc = pthread_create(&g_wr.tid, have_attr ? &attr : NULL, writer_main, NULL);
        if (have_attr) pthread_attr_destroy(&attr);
        if (rc != 0) {
            if (write_all(j->outfd, p, n) != 0) {
                errmsg("%s: write error: %s", j->out_name, strerror(errno));
                return -1;
            }
            return 0;
        }
        pthread_detach(g_wr.tid);
        g_wr.started = 1;
    }
    if (writer_wait(j) != 0) return -1;
    pthread_mutex_lock(&g_wr.mu);
    g_wr.fd = j->outfd; g_wr.p = (const unsigned char*)p; g_wr.n = n;
    g_wr.busy = 1;
    pthread_cond_broadcast(&g_wr.cv);
    pthread_mutex_unlock(&g_wr.mu);
    g_wr.cur ^= 1;
    return 0;
}

/* Compresses one window of input read into buf (n bytes; end: the last).
 * 0, or -1 after printing an error. */
static int compress_window(job_t* j, const unsigned char* buf, size_t n, int end)
{
    lmc_inbuf in;
    size_t r;
    unsigned stuck = 0;
    in.src = buf; in.size = n; in.pos = 0;
    want_ref(j->in_bytes, n);
    j->in_bytes += (uint64_t)n;
    for (;;) {
        lmc_outbuf out;
        size_t before = in.pos;
        out.dst = out_buffer(); out.size = g_out_size; out.pos = 0;
        r = lmc_compress_stream(g_cctx, &out, &in, end);
        if (lmc_is_error(r)) {
            if (lmc_get_error(r) == LMC_ERR_SIZE_MISMATCH && j->regular)   /* its size was declared from fstat() */
                errmsg("%s: the file changed size while it was being read; stopped", j->in_name);
            else
                lib_error(j->in_name, r);
            return -1;
        }
        if (r != 0 && in.pos == before && out.pos == 0 && ++stuck > STUCK_LIMIT) {
            errmsg("%s: internal error: the compressor makes no progress", j->in_name);
            return -1;
        }
        if (in.pos != before || out.pos != 0) stuck = 0;
        if (job_write(j, out.dst, out.pos) != 0) return -1;
        progress_update(j->prog, j->in_bytes, j->out_bytes);
        ref_release(j->in_bytes);
        if (end ? r == 0 : (in.pos == in.size && out.pos < out.size)) return 0;
    }
}

static void* reader_main(void* arg)
{
    (void)arg;
    pthread_mutex_lock(&g_rd.mu);
    for (;;) {
        while (!g_rd.busy || g_rd.done) pthread_cond_wait(&g_rd.cv, &g_rd.mu);
        int const fd = g_rd.fd;
        unsigned char* const p = g_rd.p;
        size_t const size = g_rd.size;
        pthread_mutex_unlock(&g_rd.mu);
        ssize_t const n = read_full(fd, p, size);
        int const e = n < 0 ? errno : 0;
        pthread_mutex_lock(&g_rd.mu);
        g_rd.n = n;
        g_rd.err = e;
        g_rd.done = 1;
        pthread_cond_broadcast(&g_rd.cv);
    }
    return NULL;
}

/* Asks the reader thread for the next `size` bytes of fd into p. 0, or -1
 * if the thread cannot start (the caller reads itself). */
static int reader_request(int fd, unsigned char* p, size_t size)
{
    pthread_mutex_lock(&g_rd.mu);
    if (!g_rd.started) {
        pthread_attr_t attr;
        int const have_attr = cpuplace_attr(&attr) == 0;
        int const rc = pthread_create(&g_rd.tid, have_attr ? &attr : NULL, reader_main, NULL);
        if (have_attr) pthread_attr_destroy(&attr);
        if (rc != 0) { pthread_mutex_unlock(&g_rd.mu); return -1; }
        pthread_detach(g_rd.tid);
        g_rd.started = 1;
    }
    g_rd.fd = fd; g_rd.p = p; g_rd.size = size;
    g_rd.busy = 1; g_rd.done = 0;
    pthread_cond_broadcast(&g_rd.cv);
    pthread_mutex_unlock(&g_rd.mu);
    return 0;
}

/* Waits for the requested read: read_full's result (errno set on -1), or
 * 0 with no read requested. */
static ssize_t reader_take(void)
{
    ssize_t n;
    pthread_mutex_lock(&g_rd.mu);
    if (!g_rd.busy) { pthread_mutex_unlock(&g_rd.mu); return 0; }
    while (!g_rd.done) pthread_cond_wait(&g_rd.cv, &g_rd.mu);
    n = g_rd.n;
    if (n < 0) errno = g_rd.err;
    g_rd.busy = 0;
    pthread_mutex_unlock(&g_rd.mu);
    return n;
}

/* Compression from a regular file read ahead: the reader thread reads the
 * next window into one buffer while the library codes the other, so that
 * the copy out of the page cache overlaps coding (on a spare core, or
 * between the coding threads' chunks). Reading rather than mapping: a
 * freshly mapped page costs its first touch, which on the virtual machines
 * this was measured on (PVM guests: each new page table entry is shadowed
 * by the host on first access) is about twice a page's copy by read(). */
static int run_compress_ahead(job_t* j)
{
    int cur = 0, ret = -1;
    if (!g_rd.buf[1]) g_rd.buf[1] = (unsigned char*)big_alloc(g_in_size);
    g_rd.buf[0] = g_inbuf;
    if (!g_rd.buf[1] || reader_request(j->infd, g_rd.buf[0], g_in_size) != 0) return 1;   /* read in the loop instead */
    for (;;) {
        ssize_t const n = reader_take();
        if (n < 0) { errmsg("%s: read error: %s", j->in_name, strerror(errno)); break; }
        int const end = ((size_t)n < g_in_size);   /* read_full only stops short at end of input */
        if (!end && reader_request(j->infd, g_rd.buf[cur ^ 1], g_in_size) != 0) {
            errmsg("%s: cannot start the reading thread", j->in_name);
            break;
        }
        if (compress_window(j, g_rd.buf[cur], (size_t)n, end) != 0) break;
        if (end) { ret = 0; break; }
        cur ^= 1;
    }
    (void)reader_take();   /* no read of this file left in flight: its fd may close */
    return ret;
}

/* Gives a big_alloc buffer's pages back, keeping the buffer. */
static void buffer_drop(void* p, size_t n)
{
    size_t const a = (size_t)2 << 20;
    if (p) madvise(p, (n + a - 1) / a * a, MADV_DONTNEED);
}

static int run_compress(job_t* j)
{
    g_ref_released_at = 0;   /* progress starts again (a directory's files, --rm's check) */
    /* coding from the mapping leaves the read buffers idle: the pages an
     * earlier file of a directory filled would stay on top of this one's
     * (a safetensors file read, then a torch zip mapped: 80 MiB at -T2,
     * over the 68 MiB bound; 59 the other way round) */
    if (j->map) {
        buffer_drop(g_inbuf, g_in_size);
        buffer_drop(g_rd.buf[1], g_in_size);
        return run_compress_mapped(j);
    }
    /* reading ahead takes a second input buffer: only with a core to spare
     * for the reader thread (at -T2 on 2 cores it measured no faster than
     * reading in place) */
    if (j->regular && g_opt.threads < online_cores() && g_in_size <= READ_BUF_MAX) {
        int const r = run_compress_ahead(j);
        if (r <= 0) return r;
    }
    for (;;) {
        ssize_t const n = read_full(j->infd, g_inbuf, g_in_size);
        if (n < 0) { errmsg("%s: read error: %s", j->in_name, strerror(errno)); return -1; }
        int const end = ((size_t)n < g_in_size);   /* read_full only stops short at end of input */
        if (compress_window(j, g_inbuf, (size_t)n, end) != 0) return -1;
        if (end) return 0;
    }
}

/* Decodes one frame from j->infd. Returns 0, or -1 after printing an error. */
static int run_decompress(job_t* j)
{
    int done = 0;
    g_ref_released_at = 0;   /* progress starts again (a directory's files, --rm's check) */
    if (j->map) return run_decompress_mapped(j);
    for (;;) {
        ssize_t n = read_full(j->infd, g_inbuf, g_in_size);
        lmc_inbuf in;
        int eof;
        unsigned stuck = 0;
        if (n < 0) { errmsg("%s: read error: %s", j->in_name, strerror(errno)); return -1; }
        eof = (n == 0);
        in.src = g_inbuf; in.size = (size_t)n; in.pos = 0;
        if (done) {
            if (eof) return 0;
            errmsg("%s: unexpected data after the end of the frame (trailing bytes)", j->in_name);
            return -1;
        }
        for (;;) {
            lmc_outbuf out;
            size_t r;
            size_t before = in.pos;
            want_ref(j->out_bytes, g_out_size);
            out.dst = out_buffer(); out.size = g_out_size; out.pos = 0;
            r = lmc_decompress_stream(g_dctx, &out, &in);
            if (lmc_is_error(r)) { lib_error(j->in_name, r); return -1; }
            if (r != 0 && in.pos == before && out.pos == 0 && in.pos < in.size && ++stuck > STUCK_LIMIT) {
                errmsg("%s: internal error: the decompressor makes no progress", j->in_name);
                return -1;
            }
            if (in.pos != before || out.pos != 0) stuck = 0;
            j->in_bytes += in.pos - before;
            if (job_write(j, out.dst, out.pos) != 0) return -1;
            progress_update(j->prog, j->in_bytes, j->out_bytes);
            ref_release(j->out_bytes);
            if (r == 0) {
                done = 1;
                if (in.pos < in.size) {
                    errmsg("%s: unexpected data after the end of the frame (trailing bytes)", j->in_name);
                    return -1;
                }
                break;
            }
            if (in.pos == in.size && out.pos < out.size) break;
        }
        if (eof) {
            if (done) return 0;
            if (j->in_bytes == 0)
                errmsg("%s: empty input: not an lmc frame", j->in_name);
            else
                errmsg("%s: input is truncated: the frame is incomplete", j->in_name);
            return -1;
        }
    }
}

/* Decompression with the reference's hash still being computed: from a
 * mapped frame into output nobody sees before the end (a temporary file,
 * or none with -t), the context takes the frame's own reference hash, and
 * the real one is compared at the end (ref_deferred_check). Otherwise it
 * waits for the hash. 0, or -1 after a message. */
static int give_dctx_ref(const job_t* j, int private_output)
{
    lmc_frame_header fh;
    uint64_t h;
    size_t r;
    g_defer_active = 0;
    g_ref_lib_frame = 0;
    if (!g_ref) return 0;
    /* The library hashes the reference between its chunk jobs and checks it
     * when the frame ends: for output kept private until then, and a
     * reference no larger than the content (plus a margin), so that the
     * jobs pass all of it and only a slice is left for the end, which the
     * library hashes through the mapping in one go (RSS). A frame that
     * fails part way has the rest hashed that way too, to tell a wrong
     * reference from a damaged frame: file pages mapped in just before the
     * error ends the file (and, for one file, the process). */
    if (g_rh.pending && private_output && j->map && j->map_size >= LMC_FRAME_HEADER_SIZE
        && !lmc_is_error(lmc_get_frame_header(&fh, j->map, j->map_size)) && fh.has_ref
        && fh.ref_size == (uint64_t)g_ref_size && fh.content_size_known
        && fh.ref_size <= fh.content_size + ((uint64_t)1 << 20)) {
        r = lmc_dctx_set_param(g_dctx, LMC_D_REF_CHECK_LAST, 1);
        if (!lmc_is_error(r) && !(g_ref_lib_given & 1)) r = lmc_dctx_set_ref(g_dctx, g_ref, g_ref_size);
        if (lmc_is_error(r)) {
            errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r));
            return -1;
        }
        g_ref_lib_given |= 1;
        g_ref_lib_frame = 1;
        return 0;
    }
    r = lmc_dctx_set_param(g_dctx, LMC_D_REF_CHECK_LAST, 0);
    if (lmc_is_error(r)) {
        errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r));
        return -1;
    }
    g_ref_lib_given &= ~1;   /* set_ref_hashed below */
    ref_hash_kick();
    if (g_rh.running && private_output && j->map && j->map_size >= LMC_FRAME_HEADER_SIZE
        && !lmc_is_error(lmc_get_frame_header(&fh, j->map, j->map_size)) && fh.has_ref) {
        h = fh.ref_hash;
        g_defer_active = 1;
        g_defer_expect = h;
    } else {
        if (ref_hash_wait() != 0) return -1;
        h = g_ref_hash;
    }
    r = lmc_dctx_set_ref_hashed(g_dctx, g_ref, g_ref_size, h);
    if (lmc_is_error(r)) {
        g_defer_active = 0;
        errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r));
        return -1;
    }
    return 0;
}

/* Compression with the reference's hash still being computed: into a
 * temporary file the frame is written with 0 in the header's reference hash,
 * which patch_ref_hash() replaces at the end; otherwise it waits for the
 * hash. 0, or -1 after a message. */
static int g_cdefer = 0;
static int give_cctx_ref(int private_output)
{
    uint64_t h = 0;
    size_t r;
    g_cdefer = 0;
    if (!g_ref) return 0;
    if (g_rh.running && private_output) {
        g_cdefer = 1;
    } else {
        if (ref_hash_wait() != 0) return -1;
        h = g_ref_hash;
    }
    r = lmc_cctx_set_ref_hashed(g_cctx, g_ref, g_ref_size, h);
    if (lmc_is_error(r)) {
        g_cdefer = 0;
        errmsg("%s: cannot use reference: %s", g_opt.ref_name, lmc_error_name(r));
        return -1;
    }
    return 0;
}

/* A safetensors input against a safetensors reference, or a torch.save zip
 * against a torch.save zip: how many of the input's tensors (those with
 * data; a zip's typed storages) have a counterpart in the reference of the
 * same name, dtype and shape, the ones the library codes as deltas (*total:
 * how many there are). -1 when the two are not both of one of those kinds. */
static long ref_tensor_matches(const unsigned char* in, size_t in_size, size_t* total)
{
    lmc_tensor_map *mi = NULL, *mr = NULL;
    long matched = -1;
    int ok;
    *total = 0;
    if (in_size < 8 || g_ref_size < 8) return -1;
    if (lmc_safetensors_prefix(in, in_size) && lmc_safetensors_prefix(g_ref, g_ref_size))
        ok = !lmc_is_error(lmc_tensor_map_safetensors(&mi, in, in_size, in_size))
             && !lmc_is_error(lmc_tensor_map_safetensors(&mr, g_ref, g_ref_size, g_ref_size));
    else
        ok = !lmc_is_error(lmc_tensor_map_torch(&mi, in, in_size)) && !lmc_is_error(lmc_tensor_map_torch(&mr, g_ref, g_ref_size));
    if (ok) {
        size_t const n = lmc_tensor_map_count(mi);
        matched = 0;
        for (size_t i = 0; i < n; i++) {
            const lmc_tensor_info* const t = lmc_tensor_map_get(mi, i);
            if (!t->size) continue;
            ++*total;
            long const k = lmc_tensor_map_find(mr, t->name, t->name_len);
            const lmc_tensor_info* const u = k >= 0 ? lmc_tensor_map_get(mr, (size_t)k) : NULL;
            if (!u || u->dtype != t->dtype || u->size != t->size || u->ndim != t->ndim) continue;
            unsigned d = 0;
            while (d < t->ndim && t->shape[d] == u->shape[d]) d++;
            matched += d == t->ndim;
        }
    }
    lmc_tensor_map_free(mi);
    lmc_tensor_map_free(mr);
    return matched;
}

/* Before a file is coded against the reference: where none of its tensors
 * has a counterpart there (a wrong -r, or a dtype or shape change), a delta
 * would be no smaller and would still need the reference to decode, so the
 * file is coded whole, with a warning. 1 if so, else 0. */
static int ref_useless(const job_t* j)
{
    size_t total;
    long matched;
    if (!g_ref || !j->map) return 0;
    matched = ref_tensor_matches(j->map, j->map_size, &total);
    if (matched < 0) return 0;
    if (matched == 0 && total > 0) {
        if (!g_opt.quiet)
            fprintf(stderr, "%s: warning: %s: none of its %zu tensors has a counterpart (same name, dtype and shape) "
                    "in the reference %s: coded whole, as a keyframe\n", g_prog, j->in_name, total, g_opt.ref_name);
        return 1;
    }
    if (g_opt.verbose && (size_t)matched < total)
        fprintf(stderr, "%s: %s: %zu of its %zu tensors have no counterpart in the reference: coded whole\n",
                g_prog, j->in_name, total - (size_t)matched, total);
    return 0;
}

/* After a delta: where no piece was coded against the reference (a -r of
 * another kind of file, or of unrelated bytes), the frame is no smaller
 * than a keyframe and still needs the reference to decode, which the user
 * should know. (Its header, written first, says delta before the chunks
 * decide.) */
static void ref_unused_warning(const char* in_name)
{
    lmc_frame_stats st;
    if (g_opt.quiet || lmc_is_error(lmc_cctx_last_stats(g_cctx, &st))) return;
    if (st.header.has_ref && st.content_size && !st.pieces_xor && !st.pieces_refmodel)
        fprintf(stderr, "%s: warning: %s: no part of it was coded against the reference %s, yet decoding needs "
                "it: compressed without -r, it would not\n", g_prog, in_name, g_opt.ref_name);
}

/* After give_cctx_ref put a placeholder: the reference's hash into the
 * header of the frame in `fd`, and the header's checksum (format.md: H32
 * of its first 36 bytes). 0, or -1 after a message. */
static int patch_ref_hash(const char* out_name, int fd)
{
    unsigned char h[LMC_FRAME_HEADER_SIZE];
    lmc_frame_header fh;
    if (!g_cdefer) return 0;
    g_cdefer = 0;
    if (ref_hash_wait() != 0) return -1;
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h || lmc_is_error(lmc_get_frame_header(&fh, h, sizeof h))
        || !fh.has_ref || fh.ref_hash != 0) {
        errmsg("%s: internal error: cannot read back the frame header", out_name);
        return -1;
    }
    wr_le(h + 28, g_ref_hash, 8);
    wr_le(h + 36, (uint32_t)lmc_hash64(h, 36), 4);
    if (pwrite(fd, h + 28, 12, 28) != 12) {
        errmsg("%s: write error: %s", out_name, strerror(errno));
        return -1;
    }
    return 0;
}

/*-************************************************************
 * One file: compress, decompress or test
 **************************************************************/
static int has_suffix(const char* name)
{
    size_t n = strlen(name);
    return n > SUFFIX_LEN && strcmp(name + n - SUFFIX_LEN, SUFFIX) == 0;
}

static void print_summary(const char* name, uint64_t in, uint64_t out, double secs, int decomp)
{
    uint64_t orig = decomp ? out : in, comp = decomp ? in : out;
    double mbs = secs > 0 ? (double)orig / 1e6 / secs : 0.0;
    if (orig)
        fprintf(stderr, "%s: %llu -> %llu bytes (ratio %.3f), %.1f MB/s\n", name,
                (unsigned long long)in, (unsigned long long)out, (double)comp / (double)orig, mbs);
    else
        fprintf(stderr, "%s: %llu -> %llu bytes (ratio -), %.1f MB/s\n", name,
                (unsigned long long)in, (unsigned long long)out, mbs);
}

/* With --rm: decodes the finished output `fd` (frame_size bytes) with the same
 * reference and checks it gives back content_size bytes with content_hash. */
static int verify_output(const char* out_name, int fd, uint64_t frame_size,
                         uint64_t content_size, uint64_t content_hash)
{
    unsigned char foot[32];
    job_t v;
    progress_t quiet_prog;
    if (frame_size < 32 || pread(fd, foot, 32, (off_t)(frame_size - 32)) != 32) {
        errmsg("%s: verification failed: cannot read the frame footer", out_name);
        return -1;
    }
    if (rd64le(foot + 8) != content_size || rd64le(foot + 16) != content_hash) {
        errmsg("%s: verification failed: frame footer does not match the input", out_name);
        return -1;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        errmsg("%s: verification failed: cannot seek: %s", out_name, strerror(errno));
        return -1;
    }
    if (setup_dctx() != 0) return -1;
    lmc_dctx_reset(g_dctx);
    memset(&quiet_prog, 0, sizeof quiet_prog);
    memset(&v, 0, sizeof v);
    v.in_name = out_name; v.out_name = NULL;
    v.infd = fd; v.outfd = -1; v.prog = &quiet_prog;
    if (run_decompress(&v) != 0) {
        lmc_dctx_reset(g_dctx);
        errmsg("%s: verification failed: the output does not decode; input kept", out_name);
        return -1;
    }
    if (v.out_bytes != content_size) {
        errmsg("%s: verification failed: decoded %llu bytes instead of %llu", out_name,
               (unsigned long long)v.out_bytes, (unsigned long long)content_size);
        return -1;
    }
    return 0;
}

/* Whether to compress a regular file by reading it rather than coding
 * straight from a mapping of it: from 8 MiB with a core to spare (a window
 * ahead on the reader thread, run_compress_ahead), from 32 MiB with a
 * coding thread on every core (in place), in windows of at most 8 MiB. A
 * mapped page costs its first touch: about 1 us on the Xeon VM of earlier
 * sessions, 1.2-2.5 us on the AMD EPYC (PVM) VM of 2026-12-02 evening,
 * where read() copies a page out of the page cache for less. There (tmpfs
 * unless said, medians of 7-15 alternated whole-process runs, mapped ->
 * read; -T1 read ahead, -T2 in place): 213 MB raw bf16 keyframe -T1
 * 336 -> 259 ms, -T2 359 -> 209; its delta 422 -> 363 and 370 -> 325;
 * 53 MB keyframe 83 -> 68 and 86 -> 70 (ext4: 87 -> 74 and 88 -> 80); its
 * delta 130 -> 125 and 124 -> 123 (the mapped reference's first touches
 * stay); 27 MB optimizer delta -T1 71 -> 66, -T2 75 -> 77; 13 MB fp32
 * delta -T1 48 -> 45, -T2 55 -> 57; 6.6 MB bf16 delta -T1 35 -> 37: a
 * small file's first window is read while nothing codes. At -T2 reading
 * ahead gave the same as in place. The Xeon VM measured reading in place
 * slower at -T1 (200 MB delta 454 -> 494 ms) and faster at -T2 on tmpfs
 * (383 -> 337). Decompression reads little input and keeps its mapping
 * (reading the frame ahead, EPYC VM: 213 MB delta -T1 267 -> 324 ms, 53 MB
 * delta -T2 97 -> 118). */
#define READ_INSTEAD_MIN ((uint64_t)8 << 20)
#define READ_INSTEAD_MIN_ALL_CORES ((uint64_t)32 << 20)
/* Whether a regular file to compress, read from its start, is a zip to be
 * coded as a torch.save archive (--format=auto or torch): mapped, however
 * large, where read windows would make the library stage the whole file
 * (a 231 MB archive peaked at 463 MiB against a reference, 2026-12-05). */
static int input_is_zip(int fd)
{
    if (g_opt.format != LMC_FORMAT_AUTO && g_opt.format != LMC_FORMAT_TORCH_ZIP) return 0;
    return lseek(fd, 0, SEEK_CUR) == 0 && fd_starts_zip(fd);
}

static int read_input_instead(int decomp, uint64_t size)
{
    /* reading holds a whole window (a batch of chunks: threads + 2 of them)
     * where a mapping keeps what one library call codes (8 MiB above 4
     * threads): -T16 on the 8 GiB memory benchmark peaked at 95 MiB reading
     * 18 MiB windows against the bound's 96, 81 mapped */
    if (decomp || g_in_size > READ_BUF_MAX) return 0;
    return size >= (g_opt.threads < online_cores() ? READ_INSTEAD_MIN : READ_INSTEAD_MIN_ALL_CORES);
}

static int process_file(const char* name)
{
    const int mode = g_opt.mode;
    const int decomp = (mode != MODE_COMPRESS);
    const int in_stdin = strcmp(name, "-") == 0;
    const char* in_disp = in_stdin ? "stdin" : name;
    char* out_path = NULL;
    const char* out_disp = NULL;
    int infd = -1, outfd = -1, use_tmp = 0, out_stdout = 0;
    int ret = -1;
    struct stat ist;
    job_t j;
    progress_t prog;
    double t0, secs;

    memset(&j, 0, sizeof j);
    memset(&prog, 0, sizeof prog);

    /* input */
    if (in_stdin) {
        infd = 0;
        if (decomp && isatty(0) && !g_opt.force) {
            errmsg("stdin is a terminal: refusing to read compressed data from it (use -f to force)");
            return -1;
        }
    } else {
        infd = open(name, O_RDONLY | O_CLOEXEC);
        if (infd < 0) { errmsg("%s: %s", name, strerror(errno)); return -1; }
    }
    if (fstat(infd, &ist) != 0) { errmsg("%s: cannot stat: %s", in_disp, strerror(errno)); goto out; }
    if (S_ISDIR(ist.st_mode)) { errmsg("%s: is a directory", in_disp); goto out; }
    if (in_stdin && S_ISREG(ist.st_mode)) {
        /* a file given as stdin may be read from past its start
         * ((head -c N >/dev/null; lmc) < FILE): its size is what is left */
        off_t const at = lseek(infd, 0, SEEK_CUR);
        if (at > 0) ist.st_size = at < ist.st_size ? ist.st_size - at : 0;
    }

    /* output */
    if (mode == MODE_TEST) {
        out_disp = NULL;
    } else if (g_opt.out_name && strcmp(g_opt.out_name, "-") != 0) {
        out_path = strdup(g_opt.out_name);
    } else if (g_opt.to_stdout || g_opt.out_name || in_stdin) {
        out_stdout = 1;
    } else if (mode == MODE_COMPRESS) {
        if (has_suffix(name)) {
            errmsg("%s: already has the %s suffix -- ignored (use -o or -c to compress it anyway)", name, SUFFIX);
            goto out;
        }
        out_path = (char*)malloc(strlen(name) + SUFFIX_LEN + 1);
        if (out_path) { strcpy(out_path, name); strcat(out_path, SUFFIX); }
    } else {
        size_t n = strlen(name);
        if (!has_suffix(name)) {
            errmsg("%s: unknown suffix: expected a name ending in %s (use -o FILE or -c to choose the output)",
                   name, SUFFIX);
            goto out;
        }
        out_path = strndup(name, n - SUFFIX_LEN);
    }
    if (!out_stdout && mode != MODE_TEST && !out_path) { errmsg("out of memory"); goto out; }

    if (out_stdout) {
        out_disp = "stdout";
        if (mode == MODE_COMPRESS && isatty(1) && !g_opt.force) {
            errmsg("%s: stdout is a terminal: refusing to write compressed data to it (use -f to force)", in_disp);
            goto out;
        }
        outfd = 1;
    } else if (out_path) {
        struct stat ost;
        out_disp = out_path;
        if (stat(out_path, &ost) == 0) {
            if (ost.st_dev == ist.st_dev && ost.st_ino == ist.st_ino) {
                errmsg("%s: input and output are the same file", in_disp);
                goto out;
            }
            if (S_ISDIR(ost.st_mode)) { errmsg("%s: output is a directory", out_path); goto out; }
            if (S_ISREG(ost.st_mode)) {
                if (!g_opt.force) {
                    errmsg("%s: already exists; not overwritten (use -f to overwrite)", out_path);
                    goto out;
                }
                use_tmp = 1;
            } else {
                /* device or fifo (/dev/null, ...): write to it directly */
                outfd = open(out_path, O_WRONLY | O_CLOEXEC);
                if (outfd < 0) { errmsg("%s: %s", out_path, strerror(errno)); goto out; }
            }
        } else if (errno == ENOENT) {
            use_tmp = 1;
        } else {
            errmsg("%s: %s", out_path, strerror(errno));
            goto out;
        }
        if (use_tmp) {
            outfd = tmp_create(out_path);
            if (outfd < 0) {
                errmsg("%s: cannot create output: %s", out_path, strerror(errno));
                goto out;
            }
            if (fchmod(outfd, in_stdin ? (0666 & ~g_umask) : (ist.st_mode & 07777 & ~(mode_t)06000)) != 0) {
                errmsg("%s: cannot set permissions: %s", out_path, strerror(errno));
                goto out;
            }
        }
    }

    /* coding */
    if (decomp ? setup_dctx() : setup_cctx()) goto out;
    if (setup_buffers() != 0) goto out;
    progress_init(&prog, in_disp, (uint64_t)ist.st_size, S_ISREG(ist.st_mode));
    j.in_name = in_disp;
    j.out_name = out_disp;
    j.infd = infd;
    j.outfd = (mode == MODE_TEST) ? -1 : outfd;
    j.prog = &prog;
    j.regular = !in_stdin && S_ISREG(ist.st_mode);
    /* a zip is mapped from stdin too, when that is a regular file read from its start */
    if (S_ISREG(ist.st_mode) && ist.st_size > 0 && (uint64_t)ist.st_size <= (uint64_t)SIZE_MAX
        && ((!in_stdin && !read_input_instead(decomp, (uint64_t)ist.st_size))
            || (!decomp && input_is_zip(infd)))) {
        /* a failed map is not an error: read() still works */
        void* m = mmap(NULL, (size_t)ist.st_size, PROT_READ, MAP_PRIVATE, infd, 0);
        if (m != MAP_FAILED) {
            madvise(m, (size_t)ist.st_size, MADV_SEQUENTIAL);
            j.map = (const unsigned char*)m;
            j.map_size = (size_t)ist.st_size;
        }
    }
    t0 = now_sec();
    if (decomp) {
        lmc_dctx_reset(g_dctx);
        if (give_dctx_ref(&j, use_tmp || mode == MODE_TEST) != 0) goto out;
        if (run_decompress(&j) != 0 || writer_wait(&j) != 0) {
            g_defer_active = 0;
            lmc_dctx_reset(g_dctx); progress_clear(&prog); goto out;
        }
        if (ref_deferred_check(in_disp) != 0) { progress_clear(&prog); goto out; }
    } else {
        size_t r;
        lmc_cctx_reset(g_cctx);
        r = lmc_cctx_set_param(g_cctx, LMC_P_CONTENT_SIZE,
                               S_ISREG(ist.st_mode) ? (long long)ist.st_size : -1LL);
        if (lmc_is_error(r)) { lib_error(in_disp, r); goto out; }
        if (ref_useless(&j)) {
            g_cdefer = 0;
            r = lmc_cctx_set_ref(g_cctx, NULL, 0);
            if (lmc_is_error(r)) { lib_error(in_disp, r); goto out; }
        } else if (give_cctx_ref(use_tmp) != 0) goto out;
        if (run_compress(&j) != 0 || writer_wait(&j) != 0) {
            g_cdefer = 0;
            lmc_cctx_reset(g_cctx); progress_clear(&prog); goto out;
        }
        if (use_tmp && patch_ref_hash(out_disp, outfd) != 0) { progress_clear(&prog); goto out; }
    }
    secs = now_sec() - t0;
    progress_clear(&prog);
    if (!decomp && mode != MODE_TEST) ref_unused_warning(in_disp);

    /* finish the output */
    if (use_tmp) {
        struct timespec ts[2];
        int do_rm = g_opt.rm && !in_stdin;
        if (do_rm && !decomp) {
            lmc_frame_stats st;
            size_t r = lmc_cctx_last_stats(g_cctx, &st);
            if (lmc_is_error(r)) { lib_error(in_disp, r); goto out; }
            if (verify_output(out_path, outfd, j.out_bytes, j.in_bytes, st.content_hash) != 0) goto out;
        }
        if (do_rm && fsync(outfd) != 0) {
            errmsg("%s: write error: %s", out_path, strerror(errno));
            goto out;
        }
        if (!in_stdin) {
            ts[0] = ist.st_atim;
            ts[1] = ist.st_mtim;
            (void)futimens(outfd, ts);  /* best effort, like zstd */
        }
        if (close(outfd) != 0) {
            outfd = -1;
            errmsg("%s: write error: %s", out_path, strerror(errno));
            goto out;
        }
        outfd = -1;
        if (tmp_commit(out_path, g_opt.force) != 0) {
            if (errno == EEXIST)
                errmsg("%s: already exists; not overwritten (use -f to overwrite)", out_path);
            else
                errmsg("%s: cannot rename the temporary file into place: %s", out_path, strerror(errno));
            goto out;
        }
    } else if (outfd > 1) {
        if (close(outfd) != 0) {
            outfd = -1;
            errmsg("%s: write error: %s", out_path, strerror(errno));
            goto out;
        }
        outfd = -1;
    }

    /* --rm: only once a regular output file is complete (never with -c, -t or a device) */
    if (g_opt.rm && !in_stdin && use_tmp) {
        if (unlink(name) != 0) {
            errmsg("%s: cannot remove input: %s", name, strerror(errno));
            goto out;
        }
    }

    if (mode == MODE_TEST) {
        if (!g_opt.quiet) {
            if (g_opt.verbose)
                fprintf(stderr, "%s: OK (%llu -> %llu bytes)\n", in_disp,
                        (unsigned long long)j.in_bytes, (unsigned long long)j.out_bytes);
            else
                fprintf(stderr, "%s: OK\n", in_disp);
        }
    } else if (g_opt.verbose || (!g_opt.quiet && isatty(2))) {
        print_summary(in_disp, j.in_bytes, j.out_bytes, secs, decomp);
    }
    ret = 0;

out:
    writer_wait(NULL);   /* nothing may still be writing to outfd */
    prefetch_forget(PREFETCH_INPUT);
    if (j.map) munmap((void*)j.map, j.map_size);
    if (use_tmp) {
        if (outfd >= 0) close(outfd);
        tmp_discard();
    } else if (outfd > 1) {
        close(outfd);
    }
    if (infd > 0) close(infd);
    free(out_path);
    return ret;
}

/*-************************************************************
 * List
 **************************************************************/
static const char* human(uint64_t v, char* buf, size_t n)
{
    if (v >= 10000000000ULL) snprintf(buf, n, "%.1f GB", (double)v / 1e9);
    else if (v >= 10000000ULL) snprintf(buf, n, "%.1f MB", (double)v / 1e6);
    else if (v >= 10000ULL) snprintf(buf, n, "%.1f kB", (double)v / 1e3);
    else snprintf(buf, n, "%llu B", (unsigned long long)v);
    return buf;
}

static void print_ratio(uint64_t comp, uint64_t orig)
{
    if (orig) printf("%.4f", (double)comp / (double)orig);
    else printf("-");
}

static int list_file(const char* name)
{
    int fd;
    struct stat st;
    const void* map = NULL;
    size_t size, r;
    lmc_frame_stats s;
    char h1[32], h2[32];
    unsigned i;
    int all = g_opt.verbose > 0;

    if (strcmp(name, "-") == 0) { errmsg("-l needs file names: cannot list stdin"); return -1; }
    fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { errmsg("%s: %s", name, strerror(errno)); return -1; }
    if (fstat(fd, &st) != 0) { errmsg("%s: cannot stat: %s", name, strerror(errno)); close(fd); return -1; }
    if (!S_ISREG(st.st_mode)) { errmsg("%s: not a regular file", name); close(fd); return -1; }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) { errmsg("%s: file too large", name); close(fd); return -1; }
    size = (size_t)st.st_size;
    if (size == 0) {
        map = g_empty;
    } else {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            errmsg("%s: cannot map: %s", name, strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    memset(&s, 0, sizeof s);
    r = lmc_frame_stats_get(&s, map, size);
    if (size) munmap((void*)map, size);
    if (lmc_is_error(r)) { lib_error(name, r); return -1; }

    if (g_listed++) printf("\n");
    printf("%s\n", name);
    printf("  compressed    %15llu bytes  (%s)\n", (unsigned long long)s.frame_size, human(s.frame_size, h1, sizeof h1));
    printf("  original      %15llu bytes  (%s)\n", (unsigned long long)s.content_size, human(s.content_size, h2, sizeof h2));
    printf("  ratio         ");
    print_ratio(s.frame_size, s.content_size);
    printf("  (compressed/original)\n");
    printf("  format        version %u, container %s", s.header.version, lmc_format_name(s.header.container));
    if (s.header.container == LMC_FORMAT_RAW) printf(", dtype %s", lmc_dtype_name(s.header.dtype));
    printf("\n");
    printf("  chunks        %llu, %.0f KiB on average, at most %llu KiB (chunk_log %u)\n", (unsigned long long)s.chunks,
           s.chunks ? (double)s.content_size / 1024.0 / (double)s.chunks : 0.0,
           (unsigned long long)(1ULL << s.header.chunk_log) >> 10, s.header.chunk_log);
    printf("  pieces        %llu: %llu xor (delta), %llu reference-modelled, %llu sign-rotated, %llu byte-grouped\n",
           (unsigned long long)s.pieces, (unsigned long long)s.pieces_xor, (unsigned long long)s.pieces_refmodel,
           (unsigned long long)s.pieces_rotated,
           (unsigned long long)(s.pieces - s.pieces_rotated - s.pieces_refmodel));
    if (s.header.has_ref)
        printf("  reference     %llu bytes, hash %016llx (delta frame: needs -r)\n",
               (unsigned long long)s.header.ref_size, (unsigned long long)s.header.ref_hash);
    else
        printf("  reference     none (not a delta)\n");
    if (all) {
        printf("  content hash  %016llx\n", (unsigned long long)s.content_hash);
        printf("  size in header %s\n", s.header.content_size_known ? "yes" : "no (streamed)");
    }

    printf("  %-10s %15s %15s %8s\n", "dtype", "bytes in", "bytes out", "ratio");
    for (i = 0; i < LMC_DTYPE_COUNT; i++) {
        if (s.dtype_in[i] == 0 && s.dtype_out[i] == 0) continue;
        printf("  %-10s %15llu %15llu ", lmc_dtype_name((lmc_dtype)i),
               (unsigned long long)s.dtype_in[i], (unsigned long long)s.dtype_out[i]);
        if (s.dtype_in[i]) printf("%8.4f\n", (double)s.dtype_out[i] / (double)s.dtype_in[i]);
        else printf("%8s\n", "-");
    }
    if ((s.header.container == LMC_FORMAT_GENERIC || (s.header.container == LMC_FORMAT_RAW && s.header.dtype == LMC_DTYPE_BYTES))
        && s.dtype_in[LMC_DTYPE_BYTES] < s.content_size)
        printf("  (runs of floats found in bytes of unknown layout; bf16 stands for any 16-bit float)\n");
    printf("  %-10s %12s %15s %15s %8s\n", "coder", "blocks", "bytes in", "bytes out", "ratio");
    for (i = 0; i < LMC_CODER_COUNT; i++) {
        if (!(all && i <= LMC_CODER_RLE_HUF) && s.blocks[i] == 0) continue;
        printf("  %-10s %12llu %15llu %15llu ", lmc_coder_name(i), (unsigned long long)s.blocks[i],
               (unsigned long long)s.block_in[i], (unsigned long long)s.block_out[i]);
        if (s.block_in[i]) printf("%8.4f\n", (double)s.block_out[i] / (double)s.block_in[i]);
        else printf("%8s\n", "-");
    }
    if (fflush(stdout) != 0 || ferror(stdout)) { errmsg("stdout: write error: %s", strerror(errno)); return -1; }
    return 0;
}

/*-************************************************************
 * Benchmark
 **************************************************************/
static int load_file(const char* name, unsigned char** buf, size_t* size)
{
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    size_t cap, len = 0;
    unsigned char* p;
    if (fd < 0) { errmsg("%s: %s", name, strerror(errno)); return -1; }
    if (fstat(fd, &st) != 0) { errmsg("%s: cannot stat: %s", name, strerror(errno)); close(fd); return -1; }
    if (S_ISDIR(st.st_mode)) { errmsg("%s: is a directory", name); close(fd); return -1; }
    cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : ((size_t)1 << 20);
    p = (unsigned char*)malloc(cap);
    if (!p) { errmsg("%s: out of memory", name); close(fd); return -1; }
    for (;;) {
        ssize_t r;
        if (len == cap) {
            unsigned char* q = (unsigned char*)realloc(p, cap * 2);
            if (!q) { errmsg("%s: out of memory", name); free(p); close(fd); return -1; }
            p = q;
            cap *= 2;
        }
        r = read(fd, p + len, cap - len);
        if (r < 0) {
            if (errno == EINTR) continue;
            errmsg("%s: read error: %s", name, strerror(errno));
            free(p);
            close(fd);
            return -1;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    *buf = p;
    *size = len;
    return 0;
}

static int cmp_double(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (n & 1) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Several thread counts (-T 1,2) run side by side: each iteration compresses
 * with every count, then decompresses with every count, so that the counts
 * share the machine's slow and fast moments (on a shared box its speed can
 * move by half between two runs a minute apart). Every count must give the
 * same bytes, and every decompression the original. */
static int bench_file(const char* name)
{
    unsigned char *src = NULL, *comp = NULL, *comp2 = NULL, *dec = NULL;
    size_t srcSize, cap, csize = 0, r;
    int const nt = g_opt.nbench_threads > 0 ? g_opt.nbench_threads : 1;
    int threads[8];
    lmc_cctx* cc[8] = { NULL };
    lmc_dctx* dc[8] = { NULL };
    double *tc = NULL, *td = NULL, mc[8], md[8];
    int i, k, n = g_opt.iters, ret = -1;

    if (strcmp(name, "-") == 0) { errmsg("-b needs file names"); return -1; }
    if (load_file(name, &src, &srcSize) != 0) return -1;
    for (k = 0; k < nt; k++) {
        threads[k] = g_opt.nbench_threads > 0 ? g_opt.bench_threads[k] : g_opt.threads;
        if (!(cc[k] = make_cctx(threads[k])) || !(dc[k] = make_dctx(threads[k]))) goto out;
        r = lmc_cctx_set_param(cc[k], LMC_P_CONTENT_SIZE, -1);
        if (lmc_is_error(r)) { lib_error(name, r); goto out; }
    }
    cap = lmc_compress_bound(srcSize);
    comp = (unsigned char*)malloc(cap ? cap : 1);
    comp2 = nt > 1 ? (unsigned char*)malloc(cap ? cap : 1) : NULL;
    dec = (unsigned char*)malloc(srcSize ? srcSize : 1);
    tc = (double*)malloc(sizeof(double) * (size_t)n * (size_t)nt);
    td = (double*)malloc(sizeof(double) * (size_t)n * (size_t)nt);
    if (!comp || (nt > 1 && !comp2) || !dec || !tc || !td) { errmsg("%s: out of memory", name); goto out; }
    for (i = 0; i < n; i++) {
        for (k = 0; k < nt; k++) {
            unsigned char* const o = k ? comp2 : comp;
            double t0 = now_sec();
            r = lmc_compress(cc[k], o, cap, src, srcSize);
            tc[k * n + i] = now_sec() - t0;
            if (lmc_is_error(r)) { lib_error(name, r); goto out; }
            if ((i || k) && r != csize) { errmsg("%s: compressed size changed between runs", name); goto out; }
            if (k && memcmp(comp2, comp, csize) != 0) {
                errmsg("%s: %d and %d threads gave different compressed bytes", name, threads[0], threads[k]);
                goto out;
            }
            csize = r;
        }
        for (k = 0; k < nt; k++) {
            double t0 = now_sec();
            r = lmc_decompress(dc[k], dec, srcSize, comp, csize);
            td[k * n + i] = now_sec() - t0;
            if (lmc_is_error(r)) { lib_error(name, r); goto out; }
            if (r != srcSize || memcmp(dec, src, srcSize) != 0) {
                errmsg("%s: round trip FAILED: decompressed data differs from the original", name);
                goto out;
            }
            if (i + 1 < n || k + 1 < nt) memset(dec, 0, srcSize);   /* the next run must write it all again */
        }
    }
    for (k = 0; k < nt; k++) {
        mc[k] = median(tc + k * n, n);
        md[k] = median(td + k * n, n);
        printf("%s: %zu -> %zu (ratio %.4f), compress %.1f MB/s, decompress %.1f MB/s (median of %d, %d threads)\n",
               name, srcSize, csize, srcSize ? (double)csize / (double)srcSize : 0.0,
               mc[k] > 0 ? (double)srcSize / 1e6 / mc[k] : 0.0, md[k] > 0 ? (double)srcSize / 1e6 / md[k] : 0.0,
               n, threads[k]);
    }
    for (k = 1; k < nt; k++)
        printf("%s: %d threads against %d: compress %.2fx, decompress %.2fx (medians of alternated runs)\n",
               name, threads[k], threads[0], mc[k] > 0 ? mc[0] / mc[k] : 0.0, md[k] > 0 ? md[0] / md[k] : 0.0);
    if (fflush(stdout) != 0) { errmsg("stdout: write error: %s", strerror(errno)); goto out; }
    ret = 0;
out:
    for (k = 0; k < nt; k++) { lmc_cctx_free(cc[k]); lmc_dctx_free(dc[k]); }
    free(src); free(comp); free(comp2); free(dec); free(tc); free(td);
    return ret;
}

/*-************************************************************
 * Directory inputs (sharded checkpoints): programs/dir_cmd.c walks, this codes
 **************************************************************/
/* Makes `ref` (NULL: none) the reference of the next file. */
static int use_ref(const char* ref)
{
    unload_ref();
    lmc_cctx_free(g_cctx); g_cctx = NULL;
    lmc_dctx_free(g_dctx); g_dctx = NULL;
    g_opt.ref_name = ref;
    return load_ref();
}

static int dir_file(void* arg, const char* in, const char* out, const char* ref, const char* missing_ref)
{
    const char* saved_out = g_opt.out_name;
    int r;
    (void)arg;
    if (g_opt.mode != MODE_LIST && use_ref(ref) != 0) return -1;
    g_missing_ref = missing_ref;
    g_opt.out_name = out;
    r = g_opt.mode == MODE_LIST ? list_file(in) : process_file(in);
    g_opt.out_name = saved_out;
    g_missing_ref = NULL;
    return r;
}

static int dir_input(const char* dir)
{
    lmc_dir_job job;
    int r;
    if (g_opt.to_stdout || (g_opt.out_name && !strcmp(g_opt.out_name, "-"))) {
        errmsg("%s: is a directory: cannot write it to stdout (use -o OUTDIR)", dir);
        return -1;
    }
    if (g_opt.ref_name) {
        errmsg("%s: is a directory: its reference must be a directory too (-r REFDIR), not %s",
               dir, g_opt.ref_name);
        return -1;
    }
    memset(&job, 0, sizeof job);
    job.mode = g_opt.mode == MODE_COMPRESS ? LMC_DIR_COMPRESS : g_opt.mode == MODE_DECOMPRESS ? LMC_DIR_DECOMPRESS
             : g_opt.mode == MODE_TEST ? LMC_DIR_TEST : LMC_DIR_LIST;
    job.refdir = g_refdir;
    job.outdir = g_opt.out_name;
    job.force = g_opt.force;
    job.verbose = g_opt.verbose;
    job.quiet = g_opt.quiet;
    job.file = dir_file;
    r = lmc_dir_run(dir, &job);
    (void)use_ref(NULL);
    return r;
}

/*-************************************************************
 * Command line
 **************************************************************/
static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > LMC_THREADS_MAX ? LMC_THREADS_MAX : n) : 1;
}

/* N, or for -b a list N,M,... (at most 8) run side by side */
static void set_threads(const char* v)
{
    char buf[128];
    char* save = NULL;
    int n = 0;
    if (!v || strlen(v) >= sizeof buf) usage_error("invalid thread count '%s'", v ? v : "");
    strcpy(buf, v);
    for (char* t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long x;
        if (parse_int(t, &x) != 0) usage_error("invalid thread count '%s'", v);
        if (x < 0 || x > LMC_THREADS_MAX)
            usage_error("thread count %s out of range: 0 (every core) or 1 to %d", t, LMC_THREADS_MAX);
        if (n == 8) usage_error("at most 8 thread counts in '%s'", v);
        g_opt.bench_threads[n++] = x == 0 ? online_cores() : (int)x;
    }
    if (n == 0 || v[strlen(v) - 1] == ',' || v[0] == ',' || strstr(v, ",,")) usage_error("invalid thread count '%s'", v);
    g_opt.threads = g_opt.bench_threads[0];
    g_opt.nbench_threads = n > 1 ? n : 0;
}

static void set_iters(const char* v)
{
    long t;
    if (parse_int(v, &t) != 0 || t < 1) usage_error("invalid iteration count '%s'", v ? v : "");
    g_opt.iters = (int)t;
}

static void set_format(const char* v)
{
    if (!strcmp(v, "auto")) g_opt.format = LMC_FORMAT_AUTO;
    else if (!strcmp(v, "safetensors")) g_opt.format = LMC_FORMAT_SAFETENSORS;
    else if (!strcmp(v, "raw")) g_opt.format = LMC_FORMAT_RAW;
    else if (!strcmp(v, "generic")) g_opt.format = LMC_FORMAT_GENERIC;
    else if (!strcmp(v, "torch") || !strcmp(v, "torch-zip")) g_opt.format = LMC_FORMAT_TORCH_ZIP;
    else usage_error("unknown format '%s' (auto, safetensors, torch, raw, generic)", v);
    g_opt.format_set = 1;
}

static void set_dtype(const char* v)
{
    int d = lmc_dtype_from_name(v);
    if (d < 0) usage_error("unknown dtype '%s'", v);
    g_opt.dtype = d;
    g_opt.dtype_set = 1;
}

static void set_mode(int m)
{
    if (g_opt.mode != MODE_COMPRESS && g_opt.mode != m)
        usage_error("options -t, -l and -b cannot be combined");
    g_opt.mode = m;
}

/* Long option with a value: "--name=value" or "--name value". */
static const char* long_value(const char* arg, const char* name, int argc, char** argv, int* i, int* matched)
{
    size_t n = strlen(name);
    *matched = 0;
    if (strncmp(arg, name, n) != 0) return NULL;
    if (arg[n] == '=') { *matched = 1; return arg + n + 1; }
    if (arg[n] != 0) return NULL;
    *matched = 1;
    if (*i + 1 >= argc) usage_error("option '%s' needs a value", name);
    return argv[++*i];
}

int main(int argc, char** argv)
{
    const char** files;
    int nfiles = 0, i, failed = 0, opts_done = 0;

    if (argc > 1 && strcmp(argv[1], "store") == 0) return lmc_cmd_store(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "analyze") == 0) return lmc_cmd_analyze(argc - 1, argv + 1);
    memset(&g_opt, 0, sizeof g_opt);
    g_opt.progress = -1;
    g_opt.iters = 5;
    g_opt.threads = online_cores();
    g_umask = umask(0);
    umask(g_umask);

    files = (const char**)calloc((size_t)argc + 1, sizeof *files);
    if (!files) { errmsg("out of memory"); return 1; }

    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (opts_done || a[0] != '-' || a[1] == 0) { files[nfiles++] = a; continue; }
        if (a[1] == '-') {
            const char* v;
            int m;
            if (a[2] == 0) { opts_done = 1; continue; }
            if (!strcmp(a, "--decompress") || !strcmp(a, "--uncompress")) g_opt.decompress_flag = 1;
            else if (!strcmp(a, "--stdout")) g_opt.to_stdout = 1;
            else if (!strcmp(a, "--keep")) g_opt.rm = 0;
            else if (!strcmp(a, "--rm")) g_opt.rm = 1;
            else if (!strcmp(a, "--force")) g_opt.force = 1;
            else if (!strcmp(a, "--test")) set_mode(MODE_TEST);
            else if (!strcmp(a, "--list")) set_mode(MODE_LIST);
            else if (!strcmp(a, "--bench")) set_mode(MODE_BENCH);
            else if (!strcmp(a, "--no-refctx")) g_opt.no_refctx = 1;
            else if (!strcmp(a, "--verbose")) { g_opt.verbose++; g_opt.quiet = 0; }
            else if (!strcmp(a, "--quiet")) { g_opt.quiet = 1; g_opt.verbose = 0; }
            else if (!strcmp(a, "--progress")) g_opt.progress = 1;
            else if (!strcmp(a, "--no-progress")) g_opt.progress = 0;
            else if (!strcmp(a, "--help")) { usage(stdout); free(files); return 0; }
            else if (!strcmp(a, "--version")) {
                printf("lmc %s (format %d)\n", lmc_version_string(), LMC_FORMAT_VERSION);
                free(files);
                return 0;
            }
            else if ((v = long_value(a, "--threads", argc, argv, &i, &m)), m) set_threads(v);
            else if ((v = long_value(a, "--ref", argc, argv, &i, &m)), m) g_opt.ref_name = v;
            else if ((v = long_value(a, "--output", argc, argv, &i, &m)), m) g_opt.out_name = v;
            else if ((v = long_value(a, "--format", argc, argv, &i, &m)), m) set_format(v);
            else if ((v = long_value(a, "--dtype", argc, argv, &i, &m)), m) set_dtype(v);
            else if ((v = long_value(a, "--iterations", argc, argv, &i, &m)), m) set_iters(v);
            else usage_error("unknown option '%s'", a);
            continue;
        }
        /* cluster of short options */
        {
            const char* p = a + 1;
            while (*p) {
                char c = *p++;
                const char* v = NULL;
                if (c == 'o' || c == 'r' || c == 'T' || c == 'i') {
                    if (*p) { v = p; p += strlen(p); }
                    else if (i + 1 < argc) v = argv[++i];
                    else usage_error("option '-%c' needs a value", c);
                }
                switch (c) {
                case 'd': g_opt.decompress_flag = 1; break;
                case 'c': g_opt.to_stdout = 1; break;
                case 'k': g_opt.rm = 0; break;
                case 'f': g_opt.force = 1; break;
                case 't': set_mode(MODE_TEST); break;
                case 'l': set_mode(MODE_LIST); break;
                case 'b': set_mode(MODE_BENCH); break;
                case 'v': g_opt.verbose++; g_opt.quiet = 0; break;
                case 'q': g_opt.quiet = 1; g_opt.verbose = 0; break;
                case 'h': usage(stdout); free(files); return 0;
                case 'V': printf("lmc %s (format %d)\n", lmc_version_string(), LMC_FORMAT_VERSION); free(files); return 0;
                case 'o': g_opt.out_name = v; break;
                case 'r': g_opt.ref_name = v; break;
                case 'T': set_threads(v); break;
                case 'i': set_iters(v); break;
                default: usage_error("unknown option '-%c'", c);
                }
            }
        }
    }
    if (g_opt.decompress_flag && g_opt.mode == MODE_COMPRESS) g_opt.mode = MODE_DECOMPRESS;
    if (g_opt.dtype_set && !g_opt.format_set) g_opt.format = LMC_FORMAT_RAW;
    if (g_opt.nbench_threads && g_opt.mode != MODE_BENCH) usage_error("a list of thread counts (-T 1,2) is only for -b");
    if (nfiles == 0) files[nfiles++] = "-";
    if (g_opt.out_name && nfiles > 1 && (g_opt.mode == MODE_COMPRESS || g_opt.mode == MODE_DECOMPRESS))
        usage_error("-o can be used with only one input file");
    if (g_opt.mode == MODE_COMPRESS && nfiles > 1 && (g_opt.to_stdout || (g_opt.out_name && !strcmp(g_opt.out_name, "-"))))
        usage_error("-c with several inputs would concatenate frames, which lmc cannot decode");

    install_signals();
    if (g_opt.mode == MODE_COMPRESS || g_opt.mode == MODE_DECOMPRESS || g_opt.mode == MODE_TEST)
        cpuplace_setup(g_opt.threads);
    if (g_opt.mode != MODE_BENCH && lmc_dir_is_dir(g_opt.ref_name)) {  /* -r REFDIR */
        g_refdir = g_opt.ref_name;
        g_opt.ref_name = NULL;
    }
    if (load_ref() != 0) { free(files); return 1; }

    for (i = 0; i < nfiles; i++) {
        int r;
        if (g_opt.mode != MODE_BENCH && lmc_dir_is_dir(files[i])) {
            if (dir_input(files[i]) != 0) failed = 1;
            continue;
        }
        if (g_refdir) {
            errmsg("%s: -r %s is a directory: a reference directory needs a directory input", files[i], g_refdir);
            failed = 1;
            continue;
        }
        switch (g_opt.mode) {
        case MODE_LIST: r = list_file(files[i]); break;
        case MODE_BENCH: r = bench_file(files[i]); break;
        default: r = process_file(files[i]); break;
        }
        if (r != 0) failed = 1;
    }

    lmc_cctx_free(g_cctx);
    lmc_dctx_free(g_dctx);
    free(g_inbuf);
    free(g_outbuf);
    free(g_wr.buf[1]);
    free(g_rd.buf[1]);   /* no read in flight: run_compress_ahead waits for its last */
    unload_ref();
    free(files);
    if (fflush(stdout) != 0) { errmsg("stdout: write error: %s", strerror(errno)); failed = 1; }
    return failed ? 1 : 0;
}
