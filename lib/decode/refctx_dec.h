/* refctx_dec.h - decode REFCTX value blocks (doc/format.md, "Layout 2"). */
#ifndef LMC_REFCTX_DEC_H
#define LMC_REFCTX_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "refctx.h"

typedef struct {
    /* slot tables of all groups, back to back, one u32 per slot:
     * token | (slot - cum) << 7 | freq << 19 (freq can be M = 2^12, 13 bits) */
    uint32_t slot[LMC_REFCTX_MAX_GROUPS * LMC_ANS_M];
    /* r >> (W - 9) -> its group's slot table: the context plus the sign bit,
     * so no mask, and a pointer, so no add before the slot load */
    const uint32_t* gtab[2 * LMC_REFCTX_CONTEXTS];
    /* token tables, indexed by the stored token byte: its bit 7 is a bias bit
     * (the low byte of the slot entry), so entries b and b | 128 agree */
    int64_t  tbase[256];                         /* token -> base b */
    uint8_t  tbits[256];                         /* token -> raw bit count n */
    uint32_t tmask[256];                         /* token -> 2^n - 1 */
    uint16_t freq[LMC_REFCTX_ALPHA_MAX];
    uint8_t  tok[LMC_VBLOCK_MAX];                /* pass 1 -> pass 2 */
    int32_t  tl[LMC_VBLOCK_MAX];                 /* 16-bit values without AVX2: each t, pass 2a -> 2b */
} lmc_refctx_dws;

/* Decodes the REFCTX data src[0..size) (after the kind byte and u24 size)
 * of m values of w bytes into dst, against their reference values `ref`.
 * Returns 0 or an error. */
size_t lmc_refctx_decode(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w,
                         const uint8_t* ref, const uint8_t* src, size_t size);

#endif
