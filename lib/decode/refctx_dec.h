/* refctx_dec.h - decode REFCTX value blocks (doc/format.md, "Layout 2"). */
#ifndef LMC_REFCTX_DEC_H
#define LMC_REFCTX_DEC_H

#include <stddef.h>
#include <stdint.h>
#include "refctx.h"

/* One group's decoding table. A slot's token is one byte, so that the 8-10
 * groups a block typically carries (40 KB) mostly stay in the L1 cache: with
 * 4-byte slot entries (16 KB a group) they did not, and the token loop, a
 * chain of dependent loads per state, waited on the L2 cache (measured: one
 * 16 KB table decodes 17 % faster than nine). Frequency and cumulative
 * frequency come from a second, small table indexed by the token, at a
 * fixed offset from the first (the AVX2 loop's asm relies on it). */
typedef struct {
    uint8_t  sym[LMC_ANS_M];                         /* slot -> token */
    uint32_t fc[LMC_REFCTX_ALPHA_MAX][2];             /* token -> frequency, cumulative frequency */
    uint8_t  pad[56];                                /* a whole number of cache lines */
} lmc_refctx_dgroup;
#define LMC_REFCTX_DG_FC 4096   /* offsetof(lmc_refctx_dgroup, fc), for the asm */

/* Raw streams shorter than RAWPAD bytes are decoded from a copy followed by
 * RAWPAD_ZEROS zero bytes, of which the fast loops may read up to LIM past
 * the end as part of a window (each loop reads only below its bound: a
 * 16-byte window starting at most 31 bytes before it, an 8-byte read at most
 * 7 before it, the VBMI loops' 64- and 128-byte windows). LIM covers the
 * widest window, so that those loops, not the narrower AVX2 ones, run to
 * the end of a sparse delta's block (LIM 32 until 2026-12-02: a bf16 delta
 * with 98.6 % of its values unchanged then left most of each block to the
 * AVX2 loop). */
#define LMC_REFCTX_RAWPAD       16384
#define LMC_REFCTX_RAWPAD_ZEROS 160
#define LMC_REFCTX_RAWPAD_LIM   128

/* Wide blocks (32 states) decoded with AVX-512: one 4-byte entry per slot,
 * frequency << 19 | (slot - cumulative frequency) << 7 | token, so that one
 * gather gives all a state update needs; group g's slots from g * M on, so
 * that a slot's index is g << 12 | slot. 32 spare entries: the table is
 * filled 16 at a time, at least 32 a symbol. */
#define LMC_REFCTX_WENT (LMC_REFCTX_MAX_GROUPS * LMC_ANS_M + 32)

typedef struct {
    lmc_refctx_dgroup grp[LMC_REFCTX_MAX_GROUPS];
    uint32_t went[LMC_REFCTX_WENT];
    int32_t  woff[2 * LMC_REFCTX_CONTEXTS];      /* r >> (W - 9) -> its group's offset in went */
    uint8_t  gmap[LMC_REFCTX_CONTEXTS];          /* the context (exponent) -> its group, for byte permutes */
    /* r >> (W - 9) -> its group's table: the context plus the sign bit,
     * so no mask, and a pointer, so no add before the slot load */
    const uint8_t* gtab[2 * LMC_REFCTX_CONTEXTS];
    /* token tables, indexed by the stored token byte (< alpha; entries b
     * and b | 128 agree, so that a mask of bit 7 costs nothing) */
    int64_t  tbase[256];                         /* token -> base b */
    uint8_t  tbits[256];                         /* token -> raw bit count n */
    uint32_t tmask[256];                         /* token -> 2^n - 1 */
    unsigned talpha;                             /* the alphabet the token tables are for (0: none yet) */
    uint16_t freq[LMC_REFCTX_ALPHA_MAX];
    uint8_t  tok[LMC_VBLOCK_MAX];                /* pass 1 -> pass 2 */
    int32_t  tl[LMC_VBLOCK_MAX];                 /* 16-bit values without AVX2: each t, pass 2a -> 2b */
    uint8_t  rawpad[LMC_REFCTX_RAWPAD + LMC_REFCTX_RAWPAD_ZEROS];   /* a short raw stream, zeros after it */
} lmc_refctx_dws;

/* Decodes the REFCTX data src[0..size) (after the kind byte and u24 size)
 * of m values of w bytes into dst, against their reference values `ref`.
 * Returns 0 or an error. */
size_t lmc_refctx_decode(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w,
                         const uint8_t* ref, const uint8_t* src, size_t size);

/* Whether lmc_refctx_decode_pair decodes two blocks at once on this CPU
 * (else it decodes one after the other). */
int lmc_refctx_pairs(void);

/* One block to decode: m values of src[0..size) into dst, against ref. */
typedef struct {
    uint8_t* dst;
    const uint8_t* ref;
    const uint8_t* src;
    size_t m, size;
} lmc_refctx_job;

/* Two blocks of values of w bytes, a workspace each: the same result as
 * lmc_refctx_decode on a, then on b, faster where both are wide (32 states)
 * or both sparse (4 states, few words): their token loops run interleaved,
 * as far as the shorter one goes. */
size_t lmc_refctx_decode_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, unsigned w, const lmc_refctx_job* a,
                              const lmc_refctx_job* b);

/* Which blocks lmc_refctx_decode_pair speeds up together: 0 for a block
 * best decoded alone now, else a class (wide where lmc_refctx_pairs, or
 * sparse by its size) whose blocks should be paired with each other. Read
 * from the block's first byte and size only; the pair checks the rest. */
int lmc_refctx_pair_class(const lmc_refctx_job* job);

#endif
