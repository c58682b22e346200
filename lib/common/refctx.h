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
#define LMC_KIND_REFCTX         5       /* tokens: sign and bit length (format 2) */
#define LMC_KIND_GROUPED        6
#define LMC_KIND_REFCTX_SPLIT   7       /* tokens also carry the top raw bit (format 3) */
#define LMC_GROUPED_ROTATED     0x01    /* GROUPED mode bits */
#define LMC_GROUPED_PLAIN       0x02
#define LMC_REFCTX_MAX_GROUPS   16
#define LMC_REFCTX_CONTEXTS     256
#define LMC_REFCTX_ALPHA_MAX    127     /* 4W - 1 split tokens for W = 32 */

/* Tokens of a kind for w-byte values: 2W + 1 (REFCTX), 4W - 1 (REFCTX_SPLIT). */
static inline unsigned lmc_refctx_alpha(unsigned kind, unsigned w)
{
    return kind == LMC_KIND_REFCTX_SPLIT ? 32 * w - 1 : 16 * w + 1;
}

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

/* Why split: below the leading one of |t| the bits are not uniform. A
 * difference distribution that falls with size (Laplace-like, and more so in
 * Adam's moments) puts more values in the lower half of each octave than in
 * the upper, so the first bit under the leading one carries information; as
 * part of the token it is entropy coded in the token's context, at no cost
 * in the decoder (still one table lookup per value).
 *
 * The split token of a difference of bit length k, magnitude mag and sign
 * mask sm: 0 and 1 + neg for k < 2; for k >= 2, with b the bit of mag below
 * its leading one, 4k - 5 + 2b + neg, and k - 2 raw bits e: the bits of mag
 * below b, complemented when t < 0. */
static inline unsigned lmc_refctx_split(unsigned k, uint64_t mag, int64_t sm, uint64_t* e, unsigned* n)
{
    unsigned const neg = (unsigned)(sm & 1);
    if (k < 2) { *n = 0; *e = 0; return k ? 1 + neg : 0; }
    *n = k - 2;
    *e = (mag ^ (uint64_t)sm) & ((1ull << *n) - 1);
    return 4 * k - 5 + 2 * ((unsigned)(mag >> (k - 2)) & 1) + neg;
}

#endif
