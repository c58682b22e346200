/*
 * store_cmd.c - `lmc store`: a directory of checkpoint snapshots kept as
 * keyframes and deltas (doc/store.md). Uses only the public API (lmc.h).
 *
 *   lmc store init DIR
 *   lmc store add DIR CKPT [--step N] [--keyframe-every K]   CKPT: a file or a directory of shards
 *   lmc store restore DIR STEP -o OUT [--name NAME]
 *   lmc store ls DIR
 *   lmc store verify DIR
 *   lmc store rm DIR STEP
 *   lmc store prune DIR --keep-last N
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lmc.h"
#include "store_cmd.h"

#ifndef PATH_MAX
#  define PATH_MAX 4096
#endif

static const char* g_sprog = "lmc store";

static void store_usage(FILE* f)
{
    fprintf(f,
"Usage: lmc store init DIR                       create an empty snapshot store\n"
"       lmc store add DIR CKPT [--step N] [--keyframe-every K]\n"
"                                                add a snapshot: CKPT is a file, or a\n"
"                                                directory whose files (shards) each form a chain\n"
"       lmc store restore DIR STEP -o OUT [--name NAME]\n"
"                                                restore a step (OUT is a directory when the\n"
"                                                step holds several files)\n"
"       lmc store ls DIR                         steps, sizes, ratios, chain depths\n"
"       lmc store verify DIR                     decode everything, check every hash\n"
"       lmc store rm DIR STEP                    remove a step (dependants re-encoded)\n"
"       lmc store prune DIR --keep-last N        keep only the last N steps\n"
"Options: -T N threads, 1 to 256 (default and 0: online cores, at most 256),\n"
"         -v verbose, -q quiet,\n"
"         --no-cache (add: do not keep the latest content of each chain in DIR/cache)\n"
"A snapshot is a delta against the previous one of the same file; every K-th\n"
"(default %d) is a keyframe, so a restore decodes at most K frames.\n",
            LMC_STORE_KEYFRAME_EVERY_DEFAULT);
}

static int fail_lib(lmc_store* s, const char* what, size_t r)
{
    const char* detail = s ? lmc_store_last_error(s) : "";
    fflush(stdout);
    if (detail && *detail) fprintf(stderr, "%s: %s: %s\n", g_sprog, what, detail);
    else fprintf(stderr, "%s: %s: %s\n", g_sprog, what, lmc_error_name(r));
    return 1;
}

static int parse_i64(const char* v, int64_t* out)
{
    char* end;
    long long x;
    if (!v || !*v) return -1;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || *end || x < 0) return -1;
    *out = (int64_t)x;
    return 0;
}

static int bad_usage(const char* msg, const char* arg)
{
    fprintf(stderr, "%s: %s%s%s\nTry 'lmc store --help' for more information.\n", g_sprog, msg,
            arg ? " " : "", arg ? arg : "");
    return 1;
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*-************************************************************
 * Collecting the files of a sharded checkpoint directory
 **************************************************************/
typedef struct { char** v; size_t n, cap; } strlist;

static int sl_push(strlist* l, const char* s)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        char** nv = (char**)realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv; l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}

static void sl_free(strlist* l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* Appends the regular files under root/rel (recursively), as paths relative to root. */
static int walk(const char* root, const char* rel, strlist* out, int depth)
{
    char path[PATH_MAX];
    DIR* d;
    struct dirent* de;
    int ret = 0;
    if (depth > 32) { fprintf(stderr, "%s: %s: directories nested too deep\n", g_sprog, root); return -1; }
    snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
    d = opendir(path);
    if (!d) { fprintf(stderr, "%s: %s: %s\n", g_sprog, path, strerror(errno)); return -1; }
    while ((de = readdir(d)) != NULL && ret == 0) {
        char sub[PATH_MAX], full[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.' ) continue;  /* ".", "..", hidden files and temporaries */
        if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= sizeof sub) continue;
        if ((size_t)snprintf(full, sizeof full, "%s/%s", root, sub) >= sizeof full) {
            fprintf(stderr, "%s: %s/%s: path too long\n", g_sprog, root, sub);
            ret = -1;
            break;
        }
        if (stat(full, &st) != 0) { fprintf(stderr, "%s: %s: %s\n", g_sprog, full, strerror(errno)); ret = -1; break; }
        if (S_ISDIR(st.st_mode)) ret = walk(root, sub, out, depth + 1);
        else if (S_ISREG(st.st_mode)) { if (sl_push(out, sub) != 0) { fprintf(stderr, "%s: out of memory\n", g_sprog); ret = -1; } }
    }
    closedir(d);
    return ret;
}

/* exported for dir_cmd.c through this prototype */
int lmc_list_dir_files(const char* root, char*** files, size_t* n);
int lmc_list_dir_files(const char* root, char*** files, size_t* n)
{
    strlist l = {0};
    if (walk(root, "", &l, 0) != 0) { sl_free(&l); return -1; }
    if (l.n) qsort(l.v, l.n, sizeof *l.v, cmp_str);
    *files = l.v;
    *n = l.n;
    return 0;
}

static int mkdirs_for(const char* path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (buf[i] != '/') continue;
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        buf[i] = '/';
    }
    return 0;
}

