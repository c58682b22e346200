/* refctx_dec.c - REFCTX value blocks: each value's token is decoded with the
 * rANS table its reference value's exponent selects, its raw bits come from a
 * separate stream, and the difference is applied to the reference's
 * magnitude. Everything read is checked: the tables when they are read, the
 * states and both streams' exact lengths at the end, and every value's range
 * (collected in one flag, tested once per block).
 *
 * Applying t: with v = |r| + t, the result keeps r's sign and has magnitude v
 * when v >= 0; when v < 0 the value crossed zero, so the sign flips and the
 * magnitude is -v - 1 = ~v. This is mono(r) +- t of the format, without the
 * mapping to and from the ordered integer view. */
#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif
#include "refctx_dec.h"
#include "freq_dec.h"
#include "error.h"
#include "mem.h"

/* A third copy of the hot loops uses AVX2, BMI1 and BMI2, again chosen at
 * run time (LMC_NO_AVX2 leaves it out). */
#if LMC_HAS_BMI2_DISPATCH && LMC_HAS_AVX2_DISPATCH
#  include <immintrin.h>
#  define LMC_REFCTX_AVX2 1
#else
#  define LMC_REFCTX_AVX2 0
#endif

/* Sanitizers cannot see into inline assembly: their builds use the C token
 * loop (LMC_NO_ASM does too). */
#if defined(__SANITIZE_ADDRESS__)
#  define LMC_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#    define LMC_SANITIZED 1
#  endif
#endif

typedef struct {
    const uint8_t* p;      /* next raw byte not fully in bb */
    const uint8_t* end;
    uint64_t bb;           /* bits not yet consumed, LSB first */
    unsigned bc;           /* how many */
    /* readable up to here: end, or end + LMC_REFCTX_RAWPAD_LIM where the
     * stream was copied into ws->rawpad (zeros after it). The AVX2 loops
     * take their bounds from lim, so that they need not stop 31 bytes
     * before the end; a stream that reads past end still fails the exact
     * length check at the end of the block. */
    const uint8_t* lim;
} rawbits;

/* Branch-free refill; needs 8 readable bytes at p. Leaves 56..63 bits. */
LMC_FORCE_INLINE void raw_refill_fast(rawbits* r)
{
    r->bb |= lmc_rd64(r->p) << r->bc;
    r->p += (63 - r->bc) >> 3;
    r->bc |= 56;
}

LMC_FORCE_INLINE void raw_refill_slow(rawbits* r)
{
    while (r->bc <= 56 && r->p < r->end) { r->bb |= (uint64_t)*r->p++ << r->bc; r->bc += 8; }
}

/* Pass 1, one token with state xs: the slot's token from the group's byte
 * table, then its frequency and cumulative frequency. */
LMC_FORCE_INLINE unsigned decode_token(const lmc_refctx_dws* ws, uint32_t* xs, const uint8_t* ref, unsigned bits)
{
    uint32_t const r = bits == 16 ? lmc_rd16(ref) : lmc_rd32(ref);
    const uint8_t* const g = ws->gtab[r >> (bits - 9)];
    uint32_t const s = *xs & (LMC_ANS_M - 1);
    unsigned const tok = g[s];
    const uint32_t* const fc = (const uint32_t*)(const void*)(g + LMC_REFCTX_DG_FC) + 2 * tok;
    *xs = fc[0] * (*xs >> LMC_ANS_PROB_BITS) + s - fc[1];
    return tok;
}

/* At most one 16-bit word per symbol, the next one at word index *wi. The
 * condition is true about once in four symbols at random: a conditional
 * move, not a branch, and the carry of the compare advances the index. The
 * word is read even when not taken; the caller's loop bound covers it. */
LMC_FORCE_INLINE void renorm_fast(uint32_t* xs, const uint8_t* wbase, size_t* wi)
{
    uint32_t x = *xs;
    uint32_t const y = (x << 16) | lmc_rd16(wbase + 2 * *wi);
#if defined(__GNUC__) && defined(__x86_64__)
    /* compilers turn the select into a branch, which mispredicts */
    size_t k = *wi;
    __asm__("cmpl %3, %0\n\tcmovb %2, %0\n\tadcq $0, %1" : "+r"(x), "+r"(k) : "r"(y), "i"(LMC_ANS_L) : "cc");
    *wi = k;
#else
    size_t const need = x < LMC_ANS_L;
    x = need ? y : x;
    *wi += need;
#endif
    *xs = x;
}

#if LMC_REFCTX_AVX2 && !defined(LMC_SANITIZED) && !defined(LMC_NO_ASM)
#  define LMC_REFCTX_ASM 1
/* One token: decode_token and renorm_fast in 15 instructions, for the AVX2
 * copy (which may use BMI1 and BMI2). Compilers spend several more: copies,
 * and with 14 registers live they spill the states. Here bextr takes the
 * slot out of x, imul and sub read the frequency and cumulative frequency
 * from memory, rorx puts x << 16 in the high half of y (the low half,
 * x >> 16, is replaced by the next word), and the compare's carry both
 * selects and advances the word index. Four tokens, one per state, make one
 * asm statement, so that the states stay in registers. */
#  define LMC_STR_(x) #x
#  define LMC_STR(x) LMC_STR_(x)
#  define TOKEN_STEP(X, ROFF, TOFF, LOAD, SHIFT)                   \
    LOAD " " ROFF "(%[rp]), %k[T]\n\t"                               \
    "shrl $" SHIFT ", %k[T]\n\t"                                     \
    "movq (%[gt],%q[T],8), %q[T]\n\t"                                \
    "bextrl %[c12], %[" X "], %k[s]\n\t"                            \
    "movzbl (%q[T],%q[s]), %k[e]\n\t"                                \
    "movb %b[e], " TOFF "(%[tp])\n\t"                                \
    "shrl $12, %[" X "]\n\t"                                         \
    "imull " LMC_STR(LMC_REFCTX_DG_FC) "(%q[T],%q[e],8), %[" X "]\n\t" \
    "addl %k[s], %[" X "]\n\t"                                       \
    "subl " LMC_STR(LMC_REFCTX_DG_FC) "+4(%q[T],%q[e],8), %[" X "]\n\t" \
    "rorxl $16, %[" X "], %k[e]\n\t"                                 \
    "movw (%[wb],%[wi],2), %w[e]\n\t"                                \
    "cmpl $0x8000, %[" X "]\n\t"                                     \
    "cmovbl %k[e], %[" X "]\n\t"                                     \
    "adcq $0, %[wi]\n\t"
#  define TOKEN_ROUND(I, NW, LOAD, W, SHIFT)                                             \
    __asm__ volatile(TOKEN_STEP("x0", "0", "0", LOAD, SHIFT) TOKEN_STEP("x1", W, "1", LOAD, SHIFT) \
                     TOKEN_STEP("x2", "2*" W, "2", LOAD, SHIFT) TOKEN_STEP("x3", "3*" W, "3", LOAD, SHIFT) \
                     : [x0] "+&r"(x0), [x1] "+&r"(x1), [x2] "+&r"(x2), [x3] "+&r"(x3), [wi] "+&r"(wi), \
                       [T] "=&r"(t_), [s] "=&r"(s_), [e] "=&r"(e_)                         \
                     : [rp] "r"(ref + (I) * (NW)), [tp] "r"(tok + (I)), [gt] "r"(ws->gtab), [wb] "r"(wbase), \
                       [c12] "r"((uint32_t)(LMC_ANS_PROB_BITS << 8))                     \
                     : "cc", "memory")
#else
#  define LMC_REFCTX_ASM 0
#endif

/* decode_token from the wide blocks' table (went), for their last tokens. */
LMC_FORCE_INLINE unsigned decode_token_went(const lmc_refctx_dws* ws, uint32_t* xs, const uint8_t* ref, unsigned bits)
{
    uint32_t const r = bits == 16 ? lmc_rd16(ref) : lmc_rd32(ref);
    size_t const g = (size_t)((const lmc_refctx_dgroup*)(const void*)ws->gtab[r >> (bits - 9)] - ws->grp);
    uint32_t const e = ws->went[g * LMC_ANS_M + (*xs & (LMC_ANS_M - 1))];
    *xs = (e >> 19) * (*xs >> LMC_ANS_PROB_BITS) + ((e >> 7) & (LMC_ANS_M - 1));
    return e & 127;
}

/* Pass 1 from token i on, every word read checked: the end of a block.
 * went: the slots from went (a wide block with AVX-512), else from sym. */
LMC_FORCE_INLINE size_t tokens_checked(lmc_refctx_dws* ws, size_t i, size_t m, const uint8_t* ref, uint32_t* x,
                                       const uint8_t** wpp, const uint8_t* wend, unsigned bits, unsigned S, int went)
{
    unsigned const w = bits / 8;
    uint8_t* const tok = ws->tok;
    const uint8_t* wp = *wpp;
    for (; i < m; i++) {
        uint32_t* const xs = &x[i & (S - 1)];
        tok[i] = (uint8_t)(went ? decode_token_went(ws, xs, ref + i * w, bits) : decode_token(ws, xs, ref + i * w, bits));
        if (*xs < LMC_ANS_L) {
            LMC_RETURN_IF(wend - wp < 2, CORRUPT);
            *xs = (*xs << 16) | lmc_rd16(wp);
            wp += 2;
        }
    }
    *wpp = wp;
    return 0;
}

/* Four tokens, one per state, without checks: the caller's loop bound
 * covers the (at most 4) words read. For the AVX2 copy only: the asm uses
 * BMI1 and BMI2 (the C version is what sanitizer builds run). */
#if LMC_REFCTX_ASM
#  define TOKEN_ROUND4(I, bits)                                                                   \
    do {                                                                                          \
        uint64_t t_, s_, e_;                                                                      \
        if (bits == 16) TOKEN_ROUND(I, 2, "movzwl", "2", "7"); else TOKEN_ROUND(I, 4, "movl", "4", "23"); \
    } while (0)
#else
#  define TOKEN_ROUND4(I, bits)                                                                   \
    do {                                                                                          \
        tok[I]     = (uint8_t)decode_token(ws, &x0, ref + (I) * (bits / 8), bits);       renorm_fast(&x0, wbase, &wi); \
        tok[I + 1] = (uint8_t)decode_token(ws, &x1, ref + (I + 1) * (bits / 8), bits); renorm_fast(&x1, wbase, &wi); \
        tok[I + 2] = (uint8_t)decode_token(ws, &x2, ref + (I + 2) * (bits / 8), bits); renorm_fast(&x2, wbase, &wi); \
        tok[I + 3] = (uint8_t)decode_token(ws, &x3, ref + (I + 3) * (bits / 8), bits); renorm_fast(&x3, wbase, &wi); \
    } while (0)
#endif

/* Pass 1: the tokens, into ws->tok. Two passes instead of one keep each
 * loop's state in registers (but see decode16_avx2). asm_step: the AVX2 copy. */
LMC_FORCE_INLINE size_t decode_tokens(lmc_refctx_dws* ws, size_t m, const uint8_t* ref, uint32_t x[4],
                                      const uint8_t** wpp, const uint8_t* wend, unsigned bits, int asm_step)
{
    unsigned const w = bits / 8;
    const uint8_t* const wbase = *wpp;
    uint8_t* const tok = ws->tok;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    size_t i = 0, wi = 0;
    /* a round reads at most 4 words, the last one peeked even when not taken */
    size_t const nw = (size_t)(wend - wbase) / 2;
    size_t const wlim = nw >= 4 ? nw - 4 : 0;
#if LMC_REFCTX_ASM
    if (nw >= 4 && asm_step)
        for (; i + 4 <= m && wi <= wlim; i += 4) TOKEN_ROUND4(i, bits);
#endif
    (void)asm_step;
    if (nw >= 4)
        for (; i + 4 <= m && wi <= wlim; i += 4) {
            tok[i]     = (uint8_t)decode_token(ws, &x0, ref + i * w, bits);       renorm_fast(&x0, wbase, &wi);
            tok[i + 1] = (uint8_t)decode_token(ws, &x1, ref + (i + 1) * w, bits); renorm_fast(&x1, wbase, &wi);
            tok[i + 2] = (uint8_t)decode_token(ws, &x2, ref + (i + 2) * w, bits); renorm_fast(&x2, wbase, &wi);
            tok[i + 3] = (uint8_t)decode_token(ws, &x3, ref + (i + 3) * w, bits); renorm_fast(&x3, wbase, &wi);
        }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    *wpp = wbase + 2 * wi;
    return tokens_checked(ws, i, m, ref, x, wpp, wend, bits, LMC_ANS_STATES, 0);
}

/* Whether the asm token steps (BMI1, BMI2) may run here. */
static inline int lmc_cpu_has_avx2_asm(void)
{
#if LMC_REFCTX_ASM
    return lmc_cpu_has_avx2();
#else
    return 0;
#endif
}

/* Pass 1 of a wide block (32 states) without 16-lane vectors: each round of
 * 32 tokens as 8 rounds of 4, states loaded and stored around each. */
