/* frame_dec.c - decompression contexts, streaming, verification, frame walk.
 *
 * Nothing read from a frame is trusted: sizes are checked against the format's
 * limits and against the bytes actually present before anything is allocated
 * or copied, and no chunk's content is accepted unless its payload checksum
 * matches (taken as the chunk decodes, behind the decoder's reads: run_djob;
 * the decoder itself never trusts a payload). */
#include <stdlib.h>
#include <string.h>
#include "lmc.h"
#include "error.h"
#include "frame.h"
#include "hash.h"
#include "refhash.h"
#include "mem.h"
#include "pool.h"
#include "workmem.h"
#include "chunk_dec.h"

size_t lmc_get_frame_header(lmc_frame_header* h, const void* srcv, size_t n)
{
    const uint8_t* const s = (const uint8_t*)srcv;
    LMC_RETURN_IF(!h || (!s && n), PARAM);
    memset(h, 0, sizeof(*h));
    if (n >= 4) LMC_RETURN_IF(lmc_rd32(s) != LMC_MAGIC, NOT_LMC);
    LMC_RETURN_IF(n < LMC_HDR_SIZE, TRUNCATED);
    LMC_RETURN_IF(s[4] == 0 || s[4] > LMC_FORMAT_VERSION, VERSION);
    LMC_RETURN_IF(lmc_rd32(s + 36) != lmc_h32(s, 36), HEADER);
    LMC_RETURN_IF((s[5] & ~LMC_FLAGS_KNOWN) || s[9] || s[10] || s[11], HEADER);
    LMC_RETURN_IF(s[8] < LMC_CHUNK_LOG_MIN || s[8] > LMC_CHUNK_LOG_MAX, HEADER);
    LMC_RETURN_IF(s[6] < LMC_FORMAT_GENERIC || s[6] > LMC_FORMAT_TORCH_ZIP || s[7] >= LMC_DTYPE_COUNT, HEADER);
    h->version = s[4];
    h->has_ref = (s[5] & LMC_FLAG_REF) != 0;
    h->content_size_known = (s[5] & LMC_FLAG_SIZE) != 0;
    h->container = (lmc_format)s[6];
    h->dtype = (lmc_dtype)s[7];
    h->chunk_log = s[8];
    h->content_size = lmc_rd64(s + 12);
    h->ref_size = lmc_rd64(s + 20);
    h->ref_hash = lmc_rd64(s + 28);
    LMC_RETURN_IF(!h->has_ref && (h->ref_size || h->ref_hash), HEADER);
    LMC_RETURN_IF(!h->content_size_known && h->content_size, HEADER);
    return LMC_HDR_SIZE;
}

/* Checks a 16-byte chunk header; returns its payload size or an error. */
static size_t check_chunk_header(const uint8_t* p, unsigned chunk_log, uint32_t* content)
{
    *content = lmc_rd32(p);
    uint64_t const payload = lmc_rd32(p + 4);
    LMC_RETURN_IF(*content == 0 || *content > lmc_chunk_max_content(chunk_log), CORRUPT);
    LMC_RETURN_IF(payload > lmc_chunk_payload_limit(*content), CORRUPT);
    return (size_t)payload;
}

typedef struct {
    const uint8_t* payload;    /* points into the frame or into pbuf */
    uint8_t*       pbuf;       /* streaming: staged payload */
    size_t         pbuf_cap;
    size_t         payload_size, have;
    uint8_t        head[LMC_CHUNK_HDR_SIZE];
    size_t         head_have;
    uint32_t       content_size;
    uint8_t*       dst;        /* where it decodes */
    uint8_t*       cbuf;       /* streaming: decoded content */
    size_t         cbuf_cap;
    int            streaming;  /* decode into cbuf rather than into the caller's buffer */
    uint64_t       hash;       /* H64 of the decoded content */
    size_t         result;
} dec_job;

enum { DS_IDLE = 0, DS_HEADER, DS_CHUNKS, DS_SEEK, DS_DONE };

struct lmc_dctx_s {
    unsigned threads, max_chunk_log;
    const uint8_t* ref;
    size_t   ref_size;
    uint64_t ref_hash;
    int      has_ref, ref_hash_known;
    lmc_refhash rh;            /* the reference's hash, between chunk jobs: lmc_decompress, */
    int      rh_on, ref_check_last;   /* and streaming with LMC_D_REF_CHECK_LAST */
    lmc_pool* pool;
    lmc_chunk_dws** wss;       /* one workspace per thread */
    unsigned nwss;
    /* the workspaces in one block (lmc_workmem_alloc), or NULL: each its
     * own allocation; with the block, the buffers that grow to a chunk's
     * size take huge pages too (see grow) */
    uint8_t* work;
    size_t   work_size;
    dec_job* jobs;
    unsigned njobs, res_chunk_log, res_threads;
    /* frame state */
    int      stage;
    lmc_frame_header hdr;
    uint8_t  hbuf[LMC_HDR_SIZE];
    size_t   hhave;
    unsigned nready;           /* jobs holding a complete payload */
    int      end_seen;
    unsigned flush_job;        /* streaming output: next job to flush */
    size_t   flush_pos;
    unsigned nflush;
    XXH3_state_t* hstate;
    XXH3_state_t* seekstate;
    uint8_t* seek;             /* entries of chunks decoded so far */
    size_t   seek_len, seek_cap;
    uint64_t nchunks, total_out;
    size_t   seek_read;        /* bytes of seek table + footer consumed */
    uint8_t  entry[LMC_FOOTER_SIZE];
    size_t   entry_have;
};