/*-************************************************************
 * Subcommands
 **************************************************************/
typedef struct {
    int threads;
    int verbose;
    int quiet;
    int cache;
    int64_t step;
    int step_set;
    unsigned keyframe_every;
    long keep_last;
    const char* out;
    const char* name;
    const char* pos[4];
    int npos;
} sopts;

static int open_store(const char* dir, const sopts* o, lmc_store** s)
{
    size_t r = lmc_store_open(s, dir);
    if (lmc_is_error(r)) {
        fprintf(stderr, "%s: %s: %s\n", g_sprog, dir,
                lmc_get_error(r) == LMC_ERR_STORE ? "not an lmc store, or its manifest is damaged (see lmc store init)" : lmc_error_name(r));
        return 1;
    }
    lmc_store_set_param(*s, LMC_STORE_P_THREADS, o->threads);
    lmc_store_set_param(*s, LMC_STORE_P_CACHE, o->cache);
    return 0;
}

static void print_entry_line(const lmc_store_entry* e)
{
    printf("%10lld  %-40s %14llu %12llu %8.3f  %-8s %5u\n", (long long)e->step, e->name,
           (unsigned long long)e->content_size, (unsigned long long)e->frame_size, e->ratio,
           e->keyframe ? "keyframe" : "delta", e->chain_depth);
}

static int cmd_add(const sopts* o)
{
    lmc_store* s;
    struct stat st;
    char** files = NULL;
    size_t nfiles = 0;
    int64_t step;
    int ret = 0;
    const char* dir = o->pos[0];
    const char* ckpt = o->pos[1];
    if (stat(ckpt, &st) != 0) { fprintf(stderr, "%s: %s: %s\n", g_sprog, ckpt, strerror(errno)); return 1; }
    if (open_store(dir, o, &s)) return 1;
    step = o->step_set ? o->step : lmc_store_last_step(s) + 1;
    if (S_ISDIR(st.st_mode)) {
        if (lmc_list_dir_files(ckpt, &files, &nfiles) != 0) { lmc_store_close(s); return 1; }
        if (nfiles == 0) { fprintf(stderr, "%s: %s: no files\n", g_sprog, ckpt); lmc_store_close(s); free(files); return 1; }
    }
    for (size_t i = 0; i < (files ? nfiles : 1) && ret == 0; i++) {
        char path[PATH_MAX];
        const char* name = NULL;
        double t0 = now_sec();
        size_t r;
        if (files) {
            snprintf(path, sizeof path, "%s/%s", ckpt, files[i]);
            name = files[i];
        } else {
            const char* slash;
            snprintf(path, sizeof path, "%s", ckpt);
            slash = strrchr(ckpt, '/');
            name = o->name ? o->name : slash ? slash + 1 : ckpt;
        }
        r = lmc_store_add_file(s, path, step, o->keyframe_every, name);
        if (lmc_is_error(r)) { ret = fail_lib(s, path, r); break; }
        if (!o->quiet) {
            /* the entry just added: last of its name */
            lmc_store_entry e;
            for (size_t k = lmc_store_count(s); k-- > 0;) {
                lmc_store_get(s, k, &e);
                if (e.step == step && strcmp(e.name, name) == 0) break;
            }
            printf("step %lld  %s: %llu -> %llu bytes (%.3fx), %s, depth %u", (long long)e.step, e.name,
                   (unsigned long long)e.content_size, (unsigned long long)e.frame_size, e.ratio,
                   e.keyframe ? "keyframe" : "delta", e.chain_depth);
            if (o->verbose) printf(", %.3f s", now_sec() - t0);
            printf("\n");
        }
    }
    for (size_t i = 0; i < nfiles; i++) free(files[i]);
    free(files);
    lmc_store_close(s);
    return ret;
}