LMC_FORCE_INLINE size_t decode_tokens_wide(lmc_refctx_dws* ws, size_t i, size_t m, const uint8_t* ref, uint32_t* x,
                                           const uint8_t** wpp, const uint8_t* wend, unsigned bits, int asm_step)
{
    unsigned const w = bits / 8;
    const uint8_t* const wbase = *wpp;
    uint8_t* const tok = ws->tok;
    size_t wi = 0;
    size_t const nw = (size_t)(wend - wbase) / 2;
    (void)asm_step; (void)w;
    /* a round of 32 reads at most 32 words, the last one peeked */
    if (nw >= LMC_REFCTX_STATES_WIDE)
        for (; i + LMC_REFCTX_STATES_WIDE <= m && wi <= nw - LMC_REFCTX_STATES_WIDE; i += LMC_REFCTX_STATES_WIDE)
            for (unsigned b = 0; b < LMC_REFCTX_STATES_WIDE; b += 4) {
                uint32_t x0 = x[b], x1 = x[b + 1], x2 = x[b + 2], x3 = x[b + 3];
                size_t const I = i + b;
#if LMC_REFCTX_ASM
                if (asm_step) TOKEN_ROUND4(I, bits);
                else
#endif
                {
                    tok[I]     = (uint8_t)decode_token(ws, &x0, ref + I * w, bits);       renorm_fast(&x0, wbase, &wi);
                    tok[I + 1] = (uint8_t)decode_token(ws, &x1, ref + (I + 1) * w, bits); renorm_fast(&x1, wbase, &wi);
                    tok[I + 2] = (uint8_t)decode_token(ws, &x2, ref + (I + 2) * w, bits); renorm_fast(&x2, wbase, &wi);
                    tok[I + 3] = (uint8_t)decode_token(ws, &x3, ref + (I + 3) * w, bits); renorm_fast(&x3, wbase, &wi);
                }
                x[b] = x0; x[b + 1] = x1; x[b + 2] = x2; x[b + 3] = x3;
            }
    *wpp = wbase + 2 * wi;
    return tokens_checked(ws, i, m, ref, x, wpp, wend, bits, LMC_REFCTX_STATES_WIDE, 0);
}

/* Pass 2, one value: its raw bits, then the reference's magnitude plus t. */
LMC_FORCE_INLINE void apply_value(const lmc_refctx_dws* ws, unsigned tok, rawbits* rb, uint64_t* bad,
                                  uint8_t* dst, const uint8_t* ref, unsigned bits)
{
    uint64_t const r = bits == 16 ? lmc_rd16(ref) : lmc_rd32(ref);
    unsigned const nb = ws->tbits[tok];
    uint64_t const low = rb->bb & ((1ull << nb) - 1);
    rb->bb >>= nb;
    rb->bc -= nb;
    uint64_t const S = 1ull << (bits - 1);
    int64_t const v = (int64_t)(r & (S - 1)) + ws->tbase[tok] + (int64_t)low;
    int64_t const s = v >> 63;
    uint64_t const a = (uint64_t)(v ^ s);
    *bad |= a;
    uint64_t const out = ((r ^ (uint64_t)s) & S) | a;
    if (bits == 16) lmc_wr16(dst, (uint16_t)out); else lmc_wr32(dst, (uint32_t)out);
}

/* Pass 2 from value i on. */
LMC_FORCE_INLINE size_t apply_values(const lmc_refctx_dws* ws, uint8_t* dst, size_t i, size_t m, const uint8_t* ref,
                                     rawbits* rbp, unsigned bits)
{
    unsigned const w = bits / 8;
    const uint8_t* const tok = ws->tok;
    rawbits rb = *rbp;
    uint64_t bad = 0;
    /* a round refills at most 4 times, each advancing <= 7 bytes and reading 8;
     * 16-bit values have at most 15 raw bits, so one refill serves two */
    for (; i + 4 <= m && rb.end - rb.p >= 8 + 4 * 8; i += 4) {
        raw_refill_fast(&rb);
        apply_value(ws, tok[i], &rb, &bad, dst + i * w, ref + i * w, bits);
        if (bits == 32) raw_refill_fast(&rb);
        apply_value(ws, tok[i + 1], &rb, &bad, dst + (i + 1) * w, ref + (i + 1) * w, bits);
        raw_refill_fast(&rb);
        apply_value(ws, tok[i + 2], &rb, &bad, dst + (i + 2) * w, ref + (i + 2) * w, bits);
        if (bits == 32) raw_refill_fast(&rb);
        apply_value(ws, tok[i + 3], &rb, &bad, dst + (i + 3) * w, ref + (i + 3) * w, bits);
    }
    for (; i < m; i++) {
        raw_refill_slow(&rb);
        LMC_RETURN_IF(rb.bc < ws->tbits[tok[i]], CORRUPT);
        apply_value(ws, tok[i], &rb, &bad, dst + i * w, ref + i * w, bits);
    }
    *rbp = rb;
    LMC_RETURN_IF(bad >> (bits - 1), CORRUPT);
    return 0;
}

#if defined(__SSE2__)
/* 16-bit values, pass 2 split in two. 2a: every value's t = base + raw bits,
 * each read at its own bit offset (one add carries from value to value, not
 * a shifting bit buffer). 2b: |r| + t, the sign and the range check, 8
 * values per step in SIMD lanes. */
LMC_FORCE_INLINE size_t apply16_split(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->end - rb->p);
    const uint8_t* const tok = ws->tok;
    int32_t* const tl = ws->tl;
    uint64_t off = 0;
    size_t i = 0;
    /* a value needs at most 7 + 15 bits from one 8-byte read, which must lie
     * inside the stream: off >> 3 <= raw_size - 8 */
    uint64_t const lim = raw_size >= 8 ? (uint64_t)(raw_size - 7) * 8 : 0;
    for (; i < m && off < lim; i++) {
        unsigned const tk = tok[i], nb = ws->tbits[tk];
        uint64_t const low = (lmc_rd64(raw + (off >> 3)) >> (off & 7)) & ws->tmask[tk];
        off += nb;
        tl[i] = (int32_t)ws->tbase[tk] + (int32_t)low;
    }
    for (; i < m; i++) {
        unsigned const tk = tok[i], nb = ws->tbits[tk];
        LMC_RETURN_IF(off + nb > 8 * (uint64_t)raw_size, CORRUPT);
        uint64_t low = 0;
        for (unsigned b = 0; b < nb; b++, off++) low |= (uint64_t)((raw[off >> 3] >> (off & 7)) & 1) << b;
        tl[i] = (int32_t)ws->tbase[tk] + (int32_t)low;
    }
    /* leave the reader where the bits end, for the caller's exact-length check */
    rb->p = raw + (off >> 3);
    rb->bb = 0; rb->bc = 0;
    if (off & 7) { rb->bb = (uint64_t)(*rb->p++ >> (off & 7)); rb->bc = 8 - (unsigned)(off & 7); }

    __m128i const lo15 = _mm_set1_epi32(0x7FFF), sbit = _mm_set1_epi32(0x8000), zero = _mm_setzero_si128();
    __m128i bad = zero;
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        __m128i const r16 = _mm_loadu_si128((const __m128i*)(const void*)(ref + 2 * j));
        __m128i o[2];
        for (int h = 0; h < 2; h++) {
            __m128i const r = h ? _mm_unpackhi_epi16(r16, zero) : _mm_unpacklo_epi16(r16, zero);
            __m128i const v = _mm_add_epi32(_mm_and_si128(r, lo15), _mm_loadu_si128((const __m128i*)(const void*)(tl + j + 4 * h)));
            __m128i const sg = _mm_srai_epi32(v, 31);
            __m128i const a = _mm_xor_si128(v, sg);
            bad = _mm_or_si128(bad, a);
            __m128i const out = _mm_or_si128(_mm_and_si128(_mm_xor_si128(r, sg), sbit), a);
            o[h] = _mm_srai_epi32(_mm_slli_epi32(out, 16), 16);   /* low 16 bits, signed: packs keeps them */
        }
        _mm_storeu_si128((__m128i*)(void*)(dst + 2 * j), _mm_packs_epi32(o[0], o[1]));
    }
    uint32_t b4[4];
    _mm_storeu_si128((__m128i*)(void*)b4, bad);
    uint32_t badv = b4[0] | b4[1] | b4[2] | b4[3];
    for (; j < m; j++) {
        uint32_t const r = lmc_rd16(ref + 2 * j);
        int32_t const v = (int32_t)(r & 0x7FFF) + tl[j];
        int32_t const sg = v >> 31;
        uint32_t const a = (uint32_t)(v ^ sg);
        badv |= a;
        lmc_wr16(dst + 2 * j, (uint16_t)(((r ^ (uint32_t)sg) & 0x8000) | a));
    }
    LMC_RETURN_IF(badv >> 15, CORRUPT);
    return 0;
}
#endif

#if LMC_REFCTX_AVX2
/* 16-bit values from value j on, raw bits from bit offset *offp: the tail
 * of the AVX2 loop, one value at a time (apply16_split's pass 2a and 2b). */
LMC_FORCE_INLINE size_t apply16_tail(const lmc_refctx_dws* ws, uint8_t* dst, size_t j, size_t m, const uint8_t* ref,
                                     const uint8_t* raw, size_t raw_size, uint64_t* offp, uint32_t* badp)
{
    uint64_t off = *offp;
    uint32_t bad = *badp;
    uint64_t const lim = raw_size >= 8 ? (uint64_t)(raw_size - 7) * 8 : 0;
    for (; j < m; j++) {
        unsigned const tk = ws->tok[j], nb = ws->tbits[tk];
        uint64_t low = 0;
        if (off < lim) {
            low = (lmc_rd64(raw + (off >> 3)) >> (off & 7)) & ws->tmask[tk];
        } else {
            LMC_RETURN_IF(off + nb > 8 * (uint64_t)raw_size, CORRUPT);
            for (unsigned b = 0; b < nb; b++) low |= (uint64_t)((raw[(off + b) >> 3] >> ((off + b) & 7)) & 1) << b;
        }
        off += nb;
        uint32_t const r = lmc_rd16(ref + 2 * j);
        int32_t const v = (int32_t)(r & 0x7FFF) + (int32_t)ws->tbase[tk] + (int32_t)low;
        int32_t const sg = v >> 31;
        uint32_t const a = (uint32_t)(v ^ sg);
        bad |= a;
        lmc_wr16(dst + 2 * j, (uint16_t)(((r ^ (uint32_t)sg) & 0x8000) | a));
    }
    *offp = off;
    *badp = bad;
    return 0;
}

/* 16-bit values, pass 2 with AVX2 (128-bit operations, which are as fast as
 * 256-bit ones on the first Zen cores, and no variable shifts, which are
 * slow there), 16 values a step. From the tokens (bytes): k = (token + 1) / 2,
 * n = max(k - 1, 0), and the prefix sums of n (at most 16 * 15 bits, a byte
 * each) place each value's bits. Values 0-7 and 8-15 of a step each read one
 * 16-byte window: 8 values span at most 7 + 8 * 15 = 127 bits from the
 * window's first byte. A value at bit p of its window has its n bits at bits
 * s..s+n of the 24-bit word D at byte i = (p + 7) / 8 - 1, s = p - 8i
 * in 1..8 (s >= 1 so that the shifts below have counts 0..15; byte i = -1
 * shuffles in a 0). In 16-bit lanes, with A = D's low and B = D's high 16 bits,
 * (D >> s) & 0xFFFF = (A >> s) | (B << (8 - s)), both shifts done as
 * multiplications: mulhi(A, 2^(16-s)) and mullo(B, 2^(8-s)). Then the n bits
 * (a mask looked up by n), the base b (looked up by token, two 16-entry tables
 * a byte plane), t = b + e, v = |r| + t and the sign as in apply16_split, all
 * in 16 bits: t fits in 16 signed bits for k <= 15, v = |r| + t then lies in
 * [-32767, 65534] and is in range unless t > 0 and bit 15 of v is set. A step
 * with a token of k = 16 (t up to 2^16 - 1) goes the scalar way. */
LMC_TARGET_AVX2 LMC_FORCE_INLINE void apply16_step(const lmc_refctx_dws* ws, size_t j, uint8_t* dst, const uint8_t* ref,
                                                   const uint8_t* raw, size_t raw_size, uint64_t* offp,
                                                   __m128i* bad, uint32_t* badv)
{
    __m128i const z = _mm_setzero_si128(), b1 = _mm_set1_epi8(1), b7 = _mm_set1_epi8(7), b16 = _mm_set1_epi8(16);
    /* 2^(8-s) for s = 1..8 */
    __m128i const pw = _mm_setr_epi8(0, (char)128, 64, 32, 16, 8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0);
    /* 2^n - 1, low and high byte */
    __m128i const mlo = _mm_setr_epi8(0, 1, 3, 7, 15, 31, 63, 127, -1, -1, -1, -1, -1, -1, -1, -1);
    __m128i const mhi = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 7, 15, 31, 63, 127);
    /* base b of tokens 0..15 and, xored with those, of tokens 16..31, low and
     * high byte: 0, 1, -1, 2, -3, 4, -7, ..., 2^14, 1 - 2^15 */
