/* block_enc.h - code one block of one byte stream with the smallest coder. */
#ifndef LMC_BLOCK_ENC_H
#define LMC_BLOCK_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "huf.h"
#include "ans_enc.h"

/* Per-thread scratch, reused for every block: no allocation per block. */
typedef struct {
    uint16_t tok_sym[LMC_BLOCK_MAX];   /* RLE tokens */
    uint16_t tok_ext[LMC_BLOCK_MAX];   /* extra bits value of run tokens */
    uint32_t freq[LMC_ALPHA_RLE];
    uint8_t  len_lit[LMC_ALPHA_LIT];
    uint8_t  len_rle[LMC_ALPHA_RLE];
    uint16_t code[LMC_ALPHA_RLE];
    uint32_t sort_a[LMC_ALPHA_RLE], sort_b[LMC_ALPHA_RLE];
    lmc_ans_ws ans;
    lmc_ans1_ws ans1;
} lmc_block_ws;

/* Worst-case output of lmc_block_encode for m bytes: a RAW block. The writer
 * may store up to LMC_BLOCK_SLACK bytes past the block's end (overwritten later). */
#define LMC_BLOCK_BOUND(m) (1 + (size_t)(m))
#define LMC_BLOCK_SLACK 16

/* 1 when a sample (8 windows of 1 KiB) of a large block already has over 7.95 bits
 * of entropy per byte: no code can then gain enough to pay for its table, so
 * the block is stored without a full histogram (mantissa bytes of fp32). */
int lmc_block_looks_raw(const uint8_t* src, size_t m);

/* lmc_block_looks_raw and, when that is 0, lmc_histogram into hist, in one
 * pass over the block: returns 1 (hist undefined) or 0 (hist filled). */
int lmc_block_scan(uint32_t hist[256], const uint8_t* src, size_t m);

/* How many runs of byte b (maximal, length >= 1) src[0..m) holds, m >= 1:
 * what the RLE estimate needs. */
size_t lmc_count_runs(const uint8_t* src, size_t m, uint8_t b);

/* Histogram of m bytes with several count tables (breaks store-to-load chains). */
void lmc_histogram(uint32_t hist[256], const uint8_t* src, size_t m);

/* Codes src[0..m) (1 <= m <= LMC_BLOCK_MAX) into dst; `hist` is its histogram.
 * `coders` is a bit mask of allowed coder ids (RAW is always allowed). `row`:
 * the values per row of the tensor the stream comes from (0: unknown), a
 * second distance for ANS1's context besides 4.
 * Returns the bytes written (<= LMC_BLOCK_BOUND(m)); dst must have
 * LMC_BLOCK_BOUND(m) + LMC_BLOCK_SLACK bytes of room. */
size_t lmc_block_encode(lmc_block_ws* ws, uint8_t* dst, const uint8_t* src, size_t m,
                        const uint32_t hist[256], unsigned coders, unsigned row);

/* Exposed for tests: optimal lengths limited to maxbits; returns the max length used. */
unsigned lmc_huf_lengths(lmc_block_ws* ws, uint8_t* len, const uint32_t* freq, unsigned alpha, unsigned maxbits);

#endif
