/* chunk_dec.h - decode one chunk payload into its content. */
#ifndef LMC_CHUNK_DEC_H
#define LMC_CHUNK_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "lmc.h"
#include "block_dec.h"
#include "refctx_dec.h"
#include "hash.h"

typedef struct {
    lmc_block_dws blk;
    lmc_refctx_dws rc;
    lmc_refctx_dws rc2;         /* the second block of a pair (lmc_refctx_decode_pair) */
    uint8_t*      streams;      /* at least the chunk content size */
    size_t        streams_cap;
} lmc_chunk_dws;

/* Running hashes of the content as it is decoded: own, and also (NULL for
 * none), each XXH3 state given every content byte once, in order. */
typedef struct { XXH3_state_t* own; XXH3_state_t* also; } lmc_content_hashes;

/* The payload's hash, taken as the decoder goes, a little behind it: the
 * decoder's reads bring each payload byte from memory once, overlapped
 * with its work, and the hash reads it from cache. Taken in one pass
 * before decoding, it was about 5 % of a bf16 delta's decompression on
 * this project's VM (the payload read from memory by a tight loop); taken
 * ahead of the decoder, no better. `done` bytes from `base` have joined
 * `st`; lmc_payload_hash_finish adds the rest. */
typedef struct { XXH3_state_t* st; const uint8_t* base; size_t done, size; } lmc_payload_hash;

void lmc_payload_hash_begin(lmc_payload_hash* ph, XXH3_state_t* st, const uint8_t* payload, size_t size);
/* The payload's H64: the bytes not hashed yet join, whatever the decoder reached. */
uint64_t lmc_payload_hash_finish(lmc_payload_hash* ph);

/* Decodes `payload` (already checksum-verified or not: this never trusts it)
 * into dst[0..content_size). With hs, the content joins hs->own (and
 * hs->also) value block by value block, while it is still in cache; after an
 * error the states hold a prefix. With pay (begun on this payload), the
 * payload joins it as the blocks are decoded; its caller finishes it,
 * after an error too. Returns 0 or an error. */
size_t lmc_chunk_decode(lmc_chunk_dws* ws, uint8_t* dst, size_t content_size,
                        const uint8_t* payload, size_t payload_size,
                        const uint8_t* ref, uint64_t ref_size, const lmc_content_hashes* hs,
                        lmc_payload_hash* pay);

/* Walks a chunk payload's pieces and blocks without decoding; adds to *st. */
size_t lmc_chunk_walk(const uint8_t* payload, size_t payload_size, size_t content_size,
                      uint64_t ref_size, lmc_frame_stats* st);

#endif
