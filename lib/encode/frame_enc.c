/* frame_enc.c - compression contexts: frame header, chunk planning, the
 * thread pool, streaming, seek table and footer (doc/format.md).
 *
 * Work is cut into chunks of 2^chunk_log bytes of content (or equal ones
 * of up to twice that where the size is known: plan_frame), coded as an
 * ordered pipeline over threads + 2 job slots (a slot holds a chunk's output
 * until it is committed; coder workspaces are per thread) and written in
 * order, so the output does not depend on the thread count. */
#include <stdlib.h>
#include <string.h>
#include "lmc.h"
#include "error.h"
#include "frame.h"
#include "hash.h"
#include "mem.h"
#include "pool.h"
#include "workmem.h"
#include "refhash.h"
#include "chunk_enc.h"
#include "segments.h"

typedef struct {
    uint8_t*        out;
    size_t          out_cap;
    uint8_t*        dst;      /* where the job codes: out, or (one thread) the caller's buffer in place */
    lmc_piece*      pieces;
    size_t          npieces, pcap;
    const uint8_t*  content;
    size_t          size;
    size_t          result;
    int             serial;   /* one thread: prepare, job and commit run in turn */
    int             placed;   /* the job copied its output to its place itself (place_output) */
    uint64_t        hash;     /* H64 of the content, for the frame's hash */
    lmc_frame_stats st;
} enc_job;

enum { ST_IDLE = 0, ST_HEADER, ST_CHUNKS, ST_DONE };

struct lmc_cctx_s {
    /* parameters */
    lmc_format fmt;
    lmc_dtype  dtype;
    unsigned   threads, chunk_log, coders;
    int        layout, balance;
    long long  pledged;
    const uint8_t* ref;
    size_t     ref_size;
    uint64_t   ref_hash;
    int        has_ref, ref_hash_known;
    lmc_refhash rh;           /* the reference's hash, between chunk jobs: lmc_compress, */
    int        rh_on, ref_hash_last;   /* and streaming with LMC_P_REF_HASH_LAST */
    /* resources, sized for (threads, chunk_log) */
    lmc_pool*  pool;
    lmc_chunk_ws** wss;       /* one workspace per thread */
    uint8_t*   work;          /* the block of the workspaces and the jobs' output slots (lmc_workmem_alloc) */
    size_t     work_size;
    unsigned   nwss;
    enc_job*   jobs;
    unsigned   njobs;
    size_t     res_chunk_max;  /* the chunk content the buffers are sized for */
    /* frame state */
    int        stage;
    unsigned   frame_log;     /* the header's chunk_log (plan_frame) */
    uint64_t   chunk_target;  /* nominal chunk size; a chunk holds at most 8 bytes more */
    lmc_segs   segs;
    size_t     seg_hint;
    uint8_t*   inbuf;
    size_t     in_cap, in_len;
    size_t     in_head;       /* coded bytes at inbuf's start, dropped lazily: the
                                 pending input is inbuf[in_head, in_head + in_len) */
    uint64_t   in_off;        /* content offset of inbuf[in_head] */
    uint64_t   total_in;      /* content bytes taken from the caller */
    XXH3_state_t* hstate;
    uint8_t*   seek;
    size_t     seek_len, seek_cap;
    uint64_t   nchunks;
    uint8_t*   oq;
    size_t     oq_cap, oq_len, oq_pos;
    uint64_t   frame_bytes;   /* streaming: bytes queued so far */
    uint8_t    hdr[LMC_HDR_SIZE];
    lmc_frame_stats stats, last;
    int        have_last;
};

size_t lmc_compress_bound(size_t n)
{
    /* per chunk (>= 1 MiB): 16 header + 12 seek + (n >> 15) + 64; plus header, marker, footer */
    return n + (n >> 12) + 4096;
}

lmc_cctx* lmc_cctx_create(void)
{
    lmc_cctx* const c = (lmc_cctx*)calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->threads = 1;
    c->chunk_log = LMC_CHUNK_LOG_DEFAULT;
    c->balance = 1;
    c->coders = 0xFFu;
    c->pledged = -1;
    lmc_refhash_init(&c->rh);
    return c;
}

/* The workspaces and output slots (alloc_buffers); the pool and the job
 * slots stay. */
static void free_buffers(lmc_cctx* c)
{
    for (unsigned i = 0; i < c->nwss; i++) {
        if (c->wss[i]) {
            XXH3_freeState(c->wss[i]->content_hash.st);
            XXH3_freeState(c->wss[i]->payload_hash.st);
        }
    }
    free(c->wss);
    c->wss = NULL; c->nwss = 0;
    lmc_workmem_free(c->work, c->work_size);
    c->work = NULL; c->work_size = 0;
    c->res_chunk_max = 0;
    for (unsigned i = 0; i < c->njobs; i++) { c->jobs[i].out = NULL; c->jobs[i].out_cap = 0; }
}

static void free_jobs(lmc_cctx* c)
{
    free_buffers(c);
    for (unsigned i = 0; i < c->njobs; i++) free(c->jobs[i].pieces);
    free(c->jobs);
    c->jobs = NULL; c->njobs = 0;
    lmc_pool_free(c->pool);
    c->pool = NULL;
}

void lmc_cctx_free(lmc_cctx* c)
{
    if (!c) return;
    free_jobs(c);
    lmc_segs_free(&c->segs);
    free(c->inbuf); free(c->seek); free(c->oq);
    if (c->hstate) XXH3_freeState(c->hstate);
    lmc_refhash_destroy(&c->rh);
    free(c);
}