#define B16(t) ((t) == 0 ? 0 : ((t) & 1) ? 1 << (((t) - 1) / 2) : 1 - (1 << ((t) / 2)))
#define BLO(t) (char)(B16(t) & 0xFF)
#define BHI(t) (char)((B16(t) >> 8) & 0xFF)
#define BX(t, P) (char)(P(t) ^ P((t) + 16))
    __m128i const blo0 = _mm_setr_epi8(BLO(0), BLO(1), BLO(2), BLO(3), BLO(4), BLO(5), BLO(6), BLO(7),
                                       BLO(8), BLO(9), BLO(10), BLO(11), BLO(12), BLO(13), BLO(14), BLO(15));
    __m128i const bhi0 = _mm_setr_epi8(BHI(0), BHI(1), BHI(2), BHI(3), BHI(4), BHI(5), BHI(6), BHI(7),
                                       BHI(8), BHI(9), BHI(10), BHI(11), BHI(12), BHI(13), BHI(14), BHI(15));
    __m128i const blo1 = _mm_setr_epi8(BX(0, BLO), BX(1, BLO), BX(2, BLO), BX(3, BLO), BX(4, BLO), BX(5, BLO),
                                       BX(6, BLO), BX(7, BLO), BX(8, BLO), BX(9, BLO), BX(10, BLO), BX(11, BLO),
                                       BX(12, BLO), BX(13, BLO), BX(14, BLO), BX(15, BLO));
    __m128i const bhi1 = _mm_setr_epi8(BX(0, BHI), BX(1, BHI), BX(2, BHI), BX(3, BHI), BX(4, BHI), BX(5, BHI),
                                       BX(6, BHI), BX(7, BHI), BX(8, BHI), BX(9, BHI), BX(10, BHI), BX(11, BHI),
                                       BX(12, BHI), BX(13, BHI), BX(14, BHI), BX(15, BHI));
#undef B16
#undef BLO
#undef BHI
#undef BX
    __m128i const dup0 = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    __m128i const dup1 = _mm_add_epi8(dup0, _mm_set1_epi8(8));
    __m128i const c01 = _mm_set1_epi16(0x0100), c11 = _mm_set1_epi16(0x0101);
    __m128i const lo15 = _mm_set1_epi16(0x7FFF), sbit = _mm_set1_epi16((short)0x8000);
    uint64_t const off = *offp;
    __m128i const tk = _mm_and_si128(_mm_loadu_si128((const __m128i*)(const void*)(ws->tok + j)), _mm_set1_epi8(0x7F));
    __m128i const k = _mm_avg_epu8(tk, z);
    __m128i const nb = _mm_subs_epu8(k, b1);
    __m128i p = _mm_add_epi8(nb, _mm_slli_si128(nb, 1));
    p = _mm_add_epi8(p, _mm_slli_si128(p, 2));
    p = _mm_add_epi8(p, _mm_slli_si128(p, 4));
    p = _mm_add_epi8(p, _mm_slli_si128(p, 8));
    unsigned const s8 = (unsigned)_mm_extract_epi8(p, 7), s16 = (unsigned)_mm_extract_epi8(p, 15);
    if (LMC_UNLIKELY(_mm_movemask_epi8(_mm_cmpgt_epi8(tk, _mm_set1_epi8(30))))) {
        (void)apply16_tail(ws, dst - 2 * j, j, j + 16, ref - 2 * j, raw, raw_size, offp, badv);   /* cannot fail here */
        return;
    }
    uint64_t const off1 = off + s8;
    /* bit position in its window, plus 7: the window's start bit plus the bits
     * before the value, less those before the window (bytes, mod 256) */
    __m128i const c = _mm_set_epi64x((long long)((((off1 & 7) + 7 - s8) & 0xFF) * 0x0101010101010101ull),
                                     (long long)(((off & 7) + 7) * 0x0101010101010101ull));
    __m128i const rel7 = _mm_add_epi8(_mm_sub_epi8(p, nb), c);
    __m128i const idx = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(rel7, 3), _mm_set1_epi8(0x1F)), b1);
    __m128i const hb = _mm_shuffle_epi8(pw, _mm_add_epi8(_mm_and_si128(rel7, b7), b1));
    __m128i const ml = _mm_shuffle_epi8(mlo, nb), mh = _mm_shuffle_epi8(mhi, nb);
    __m128i const t16 = _mm_sub_epi8(tk, b16);   /* negative (bit 7 set, shuffles in 0) below 16 */
    __m128i const bl = _mm_xor_si128(_mm_shuffle_epi8(blo0, tk), _mm_shuffle_epi8(blo1, t16));
    __m128i const bh = _mm_xor_si128(_mm_shuffle_epi8(bhi0, tk), _mm_shuffle_epi8(bhi1, t16));
    for (int h = 0; h < 2; h++) {
        __m128i const W = _mm_loadu_si128((const __m128i*)(const void*)(raw + ((h ? off1 : off) >> 3)));
        __m128i const ca = _mm_add_epi8(_mm_shuffle_epi8(idx, h ? dup1 : dup0), c01);
        __m128i const A = _mm_shuffle_epi8(W, ca), B = _mm_shuffle_epi8(W, _mm_add_epi8(ca, c11));
        __m128i const N = h ? _mm_unpackhi_epi8(hb, z) : _mm_unpacklo_epi8(hb, z);
        __m128i const y = _mm_or_si128(_mm_mulhi_epu16(A, _mm_slli_epi16(N, 8)), _mm_mullo_epi16(B, N));
        __m128i const mask = h ? _mm_unpackhi_epi8(ml, mh) : _mm_unpacklo_epi8(ml, mh);
        __m128i const b = h ? _mm_unpackhi_epi8(bl, bh) : _mm_unpacklo_epi8(bl, bh);
        __m128i const t = _mm_add_epi16(_mm_and_si128(y, mask), b);
        __m128i const r = _mm_loadu_si128((const __m128i*)(const void*)(ref + 16 * h));
        __m128i const v = _mm_add_epi16(_mm_and_si128(r, lo15), t);
        *bad = _mm_or_si128(*bad, _mm_andnot_si128(t, v));
        __m128i const sg = _mm_srai_epi16(v, 15);
        __m128i const a = _mm_xor_si128(v, sg);
        _mm_storeu_si128((__m128i*)(void*)(dst + 16 * h), _mm_or_si128(_mm_and_si128(_mm_xor_si128(r, sg), sbit), a));
    }
    *offp = off + s16;
}

/* Pass 2 of 16-bit values from value j on, raw bits from bit offset off. */
LMC_TARGET_AVX2 static size_t apply16_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t j, size_t m, const uint8_t* ref,
                                           rawbits* rb, uint64_t off, __m128i bad, uint32_t badv)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    /* the second window starts at most 15 bytes after the first */
    for (; j + 16 <= m && (off >> 3) + 31 <= raw_size; j += 16)
        apply16_step(ws, j, dst + 2 * j, ref + 2 * j, raw, raw_size, &off, &bad, &badv);
    LMC_FORWARD(apply16_tail(ws, dst, j, m, ref, raw, raw_size, &off, &badv));
    /* leave the reader where the bits end, for the caller's exact-length check */
    rb->p = raw + (off >> 3);
    rb->bb = 0; rb->bc = 0;
    if (off & 7) { rb->bb = (uint64_t)(*rb->p++ >> (off & 7)); rb->bc = 8 - (unsigned)(off & 7); }
    LMC_RETURN_IF(_mm_movemask_epi8(bad) & 0xAAAA, CORRUPT);   /* bit 15 of a lane */
    LMC_RETURN_IF(badv >> 15, CORRUPT);
    return 0;
}

/* Both passes of 16-bit values in one loop: pass 1 keeps the integer units
 * busy, pass 2 is vector work, and interleaved the two overlap (measured:
 * about 12% faster than the same two loops one after the other). Pass 2
 * takes the 16 values whose tokens the previous step decoded: reading the
 * tokens just stored, one byte at a time, would wait for the stores (both
 * a lag of 0 and of 32 measured slower). What is left at the end of the
 * block (near the end of either stream) is finished by the separate passes. */
LMC_TARGET_AVX2 static size_t decode16_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                            uint32_t x[4], rawbits* rb, const uint8_t** wpp, const uint8_t* wend)
{
    const uint8_t* const wbase = *wpp;
    uint8_t* const tok = ws->tok;
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    size_t const nw = (size_t)(wend - wbase) / 2;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    size_t i = 0, j = 0, wi = 0;
    uint64_t off = 0;
    __m128i bad = _mm_setzero_si128();
    uint32_t badv = 0;
    /* 16 tokens read at most 16 words */
    if (nw >= 16)
        for (; i + 16 <= m && wi <= nw - 16; i += 16) {
            TOKEN_ROUND4(i, 16);
            TOKEN_ROUND4(i + 4, 16);
            TOKEN_ROUND4(i + 8, 16);
            TOKEN_ROUND4(i + 12, 16);
            if (j + 16 <= i && (off >> 3) + 31 <= raw_size) {
                apply16_step(ws, j, dst + 2 * j, ref + 2 * j, raw, raw_size, &off, &bad, &badv);
                j += 16;
            }
        }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    *wpp = wbase + 2 * wi;
    LMC_FORWARD(tokens_checked(ws, i, m, ref, x, wpp, wend, 16, LMC_ANS_STATES, 0));
    return apply16_avx2(ws, dst, j, m, ref, rb, off, bad, badv);
}

/* A wide block of 16-bit values without AVX-512: decode16_avx2's fused
 * loop, the 32 states taken four at a time (loaded and stored around each
 * asm round). Measured with the coder held to AVX2 (bench/refctx_stages
 * NEW REF 5 avx2, bf16 delta, medians of 5 alternated runs): this loop 808
 * MB/s, 4-state blocks in decode16_avx2 781, the two passes apart 710; a
 * loop of four 8-lane vectors with gathers was slower still (about 645). */
LMC_TARGET_AVX2 static size_t decode16_wide_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                                 uint32_t* x, rawbits* rb, const uint8_t** wpp, const uint8_t* wend)
{
    const uint8_t* const wbase = *wpp;
    uint8_t* const tok = ws->tok;
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    size_t const nw = (size_t)(wend - wbase) / 2;
    size_t i = 0, j = 0, wi = 0;
    uint64_t off = 0;
    __m128i bad = _mm_setzero_si128();
    uint32_t badv = 0;
    /* 32 tokens read at most 32 words */
    if (nw >= 32)
        for (; i + 32 <= m && wi <= nw - 32; i += 32) {
            for (unsigned b = 0; b < LMC_REFCTX_STATES_WIDE; b += 4) {
                uint32_t x0 = x[b], x1 = x[b + 1], x2 = x[b + 2], x3 = x[b + 3];
                TOKEN_ROUND4(i + b, 16);
                x[b] = x0; x[b + 1] = x1; x[b + 2] = x2; x[b + 3] = x3;
            }
            for (int h = 0; h < 2 && j + 16 <= i && (off >> 3) + 31 <= raw_size; h++, j += 16)
                apply16_step(ws, j, dst + 2 * j, ref + 2 * j, raw, raw_size, &off, &bad, &badv);
        }
    *wpp = wbase + 2 * wi;
    LMC_FORWARD(tokens_checked(ws, i, m, ref, x, wpp, wend, 16, LMC_REFCTX_STATES_WIDE, 0));
    return apply16_avx2(ws, dst, j, m, ref, rb, off, bad, badv);
}

/* 32-bit values, pass 2 with AVX2, 8 values a step: each value's t =
 * b + raw bits read at its own bit offset (one 8-byte read: at most 7 + 31
 * bits), then |r| + t, sign and range check 8 lanes at a time, in 32 bits:
 * t fits in 32 signed bits unless k = 32, v = |r| + t lies in
 * [-2^31 + 1, 2^32 - 2] and is in range unless t > 0 and bit 31 of v is set.
 * A step with a token of k = 32 is done in 64-bit scalar arithmetic. The 8
 * reads end at most 7 * 31 bits, 28 bytes, + 8 after the first: the caller
 * checks raw[(*off >> 3) .. + 36). */
LMC_TARGET_AVX2 LMC_FORCE_INLINE void apply32_step(const lmc_refctx_dws* ws, size_t j, uint8_t* dst, const uint8_t* ref,
                                                   const uint8_t* raw, uint64_t* offp, __m256i* bad, uint64_t* badw)
{
    __m256i const lo31 = _mm256_set1_epi32(0x7FFFFFFF), sbit = _mm256_set1_epi32((int)0x80000000u);
    const uint8_t* const tok = ws->tok + j;
    uint64_t off = *offp;
    uint64_t const t8 = lmc_rd64(tok) & 0x7F7F7F7F7F7F7F7Full;
    if (LMC_LIKELY(!((t8 + 0x4141414141414141ull) & 0x8080808080808080ull))) {   /* no token >= 63 */
        _Alignas(32) int32_t t[8];
        for (int q = 0; q < 8; q++) {
            unsigned const tk = tok[q], nb = ws->tbits[tk];
            uint64_t const low = (lmc_rd64(raw + (off >> 3)) >> (off & 7)) & ((1ull << nb) - 1);
            t[q] = (int32_t)ws->tbase[tk] + (int32_t)low;
            off += nb;
        }
        __m256i const tv = _mm256_load_si256((const __m256i*)(const void*)t);
        __m256i const r = _mm256_loadu_si256((const __m256i*)(const void*)ref);
        __m256i const v = _mm256_add_epi32(_mm256_and_si256(r, lo31), tv);
        *bad = _mm256_or_si256(*bad, _mm256_andnot_si256(tv, v));
        __m256i const sg = _mm256_srai_epi32(v, 31);
        __m256i const a = _mm256_xor_si256(v, sg);
        _mm256_storeu_si256((__m256i*)(void*)dst, _mm256_or_si256(_mm256_and_si256(_mm256_xor_si256(r, sg), sbit), a));
    } else {
        for (int q = 0; q < 8; q++) {
            unsigned const tk = tok[q], nb = ws->tbits[tk];
            uint64_t const low = (lmc_rd64(raw + (off >> 3)) >> (off & 7)) & ws->tmask[tk];
            off += nb;
            uint64_t const r = lmc_rd32(ref + 4 * q);
            int64_t const v = (int64_t)(r & 0x7FFFFFFF) + ws->tbase[tk] + (int64_t)low;
            int64_t const s = v >> 63;
            uint64_t const a = (uint64_t)(v ^ s);
            *badw |= a;
            lmc_wr32(dst + 4 * q, (uint32_t)(((r ^ (uint64_t)s) & 0x80000000u) | a));
        }
    }
    *offp = off;
}

