/* block_dec.c - table-driven Huffman decoding, 4 interleaved bitstreams.
 *
 * Every read is bounds-checked: the fast loop only runs while each stream has
 * 8 readable bytes left, and the tail loop reads byte by byte, treating bytes
 * past the end as zeros and then rejecting a stream whose consumed bit count
 * does not match its stored length. */
#include <string.h>
#include "block_dec.h"
#include "error.h"
#include "mem.h"

size_t lmc_huf_read_table(uint8_t* len, unsigned alpha, const uint8_t* src, size_t srcSize)
{
    LMC_RETURN_IF(srcSize < 2, TRUNCATED);
    unsigned const nsym = lmc_rd16(src);
    LMC_RETURN_IF(nsym == 0 || nsym > alpha, CORRUPT);
    memset(len, 0, alpha);
    size_t pos = 2;
    unsigned half = 0, s = 0;
    uint8_t cur = 0;
#define GET_NIBBLE(v) do { if (!half) { LMC_RETURN_IF(pos >= srcSize, TRUNCATED); cur = src[pos++]; (v) = cur & 15; half = 1; } \
                           else { (v) = cur >> 4; half = 0; } } while (0)
    while (s < nsym) {
        unsigned v;
        GET_NIBBLE(v);
        if (v == LMC_NIBBLE_ZRUN) {
            unsigned z;
            GET_NIBBLE(z);
            z += 3;
            LMC_RETURN_IF(z > nsym - s, CORRUPT);
            s += z;  /* already zeroed */
        } else {
            LMC_RETURN_IF(v > LMC_HUF_MAXBITS, CORRUPT);
            len[s++] = (uint8_t)v;
        }
    }
    if (half) LMC_RETURN_IF((cur >> 4) != 0, CORRUPT);
#undef GET_NIBBLE
    return pos;
}

typedef struct { const uint8_t* base; size_t size; size_t pos; uint64_t bits; unsigned n; } bitr;

LMC_FORCE_INLINE void br_refill_fast(bitr* r)
{
    /* pos + 8 <= size: load 8 bytes, keep whole bytes only (libdeflate's refill) */
    r->bits |= lmc_rd64(r->base + r->pos) << r->n;
    r->pos += (63 - r->n) >> 3;
    r->n |= 56;
}

LMC_FORCE_INLINE void br_refill_safe(bitr* r)
{
    if (r->pos + 8 <= r->size) { br_refill_fast(r); return; }
    while (r->n <= 56) {
        uint64_t const b = r->pos < r->size ? r->base[r->pos] : 0;
        r->bits |= b << r->n;
        r->pos++;
        r->n += 8;
    }
}

/* The stream must end within its last byte: ceil(consumed / 8) == size. */
static int br_finished_exactly(const bitr* r)
{
    size_t const consumed = r->pos * 8 - r->n;
    return (consumed + 7) / 8 == r->size;
}

/* Returns the shortest code length. */
static unsigned build_lit_table(uint16_t* T, const uint8_t* len, const uint16_t* code)
{
    unsigned minlen = LMC_HUF_MAXBITS;
    memset(T, 0, LMC_HUF_TABLE_SIZE * sizeof(*T));
    for (unsigned s = 0; s < LMC_ALPHA_LIT; s++) {
        unsigned const l = len[s];
        if (!l) continue;
        minlen = LMC_MIN(minlen, l);
        uint16_t const e = (uint16_t)((s << 8) | l);
        for (unsigned i = code[s]; i < LMC_HUF_TABLE_SIZE; i += 1u << l) T[i] = e;
    }
    return minlen;
}

static void build_rle_table(uint32_t* T, const uint8_t* len, const uint16_t* code)
{
    memset(T, 0, LMC_HUF_TABLE_SIZE * sizeof(*T));
    for (unsigned s = 0; s < LMC_ALPHA_RLE; s++) {
        unsigned const l = len[s];
        if (!l) continue;
        uint32_t const e = (s << 8) | l;
        for (unsigned i = code[s]; i < LMC_HUF_TABLE_SIZE; i += 1u << l) T[i] = e;
    }
}

