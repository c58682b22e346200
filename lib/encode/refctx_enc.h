/* refctx_enc.h - REFCTX value blocks: the difference to the reference, coded
 * with rANS tables chosen by the reference's exponent (doc/format.md, "Layout 2"). */
#ifndef LMC_REFCTX_ENC_H
#define LMC_REFCTX_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "refctx.h"
#include "freq_enc.h"

/* Per-thread scratch (about 600 KiB), reused for every block. */
typedef struct {
    uint32_t count[LMC_REFCTX_CONTEXTS][LMC_REFCTX_ALPHA_MAX];   /* tokens per context; rows of
                                                                  * `present` contexts are cleared lazily */
    uint8_t  raw[4 * LMC_VBLOCK_MAX + 16];      /* the raw-bit stream, written by the analysis pass */
    uint8_t  tok[LMC_VBLOCK_MAX];
    uint8_t  ctx[LMC_VBLOCK_MAX];
    uint8_t  present[LMC_REFCTX_CONTEXTS];
    unsigned npresent;
    /* the model of the prepared block */
    unsigned w, alpha, ngroups;
    size_t   m;
    uint64_t raw_bits;
    uint8_t  seen[LMC_REFCTX_CONTEXTS];          /* contexts met in the block */
    uint8_t  bound[LMC_REFCTX_MAX_GROUPS];       /* first context of each group (bound[0] = 0) */
    uint8_t  map[LMC_REFCTX_CONTEXTS];           /* context -> group */
    uint16_t freq[LMC_REFCTX_MAX_GROUPS][LMC_REFCTX_ALPHA_MAX];
    lmc_freq_esym esym[LMC_REFCTX_MAX_GROUPS][LMC_REFCTX_ALPHA_MAX];
    uint32_t gcount[LMC_REFCTX_CONTEXTS][LMC_REFCTX_ALPHA_MAX];  /* merge scratch */
    uint8_t  words[2 * LMC_VBLOCK_MAX + 64];     /* renormalisation words, written backwards */
} lmc_refctx_ws;

/* Pass over m values (1 <= m <= LMC_VBLOCK_MAX, w in {2, 4}) of src and
 * their reference values: tokens, context counts, context groups and tables.
 * Returns the exact size of the REFCTX block (kind byte included) that
 * lmc_refctx_encode will write. */
size_t lmc_refctx_prepare(lmc_refctx_ws* ws, const uint8_t* src, const uint8_t* ref, size_t m, unsigned w);

/* Writes the prepared block (kind, size, data) to dst; returns its size, or 0
 * if it exceeds cap. dst needs 8 bytes of slack past cap. */
size_t lmc_refctx_encode(lmc_refctx_ws* ws, uint8_t* dst, size_t cap);

#endif