lmc_dctx* lmc_dctx_create(void)
{
    lmc_dctx* const d = (lmc_dctx*)calloc(1, sizeof(*d));
    if (!d) return NULL;
    d->threads = 1;
    d->max_chunk_log = LMC_CHUNK_LOG_MAX;
    lmc_refhash_init(&d->rh);
    return d;
}

/* Scratch buffers (grow) of 256 KiB or more take huge pages when the
 * context's workspaces do (d->work), the others come from malloc; both
 * are freed here, while d->work still says which. */
#define SCRATCH_HUGE_MIN ((size_t)256 << 10)
static int scratch_huge(const lmc_dctx* d, size_t cap) { return d->work && cap >= SCRATCH_HUGE_MIN; }

static void scratch_free(const lmc_dctx* d, uint8_t* p, size_t cap)
{
    if (scratch_huge(d, cap)) lmc_workmem_free(p, cap);
    else free(p);
}

static void free_djobs(lmc_dctx* d)
{
    for (unsigned i = 0; i < d->njobs; i++) {
        free(d->jobs[i].pbuf);
        scratch_free(d, d->jobs[i].cbuf, d->jobs[i].cbuf_cap);
    }
    for (unsigned i = 0; i < d->nwss; i++) {
        if (d->wss[i]) scratch_free(d, d->wss[i]->streams, d->wss[i]->streams_cap);
        if (!d->work) free(d->wss[i]);
    }
    lmc_workmem_free(d->work, d->work_size);
    d->work = NULL; d->work_size = 0;
    free(d->wss);
    d->wss = NULL; d->nwss = 0;
    free(d->jobs);
    d->jobs = NULL; d->njobs = 0; d->res_chunk_log = 0;
    lmc_pool_free(d->pool);
    d->pool = NULL;
}

void lmc_dctx_free(lmc_dctx* d)
{
    if (!d) return;
    free_djobs(d);
    free(d->seek);
    if (d->hstate) XXH3_freeState(d->hstate);
    if (d->seekstate) XXH3_freeState(d->seekstate);
    lmc_refhash_destroy(&d->rh);
    free(d);
}

size_t lmc_dctx_set_param(lmc_dctx* d, lmc_dparam p, long long v)
{
    LMC_RETURN_IF(!d, PARAM);
    switch (p) {
    case LMC_D_THREADS:
        LMC_RETURN_IF(v < 1 || v > LMC_THREADS_MAX, PARAM);
        d->threads = (unsigned)v; return 0;
    case LMC_D_REF_CHECK_LAST:
        LMC_RETURN_IF(v < 0 || v > 1, PARAM);
        d->ref_check_last = (int)v; return 0;
    case LMC_D_MAX_CHUNK_LOG:
        LMC_RETURN_IF(v < LMC_CHUNK_LOG_MIN || v > LMC_CHUNK_LOG_MAX, PARAM);
        d->max_chunk_log = (unsigned)v; return 0;
    }
    return LMC_ERR(PARAM);
}

size_t lmc_dctx_set_ref_hashed(lmc_dctx* d, const void* ref, size_t size, uint64_t hash)
{
    LMC_RETURN_IF(!d || (!ref && size), PARAM);
    d->ref = (const uint8_t*)ref; d->ref_size = size; d->ref_hash = hash;
    d->has_ref = ref != NULL;
    d->ref_hash_known = 1;
    return 0;
}

size_t lmc_dctx_set_ref(lmc_dctx* d, const void* ref, size_t size)
{
    LMC_RETURN_IF(!d || (!ref && size), PARAM);
    d->ref = (const uint8_t*)ref; d->ref_size = size;
    d->has_ref = ref != NULL;
    d->ref_hash_known = 0;   /* hashed when a delta frame asks for it */
    return 0;
}

/* A delta frame is only decoded against the exact reference it was made
 * from. defer: a reference whose hash is not known yet is only checked for
 * size here (lmc_decompress hashes it while it decodes, then checks). */
static size_t check_ref(lmc_dctx* d, const lmc_frame_header* h, int defer)
{
    if (!h->has_ref) return 0;
    LMC_RETURN_IF(!d->has_ref, REF_REQUIRED);
    LMC_RETURN_IF(d->ref_size != h->ref_size, REF_WRONG);
    if (!d->ref_hash_known && defer) return 0;
    if (!d->ref_hash_known) { d->ref_hash = lmc_h64(d->ref, d->ref_size); d->ref_hash_known = 1; }
    LMC_RETURN_IF(d->ref_hash != h->ref_hash, REF_WRONG);
    return 0;
}

