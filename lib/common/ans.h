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
/* The encoder's D, unless the byte a row up does better: a float's byte k
 * 32 values back, each state's previous symbol in a block of 32 states.
 * Until format 6 it was 4 values back (each of 4 states' previous symbol),
 * which codes Adam moments' keyframes 0.1 % smaller but decodes at the
 * scalar speed (traj-3m's moments keyframe: 21.43 against 21.45 MB,
 * decoded 1.2x as fast with D = 32, bench/data/traj-3m step 600). */
#define LMC_ANS1_DIST       32
/* Format 6: bit 7 of an ANS1 block's G byte gives it 32 states (symbol i
 * uses state i mod 32). With D >= 32 a round of 32 symbols has all its
 * contexts decoded already, so a vector decoder takes the 32 states in two
 * 16-lane vectors; with 4 states a symbol cost ~2.3 ns on the AMD EPYC VM,
 * the scalar chain's throughput whatever the renormalisation did. */
#define LMC_ANS1_WIDE        0x80
#define LMC_ANS1_STATES_WIDE 32
#define LMC_ANS1_STATES_MAX  32
#define LMC_ANS1_WIDE_DIST   32    /* the encoder's wide blocks: D at least this */
#define LMC_ANS1_WIDE_MIN    4096  /* ... and an estimated size at least this: 112 more bytes of states are <= 2.7 % */

#endif
