/*
 * dir_cmd.c - directory inputs of the main CLI (sharded checkpoints).
 *
 * A checkpoint saved as shards (model-00001-of-00004.safetensors ... plus
 * model.safetensors.index.json, or one file per rank) is a directory. Each
 * regular file REL under it is coded on its own, against the file of the same
 * relative path in the reference directory:
 *
 *   compress    DIR/REL      -> OUTDIR/REL.lmc   (ref REFDIR/REL if it exists)
 *   decompress  DIR.lmc/REL.lmc -> OUTDIR/REL    (ref REFDIR/REL, uncompressed)
 *   test, list  DIR.lmc/REL.lmc                  (test: ref REFDIR/REL)
 *
 * Files are visited in sorted order of their relative paths; symbolic links
 * and special files are skipped with a warning. A failed file does not stop
 * the others. Output directories are created as needed; those created here
 * and left empty by failures are removed again. Input directories are never
 * removed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "dir_cmd.h"

#define SUFFIX     ".lmc"
#define SUFFIX_LEN 4

static void dmsg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void dmsg(const char* fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("lmc: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int lmc_dir_is_dir(const char* path)
{
    struct stat st;
    return path && strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "a" + "/" + "b" + suffix; b may be NULL. */
static char* path_join(const char* a, const char* b, const char* suffix)
{
    size_t na = strlen(a), nb = b ? strlen(b) : 0, ns = suffix ? strlen(suffix) : 0;
    char* p = (char*)malloc(na + nb + ns + 2);
    char* q;
    if (!p) return NULL;
    memcpy(p, a, na);
    q = p + na;
    if (b) {
        if (na && a[na - 1] != '/') *q++ = '/';
        memcpy(q, b, nb);
        q += nb;
    }
    if (ns) { memcpy(q, suffix, ns); q += ns; }
    *q = 0;
    return p;
}

static int has_suffix(const char* s)
{
    size_t n = strlen(s);
    return n > SUFFIX_LEN && strcmp(s + n - SUFFIX_LEN, SUFFIX) == 0;
}

/*-************************************************************
 * Lists of strings
 **************************************************************/
typedef struct {
    char** v;
    size_t n, cap;
} strlist;

static int strlist_add(strlist* l, char* s)  /* takes s */
{
    if (!s) return -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char** v = (char**)realloc(l->v, cap * sizeof *v);
        if (!v) { free(s); return -1; }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static void strlist_free(strlist* l)
{
    size_t i;
    for (i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void* a, const void* b)
{
    return strcmp(*(char* const*)a, *(char* const*)b);
}

/*-************************************************************
 * Walk
 **************************************************************/
typedef struct {
    const char* root;
    int quiet;
    int skip_set;          /* skip the directory (dev, ino): an output inside the input */
    dev_t skip_dev;
    ino_t skip_ino;
    strlist files;         /* relative paths */
} walk_t;

/* Adds every regular file under root/rel (rel NULL: the root). -1 on a fatal error. */
static int walk(walk_t* w, const char* rel)
{
    char* dpath = rel ? path_join(w->root, rel, NULL) : strdup(w->root);
    DIR* d;
    struct dirent* de;
    int ret = 0;
    if (!dpath) { dmsg("out of memory"); return -1; }
    d = opendir(dpath);
    if (!d) { dmsg("%s: cannot open directory: %s", dpath, strerror(errno)); free(dpath); return -1; }
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        char *full, *r;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        full = path_join(dpath, de->d_name, NULL);
        r = rel ? path_join(rel, de->d_name, NULL) : strdup(de->d_name);
        if (!full || !r) { dmsg("out of memory"); free(full); free(r); ret = -1; break; }
        if (lstat(full, &st) != 0) {
            dmsg("%s: cannot stat: %s", full, strerror(errno));
            free(full); free(r); ret = -1; break;
        }
        if (S_ISLNK(st.st_mode)) {
            if (!w->quiet) dmsg("%s: warning: symbolic link skipped", full);
            free(r);
        } else if (S_ISDIR(st.st_mode)) {
            if (w->skip_set && st.st_dev == w->skip_dev && st.st_ino == w->skip_ino) {
                if (!w->quiet) dmsg("%s: warning: the output directory, skipped", full);
                free(r);
            } else {
                ret = walk(w, r);
                free(r);
                if (ret != 0) { free(full); break; }
            }
        } else if (S_ISREG(st.st_mode)) {
            if (strlist_add(&w->files, r) != 0) { dmsg("out of memory"); free(full); ret = -1; break; }
        } else {
            if (!w->quiet) dmsg("%s: warning: not a regular file, skipped", full);
            free(r);
        }
        free(full);
    }
    closedir(d);
    free(dpath);
    return ret;
}

/*-************************************************************
 * Output directories
 **************************************************************/
/* Creates every missing directory of root/rel's parent; records the ones made. */
static int make_parents(const char* root, const char* rel, strlist* made)
{
    char* p = path_join(root, rel, NULL);
    size_t start = strlen(root) + 1;
    char* s;
    if (!p) { dmsg("out of memory"); return -1; }
    for (s = p + start; (s = strchr(s, '/')) != NULL; s++) {
        struct stat st;
        *s = 0;
        if (mkdir(p, 0777) == 0) {
            if (strlist_add(made, strdup(p)) != 0) { dmsg("out of memory"); free(p); return -1; }
        } else if (errno != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            dmsg("%s: cannot create directory: %s", p, errno == EEXIST ? "not a directory" : strerror(errno));
            free(p);
            return -1;
        }
        *s = '/';
    }
    free(p);
    return 0;
}

/* The default output directory: DIR.lmc, or DIR.lmc without its suffix. */
static char* default_outdir(const char* dir, int decomp)
{
    size_t n = strlen(dir);
    const char* base;
    char* p;
    while (n > 1 && dir[n - 1] == '/') n--;
    p = strndup(dir, n);
    if (!p) { dmsg("out of memory"); return NULL; }
    base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        dmsg("%s: cannot derive an output directory name (use -o OUTDIR)", dir);
        free(p);
        return NULL;
    }
    if (!decomp) {
        char* q = path_join(p, NULL, SUFFIX);
        free(p);
        if (!q) dmsg("out of memory");
        return q;
    }
    if (!has_suffix(base)) {
        dmsg("%s: unknown suffix: expected a directory name ending in %s (use -o OUTDIR)", dir, SUFFIX);
        free(p);
        return NULL;
    }
    p[strlen(p) - SUFFIX_LEN] = 0;
    return p;
}