static size_t alloc_djobs(lmc_dctx* d, unsigned nj, unsigned chunk_log)
{
    d->pool = lmc_pool_create(d->threads);
    LMC_RETURN_IF(!d->pool, THREAD);
    d->jobs = (dec_job*)calloc(nj, sizeof(dec_job));
    LMC_RETURN_IF(!d->jobs, MEMORY);
    d->njobs = nj;
    d->res_chunk_log = chunk_log;
    unsigned const nt = lmc_pool_threads(d->pool);
    d->wss = (lmc_chunk_dws**)calloc(nt, sizeof(*d->wss));
    LMC_RETURN_IF(!d->wss, MEMORY);
    d->nwss = nt;
    /* What the context could come to hold: the workspaces, and a chunk's
     * content for each thread's streams and each job's staged output. Only
     * a context whose whole lot fits the huge-page limit takes the block:
     * on huge pages all of it may become resident. */
    size_t const ws_size = (sizeof(lmc_chunk_dws) + LMC_WORKMEM_GAP + 4095) & ~(size_t)4095;
    /* grow() puts each buffer of 256 KiB or more on its own whole huge
     * pages: a 1 MiB chunk's buffer holds 2 MiB (counted as 1 MiB, -T8
     * decompression of an 8 GiB delta held 84 MiB against its 80 MiB bound) */
    uint64_t const cmax = lmc_chunk_max_content(chunk_log);
    uint64_t const cbuf = cmax >= SCRATCH_HUGE_MIN ? (cmax + ((uint64_t)2 << 20) - 1) & ~(((uint64_t)2 << 20) - 1) : cmax;
    uint64_t const most = (uint64_t)nt * ws_size + (uint64_t)(nt + nj) * cbuf;
    if (most <= LMC_WORKMEM_HUGE_MAX) {
        d->work = (uint8_t*)lmc_workmem_alloc(nt * ws_size);
        LMC_RETURN_IF(!d->work, MEMORY);
        d->work_size = nt * ws_size;
        for (unsigned t = 0; t < nt; t++) {
            d->wss[t] = (lmc_chunk_dws*)(void*)(d->work + t * ws_size);   /* zeroed (lmc_workmem_alloc) */
            LMC_WORKMEM_POISON(d->work + t * ws_size + sizeof(lmc_chunk_dws), ws_size - sizeof(lmc_chunk_dws));
        }
        return 0;
    }
    for (unsigned t = 0; t < nt; t++) {
        d->wss[t] = (lmc_chunk_dws*)calloc(1, sizeof(lmc_chunk_dws));
        LMC_RETURN_IF(!d->wss[t], MEMORY);
    }
    return 0;
}

static size_t ensure_djobs(lmc_dctx* d, unsigned chunk_log, int streaming)
{
    LMC_RETURN_IF(chunk_log > d->max_chunk_log, LIMIT);
    unsigned const nj = lmc_pool_batch(d->threads);
    if (d->njobs == nj && d->res_chunk_log >= chunk_log) return 0;
    free_djobs(d);
    size_t const r = alloc_djobs(d, nj, chunk_log);
    if (LMC_IS_ERR(r)) free_djobs(d);   /* nothing half-made is kept for the next frame */
    (void)streaming;
    return r;
}

/* Work buffers grow to the chunk being decoded, once its payload checksum has
 * passed: a header alone never makes the decoder allocate what it declares. */
static int grow(const lmc_dctx* d, uint8_t** buf, size_t* cap, size_t need)
{
    if (*cap >= need) return 0;
    /* scratch: nothing in it is kept. A small chunk's stays off huge
     * pages, which would clear 2 MiB for it. */
    uint8_t* const v = scratch_huge(d, need) ? (uint8_t*)lmc_workmem_alloc(need) : (uint8_t*)malloc(need);
    if (!v) return -1;
    scratch_free(d, *buf, *cap);
    *buf = v; *cap = need;
    return 0;
}

/* Frames before format 5 hash the whole content for the footer, not the
 * chunks' hashes (doc/format.md, "Footer"). */
static int whole_content_hash(const lmc_dctx* d) { return d->hdr.version < 5; }

static void decode_chunk_job(lmc_dctx* d, dec_job* j, lmc_payload_hash* ph);

static void run_djob(void* arg, size_t i)
{
    lmc_dctx* const d = (lmc_dctx*)arg;
    dec_job* const j = &d->jobs[i];
    /* The payload checksum is taken as the payload is decoded
     * (lmc_payload_hash), not in a pass of its own first, and checked after,
     * whatever the decoding gave: a payload that fails it is CHECKSUM, as
     * if it had been checked first. Nothing relied on the check coming
     * first: the decoder never trusts a payload (a right checksum is easy
     * to forge), and the walk below still comes before the buffers grow. */
    XXH3_state_t pst;
    lmc_payload_hash ph;
    lmc_payload_hash_begin(&ph, &pst, j->payload, j->payload_size);
    decode_chunk_job(d, j, &ph);
    if (lmc_rd32(j->head + 8) != (uint32_t)lmc_payload_hash_finish(&ph)) j->result = LMC_ERR(CHECKSUM);
}