size_t lmc_cctx_set_param(lmc_cctx* c, lmc_cparam p, long long v)
{
    LMC_RETURN_IF(!c, PARAM);
    switch (p) {
    case LMC_P_FORMAT:
        LMC_RETURN_IF(v < LMC_FORMAT_AUTO || v > LMC_FORMAT_TORCH_ZIP, PARAM);
        c->fmt = (lmc_format)v; return 0;
    case LMC_P_DTYPE:
        LMC_RETURN_IF(v < 0 || v >= LMC_DTYPE_COUNT, PARAM);
        c->dtype = (lmc_dtype)v; return 0;
    case LMC_P_THREADS:
        LMC_RETURN_IF(v < 1 || v > LMC_THREADS_MAX, PARAM);
        c->threads = (unsigned)v; return 0;
    case LMC_P_CHUNK_LOG:
        LMC_RETURN_IF(v < LMC_CHUNK_LOG_MIN || v > LMC_CHUNK_LOG_MAX, PARAM);
        c->chunk_log = (unsigned)v; return 0;
    case LMC_P_LAYOUT:
        LMC_RETURN_IF(v < 0 || v > 2, PARAM);
        c->layout = (int)v; return 0;
    case LMC_P_CONTENT_SIZE:
        LMC_RETURN_IF(v < -1, PARAM);
        c->pledged = v; return 0;
    case LMC_P_REF_HASH_LAST:
        LMC_RETURN_IF(v < 0 || v > 1, PARAM);
        c->ref_hash_last = (int)v; return 0;
    case LMC_P_CODERS:
        LMC_RETURN_IF(v < 0 || v > 0xFF, PARAM);
        c->coders = (unsigned)v | (1u << LMC_CODER_RAW); return 0;
    case LMC_P_CHUNK_BALANCE:
        LMC_RETURN_IF(v < 0 || v > 1, PARAM);
        c->balance = (int)v; return 0;
    }
    return LMC_ERR(PARAM);
}

size_t lmc_cctx_set_ref_hashed(lmc_cctx* c, const void* ref, size_t size, uint64_t hash)
{
    LMC_RETURN_IF(!c || (!ref && size), PARAM);
    LMC_RETURN_IF(c->stage != ST_IDLE, STAGE);
    c->ref = (const uint8_t*)ref; c->ref_size = size; c->ref_hash = hash;
    c->has_ref = ref != NULL;
    c->ref_hash_known = 1;
    return 0;
}

/* The hash is computed by the first frame that needs it: lmc_compress
 * between its chunk jobs (refhash.h), a stream before its header. */
size_t lmc_cctx_set_ref(lmc_cctx* c, const void* ref, size_t size)
{
    size_t const r = lmc_cctx_set_ref_hashed(c, ref, size, 0);
    if (!LMC_IS_ERR(r)) c->ref_hash_known = !ref;
    return r;
}

size_t lmc_cctx_last_stats(const lmc_cctx* c, lmc_frame_stats* st)
{
    LMC_RETURN_IF(!c || !st, PARAM);
    LMC_RETURN_IF(!c->have_last, STAGE);
    *st = c->last;
    return 0;
}

/* The largest chunk of the frame under way. */
static size_t chunk_max(const lmc_cctx* c) { return (size_t)c->chunk_target + 8; }

/* The room a job codes a chunk in, for chunks of up to cm bytes. */
static size_t job_out_cap(size_t cm) { return lmc_chunk_work_size(cm) + LMC_BLOCK_SLACK; }

/* How a frame of n bytes of content (known: n is its size; else unknown)
 * is cut: the header's chunk_log and the nominal chunk size. Chunks of a
 * fixed 2^chunk_log leave a short last chunk, and a thread with one chunk
 * more than the others: a 6.3 MiB file in 7 chunks keeps one of two threads
 * waiting for 0.3 MiB of the other's 3.3 MiB, whereas the same file in 4
 * or 6 equal chunks (1.1 to 2 MiB) gives each thread the same share (2
 * threads coded a bf16 delta 1.86x as fast as one in 7 chunks, 1.98x in
 * 6). So, with the size known and from 2 to 63 chunks of 2^chunk_log,
 * the content is cut into k chunks of equal size (up to a value's bytes),
 * each at least 2^chunk_log and at most 2^(chunk_log+1) - 64, with k a
 * multiple of 16, 8, 4 or 2 (the largest possible), which divides the work
 * evenly among 2, 4, 8 or 16 threads. From 64 chunks on they stay
 * 2^chunk_log: the larger chunks cost -T16 compression of a 154 MB file 4-6
 * MiB more peak memory (97-98 against 92-94 MiB), and each of two threads
 * then codes 32 chunks or more, at most one more than the other. The count
 * depends on the size alone, so the output stays the same for every thread
 * count. */
static void plan_frame(const lmc_cctx* c, int known, uint64_t n, unsigned* log, uint64_t* target)
{
    unsigned const L = c->chunk_log;
    uint64_t const C = (uint64_t)1 << L;
    uint64_t const kmax = n / C;
    *log = L; *target = C;
    if (!known || !c->balance || L >= LMC_CHUNK_LOG_MAX || kmax < 2 || kmax > 63) return;
    uint64_t const smax = 2 * C - 64, klo = (n + smax - 1) / smax;
    uint64_t k = kmax;
    for (uint64_t m = 16; m >= 2; m /= 2)
        if (kmax - kmax % m >= klo) { k = kmax - kmax % m; break; }
    *target = (n + k - 1) / k;
    if (*target > C) *log = L + 1;
}

static size_t alloc_jobs(lmc_cctx* c, unsigned nj);
static size_t alloc_buffers(lmc_cctx* c, size_t cm);

/* The pool and job slots for the thread count, and buffers for the frame's
 * chunks (chunk_max). Buffers are sized for the chunks at hand, not for
 * 2^frame_log: equal chunks of a 154 MB file were 1.02 MiB under a header
 * that said 2 MiB (when files of up to 255 chunks were balanced), and
 * buffers for 2 MiB took its -T2 compression to 48 MiB of peak memory
 * against 40 (-T8: 67 against 59).
 * Larger buffers than needed serve a frame when at most an eighth larger
 * (frames of similar sizes, e.g. the shards of a checkpoint, keep theirs);
 * else they are made again, the pool and the slots staying. */