/* Pass 2 of 32-bit values from value j on, raw bits from bit offset off. */
LMC_TARGET_AVX2 static size_t apply32_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t j, size_t m, const uint8_t* ref,
                                           rawbits* rb, uint64_t off, __m256i bad, uint64_t badw)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    for (; j + 8 <= m && (off >> 3) + 36 <= raw_size; j += 8)
        apply32_step(ws, j, dst + 4 * j, ref + 4 * j, raw, &off, &bad, &badw);
    LMC_RETURN_IF(_mm256_movemask_epi8(bad) & (int)0x88888888u, CORRUPT);   /* bit 31 of a lane */
    LMC_RETURN_IF(badw >> 31, CORRUPT);
    /* the rest with the checked bit reader, from where the bits stand */
    rb->p = raw + (off >> 3);
    rb->bb = 0; rb->bc = 0;
    if (off & 7) { rb->bb = (uint64_t)(*rb->p++ >> (off & 7)); rb->bc = 8 - (unsigned)(off & 7); }
    return apply_values(ws, dst, j, m, ref, rb, 32);
}

/* 32-bit values: here the two passes stay apart. Pass 2 is mostly scalar
 * work, which in one loop with pass 1 competes for the same ALUs (measured:
 * 10% slower than two passes). */
LMC_TARGET_AVX2 static size_t decode32_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                            uint32_t x[4], rawbits* rb, const uint8_t** wpp, const uint8_t* wend)
{
    LMC_FORWARD(decode_tokens(ws, m, ref, x, wpp, wend, 32, 1));
    return apply32_avx2(ws, dst, 0, m, ref, rb, 0, _mm256_setzero_si256(), 0);
}
#endif

#if LMC_REFCTX_AVX2 && LMC_HAS_AVX512_DISPATCH
#  define LMC_REFCTX_AVX512 1
/* The slot entries of groups 0..G-1 (LMC_REFCTX_WENT), 16 at a time: each
 * symbol's run may write up to 31 entries past its end, which the next
 * symbols (or the spare entries) overwrite. */
LMC_TARGET_AVX512 static void build_went(lmc_refctx_dws* ws, unsigned G, unsigned alpha)
{
    __m512i const step = _mm512_setr_epi32(0, 1 << 7, 2 << 7, 3 << 7, 4 << 7, 5 << 7, 6 << 7, 7 << 7, 8 << 7, 9 << 7,
                                           10 << 7, 11 << 7, 12 << 7, 13 << 7, 14 << 7, 15 << 7);
    __m512i const sixteen = _mm512_set1_epi32(16 << 7);
    for (unsigned g = 0; g < G; g++) {
        uint32_t* const e = ws->went + g * LMC_ANS_M;
        for (unsigned sym = 0; sym < alpha; sym++) {
            uint32_t const f = ws->grp[g].fc[sym][0], cum = ws->grp[g].fc[sym][1];
            if (!f) continue;
            __m512i v = _mm512_add_epi32(_mm512_set1_epi32((int)(f << 19 | sym)), step);
            /* two stores whatever f, so that the loop runs only for runs of
             * more than 32 slots (the exit of a loop whose count changes
             * from symbol to symbol is a mispredicted branch) */
            _mm512_storeu_si512((void*)(e + cum), v);
            v = _mm512_add_epi32(v, sixteen);
            _mm512_storeu_si512((void*)(e + cum + 16), v);
            for (uint32_t k = 32; k < f; k += 16) {
                v = _mm512_add_epi32(v, sixteen);
                _mm512_storeu_si512((void*)(e + cum + k), v);
            }
        }
    }
}

/* The 32 tokens from value j, bit 7 cleared, in *tk; 0 where one of them
 * has k = 16 (a token above 30), which the vector steps leave to
 * apply16_tail. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE int tokens32(const lmc_refctx_dws* ws, size_t j, __m256i* tk)
{
    *tk = _mm256_and_si256(_mm256_loadu_si256((const __m256i*)(const void*)(ws->tok + j)), _mm256_set1_epi8(0x7F));
    return !_mm256_movemask_epi8(_mm256_cmpgt_epi8(*tk, _mm256_set1_epi8(30)));
}

/* 32 values from their differences t (word lanes) to their references:
 * apply16_step's arithmetic. Bit 15 of a lane of *bad marks a value whose
 * magnitude left 15 bits (a corrupt block). */
LMC_TARGET_AVX512 LMC_FORCE_INLINE void values32k(uint8_t* dst, const uint8_t* ref, __m512i t, __m512i* bad, __m512i lo15,
                                                  __m512i hi1)
{
    __m512i const r = _mm512_loadu_si512((const void*)ref);
    __m512i const v = _mm512_add_epi16(_mm512_and_si512(r, lo15), t);
    *bad = _mm512_or_si512(*bad, _mm512_andnot_si512(t, v));
    __m512i const sg = _mm512_srai_epi16(v, 15);
    __m512i const a = _mm512_xor_si512(v, sg);
    _mm512_storeu_si512((void*)dst, _mm512_or_si512(_mm512_and_si512(_mm512_xor_si512(r, sg), hi1), a));
}

LMC_TARGET_AVX512 LMC_FORCE_INLINE void values32(uint8_t* dst, const uint8_t* ref, __m512i t, __m512i* bad)
{
    values32k(dst, ref, t, bad, _mm512_set1_epi16(0x7FFF), _mm512_set1_epi16((short)0x8000));
}

/* Keeps a loop's constant in a register: gcc otherwise builds some of them
 * again in every pass (a move and a broadcast each; five of them were a
 * sixth of apply16_vbmi's instructions). */
#define LMC_PIN(v) __asm__("" : "+v"(v))

/* 16-bit values, pass 2 with AVX-512 BW: apply16_step's arithmetic for 32
 * values a step, one 8-value window in each 128-bit lane of a zmm. The
 * per-value bytes (window byte index, shift multiplier, mask, base) are
 * computed for the 32 in a ymm as apply16_step does for 16 (the prefix sums
 * of the raw-bit counts restart in each 128-bit half, so that they fit in a
 * byte), then widened to 16-bit lanes. From value j on, raw bits from bit
 * offset 0; apply16_avx2 finishes the block. */
LMC_TARGET_AVX512 static size_t apply16_avx512(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    __m256i const z = _mm256_setzero_si256(), b1 = _mm256_set1_epi8(1), b7 = _mm256_set1_epi8(7), b16 = _mm256_set1_epi8(16);
    __m256i const pw = _mm256_setr_epi8(0, (char)128, 64, 32, 16, 8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0,
                                        0, (char)128, 64, 32, 16, 8, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0);
    __m256i const mlo = _mm256_setr_epi8(0, 1, 3, 7, 15, 31, 63, 127, -1, -1, -1, -1, -1, -1, -1, -1,
                                         0, 1, 3, 7, 15, 31, 63, 127, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i const mhi = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 7, 15, 31, 63, 127,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 7, 15, 31, 63, 127);
#define B16(t) ((t) == 0 ? 0 : ((t) & 1) ? 1 << (((t) - 1) / 2) : 1 - (1 << ((t) / 2)))
#define BLO(t) (char)(B16(t) & 0xFF)
#define BHI(t) (char)((B16(t) >> 8) & 0xFF)
#define BX(t, P) (char)(P(t) ^ P((t) + 16))
#define ROW(P) P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), P(9), P(10), P(11), P(12), P(13), P(14), P(15)
#define XLO(t) BX(t, BLO)
#define XHI(t) BX(t, BHI)
    __m256i const blo0 = _mm256_setr_epi8(ROW(BLO), ROW(BLO)), bhi0 = _mm256_setr_epi8(ROW(BHI), ROW(BHI));
    __m256i const blo1 = _mm256_setr_epi8(ROW(XLO), ROW(XLO)), bhi1 = _mm256_setr_epi8(ROW(XHI), ROW(XHI));
#undef B16
#undef BLO
#undef BHI
#undef BX
#undef ROW
#undef XLO
#undef XHI
    __m512i const c01 = _mm512_set1_epi16(0x0100), c11 = _mm512_set1_epi16(0x0101);
    __m512i bad = _mm512_setzero_si512();
    uint32_t badv = 0;
    uint64_t off = 0;
    size_t j = 0;
    /* the fourth window starts at most 46 bytes after the first */
    for (; j + 32 <= m && (off >> 3) + 63 <= raw_size; j += 32) {
        __m256i tk;
        if (LMC_UNLIKELY(!tokens32(ws, j, &tk))) {
            (void)apply16_tail(ws, dst, j, j + 32, ref, raw, raw_size, &off, &badv);   /* cannot fail here */
            continue;
        }
        __m256i const k = _mm256_avg_epu8(tk, z);
        __m256i const nb = _mm256_subs_epu8(k, b1);
        __m256i p = _mm256_add_epi8(nb, _mm256_slli_si256(nb, 1));
        p = _mm256_add_epi8(p, _mm256_slli_si256(p, 2));
        p = _mm256_add_epi8(p, _mm256_slli_si256(p, 4));
        p = _mm256_add_epi8(p, _mm256_slli_si256(p, 8));
        unsigned const s8 = (unsigned)_mm256_extract_epi8(p, 7), s16 = (unsigned)_mm256_extract_epi8(p, 15);
        unsigned const t8 = (unsigned)_mm256_extract_epi8(p, 23), t16 = (unsigned)_mm256_extract_epi8(p, 31);
        uint64_t const o0 = off, o1 = off + s8, o2 = off + s16, o3 = off + s16 + t8;
        /* bits before a value in its window, plus 7 (bytes, mod 256): the
         * window's start bit plus the bits before the value in its 128-bit
         * half, less those before the window in that half */
        __m256i const c = _mm256_set_epi64x((long long)((((o3 & 7) + 7 - t8) & 0xFF) * 0x0101010101010101ull),
                                            (long long)(((o2 & 7) + 7) * 0x0101010101010101ull),
                                            (long long)((((o1 & 7) + 7 - s8) & 0xFF) * 0x0101010101010101ull),
                                            (long long)(((o0 & 7) + 7) * 0x0101010101010101ull));
        __m256i const rel7 = _mm256_add_epi8(_mm256_sub_epi8(p, nb), c);
        __m256i const idx = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(rel7, 3), _mm256_set1_epi8(0x1F)), b1);
        __m256i const hb = _mm256_shuffle_epi8(pw, _mm256_add_epi8(_mm256_and_si256(rel7, b7), b1));
        __m256i const ml = _mm256_shuffle_epi8(mlo, nb), mh = _mm256_shuffle_epi8(mhi, nb);
        __m256i const t16v = _mm256_sub_epi8(tk, b16);
        __m256i const bl = _mm256_xor_si256(_mm256_shuffle_epi8(blo0, tk), _mm256_shuffle_epi8(blo1, t16v));
        __m256i const bh = _mm256_xor_si256(_mm256_shuffle_epi8(bhi0, tk), _mm256_shuffle_epi8(bhi1, t16v));
        /* one window a 128-bit lane */
        __m512i W = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)(const void*)(raw + (o0 >> 3))));
        W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i*)(const void*)(raw + (o1 >> 3))), 1);
        W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i*)(const void*)(raw + (o2 >> 3))), 2);
        W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i*)(const void*)(raw + (o3 >> 3))), 3);
        __m512i const ca = _mm512_add_epi8(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(idx), c11), c01);
        __m512i const A = _mm512_shuffle_epi8(W, ca), B = _mm512_shuffle_epi8(W, _mm512_add_epi8(ca, c11));
        __m512i const N = _mm512_cvtepu8_epi16(hb);
        __m512i const y = _mm512_or_si512(_mm512_mulhi_epu16(A, _mm512_slli_epi16(N, 8)), _mm512_mullo_epi16(B, N));
        __m512i const mask = _mm512_or_si512(_mm512_cvtepu8_epi16(ml), _mm512_slli_epi16(_mm512_cvtepu8_epi16(mh), 8));
        __m512i const b = _mm512_or_si512(_mm512_cvtepu8_epi16(bl), _mm512_slli_epi16(_mm512_cvtepu8_epi16(bh), 8));
        values32(dst + 2 * j, ref + 2 * j, _mm512_add_epi16(_mm512_and_si512(y, mask), b), &bad);
        off = o2 + t16;
    }
    LMC_RETURN_IF(_mm512_movepi16_mask(bad), CORRUPT);   /* bit 15 of a lane */
    return apply16_avx2(ws, dst, j, m, ref, rb, off, _mm_setzero_si128(), badv);
}