static void decode_chunk_job(lmc_dctx* d, dec_job* j, lmc_payload_hash* ph)
{
    /* the pieces and blocks must account for every content byte before the
     * buffers grow to content_size */
    lmc_frame_stats walk;
    memset(&walk, 0, sizeof(walk));
    j->result = lmc_chunk_walk(j->payload, j->payload_size, j->content_size, d->hdr.has_ref ? d->hdr.ref_size : 0, &walk);
    if (LMC_IS_ERR(j->result)) return;
    lmc_chunk_dws* const ws = d->wss[lmc_pool_self(d->pool)];
    if (grow(d, &ws->streams, &ws->streams_cap, j->content_size)
        || (j->streaming && grow(d, &j->cbuf, &j->cbuf_cap, j->content_size))) {
        j->result = LMC_ERR(MEMORY);
        return;
    }
    if (j->streaming) j->dst = j->cbuf;
    /* the chunk's hash joins as the chunk is decoded, and so, for a frame
     * before format 5 on one thread (jobs then run in frame order), does the
     * frame's hash of the whole content */
    XXH3_state_t own;
    XXH3_64bits_reset(&own);
    lmc_content_hashes const hs = { &own, whole_content_hash(d) && lmc_pool_threads(d->pool) == 1 ? d->hstate : NULL };
    j->result = lmc_chunk_decode(ws, j->dst, j->content_size, j->payload, j->payload_size,
                                 d->hdr.has_ref ? d->ref : NULL, d->hdr.has_ref ? d->hdr.ref_size : 0, &hs, ph);
    if (LMC_IS_ERR(j->result)) return;
    j->hash = XXH3_64bits_digest(&own);
    if (lmc_rd32(j->head + 12) != (uint32_t)j->hash) j->result = LMC_ERR(CHECKSUM);
}

static size_t seek_push(lmc_dctx* d, const dec_job* j)
{
    if (d->seek_len + LMC_SEEK_ENTRY > d->seek_cap) {
        size_t const nc = d->seek_cap ? d->seek_cap * 2 : 4096;
        uint8_t* const v = (uint8_t*)realloc(d->seek, nc);
        LMC_RETURN_IF(!v, MEMORY);
        d->seek = v; d->seek_cap = nc;
    }
    uint8_t* const e = d->seek + d->seek_len;
    lmc_wr32(e, (uint32_t)(LMC_CHUNK_HDR_SIZE + j->payload_size));
    lmc_wr32(e + 4, j->content_size);
    memcpy(e + 8, j->head + 12, 4);
    d->seek_len += LMC_SEEK_ENTRY;
    d->nchunks++;
    return 0;
}

/* A decoded chunk joins the frame, in order: its hash joins the frame's
 * (before format 5 its content does, unless run_djob did that on one
 * thread), its entry the seek table. */
static size_t account_chunk(lmc_dctx* d, const dec_job* j)
{
    LMC_FORWARD(j->result);
    if (!whole_content_hash(d)) {
        uint8_t h[8];
        lmc_wr64(h, j->hash);
        lmc_hstate_update(d->hstate, h, sizeof h);
    } else if (lmc_pool_threads(d->pool) > 1) {
        lmc_hstate_update(d->hstate, j->dst, j->content_size);
    }
    LMC_FORWARD(seek_push(d, j));
    d->total_out += j->content_size;
    return 0;
}

/* A chunk job, then (d->rh_on) as many reference bytes hashed as it decoded. */
static void run_djob_hashing(lmc_dctx* d, unsigned slot)
{
    run_djob(d, slot);
    if (d->rh_on) lmc_refhash_step(&d->rh, d->jobs[slot].content_size);
}

static void batch_job(void* arg, size_t i) { run_djob_hashing((lmc_dctx*)arg, (unsigned)i); }

/* Streaming: runs the ready jobs; returns the first error in frame order, if any. */
static size_t run_batch(lmc_dctx* d, unsigned k)
{
    lmc_pool_run(d->pool, batch_job, d, k);
    for (unsigned i = 0; i < k; i++) LMC_FORWARD(d->jobs[i].result);
    for (unsigned i = 0; i < k; i++) LMC_FORWARD(account_chunk(d, &d->jobs[i]));
    return 0;
}

/* One-shot decompression: a pipeline of chunks (no barrier between batches).
 * prepare reads chunk i's header into job slot i % njobs; commit checks its
 * result and adds it to the checksum and the seek table, in frame order. */
typedef struct {
    lmc_dctx*      d;
    const uint8_t* s;
    size_t         n, pos;
    uint8_t*       dst;
    size_t         cap, out;
    size_t         err;
} oneshot_dec;

static int od_fail(oneshot_dec* x, size_t err) { x->err = err; return -1; }