static size_t ensure_jobs(lmc_cctx* c)
{
    unsigned const nj = lmc_pool_batch(c->threads);
    size_t const cm = chunk_max(c);
    size_t r = 0;
    if (c->njobs != nj) {
        free_jobs(c);
        r = alloc_jobs(c, nj);
    } else if (c->work && c->res_chunk_max >= cm && c->res_chunk_max - cm <= cm / 8) {
        /* the capacity a chunk is coded with follows the frame's chunks,
         * not the buffers: it decides when a chunk falls back to stored
         * (lmc_chunk_encode), so the bytes do not depend on earlier frames */
        for (unsigned i = 0; i < c->njobs; i++) c->jobs[i].out_cap = job_out_cap(cm);
        return 0;
    }
    if (!LMC_IS_ERR(r)) {
        free_buffers(c);
        r = alloc_buffers(c, cm);
    }
    if (LMC_IS_ERR(r)) free_jobs(c);   /* nothing half-made is kept for the next frame */
    return r;
}

/* Work buffers start on their own 4 KiB pages: a thread's workspace shares
 * no cache line or page with another's. */
static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

static size_t alloc_jobs(lmc_cctx* c, unsigned nj)
{
    c->pool = lmc_pool_create(c->threads);
    LMC_RETURN_IF(!c->pool, THREAD);
    c->jobs = (enc_job*)calloc(nj, sizeof(enc_job));
    LMC_RETURN_IF(!c->jobs, MEMORY);
    c->njobs = nj;
    return 0;
}

static size_t alloc_buffers(lmc_cctx* c, size_t cm)
{
    c->res_chunk_max = cm;
    unsigned const nt = lmc_pool_threads(c->pool);
    c->wss = (lmc_chunk_ws**)calloc(nt, sizeof(*c->wss));
    LMC_RETURN_IF(!c->wss, MEMORY);
    c->nwss = nt;
    /* every thread's workspace and grouped streams, then every job's output
     * slot, in one block (workmem.h), each part on its own pages */
    size_t const ws_size = page_round(sizeof(lmc_chunk_ws) + LMC_WORKMEM_GAP);
    size_t const streams_size = page_round(cm + LMC_WORKMEM_GAP);
    size_t const out_cap = job_out_cap(cm), out_size = page_round(out_cap + LMC_WORKMEM_GAP);
    size_t const total = nt * (ws_size + streams_size) + (size_t)c->njobs * out_size;
    c->work = (uint8_t*)lmc_workmem_alloc(total);
    LMC_RETURN_IF(!c->work, MEMORY);
    c->work_size = total;
    uint8_t* w = c->work;
    for (unsigned t = 0; t < nt; t++) {
        lmc_chunk_ws* const ws = (lmc_chunk_ws*)(void*)w;   /* zeroed (lmc_workmem_alloc) */
        c->wss[t] = ws;
        ws->streams = w + ws_size;
        ws->streams_cap = cm;
        LMC_WORKMEM_POISON(w + sizeof(*ws), ws_size - sizeof(*ws));
        LMC_WORKMEM_POISON(ws->streams + cm, streams_size - cm);
        w += ws_size + streams_size;
        ws->content_hash.st = XXH3_createState();
        ws->payload_hash.st = XXH3_createState();
        LMC_RETURN_IF(!ws->content_hash.st || !ws->payload_hash.st, MEMORY);
    }
    for (unsigned i = 0; i < c->njobs; i++) {
        enc_job* const j = &c->jobs[i];
        j->out_cap = out_cap;
        j->out = w;
        LMC_WORKMEM_POISON(w + out_cap, out_size - out_cap);
        w += out_size;
    }
    return 0;
}

static size_t push_piece(enc_job* j, const lmc_piece* p)
{
    /* tiny runs join a neighbouring width-1 piece: piece headers must stay small */
    lmc_piece q = *p;
    if (q.len < LMC_MIN_PIECE) { q.width = 1; q.xor_ref = 0; q.dtype = LMC_DTYPE_BYTES; q.float_like = 0; q.row = 0; q.detect = 0; }
    if (j->npieces) {
        lmc_piece* const last = &j->pieces[j->npieces - 1];
        /* Small neighbours of one kind become one piece when their values stay
         * aligned and, for deltas, their reference values are neighbours too
         * (tensors keep their order between checkpoints): small tensors then
         * share blocks and tables instead of paying for their own. Large ones
         * keep their own piece, and so their own layout and XOR choice. */
        int const same_kind = last->width == q.width && last->dtype == q.dtype && last->xor_ref == q.xor_ref
                              && last->off + last->len == q.off && last->len % q.width == 0
                              && (!q.xor_ref || last->ref_off + last->len == q.ref_off);
        if (same_kind && q.len < LMC_MERGE_PIECE && last->len + q.len <= LMC_BLOCK_MAX) {
            last->len += q.len;
            if (last->row != q.row) last->row = 0;
            last->detect |= q.detect;   /* bytes either way: guessing widths is only a choice of coding */
            return 0;
        }
    }
    if (j->npieces == j->pcap) {
        size_t const nc = j->pcap ? j->pcap * 2 : 64;
        lmc_piece* const v = (lmc_piece*)realloc(j->pieces, nc * sizeof(*v));
        LMC_RETURN_IF(!v, MEMORY);
        j->pieces = v; j->pcap = nc;
    }
    j->pieces[j->npieces++] = q;
    return 0;
}

/* Plans the chunk starting at content offset c0 when content is available up to
 * `avail_end` (final: that is the end of the input). Returns 1 and fills the
 * job if a chunk can be cut, 0 if more input is needed, or an error. */
static size_t plan_chunk(lmc_cctx* c, enc_job* j, uint64_t c0, uint64_t avail_end, int final, uint64_t* c1out)
{
    uint64_t const C = c->chunk_target;
    if (c0 >= avail_end) return 0;
    uint64_t end;
    if (avail_end - c0 >= C + 8) {
        end = c0 + C;
        size_t const si = lmc_segs_find(&c->segs, end, c->seg_hint);
        const lmc_seg* const g = &c->segs.v[si];
        uint64_t const rem = (end - g->off) % g->width;
        if (rem) end = LMC_MIN(end + (g->width - rem), g->off + g->len);
    } else if (final) {
        end = avail_end;
    } else {
        return 0;
    }
    j->npieces = 0;
    size_t si = lmc_segs_find(&c->segs, c0, c->seg_hint);
    c->seg_hint = si;
    for (uint64_t a = c0; a < end; si++) {
        const lmc_seg* const g = &c->segs.v[si];
        uint64_t const b = LMC_MIN(end, g->off + g->len);
        lmc_piece p;
        p.off = a; p.len = (uint32_t)(b - a); p.width = g->width; p.dtype = g->dtype;
        p.xor_ref = g->xor_ref; p.float_like = g->float_like; p.ref_off = g->ref_off + (a - g->off);
        p.row = g->row;
        p.detect = g->detect;
        LMC_FORWARD(push_piece(j, &p));
        a = b;
    }
    j->size = (size_t)(end - c0);
    *c1out = end;
    return 1;
}

