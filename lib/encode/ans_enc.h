/* ans_enc.h - order-0 rANS block encoder. */
#ifndef LMC_ANS_ENC_H
#define LMC_ANS_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "ans.h"
#include "freq_enc.h"

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

/* ANS1 (order-1 rANS, doc/format.md "ANS1"). Tried only on blocks with few
 * distinct bytes (an exponent stream), so that the count rows stay few. */
#define LMC_ANS1_MAX_CTX 64

typedef struct {
    lmc_ans_esym  esym[LMC_ANS1_MAX_GROUPS];      /* the coder's view of each group's symbols */
    uint32_t      count[LMC_ANS1_MAX_CTX][LMC_ANS1_MAX_CTX];  /* rows of nsym dense counts: per context, then per group */
    uint16_t      lane[4][LMC_ANS1_MAX_CTX * LMC_ANS1_MAX_CTX];  /* counting scratch */
    uint8_t       first[LMC_ANS1_MAX_CTX];        /* context of each row */
    uint8_t       row[256];                       /* context -> row */
    uint8_t       sidx[256], sym_of[LMC_ANS1_MAX_CTX];  /* byte <-> dense symbol index */
    uint8_t       map[256];                       /* context -> group */
    unsigned      ngroups, dist;
    unsigned      states;                         /* 4, or 32 (LMC_ANS1_WIDE): set by prepare, may be changed before encode */
    uint16_t      freq[LMC_ANS1_MAX_GROUPS][256];
    uint32_t      efc[LMC_ANS1_MAX_GROUPS * 256]; /* group << 8 | symbol -> f | cum << 13, for the vector coder */
    uint8_t       scratch[2 * 65536 + 64];        /* renormalisation words, written backwards */
} lmc_ans1_ws;

/* Picks the context distance (the byte dists[k] back, 1..65535) that does
 * best on a sample, and if it saves enough there, counts every 4th symbol of
 * src[0..m) by that context (hist is its order-0 histogram, with fewer than
 * LMC_ANS1_MAX_CTX symbols), merges contexts into groups and normalises
 * their tables, in which every byte of the block has a frequency.
 * Returns the estimated payload size, or SIZE_MAX (not worth it). */
size_t lmc_ans1_prepare(lmc_ans1_ws* ws, const uint8_t* src, size_t m, const uint32_t hist[256],
                        const unsigned* dists, unsigned ndist);

/* Codes src[0..m) with the prepared tables into dst (block payload, no coder
 * byte). Returns the payload size, or 0 if it would exceed cap. */
size_t lmc_ans1_encode(lmc_ans1_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m);

#endif