static int cmd_restore(const sopts* o)
{
    lmc_store* s;
    int64_t step;
    int ret = 0;
    size_t n = 0, cnt;
    struct stat st;
    int out_is_dir;
    if (parse_i64(o->pos[1], &step) != 0) return bad_usage("invalid step", o->pos[1]);
    if (!o->out) return bad_usage("restore needs -o OUT", NULL);
    if (open_store(o->pos[0], o, &s)) return 1;
    cnt = lmc_store_count(s);
    for (size_t i = 0; i < cnt; i++) {
        lmc_store_entry e;
        lmc_store_get(s, i, &e);
        if (e.step == step && (!o->name || !strcmp(o->name, e.name))) n++;
    }
    if (n == 0) {
        fprintf(stderr, "%s: %s: no %s%s%sstep %lld\n", g_sprog, o->pos[0], o->name ? "'" : "", o->name ? o->name : "",
                o->name ? "' at " : "", (long long)step);
        lmc_store_close(s);
        return 1;
    }
    out_is_dir = (stat(o->out, &st) == 0 && S_ISDIR(st.st_mode)) || n > 1;
    for (size_t i = 0; i < cnt && ret == 0; i++) {
        lmc_store_entry e;
        char path[PATH_MAX];
        unsigned frames = 0;
        double t0 = now_sec();
        size_t r;
        lmc_store_get(s, i, &e);
        if (e.step != step || (o->name && strcmp(o->name, e.name))) continue;
        if (out_is_dir) {
            if ((size_t)snprintf(path, sizeof path, "%s/%s", o->out, e.name) >= sizeof path) { ret = bad_usage("path too long:", e.name); break; }
            if (mkdirs_for(path) != 0) { fprintf(stderr, "%s: %s: %s\n", g_sprog, path, strerror(errno)); ret = 1; break; }
        } else {
            snprintf(path, sizeof path, "%s", o->out);
        }
        {
            char* name = strdup(e.name);  /* e.name may not survive a reload inside restore */
            if (!name) { ret = 1; break; }
            r = lmc_store_restore_file(s, step, name, path, &frames);
            if (lmc_is_error(r)) { ret = fail_lib(s, path, r); free(name); break; }
            if (o->verbose && frames == 0)
                printf("step %lld  %s -> %s: %llu bytes, from the cache (the latest snapshot: no frame decoded), %.3f s\n",
                       (long long)step, name, path, (unsigned long long)r, now_sec() - t0);
            else if (o->verbose)
                printf("step %lld  %s -> %s: %llu bytes, %u frame%s decoded, %.3f s\n", (long long)step, name, path,
                       (unsigned long long)r, frames, frames == 1 ? "" : "s", now_sec() - t0);
            free(name);
        }
    }
    lmc_store_close(s);
    return ret;
}

static int cmd_ls(const sopts* o)
{
    lmc_store* s;
    uint64_t tin = 0, tout = 0;
    size_t cnt;
    if (open_store(o->pos[0], o, &s)) return 1;
    cnt = lmc_store_count(s);
    printf("%10s  %-40s %14s %12s %8s  %-8s %5s\n", "step", "name", "size", "stored", "ratio", "kind", "depth");
    for (size_t i = 0; i < cnt; i++) {
        lmc_store_entry e;
        lmc_store_get(s, i, &e);
        print_entry_line(&e);
        if (o->verbose) printf("%12s%s  hash %016llx\n", "", e.frame, (unsigned long long)e.content_hash);
        tin += e.content_size;
        tout += e.frame_size;
    }
    printf("%zu snapshot%s, %llu bytes stored for %llu (%.3fx)\n", cnt, cnt == 1 ? "" : "s",
           (unsigned long long)tout, (unsigned long long)tin, tout ? (double)tin / (double)tout : 0.0);
    lmc_store_close(s);
    return 0;
}

static int cmd_verify(const sopts* o)
{
    lmc_store* s;
    size_t r;
    if (open_store(o->pos[0], o, &s)) return 1;
    r = lmc_store_verify(s);
    if (lmc_is_error(r)) { int ret = fail_lib(s, o->pos[0], r); lmc_store_close(s); return ret; }
    if (!o->quiet) printf("%s: OK, %zu snapshot%s verified\n", o->pos[0], lmc_store_count(s), lmc_store_count(s) == 1 ? "" : "s");
    lmc_store_close(s);
    return 0;
}

