/* freq_enc.h - rANS frequency tables on the encoder side: normalisation and
 * the compact table encoding of doc/format.md ("ANS"), for any alphabet up to 256. */
#ifndef LMC_FREQ_ENC_H
#define LMC_FREQ_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"

/* Scales hist[0..alpha) (summing to total > 0) to frequencies summing to
 * LMC_ANS_M, every present symbol keeping at least 1. */
void lmc_freq_normalise(uint16_t* f, const uint32_t* hist, unsigned alpha, uint64_t total);
/* Bytes lmc_freq_write would write. */
size_t lmc_freq_size(const uint16_t* f, unsigned alpha);
/* Writes the table; returns its size. */
size_t lmc_freq_write(uint8_t* dst, const uint16_t* f, unsigned alpha);

/* Encoder view of one symbol: division by the frequency is replaced by a
 * multiplication with a precomputed reciprocal (Alverson's method). */
typedef struct {
    uint32_t xmax, rcp, bias;
    uint16_t cmpl;
    uint8_t  shift;
} lmc_freq_esym;
void lmc_freq_esyms(lmc_freq_esym* e, const uint16_t* f, unsigned alpha);

/* Context merging for context-modelled coders (REFCTX, ANS1): rows[0..n)
 * hold the symbol counts (alpha wide, stride apart) of the contexts present,
 * in context order, first[k] the context of row k. Neighbouring rows are
 * merged greedily, cheapest first, while a merge costs fewer bits than the
 * table it saves, and until at most max_groups remain. The groups are left
 * in rows[0..G) and first[0..G); returns G (n <= 256). */
unsigned lmc_freq_merge(uint32_t* rows, size_t stride, uint8_t* first, unsigned n, unsigned alpha, unsigned max_groups);

#endif
