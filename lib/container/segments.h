/* segments.h - how the encoder sees a file: runs of values of one width,
 * each coded whole or as an XOR against a place in the reference. */
#ifndef LMC_SEGMENTS_H
#define LMC_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>
#include "lmc.h"

typedef struct {
    uint64_t off, len;     /* content range; the last segment runs to UINT64_MAX */
    uint64_t ref_off;      /* with xor_ref: where its values lie in the reference */
    uint8_t  width, dtype, xor_ref, float_like;
    uint8_t  detect;       /* bytes of unknown layout: widths are guessed as chunks are coded */
    uint32_t row;          /* values per row (a tensor's last dimension, when it has two or more), 0 unknown */
} lmc_seg;

typedef struct {
    lmc_seg*   v;
    size_t     n, cap;
    lmc_format format;     /* what was recognised */
    size_t     tensors_matched, tensors_total;
} lmc_segs;

/* Streaming encoders buffer at most this much of a torch.save zip to parse
 * it; a larger one (or one of unknown size) is coded in generic mode, unless
 * the caller's buffer already holds the whole file (no copy is then made).
 * 32 MiB keeps a stream within the memory bound of 64 MiB + threads x 2
 * chunks; generic mode finds the float runs of an archive to within 0.2 %
 * of its torch coding's size (2026-12-05, 84 and 231 MB archives). Until
 * then 1 GiB. */
#define LMC_TZ_MAX_BUFFERED ((uint64_t)32 << 20)

/* Bytes of the file's start that lmc_segs_build needs to see for `fmt`
 * (AUTO or SAFETENSORS: the safetensors header; AUTO or TORCH_ZIP: a zip
 * needs the whole file, asked for only when file_size, the pledged input
 * size or UINT64_MAX, is at most LMC_TZ_MAX_BUFFERED), given the first
 * `avail` bytes. Returns 0 when `avail` is enough (or the file cannot be
 * parsed), else the total prefix length wanted. Never more than
 * max(8 + 100 MB, LMC_TZ_MAX_BUFFERED). */
uint64_t lmc_segs_prefix_needed(lmc_format fmt, const uint8_t* head, size_t avail, uint64_t file_size);

/* Builds the segment list covering [0, UINT64_MAX). head holds the first
 * `avail` bytes of the input (enough per lmc_segs_prefix_needed unless the
 * whole input is shorter); file_size is the input size or UINT64_MAX.
 * ref/ref_size: the reference, or NULL. Returns 0 or LMC_ERR_MEMORY. */
size_t lmc_segs_build(lmc_segs* s, lmc_format fmt, lmc_dtype dtype, const uint8_t* head, size_t avail,
                      uint64_t file_size, const uint8_t* ref, size_t ref_size);

void lmc_segs_free(lmc_segs* s);

/* Index of the segment containing content offset `off`, searching from `hint`. */
size_t lmc_segs_find(const lmc_segs* s, uint64_t off, size_t hint);

#endif
