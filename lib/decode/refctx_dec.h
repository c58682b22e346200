/* refctx_dec.h - decode REFCTX value blocks (doc/format.md, "Layout 2"). */
#ifndef LMC_REFCTX_DEC_H
#define LMC_REFCTX_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "refctx.h"

typedef struct {
    /* slot tables of all groups, back to back: freq << 16 | (slot - cum), and the token */
    uint32_t slot[LMC_REFCTX_MAX_GROUPS * LMC_ANS_M];
    uint8_t  stok[LMC_REFCTX_MAX_GROUPS * LMC_ANS_M];
    int64_t  tbase[LMC_REFCTX_ALPHA_MAX + 63];   /* token -> base b (padded: 7-bit index) */
    uint8_t  tbits[LMC_REFCTX_ALPHA_MAX + 63];   /* token -> raw bit count n */
    uint32_t tmask[LMC_REFCTX_ALPHA_MAX + 63];   /* token -> 2^n - 1 */
    uint16_t base[LMC_REFCTX_CONTEXTS];          /* context -> group's first slot */
    uint16_t freq[LMC_REFCTX_ALPHA_MAX];
    uint8_t  tok[LMC_VBLOCK_MAX];                /* pass 1 -> pass 2 */
    int32_t  tl[LMC_VBLOCK_MAX];                 /* 16-bit values: each t, pass 2a -> 2b */
} lmc_refctx_dws;

/* Decodes the REFCTX data src[0..size) (after the kind byte and u24 size)
 * of m values of w bytes into dst, against their reference values `ref`.
 * Returns 0 or an error. */
size_t lmc_refctx_decode(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w,
                         const uint8_t* ref, const uint8_t* src, size_t size);

#endif