static int od_prepare(void* arg, size_t i, unsigned slot)
{
    oneshot_dec* const x = (oneshot_dec*)arg;
    lmc_dctx* const d = x->d;
    (void)i;
    if (x->n - x->pos < 4) return od_fail(x, LMC_ERR(TRUNCATED));
    if (lmc_rd32(x->s + x->pos) == 0) { d->end_seen = 1; return 1; }
    if (x->n - x->pos < LMC_CHUNK_HDR_SIZE) return od_fail(x, LMC_ERR(TRUNCATED));
    dec_job* const j = &d->jobs[slot];
    memcpy(j->head, x->s + x->pos, LMC_CHUNK_HDR_SIZE);
    size_t const ps = check_chunk_header(j->head, d->hdr.chunk_log, &j->content_size);
    if (LMC_IS_ERR(ps)) return od_fail(x, ps);
    x->pos += LMC_CHUNK_HDR_SIZE;
    if (x->n - x->pos < ps) return od_fail(x, LMC_ERR(TRUNCATED));
    if (x->cap - x->out < j->content_size) return od_fail(x, LMC_ERR(DST_TOO_SMALL));
    j->payload = x->s + x->pos; j->payload_size = ps;
    j->dst = x->dst + x->out; j->streaming = 0;
    x->pos += ps; x->out += j->content_size;
    return 0;
}

static void od_job(void* arg, size_t i, unsigned slot) { (void)i; run_djob_hashing(((oneshot_dec*)arg)->d, slot); }

static int od_commit(void* arg, size_t i, unsigned slot)
{
    oneshot_dec* const x = (oneshot_dec*)arg;
    lmc_dctx* const d = x->d;
    dec_job* const j = &d->jobs[slot];
    (void)i;
    size_t const r = account_chunk(d, j);
    return LMC_IS_ERR(r) ? od_fail(x, r) : 0;
}

/* Checks the seek table + footer (whole, in memory) against what was decoded. */
static size_t check_trailer(lmc_dctx* d, const uint8_t* t, size_t n)
{
    LMC_RETURN_IF(n < d->seek_len + LMC_FOOTER_SIZE, TRUNCATED);
    const uint8_t* const f = t + d->seek_len;
    LMC_RETURN_IF(lmc_rd32(f + 28) != LMC_FOOTER_MAGIC, CORRUPT);
    LMC_RETURN_IF(lmc_rd32(f + 24) != lmc_h32(t, d->seek_len + 24), CHECKSUM);
    LMC_RETURN_IF(lmc_rd64(f) != d->nchunks, CORRUPT);
    LMC_RETURN_IF(d->seek_len && memcmp(t, d->seek, d->seek_len) != 0, CORRUPT);
    LMC_RETURN_IF(lmc_rd64(f + 8) != d->total_out, CORRUPT);
    LMC_RETURN_IF(d->hdr.content_size_known && d->hdr.content_size != d->total_out, SIZE_MISMATCH);
    LMC_RETURN_IF(lmc_rd64(f + 16) != XXH3_64bits_digest(d->hstate), CHECKSUM);
    return 0;
}

static size_t begin_dframe(lmc_dctx* d)
{
    if (!d->hstate) { d->hstate = XXH3_createState(); LMC_RETURN_IF(!d->hstate, MEMORY); }
    XXH3_64bits_reset(d->hstate);
    d->seek_len = 0; d->nchunks = 0; d->total_out = 0;
    d->nready = 0; d->end_seen = 0; d->hhave = 0; d->nflush = 0; d->flush_job = 0; d->flush_pos = 0;
    d->seek_read = 0; d->entry_have = 0;
    return 0;
}

/* After check_ref deferred: the reference's hash starts, if it is not known. */
static size_t ref_hash_begin(lmc_dctx* d)
{
    d->rh_on = d->hdr.has_ref && !d->ref_hash_known;
    if (d->rh_on && LMC_IS_ERR(lmc_refhash_begin(&d->rh, d->ref, d->ref_size))) {
        d->rh_on = 0;
        return LMC_ERR(MEMORY);
    }
    return 0;
}

/* The frame's result r (content size, 0, or an error) once the reference's
 * hash, if it ran, is finished and checked: a wrong reference decides the
 * error whatever else failed (it makes chunks fail their checksums). */
static size_t ref_hash_end(lmc_dctx* d, size_t r)
{
    if (!d->rh_on) return r;
    d->rh_on = 0;
    d->ref_hash = lmc_refhash_finish(&d->rh);
    d->ref_hash_known = 1;
    LMC_RETURN_IF(d->ref_hash != d->hdr.ref_hash, REF_WRONG);
    return r;
}

/* lmc_decompress after the header and the reference's size: the chunks
 * (hashing the reference between them when d->rh_on), then the trailer. */
static size_t decompress_chunks(lmc_dctx* d, uint8_t* dst, size_t cap, const uint8_t* s, size_t n)
{
    LMC_RETURN_IF(d->hdr.content_size_known && d->hdr.content_size > cap, DST_TOO_SMALL);
    LMC_FORWARD(ensure_djobs(d, d->hdr.chunk_log, 0));
    oneshot_dec x = { d, s, n, LMC_HDR_SIZE, dst, cap, 0, 0 };
    if (lmc_pool_pipeline(d->pool, d->njobs, od_prepare, od_job, od_commit, &x) != 0) return x.err;
    size_t pos = x.pos, out = x.out;
    pos += LMC_END_MARKER;
    LMC_FORWARD(check_trailer(d, s + pos, n - pos));
    pos += d->seek_len + LMC_FOOTER_SIZE;
    LMC_RETURN_IF(pos != n, TRAILING);
    return out;
}

