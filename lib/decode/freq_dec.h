/* freq_dec.h - rANS frequency tables on the decoder side (doc/format.md, "ANS"). */
#ifndef LMC_FREQ_DEC_H
#define LMC_FREQ_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"

/* Reads a table of at most `alpha` symbols into f[0..alpha) (absent = 0).
 * Frequencies must sum to LMC_ANS_M. Returns the bytes read or an error. */
size_t lmc_freq_read(uint16_t* f, unsigned alpha, const uint8_t* src, size_t size);
/* Slot table: T[slot] = symbol | (slot - cum) << 8 | (freq - 1) << 20. */
void lmc_freq_slots(uint32_t* T, const uint16_t* f, unsigned alpha);

#endif