static int cmd_rm(const sopts* o, int prune)
{
    lmc_store* s;
    size_t r;
    int64_t step = 0;
    if (!prune && parse_i64(o->pos[1], &step) != 0) return bad_usage("invalid step", o->pos[1]);
    if (prune && o->keep_last < 1) return bad_usage("prune needs --keep-last N (N >= 1)", NULL);
    if (open_store(o->pos[0], o, &s)) return 1;
    r = prune ? lmc_store_prune(s, (size_t)o->keep_last) : lmc_store_rm(s, step);
    if (lmc_is_error(r)) { int ret = fail_lib(s, o->pos[0], r); lmc_store_close(s); return ret; }
    if (!o->quiet) printf("%s: removed %zu snapshot%s, %zu left\n", o->pos[0], r, r == 1 ? "" : "s", lmc_store_count(s));
    lmc_store_close(s);
    return 0;
}

int lmc_cmd_store(int argc, char** argv)
{
    sopts o;
    const char* sub;
    int need;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    memset(&o, 0, sizeof o);
    o.threads = nc >= 1 ? (int)(nc > LMC_THREADS_MAX ? LMC_THREADS_MAX : nc) : 1;
    o.cache = 1;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        store_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    sub = argv[1];
    for (int i = 2; i < argc; i++) {
        const char* a = argv[i];
        const char* v = NULL;
#define OPTVAL(longname) ((!strcmp(a, longname) && i + 1 < argc) ? (v = argv[++i]) : \
                          (!strncmp(a, longname "=", sizeof longname) ? (v = a + sizeof longname) : NULL))
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "--no-cache")) o.cache = 0;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { store_usage(stdout); return 0; }
        else if (!strcmp(a, "-o") && i + 1 < argc) o.out = argv[++i];
        else if (!strncmp(a, "-o", 2) && a[2]) o.out = a + 2;
        else if (OPTVAL("--output")) o.out = v;
        else if (OPTVAL("--name")) o.name = v;
        else if (OPTVAL("--step")) { if (parse_i64(v, &o.step) != 0) return bad_usage("invalid step", v); o.step_set = 1; }
        else if (OPTVAL("--keyframe-every")) {
            int64_t k;
            if (parse_i64(v, &k) != 0 || k < 1 || k > 65535) return bad_usage("invalid --keyframe-every", v);
            o.keyframe_every = (unsigned)k;
        }
        else if (OPTVAL("--keep-last")) {
            int64_t k;
            if (parse_i64(v, &k) != 0 || k < 1) return bad_usage("invalid --keep-last", v);
            o.keep_last = (long)k;
        }
        else if ((!strcmp(a, "-T") && i + 1 < argc && (v = argv[++i])) || (!strncmp(a, "-T", 2) && a[2] && (v = a + 2))
                 || OPTVAL("--threads")) {
            int64_t t;
            if (parse_i64(v, &t) != 0) return bad_usage("invalid thread count", v);
            if (t < 0 || t > LMC_THREADS_MAX) {
                char m[96];
                snprintf(m, sizeof m, "thread count out of range (0: every core, or 1 to %d):", LMC_THREADS_MAX);
                return bad_usage(m, v);
            }
            if (t > 0) o.threads = (int)t;
        }
        else if (a[0] == '-' && a[1]) return bad_usage("unknown option", a);
        else if (o.npos < 4) o.pos[o.npos++] = a;
        else return bad_usage("too many arguments", a);
#undef OPTVAL
    }
    need = !strcmp(sub, "add") || !strcmp(sub, "restore") || !strcmp(sub, "rm") ? 2 : 1;
    if (!strcmp(sub, "init") || !strcmp(sub, "add") || !strcmp(sub, "restore") || !strcmp(sub, "ls") ||
        !strcmp(sub, "verify") || !strcmp(sub, "rm") || !strcmp(sub, "prune")) {
        if (o.npos != need) return bad_usage(o.npos < need ? "missing argument for" : "too many arguments for", sub);
    } else {
        return bad_usage("unknown store command", sub);
    }
    if (!strcmp(sub, "init")) {
        size_t r = lmc_store_init(o.pos[0]);
        if (lmc_is_error(r)) {
            fprintf(stderr, "%s: %s: %s\n", g_sprog, o.pos[0],
                    lmc_get_error(r) == LMC_ERR_EXISTS ? "already a store" :
                    lmc_get_error(r) == LMC_ERR_IO ? strerror(errno) : lmc_error_name(r));
            return 1;
        }
        if (!o.quiet) printf("%s: empty store created\n", o.pos[0]);
        return 0;
    }
    if (!strcmp(sub, "add")) return cmd_add(&o);
    if (!strcmp(sub, "restore")) return cmd_restore(&o);
    if (!strcmp(sub, "ls")) return cmd_ls(&o);
    if (!strcmp(sub, "verify")) return cmd_verify(&o);
    if (!strcmp(sub, "rm")) return cmd_rm(&o, 0);
    return cmd_rm(&o, 1);
}