#  if defined(LMC_TARGET_AVX512VBMI)
/* 16-bit values, pass 2 with AVX-512 VBMI, 32 values a step in the 16-bit
 * lanes of one register: the 32 values' raw bits (at most 14 each, so with
 * the first one's bit offset at most 455 bits) lie in the 64 bytes from
 * the step's first byte, and a byte permute takes each value's 3 bytes
 * from there. Bit positions come from a prefix sum of the raw-bit counts
 * across the 32 lanes, the bases from a word permute of the tokens. Fewer
 * shuffles than apply16_avx512 (bytes widened to words, four windows), on
 * the port that both loops wait on. From value 0 at bit 0; apply16_avx2
 * finishes the block. */
LMC_TARGET_AVX512VBMI static size_t apply16_vbmi(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
#define B16(t) ((t) == 0 ? 0 : ((t) & 1) ? 1 << (((t) - 1) / 2) : 1 - (1 << ((t) / 2)))
#define W(t) (short)B16(t)
    __m512i const base_tab = _mm512_set_epi16(W(31), W(30), W(29), W(28), W(27), W(26), W(25), W(24), W(23), W(22),
                                              W(21), W(20), W(19), W(18), W(17), W(16), W(15), W(14), W(13), W(12),
                                              W(11), W(10), W(9), W(8), W(7), W(6), W(5), W(4), W(3), W(2), W(1), W(0));
#undef W
#undef B16
    /* word w of lane L (8 words a 128-bit lane): the last word of lane L-1,
     * then of lane L-2 (for the carries between lanes) */
    __m512i const last1 = _mm512_set_epi16(23, 23, 23, 23, 23, 23, 23, 23, 15, 15, 15, 15, 15, 15, 15, 15,
                                           7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i const last2 = _mm512_set_epi16(15, 15, 15, 15, 15, 15, 15, 15, 7, 7, 7, 7, 7, 7, 7, 7,
                                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i one = _mm512_set1_epi16(1), c0100 = _mm512_set1_epi16(0x0100);
    __m512i c0302 = _mm512_set1_epi16(0x0302), seven = _mm512_set1_epi16(7);
    __m512i lo15 = _mm512_set1_epi16(0x7FFF), hi1 = _mm512_set1_epi16((short)0x8000);
    LMC_PIN(one); LMC_PIN(c0100); LMC_PIN(c0302); LMC_PIN(seven);
    LMC_PIN(lo15); LMC_PIN(hi1);
    __m512i bad = _mm512_setzero_si512();
    uint32_t badv = 0;
    uint64_t off = 0;
    size_t j = 0;
    for (; j + 32 <= m && (off >> 3) + 64 <= raw_size; j += 32) {
        __m256i tb;
        if (LMC_UNLIKELY(!tokens32(ws, j, &tb))) {
            (void)apply16_tail(ws, dst, j, j + 32, ref, raw, raw_size, &off, &badv);   /* cannot fail here */
            continue;
        }
        __m512i const tk = _mm512_cvtepu8_epi16(tb);
        /* the raw-bit counts, (tk + 1) / 2 - 1 at least 0, as bytes; their
         * inclusive prefix sums within each 8 (at most 8 * 14) by a multiply
         * of each quadword by 0x0101010101010101, then widened, a quadword
         * to a 128-bit lane; then the lanes before. (Three shifts and adds
         * in word lanes before 2026-12-05: this is 2-3 % faster decoding,
         * bench/ab.sh on the bf16 deltas of traj-3m and t19m.) */
        __m256i const nb8 = _mm256_subs_epu8(_mm256_avg_epu8(tb, _mm256_setzero_si256()), _mm256_set1_epi8(1));
        __m512i const nb = _mm512_cvtepu8_epi16(nb8);
        __m512i p = _mm512_cvtepu8_epi16(_mm256_mullo_epi64(nb8, _mm256_set1_epi64x(0x0101010101010101ll)));
        p = _mm512_mask_add_epi16(p, 0xFFFFFF00u, p, _mm512_permutexvar_epi16(last1, p));
        p = _mm512_mask_add_epi16(p, 0xFFFF0000u, p, _mm512_permutexvar_epi16(last2, p));
        unsigned const total = (unsigned)_mm_extract_epi16(_mm512_extracti32x4_epi32(p, 3), 7);
        __m512i const pos = _mm512_add_epi16(_mm512_sub_epi16(p, nb), _mm512_set1_epi16((short)(off & 7)));
        __m512i const sh = _mm512_and_si512(pos, seven);
        __m512i const at = _mm512_srli_epi16(pos, 3);
        __m512i const W = _mm512_loadu_si512((const void*)(raw + (off >> 3)));
        /* bytes at, at+1 in A, at+2, at+3 in B: 16 bits from bit sh of at, by a double shift */
        __m512i const at2 = _mm512_add_epi16(_mm512_slli_epi16(at, 8), at);
        __m512i const A = _mm512_permutexvar_epi8(_mm512_add_epi16(at2, c0100), W);
        __m512i const B = _mm512_permutexvar_epi8(_mm512_add_epi16(at2, c0302), W);
        __m512i const y = _mm512_shrdv_epi16(A, B, sh);
        __m512i const mask = _mm512_sub_epi16(_mm512_sllv_epi16(one, nb), one);
        LMC_PREFETCH_W(dst + 2 * j);   /* the output's lines, for writing: about +10 % */
        values32k(dst + 2 * j, ref + 2 * j, _mm512_add_epi16(_mm512_and_si512(y, mask), _mm512_permutexvar_epi16(tk, base_tab)),
                  &bad, lo15, hi1);
        off += total;
    }
    LMC_RETURN_IF(_mm512_movepi16_mask(bad), CORRUPT);   /* bit 15 of a lane */
    return apply16_avx2(ws, dst, j, m, ref, rb, off, _mm_setzero_si128(), badv);
}
#  endif

/* 32-bit values, pass 2 with AVX-512, 16 values a step: each value's bit
 * offset from a prefix sum of the raw-bit counts across the lanes, its bits
 * from the 8 bytes at that byte (at most 7 + 31 bits), its base from its
 * token (2^(k-1), or 1 - 2^k when negative), then apply32_step's
 * arithmetic. A step with a token of k = 32 goes apply32_step's way. From
 * value 0 at bit 0; apply32_avx2 finishes the block. The 8 bytes come from
 * a 64-bit gather, or with VBMI from byte permutes of a 128-byte window
 * (the 16 values' bits span at most 7 + 15 * 31 + 31 bits): the AMD EPYC
 * VM's gathers are slow. */
typedef struct {
    __m512i tk, k, nb, p, at, sh;   /* token, bit length, raw-bit count, prefix sums, byte, shift */
} apply32_lanes;

/* The 16 values' tokens and raw-bit positions; 0 when a token has k = 32
 * (the caller then takes apply32_step's way). */
LMC_TARGET_AVX512 LMC_FORCE_INLINE int apply32_positions(const lmc_refctx_dws* ws, size_t j, uint64_t off, apply32_lanes* l)
{
    __m512i const zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    l->tk = _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(ws->tok + j))),
                             _mm512_set1_epi32(0x7F));
    if (LMC_UNLIKELY(_mm512_cmpge_epu32_mask(l->tk, _mm512_set1_epi32(63)))) return 0;
    l->k = _mm512_srli_epi32(_mm512_add_epi32(l->tk, one), 1);
    l->nb = _mm512_max_epi32(_mm512_sub_epi32(l->k, one), zero);
    __m512i p = _mm512_add_epi32(l->nb, _mm512_alignr_epi32(l->nb, zero, 15));
    p = _mm512_add_epi32(p, _mm512_alignr_epi32(p, zero, 14));
    p = _mm512_add_epi32(p, _mm512_alignr_epi32(p, zero, 12));
    l->p = _mm512_add_epi32(p, _mm512_alignr_epi32(p, zero, 8));
    /* positions relative to byte off >> 3 */
    __m512i const pos = _mm512_add_epi32(_mm512_sub_epi32(l->p, l->nb), _mm512_set1_epi32((int)(uint32_t)(off & 7)));
    l->at = _mm512_srli_epi32(pos, 3);
    l->sh = _mm512_and_si512(pos, _mm512_set1_epi32(7));
    return 1;
}

#if defined(LMC_TARGET_AVX512VBMI)
/* apply32_positions with AVX-512 DQ: the counts as bytes, their inclusive
 * prefix sums within each 8 (at most 8 * 31) by one quadword multiply
 * (apply16_vbmi's), then widened; the second 8 add the first's total. */
LMC_TARGET_AVX512VBMI LMC_FORCE_INLINE int apply32_positions_dq(const lmc_refctx_dws* ws, size_t j, uint64_t off,
                                                                apply32_lanes* l)
{
    __m128i const tk8 = _mm_and_si128(_mm_loadu_si128((const __m128i*)(const void*)(ws->tok + j)), _mm_set1_epi8(0x7F));
    if (LMC_UNLIKELY(_mm_cmpge_epu8_mask(tk8, _mm_set1_epi8(63)))) return 0;
    __m128i const k8 = _mm_avg_epu8(tk8, _mm_setzero_si128());
    __m128i const nb8 = _mm_subs_epu8(k8, _mm_set1_epi8(1));
    l->tk = _mm512_cvtepu8_epi32(tk8);
    l->k = _mm512_cvtepu8_epi32(k8);
    l->nb = _mm512_cvtepu8_epi32(nb8);
    __m512i const p = _mm512_cvtepu8_epi32(_mm_mullo_epi64(nb8, _mm_set1_epi64x(0x0101010101010101ll)));
    l->p = _mm512_mask_add_epi32(p, 0xFF00, p, _mm512_permutexvar_epi32(_mm512_set1_epi32(7), p));
    /* positions relative to byte off >> 3 */
    __m512i const pos = _mm512_add_epi32(_mm512_sub_epi32(l->p, l->nb), _mm512_set1_epi32((int)(uint32_t)(off & 7)));
    l->at = _mm512_srli_epi32(pos, 3);
    l->sh = _mm512_and_si512(pos, _mm512_set1_epi32(7));
    return 1;
}
#endif

/* Values from the 16 lanes' 8-byte words w[0] (values 0-7) and w[1]
 * (8-15); returns the bits consumed. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE uint32_t apply32_values(size_t j, uint8_t* dst, const uint8_t* ref, const apply32_lanes* l,
                                                           const __m512i w[2], __m512i* bad)
{
    __m512i const one = _mm512_set1_epi32(1);
    __m512i const lo31 = _mm512_set1_epi32(0x7FFFFFFF), sbit = _mm512_set1_epi32((int)0x80000000u);
    /* each value's bits (at most 30, from bit sh <= 7 of its word) lie in
     * the low half of its shifted word: the halves of the 16 shifted words
     * by one permute, then masked in 32-bit lanes */
    __m512i const s0 = _mm512_srlv_epi64(w[0], _mm512_cvtepu32_epi64(_mm512_castsi512_si256(l->sh)));
    __m512i const s1 = _mm512_srlv_epi64(w[1], _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(l->sh, 1)));
    __m512i const lows = _mm512_permutex2var_epi32(s0, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), s1);
    __m512i const e = _mm512_and_si512(lows, _mm512_sub_epi32(_mm512_sllv_epi32(one, l->nb), one));
    __mmask16 const pos_tok = _mm512_test_epi32_mask(l->tk, one);
    __m512i const b = _mm512_mask_blend_epi32(pos_tok, _mm512_sub_epi32(one, _mm512_sllv_epi32(one, l->k)),
                                              _mm512_sllv_epi32(one, _mm512_sub_epi32(l->k, one)));
    __m512i const t = _mm512_add_epi32(b, e);
    __m512i const r = _mm512_loadu_si512((const void*)(ref + 4 * j));
    __m512i const v = _mm512_add_epi32(_mm512_and_si512(r, lo31), t);
    *bad = _mm512_or_si512(*bad, _mm512_andnot_si512(t, v));
    __m512i const sg = _mm512_srai_epi32(v, 31);
    __m512i const a = _mm512_xor_si512(v, sg);
    _mm512_storeu_si512((void*)(dst + 4 * j), _mm512_or_si512(_mm512_and_si512(_mm512_xor_si512(r, sg), sbit), a));
    return (uint32_t)_mm_extract_epi32(_mm512_extracti32x4_epi32(l->p, 3), 3);
}

LMC_TARGET_AVX512 static size_t apply32_avx512(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    __m512i bad = _mm512_setzero_si512();
    __m256i bad2 = _mm256_setzero_si256();
    uint64_t badw = 0;
    uint64_t off = 0;
    size_t j = 0;
    /* the last value's 8-byte read ends at most 15 * 31 / 8 + 1 + 8 bytes on */
    for (; j + 16 <= m && (off >> 3) + 68 <= raw_size; j += 16) {
        apply32_lanes l;
        if (!apply32_positions(ws, j, off, &l)) {
            apply32_step(ws, j, dst + 4 * j, ref + 4 * j, raw, &off, &bad2, &badw);
            apply32_step(ws, j + 8, dst + 4 * (j + 8), ref + 4 * (j + 8), raw, &off, &bad2, &badw);
            continue;
        }
        const uint8_t* const base = raw + (off >> 3);
        __m512i const w[2] = { _mm512_i32gather_epi64(_mm512_castsi512_si256(l.at), (const void*)base, 1),
                               _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(l.at, 1), (const void*)base, 1) };
        off += apply32_values(j, dst, ref, &l, w, &bad);
    }
    LMC_RETURN_IF(_mm512_test_epi32_mask(bad, _mm512_set1_epi32((int)0x80000000u)), CORRUPT);   /* bit 31 of a lane */
    return apply32_avx2(ws, dst, j, m, ref, rb, off, bad2, badw);
}

