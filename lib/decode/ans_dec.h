/* ans_dec.h - order-0 rANS block decoder. */
#ifndef LMC_ANS_DEC_H
#define LMC_ANS_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"

typedef struct {
    uint32_t slot[LMC_ANS_M];   /* symbol | (slot - cum) << 8 | (freq - 1) << 20 */
    uint16_t freq[256];
} lmc_ans_dws;

/* Decodes an ANS block payload of `size` bytes into dst[0..m). Returns 0 or an error. */
size_t lmc_ans_decode(lmc_ans_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size);

#endif