#define MASK (LMC_HUF_TABLE_SIZE - 1)
#define MULTI_MIN_BLOCK 16384   /* below, building the multi-symbol table costs more than it saves */

LMC_FORCE_INLINE size_t decode_tail(const uint16_t* T, bitr* r, uint8_t* o, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++) {
        br_refill_safe(r);
        uint16_t const e = T[r->bits & MASK];
        unsigned const l = e & 0xFF;
        LMC_RETURN_IF(l == 0, CORRUPT);
        o[i] = (uint8_t)(e >> 8);
        r->bits >>= l; r->n -= l;
    }
    LMC_RETURN_IF(!br_finished_exactly(r), CORRUPT);
    return 0;
}

/* Positions the safe reader at bit `bitpos` of its stream. */
static void br_seek(bitr* r, size_t bitpos)
{
    r->pos = bitpos >> 3; r->bits = 0; r->n = 0;
    br_refill_safe(r);
    unsigned const k = (unsigned)(bitpos & 7);
    r->bits >>= k; r->n -= k;
}

/* Fast phase, four streams at once. A stream keeps only a byte pointer and
 * a 64-bit word loaded there and shifted to its next code, with a sentinel
 * bit above the bits still unread (the word's top bit is given up for it):
 * the leading zeros then count the bits consumed past the pointer, so a
 * stream needs two registers and no bit counter, and a symbol costs a mask,
 * a table load and a shift by the table entry itself (length in its low
 * bits, symbol in its high byte). A reload leaves at least 56 unread bits,
 * room for 5 codes of <= 11 bits; it moves at most 7 bytes, so the number of
 * bounds-free rounds is known up front and the loop carries no checks. */
#define HUF_DEC(w, o) do { uint32_t const e_ = T[(w) & MASK]; (o) = (uint8_t)(e_ >> 8); (w) >>= (e_ & 63); } while (0)
#define HUF_RELOAD(p, w)                                                      \
    do {                                                                      \
        unsigned const n_ = (unsigned)__builtin_clzll(w);                     \
        (p) += n_ >> 3;                                                       \
        (w) = (lmc_rd64(p) | ((uint64_t)1 << 63)) >> (n_ & 7);                \
    } while (0)
#define HUF_SENTINEL ((uint64_t)1 << 63)   /* a word with nothing read: 0 bits past p */

/* Round k (k = 1, 2, ...) reloads at most 7 bytes further than the previous
 * one and reads 8 there, so k rounds need 7k + 8 bytes from p. */
static size_t rounds_left(const uint8_t* p, const uint8_t* end)
{
    size_t const avail = (size_t)(end - p);
    return avail < 15 ? 0 : (avail - 8) / 7;
}

/* The table of up to three symbols a lookup: for each 11-bit window, the
 * code at its start and as many of the codes after it (at most two more) as
 * lie wholly within the window: bits 0-5 the bits they take, 6-7 how many
 * (0 for an unassigned code), 8-31 the symbols. A stream's lookups wait on
 * each other (mask, load, shift: about 7 cycles), and an exponent stream's
 * codes are short (2-3 bits on average), so most lookups decode three.
 * Built symbol by symbol: the windows that start with the code of s (length
 * l) are code(s) + j 2^l for every j of 11 - l bits, and what follows s
 * there depends only on j and l: tails[2^b + j] holds the codes that fit in
 * the b bits of j (b = 11 - l), computed once per length present. */
