/* ans_dec.c - order-0 rANS decoding: a slot table gives each slot's
 * frequency and offset ready for the state update, and a byte table its
 * symbol. The fast loop decodes 4 symbols (one per state) per round while 8
 * input bytes remain: a state reads at most one 16-bit word per symbol. The
 * stream is accepted only if it is consumed exactly and every state returns
 * to its initial value L. */
#include <string.h>
#include "ans_dec.h"
#include "freq_dec.h"
#include "error.h"
#include "mem.h"

/* Fills the slot table: slot cum(s) + k holds f(s), k and s. */
static void build_slots(lmc_ans_dws* ws)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = ws->freq[s];
        if (!f) continue;
        memset(ws->sym + cum, (int)s, f);
        lmc_ans_dslot* const d = ws->slot + cum;
        for (uint32_t k = 0; k < f; k++) { d[k].f = (uint16_t)f; d[k].adj = (uint16_t)k; }
        cum += f;
    }
}

/* The S initial states, each at least L. */
static size_t read_states(uint32_t* x, unsigned S, const uint8_t* src, size_t size, size_t* pos)
{
    LMC_RETURN_IF(size - *pos < 4 * (size_t)S, TRUNCATED);
    for (unsigned j = 0; j < S; j++) {
        x[j] = lmc_rd32(src + *pos); *pos += 4;
        LMC_RETURN_IF(x[j] < LMC_ANS_L, CORRUPT);
    }
    return 0;
}

/* A block ends with every word read and every state back at L. */
static size_t check_end(const uint8_t* p, const uint8_t* end, const uint32_t* x, unsigned S)
{
    LMC_RETURN_IF(p != end, CORRUPT);
    for (unsigned j = 0; j < S; j++) LMC_RETURN_IF(x[j] != LMC_ANS_L, CORRUPT);
    return 0;
}

/* One symbol with state xs. The renormalisation is a branch, predicted not
 * taken: where ANS is used (skewed bytes), a state needs a word only every
 * ~16 bits of information, and on the predicted path the states' chains do
 * not wait for the word pointer. (Conditional moves were measured slower:
 * they put each state's word load behind the previous state's pointer update.) */
#define ANS_GET(xs, o)                                                                      \
    do {                                                                                    \
        uint32_t const i_ = (xs) & (LMC_ANS_M - 1);                                         \
        uint32_t const y_ = (uint32_t)S[i_].f * ((xs) >> LMC_ANS_PROB_BITS) + S[i_].adj;    \
        (o) = Y[i_];                                                                        \
        if (y_ < LMC_ANS_L) { (xs) = (y_ << 16) | lmc_rd16(p); p += 2; } else (xs) = y_;    \
    } while (0)

