/* refctx_enc.h - REFCTX value blocks: the difference to the reference, coded
 * with rANS tables chosen by the reference's exponent (doc/format.md, "Layout 2"). */
#ifndef LMC_REFCTX_ENC_H
#define LMC_REFCTX_ENC_H

#include <stddef.h>
#include <stdint.h>
#include "refctx.h"
#include "freq_enc.h"

#define LMC_REFCTX_KEYS  (LMC_REFCTX_CONTEXTS * LMC_REFCTX_ALPHA_MAX)   /* context * 65 + token */
#define LMC_REFCTX_LANES 4

/* Per-thread scratch (about 1 MiB, of which a block touches the rows of its
 * contexts), reused for every block. */
typedef struct {
    /* token counts per key (of half the values of a 16-bit block of 8 Ki
     * values or more: count_keys), in four tables that the values take in
     * turn: a run of equal keys then increments four counters in turn, not
     * one through the store-to-load chain. 16 bits suffice (a table sees at
     * most 2^14 values); kept zero between blocks. */
    uint16_t lcount[LMC_REFCTX_LANES * LMC_REFCTX_KEYS];
    uint8_t  seen[LMC_REFCTX_KEYS];             /* 1: a value not counted has the key; kept zero between blocks */
    int      sampled;                           /* 16-bit values, half of them counted (count_keys) */
    uint32_t count[LMC_REFCTX_CONTEXTS][LMC_REFCTX_ALPHA_MAX];   /* rows of present contexts */
    uint8_t  raw[4 * LMC_VBLOCK_MAX + 16];      /* the raw-bit stream, written by the analysis pass */
    uint16_t key[LMC_VBLOCK_MAX];               /* context * 65 + token of each value */
    uint8_t  present[LMC_REFCTX_CONTEXTS];
    unsigned npresent;
    /* the model of the prepared block */
    unsigned w, alpha, ngroups;
    unsigned states;                            /* 4, or LMC_REFCTX_STATES_WIDE */
    int      sparse;                            /* few words (at most one per 32 tokens): RC_PUT_SPARSE */
    unsigned ctx_join;                          /* contexts c >> ctx_join start merged (set by the caller; 0: none) */
    size_t   m;
    uint64_t raw_bits;
    uint8_t  bound[LMC_REFCTX_MAX_GROUPS];       /* first context of each group (bound[0] = 0) */
    uint8_t  map[LMC_REFCTX_CONTEXTS];           /* context -> group */
    uint16_t freq[LMC_REFCTX_MAX_GROUPS][LMC_REFCTX_ALPHA_MAX];
    /* the coder's view of each key (rows of present contexts: their group's
     * table), one array per field so that the key indexes each directly:
     * x >= xmax_m1 + 1 emits a word first; then q = the high half of x * rcp
     * (Alverson's reciprocal, shifted so that no further shift is needed;
     * f = 1 takes q = x - 1, fixed by the bias) and x += bias + q * cmpl */
    uint64_t erc[LMC_REFCTX_KEYS];
    uint32_t exm[LMC_REFCTX_KEYS], ebias[LMC_REFCTX_KEYS], ecmpl[LMC_REFCTX_KEYS];
    /* the same for the AVX-512 coder of 32 states: frequency | cumulative
     * frequency << 13 (it divides by the frequency in floats, see rc_next) */
    uint32_t efc[LMC_REFCTX_KEYS];
    uint32_t gcount[LMC_REFCTX_CONTEXTS][LMC_REFCTX_ALPHA_MAX];  /* merge scratch */
    uint8_t  words[2 * LMC_VBLOCK_MAX + 64];     /* renormalisation words, written backwards */
} lmc_refctx_ws;

/* A block whose estimated size is at least this many bytes is coded with 32
 * rANS states (LMC_REFCTX_WIDE): 112 more bytes, at most 5.5 % of it, for a
 * token loop that decodes about twice as fast with 16-lane gathers (on
 * Intel with AVX-512; on the AMD EPYC VM about a tenth faster, and without
 * AVX-512 no faster). Only a very sparse delta's small blocks (over about
 * 95 % of the values unchanged) keep 4 states. Every full block saves the same decoding
 * time, so the bound only caps what the states cost relative to the block.
 * (24 KiB until 2026-12-01, 12 KiB until 2026-12-02: on the Xeon box a bf16
 * delta with 78.6 % of its values unchanged, 8 KiB blocks, decoded at 886
 * MB/s, slower than byte-grouped zstd -1, and at 2084 with 32 states, for
 * 1.1 % more bytes; 93.5 % unchanged, 3 KiB blocks, 888 -> 1890 for 2.6 %;
 * doc/refctx.md.) */
#define LMC_REFCTX_WIDE_MIN 2048

/* Pass over m values (1 <= m <= LMC_VBLOCK_MAX, w in {2, 4}) of src and
 * their reference values: tokens, context counts, context groups and tables.
 * Returns the exact size of the REFCTX block (kind byte included) that
 * lmc_refctx_encode will write. */
size_t lmc_refctx_prepare(lmc_refctx_ws* ws, const uint8_t* src, const uint8_t* ref, size_t m, unsigned w);

/* Writes the prepared block (kind, size, data) to dst; returns its size, or 0
 * if it exceeds cap. dst needs 8 bytes of slack past cap. */
size_t lmc_refctx_encode(lmc_refctx_ws* ws, uint8_t* dst, size_t cap);

/* Internal check for test_refctx: how many of a spread of states the
 * AVX-512 coder's state update (its division by f from single floats and a
 * correction) gets wrong, over every f (-1: that coder is not in this build
 * or on this CPU). */
long lmc_refctx_next_misses(void);

#endif