static void run_job(void* arg, size_t i)
{
    lmc_cctx* const c = (lmc_cctx*)arg;
    enc_job* const j = &c->jobs[i];
    memset(&j->st, 0, sizeof(j->st));
    lmc_chunk_ws* const ws = c->wss[lmc_pool_self(c->pool)];
    j->result = lmc_chunk_encode(ws, j->dst, j->out_cap, j->content, j->size, j->pieces, j->npieces,
                                 c->has_ref ? c->ref : NULL, c->coders, c->layout, &j->st, &j->hash);
}

/* A chunk job, then (c->rh_on) as many reference bytes hashed as it coded. */
static void run_job_hashing(lmc_cctx* c, unsigned slot)
{
    run_job(c, slot);
    if (c->rh_on) lmc_refhash_step(&c->rh, c->jobs[slot].size);
}

/* Where the next chunk's output goes, once the chunk before it is
 * committed: the committing thread publishes it, and a thread that finishes
 * that chunk's job afterwards copies its output there itself. Otherwise the
 * commits, which run one at a time, copy every chunk's output in order:
 * 4-24 us a chunk of the 2.35 ms that two threads took on a 6.6 MB bf16
 * delta, a serial share that grows with the thread count. */
typedef struct {
    size_t   next_i;      /* atomic: the chunk whose place is known */
    uint8_t* next_at;     /* its place: written before next_i (release) */
    size_t   room;        /* bytes there */
} placement;

static void place_publish(placement* pl, size_t i, uint8_t* at, size_t room)
{
    pl->next_at = at;
    pl->room = room;
    __atomic_store_n(&pl->next_i, i, __ATOMIC_RELEASE);
}

/* Chunk i's job is done: its output to its place if that is known (chunk
 * i - 1 committed) and has room. Chunk i is committed only after this
 * returns, and i + 1 published only in that commit, so the place read here
 * is chunk i's. */
static void place_output(placement* pl, enc_job* j, size_t i)
{
    j->placed = 0;
    if (j->dst != j->out || LMC_IS_ERR(j->result)) return;
    if (__atomic_load_n(&pl->next_i, __ATOMIC_ACQUIRE) != i || pl->room < j->result) return;
    memcpy(pl->next_at, j->out, j->result);
    j->placed = 1;
}

/* A frame's start: the reference's hash, if not known, is computed between
 * the chunk jobs when `defer` (the header is then written again, or by the
 * caller), else here. */
static size_t ref_hash_begin(lmc_cctx* c, int defer)
{
    c->rh_on = 0;
    if (!c->has_ref || c->ref_hash_known) return 0;
    if (!defer) {
        c->ref_hash = lmc_h64(c->ref, c->ref_size);
        c->ref_hash_known = 1;
        return 0;
    }
    LMC_FORWARD(lmc_refhash_begin(&c->rh, c->ref, c->ref_size));
    c->ref_hash = 0;   /* in the header until then */
    c->rh_on = 1;
    return 0;
}

static void ref_hash_end(lmc_cctx* c)
{
    if (!c->rh_on) return;
    c->rh_on = 0;
    c->ref_hash = lmc_refhash_finish(&c->rh);
    c->ref_hash_known = 1;
}

static size_t seek_push(lmc_cctx* c, uint32_t frame_size, uint32_t content_size, uint32_t checksum)
{
    if (c->seek_len + LMC_SEEK_ENTRY > c->seek_cap) {
        size_t const nc = c->seek_cap ? c->seek_cap * 2 : 4096;
        uint8_t* const v = (uint8_t*)realloc(c->seek, nc);
        LMC_RETURN_IF(!v, MEMORY);
        c->seek = v; c->seek_cap = nc;
    }
    uint8_t* const e = c->seek + c->seek_len;
    lmc_wr32(e, frame_size); lmc_wr32(e + 4, content_size); lmc_wr32(e + 8, checksum);
    c->seek_len += LMC_SEEK_ENTRY;
    c->nchunks++;
    return 0;
}

static void add_stats(lmc_frame_stats* a, const lmc_frame_stats* b)
{
    a->pieces += b->pieces; a->pieces_xor += b->pieces_xor; a->pieces_rotated += b->pieces_rotated;
    a->pieces_refmodel += b->pieces_refmodel;
    for (int k = 0; k < LMC_CODER_COUNT; k++) { a->blocks[k] += b->blocks[k]; a->block_in[k] += b->block_in[k]; a->block_out[k] += b->block_out[k]; }
    for (int d = 0; d < LMC_DTYPE_COUNT; d++) { a->dtype_in[d] += b->dtype_in[d]; a->dtype_out[d] += b->dtype_out[d]; }
}

/* A coded chunk joins the frame, in order: its content hash joins the
 * frame's (doc/format.md, "Footer"), its entry the seek table. */
static size_t account_chunk(lmc_cctx* c, const enc_job* j)
{
    LMC_FORWARD(j->result);
    uint8_t h[8];
    lmc_wr64(h, j->hash);
    lmc_hstate_update(c->hstate, h, sizeof h);
    LMC_FORWARD(seek_push(c, (uint32_t)j->result, (uint32_t)j->size, lmc_rd32(j->dst + 12)));
    add_stats(&c->stats, &j->st);
    c->stats.chunks++;
    return 0;
}

