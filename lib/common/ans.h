/* ans.h - the order-0 rANS block coder shared definitions (doc/format.md, "ANS").
 *
 * Why a second entropy coder: Huffman spends a whole number of bits on every
 * symbol. On the high-byte stream of a delta, where one byte value covers
 * 80-95 % of the block, that costs 30-60 % over the entropy; on flat
 * mantissa bytes it costs 1-3 %. rANS codes fractional bits. */
#ifndef LMC_ANS_H
#define LMC_ANS_H

#include <stdint.h>

#define LMC_ANS_PROB_BITS 12
#define LMC_ANS_M         (1u << LMC_ANS_PROB_BITS)   /* frequencies sum to M */
#define LMC_ANS_L         (1u << 15)                  /* state interval [L, 2^31): the reciprocal division is exact there */
/* Renormalisation moves 16-bit words: a state needs at most one per symbol,
 * so the decoder's renormalisation is a conditional move, not a loop. */
#define LMC_ANS_STATES    4                           /* symbol i uses state i mod 4 */


/* ANS1 (order-1): the table of symbol i is chosen by the byte D places back. */
#define LMC_ANS1_MAX_GROUPS 16
#define LMC_ANS1_DIST       4     /* the encoder's D: a float's byte k four values back, one state's previous symbol */

#endif