#  if defined(LMC_TARGET_AVX512VBMI)
/* apply32_avx512 with the words from a 128-byte window by byte permutes:
 * each 64-bit lane's byte index (at most 59) copied to its 8 bytes, plus
 * 0..7. */
LMC_TARGET_AVX512VBMI static size_t apply32_vbmi(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb)
{
    const uint8_t* const raw = rb->p;
    size_t const raw_size = (size_t)(rb->lim - rb->p);
    __m512i const spread0 = _mm512_set_epi8(28, 28, 28, 28, 28, 28, 28, 28, 24, 24, 24, 24, 24, 24, 24, 24,
                                            20, 20, 20, 20, 20, 20, 20, 20, 16, 16, 16, 16, 16, 16, 16, 16,
                                            12, 12, 12, 12, 12, 12, 12, 12, 8, 8, 8, 8, 8, 8, 8, 8,
                                            4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i const spread1 = _mm512_add_epi8(spread0, _mm512_set1_epi8(32));
    __m512i const step = _mm512_set1_epi64(0x0706050403020100);
    __m512i bad = _mm512_setzero_si512();
    __m256i bad2 = _mm256_setzero_si256();
    uint64_t badw = 0;
    uint64_t off = 0;
    size_t j = 0;
    for (; j + 16 <= m && (off >> 3) + 128 <= raw_size; j += 16) {
        apply32_lanes l;
        if (!apply32_positions_dq(ws, j, off, &l)) {
            apply32_step(ws, j, dst + 4 * j, ref + 4 * j, raw, &off, &bad2, &badw);
            apply32_step(ws, j + 8, dst + 4 * (j + 8), ref + 4 * (j + 8), raw, &off, &bad2, &badw);
            continue;
        }
        const uint8_t* const base = raw + (off >> 3);
        __m512i const lo = _mm512_loadu_si512((const void*)base), hi = _mm512_loadu_si512((const void*)(base + 64));
        /* byte at + b of value 8 h + q into byte b of quadword q of w[h]:
         * the low byte of each value's at spread over its quadword */
        __m512i const w[2] = {
            _mm512_permutex2var_epi8(lo, _mm512_add_epi8(_mm512_permutexvar_epi8(spread0, l.at), step), hi),
            _mm512_permutex2var_epi8(lo, _mm512_add_epi8(_mm512_permutexvar_epi8(spread1, l.at), step), hi) };
        off += apply32_values(j, dst, ref, &l, w, &bad);
    }
    LMC_RETURN_IF(_mm512_test_epi32_mask(bad, _mm512_set1_epi32((int)0x80000000u)), CORRUPT);   /* bit 31 of a lane */
    return apply32_avx2(ws, dst, j, m, ref, rb, off, bad2, badw);
}
#  endif

/* One round of a wide block with AVX-512: tokens i..i+31, states 0-15 in
 * *xa and 16-31 in *xb, whose groups' offsets in went (g << 12) are ga and
 * gb. A lane's update is the scalar one (the same arithmetic modulo 2^32,
 * the same unsigned compare), and the lanes that renormalise take the next
 * words in lane order, which is token order: the word stream is the one the
 * scalar decoder reads. Reads 32 words at most. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE void wide_round(lmc_refctx_dws* ws, size_t i, __m512i ga, __m512i gb, __m512i* xa,
                                                   __m512i* xb, const uint8_t* wbase, size_t* wi)
{
    __m512i const slot = _mm512_set1_epi32(LMC_ANS_M - 1), L = _mm512_set1_epi32(LMC_ANS_L);
    __m512i const m12 = _mm512_set1_epi32(0xFFF), m7 = _mm512_set1_epi32(0x7F);
    const int* const went = (const int*)(const void*)ws->went;
    /* ga | (x & slot): the offsets' low 12 bits are zero */
    __m512i const ea = _mm512_i32gather_epi32(_mm512_ternarylogic_epi32(ga, *xa, slot, 0xF8), went, 4);
    __m512i const eb = _mm512_i32gather_epi32(_mm512_ternarylogic_epi32(gb, *xb, slot, 0xF8), went, 4);
    __m512i ya = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(ea, 19), _mm512_srli_epi32(*xa, LMC_ANS_PROB_BITS)),
                                  _mm512_and_si512(_mm512_srli_epi32(ea, 7), m12));
    __m512i yb = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(eb, 19), _mm512_srli_epi32(*xb, LMC_ANS_PROB_BITS)),
                                  _mm512_and_si512(_mm512_srli_epi32(eb, 7), m12));
    _mm_storeu_si128((__m128i*)(void*)(ws->tok + i), _mm512_cvtepi32_epi8(_mm512_and_si512(ea, m7)));
    _mm_storeu_si128((__m128i*)(void*)(ws->tok + i + 16), _mm512_cvtepi32_epi8(_mm512_and_si512(eb, m7)));
    __mmask16 const na = _mm512_cmplt_epu32_mask(ya, L);
    __m512i const wa = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(wbase + 2 * *wi)));
    ya = _mm512_mask_or_epi32(ya, na, _mm512_slli_epi32(ya, 16), _mm512_maskz_expand_epi32(na, wa));
    *wi += (size_t)_mm_popcnt_u32(na);
    __mmask16 const nb = _mm512_cmplt_epu32_mask(yb, L);
    __m512i const wb = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(wbase + 2 * *wi)));
    yb = _mm512_mask_or_epi32(yb, nb, _mm512_slli_epi32(yb, 16), _mm512_maskz_expand_epi32(nb, wb));
    *wi += (size_t)_mm_popcnt_u32(nb);
    *xa = ya; *xb = yb;
}

/* The groups' offsets in went (g << 12) of tokens i..i+31, gathered from
 * woff. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE void round_offsets(const lmc_refctx_dws* ws, const uint8_t* ref, size_t i,
                                                      unsigned bits, __m512i* ga, __m512i* gb)
{
    __m512i ca, cb;
    if (bits == 16) {
        ca = _mm512_srli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(ref + 2 * i))), 7);
        cb = _mm512_srli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(ref + 2 * i + 32))), 7);
    } else {
        ca = _mm512_srli_epi32(_mm512_loadu_si512((const void*)(ref + 4 * i)), 23);
        cb = _mm512_srli_epi32(_mm512_loadu_si512((const void*)(ref + 4 * i + 64)), 23);
    }
    *ga = _mm512_i32gather_epi32(ca, ws->woff, 4);
    *gb = _mm512_i32gather_epi32(cb, ws->woff, 4);
}

/* Pass 1 of a wide block with AVX-512 from token i on, the groups' offsets
 * gathered from woff. Pass 2 follows apart: for bf16, a loop that
 * interleaves the two (as decode16_avx2 does for 4 states) measured no
 * faster, the token loop being vector work too. */
LMC_TARGET_AVX512 static size_t decode_tokens_avx512(lmc_refctx_dws* ws, size_t i, size_t m, const uint8_t* ref,
                                                     uint32_t* x, const uint8_t** wpp, const uint8_t* wend, unsigned bits)
{
    const uint8_t* const wbase = *wpp;
    size_t const nw = (size_t)(wend - wbase) / 2;
    size_t wi = 0;
    __m512i xa = _mm512_loadu_si512((const void*)x), xb = _mm512_loadu_si512((const void*)(x + 16));
    if (nw >= 32)
        for (; i + 32 <= m && wi <= nw - 32; i += 32) {
            __m512i ga, gb;
            round_offsets(ws, ref, i, bits, &ga, &gb);
            wide_round(ws, i, ga, gb, &xa, &xb, wbase, &wi);
        }
    _mm512_storeu_si512((void*)x, xa);
    _mm512_storeu_si512((void*)(x + 16), xb);
    *wpp = wbase + 2 * wi;
    return tokens_checked(ws, i, m, ref, x, wpp, wend, bits, LMC_REFCTX_STATES_WIDE, 1);
}

/* Two wide blocks' pass 1 in step (decode_tokens_vbmi_pair,
 * decode_tokens_avx512_pair): their states in registers and where each
 * stands in its word stream. */
typedef struct {
    const uint8_t *wbase0, *wbase1;
    size_t nw0, nw1, wi0, wi1;
    __m512i xa, xb, ya, yb;
} pair_state;

LMC_TARGET_AVX512 LMC_FORCE_INLINE void pair_begin(pair_state* ps, const uint32_t* x0, const uint32_t* x1,
                                                   const uint8_t* wp0, const uint8_t* wp1, const uint8_t* wend0,
                                                   const uint8_t* wend1)
{
    ps->wbase0 = wp0; ps->wbase1 = wp1;
    ps->nw0 = (size_t)(wend0 - wp0) / 2; ps->nw1 = (size_t)(wend1 - wp1) / 2;
    ps->wi0 = ps->wi1 = 0;
    ps->xa = _mm512_loadu_si512((const void*)x0); ps->xb = _mm512_loadu_si512((const void*)(x0 + 16));
    ps->ya = _mm512_loadu_si512((const void*)x1); ps->yb = _mm512_loadu_si512((const void*)(x1 + 16));
}

/* Whether round i (tokens i..i+31) is inside both blocks, and the 32 words
 * a round may read are there in both streams. */
LMC_TARGET_AVX512 LMC_FORCE_INLINE int pair_more(const pair_state* ps, size_t i, size_t m)
{
    return i + 32 <= m && ps->wi0 + 32 <= ps->nw0 && ps->wi1 + 32 <= ps->nw1;
}

LMC_TARGET_AVX512 LMC_FORCE_INLINE void pair_end(pair_state* ps, uint32_t* x0, uint32_t* x1, const uint8_t** wpp0,
                                                 const uint8_t** wpp1)
{
    _mm512_storeu_si512((void*)x0, ps->xa);
    _mm512_storeu_si512((void*)(x0 + 16), ps->xb);
    _mm512_storeu_si512((void*)x1, ps->ya);
    _mm512_storeu_si512((void*)(x1 + 16), ps->yb);
    *wpp0 = ps->wbase0 + 2 * ps->wi0;
    *wpp1 = ps->wbase1 + 2 * ps->wi1;
}

/* decode_tokens_vbmi_pair's loop without VBMI: the groups' offsets
 * gathered. */
LMC_TARGET_AVX512 static size_t decode_tokens_avx512_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, size_t m,
                                                          const uint8_t* ref0, const uint8_t* ref1,
                                                          uint32_t* x0, uint32_t* x1, const uint8_t** wpp0,
                                                          const uint8_t** wpp1, const uint8_t* wend0,
                                                          const uint8_t* wend1, unsigned bits)
{
    pair_state ps;
    size_t i = 0;
    pair_begin(&ps, x0, x1, *wpp0, *wpp1, wend0, wend1);
    for (; pair_more(&ps, i, m); i += 32) {
        __m512i ga, gb, ha, hb;
        round_offsets(ws0, ref0, i, bits, &ga, &gb);
        round_offsets(ws1, ref1, i, bits, &ha, &hb);
        wide_round(ws0, i, ga, gb, &ps.xa, &ps.xb, ps.wbase0, &ps.wi0);
        wide_round(ws1, i, ha, hb, &ps.ya, &ps.yb, ps.wbase1, &ps.wi1);
    }
    pair_end(&ps, x0, x1, wpp0, wpp1);
    return i;
}

#  if defined(LMC_TARGET_AVX512VBMI)
#    define LMC_REFCTX_VBMI 1
/* The groups of 64 contexts (each the low byte of a lane; other bytes are
 * looked up too, and shifted out by the caller) from gmap, held in t0-t3:
 * the index's bits 0-6 pick one of 128 entries of a pair of registers,
 * bit 7 the pair. */
LMC_TARGET_AVX512VBMI LMC_FORCE_INLINE __m512i group_bytes(__m512i e, __m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(e), _mm512_permutex2var_epi8(t0, e, t1),
                                  _mm512_permutex2var_epi8(t2, e, t3));
}

/* The groups' offsets in went (g << 12) of tokens i..i+31, from the
 * gmap bytes in t0-t3. */
LMC_TARGET_AVX512VBMI LMC_FORCE_INLINE void round_groups(const uint8_t* ref, size_t i, unsigned bits, __m512i t0,
                                                         __m512i t1, __m512i t2, __m512i t3, __m512i* ga, __m512i* gb)
{
    if (bits == 16) {
        /* 32 values: the exponent in each word's low byte; g << 12 in 16
         * bits drops the high byte's lookup (g < 16) */
        __m512i const e = _mm512_srli_epi16(_mm512_loadu_si512((const void*)(ref + 2 * i)), 7);
        __m512i const g = _mm512_slli_epi16(group_bytes(e, t0, t1, t2, t3), 12);
        *ga = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(g));
        *gb = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(g, 1));
    } else {
        __m512i const ea = _mm512_srli_epi32(_mm512_loadu_si512((const void*)(ref + 4 * i)), 23);
        __m512i const eb = _mm512_srli_epi32(_mm512_loadu_si512((const void*)(ref + 4 * i + 64)), 23);
        *ga = _mm512_srli_epi32(_mm512_slli_epi32(group_bytes(ea, t0, t1, t2, t3), 24), 12);
        *gb = _mm512_srli_epi32(_mm512_slli_epi32(group_bytes(eb, t0, t1, t2, t3), 24), 12);
    }
}

/* Pass 1 of a wide block with AVX-512 VBMI: as decode_tokens_avx512, the
 * groups' offsets from byte permutes instead of a gather. On the AMD EPYC
 * VMs the gathers were most of this loop's time. */