/* The fast rounds: 4 symbols, one per state, while 8 input bytes remain. */
LMC_FORCE_INLINE size_t ans_rounds(const lmc_ans_dslot* S, const uint8_t* Y, uint8_t* dst, size_t m,
                                   const uint8_t** pp, const uint8_t* end, uint32_t* x)
{
    const uint8_t* p = *pp;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    size_t i = 0;
    for (; i + 4 <= m && end - p >= 8; i += 4) {
        ANS_GET(x0, dst[i]); ANS_GET(x1, dst[i + 1]); ANS_GET(x2, dst[i + 2]); ANS_GET(x3, dst[i + 3]);
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    *pp = p;
    return i;
}

static size_t ans_rounds_plain(const lmc_ans_dslot* S, const uint8_t* Y, uint8_t* dst, size_t m,
                               const uint8_t** pp, const uint8_t* end, uint32_t* x)
{ return ans_rounds(S, Y, dst, m, pp, end, x); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans_rounds_bmi2(const lmc_ans_dslot* S, const uint8_t* Y, uint8_t* dst, size_t m,
                                              const uint8_t** pp, const uint8_t* end, uint32_t* x)
{ return ans_rounds(S, Y, dst, m, pp, end, x); }
#endif

size_t lmc_ans_decode(lmc_ans_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = lmc_freq_read(ws->freq, 256, src, size);
    LMC_FORWARD(tsz);
    build_slots(ws);
    const lmc_ans_dslot* const S = ws->slot;
    const uint8_t* const Y = ws->sym;
    size_t pos = tsz;
    uint32_t x[LMC_ANS_STATES];
    LMC_FORWARD(read_states(x, LMC_ANS_STATES, src, size, &pos));
    const uint8_t* p = src + pos;
    const uint8_t* const end = src + size;
    size_t i;
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) i = ans_rounds_bmi2(S, Y, dst, m, &p, end, x);
    else
#endif
    i = ans_rounds_plain(S, Y, dst, m, &p, end, x);
    for (; i < m; i++) {
        int const j = (int)(i & 3);
        uint32_t const k = x[j] & (LMC_ANS_M - 1);
        dst[i] = Y[k];
        x[j] = (uint32_t)S[k].f * (x[j] >> LMC_ANS_PROB_BITS) + S[k].adj;
        if (x[j] < LMC_ANS_L) {
            LMC_RETURN_IF(end - p < 2, CORRUPT);
            x[j] = (x[j] << 16) | lmc_rd16(p);
            p += 2;
        }
    }
    return check_end(p, end, x, LMC_ANS_STATES);
}

/* ---- ANS1: order-1 rANS ------------------------------------------------ */

/* Symbol of state xs in context ctx (the byte dist back, already decoded):
 * its group's slot entry gives the symbol s, and y, the state before any
 * renormalisation word: f q + slot - cum, as (f - 1) q + q + (slot - cum).
 * With the symbol and its frequency apart (a slot's symbol, then the
 * symbol's f and cum), a step waited for two loads one after the other;
 * the keyframe of bench/data/traj-3m's bf16 weights spent 8 % of its
 * decoding in its one ANS1 block (1 % of the file). */
#define ANS1_SYM(xs, ctx, s, y)                                                             \
    do {                                                                                    \
        uint32_t const e_ = tab[ctx][(xs) & (LMC_ANS_M - 1)];                               \
        uint32_t const q_ = (xs) >> LMC_ANS_PROB_BITS;                                      \
        (s) = e_ & 0xFF;                                                                    \
        (y) = ((e_ >> 8) & 0xFFF) * q_ + q_ + (e_ >> 20);                                   \
    } while (0)

/* Symbol i, its value also left in out; 8 input bytes are known to be left. */
#define ANS1_GET_C(xs, i, ctx, out)                                                         \
    do {                                                                                    \
        unsigned s_;                                                                        \
        uint32_t y_;                                                                        \
        ANS1_SYM(xs, ctx, s_, y_);                                                          \
        dst[i] = (uint8_t)s_;                                                               \
        (out) = s_;                                                                         \
        if (y_ < LMC_ANS_L) { (xs) = (y_ << 16) | lmc_rd16(p); p += 2; } else (xs) = y_;    \
    } while (0)
#define ANS1_GET(xs, i, ctx) ANS1_GET_C(xs, i, ctx, sink)

/* The same, where fewer than 8 bytes may be left: a word must be there. */
#define ANS1_GET_SAFE(xs, i, ctx)                                                           \
    do {                                                                                    \
        unsigned s_;                                                                        \
        uint32_t y_;                                                                        \
        ANS1_SYM(xs, ctx, s_, y_);                                                          \
        dst[i] = (uint8_t)s_;                                                               \
        if (y_ < LMC_ANS_L) {                                                               \
            LMC_RETURN_IF(end - p < 2, CORRUPT);                                            \
            (xs) = (y_ << 16) | lmc_rd16(p); p += 2;                                        \
        } else (xs) = y_;                                                                   \
    } while (0)

LMC_FORCE_INLINE size_t ans1_rounds(lmc_ans1_dws* ws, uint8_t* dst, size_t i, size_t m, size_t dist,
                                    const uint8_t** pp, const uint8_t* end, uint32_t* x)
{
    const uint8_t* p = *pp;
    const uint32_t* const* const tab = ws->tab;
    unsigned sink;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    if (dist == 4 && i >= 4) {
        /* each state's context is its own last symbol: kept in a register,
         * the chain does not wait for a store to come back as a load */
        unsigned c0 = dst[i - 4], c1 = dst[i - 3], c2 = dst[i - 2], c3 = dst[i - 1];
        for (; i + 4 <= m && end - p >= 8; i += 4) {
            ANS1_GET_C(x0, i, c0, c0);
            ANS1_GET_C(x1, i + 1, c1, c1);
            ANS1_GET_C(x2, i + 2, c2, c2);
            ANS1_GET_C(x3, i + 3, c3, c3);
        }
    }
    for (; i + 4 <= m && end - p >= 8; i += 4) {
        ANS1_GET(x0, i, dst[i - dist]);
        ANS1_GET(x1, i + 1, dst[i + 1 - dist]);
        ANS1_GET(x2, i + 2, dst[i + 2 - dist]);
        ANS1_GET(x3, i + 3, dst[i + 3 - dist]);
    }
    (void)sink;
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    *pp = p;
    return i;
}

static size_t ans1_rounds_plain(lmc_ans1_dws* ws, uint8_t* dst, size_t i, size_t m, size_t dist,
                                const uint8_t** pp, const uint8_t* end, uint32_t* x)
{ return ans1_rounds(ws, dst, i, m, dist, pp, end, x); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t ans1_rounds_bmi2(lmc_ans1_dws* ws, uint8_t* dst, size_t i, size_t m, size_t dist,
                                               const uint8_t** pp, const uint8_t* end, uint32_t* x)
{ return ans1_rounds(ws, dst, i, m, dist, pp, end, x); }
#endif

#if LMC_HAS_AVX512_DISPATCH
#  include <immintrin.h>
/* 16 symbols of a wide block, states x (lanes = states in symbol order),
 * their contexts' group offsets g: each lane's update is the scalar one, and
 * the lanes that renormalise take the next words in lane order, which is
 * symbol order (the word stream a scalar decoder of 32 states reads). */
LMC_TARGET_AVX512 LMC_FORCE_INLINE __m512i ans1_lanes(const lmc_ans1_dws* ws, __m512i x, __m512i g, uint8_t* out,
                                                      const uint8_t* wbase, size_t* wi)
{
    __m512i const e = _mm512_i32gather_epi32(_mm512_ternarylogic_epi32(g, x, _mm512_set1_epi32(LMC_ANS_M - 1), 0xF8),
                                             (const int*)(const void*)&ws->ent[0][0], 4);
    __m512i const q = _mm512_srli_epi32(x, LMC_ANS_PROB_BITS);
    __m512i y = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(0xFFF)), q),
                                 _mm512_add_epi32(q, _mm512_srli_epi32(e, 20)));
    _mm_storeu_si128((__m128i*)(void*)out, _mm512_cvtepi32_epi8(e));
    __mmask16 const n = _mm512_cmplt_epu32_mask(y, _mm512_set1_epi32(LMC_ANS_L));
    __m512i const w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(wbase + 2 * *wi)));
    y = _mm512_mask_or_epi32(y, n, _mm512_slli_epi32(y, 16), _mm512_maskz_expand_epi32(n, w));
    *wi += (size_t)_mm_popcnt_u32(n);
    return y;
}

