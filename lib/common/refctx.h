/* refctx.h - layout 2 (doc/format.md, "Layout 2: reference-modelled"), shared by encoder and decoder.
 *
 * Why model the difference and not the XOR: a small update of a float moves
 * its bit pattern by a small integer, but XOR turns every carry into a run of
 * flipped bits (0x3F -> 0x40 is 0x7F as XOR, 1 as a difference). And why the
 * reference's exponent as context: the update is roughly the same size in
 * absolute terms across a tensor, so its size in units of the last place
 * scales with 2^-exponent; the exponent, which the decoder already has,
 * predicts the bit length of the difference. */
#ifndef LMC_REFCTX_H
#define LMC_REFCTX_H

#include <stdint.h>
#include "ans.h"

#define LMC_LAYOUT_REFMODEL     2
#define LMC_VBLOCK_MAX          65536u  /* values per value block */
#define LMC_KIND_REFCTX         5
#define LMC_KIND_GROUPED        6
#define LMC_GROUPED_ROTATED     0x01    /* GROUPED mode bits */
#define LMC_GROUPED_PLAIN       0x02
#define LMC_REFCTX_MAX_GROUPS   16
#define LMC_REFCTX_CONTEXTS     256
#define LMC_REFCTX_ALPHA_MAX    65      /* 2W + 1 tokens for W = 32 */
/* Bit 7 of a REFCTX block's group-count byte (format 4): the tokens use 32
 * interleaved rANS states, not 4. A decoder with 16-lane vectors then runs
 * two independent vectors of states (one is bound by its chain of gather,
 * multiply and renormalisation); the 112 more bytes of states are paid only
 * by blocks large enough (the encoder's LMC_REFCTX_WIDE_MIN). */
#define LMC_REFCTX_WIDE         0x80u
#define LMC_REFCTX_STATES_WIDE  32
#define LMC_REFCTX_STATES_MAX   32

static inline unsigned lmc_refctx_alpha(unsigned w) { return 16 * w + 1; }

/* Context: bits W-9..W-2 of the reference value (the exponent of bf16 and f32). */
static inline unsigned lmc_refctx_ctx(uint32_t r, unsigned bits) { return (r >> (bits - 9)) & 255u; }

/* Token of a difference of magnitude mag (bit length k) and sign neg. */
static inline unsigned lmc_refctx_token(unsigned k, unsigned neg) { return k ? 2 * k - 1 + neg : 0; }

/* The coded difference of value c to reference value r (bits = W):
 * t = (|c| or, across zero, ~|c|) - |r|, which is the format's mono
 * difference without the mapping. Returns its token; *mag = |t|, *sm = the
 * sign of t as a mask (0 or -1), *k = bit length of |t|. */
static inline unsigned lmc_refctx_diff(uint64_t c, uint64_t r, unsigned bits, uint64_t* mag, int64_t* sm, unsigned* k)
{
    uint64_t const M = (1ull << (bits - 1)) - 1;
    int64_t const cross = -(int64_t)((c ^ r) >> (bits - 1) & 1);
    int64_t const t = (int64_t)((c & M) ^ (uint64_t)cross) - (int64_t)(r & M);
    *sm = t >> 63;
    *mag = (uint64_t)((t ^ *sm) - *sm);
    *k = 64u - (unsigned)__builtin_clzll(*mag | 1) - (*mag == 0);
    return lmc_refctx_token(*k, (unsigned)(*sm & 1));
}

#endif