static void build_multi_table(uint32_t* T2, const uint16_t* T, const uint8_t* len, const uint16_t* code)
{
    uint32_t tails[LMC_HUF_TABLE_SIZE];
    unsigned need = 0;
    for (unsigned s = 0; s < LMC_ALPHA_LIT; s++)
        if (len[s]) need |= 1u << (LMC_HUF_MAXBITS - len[s]);
    for (unsigned b = 0; b < LMC_HUF_MAXBITS; b++) {
        if (!(need >> b & 1)) continue;
        uint32_t* const R = tails + ((size_t)1 << b);
        for (unsigned j = 0; j < 1u << b; j++) {
            unsigned const e2 = T[j], l2 = e2 & 0xFF;
            uint32_t r = 0;
            if (l2 && l2 <= b) {
                unsigned const e3 = T[j >> l2], l3 = e3 & 0xFF;
                r = (1u << 6) | ((e2 >> 8) << 16) | l2;
                if (l3 && l2 + l3 <= b) r = (2u << 6) | ((e3 >> 8) << 24) | ((e2 >> 8) << 16) | (l2 + l3);
            }
            R[j] = r;
        }
    }
    memset(T2, 0, LMC_HUF_TABLE_SIZE * sizeof(*T2));   /* windows no code starts: unassigned */
    for (unsigned s = 0; s < LMC_ALPHA_LIT; s++) {
        unsigned const l = len[s];
        if (!l) continue;
        unsigned const b = LMC_HUF_MAXBITS - l;
        const uint32_t* const R = tails + ((size_t)1 << b);
        uint32_t const head = (1u << 6) | (s << 8) | l;   /* no carries: lengths <= 11, counts <= 3 */
        for (unsigned j = 0; j < 1u << b; j++) T2[code[s] + (j << l)] = head + R[j];
    }
}

/* One lookup: the symbols' three bytes are stored, and one more (the ones
 * beyond those decoded the next lookup overwrites), the pointer moves by
 * how many were decoded. */
#define HUF_DEC3(w, o) do { uint32_t const e_ = T2[(w) & MASK]; lmc_wr32((o), e_ >> 8); (o) += (e_ >> 6) & 3; (w) >>= (e_ & 63); } while (0)

/* Rounds of 5 lookups per stream (at most 55 bits: a reload's 56 suffice),
 * each stream with its own output pointer, while every stream has room for
 * 16 more bytes a round (15 symbols and the store past them) and input for
 * the reloads. Stops early, leaving the rest to the checked tail, if a
 * stream decodes fewer than 5 symbols a round: it met an unassigned code,
 * which decodes nothing and would otherwise hold it in place for ever. */
LMC_FORCE_INLINE void huf4_multi_rounds(const uint32_t* T2, uint8_t** o, uint8_t* const* oend, const uint8_t** p,
                                       const uint8_t* const* pend, uint64_t* w)
{
    const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    uint8_t *o0 = o[0], *o1 = o[1], *o2 = o[2], *o3 = o[3];
    uint64_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (;;) {
        size_t k = (size_t)(oend[0] - o0) / 16;
        k = LMC_MIN(k, (size_t)(oend[1] - o1) / 16);
        k = LMC_MIN(k, (size_t)(oend[2] - o2) / 16);
        k = LMC_MIN(k, (size_t)(oend[3] - o3) / 16);
        k = LMC_MIN(k, rounds_left(p0, pend[0]));
        k = LMC_MIN(k, rounds_left(p1, pend[1]));
        k = LMC_MIN(k, rounds_left(p2, pend[2]));
        k = LMC_MIN(k, rounds_left(p3, pend[3]));
        if (k == 0) break;
        uint8_t* const s0 = o0; uint8_t* const s1 = o1; uint8_t* const s2 = o2; uint8_t* const s3 = o3;
        for (size_t r = 0; r < k; r++) {
            HUF_RELOAD(p0, w0); HUF_RELOAD(p1, w1); HUF_RELOAD(p2, w2); HUF_RELOAD(p3, w3);
            HUF_DEC3(w0, o0); HUF_DEC3(w1, o1); HUF_DEC3(w2, o2); HUF_DEC3(w3, o3);
            HUF_DEC3(w0, o0); HUF_DEC3(w1, o1); HUF_DEC3(w2, o2); HUF_DEC3(w3, o3);
            HUF_DEC3(w0, o0); HUF_DEC3(w1, o1); HUF_DEC3(w2, o2); HUF_DEC3(w3, o3);
            HUF_DEC3(w0, o0); HUF_DEC3(w1, o1); HUF_DEC3(w2, o2); HUF_DEC3(w3, o3);
            HUF_DEC3(w0, o0); HUF_DEC3(w1, o1); HUF_DEC3(w2, o2); HUF_DEC3(w3, o3);
        }
        size_t const least = 5 * k;
        if ((size_t)(o0 - s0) < least || (size_t)(o1 - s1) < least || (size_t)(o2 - s2) < least || (size_t)(o3 - s3) < least) break;
    }
    p[0] = p0; p[1] = p1; p[2] = p2; p[3] = p3;
    o[0] = o0; o[1] = o1; o[2] = o2; o[3] = o3;
    w[0] = w0; w[1] = w1; w[2] = w2; w[3] = w3;
}

