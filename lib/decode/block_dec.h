/* block_dec.h - decode one block of one byte stream (doc/format.md, "Block"). */
#ifndef LMC_BLOCK_DEC_H
#define LMC_BLOCK_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "huf.h"
#include "ans_dec.h"

typedef struct {
    uint16_t lit[LMC_HUF_TABLE_SIZE];   /* (symbol << 8) | length; length 0 = unassigned */
    uint32_t lit2[LMC_HUF_TABLE_SIZE];  /* up to three symbols a lookup (block_dec.c, build_multi_table) */
    uint32_t rle[LMC_HUF_TABLE_SIZE];   /* (symbol << 8) | length */
    uint8_t  len[LMC_ALPHA_RLE];
    uint16_t code[LMC_ALPHA_RLE];
    lmc_ans_dws ans;
    lmc_ans1_dws ans1;
} lmc_block_dws;

/* Reads a Huffman table (u16 nsym + nibbles) for an alphabet of `alpha`
 * symbols into len[0..alpha). Returns the bytes read or an error. */
size_t lmc_huf_read_table(uint8_t* len, unsigned alpha, const uint8_t* src, size_t srcSize);

/* Decodes one block of exactly m bytes (1..LMC_BLOCK_MAX) from src into dst.
 * Returns the bytes of src consumed, or an error. Never reads past
 * src + srcSize nor writes past dst + m. */
size_t lmc_block_decode(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t srcSize);

/* Walks one block without decoding it. Returns the bytes it occupies, or an
 * error; *coder receives its coder id. */
size_t lmc_block_skip(const uint8_t* src, size_t srcSize, size_t m, unsigned* coder);

#endif
