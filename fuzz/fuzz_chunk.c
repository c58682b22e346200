/*
 * fuzz_chunk.c - libFuzzer target for one chunk payload, below the
 * checksums: lmc_chunk_walk and lmc_chunk_decode, which the frame decoder
 * runs on every payload whose checksum matches. A checksum is easy to forge,
 * so these must treat every byte as hostile, and fuzz_frame, whose inputs
 * must get XXH3 right first, seldom reaches them with a mutated payload.
 *
 * Input: byte 0 bit 0 set: the chunk has the reference (a fixed float-like
 * buffer of 2^20 + 8 bytes, lmc_fuzz_chunk_ref); bit 1 set: the content
 * hashes run as the chunk decodes. Bytes 1-3: the content size (u24, taken
 * modulo 2^20 + 9). Then the payload. The payload, the output and the
 * byte-group buffer have exact sizes, so ASan sees any overrun. Whatever
 * decodes, the walk must accept (the frame decoder walks a payload before
 * it sizes its buffers).
 *
 * tests/test_regressions.c replays fuzz/regressions/chunk/ through
 * lmc_fuzz_chunk_one (it defines LMC_FUZZ_CHUNK_NO_ENTRY first).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_dec.h"
#include "lmc.h"

#define FUZZ_CHUNK_REF_SIZE (((size_t)1 << 20) + 8)

/* Shared with fuzz/gen_chunk_seeds.c: bf16-like words with exponents near
 * 1 (a 4-byte read of two of them is an fp32-like value too). */
void lmc_fuzz_chunk_ref(uint8_t* ref, size_t n);
void lmc_fuzz_chunk_ref(uint8_t* ref, size_t n)
{
    uint32_t x = 2463534242u;
    for (size_t i = 0; i + 1 < n; i += 2) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        uint32_t const v = (x & 1) << 15 | (112 + (x >> 8) % 20) << 7 | ((x >> 16) & 0x7F);
        ref[i] = (uint8_t)v;
        ref[i + 1] = (uint8_t)(v >> 8);
    }
    if (n & 1) ref[n - 1] = 0x3F;
}

int lmc_fuzz_chunk_one(const uint8_t* data, size_t size);
int lmc_fuzz_chunk_one(const uint8_t* data, size_t size)
{
    static uint8_t* ref;
    static lmc_chunk_dws* ws;
    if (size < 4) return 0;
    if (!ref) {
        ref = (uint8_t*)malloc(FUZZ_CHUNK_REF_SIZE);
        ws = (lmc_chunk_dws*)calloc(1, sizeof(*ws));
        if (!ref || !ws) abort();
        lmc_fuzz_chunk_ref(ref, FUZZ_CHUNK_REF_SIZE);
    }
    int const with_ref = data[0] & 1, hashed = (data[0] >> 1) & 1;
    size_t const content = ((size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16) % (FUZZ_CHUNK_REF_SIZE + 1);
    size_t const ps = size - 4;
    uint8_t* const payload = (uint8_t*)malloc(ps ? ps : 1);
    uint8_t* const dst = (uint8_t*)malloc(content ? content : 1);
    ws->streams = (uint8_t*)malloc(content ? content : 1);
    if (!payload || !dst || !ws->streams) abort();
    ws->streams_cap = content;
    memcpy(payload, data + 4, ps);

    uint64_t const ref_size = with_ref ? FUZZ_CHUNK_REF_SIZE : 0;
    lmc_frame_stats st;
    memset(&st, 0, sizeof(st));
    size_t const walked = lmc_chunk_walk(payload, ps, content, ref_size, &st);
    XXH3_state_t own, also;
    XXH3_64bits_reset(&own);
    XXH3_64bits_reset(&also);
    lmc_content_hashes const hs = { &own, &also };
    XXH3_state_t pst;
    lmc_payload_hash ph;
    lmc_payload_hash_begin(&ph, &pst, payload, ps);
    size_t const decoded = lmc_chunk_decode(ws, dst, content, payload, ps, with_ref ? ref : NULL, ref_size,
                                            hashed ? &hs : NULL, hashed ? &ph : NULL);
    if (!lmc_is_error(decoded) && lmc_is_error(walked)) abort();
    /* the payload's hash taken as the decoder went, however far it got, is
     * the payload's H64 */
    if (hashed && lmc_payload_hash_finish(&ph) != lmc_h64(payload, ps)) abort();

    free(ws->streams);
    ws->streams = NULL;
    ws->streams_cap = 0;
    free(dst);
    free(payload);
    return 0;
}

#ifndef LMC_FUZZ_CHUNK_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return lmc_fuzz_chunk_one(data, size); }
#endif
