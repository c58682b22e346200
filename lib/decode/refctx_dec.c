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

typedef struct {
    const uint8_t* p;      /* next raw byte not fully in bb */
    const uint8_t* end;
    uint64_t bb;           /* bits not yet consumed, LSB first */
    unsigned bc;           /* how many */
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

/* Pass 1, one token with state xs. */
LMC_FORCE_INLINE unsigned decode_token(const lmc_refctx_dws* ws, uint32_t* xs, const uint8_t* ref, unsigned bits)
{
    uint32_t const r = bits == 16 ? lmc_rd16(ref) : lmc_rd32(ref);
    uint32_t const idx = ws->base[(r >> (bits - 9)) & 255] + (*xs & (LMC_ANS_M - 1));
    uint32_t const e = ws->slot[idx];
    *xs = (e >> 16) * (*xs >> LMC_ANS_PROB_BITS) + (e & 0xFFFF);
    return ws->stok[idx];
}

/* At most one 16-bit word per symbol. The condition is true about once in
 * four symbols at random: a conditional move, not a branch. */
LMC_FORCE_INLINE void renorm_fast(uint32_t* xs, const uint8_t** wp)
{
    uint32_t x = *xs;
    uint32_t const y = (x << 16) | lmc_rd16(*wp);
    size_t const need = x < LMC_ANS_L;
#if defined(__GNUC__) && defined(__x86_64__)
    /* compilers turn the select into a branch, which mispredicts */
    __asm__("cmpl %2, %0\n\tcmovb %1, %0" : "+r"(x) : "r"(y), "i"(LMC_ANS_L) : "cc");
#else
    x = need ? y : x;
#endif
    *xs = x;
    *wp += 2 * need;
}

/* Pass 1: the tokens, into ws->tok. Two passes instead of one keep each
 * loop's state in registers. */
LMC_FORCE_INLINE size_t decode_tokens(lmc_refctx_dws* ws, size_t m, const uint8_t* ref, uint32_t x[4],
                                      const uint8_t** wpp, const uint8_t* wend, unsigned bits)
{
    unsigned const w = bits / 8;
    const uint8_t* wp = *wpp;
    uint8_t* const tok = ws->tok;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    size_t i = 0;
    /* a round reads at most 8 bytes and peeks 2 more */
    for (; i + 4 <= m && wend - wp >= 10; i += 4) {
        tok[i]     = (uint8_t)decode_token(ws, &x0, ref + i * w, bits);       renorm_fast(&x0, &wp);
        tok[i + 1] = (uint8_t)decode_token(ws, &x1, ref + (i + 1) * w, bits); renorm_fast(&x1, &wp);
        tok[i + 2] = (uint8_t)decode_token(ws, &x2, ref + (i + 2) * w, bits); renorm_fast(&x2, &wp);
        tok[i + 3] = (uint8_t)decode_token(ws, &x3, ref + (i + 3) * w, bits); renorm_fast(&x3, &wp);
    }
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    for (; i < m; i++) {
        uint32_t* const xs = &x[i & 3];
        tok[i] = (uint8_t)decode_token(ws, xs, ref + i * w, bits);
        if (*xs < LMC_ANS_L) {
            LMC_RETURN_IF(wend - wp < 2, CORRUPT);
            *xs = (*xs << 16) | lmc_rd16(wp);
            wp += 2;
        }
    }
    *wpp = wp;
    return 0;
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

LMC_FORCE_INLINE size_t apply_values(const lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                     rawbits* rbp, unsigned bits)
{
    unsigned const w = bits / 8;
    const uint8_t* const tok = ws->tok;
    rawbits rb = *rbp;
    uint64_t bad = 0;
    size_t i = 0;
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

LMC_FORCE_INLINE size_t decode_body(lmc_refctx_dws* ws, uint8_t* dst, size_t m, const uint8_t* ref,
                                    uint32_t x[4], rawbits* rb, const uint8_t** wp, const uint8_t* wend,
                                    unsigned bits)
{
    LMC_FORWARD(decode_tokens(ws, m, ref, x, wp, wend, bits));
#if defined(__SSE2__)
    if (bits == 16) return apply16_split(ws, dst, m, ref, rb);
#endif
    return apply_values(ws, dst, m, ref, rb, bits);
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

/* A group's slot table: a block of 64 Ki values can carry 16 of them, so
 * they are filled four entries per store. */
static void build_slots(uint32_t* T, uint8_t* tok, const uint16_t* freq, unsigned alpha)
{
    uint32_t cum = 0;
    for (unsigned sym = 0; sym < alpha; sym++) {
        uint32_t const f = freq[sym];
        if (!f) continue;
        memset(tok + cum, (int)sym, f);
        uint32_t* const t = T + cum;
        uint32_t k = 0;
#if defined(__SSE2__)
        __m128i v = _mm_setr_epi32((int)(f << 16), (int)(f << 16 | 1), (int)(f << 16 | 2), (int)(f << 16 | 3));
        __m128i const four = _mm_set1_epi32(4);
        for (; k + 4 <= f; k += 4) { _mm_storeu_si128((__m128i*)(void*)(t + k), v); v = _mm_add_epi32(v, four); }
#endif
        for (; k < f; k++) t[k] = f << 16 | k;
        cum += f;
    }
}

size_t lmc_refctx_decode(lmc_refctx_dws* ws, uint8_t* dst, size_t m, unsigned w,
                         const uint8_t* ref, const uint8_t* src, size_t size)
{
    unsigned const alpha = lmc_refctx_alpha(w);
    size_t pos = 0;
    for (unsigned tok = 0; tok < alpha; tok++) {
        unsigned const k = (tok + 1) >> 1, neg = tok && !(tok & 1);
        ws->tbits[tok] = (uint8_t)(k ? k - 1 : 0);
        ws->tmask[tok] = (uint32_t)((1ull << ws->tbits[tok]) - 1);
        ws->tbase[tok] = !k ? 0 : neg ? 1 - ((int64_t)1 << k) : ((int64_t)1 << (k - 1));
    }
    LMC_RETURN_IF(size < 1, TRUNCATED);
    unsigned const G = src[pos++];
    LMC_RETURN_IF(G == 0 || G > LMC_REFCTX_MAX_GROUPS, CORRUPT);
    LMC_RETURN_IF(size - pos < G - 1, TRUNCATED);
    unsigned prev = 0;
    for (unsigned g = 1; g < G; g++) {
        unsigned const b = src[pos + g - 1];
        LMC_RETURN_IF(b <= prev, CORRUPT);   /* strictly increasing; bound 0 is implied */
        prev = b;
    }
    for (unsigned g = 1, c = 0; c < LMC_REFCTX_CONTEXTS; c++) {
        if (g < G && c == src[pos + g - 1]) g++;
        ws->base[c] = (uint16_t)((g - 1) * LMC_ANS_M);
    }
    pos += G - 1;
    for (unsigned g = 0; g < G; g++) {
        size_t const t = lmc_freq_read(ws->freq, alpha, src + pos, size - pos);
        LMC_FORWARD(t);
        pos += t;
        build_slots(ws->slot + g * LMC_ANS_M, ws->stok + g * LMC_ANS_M, ws->freq, alpha);
    }
    LMC_RETURN_IF(size - pos < 4 * LMC_ANS_STATES + 4, TRUNCATED);
    uint32_t x[LMC_ANS_STATES];
    for (int j = 0; j < LMC_ANS_STATES; j++) {
        x[j] = lmc_rd32(src + pos); pos += 4;
        LMC_RETURN_IF(x[j] < LMC_ANS_L, CORRUPT);
    }
    size_t const raw_size = lmc_rd32(src + pos); pos += 4;
    LMC_RETURN_IF(raw_size > size - pos, TRUNCATED);
    rawbits rb = { src + pos, src + pos + raw_size, 0, 0 };
    const uint8_t* wp = src + pos + raw_size;
    const uint8_t* const wend = src + size;
    size_t r;
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2())
        r = w == 2 ? decode16_bmi2(ws, dst, m, ref, x, &rb, &wp, wend) : decode32_bmi2(ws, dst, m, ref, x, &rb, &wp, wend);
    else
#endif
        r = w == 2 ? decode16(ws, dst, m, ref, x, &rb, &wp, wend) : decode32(ws, dst, m, ref, x, &rb, &wp, wend);
    LMC_FORWARD(r);
    LMC_RETURN_IF(wp != wend, CORRUPT);
    for (int j = 0; j < LMC_ANS_STATES; j++) LMC_RETURN_IF(x[j] != LMC_ANS_L, CORRUPT);
    /* the raw stream: exactly ceil(bits / 8) bytes, zero padding */
    raw_refill_slow(&rb);
    LMC_RETURN_IF(rb.p != rb.end || rb.bc >= 8 || rb.bb != 0, CORRUPT);
    return 0;
}