/* k rounds of 5 symbols per stream; stream j writes o[j * q ...]. */
LMC_FORCE_INLINE void huf4_rounds(const uint16_t* T, uint8_t* o, size_t q, size_t k, const uint8_t** p, uint64_t* w)
{
    const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    uint64_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (uint8_t* const end = o + 5 * k; o != end; o += 5) {
        HUF_RELOAD(p0, w0); HUF_RELOAD(p1, w1); HUF_RELOAD(p2, w2); HUF_RELOAD(p3, w3);
        HUF_DEC(w0, o[0]); HUF_DEC(w1, o[q]); HUF_DEC(w2, o[2 * q]); HUF_DEC(w3, o[3 * q]);
        HUF_DEC(w0, o[1]); HUF_DEC(w1, o[q + 1]); HUF_DEC(w2, o[2 * q + 1]); HUF_DEC(w3, o[3 * q + 1]);
        HUF_DEC(w0, o[2]); HUF_DEC(w1, o[q + 2]); HUF_DEC(w2, o[2 * q + 2]); HUF_DEC(w3, o[3 * q + 2]);
        HUF_DEC(w0, o[3]); HUF_DEC(w1, o[q + 3]); HUF_DEC(w2, o[2 * q + 3]); HUF_DEC(w3, o[3 * q + 3]);
        HUF_DEC(w0, o[4]); HUF_DEC(w1, o[q + 4]); HUF_DEC(w2, o[2 * q + 4]); HUF_DEC(w3, o[3 * q + 4]);
    }
    p[0] = p0; p[1] = p1; p[2] = p2; p[3] = p3;
    w[0] = w0; w[1] = w1; w[2] = w2; w[3] = w3;
}

LMC_FORCE_INLINE size_t decode_huf_body(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = lmc_huf_read_table(ws->len, LMC_ALPHA_LIT, src, size);
    LMC_FORWARD(tsz);
    LMC_RETURN_IF(lmc_huf_canonical(ws->code, ws->len, LMC_ALPHA_LIT) != 0, CORRUPT);
    unsigned const minlen = build_lit_table(ws->lit, ws->len, ws->code);
    const uint16_t* const T = ws->lit;
    size_t pos = tsz;
    LMC_RETURN_IF(size - pos < 6, TRUNCATED);
    size_t const s0 = lmc_rd16(src + pos), s1 = lmc_rd16(src + pos + 2), s2 = lmc_rd16(src + pos + 4);
    pos += 6;
    LMC_RETURN_IF(s0 + s1 + s2 > size - pos, CORRUPT);
    size_t const sz[4] = { s0, s1, s2, size - pos - s0 - s1 - s2 };
    const uint8_t* base[4];
    for (int j = 0; j < 4; j++) { base[j] = src + pos; pos += sz[j]; }
    size_t const q = m >> 2;
    size_t done = 0;

    const uint8_t* p[4] = { base[0], base[1], base[2], base[3] };
    uint64_t w[4] = { HUF_SENTINEL, HUF_SENTINEL, HUF_SENTINEL, HUF_SENTINEL };
    if (m >= MULTI_MIN_BLOCK && 2 * minlen <= LMC_HUF_MAXBITS) {
        /* several symbols a lookup: the 8 KiB table pays for itself on large
         * blocks whose shortest codes leave room for a second one */
        build_multi_table(ws->lit2, T, ws->len, ws->code);
        uint8_t* o[4] = { dst, dst + q, dst + 2 * q, dst + 3 * q };
        uint8_t* const oend[4] = { dst + q, dst + 2 * q, dst + 3 * q, dst + m };
        const uint8_t* const pend[4] = { base[0] + sz[0], base[1] + sz[1], base[2] + sz[2], base[3] + sz[3] };
        huf4_multi_rounds(ws->lit2, o, oend, p, pend, w);
        bitr r[4];
        for (int j = 0; j < 4; j++) {
            r[j].base = base[j]; r[j].size = sz[j];
            br_seek(&r[j], (size_t)(p[j] - base[j]) * 8 + (size_t)__builtin_clzll(w[j]));
            LMC_FORWARD(decode_tail(T, &r[j], o[j], (size_t)(oend[j] - o[j])));
        }
        return 0;
    }
    for (;;) {
        size_t k = (q - done) / 5;
        for (int j = 0; j < 4; j++) k = LMC_MIN(k, rounds_left(p[j], base[j] + sz[j]));
        if (k == 0) break;
        /* a full block's stream offsets as constants: the loop then needs no
         * registers for them, and keeps all 8 stream registers unspilled */
        if (q == LMC_BLOCK_MAX / 4) huf4_rounds(T, dst + done, LMC_BLOCK_MAX / 4, k, p, w);
        else huf4_rounds(T, dst + done, q, k, p, w);
        done += 5 * k;
    }
    bitr r[4];
    for (int j = 0; j < 4; j++) {
        r[j].base = base[j]; r[j].size = sz[j];
        br_seek(&r[j], (size_t)(p[j] - base[j]) * 8 + (size_t)__builtin_clzll(w[j]));
    }
    LMC_FORWARD(decode_tail(T, &r[0], dst + done, q - done));
    LMC_FORWARD(decode_tail(T, &r[1], dst + q + done, q - done));
    LMC_FORWARD(decode_tail(T, &r[2], dst + 2 * q + done, q - done));
    LMC_FORWARD(decode_tail(T, &r[3], dst + 3 * q + done, m - 3 * q - done));
    return 0;
}