static void write_header(const lmc_cctx* c, uint8_t* h, int size_known, uint64_t size)
{
    memset(h, 0, LMC_HDR_SIZE);
    lmc_wr32(h, LMC_MAGIC);
    h[4] = LMC_FORMAT_VERSION;
    h[5] = (uint8_t)((c->has_ref ? LMC_FLAG_REF : 0) | (size_known ? LMC_FLAG_SIZE : 0));
    h[6] = (uint8_t)c->segs.format;
    h[7] = (uint8_t)(c->segs.format == LMC_FORMAT_RAW ? c->dtype : 0);
    h[8] = (uint8_t)c->frame_log;
    lmc_wr64(h + 12, size_known ? size : 0);
    lmc_wr64(h + 20, c->has_ref ? (uint64_t)c->ref_size : 0);
    lmc_wr64(h + 28, c->has_ref ? c->ref_hash : 0);
    lmc_wr32(h + 36, lmc_h32(h, 36));
}

static size_t trailer_size(const lmc_cctx* c) { return LMC_END_MARKER + c->seek_len + LMC_FOOTER_SIZE; }

static void write_trailer(lmc_cctx* c, uint8_t* p, uint64_t content_size)
{
    lmc_wr32(p, 0);
    p += LMC_END_MARKER;
    if (c->seek_len) memcpy(p, c->seek, c->seek_len);
    uint8_t* const f = p + c->seek_len;
    lmc_wr64(f, c->nchunks);
    lmc_wr64(f + 8, content_size);
    lmc_wr64(f + 16, XXH3_64bits_digest(c->hstate));
    lmc_wr32(f + 24, lmc_h32(p, c->seek_len + 24));
    lmc_wr32(f + 28, LMC_FOOTER_MAGIC);
}

static size_t begin_frame(lmc_cctx* c, int size_known, uint64_t size)
{
    plan_frame(c, size_known, size, &c->frame_log, &c->chunk_target);
    LMC_FORWARD(ensure_jobs(c));
    if (!c->hstate) { c->hstate = XXH3_createState(); LMC_RETURN_IF(!c->hstate, MEMORY); }
    XXH3_64bits_reset(c->hstate);
    c->seek_len = 0; c->nchunks = 0; c->seg_hint = 0;
    c->in_len = 0; c->in_head = 0; c->in_off = 0; c->total_in = 0;
    c->oq_len = 0; c->oq_pos = 0;
    memset(&c->stats, 0, sizeof(c->stats));
    c->have_last = 0;
    return 0;
}

static void end_frame(lmc_cctx* c, uint64_t content, uint64_t frame_size, const uint8_t* header)
{
    c->stats.content_size = content;
    c->stats.frame_size = frame_size;
    c->stats.content_hash = XXH3_64bits_digest(c->hstate);
    lmc_get_frame_header(&c->stats.header, header, LMC_HDR_SIZE);
    c->last = c->stats;
    c->have_last = 1;
}

/* One-shot compression: a pipeline of chunks (no barrier between batches:
 * a slow chunk holds up only its own slot). prepare plans chunk i into job
 * slot i % njobs; commit adds it to the checksum and the seek table and
 * copies it out, in order. */
typedef struct {
    lmc_cctx*      c;
    const uint8_t* src;
    size_t         n;
    uint64_t       pos;       /* content planned so far */
    uint8_t*       d;
    size_t         cap, op;
    size_t         err;
    placement      pl;
} oneshot_enc;

static int os_prepare(void* arg, size_t i, unsigned slot)
{
    oneshot_enc* const x = (oneshot_enc*)arg;
    lmc_cctx* const c = x->c;
    enc_job* const j = &c->jobs[slot];
    (void)i;
    if (x->pos >= x->n) return 1;
    uint64_t end;
    size_t const r = plan_chunk(c, j, x->pos, x->n, 1, &end);
    if (LMC_IS_ERR(r)) { x->err = r; return -1; }
    if (!r) return 1;
    j->content = x->src + x->pos;
    j->serial = lmc_pool_threads(c->pool) == 1;
    /* One thread runs each chunk's prepare, job and commit in turn, so the
     * chunk's place in dst is known: it is coded there when a job buffer's
     * worth of room is left (the same capacity either way, so the same
     * bytes), which saves copying the output (about 3 % of the time). */
    j->dst = j->serial && x->cap - x->op >= j->out_cap ? x->d + x->op : j->out;
    x->pos = end;
    return 0;
}

static void os_job(void* arg, size_t i, unsigned slot)
{
    oneshot_enc* const x = (oneshot_enc*)arg;
    run_job_hashing(x->c, slot);
    place_output(&x->pl, &x->c->jobs[slot], i);
}

static int os_commit(void* arg, size_t i, unsigned slot)
{
    oneshot_enc* const x = (oneshot_enc*)arg;
    lmc_cctx* const c = x->c;
    enc_job* const j = &c->jobs[slot];
    size_t const r = account_chunk(c, j);
    if (LMC_IS_ERR(r)) { x->err = r; return -1; }
    if (j->dst == j->out && !j->placed) {
        if (x->cap - x->op < j->result) { x->err = LMC_ERR(DST_TOO_SMALL); return -1; }
        memcpy(x->d + x->op, j->out, j->result);
    }   /* else coded in place, or placed by its job */
    x->op += j->result;
    place_publish(&x->pl, i + 1, x->d + x->op, x->cap - x->op);
    return 0;
}

size_t lmc_compress(lmc_cctx* c, void* dst, size_t cap, const void* srcv, size_t n)
{
    LMC_RETURN_IF(!c || (!dst && cap) || (!srcv && n), PARAM);
    c->stage = ST_IDLE;
    const uint8_t* const src = (const uint8_t*)srcv;
    LMC_FORWARD(begin_frame(c, 1, n));
    LMC_FORWARD(lmc_segs_build(&c->segs, c->fmt, c->dtype, src, n, n, c->has_ref ? c->ref : NULL, c->has_ref ? c->ref_size : 0));
    uint8_t* const d = (uint8_t*)dst;
    LMC_RETURN_IF(cap < LMC_HDR_SIZE, DST_TOO_SMALL);
    /* a reference's unknown hash: the header is written again at the end */
    LMC_FORWARD(ref_hash_begin(c, 1));
    int const rewrite = c->rh_on;
    write_header(c, d, 1, n);
    oneshot_enc x = { c, src, n, 0, d, cap, LMC_HDR_SIZE, 0, { 0, NULL, 0 } };
    place_publish(&x.pl, 0, d + LMC_HDR_SIZE, cap - LMC_HDR_SIZE);
    if (lmc_pool_pipeline(c->pool, c->njobs, os_prepare, os_job, os_commit, &x) != 0) {
        c->rh_on = 0;   /* the hash is left for a later frame to compute */
        return x.err;
    }
    ref_hash_end(c);
    if (rewrite) write_header(c, d, 1, n);
    size_t op = x.op;
    LMC_RETURN_IF(cap - op < trailer_size(c), DST_TOO_SMALL);
    write_trailer(c, d + op, n);
    op += trailer_size(c);
    end_frame(c, n, op, d);
    return op;
}

