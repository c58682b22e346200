/* chunk_enc.h - code one chunk: its pieces, their streams, their blocks. */
#ifndef LMC_CHUNK_ENC_H
#define LMC_CHUNK_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "lmc.h"
#include "frame.h"
#include "block_enc.h"
#include "refctx_enc.h"
#include "hash.h"
#include "detect.h"

/* A running XXH3 hash of bytes from base on, done of them hashed so far;
 * st is created by the workspace's owner with XXH3_createState(), which
 * aligns it as XXH3's vector loops need. */
typedef struct { XXH3_state_t* st; const uint8_t* base; size_t done; } lmc_hash_cursor;

typedef struct {
    lmc_block_ws blk;
    lmc_refctx_ws rc;
    uint8_t      vtmp[4 * LMC_VBLOCK_MAX + 64];   /* the losing candidate of a value block */
    uint16_t     tcount[LMC_REFCTX_CONTEXTS * LMC_REFCTX_ALPHA_MAX];   /* sampled tokens per context */
    uint8_t      tseen[LMC_REFCTX_CONTEXTS];
    uint8_t*     streams;      /* grouped bytes of the current piece */
    size_t       streams_cap;
    lmc_piece    split[LMC_DETECT_MAX_OUT];   /* a piece of unknown layout, split by guessed widths */
    int          lean;         /* REFCTX won the chunk's last value block by a wide margin (chunk_enc.c) */
    /* the chunk's content and payload, hashed as they are coded (chunk_enc.c,
     * hash_upto) */
    lmc_hash_cursor content_hash, payload_hash;
} lmc_chunk_ws;

/* Bound of a whole chunk (header included) of `content` bytes. */
static inline size_t lmc_chunk_bound(size_t content) { return LMC_CHUNK_HDR_SIZE + (size_t)lmc_chunk_payload_limit(content); }
/* Room a chunk needs while it is being coded: pieces are written before the
 * encoder knows whether the chunk will fit its bound (if not, it is stored). */
static inline size_t lmc_chunk_work_size(size_t content) { return lmc_chunk_bound(content) + content / 2 + 4096; }

/* Codes the chunk whose content is `content[0..size)` (content offset
 * pieces[0].off) into dst, which has dst_cap >= lmc_chunk_work_size(size)
 * bytes. The result is at most lmc_chunk_bound(size). ref is the whole reference (or NULL). `layout`: 0 auto, 1 grouped,
 * 2 rotated. Adds to *st; *content_hash = H64 of the content (its low 32 bits
 * are the chunk's content checksum; the frame's hash is made of these).
 * Returns the chunk's size. */
size_t lmc_chunk_encode(lmc_chunk_ws* ws, uint8_t* dst, size_t dst_cap, const uint8_t* content, size_t size,
                        const lmc_piece* pieces, size_t npieces, const uint8_t* ref,
                        unsigned coders, int layout, lmc_frame_stats* st, uint64_t* content_hash);

#endif