/* A reference given without its hash is hashed while the chunks decode
 * (refhash.h) instead of before: dst is only the caller's once this
 * returns the content size, so the check may come last. It still decides
 * the error: decoded against another reference, a frame fails its
 * checksums, and that is reported as LMC_ERR_REF_WRONG. */
size_t lmc_decompress(lmc_dctx* d, void* dstv, size_t cap, const void* srcv, size_t n)
{
    LMC_RETURN_IF(!d || (!dstv && cap) || (!srcv && n), PARAM);
    const uint8_t* const s = (const uint8_t*)srcv;
    d->stage = DS_IDLE;
    LMC_FORWARD(begin_dframe(d));
    LMC_FORWARD(lmc_get_frame_header(&d->hdr, s, n));
    LMC_FORWARD(check_ref(d, &d->hdr, 1));
    LMC_FORWARD(ref_hash_begin(d));
    size_t const r = decompress_chunks(d, (uint8_t*)dstv, cap, s, n);
    return ref_hash_end(d, r);
}

/*-*** streaming ***-*/

void lmc_dctx_reset(lmc_dctx* d)
{
    if (!d) return;
    d->stage = DS_IDLE;
    d->rh_on = 0;
}

static size_t take(uint8_t* dst, size_t* have, size_t want, lmc_inbuf* in)
{
    size_t const k = LMC_MIN(want - *have, in->size - in->pos);
    if (k) memcpy(dst + *have, (const uint8_t*)in->src + in->pos, k);
    *have += k; in->pos += k;
    return *have == want;
}

/* 1 when the caller's input, from in->pos, holds the frame's end marker or
 * a whole chunk with a valid header (an invalid one is left to the
 * gathering path to report) whose content fits the output's room after the
 * gathered chunks': the fast path could then take it. */
static int next_chunk_whole(const lmc_dctx* d, const lmc_inbuf* in, const lmc_outbuf* out)
{
    const uint8_t* const s = (const uint8_t*)in->src + in->pos;
    size_t const avail = in->size - in->pos;
    uint32_t content;
    if (avail < 4) return 0;
    if (lmc_rd32(s) == 0) return 1;
    if (avail < LMC_CHUNK_HDR_SIZE) return 0;
    size_t const ps = check_chunk_header(s, d->hdr.chunk_log, &content);
    if (LMC_IS_ERR(ps) || avail - LMC_CHUNK_HDR_SIZE < ps) return 0;
    uint64_t need = content;
    for (unsigned i = 0; i < d->nready; i++) need += d->jobs[i].content_size;
    return need <= out->size - out->pos;
}

/* Streaming fast path: chunks that lie whole in the caller's input decode
 * as one pipeline, from the input in place straight into the caller's
 * output, while the output has room for them. It stops at the first chunk
 * that is incomplete or does not fit (the gathering path below takes those),
 * and after the end marker. */
typedef struct {
    lmc_dctx*   d;
    lmc_inbuf*  in;
    lmc_outbuf* out;
    size_t      promised;   /* output of the planned, uncommitted chunks */
    size_t      nrun;
    size_t      err;
} stream_dec;

static int sd_prepare(void* arg, size_t i, unsigned slot)
{
    stream_dec* const x = (stream_dec*)arg;
    lmc_dctx* const d = x->d;
    lmc_inbuf* const in = x->in;
    const uint8_t* const s = (const uint8_t*)in->src + in->pos;
    size_t const avail = in->size - in->pos;
    (void)i;
    if (avail < 4) return 1;
    if (lmc_rd32(s) == 0) { d->end_seen = 1; in->pos += 4; return 1; }
    if (avail < LMC_CHUNK_HDR_SIZE) return 1;
    dec_job* const j = &d->jobs[slot];
    uint32_t content;
    size_t const ps = check_chunk_header(s, d->hdr.chunk_log, &content);
    if (LMC_IS_ERR(ps)) { x->err = ps; return -1; }
    if (avail - LMC_CHUNK_HDR_SIZE < ps) return 1;
    if (x->out->size - x->out->pos - x->promised < content) return 1;
    memcpy(j->head, s, LMC_CHUNK_HDR_SIZE);
    j->content_size = content;
    j->payload = s + LMC_CHUNK_HDR_SIZE; j->payload_size = ps;
    j->dst = (uint8_t*)x->out->dst + x->out->pos + x->promised;
    j->streaming = 0;
    x->promised += content;
    in->pos += LMC_CHUNK_HDR_SIZE + ps;
    return 0;
}

static void sd_job(void* arg, size_t i, unsigned slot) { (void)i; run_djob_hashing(((stream_dec*)arg)->d, slot); }

static int sd_commit(void* arg, size_t i, unsigned slot)
{
    stream_dec* const x = (stream_dec*)arg;
    lmc_dctx* const d = x->d;
    dec_job* const j = &d->jobs[slot];
    (void)i;
    size_t const r = account_chunk(d, j);
    if (LMC_IS_ERR(r)) { x->err = r; return -1; }
    x->out->pos += j->content_size;
    x->promised -= j->content_size;
    x->nrun++;
    return 0;
}

