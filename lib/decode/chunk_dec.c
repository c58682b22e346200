/* chunk_dec.c - pieces -> streams -> blocks, every field checked before use. */
#include <string.h>
#include "chunk_dec.h"
#include "ungroup.h"
#include "error.h"
#include "frame.h"
#include "mem.h"
#include "refctx.h"

typedef struct { uint32_t len; unsigned w, flags, dtype; uint64_t ref_off; size_t hdr; } piece_hdr;

static size_t read_piece_header(piece_hdr* ph, const uint8_t* p, size_t avail, size_t content_left, uint64_t ref_size)
{
    LMC_RETURN_IF(avail < LMC_PIECE_HDR, TRUNCATED);
    ph->len = lmc_rd32(p);
    ph->w = p[4]; ph->flags = p[5]; ph->dtype = p[6];
    LMC_RETURN_IF(ph->len == 0 || ph->len > content_left, CORRUPT);
    LMC_RETURN_IF(ph->w != 1 && ph->w != 2 && ph->w != 4 && ph->w != 8, CORRUPT);
    LMC_RETURN_IF((ph->flags & ~LMC_PIECE_FLAGS_KNOWN) || p[7] != 0, CORRUPT);
    unsigned const layout = (ph->flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT;
    LMC_RETURN_IF(layout > LMC_LAYOUT_REFMODEL || (layout == LMC_LAYOUT_ROTATED && ph->w == 1), CORRUPT);
    LMC_RETURN_IF(layout == LMC_LAYOUT_REFMODEL && (!(ph->flags & LMC_PIECE_XOR) || (ph->w != 2 && ph->w != 4)), CORRUPT);
    ph->hdr = LMC_PIECE_HDR;
    ph->ref_off = 0;
    if (ph->flags & LMC_PIECE_XOR) {
        LMC_RETURN_IF(avail < LMC_PIECE_HDR + 8, TRUNCATED);
        ph->ref_off = lmc_rd64(p + LMC_PIECE_HDR);
        LMC_RETURN_IF(ph->ref_off > ref_size || ph->len > ref_size - ph->ref_off, CORRUPT);
        ph->hdr += 8;
    }
    return 0;
}

/* Reads a value block's kind; for GROUPED also its mode. */
static size_t read_vblock_head(const uint8_t* src, size_t avail, unsigned* kind, unsigned* mode, size_t* size)
{
    LMC_RETURN_IF(avail < 1, TRUNCATED);
    *kind = src[0];
    if (*kind == LMC_KIND_REFCTX) {
        LMC_RETURN_IF(avail < 4, TRUNCATED);
        *size = lmc_rd24(src + 1);
        LMC_RETURN_IF(*size > avail - 4, TRUNCATED);
        return 4;
    }
    LMC_RETURN_IF(*kind != LMC_KIND_GROUPED, CODER);
    LMC_RETURN_IF(avail < 2, TRUNCATED);
    *mode = src[1];
    LMC_RETURN_IF(*mode & ~(unsigned)(LMC_GROUPED_ROTATED | LMC_GROUPED_PLAIN), CORRUPT);
    return 2;
}

/* The content from hc->done up to upto joins the running hashes. Hashing a
 * block just written reads it from cache: about twice as fast as a pass
 * over the whole chunk afterwards, which comes from memory. Less than 4 KiB
 * waits for the next call (last: not), so that each update is long enough
 * for the vector loop. */
typedef struct { const lmc_content_hashes* hs; const uint8_t* base; size_t done, limit; } hash_cursor;

static void hash_upto(hash_cursor* hc, size_t upto, int last)
{
    upto = LMC_MIN(upto, hc->limit);   /* not into a block still held (held_block) */
    if (!hc->hs || upto <= hc->done || upto - hc->done < (last ? 1u : 4096u)) return;
    lmc_hstate_update(hc->hs->own, hc->base + hc->done, upto - hc->done);
    if (hc->hs->also) lmc_hstate_update(hc->hs->also, hc->base + hc->done, upto - hc->done);
    hc->done = upto;
}

void lmc_payload_hash_begin(lmc_payload_hash* ph, XXH3_state_t* st, const uint8_t* payload, size_t size)
{
    XXH3_64bits_reset(st);
    ph->st = st; ph->base = payload; ph->done = 0; ph->size = size;
}

uint64_t lmc_payload_hash_finish(lmc_payload_hash* ph)
{
    if (ph->done < ph->size) lmc_hstate_update(ph->st, ph->base + ph->done, ph->size - ph->done);
    ph->done = ph->size;
    return XXH3_64bits_digest(ph->st);
}

/* The decoder has read the payload before `at`: it joins the hash once
 * PAYLOAD_STEP bytes or more wait (updates long enough for the vector
 * loop, short enough to be in cache still). */
#define PAYLOAD_STEP ((size_t)64 << 10)
static void payload_upto(lmc_payload_hash* ph, const uint8_t* at)
{
    if (!ph) return;
    size_t const pos = (size_t)(at - ph->base);
    if (pos <= ph->done || pos - ph->done < PAYLOAD_STEP) return;
    lmc_hstate_update(ph->st, ph->base + ph->done, pos - ph->done);
    ph->done = pos;
}

/* Two REFCTX blocks of a class (lmc_refctx_pair_class: wide ones where
 * the CPU has AVX-512, sparse ones anywhere) decode faster together
 * (lmc_refctx_decode_pair), as far as the shorter one goes: such a block
 * can wait here for a later one of its class in the chunk, one block at a
 * time, so that the content hash, which stops at the held block's start,
 * still reads each block soon after it is written. Which block waits,
 * which pairs and which goes alone is planned per chunk (pair_plan). */
typedef struct {
    lmc_refctx_job job;
    unsigned w;
    int cls;
    size_t end;     /* content offset of the block's end */
    int held;
} held_block;

/* The plan: for the chunk's blocks of a class, in order, pair with the
 * held one, wait (the held one goes alone), or go alone (the held one
 * waits on). Chosen to pair the most values, by dynamic programming over
 * which block is held: pairing blocks as they came, a chunk cut across
 * tensors (a short block, full ones, a long partial one) paired the short
 * one with the first full one and left the long one alone. Of the REFCTX
 * values of traj-3m's fp32 delta, 44 % were decoded out of step (alone, or
 * past the end of the shorter block of a pair), 8 % with the plan; bf16
 * delta 19 % and 5 %. A chunk with more such blocks than PLAN_MAX, or
 * whose walk fails, pairs blocks as they come. */
#define PLAN_MAX 64
enum { ACT_NONE, ACT_PAIR, ACT_WAIT, ACT_ALONE };
typedef struct {
    unsigned n, next;
    uint32_t len[PLAN_MAX];   /* the blocks' lengths, */
    uint8_t key[PLAN_MAX];    /* classes and widths */
    uint8_t act[PLAN_MAX];
} pair_plan;

/* The chunk's blocks of a class: their lengths and keys (class and width);
 * how many, or 0 (too many, or a walk error, which decoding will meet) */
static unsigned plan_blocks(const uint8_t* payload, size_t payload_size, size_t content_size, uint64_t ref_size,
                            uint32_t* len, uint8_t* key)
{
    size_t pos = 0, out = 0;
    unsigned k = 0;
    while (out < content_size) {
        piece_hdr ph;
        if (LMC_IS_ERR(read_piece_header(&ph, payload + pos, payload_size - pos, content_size - out, ref_size)))
            return 0;
        pos += ph.hdr;
        size_t const n = ph.len / ph.w, tail = ph.len % ph.w;
        int const refmodel = ((ph.flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == LMC_LAYOUT_REFMODEL;
        size_t const step = refmodel ? LMC_VBLOCK_MAX : LMC_BLOCK_MAX;
        for (unsigned s = 0; s < (refmodel ? 1u : ph.w); s++) {
            for (size_t b = 0; b < n; b += step) {
                size_t const m = LMC_MIN(step, n - b);
                unsigned kind = LMC_KIND_GROUPED, mode = 0, streams = 1;
                size_t size = 0;
                if (refmodel) {
                    size_t const h = read_vblock_head(payload + pos, payload_size - pos, &kind, &mode, &size);
                    if (LMC_IS_ERR(h)) return 0;
                    pos += h;
                    streams = ph.w;
                }
                if (kind == LMC_KIND_REFCTX) {
                    lmc_refctx_job const job = { NULL, NULL, payload + pos, m, size };
                    int const cls = lmc_refctx_pair_class(&job);
                    pos += size;
                    if (!cls) continue;
                    if (k == PLAN_MAX) return 0;
                    len[k] = (uint32_t)m;
                    key[k++] = (uint8_t)(cls << 4 | ph.w);
                    continue;
                }
                for (unsigned t = 0; t < streams; t++) {
                    unsigned coder;
                    size_t const used = lmc_block_skip(payload + pos, payload_size - pos, m, &coder);
                    if (LMC_IS_ERR(used)) return 0;
                    pos += used;
                }
            }
        }
        if (payload_size - pos < tail) return 0;
        pos += tail;
        out += ph.len;
    }
    return k;
}

static void plan_pairs(pair_plan* pl, unsigned n)
{
    const uint32_t* const len = pl->len;
    const uint8_t* const key = pl->key;
    /* v[s] after block k: the most values paired over blocks 0..k with
     * block s-1 held after them (s = 0: none), -1 where no way leads;
     * from and act of each step, to read the plan back from its end */
    int32_t v[PLAN_MAX + 1], nv[PLAN_MAX + 1];
    uint8_t from[PLAN_MAX][PLAN_MAX + 1], act[PLAN_MAX][PLAN_MAX + 1];
    pl->n = n;
    pl->next = 0;
    if (!n) return;
    for (unsigned s = 0; s <= n; s++) v[s] = -1;
    v[0] = 0;
    for (unsigned k = 0; k < n; k++) {
        for (unsigned s = 0; s <= n; s++) nv[s] = -1;
        for (unsigned s = 0; s <= k; s++) {
            int32_t const x = v[s];
            if (x < 0) continue;
#define RELAX(S2, VAL, A) \
    do { if ((VAL) > nv[S2]) { nv[S2] = (VAL); from[k][S2] = (uint8_t)s; act[k][S2] = (A); } } while (0)
            if (s && key[s - 1] == key[k]) RELAX(0, x + (int32_t)LMC_MIN(len[s - 1], len[k]), ACT_PAIR);
            RELAX(s, x, ACT_ALONE);
            RELAX(k + 1, x, ACT_WAIT);
#undef RELAX
        }
        memcpy(v, nv, sizeof(v));
    }
    unsigned s = 0;
    for (unsigned t = 1; t <= n; t++) if (v[t] > v[s]) s = t;
    for (unsigned k = n; k-- > 0;) {
        pl->act[k] = act[k][s];
        s = from[k][s];
    }
}

static size_t flush_held(lmc_chunk_dws* ws, held_block* hb, hash_cursor* hc)
{
    if (!hb->held) return 0;
    hb->held = 0;
    hc->limit = SIZE_MAX;
    LMC_FORWARD(lmc_refctx_decode(&ws->rc, hb->job.dst, hb->job.m, hb->w, hb->job.ref, hb->job.src, hb->job.size));
    hash_upto(hc, hb->end, 0);
    return 0;
}

/* A REFCTX block of m values at content offset `at`: decoded now, alone or
 * with the held one, or held. */
static size_t refctx_block(lmc_chunk_dws* ws, held_block* hb, pair_plan* pl, hash_cursor* hc, unsigned w,
                           const lmc_refctx_job* job, size_t at)
{
    size_t const end = at + job->m * w;
    int const cls = lmc_refctx_pair_class(job);
    int const match = hb->held && hb->w == w && hb->cls == cls;
    unsigned act = ACT_NONE;
    if (cls && pl->next < pl->n) act = pl->act[pl->next++];
    /* without a plan: a block of no class (a small tensor's) goes now,
     * alone, and so does a sparse one while a wide one is held (an
     * unchanged small tensor between two large ones must not break their
     * pair); a block of the held one's class pairs with it */
    if (act == ACT_NONE)
        act = !cls || (cls == 2 && hb->held && hb->cls != cls) ? ACT_ALONE : match ? ACT_PAIR : ACT_WAIT;
    if (act == ACT_ALONE || (act == ACT_PAIR && !match)) {
        LMC_FORWARD(lmc_refctx_decode(&ws->rc, job->dst, job->m, w, job->ref, job->src, job->size));
        hash_upto(hc, end, 0);
        return 0;
    }
    if (act == ACT_PAIR) {
        hb->held = 0;
        hc->limit = SIZE_MAX;
        LMC_FORWARD(lmc_refctx_decode_pair(&ws->rc, &ws->rc2, w, &hb->job, job));
        hash_upto(hc, end, 0);
        return 0;
    }
    LMC_FORWARD(flush_held(ws, hb, hc));
    hb->job = *job;
    hb->w = w;
    hb->cls = cls;
    hb->end = end;
    hb->held = 1;
    hc->limit = at;
    return 0;
}

/* Whether the w byte-stream blocks at p are each CONST 0. */
static int const_zero_streams(const uint8_t* p, size_t avail, unsigned w)
{
    if (avail < 2 * (size_t)w) return 0;
    for (unsigned k = 0; k < w; k++)
        if (p[2 * k] != LMC_CODER_CONST || p[2 * k + 1] != 0) return 0;
    return 1;
}

/* Layout 2: n values in value blocks at content offset out. Returns the
 * payload bytes used, or an error. */
static size_t decode_refmodel(lmc_chunk_dws* ws, held_block* hb, pair_plan* pl, uint8_t* dst, size_t n, unsigned w,
                              const uint8_t* r, const uint8_t* src, size_t avail, hash_cursor* hc, size_t out,
                              lmc_payload_hash* pay)
{
    size_t pos = 0;
    for (size_t b = 0; b < n; b += LMC_VBLOCK_MAX) {
        size_t const m = LMC_MIN((size_t)LMC_VBLOCK_MAX, n - b);
        payload_upto(pay, src + pos);
        unsigned kind, mode = 0;
        size_t size = 0;
        size_t const h = read_vblock_head(src + pos, avail - pos, &kind, &mode, &size);
        LMC_FORWARD(h);
        pos += h;
        if (kind == LMC_KIND_REFCTX) {
            lmc_refctx_job const job = { dst + b * w, r + b * w, src + pos, m, size };
            LMC_FORWARD(refctx_block(ws, hb, pl, hc, w, &job, out + b * w));
            pos += size;
            continue;
        }
        /* an unchanged block (XOR, every stream CONST 0): the reference's
         * values, copied instead of filled, ungrouped and XORed */
        if (!(mode & LMC_GROUPED_PLAIN) && const_zero_streams(src + pos, avail - pos, w)) {
            memcpy(dst + b * w, r + b * w, m * w);
            pos += 2 * (size_t)w;
            hash_upto(hc, out + (b + m) * w, 0);
            continue;
        }
        LMC_RETURN_IF(ws->streams_cap < m * w, MEMORY);
        for (unsigned k = 0; k < w; k++) {
            size_t const used = lmc_block_decode(&ws->blk, ws->streams + k * m, m, src + pos, avail - pos);
            LMC_FORWARD(used);
            pos += used;
        }
        lmc_ungroup(dst + b * w, ws->streams, (mode & LMC_GROUPED_PLAIN) ? NULL : r + b * w, m, w,
                    (int)(mode & LMC_GROUPED_ROTATED));
        hash_upto(hc, out + (b + m) * w, 0);
    }
    return pos;
}

/* A byte-grouped piece, a segment of LMC_BLOCK_MAX values at a time: block
 * b of every stream, then those values ungrouped, a RAW block's bytes read
 * where the payload has them rather than copied to the streams first (the
 * noisy low bytes of a keyframe's floats are mostly RAW: half of an f32
 * keyframe's streams), and hashed while in cache. The blocks' places come
 * from a walk over their headers first, which also checks that they are
 * all there; the payload joins its hash after the walk. Returns the payload
 * position after the blocks. */
#define SEG_BLOCKS_MAX 1024          /* w * nb: every piece of a chunk of up to 64 MiB */
#define SEG_RAW ((uint32_t)1 << 31)  /* at[]: a RAW block */
static size_t decode_segments(lmc_chunk_dws* ws, uint8_t* dst, uint8_t* sbuf, size_t n, size_t nb, unsigned w,
                              const uint8_t* r, int rot, const uint8_t* payload, size_t pos, size_t payload_size,
                              hash_cursor* hc, size_t out, lmc_payload_hash* pay)
{
    uint32_t at[SEG_BLOCKS_MAX];   /* block b of stream k at payload + (at[k * nb + b] & ~SEG_RAW) */
    for (unsigned k = 0; k < w; k++)
        for (size_t b = 0; b < nb; b++) {
            size_t const m = LMC_MIN((size_t)LMC_BLOCK_MAX, n - b * LMC_BLOCK_MAX);
            unsigned coder;
            size_t const used = lmc_block_skip(payload + pos, payload_size - pos, m, &coder);
            LMC_FORWARD(used);
            at[k * nb + b] = (uint32_t)pos | (coder == LMC_CODER_RAW ? SEG_RAW : 0);
            pos += used;
        }
    payload_upto(pay, payload + pos);
    for (size_t b = 0; b < nb; b++) {
        size_t const v = b * LMC_BLOCK_MAX, m = LMC_MIN((size_t)LMC_BLOCK_MAX, n - v);
        const uint8_t* sp[8];
        for (unsigned k = 0; k < w; k++) {
            uint32_t const a = at[k * nb + b];
            size_t const p = a & ~SEG_RAW;
            if (a & SEG_RAW) { sp[k] = payload + p + 1; continue; }   /* the walk checked its m bytes */
            uint8_t* const s = sbuf + (size_t)k * n + v;
            LMC_FORWARD(lmc_block_decode(&ws->blk, s, m, payload + p, payload_size - p));
            sp[k] = s;
        }
        lmc_ungroup_from(dst + v * w, sp, r ? r + v * w : NULL, m, w, rot);
        hash_upto(hc, out + (v + m) * w, 0);
    }
    return pos;
}

size_t lmc_chunk_decode(lmc_chunk_dws* ws, uint8_t* dst, size_t content_size,
                        const uint8_t* payload, size_t payload_size,
                        const uint8_t* ref, uint64_t ref_size, const lmc_content_hashes* hs,
                        lmc_payload_hash* pay)
{
    size_t pos = 0, out = 0;
    hash_cursor hc = { hs, dst, 0, SIZE_MAX };
    held_block hb;
    hb.held = 0;
    /* content needs at least one piece header (and an empty payload may have no buffer at all) */
    LMC_RETURN_IF(content_size && payload_size < LMC_PIECE_HDR, TRUNCATED);
    pair_plan pl;
    /* REFCTX blocks need a reference: without one, nothing to plan */
    plan_pairs(&pl, ref && content_size ? plan_blocks(payload, payload_size, content_size, ref_size, pl.len, pl.key)
                                        : 0);
    while (out < content_size) {
        payload_upto(pay, payload + pos);
        piece_hdr ph;
        LMC_FORWARD(read_piece_header(&ph, payload + pos, payload_size - pos, content_size - out, ref_size));
        LMC_RETURN_IF((ph.flags & LMC_PIECE_XOR) && !ref, REF_REQUIRED);
        pos += ph.hdr;
        size_t const n = ph.len / ph.w, tail = ph.len % ph.w;
        int const rot = ((ph.flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == LMC_LAYOUT_ROTATED;
        const uint8_t* const r = (ph.flags & LMC_PIECE_XOR) ? ref + ph.ref_off : NULL;
        if (((ph.flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == LMC_LAYOUT_REFMODEL) {
            size_t const used = decode_refmodel(ws, &hb, &pl, dst + out, n, ph.w, r, payload + pos, payload_size - pos, &hc, out, pay);
            LMC_FORWARD(used);
            pos += used;
        } else {
        /* width-1 pieces without XOR decode in place: no ungroup pass */
        uint8_t* const sbuf = (ph.w == 1 && !r) ? dst + out : ws->streams;
        LMC_RETURN_IF(sbuf == ws->streams && ws->streams_cap < (size_t)n * ph.w, MEMORY);
        size_t const nb = (n + LMC_BLOCK_MAX - 1) / LMC_BLOCK_MAX;
        if (sbuf != dst + out && nb * ph.w <= SEG_BLOCKS_MAX && payload_size < SEG_RAW) {
            size_t const end = decode_segments(ws, dst + out, sbuf, n, nb, ph.w, r, rot, payload, pos, payload_size,
                                               &hc, out, pay);
            LMC_FORWARD(end);
            pos = end;
        } else {
        for (unsigned k = 0; k < ph.w; k++) {
            uint8_t* const s = sbuf + (size_t)k * n;
            for (size_t b = 0; b < n; b += LMC_BLOCK_MAX) {
                size_t const m = LMC_MIN((size_t)LMC_BLOCK_MAX, n - b);
                payload_upto(pay, payload + pos);
                size_t const used = lmc_block_decode(&ws->blk, s + b, m, payload + pos, payload_size - pos);
                LMC_FORWARD(used);
                pos += used;
            }
        }
        if (sbuf != dst + out) lmc_ungroup(dst + out, sbuf, r, n, ph.w, rot);
        }
        }
        LMC_RETURN_IF(payload_size - pos < tail, TRUNCATED);
        for (size_t t = 0; t < tail; t++) {
            size_t const i = n * ph.w + t;
            dst[out + i] = r ? (uint8_t)(payload[pos + t] ^ r[i]) : payload[pos + t];
        }
        pos += tail;
        out += ph.len;
        hash_upto(&hc, out, 0);
    }
    LMC_FORWARD(flush_held(ws, &hb, &hc));
    LMC_RETURN_IF(pos != payload_size, CORRUPT);
    hash_upto(&hc, out, 1);
    return 0;
}

size_t lmc_chunk_walk(const uint8_t* payload, size_t payload_size, size_t content_size,
                      uint64_t ref_size, lmc_frame_stats* st)
{
    size_t pos = 0, out = 0;
    LMC_RETURN_IF(content_size && payload_size < LMC_PIECE_HDR, TRUNCATED);
    while (out < content_size) {
        piece_hdr ph;
        LMC_FORWARD(read_piece_header(&ph, payload + pos, payload_size - pos, content_size - out, ref_size));
        size_t const start = pos;
        pos += ph.hdr;
        size_t const n = ph.len / ph.w, tail = ph.len % ph.w;
        int const refmodel = ((ph.flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == LMC_LAYOUT_REFMODEL;
        for (size_t b = 0; refmodel && b < n; b += LMC_VBLOCK_MAX) {
            size_t const m = LMC_MIN((size_t)LMC_VBLOCK_MAX, n - b);
            unsigned kind, mode = 0;
            size_t size = 0;
            size_t const h = read_vblock_head(payload + pos, payload_size - pos, &kind, &mode, &size);
            LMC_FORWARD(h);
            pos += h;
            if (kind == LMC_KIND_REFCTX) {
                st->blocks[LMC_CODER_REFCTX]++; st->block_in[LMC_CODER_REFCTX] += m * ph.w;
                st->block_out[LMC_CODER_REFCTX] += h + size;
                pos += size;
                continue;
            }
            for (unsigned k = 0; k < ph.w; k++) {
                unsigned coder;
                size_t const used = lmc_block_skip(payload + pos, payload_size - pos, m, &coder);
                LMC_FORWARD(used);
                st->blocks[coder]++; st->block_in[coder] += m; st->block_out[coder] += used;
                pos += used;
            }
        }
        for (unsigned k = 0; !refmodel && k < ph.w; k++) {
            for (size_t b = 0; b < n; b += LMC_BLOCK_MAX) {
                size_t const m = LMC_MIN((size_t)LMC_BLOCK_MAX, n - b);
                unsigned coder;
                size_t const used = lmc_block_skip(payload + pos, payload_size - pos, m, &coder);
                LMC_FORWARD(used);
                st->blocks[coder]++; st->block_in[coder] += m; st->block_out[coder] += used;
                pos += used;
            }
        }
        LMC_RETURN_IF(payload_size - pos < tail, TRUNCATED);
        pos += tail;
        out += ph.len;
        unsigned const d = ph.dtype < LMC_DTYPE_COUNT ? ph.dtype : 0;
        st->pieces++;
        st->pieces_xor += (ph.flags & LMC_PIECE_XOR) != 0;
        st->pieces_rotated += ((ph.flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == LMC_LAYOUT_ROTATED;
        st->pieces_refmodel += refmodel;
        st->dtype_in[d] += ph.len;
        st->dtype_out[d] += pos - start;
    }
    LMC_RETURN_IF(pos != payload_size, CORRUPT);
    return 0;
}
