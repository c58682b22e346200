/*
 * safetensors.h - map a safetensors header to tensor spans (internal).
 *
 * Layout: u64 LE header length N, N bytes of JSON, then the tensor bytes.
 * The parser only learns where each tensor lies and its dtype; the encoder
 * keeps the header bytes verbatim, so nothing here has to re-serialise JSON.
 * Every input is hostile: a header that does not validate is reported as
 * "not safetensors" and the encoder falls back to generic mode.
 */
#ifndef LMC_SAFETENSORS_H
#define LMC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define LMC_ST_MAX_HEADER  100000000u /* as the reference reader (MAX_HEADER_SIZE) */
#define LMC_ST_MAX_DIMS    16

typedef struct {
    char*    name;       /* NUL-terminated copy, owned by the lmc_st_info */
    size_t   name_len;
    uint8_t  dtype;      /* lmc_dtype code (LMC_DTYPE_BYTES for dtypes without a code) */
    uint8_t  width;      /* bytes per value used for grouping: 1, 2, 4 or 8 */
    uint32_t ndim;
    uint64_t shape[LMC_ST_MAX_DIMS];
    uint64_t begin;      /* absolute file offset: 8 + N + data_offsets[0] */
    uint64_t end;        /* absolute file offset, one past the end */
} lmc_st_tensor;

typedef struct {
    uint64_t       header_total;  /* 8 + N: bytes before the data buffer */
    uint64_t       data_end;      /* absolute offset where the last tensor ends */
    size_t         count;
    lmc_st_tensor* tensors;       /* sorted by begin */
    size_t*        by_name;       /* indices into tensors, sorted by name (for lmc_st_find) */
} lmc_st_info;

/* Looks at the first `avail` bytes of a file. Returns 1 and sets *header_total
 * (8 + N) when they can start a safetensors file (avail >= 8, 2 <= N <=
 * LMC_ST_MAX_HEADER, first non-space JSON byte is '{' when visible); 0 if not. */
int lmc_st_probe(const void* buf, size_t avail, uint64_t* header_total);

/* Parses the header. `buf` holds at least the first `avail` bytes of the file,
 * and avail >= header_total from lmc_st_probe. `file_size` is the total file
 * size, or UINT64_MAX if unknown (streaming); when known, the last tensor must
 * end exactly at file_size, as the reference reader requires.
 * Returns 0 and fills *info (free it with lmc_st_free) on success; -1 if the
 * header is not a valid safetensors header (info is left empty). Rules
 * checked: UTF-8 JSON object; each entry except "__metadata__" has dtype
 * (known string), shape (array of non-negative integers, <= LMC_ST_MAX_DIMS),
 * data_offsets [begin, end] with begin <= end; nelem * bits / 8 == end - begin
 * with overflow-checked products; sorted by begin the tensors tile the data
 * buffer from 0 with no gap or overlap; no duplicate names. Allocates. */
int lmc_st_parse(lmc_st_info* info, const void* buf, size_t avail, uint64_t file_size);

/* lmc_st_parse with a choice of parser, for tests and fuzzing. Headers in
 * the plain subset of JSON that writers produce are read by a fast scanner,
 * the rest by jansson (LMC_ST_ANY); both give the same result where both
 * apply. LMC_ST_FAST_ONLY returns LMC_ST_DECLINED where the scanner would
 * hand the header over. */
typedef enum { LMC_ST_ANY = 0, LMC_ST_JSON_LIB = 1, LMC_ST_FAST_ONLY = 2 } lmc_st_parser;
#define LMC_ST_DECLINED (-2)
int lmc_st_parse_with(lmc_st_info* info, const void* buf, size_t avail, uint64_t file_size, lmc_st_parser how);

void lmc_st_free(lmc_st_info* info);

/* Index of the tensor named `name` (length name_len) in info, or -1. O(log n):
 * lmc_st_parse also builds a by-name order for this. */
long lmc_st_find(const lmc_st_info* info, const char* name, size_t name_len);

#endif