/*-************************************************************
 * Run
 **************************************************************/
int lmc_dir_run(const char* dir, const lmc_dir_job* job)
{
    const int writes = job->mode == LMC_DIR_COMPRESS || job->mode == LMC_DIR_DECOMPRESS;
    const int coded = job->mode != LMC_DIR_COMPRESS;   /* inputs are .lmc frames */
    char* outdir = NULL;
    strlist made;
    walk_t w;
    size_t i;
    int failed = 0, outdir_made = 0;
    struct stat st;

    memset(&made, 0, sizeof made);
    memset(&w, 0, sizeof w);
    w.root = dir;
    w.quiet = job->quiet;

    if (job->refdir && !lmc_dir_is_dir(job->refdir)) {
        dmsg("%s: the reference of a directory must be a directory (-r REFDIR)", job->refdir);
        return -1;
    }
    if (writes) {
        outdir = job->outdir ? strdup(job->outdir) : default_outdir(dir, job->mode == LMC_DIR_DECOMPRESS);
        if (!outdir) { if (job->outdir) dmsg("out of memory"); return -1; }
        if (lstat(outdir, &st) == 0) {
            if (!S_ISDIR(st.st_mode) && !(S_ISLNK(st.st_mode) && lmc_dir_is_dir(outdir))) {
                dmsg("%s: already exists and is not a directory", outdir);
                free(outdir);
                return -1;
            }
            if (!job->force) {
                dmsg("%s: already exists; not overwritten (use -f to write into it)", outdir);
                free(outdir);
                return -1;
            }
            if (stat(outdir, &st) == 0) {
                w.skip_set = 1;
                w.skip_dev = st.st_dev;
                w.skip_ino = st.st_ino;
            }
        } else if (errno != ENOENT) {
            dmsg("%s: %s", outdir, strerror(errno));
            free(outdir);
            return -1;
        }
    }

    if (walk(&w, NULL) != 0) { strlist_free(&w.files); free(outdir); return -1; }
    if (w.files.n) qsort(w.files.v, w.files.n, sizeof *w.files.v, cmp_str);

    if (writes) {
        if (mkdir(outdir, 0777) == 0) outdir_made = 1;
        else if (errno != EEXIST || !lmc_dir_is_dir(outdir)) {
            dmsg("%s: cannot create directory: %s", outdir, errno == EEXIST ? "not a directory" : strerror(errno));
            strlist_free(&w.files);
            free(outdir);
            return -1;
        }
    }

    for (i = 0; i < w.files.n; i++) {
        const char* rel = w.files.v[i];
        char *in = NULL, *out = NULL, *orig = NULL, *refpath = NULL;
        const char *ref = NULL, *missing = NULL;
        int r = -1;

        in = path_join(dir, rel, NULL);
        if (!in) { dmsg("out of memory"); failed = 1; break; }
        if (coded && !has_suffix(rel)) {
            if (!job->quiet) dmsg("%s: warning: no %s suffix, skipped", in, SUFFIX);
            free(in);
            continue;
        }
        orig = coded ? strndup(rel, strlen(rel) - SUFFIX_LEN) : strdup(rel);
        if (!orig) { dmsg("out of memory"); free(in); failed = 1; break; }
        if (job->refdir && job->mode != LMC_DIR_LIST) {
            struct stat rs;
            refpath = path_join(job->refdir, orig, NULL);
            if (!refpath) { dmsg("out of memory"); r = -1; goto next; }
            if (stat(refpath, &rs) == 0 && S_ISREG(rs.st_mode)) {
                ref = refpath;
            } else {
                missing = refpath;
                if (job->mode == LMC_DIR_COMPRESS && job->verbose)
                    dmsg("%s: no reference %s: coded whole", in, refpath);
            }
        }
        if (writes) {
            if (make_parents(outdir, orig, &made) != 0) goto next;
            out = path_join(outdir, orig, coded ? NULL : SUFFIX);
            if (!out) { dmsg("out of memory"); goto next; }
        }
        r = job->file(job->arg, in, out, ref, missing);
    next:
        if (r != 0) failed = 1;
        free(in); free(out); free(orig); free(refpath);
    }

    /* directories this run made and failures left empty */
    if (failed) {
        size_t k = made.n;
        while (k-- > 0) (void)rmdir(made.v[k]);
        if (outdir_made) (void)rmdir(outdir);
    }
    strlist_free(&made);
    strlist_free(&w.files);
    free(outdir);
    return failed ? -1 : 0;
}