/*-*** streaming ***-*/

static size_t oq_reserve(lmc_cctx* c, size_t more)
{
    if (c->oq_len + more <= c->oq_cap) return 0;
    size_t nc = c->oq_cap ? c->oq_cap : 1 << 16;
    while (nc < c->oq_len + more) nc *= 2;
    uint8_t* const v = (uint8_t*)realloc(c->oq, nc);
    LMC_RETURN_IF(!v, MEMORY);
    c->oq = v; c->oq_cap = nc;
    return 0;
}

static void oq_flush(lmc_cctx* c, lmc_outbuf* out)
{
    size_t const k = LMC_MIN(c->oq_len - c->oq_pos, out->size - out->pos);
    if (k) memcpy((uint8_t*)out->dst + out->pos, c->oq + c->oq_pos, k);
    out->pos += k; c->oq_pos += k;
    if (c->oq_pos == c->oq_len) { c->oq_pos = 0; c->oq_len = 0; }
}

static size_t take_input(lmc_cctx* c, lmc_inbuf* in, size_t want_total)
{
    if (c->in_cap - c->in_head < want_total && c->in_head) {   /* drop coded bytes only when room is needed */
        memmove(c->inbuf, c->inbuf + c->in_head, c->in_len);
        c->in_head = 0;
    }
    if (c->in_cap < want_total) {
        uint8_t* const v = (uint8_t*)realloc(c->inbuf, want_total);
        LMC_RETURN_IF(!v, MEMORY);
        c->inbuf = v; c->in_cap = want_total;
    }
    size_t const k = LMC_MIN(in->size - in->pos, want_total - c->in_len);
    if (k) memcpy(c->inbuf + c->in_head + c->in_len, (const uint8_t*)in->src + in->pos, k);
    in->pos += k; c->in_len += k; c->total_in += k;
    return 0;
}

/* Streaming: the pending input is the staged bytes inbuf[in_head, +in_len)
 * (content offsets [in_off, staged_end)) followed by the caller's buffer
 * from in->pos. Whole chunks of it run as one pipeline, coded in place
 * wherever they lie; only a chunk that straddles the two is completed in
 * inbuf. Chunks are committed straight into the caller's output while it has
 * room; once the room left cannot hold the next chunk's bound, the run stops
 * there (the first chunk always runs, spilling into the queue if it must). */
typedef struct {
    lmc_cctx*      c;
    lmc_outbuf*    out;
    const uint8_t* csrc;        /* caller's input at content offset staged_end */
    uint64_t       staged_end, avail_end, pos;
    size_t         promised;    /* output bound of the planned, uncommitted chunks */
    uint64_t       stop_at;     /* content offset past which no chunk starts in this call */
    int            final, capped;
    size_t         nrun;
    size_t         err;
    placement      pl;
} stream_enc;

static int se_prepare(void* arg, size_t i, unsigned slot)
{
    stream_enc* const x = (stream_enc*)arg;
    lmc_cctx* const c = x->c;
    enc_job* const j = &c->jobs[slot];
    uint64_t end;
    size_t const r = plan_chunk(c, j, x->pos, x->avail_end, x->final, &end);
    if (LMC_IS_ERR(r)) { x->err = r; return -1; }
    if (!r) return 1;
    if (i && x->pos >= x->stop_at) { x->capped = 1; return 1; }
    size_t const bound = lmc_chunk_bound(j->size);
    if (i && (c->oq_len || x->out->size - x->out->pos < x->promised + bound)) return 1;
    if (end <= x->staged_end) {
        j->content = c->inbuf + c->in_head + (x->pos - c->in_off);
    } else if (x->pos >= x->staged_end) {
        j->content = x->csrc + (x->pos - x->staged_end);
    } else {
        /* straddles: complete it after the staged bytes (room reserved before the run) */
        size_t const have = (size_t)(x->staged_end - x->pos), more = (size_t)(end - x->staged_end);
        memcpy(c->inbuf + c->in_head + c->in_len, x->csrc, more);
        j->content = c->inbuf + c->in_head + c->in_len - have;
    }
    j->serial = lmc_pool_threads(c->pool) == 1;
    /* one thread, nothing queued: coded in place in the caller's buffer when
     * a job buffer's worth of room is left (see os_prepare) */
    j->dst = j->serial && !c->oq_len && x->out->size - x->out->pos >= j->out_cap ? (uint8_t*)x->out->dst + x->out->pos : j->out;
    x->promised += bound;
    x->pos = end;
    return 0;
}

static void se_job(void* arg, size_t i, unsigned slot)
{
    stream_enc* const x = (stream_enc*)arg;
    run_job_hashing(x->c, slot);
    place_output(&x->pl, &x->c->jobs[slot], i);
}

/* The next chunk's place: the caller's buffer, unless output is queued
 * (then it goes to the queue, in order, and no job places it). */
static void se_publish(stream_enc* x, size_t i)
{
    lmc_outbuf* const o = x->out;
    if (!x->c->oq_len) place_publish(&x->pl, i, (uint8_t*)o->dst + o->pos, o->size - o->pos);
}