LMC_TARGET_AVX512VBMI static size_t decode_tokens_vbmi(lmc_refctx_dws* ws, size_t i, size_t m, const uint8_t* ref,
                                                       uint32_t* x, const uint8_t** wpp, const uint8_t* wend, unsigned bits)
{
    const uint8_t* const wbase = *wpp;
    size_t const nw = (size_t)(wend - wbase) / 2;
    size_t wi = 0;
    __m512i const t0 = _mm512_loadu_si512((const void*)ws->gmap), t1 = _mm512_loadu_si512((const void*)(ws->gmap + 64));
    __m512i const t2 = _mm512_loadu_si512((const void*)(ws->gmap + 128)), t3 = _mm512_loadu_si512((const void*)(ws->gmap + 192));
    __m512i xa = _mm512_loadu_si512((const void*)x), xb = _mm512_loadu_si512((const void*)(x + 16));
    if (nw >= 32)
        for (; i + 32 <= m && wi <= nw - 32; i += 32) {
            __m512i ga, gb;
            round_groups(ref, i, bits, t0, t1, t2, t3, &ga, &gb);
            wide_round(ws, i, ga, gb, &xa, &xb, wbase, &wi);
        }
    _mm512_storeu_si512((void*)x, xa);
    _mm512_storeu_si512((void*)(x + 16), xb);
    *wpp = wbase + 2 * wi;
    return tokens_checked(ws, i, m, ref, x, wpp, wend, bits, LMC_REFCTX_STATES_WIDE, 1);
}

/* Pass 1 of two wide blocks at once, a round of each in turn, as far as
 * both go: each round waits on its gathers (a state's next table entry
 * depends on the state), and a block has two vectors of states, so one
 * block alone leaves the core idle between its rounds; the other block's
 * rounds fill that time. Returns the tokens of each block done (the same
 * for both); x, *wpp hold where each block stands, for
 * decode_tokens_vbmi to go on from. */
LMC_TARGET_AVX512VBMI static size_t decode_tokens_vbmi_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, size_t m,
                                                            const uint8_t* ref0, const uint8_t* ref1,
                                                            uint32_t* x0, uint32_t* x1, const uint8_t** wpp0,
                                                            const uint8_t** wpp1, const uint8_t* wend0,
                                                            const uint8_t* wend1, unsigned bits)
{
    __m512i const t0 = _mm512_loadu_si512((const void*)ws0->gmap), t1 = _mm512_loadu_si512((const void*)(ws0->gmap + 64));
    __m512i const t2 = _mm512_loadu_si512((const void*)(ws0->gmap + 128)), t3 = _mm512_loadu_si512((const void*)(ws0->gmap + 192));
    __m512i const u0 = _mm512_loadu_si512((const void*)ws1->gmap), u1 = _mm512_loadu_si512((const void*)(ws1->gmap + 64));
    __m512i const u2 = _mm512_loadu_si512((const void*)(ws1->gmap + 128)), u3 = _mm512_loadu_si512((const void*)(ws1->gmap + 192));
    pair_state ps;
    size_t i = 0;
    pair_begin(&ps, x0, x1, *wpp0, *wpp1, wend0, wend1);
    for (; pair_more(&ps, i, m); i += 32) {
        __m512i ga, gb, ha, hb;
        round_groups(ref0, i, bits, t0, t1, t2, t3, &ga, &gb);
        round_groups(ref1, i, bits, u0, u1, u2, u3, &ha, &hb);
        wide_round(ws0, i, ga, gb, &ps.xa, &ps.xb, ps.wbase0, &ps.wi0);
        wide_round(ws1, i, ha, hb, &ps.ya, &ps.yb, ps.wbase1, &ps.wi1);
    }
    pair_end(&ps, x0, x1, wpp0, wpp1);
    return i;
}
#  else
#    define LMC_REFCTX_VBMI 0
#  endif

#else
#  define LMC_REFCTX_AVX512 0
#endif

#if LMC_REFCTX_AVX2
LMC_TARGET_AVX2 static size_t apply_block_avx2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb,
                                               unsigned w)
{
    return w == 2 ? apply16_avx2(ws, dst, 0, m, ref, rb, 0, _mm_setzero_si128(), 0)
                  : apply32_avx2(ws, dst, 0, m, ref, rb, 0, _mm256_setzero_si256(), 0);
}
#endif

/* Pass 2 of a whole block, with the best instructions at hand. */
static size_t apply_block(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb, unsigned w)
{
#if LMC_REFCTX_AVX2
    if (lmc_cpu_has_avx2()) return apply_block_avx2(ws, dst, m, ref, rb, w);
#endif
#if defined(__SSE2__)
    if (w == 2) return apply16_split(ws, dst, m, ref, rb);
#endif
    return apply_values(ws, dst, 0, m, ref, rb, 8 * w);
}

LMC_FORCE_INLINE size_t decode_body(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                    uint32_t x[4], rawbits* rb, const uint8_t** wp, const uint8_t* wend,
                                    unsigned bits)
{
    LMC_FORWARD(decode_tokens(ws, m, ref, x, wp, wend, bits, 0));
#if defined(__SSE2__)
    if (bits == 16) return apply16_split(ws, dst, m, ref, rb);
#endif
    return apply_values(ws, dst, 0, m, ref, rb, bits);
}

static size_t decode16(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, uint32_t x[4],
                       rawbits* rb, const uint8_t** wp, const uint8_t* wend)
{ return decode_body(ws, dst, m, ref, x, rb, wp, wend, 16); }
static size_t decode32(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, uint32_t x[4],
                       rawbits* rb, const uint8_t** wp, const uint8_t* wend)
{ return decode_body(ws, dst, m, ref, x, rb, wp, wend, 32); }
#if LMC_HAS_BMI2_DISPATCH
LMC_TARGET_BMI2 static size_t decode16_bmi2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                            uint32_t x[4], rawbits* rb, const uint8_t** wp, const uint8_t* wend)
{ return decode_body(ws, dst, m, ref, x, rb, wp, wend, 16); }
LMC_TARGET_BMI2 static size_t decode32_bmi2(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                            uint32_t x[4], rawbits* rb, const uint8_t** wp, const uint8_t* wend)
{ return decode_body(ws, dst, m, ref, x, rb, wp, wend, 32); }
#endif

/* A group's table: each symbol's run of slots, then its frequency and
 * cumulative frequency. */
static void build_group(lmc_refctx_dgroup* g, const uint16_t* freq, unsigned alpha, int need_sym)
{
    uint32_t cum = 0;
    for (unsigned sym = 0; sym < alpha; sym++) {
        uint32_t const f = freq[sym];
        g->fc[sym][0] = f;
        g->fc[sym][1] = cum;
        if (need_sym && f) memset(g->sym + cum, (int)sym, f);
        cum += f;
    }
}

/* Whether wide blocks take the AVX-512 loops (block_body). */
static int wide_avx512(void)
{
#if LMC_REFCTX_AVX512
    return lmc_cpu_has_avx512();
#else
    return 0;
#endif
}

/* A block between its header and its end: its states and streams. */
typedef struct {
    uint32_t x[LMC_REFCTX_STATES_MAX];
    rawbits rb;
    const uint8_t* wp;     /* the next rANS word */
    const uint8_t* wend;
    unsigned G, wide;
} block_state;

/* Reads the block's header, tables and initial states, and sets up its
 * streams. Returns 0 or an error. */
static size_t block_begin(lmc_refctx_dws* ws, unsigned w, const uint8_t* src, size_t size, block_state* bs)
{
    unsigned const alpha = lmc_refctx_alpha(w);
    size_t pos = 0;
    if (ws->talpha != alpha) {   /* the same for every block of a width */
        for (unsigned b = 0; b < 256; b++) {
            unsigned const tok = b & 127;
            unsigned const k = (tok + 1) >> 1, neg = tok && !(tok & 1);
            ws->tbits[b] = (uint8_t)(tok >= alpha ? 0 : k ? k - 1 : 0);   /* never decoded past alpha */
            ws->tmask[b] = (uint32_t)((1ull << ws->tbits[b]) - 1);
            ws->tbase[b] = tok >= alpha || !k ? 0 : neg ? 1 - ((int64_t)1 << k) : ((int64_t)1 << (k - 1));
        }
        ws->talpha = alpha;
    }
    LMC_RETURN_IF(size < 1, TRUNCATED);
    bs->wide = src[pos] & LMC_REFCTX_WIDE;
    /* the slot bytes (sym) serve the scalar and AVX2 loops; a wide block
     * with AVX-512 decodes from went, its last tokens too */
    int const need_sym = !(bs->wide && wide_avx512());
    unsigned const S = bs->wide ? LMC_REFCTX_STATES_WIDE : LMC_ANS_STATES;
    unsigned const G = src[pos++] & ~LMC_REFCTX_WIDE;
    LMC_RETURN_IF(G == 0 || G > LMC_REFCTX_MAX_GROUPS, CORRUPT);
    LMC_RETURN_IF(size - pos < G - 1, TRUNCATED);
    bs->G = G;
    unsigned prev = 0;
    for (unsigned g = 1; g < G; g++) {
        unsigned const b = src[pos + g - 1];
        LMC_RETURN_IF(b <= prev, CORRUPT);   /* strictly increasing; bound 0 is implied */
        prev = b;
    }
    for (unsigned g = 1, c = 0; c < LMC_REFCTX_CONTEXTS; c++) {
        if (g < G && c == src[pos + g - 1]) g++;
        ws->gtab[c] = ws->gtab[c + LMC_REFCTX_CONTEXTS] = ws->grp[g - 1].sym;
    }
    pos += G - 1;
    for (unsigned g = 0; g < G; g++) {
        size_t const t = lmc_freq_read(ws->freq, alpha, src + pos, size - pos);
        LMC_FORWARD(t);
        pos += t;
        build_group(&ws->grp[g], ws->freq, alpha, need_sym);
    }
    LMC_RETURN_IF(size - pos < 4 * S + 4, TRUNCATED);
    for (unsigned j = 0; j < S; j++) {
        bs->x[j] = lmc_rd32(src + pos); pos += 4;
        LMC_RETURN_IF(bs->x[j] < LMC_ANS_L, CORRUPT);
    }
    size_t const raw_size = lmc_rd32(src + pos); pos += 4;
    LMC_RETURN_IF(raw_size > size - pos, TRUNCATED);
    rawbits const rb = { src + pos, src + pos + raw_size, 0, 0, src + pos + raw_size };
    bs->rb = rb;
    if (raw_size < LMC_REFCTX_RAWPAD) {
        /* a sparse delta's raw stream is short, and its last 31 bytes can
         * hold a quarter of the block's values: a padded copy lets the
         * vector loops run to the end (measured on a bf16 delta with 94 %
         * of its values unchanged: 24 % of them went the scalar way) */
        memcpy(ws->rawpad, src + pos, raw_size);
        memset(ws->rawpad + raw_size, 0, LMC_REFCTX_RAWPAD_ZEROS);
        bs->rb.p = ws->rawpad;
        bs->rb.end = ws->rawpad + raw_size;
        bs->rb.lim = bs->rb.end + LMC_REFCTX_RAWPAD_LIM;
    }
    bs->wp = src + pos + raw_size;
    bs->wend = src + size;
    return 0;
}

/* Every word and raw bit used, every state back at its start: 0 or an error. */
static size_t block_end(block_state* bs)
{
    unsigned const S = bs->wide ? LMC_REFCTX_STATES_WIDE : LMC_ANS_STATES;
    LMC_RETURN_IF(bs->wp != bs->wend, CORRUPT);
    for (unsigned j = 0; j < S; j++) LMC_RETURN_IF(bs->x[j] != LMC_ANS_L, CORRUPT);
    /* the raw stream: exactly ceil(bits / 8) bytes, zero padding */
    raw_refill_slow(&bs->rb);
    LMC_RETURN_IF(bs->rb.p != bs->rb.end || bs->rb.bc >= 8 || bs->rb.bb != 0, CORRUPT);
    return 0;
}

#if LMC_REFCTX_AVX512
/* Pass 2 of a wide block with AVX-512. */
static size_t apply_wide_avx512(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref, rawbits* rb, unsigned w)
{
#if LMC_REFCTX_VBMI
    if (w == 2 && lmc_cpu_has_avx512vbmi()) return apply16_vbmi(ws, dst, m, ref, rb);
#endif
    if (w == 2) return apply16_avx512(ws, dst, m, ref, rb);
#if LMC_REFCTX_VBMI
    if (lmc_cpu_has_avx512vbmi()) return apply32_vbmi(ws, dst, m, ref, rb);
#endif
    return apply32_avx512(ws, dst, m, ref, rb);
}
#endif

#if LMC_REFCTX_AVX512
/* The wide tables of decode_tokens_avx512. */
static void wide_tables_avx512(lmc_refctx_dws* ws, unsigned G, unsigned alpha)
{
    build_went(ws, G, alpha);
    for (unsigned c = 0; c < 2 * LMC_REFCTX_CONTEXTS; c++)
        ws->woff[c] = (int32_t)(((const lmc_refctx_dgroup*)(const void*)ws->gtab[c] - ws->grp) * LMC_ANS_M);
}
#endif

