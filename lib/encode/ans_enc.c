/* ans_enc.c - order-0 rANS with 4 interleaved 32-bit states and byte-wise
 * renormalisation. Division by the symbol frequency is replaced by a
 * multiplication with a precomputed reciprocal (Alverson's method), so the
 * per-symbol cost is the high half of a multiply, a multiply and an add. */
#include <string.h>
#include "ans_enc.h"
#include "freq_enc.h"
#include "mem.h"

size_t lmc_ans_prepare(lmc_ans_ws* ws, const uint32_t hist[256], size_t m)
{
    lmc_freq_normalise(ws->freq, hist, 256, m);
    float bits = 0;
    for (unsigned s = 0; s < 256; s++)
        if (hist[s]) bits += (float)hist[s] * (LMC_ANS_PROB_BITS - lmc_fast_log2((float)ws->freq[s]));
    return lmc_freq_size(ws->freq, 256) + 4 * LMC_ANS_STATES + (size_t)(bits / 8) + 2;
}

/* One symbol, coded into state xs. A state emits a word at random, every
 * ~16 bits of information; instead of a branch (mispredicted at each word)
 * the word is stored unconditionally at the write position and the position
 * moves only when it was needed (a compare, a conditional move and a
 * subtract with borrow, written out because compilers emit a branch). The
 * position feeds nothing but stores, so the states' dependency chains stay
 * short: compare, select, multiply, multiply, add. */
#if defined(__GNUC__) && defined(__x86_64__)
#  define ANS_FLUSH(xs, e)                                                                \
    do {                                                                                  \
        uint64_t const hi_ = (xs) >> 16;                                                  \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                 \
        __asm__("cmpq %[x], %[m]\n\tcmovbq %[h], %[x]\n\tsbbq $0, %[k]"                   \
                : [x] "+r"(xs), [k] "+r"(nk) : [m] "m"(e), [h] "r"(hi_) : "cc");          \
    } while (0)
#else
#  define ANS_FLUSH(xs, e)                                                                \
    do {                                                                                  \
        lmc_wr16(wp + 2 * (ptrdiff_t)nk, (uint16_t)(xs));                                 \
        size_t const f_ = (xs) > (e);                                                     \
        (xs) = f_ ? (xs) >> 16 : (xs);                                                    \
        nk -= f_;                                                                         \
    } while (0)
#endif
#if defined(__SIZEOF_INT128__)
#  define ANS_QUOT(x, s) ((uint64_t)(((unsigned __int128)(x) * S->rcp[s]) >> 64))
#else
/* exact division; f = 1 takes q = x - 1 like its reciprocal, for the bias */
#  define ANS_QUOT(x, s) ((x) / (LMC_ANS_M - S->cmpl[s]) - (S->cmpl[s] == LMC_ANS_M - 1))
#endif
#define ANS_PUT(xs, sym)                                                                  \
    do {                                                                                  \
        unsigned const s_ = (sym);                                                        \
        ANS_FLUSH(xs, S->xmax_m1[s_]);                                                    \
        uint64_t const q_ = ANS_QUOT(xs, s_);                                             \
        (xs) = (xs) + S->bias[s_] + q_ * S->cmpl[s_];                                     \
    } while (0)

#define ANS_FULL ((size_t)1)   /* never a word count: nk is 0 or negative */

/* Codes src[0..i) backwards, i a multiple of 4. Word k (k = 0, 1, ...) is
 * written at wp - 2k; nk is -k. Returns the new nk, or ANS_FULL if the words
 * would come within 16 bytes of lo. */
LMC_FORCE_INLINE size_t ans_rounds(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                                   uint8_t* wp, size_t nk, const uint8_t* lo)
{
    uint64_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    while (i) {
        if (wp + 2 * (ptrdiff_t)nk - lo < 16) return ANS_FULL;
        i -= 4;
        ANS_PUT(x3, src[i + 3]); ANS_PUT(x2, src[i + 2]); ANS_PUT(x1, src[i + 1]); ANS_PUT(x0, src[i]);
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    return nk;
}

static size_t ans_rounds_plain(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                               uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans_rounds(S, src, i, x, wp, nk, lo); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans_rounds_bmi2(const lmc_ans_esym* S, const uint8_t* src, size_t i, uint64_t* x,
                                              uint8_t* wp, size_t nk, const uint8_t* lo)
{ return ans_rounds(S, src, i, x, wp, nk, lo); }
#endif

size_t lmc_ans_encode(lmc_ans_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = ws->freq[s];
        lmc_ans_esym* const e = &ws->sym;
        if (!f) continue;
        e->xmax_m1[s] = ((uint64_t)(LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * f - 1;
        e->cmpl[s] = LMC_ANS_M - f;
        if (f < 2) {
            /* x / 1 == x: the reciprocal 1 - 2^-32 gives q = x - 1, fixed by the bias */
            e->rcp[s] = (uint64_t)0xFFFFFFFFu << 32; e->bias[s] = cum + LMC_ANS_M - 1;
        } else {
            /* Alverson: ceil(2^(31+s) / f) with 2^(s-1) < f <= 2^s is exact for
             * x < 2^31; shifted so that the quotient is the high 64 bits */
            unsigned shift = 0;
            while (f > (1u << shift)) shift++;
            uint64_t const r = ((1ull << (shift + 31)) + f - 1) / f;
            e->rcp[s] = r << (33 - shift);
            e->bias[s] = cum;
        }
        cum += f;
    }
    uint8_t* const end = ws->scratch + sizeof(ws->scratch);
    uint8_t* const wp = end - 2;
    size_t nk = 0;
    uint8_t* const lo = ws->scratch + 16;
    const lmc_ans_esym* const S = &ws->sym;
    uint64_t x[LMC_ANS_STATES] = { LMC_ANS_L, LMC_ANS_L, LMC_ANS_L, LMC_ANS_L };
    size_t i = m;
    while (i & 3) {               /* the tail first: coding runs backwards */
        i--;
        uint64_t xs = x[i & 3];
        ANS_PUT(xs, src[i]);
        x[i & 3] = xs;
    }
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) nk = ans_rounds_bmi2(S, src, i, x, wp, nk, lo);
    else
#endif
    nk = ans_rounds_plain(S, src, i, x, wp, nk, lo);
    if (nk == ANS_FULL) return 0;
    uint8_t* const p = wp + 2 + 2 * (ptrdiff_t)nk;
    size_t const body = (size_t)(end - p);
    size_t const tsz = lmc_freq_size(ws->freq, 256);
    size_t const total = tsz + 4 * LMC_ANS_STATES + body;
    if (total > cap) return 0;
    uint8_t* o = dst + lmc_freq_write(dst, ws->freq, 256);
    for (int j = 0; j < LMC_ANS_STATES; j++) { lmc_wr32(o, (uint32_t)x[j]); o += 4; }
    memcpy(o, p, body);
    return total;
}
