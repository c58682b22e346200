/* manifest.h - the snapshot store's manifest: parse (hostile input), check, serialise (internal). */
#ifndef LMC_STORE_MANIFEST_H
#define LMC_STORE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define LMC_MANIFEST_FORMAT   "lmc-store"
#define LMC_MANIFEST_VERSION  1
#define LMC_MANIFEST_MAX_SIZE ((size_t)1 << 28)  /* 256 MiB of JSON */
#define LMC_STORE_NAME_MAX    1024
#define LMC_STORE_STEP_MAX    ((int64_t)1 << 53) /* exact in every JSON reader */
#define LMC_STORE_K_MAX       65535u
#define LMC_FRAME_NAME_LEN    (7 + 16 + 4)       /* "frames/" + 16 hex + ".lmc" */

typedef struct {
    int64_t  step;
    char*    name;
    char     frame[LMC_FRAME_NAME_LEN + 1];
    int64_t  parent;        /* parent step, -1 for a keyframe */
    unsigned depth;
    uint64_t content_size;
    uint64_t content_hash;
    uint64_t frame_size;
    /* derived by lmc_manifest_link(), not stored */
    long     prev;          /* index of the previous snapshot of the same name, or -1 */
    long     next;          /* index of the next one, or -1 */
} lmc_mentry;

typedef struct {
    unsigned    keyframe_every;
    uint64_t    next_id;    /* frame files are named by ids below this */
    size_t      count, cap;
    lmc_mentry* e;          /* sorted by (step, name) */
} lmc_manifest;

void lmc_manifest_init(lmc_manifest* m);
void lmc_manifest_free(lmc_manifest* m);
/* Appends a copy of *e; the manifest takes ownership of e->name. Returns 0 or LMC_ERR_MEMORY. */
size_t lmc_manifest_push(lmc_manifest* m, const lmc_mentry* e);

/* Parses and checks `size` bytes of JSON. Returns 0, or an lmc error code
 * (LMC_ERR_STORE, LMC_ERR_VERSION, LMC_ERR_MEMORY) with a message in err. */
size_t lmc_manifest_parse(lmc_manifest* m, const char* json, size_t size, char* err, size_t errcap);

/* Serialises to a malloc()ed NUL-terminated string, or NULL (out of memory). */
char* lmc_manifest_dump(const lmc_manifest* m);

/* Sorts by (step, name), recomputes prev/next links, and checks that every
 * chain is consistent (unique (step, name) and frame files; a chain starts with a keyframe; a delta's
 * parent is the previous snapshot of its name; depth = parent's + 1). With
 * fix_depth, depth and parent are recomputed from the keyframe flags (parent >= 0 means delta).
 * Returns 0 or LMC_ERR_STORE with a message in err. */
size_t lmc_manifest_link(lmc_manifest* m, int fix_depth, char* err, size_t errcap);

/* 1 if `name` is acceptable as a snapshot file name: 1..LMC_STORE_NAME_MAX bytes, printable,
 * relative, '/'-separated components none of which is empty, "." or "..". */
int lmc_store_name_ok(const char* name, size_t len);

/* Index of (step, name), or -1. */
long lmc_manifest_find(const lmc_manifest* m, int64_t step, const char* name);
/* Index of the last snapshot of `name`, or -1. */
long lmc_manifest_last_of(const lmc_manifest* m, const char* name);

#endif
