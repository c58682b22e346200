/* ans_dec.h - order-0 rANS block decoder. */
#ifndef LMC_ANS_DEC_H
#define LMC_ANS_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"

/* One decoding slot: the next state is f * (x >> PROB_BITS) + adj. Kept apart
 * from the symbol so that both halves load straight into registers, ready for
 * the multiply (no shift or mask on the state's dependency chain). */
typedef struct { uint16_t f, adj; } lmc_ans_dslot;

typedef struct {
    lmc_ans_dslot slot[LMC_ANS_M];   /* f(s), slot - cum(s) */
    uint8_t  sym[LMC_ANS_M];
    uint16_t freq[256];
} lmc_ans_dws;

/* Decodes an ANS block payload of `size` bytes into dst[0..m). Returns 0 or an error. */
size_t lmc_ans_decode(lmc_ans_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size);

/* ANS1 (order-1 rANS): per group, each slot's symbol s, its frequency f
 * and the slot's offset in s's range, s | (f - 1) << 8 | (slot - cum) << 20
 * (f - 1: a group of one symbol has f = 4096), so that a state's step
 * waits for one load (16 KiB a group, 80 KiB for 5); context -> the
 * group's entries (a pointer: no index arithmetic on the chain). */
typedef struct {
    uint32_t ent[LMC_ANS1_MAX_GROUPS][LMC_ANS_M];
    const uint32_t* tab[256];   /* context -> its group's entries */
    uint32_t goff[256];         /* context -> its group's offset in ent (g << 12), for the vector loop */
    uint16_t freq[256];
} lmc_ans1_dws;

/* Decodes an ANS1 block payload of `size` bytes into dst[0..m). Returns 0 or an error. */
size_t lmc_ans1_decode(lmc_ans1_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size);

#endif