/* One RLE token: a literal, or a run of the run byte. A token takes at most
 * 11 + 15 bits, so two fit in the 56 bits one refill guarantees. Short runs
 * are written with one 16-byte store where the block has room for it. */
#define RLE_TOKEN()                                                                  \
    do {                                                                             \
        uint32_t const e_ = T[r.bits & MASK];                                        \
        unsigned const l_ = e_ & 0xFF, s_ = e_ >> 8;                                 \
        LMC_RETURN_IF(l_ == 0, CORRUPT);                                             \
        r.bits >>= l_; r.n -= l_;                                                    \
        if (s_ < LMC_ALPHA_LIT) {                                                    \
            LMC_RETURN_IF(o >= m, CORRUPT);                                          \
            dst[o++] = (uint8_t)s_;                                                  \
        } else {                                                                     \
            size_t run_;                                                             \
            if (s_ < LMC_ALPHA_LIT + LMC_RUN_EXACT) {                                \
                run_ = s_ - LMC_ALPHA_LIT + 1;                                       \
            } else {                                                                 \
                unsigned const nb_ = s_ - (LMC_ALPHA_LIT + LMC_RUN_EXACT) + 4;       \
                run_ = ((size_t)LMC_RUN_EXACT << (nb_ - 4)) + 1                      \
                       + (size_t)(r.bits & ((1u << nb_) - 1));                       \
                r.bits >>= nb_; r.n -= nb_;                                          \
            }                                                                        \
            LMC_RETURN_IF(run_ > m - o, CORRUPT);                                    \
            if (run_ <= 16 && m - o >= 16) memcpy(dst + o, fill, 16);                \
            else memset(dst + o, rb, run_);                                          \
            o += run_;                                                               \
        }                                                                            \
    } while (0)