static size_t dstream_step(lmc_dctx* d, lmc_outbuf* out, lmc_inbuf* in)
{
    for (;;) {
        /* 1. flush decoded chunks, in order */
        while (d->flush_job < d->nflush) {
            dec_job* const j = &d->jobs[d->flush_job];
            size_t const k = LMC_MIN(j->content_size - d->flush_pos, out->size - out->pos);
            if (k) memcpy((uint8_t*)out->dst + out->pos, j->cbuf + d->flush_pos, k);
            out->pos += k; d->flush_pos += k;
            if (d->flush_pos < j->content_size) return j->content_size - d->flush_pos;
            d->flush_job++; d->flush_pos = 0;
        }
        d->nflush = 0; d->flush_job = 0;
        switch (d->stage) {
        case DS_IDLE:
            LMC_FORWARD(begin_dframe(d));
            d->stage = DS_HEADER;
            /* fall through */
        case DS_HEADER:
            if (!take(d->hbuf, &d->hhave, LMC_HDR_SIZE, in)) {
                if (d->hhave >= 4) LMC_RETURN_IF(lmc_rd32(d->hbuf) != LMC_MAGIC, NOT_LMC);
                return LMC_HDR_SIZE - d->hhave;
            }
            LMC_FORWARD(lmc_get_frame_header(&d->hdr, d->hbuf, LMC_HDR_SIZE));
            LMC_FORWARD(check_ref(d, &d->hdr, d->ref_check_last));
            LMC_FORWARD(ref_hash_begin(d));
            LMC_FORWARD(ensure_djobs(d, d->hdr.chunk_log, 1));
            for (unsigned i = 0; i < d->njobs; i++) { d->jobs[i].head_have = 0; d->jobs[i].have = 0; }
            d->stage = DS_CHUNKS;
            continue;
        case DS_CHUNKS: {
            int early = 0;
            if (d->nready == 0 && d->jobs[0].head_have == 0 && !d->end_seen) {
                stream_dec x;
                memset(&x, 0, sizeof(x));
                x.d = d; x.in = in; x.out = out;
                if (lmc_pool_pipeline(d->pool, d->njobs, sd_prepare, sd_job, sd_commit, &x) != 0) return x.err;
                /* the next chunk does not fit the room left: hand the output
                 * back rather than decode a batch to flush in pieces */
                if (x.nrun && !d->end_seen) return 1;
            }
            /* gather complete chunks into job slots */
            while (d->nready < d->njobs && !d->end_seen) {
                dec_job* const j = &d->jobs[d->nready];
                if (j->head_have < 4) {
                    if (!take(j->head, &j->head_have, 4, in)) break;
                    if (lmc_rd32(j->head) == 0) { d->end_seen = 1; j->head_have = 0; break; }
                }
                if (j->head_have < LMC_CHUNK_HDR_SIZE) {
                    if (!take(j->head, &j->head_have, LMC_CHUNK_HDR_SIZE, in)) break;
                    size_t const ps = check_chunk_header(j->head, d->hdr.chunk_log, &j->content_size);
                    LMC_FORWARD(ps);
                    j->payload_size = ps; j->have = 0;
                }
                /* the payload buffer grows with the bytes that actually arrive,
                 * never straight to a size a hostile header declares */
                size_t const want = LMC_MIN(j->payload_size, j->have + (in->size - in->pos));
                if (j->pbuf_cap < want) {
                    size_t const nc = LMC_MIN(j->payload_size, LMC_MAX(want, 2 * j->pbuf_cap));
                    uint8_t* const v = (uint8_t*)realloc(j->pbuf, nc ? nc : 1);
                    LMC_RETURN_IF(!v, MEMORY);
                    j->pbuf = v; j->pbuf_cap = nc;
                }
                if (!take(j->pbuf, &j->have, j->payload_size, in)) break;
                j->payload = j->pbuf; j->streaming = 1;
                d->nready++;
                if (next_chunk_whole(d, in, out)) { early = 1; break; }
            }
            /* a batch runs on full slots only: a chunk half-gathered in the next
             * slot must not be left behind when slots restart at 0. Or early,
             * when the rest of the caller's input holds the next chunk whole
             * and the output has room for it after the gathered ones: the
             * fast path above takes it and those after it in place, and
             * no more are copied into job slots. A caller that reads its
             * input in windows of many chunks then has one chunk per window
             * (the one across its end) gathered, not a slot's worth per
             * thread: gathered chunks cost their payload and their content
             * each, and `lmc -d -T24` from a pipe held 122 MiB against its
             * 64 + 24 x 2 = 112 MiB bound. */
            if (d->nready && (d->nready == d->njobs || d->end_seen || early)) {
                unsigned const k = d->nready;
                LMC_FORWARD(run_batch(d, k));
                for (unsigned i = 0; i < k; i++) { d->jobs[i].head_have = 0; d->jobs[i].have = 0; }
                d->nready = 0;
                d->nflush = k; d->flush_job = 0; d->flush_pos = 0;
                continue;
            }
            if (d->end_seen) {
                if (!d->seekstate) { d->seekstate = XXH3_createState(); LMC_RETURN_IF(!d->seekstate, MEMORY); }
                XXH3_64bits_reset(d->seekstate);
                d->stage = DS_SEEK;
                continue;
            }
            return 1;  /* want more input */
        }
        case DS_SEEK: {
            /* seek entries stream past and are compared one by one: no buffering */
            while (d->seek_read < d->seek_len) {
                if (!take(d->entry, &d->entry_have, LMC_SEEK_ENTRY, in)) return 1;
                LMC_RETURN_IF(memcmp(d->entry, d->seek + d->seek_read, LMC_SEEK_ENTRY) != 0, CORRUPT);
                lmc_hstate_update(d->seekstate, d->entry, LMC_SEEK_ENTRY);
                d->seek_read += LMC_SEEK_ENTRY; d->entry_have = 0;
            }
            if (!take(d->entry, &d->entry_have, LMC_FOOTER_SIZE, in)) return 1;
            const uint8_t* const f = d->entry;
            lmc_hstate_update(d->seekstate, f, 24);
            LMC_RETURN_IF(lmc_rd32(f + 28) != LMC_FOOTER_MAGIC, CORRUPT);
            LMC_RETURN_IF(lmc_rd32(f + 24) != (uint32_t)XXH3_64bits_digest(d->seekstate), CHECKSUM);
            LMC_RETURN_IF(lmc_rd64(f) != d->nchunks || lmc_rd64(f + 8) != d->total_out, CORRUPT);
            LMC_RETURN_IF(d->hdr.content_size_known && d->hdr.content_size != d->total_out, SIZE_MISMATCH);
            LMC_RETURN_IF(lmc_rd64(f + 16) != XXH3_64bits_digest(d->hstate), CHECKSUM);
            LMC_FORWARD(ref_hash_end(d, 0));
            d->stage = DS_DONE;
            continue;
        }
        default: /* DS_DONE */
            LMC_RETURN_IF(in->pos != in->size, TRAILING);
            d->stage = DS_IDLE;
            return 0;
        }
    }
}