#if LMC_REFCTX_VBMI
/* The wide tables of decode_tokens_vbmi. */
static void wide_tables_vbmi(lmc_refctx_dws* ws, unsigned G, unsigned alpha)
{
    build_went(ws, G, alpha);
    for (unsigned c = 0; c < LMC_REFCTX_CONTEXTS; c++)
        ws->gmap[c] = (uint8_t)((const lmc_refctx_dgroup*)(const void*)ws->gtab[c] - ws->grp);
}
#endif

/* A narrow block with few words against its values: a sparse delta, whose
 * states renormalise about once in 32 tokens or less often. */
LMC_FORCE_INLINE int sparse_block(const block_state* bs, size_t m)
{
    return !bs->wide && (size_t)(bs->wend - bs->wp) / 2 * 32 <= m;
}

/* One token of a sparse block: renormalisation as a branch, which then
 * almost always goes the same way. renorm_fast's conditional move makes
 * each state's update wait on the word index, so on the updates of the
 * three other states (the index moves with each); a predicted branch does
 * not, and the four states' chains overlap. */
#define SPARSE_STEP(WS, TOK, X, REF, WP, WEND, n)                                            \
    do {                                                                                     \
        (TOK)[n] = (uint8_t)decode_token(WS, &(X), (REF) + (n) * (bits / 8), bits);         \
        if (LMC_UNLIKELY((X) < LMC_ANS_L)) {                                                 \
            LMC_RETURN_IF((WEND) - (WP) < 2, CORRUPT);                                       \
            (X) = ((X) << 16) | lmc_rd16(WP);                                                \
            (WP) += 2;                                                                       \
        }                                                                                    \
    } while (0)

/* Pass 1 of a sparse block from token i (a multiple of 4) on. */
LMC_FORCE_INLINE size_t decode_tokens_sparse(lmc_refctx_dws* ws, size_t i, size_t m, const uint8_t* ref, uint32_t x[4],
                                             const uint8_t** wpp, const uint8_t* wend, unsigned bits)
{
    uint8_t* const tok = ws->tok;
    const uint8_t* wp = *wpp;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    for (; i + 4 <= m; i += 4) {
        SPARSE_STEP(ws, tok, x0, ref, wp, wend, i);
        SPARSE_STEP(ws, tok, x1, ref, wp, wend, i + 1);
        SPARSE_STEP(ws, tok, x2, ref, wp, wend, i + 2);
        SPARSE_STEP(ws, tok, x3, ref, wp, wend, i + 3);
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    *wpp = wp;
    return tokens_checked(ws, i, m, ref, x, wpp, wend, bits, LMC_ANS_STATES, 0);
}

/* Pass 1 of two sparse blocks in step, as far as both go (m tokens, a
 * multiple of 4): one block's four chains of dependent loads leave the
 * core idle, the other's fill it. */
LMC_FORCE_INLINE size_t decode_tokens_sparse_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, size_t m,
                                                  const uint8_t* ref0, const uint8_t* ref1, block_state* b0,
                                                  block_state* b1, unsigned bits)
{
    uint8_t* const tok0 = ws0->tok;
    uint8_t* const tok1 = ws1->tok;
    const uint8_t *wp0 = b0->wp, *wp1 = b1->wp;
    const uint8_t* const wend0 = b0->wend;
    const uint8_t* const wend1 = b1->wend;
    uint32_t x0 = b0->x[0], x1 = b0->x[1], x2 = b0->x[2], x3 = b0->x[3];
    uint32_t y0 = b1->x[0], y1 = b1->x[1], y2 = b1->x[2], y3 = b1->x[3];
    for (size_t i = 0; i < m; i += 4) {
        SPARSE_STEP(ws0, tok0, x0, ref0, wp0, wend0, i);
        SPARSE_STEP(ws1, tok1, y0, ref1, wp1, wend1, i);
        SPARSE_STEP(ws0, tok0, x1, ref0, wp0, wend0, i + 1);
        SPARSE_STEP(ws1, tok1, y1, ref1, wp1, wend1, i + 1);
        SPARSE_STEP(ws0, tok0, x2, ref0, wp0, wend0, i + 2);
        SPARSE_STEP(ws1, tok1, y2, ref1, wp1, wend1, i + 2);
        SPARSE_STEP(ws0, tok0, x3, ref0, wp0, wend0, i + 3);
        SPARSE_STEP(ws1, tok1, y3, ref1, wp1, wend1, i + 3);
    }
    b0->x[0] = x0; b0->x[1] = x1; b0->x[2] = x2; b0->x[3] = x3;
    b1->x[0] = y0; b1->x[1] = y1; b1->x[2] = y2; b1->x[3] = y3;
    b0->wp = wp0;
    b1->wp = wp1;
    return 0;
}
#undef SPARSE_STEP

/* Pass 2 of a sparse block (any pass 2 would do; these are the fastest). */
static size_t apply_sparse(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w, const uint8_t* ref, block_state* bs)
{
#if LMC_REFCTX_AVX512
    if (lmc_cpu_has_avx512()) return apply_wide_avx512(ws, dst, m, ref, &bs->rb, w);
#endif
    return apply_block(ws, dst, m, ref, &bs->rb, w);
}

static size_t decode_sparse(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w, const uint8_t* ref, block_state* bs)
{
    if (w == 2) LMC_FORWARD(decode_tokens_sparse(ws, 0, m, ref, bs->x, &bs->wp, bs->wend, 16));
    else        LMC_FORWARD(decode_tokens_sparse(ws, 0, m, ref, bs->x, &bs->wp, bs->wend, 32));
    return apply_sparse(ws, dst, m, w, ref, bs);
}

/* Two sparse blocks: pass 1 in step as far as both go, then each alone. */
static size_t decode_sparse_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, unsigned w, const lmc_refctx_job* a,
                                 const lmc_refctx_job* b, block_state* b0, block_state* b1)
{
    size_t const m = LMC_MIN(a->m, b->m) & ~(size_t)3;
    if (w == 2) {
        LMC_FORWARD(decode_tokens_sparse_pair(ws0, ws1, m, a->ref, b->ref, b0, b1, 16));
        LMC_FORWARD(decode_tokens_sparse(ws0, m, a->m, a->ref, b0->x, &b0->wp, b0->wend, 16));
        LMC_FORWARD(decode_tokens_sparse(ws1, m, b->m, b->ref, b1->x, &b1->wp, b1->wend, 16));
    } else {
        LMC_FORWARD(decode_tokens_sparse_pair(ws0, ws1, m, a->ref, b->ref, b0, b1, 32));
        LMC_FORWARD(decode_tokens_sparse(ws0, m, a->m, a->ref, b0->x, &b0->wp, b0->wend, 32));
        LMC_FORWARD(decode_tokens_sparse(ws1, m, b->m, b->ref, b1->x, &b1->wp, b1->wend, 32));
    }
    LMC_FORWARD(apply_sparse(ws0, a->dst, a->m, w, a->ref, b0));
    LMC_FORWARD(block_end(b0));
    LMC_FORWARD(apply_sparse(ws1, b->dst, b->m, w, b->ref, b1));
    return block_end(b1);
}

/* Passes 1 and 2 of a block, with the best instructions at hand. */
static size_t block_body(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w, const uint8_t* ref, block_state* bs)
{
    uint32_t* const x = bs->x;
    size_t r;
    if (bs->wide) {
#if LMC_REFCTX_AVX512
        if (lmc_cpu_has_avx512()) {
#if LMC_REFCTX_VBMI
            if (lmc_cpu_has_avx512vbmi()) {
                wide_tables_vbmi(ws, bs->G, lmc_refctx_alpha(w));
                r = decode_tokens_vbmi(ws, 0, m, ref, x, &bs->wp, bs->wend, 8 * w);
            } else
#endif
            {
                wide_tables_avx512(ws, bs->G, lmc_refctx_alpha(w));
                r = decode_tokens_avx512(ws, 0, m, ref, x, &bs->wp, bs->wend, 8 * w);
            }
            if (!lmc_is_error(r)) r = apply_wide_avx512(ws, dst, m, ref, &bs->rb, w);
        } else
#endif
#if LMC_REFCTX_AVX2
        if (w == 2 && lmc_cpu_has_avx2()) r = decode16_wide_avx2(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend);
        else
#endif
        {
            r = decode_tokens_wide(ws, 0, m, ref, x, &bs->wp, bs->wend, 8 * w, lmc_cpu_has_avx2_asm());
            if (!lmc_is_error(r)) r = apply_block(ws, dst, m, ref, &bs->rb, w);
        }
    } else if (sparse_block(bs, m)) {
        r = decode_sparse(ws, dst, m, w, ref, bs);
    } else
#if LMC_REFCTX_AVX2
    if (lmc_cpu_has_avx2())
        r = w == 2 ? decode16_avx2(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend)
                   : decode32_avx2(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend);
    else
#endif
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2())
        r = w == 2 ? decode16_bmi2(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend)
                   : decode32_bmi2(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend);
    else
#endif
        r = w == 2 ? decode16(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend)
                   : decode32(ws, dst, m, ref, x, &bs->rb, &bs->wp, bs->wend);
    return r;
}

size_t lmc_refctx_decode(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w,
                         const uint8_t* ref, const uint8_t* src, size_t size)
{
    block_state bs;
    LMC_FORWARD(block_begin(ws, w, src, size, &bs));
    LMC_FORWARD(block_body(ws, dst, m, w, ref, &bs));
    return block_end(&bs);
}

int lmc_refctx_pairs(void)
{
#if LMC_REFCTX_AVX512
    return lmc_cpu_has_avx512();
#else
    return 0;
#endif
}

size_t lmc_refctx_decode_pair(lmc_refctx_dws* ws0, lmc_refctx_dws* ws1, unsigned w, const lmc_refctx_job* a,
                              const lmc_refctx_job* b)
{
#if LMC_REFCTX_AVX512
    if (lmc_refctx_pairs() && a->size && b->size && (a->src[0] & b->src[0] & LMC_REFCTX_WIDE)) {
        block_state b0, b1;
        unsigned const alpha = lmc_refctx_alpha(w), bits = 8 * w;
        size_t const m = LMC_MIN(a->m, b->m);
        LMC_FORWARD(block_begin(ws0, w, a->src, a->size, &b0));
        LMC_FORWARD(block_begin(ws1, w, b->src, b->size, &b1));
        size_t i;
#if LMC_REFCTX_VBMI
        int const vbmi = lmc_cpu_has_avx512vbmi();
        if (vbmi) {
            wide_tables_vbmi(ws0, b0.G, alpha);
            wide_tables_vbmi(ws1, b1.G, alpha);
            i = decode_tokens_vbmi_pair(ws0, ws1, m, a->ref, b->ref, b0.x, b1.x, &b0.wp, &b1.wp, b0.wend, b1.wend, bits);
        } else
#endif
        {
            wide_tables_avx512(ws0, b0.G, alpha);
            wide_tables_avx512(ws1, b1.G, alpha);
            i = decode_tokens_avx512_pair(ws0, ws1, m, a->ref, b->ref, b0.x, b1.x, &b0.wp, &b1.wp, b0.wend, b1.wend, bits);
        }
        /* each block's last rounds, from where the pair's loop stopped */
#if LMC_REFCTX_VBMI
        if (vbmi) {
            LMC_FORWARD(decode_tokens_vbmi(ws0, i, a->m, a->ref, b0.x, &b0.wp, b0.wend, bits));
            LMC_FORWARD(decode_tokens_vbmi(ws1, i, b->m, b->ref, b1.x, &b1.wp, b1.wend, bits));
        } else
#endif
        {
            LMC_FORWARD(decode_tokens_avx512(ws0, i, a->m, a->ref, b0.x, &b0.wp, b0.wend, bits));
            LMC_FORWARD(decode_tokens_avx512(ws1, i, b->m, b->ref, b1.x, &b1.wp, b1.wend, bits));
        }
        LMC_FORWARD(apply_wide_avx512(ws0, a->dst, a->m, a->ref, &b0.rb, w));
        LMC_FORWARD(block_end(&b0));
        LMC_FORWARD(apply_wide_avx512(ws1, b->dst, b->m, b->ref, &b1.rb, w));
        return block_end(&b1);
    }
#endif
    if (a->size && b->size && !((a->src[0] | b->src[0]) & LMC_REFCTX_WIDE)) {
        block_state b0, b1;
        LMC_FORWARD(block_begin(ws0, w, a->src, a->size, &b0));
        LMC_FORWARD(block_begin(ws1, w, b->src, b->size, &b1));
        if (sparse_block(&b0, a->m) && sparse_block(&b1, b->m)) return decode_sparse_pair(ws0, ws1, w, a, b, &b0, &b1);
        LMC_FORWARD(block_body(ws0, a->dst, a->m, w, a->ref, &b0));
        LMC_FORWARD(block_end(&b0));
        LMC_FORWARD(block_body(ws1, b->dst, b->m, w, b->ref, &b1));
        return block_end(&b1);
    }
    LMC_FORWARD(lmc_refctx_decode(ws0, a->dst, a->m, w, a->ref, a->src, a->size));
    return lmc_refctx_decode(ws1, b->dst, b->m, w, b->ref, b->src, b->size);
}

int lmc_refctx_pair_class(const lmc_refctx_job* job)
{
    if (!job->size) return 0;
    if (job->src[0] & LMC_REFCTX_WIDE) return lmc_refctx_pairs();
    /* at most a byte of block per 16 values: its words, at most one per 32 tokens (sparse_block) */
    return job->size * 16 <= job->m ? 2 : 0;
}