LMC_FORCE_INLINE size_t decode_rle_body(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = lmc_huf_read_table(ws->len, LMC_ALPHA_RLE, src, size);
    LMC_FORWARD(tsz);
    LMC_RETURN_IF(lmc_huf_canonical(ws->code, ws->len, LMC_ALPHA_RLE) != 0, CORRUPT);
    build_rle_table(ws->rle, ws->len, ws->code);
    const uint32_t* const T = ws->rle;
    LMC_RETURN_IF(size - tsz < 4, TRUNCATED);
    uint8_t const rb = src[tsz];
    uint8_t fill[16];
    memset(fill, rb, sizeof(fill));
    size_t const ntok = lmc_rd24(src + tsz + 1);
    LMC_RETURN_IF(ntok == 0 || ntok > m, CORRUPT);
    bitr r = { src + tsz + 4, size - tsz - 4, 0, 0, 0 };
    size_t o = 0, t = 0;
    for (; t + 2 <= ntok && r.pos + 8 <= r.size; t += 2) {
        br_refill_fast(&r);
        RLE_TOKEN();
        RLE_TOKEN();
    }
    for (; t < ntok; t++) {
        br_refill_safe(&r);
        RLE_TOKEN();
    }
    LMC_RETURN_IF(o != m, CORRUPT);
    LMC_RETURN_IF(!br_finished_exactly(&r), CORRUPT);
    return 0;
}

static size_t decode_huf_plain(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{ return decode_huf_body(ws, dst, m, src, size); }
static size_t decode_rle_plain(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{ return decode_rle_body(ws, dst, m, src, size); }
#if LMC_HAS_BMI2_DISPATCH
/* LZCNT came with BMI2 (Intel Haswell) or before it (AMD K10) on every x86 CPU */
__attribute__((target("bmi2,lzcnt"))) static size_t decode_huf_bmi2(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{ return decode_huf_body(ws, dst, m, src, size); }
LMC_TARGET_BMI2 static size_t decode_rle_bmi2(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{ return decode_rle_body(ws, dst, m, src, size); }
#endif

static size_t decode_huf(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) return decode_huf_bmi2(ws, dst, m, src, size);
#endif
    return decode_huf_plain(ws, dst, m, src, size);
}

static size_t decode_rle(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
#if LMC_HAS_BMI2_DISPATCH
    if (lmc_cpu_has_bmi2()) return decode_rle_bmi2(ws, dst, m, src, size);
#endif
    return decode_rle_plain(ws, dst, m, src, size);
}

size_t lmc_block_skip(const uint8_t* src, size_t srcSize, size_t m, unsigned* coder)
{
    LMC_RETURN_IF(srcSize < 1, TRUNCATED);
    *coder = src[0];
    switch (src[0]) {
    case LMC_CODER_RAW:
        LMC_RETURN_IF(srcSize - 1 < m, TRUNCATED);
        return 1 + m;
    case LMC_CODER_CONST:
        LMC_RETURN_IF(srcSize < 2, TRUNCATED);
        return 2;
    case LMC_CODER_HUF:
    case LMC_CODER_RLE_HUF:
    case LMC_CODER_ANS:
    case LMC_CODER_ANS1: {
        LMC_RETURN_IF(srcSize < 4, TRUNCATED);
        size_t const payload = lmc_rd24(src + 1);
        LMC_RETURN_IF(payload > srcSize - 4, TRUNCATED);
        return 4 + payload;
    }
    default:
        return LMC_ERR(CODER);
    }
}

size_t lmc_block_decode(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t srcSize)
{
    unsigned coder;
    size_t const total = lmc_block_skip(src, srcSize, m, &coder);
    LMC_FORWARD(total);
    LMC_RETURN_IF(m == 0 || m > LMC_BLOCK_MAX, CORRUPT);
    switch (coder) {
    case LMC_CODER_RAW:   memcpy(dst, src + 1, m); break;
    case LMC_CODER_CONST: memset(dst, src[1], m); break;
    case LMC_CODER_HUF:   LMC_FORWARD(decode_huf(ws, dst, m, src + 4, total - 4)); break;
    case LMC_CODER_ANS:   LMC_FORWARD(lmc_ans_decode(&ws->ans, dst, m, src + 4, total - 4)); break;
    case LMC_CODER_ANS1:  LMC_FORWARD(lmc_ans1_decode(&ws->ans1, dst, m, src + 4, total - 4)); break;
    default:              LMC_FORWARD(decode_rle(ws, dst, m, src + 4, total - 4)); break;
    }
    return total;
}