/* The rounds of a wide block from symbol i (a multiple of 32, at least
 * dist >= 32: a round's contexts are decoded) while 32 words are left;
 * returns the next symbol. */
LMC_TARGET_AVX512 static size_t ans1_wide_avx512(const lmc_ans1_dws* ws, uint8_t* dst, size_t i, size_t m, size_t dist,
                                                 const uint8_t** pp, const uint8_t* end, uint32_t* x)
{
    const uint8_t* const wbase = *pp;
    size_t const nw = (size_t)(end - wbase) / 2;
    size_t wi = 0;
    const int* const goff = (const int*)(const void*)ws->goff;
    __m512i xa = _mm512_loadu_si512((const void*)x), xb = _mm512_loadu_si512((const void*)(x + 16));
    for (; i + 32 <= m && wi + 32 <= nw; i += 32) {
        __m512i const ca = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(dst + i - dist)));
        __m512i const cb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(dst + i + 16 - dist)));
        __m512i const ga = _mm512_i32gather_epi32(ca, goff, 4);
        __m512i const gb = _mm512_i32gather_epi32(cb, goff, 4);
        xa = ans1_lanes(ws, xa, ga, dst + i, wbase, &wi);
        xb = ans1_lanes(ws, xb, gb, dst + i + 16, wbase, &wi);
    }
    _mm512_storeu_si512((void*)x, xa);
    _mm512_storeu_si512((void*)(x + 16), xb);
    *pp = wbase + 2 * wi;
    return i;
}
#endif

#if LMC_HAS_AVX512_DISPATCH
/* A group's slot entries (s | (f - 1) << 8 | k << 20 for slot cum(s) + k),
 * 16 a store; a symbol's last store masked to its own slots (the
 * frequencies sum to M, so nothing is written past the group's). */
