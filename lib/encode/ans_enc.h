/* ans_enc.h - order-0 rANS block encoder. */
#ifndef LMC_ANS_ENC_H
#define LMC_ANS_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"

/* Per-symbol encoding constants, one array per field so that the symbol
 * byte indexes each with a scaled address and no arithmetic: a state
 * x > xmax_m1 first emits a renormalisation word; then x becomes
 * x + bias + q * cmpl, where q = x / f is the high half of x * rcp (exact
 * for x < 2^31). */
typedef struct {
    uint64_t rcp[256];
    uint64_t xmax_m1[256];
    uint64_t bias[256];
    uint64_t cmpl[256];
} lmc_ans_esym;

typedef struct {
    uint16_t     freq[256];
    lmc_ans_esym sym;
    uint8_t      scratch[65536 + 64 + 4 * 4];  /* renormalisation bytes, written backwards */
} lmc_ans_ws;

/* Normalises hist (m symbols) to frequencies summing to LMC_ANS_M into
 * ws->freq, and returns the estimated payload size in bytes (table, states
 * and coded bytes). */
size_t lmc_ans_prepare(lmc_ans_ws* ws, const uint32_t hist[256], size_t m);

/* Codes src[0..m) with the prepared frequencies into dst (block payload, no
 * coder byte). Returns the payload size, or 0 if it would exceed cap. */
size_t lmc_ans_encode(lmc_ans_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m);

#endif