static int se_commit(void* arg, size_t i, unsigned slot)
{
    stream_enc* const x = (stream_enc*)arg;
    lmc_cctx* const c = x->c;
    enc_job* const j = &c->jobs[slot];
    size_t r = account_chunk(c, j);
    if (LMC_IS_ERR(r)) { x->err = r; return -1; }
    lmc_outbuf* const o = x->out;
    if (j->dst != j->out || j->placed) {
        o->pos += j->result;   /* coded in place, or placed by its job */
    } else if (!c->oq_len && o->size - o->pos >= j->result) {
        memcpy((uint8_t*)o->dst + o->pos, j->out, j->result);
        o->pos += j->result;
    } else {
        r = oq_reserve(c, j->result);
        if (LMC_IS_ERR(r)) { x->err = r; return -1; }
        memcpy(c->oq + c->oq_len, j->out, j->result);
        c->oq_len += j->result;
    }
    c->frame_bytes += j->result;
    x->promised -= lmc_chunk_bound(j->size);
    x->nrun++;
    se_publish(x, i + 1);
    return 0;
}

#define LMC_STREAM_RUN_JOBS 4
#define LMC_STREAM_RUN_MAX ((uint64_t)16 << 20)

/* The most input one call codes: above 4 threads the per-thread workspaces
 * take the room, so a chunk per thread up to 10 threads, then 8 + threads
 * / 4 chunks, between half of LMC_STREAM_RUN_MAX and all of it. A caller
 * that maps its input and reference holds about 3.4 MiB per MiB of run
 * (the input's and the reference's pages, and the run's output in each of
 * two buffers) against the 2 MiB per thread that the memory bound grows
 * by: a chunk per thread put `lmc -T16 -r` of a 213 MB optimizer delta at
 * 97.1 MiB, over its 64 + 16 x 2 = 96. The cost is threads left idle at
 * the end of each call above 10 threads (4 of 16), where the command is
 * bound by writing its output anyway. */
static uint64_t stream_run_max(unsigned threads, uint64_t chunk)
{
    if (lmc_pool_batch(threads) <= 6) return LMC_STREAM_RUN_MAX;
    uint64_t const run_max = (uint64_t)LMC_MIN(threads, 8 + threads / 4) * chunk;
    return LMC_MIN(LMC_MAX(run_max, LMC_STREAM_RUN_MAX / 2), LMC_STREAM_RUN_MAX);
}

/* Codes the whole chunks of the pending input, up to LMC_STREAM_RUN_JOBS
 * slots' worth per call and at most stream_run_max bytes (more if chunks
 * are larger): a caller that maps a huge file and offers it whole
 * gets control back (to write, and to drop pages it no longer needs) after
 * a bounded amount of input. Longer runs would cost fewer waits for a run's
 * last chunk; this keeps the input it pins within the memory budget, and a
 * run of fewer chunks than threads would leave threads idle. budget: what
 * the call may still code (a run takes at least one chunk).
 * *ran: 0 no chunk ran, 1 some ran, 2 the run stopped at that bound. */
static size_t stream_chunks(lmc_cctx* c, lmc_outbuf* out, lmc_inbuf* in, int end, int* ran, uint64_t budget)
{
    size_t const avail = in->size - in->pos;
    if (c->in_len && avail) {
        /* room for the tail of a straddling chunk, reserved now: jobs in
         * flight point into inbuf, so it cannot move during the run */
        size_t const tail = chunk_max(c) + 8;
        if (c->in_cap - c->in_head - c->in_len < tail) {
            if (c->in_head) { memmove(c->inbuf, c->inbuf + c->in_head, c->in_len); c->in_head = 0; }
            if (c->in_cap - c->in_len < tail) {
                uint8_t* const v = (uint8_t*)realloc(c->inbuf, c->in_len + tail);
                LMC_RETURN_IF(!v, MEMORY);
                c->inbuf = v; c->in_cap = c->in_len + tail;
            }
        }
    }
    stream_enc x;
    memset(&x, 0, sizeof(x));
    x.c = c; x.out = out;
    x.csrc = (const uint8_t*)in->src + in->pos;
    x.staged_end = c->in_off + c->in_len;
    x.avail_end = x.staged_end + avail;
    x.pos = c->in_off;
    uint64_t const run_max = stream_run_max(c->threads, chunk_max(c));
    uint64_t run = (uint64_t)LMC_STREAM_RUN_JOBS * c->njobs * chunk_max(c);
    if (run > run_max) run = LMC_MAX(run_max, 2 * (uint64_t)chunk_max(c));
    if (run > budget) run = budget;
    x.stop_at = c->in_off + run;
    x.final = end;
    x.pl.next_i = SIZE_MAX;   /* no place known while output is queued */
    se_publish(&x, 0);
    if (lmc_pool_pipeline(c->pool, c->njobs, se_prepare, se_job, se_commit, &x) != 0) return x.err;
    *ran = !x.nrun ? 0 : x.capped ? 2 : 1;
    if (!x.nrun) return 0;
    if (x.pos >= x.staged_end) {
        size_t const used = (size_t)(x.pos - x.staged_end);
        in->pos += used; c->total_in += used;
        c->in_len = 0; c->in_head = 0;
    } else {
        size_t const used = (size_t)(x.pos - c->in_off);
        c->in_head += used; c->in_len -= used;   /* no memmove: see take_input */
    }
    c->in_off = x.pos;
    return 0;
}

void lmc_cctx_reset(lmc_cctx* c)
{
    if (!c) return;
    c->stage = ST_IDLE;
    c->rh_on = 0;
    c->in_len = 0; c->in_head = 0; c->oq_len = 0; c->oq_pos = 0;
}

/* Whether a new piece of input is too short a run for the threads, and is
 * better staged until more comes: a caller that feeds pieces much smaller
 * than a call's run (Python's lmc.save gives each tensor's memory as it
 * is; a 1024 x 1024 bf16 tensor is 2 MiB) had a run of a chunk or two per
 * call, whatever the thread count. Pieces are gathered (copied) until half
 * of lmc_cstream_in_size waits, so larger ones are still coded in place.
 * Only a piece not yet started: the rest of a large one, after a run that
 * stopped for output room, is coded in place as before (a reader of
 * lmc_cstream_in_size windows copies nothing more). Two threads keep the
 * old way: their runs are two chunks at most, and the copies would only
 * cost. */