size_t lmc_decompress_stream(lmc_dctx* d, lmc_outbuf* out, lmc_inbuf* in)
{
    LMC_RETURN_IF(!d || !out || !in || in->pos > in->size || out->pos > out->size, PARAM);
    size_t r = dstream_step(d, out, in);
    if (LMC_IS_ERR(r)) {
        r = ref_hash_end(d, r);
        d->stage = DS_IDLE;
    }
    return r;
}

/*-*** frame walk ***-*/

size_t lmc_frame_stats_get(lmc_frame_stats* st, const void* srcv, size_t n)
{
    LMC_RETURN_IF(!st || (!srcv && n), PARAM);
    const uint8_t* const s = (const uint8_t*)srcv;
    memset(st, 0, sizeof(*st));
    LMC_FORWARD(lmc_get_frame_header(&st->header, s, n));
    size_t pos = LMC_HDR_SIZE;
    uint64_t total = 0;
    for (;;) {
        LMC_RETURN_IF(n - pos < 4, TRUNCATED);
        if (lmc_rd32(s + pos) == 0) break;
        LMC_RETURN_IF(n - pos < LMC_CHUNK_HDR_SIZE, TRUNCATED);
        uint32_t content;
        size_t const ps = check_chunk_header(s + pos, st->header.chunk_log, &content);
        LMC_FORWARD(ps);
        LMC_RETURN_IF(n - pos - LMC_CHUNK_HDR_SIZE < ps, TRUNCATED);
        const uint8_t* const payload = s + pos + LMC_CHUNK_HDR_SIZE;
        LMC_RETURN_IF(lmc_rd32(s + pos + 8) != lmc_h32(payload, ps), CHECKSUM);
        LMC_FORWARD(lmc_chunk_walk(payload, ps, content, st->header.ref_size, st));
        pos += LMC_CHUNK_HDR_SIZE + ps;
        total += content;
        st->chunks++;
    }
    pos += LMC_END_MARKER;
    size_t const seek_len = (size_t)st->chunks * LMC_SEEK_ENTRY;
    LMC_RETURN_IF(n - pos < seek_len + LMC_FOOTER_SIZE, TRUNCATED);
    const uint8_t* const f = s + pos + seek_len;
    LMC_RETURN_IF(lmc_rd32(f + 28) != LMC_FOOTER_MAGIC, CORRUPT);
    LMC_RETURN_IF(lmc_rd32(f + 24) != lmc_h32(s + pos, seek_len + 24), CHECKSUM);
    LMC_RETURN_IF(lmc_rd64(f) != st->chunks || lmc_rd64(f + 8) != total, CORRUPT);
    st->content_size = total;
    st->content_hash = lmc_rd64(f + 16);
    pos += seek_len + LMC_FOOTER_SIZE;
    LMC_RETURN_IF(pos != n, TRAILING);
    st->frame_size = pos;
    return pos;
}