LMC_TARGET_AVX512 static void fill_entries_avx512(uint32_t* ent, const uint16_t* freq)
{
    __m512i const iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = freq[s];
        if (!f) continue;
        uint32_t* const e = ent + cum;
        __m512i v = _mm512_or_si512(_mm512_set1_epi32((int)(s | (f - 1) << 8)), _mm512_slli_epi32(iota, 20));
        __m512i const step = _mm512_set1_epi32(16 << 20);
        uint32_t k = 0;
        for (; k + 16 <= f; k += 16) {
            _mm512_storeu_si512((void*)(e + k), v);
            v = _mm512_add_epi32(v, step);
        }
        if (k < f) _mm512_mask_storeu_epi32((void*)(e + k), (__mmask16)((1u << (f - k)) - 1), v);
        cum += f;
    }
}
#endif

size_t lmc_ans1_decode(lmc_ans1_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    LMC_RETURN_IF(size < 3, TRUNCATED);
    size_t const dist = lmc_rd16(src);
    unsigned const wide = src[2] & LMC_ANS1_WIDE;
    unsigned const G = src[2] & ~LMC_ANS1_WIDE;
    unsigned const S = wide ? LMC_ANS1_STATES_WIDE : LMC_ANS_STATES;
    LMC_RETURN_IF(dist == 0 || G == 0 || G > LMC_ANS1_MAX_GROUPS, CORRUPT);
    size_t pos = 3;
    LMC_RETURN_IF(size - pos < G - 1, TRUNCATED);
    unsigned bound[LMC_ANS1_MAX_GROUPS + 1];
    bound[0] = 0; bound[G] = 256;
    for (unsigned g = 1; g < G; g++) {
        bound[g] = src[pos++];
        LMC_RETURN_IF(bound[g] <= bound[g - 1], CORRUPT);
    }
    for (unsigned g = 0; g < G; g++) {
        for (unsigned c = bound[g]; c < bound[g + 1]; c++) { ws->tab[c] = ws->ent[g]; ws->goff[c] = g << LMC_ANS_PROB_BITS; }
        size_t const tsz = lmc_freq_read(ws->freq, 256, src + pos, size - pos);
        LMC_FORWARD(tsz);
        pos += tsz;
#if LMC_HAS_AVX512_DISPATCH
        if (lmc_cpu_has_avx512()) { fill_entries_avx512(ws->ent[g], ws->freq); continue; }
#endif
        uint32_t cum = 0;
        for (unsigned s = 0; s < 256; s++) {
            uint32_t const f = ws->freq[s];
            if (!f) continue;
            uint32_t* const e = ws->ent[g] + cum;
            uint32_t const base = s | (f - 1) << 8;
            for (uint32_t k = 0; k < f; k++) e[k] = base | k << 20;
            cum += f;
        }
    }
    uint32_t x[LMC_ANS1_STATES_MAX];
    LMC_FORWARD(read_states(x, S, src, size, &pos));
    const uint8_t* p = src + pos;
    const uint8_t* const end = src + size;
    const uint32_t* const* const tab = ws->tab;
    size_t i = 0;
    if (wide) {
        /* symbol i with state i mod 32: the first rounds (contexts not all
         * decoded, or 0) one symbol at a time, then vectors where they run */
        size_t const head = LMC_MIN(m, (dist + 31) & ~(size_t)31);
        for (; i < head; i++) ANS1_GET_SAFE(x[i & 31], i, i >= dist ? dst[i - dist] : 0);
#if LMC_HAS_AVX512_DISPATCH
        if (dist >= 32 && lmc_cpu_has_avx512()) i = ans1_wide_avx512(ws, dst, i, m, dist, &p, end, x);
#endif
        for (; i < m; i++) ANS1_GET_SAFE(x[i & 31], i, i >= dist ? dst[i - dist] : 0);
        return check_end(p, end, x, S);
    }
    /* the first dist symbols have context 0; then the fast rounds */
    for (; i < m && (i < dist || (i & 3)); i++) {
        int const j = (int)(i & 3);
        ANS1_GET_SAFE(x[j], i, i >= dist ? dst[i - dist] : 0);
    }
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) i = ans1_rounds_bmi2(ws, dst, i, m, dist, &p, end, x);
    else
#endif
    i = ans1_rounds_plain(ws, dst, i, m, dist, &p, end, x);
    for (; i < m; i++) {
        int const j = (int)(i & 3);
        ANS1_GET_SAFE(x[j], i, dst[i - dist]);
    }
    return check_end(p, end, x, S);
}