static int stream_gather(const lmc_cctx* c, const lmc_inbuf* in)
{
    return c->threads > 2 && in->pos == 0 && c->in_len + in->size < lmc_cstream_in_size(c) / 2;
}

static size_t stream_step(lmc_cctx* c, lmc_outbuf* out, lmc_inbuf* in, int end)
{
    /* the bound on one run holds for the whole call: a run that stops for
     * want of output room (ran 1) is followed by another while room is
     * left, and a caller whose buffer takes a run's output but not its
     * chunks' bounds got two runs a call, all their input and reference
     * pages mapped at once (-T8 on 2 GB of bf16: 43 -> 69 MiB) */
    uint64_t const budget = LMC_MAX(stream_run_max(c->threads, chunk_max(c)), 2 * (uint64_t)chunk_max(c));
    uint64_t coded = 0;
    for (;;) {
        oq_flush(c, out);
        if (c->oq_len) return c->oq_len - c->oq_pos;
        int const input_done = end && in->pos == in->size;
        if (c->stage == ST_IDLE) {
            LMC_FORWARD(begin_frame(c, c->pledged >= 0, c->pledged >= 0 ? (uint64_t)c->pledged : 0));
            c->stage = ST_HEADER;
        }
        if (c->stage == ST_HEADER) {
            uint64_t const fsz = c->pledged >= 0 ? (uint64_t)c->pledged : UINT64_MAX;
            const uint8_t* head = c->inbuf;
            size_t have = c->in_len;
            /* Nothing staged and the caller's buffer holds the container's
             * header (a torch zip: the whole file, e.g. a mapped one, of any
             * size): parse it in place; the chunks are then coded in place too. */
            const uint8_t* const src = (const uint8_t*)in->src + in->pos;
            if (c->in_len == 0 && in->size > in->pos && lmc_segs_prefix_needed(c->fmt, src, in->size - in->pos, fsz) == 0) {
                head = src;
                have = in->size - in->pos;
            } else {
                uint64_t need = lmc_segs_prefix_needed(c->fmt, c->inbuf, c->in_len, fsz);
                while (need && !(end && in->pos == in->size)) {
                    LMC_FORWARD(take_input(c, in, (size_t)need));
                    if (c->in_len < need) return 1;  /* want more input */
                    need = lmc_segs_prefix_needed(c->fmt, c->inbuf, c->in_len, fsz);
                }
                head = c->inbuf; have = c->in_len;
            }
            LMC_FORWARD(lmc_segs_build(&c->segs, c->fmt, c->dtype, head, have, fsz,
                                       c->has_ref ? c->ref : NULL, c->has_ref ? c->ref_size : 0));
            LMC_FORWARD(oq_reserve(c, LMC_HDR_SIZE));
            LMC_FORWARD(ref_hash_begin(c, c->ref_hash_last));
            write_header(c, c->hdr, c->pledged >= 0, c->pledged >= 0 ? (uint64_t)c->pledged : 0);
            memcpy(c->oq + c->oq_len, c->hdr, LMC_HDR_SIZE);
            c->oq_len += LMC_HDR_SIZE;
            c->frame_bytes = LMC_HDR_SIZE;
            c->stage = ST_CHUNKS;
            continue;
        }
        if (c->stage == ST_CHUNKS) {
            if (!end && stream_gather(c, in)) {
                LMC_FORWARD(take_input(c, in, c->in_len + (in->size - in->pos)));
                return 1;  /* want more input */
            }
            int ran = 0;
            uint64_t const off = c->in_off;
            LMC_FORWARD(stream_chunks(c, out, in, end, &ran, budget > coded ? budget - coded : 0));
            coded += c->in_off - off;
            if (ran) {
                /* the room left cannot take another chunk: hand the output back
                 * rather than code a lone chunk into the queue */
                int const all_in = end && in->pos == in->size && c->in_len == 0;
                if (!all_in && !c->oq_len
                    && (ran == 2 || out->size - out->pos < lmc_chunk_bound(chunk_max(c)) || coded + chunk_max(c) > budget))
                    return 1;
                continue;
            }
            if (!(end && in->pos == in->size)) {
                /* less than a chunk (and its lookahead) left: keep it for the next call */
                LMC_FORWARD(take_input(c, in, c->in_len + (in->size - in->pos)));
                return 1;  /* want more input */
            }
            /* all input coded: finish the frame */
            ref_hash_end(c);
            LMC_RETURN_IF(c->pledged >= 0 && (uint64_t)c->pledged != c->total_in, SIZE_MISMATCH);
            LMC_FORWARD(oq_reserve(c, trailer_size(c)));
            write_trailer(c, c->oq + c->oq_len, c->total_in);
            c->oq_len += trailer_size(c);
            c->frame_bytes += trailer_size(c);
            c->stage = ST_DONE;
            continue;
        }
        /* ST_DONE: everything flushed */
        (void)input_done;
        end_frame(c, c->total_in, c->frame_bytes, c->hdr);
        c->last.header.ref_hash = c->has_ref ? c->ref_hash : 0;   /* c->hdr may hold 0 (LMC_P_REF_HASH_LAST) */
        c->stage = ST_IDLE;
        return 0;
    }
}

size_t lmc_cstream_in_size(const lmc_cctx* c)
{
    if (!c) return 0;
    unsigned log;
    uint64_t target;
    plan_frame(c, c->pledged >= 0, c->pledged >= 0 ? (uint64_t)c->pledged : 0, &log, &target);
    /* a job slot's worth per chunk, but no more than one call codes: the
     * caller's buffer counts against the memory bound too */
    uint64_t n = lmc_pool_batch(c->threads);
    uint64_t const most = stream_run_max(c->threads, target) / target;
    if (n > most) n = LMC_MAX(most, 2);
    return (size_t)n * (size_t)(target + 8);
}

size_t lmc_compress_stream(lmc_cctx* c, lmc_outbuf* out, lmc_inbuf* in, int end)
{
    LMC_RETURN_IF(!c || !out || !in || in->pos > in->size || out->pos > out->size, PARAM);
    size_t const r = stream_step(c, out, in, end);
    if (LMC_IS_ERR(r)) lmc_cctx_reset(c);
    return r;
}
