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

static void build_lit_table(uint16_t* T, const uint8_t* len, const uint16_t* code)
{
    memset(T, 0, LMC_HUF_TABLE_SIZE * sizeof(*T));
    for (unsigned s = 0; s < LMC_ALPHA_LIT; s++) {
        unsigned const l = len[s];
        if (!l) continue;
        uint16_t const e = (uint16_t)((s << 4) | l);
        for (unsigned i = code[s]; i < LMC_HUF_TABLE_SIZE; i += 1u << l) T[i] = e;
    }
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
#define DEC1(r, o) do { uint16_t const e_ = T[(r).bits & MASK]; *(o)++ = (uint8_t)(e_ >> 4); \
                        (r).bits >>= (e_ & 15); (r).n -= (e_ & 15); } while (0)

static size_t decode_tail(const uint16_t* T, bitr* r, uint8_t* o, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++) {
        br_refill_safe(r);
        uint16_t const e = T[r->bits & MASK];
        LMC_RETURN_IF((e & 15) == 0, CORRUPT);
        o[i] = (uint8_t)(e >> 4);
        r->bits >>= (e & 15); r->n -= (e & 15);
    }
    LMC_RETURN_IF(!br_finished_exactly(r), CORRUPT);
    return 0;
}

static size_t decode_huf(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = lmc_huf_read_table(ws->len, LMC_ALPHA_LIT, src, size);
    LMC_FORWARD(tsz);
    LMC_RETURN_IF(lmc_huf_canonical(ws->code, ws->len, LMC_ALPHA_LIT) != 0, CORRUPT);
    build_lit_table(ws->lit, ws->len, ws->code);
    const uint16_t* const T = ws->lit;
    size_t pos = tsz;
    LMC_RETURN_IF(size - pos < 6, TRUNCATED);
    size_t const s0 = lmc_rd16(src + pos), s1 = lmc_rd16(src + pos + 2), s2 = lmc_rd16(src + pos + 4);
    pos += 6;
    LMC_RETURN_IF(s0 + s1 + s2 > size - pos, CORRUPT);
    bitr r[4];
    size_t const sz[4] = { s0, s1, s2, size - pos - s0 - s1 - s2 };
    for (int j = 0; j < 4; j++) {
        r[j].base = src + pos; r[j].size = sz[j]; r[j].pos = 0; r[j].bits = 0; r[j].n = 0;
        pos += sz[j];
    }
    size_t const q = m >> 2;
    uint8_t* o0 = dst; uint8_t* o1 = dst + q; uint8_t* o2 = dst + 2 * q; uint8_t* o3 = dst + 3 * q;
    size_t done = 0;
    /* 5 codes of <= 11 bits fit in the >= 56 bits a refill guarantees */
    while (done + 5 <= q && r[0].pos + 8 <= r[0].size && r[1].pos + 8 <= r[1].size
           && r[2].pos + 8 <= r[2].size && r[3].pos + 8 <= r[3].size) {
        br_refill_fast(&r[0]); br_refill_fast(&r[1]); br_refill_fast(&r[2]); br_refill_fast(&r[3]);
        DEC1(r[0], o0); DEC1(r[1], o1); DEC1(r[2], o2); DEC1(r[3], o3);
        DEC1(r[0], o0); DEC1(r[1], o1); DEC1(r[2], o2); DEC1(r[3], o3);
        DEC1(r[0], o0); DEC1(r[1], o1); DEC1(r[2], o2); DEC1(r[3], o3);
        DEC1(r[0], o0); DEC1(r[1], o1); DEC1(r[2], o2); DEC1(r[3], o3);
        DEC1(r[0], o0); DEC1(r[1], o1); DEC1(r[2], o2); DEC1(r[3], o3);
        done += 5;
    }
    LMC_FORWARD(decode_tail(T, &r[0], o0, q - done));
    LMC_FORWARD(decode_tail(T, &r[1], o1, q - done));
    LMC_FORWARD(decode_tail(T, &r[2], o2, q - done));
    LMC_FORWARD(decode_tail(T, &r[3], o3, m - 3 * q - done));
    return 0;
}

static size_t decode_rle(lmc_block_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = lmc_huf_read_table(ws->len, LMC_ALPHA_RLE, src, size);
    LMC_FORWARD(tsz);
    LMC_RETURN_IF(lmc_huf_canonical(ws->code, ws->len, LMC_ALPHA_RLE) != 0, CORRUPT);
    build_rle_table(ws->rle, ws->len, ws->code);
    const uint32_t* const T = ws->rle;
    LMC_RETURN_IF(size - tsz < 4, TRUNCATED);
    uint8_t const rb = src[tsz];
    size_t const ntok = lmc_rd24(src + tsz + 1);
    LMC_RETURN_IF(ntok == 0 || ntok > m, CORRUPT);
    bitr r = { src + tsz + 4, size - tsz - 4, 0, 0, 0 };
    size_t o = 0;
    for (size_t t = 0; t < ntok; t++) {
        br_refill_safe(&r);
        uint32_t const e = T[r.bits & MASK];
        unsigned const l = e & 0xFF, s = e >> 8;
        LMC_RETURN_IF(l == 0, CORRUPT);
        r.bits >>= l; r.n -= l;
        if (s < LMC_ALPHA_LIT) {
            LMC_RETURN_IF(o >= m, CORRUPT);
            dst[o++] = (uint8_t)s;
        } else {
            size_t run;
            if (s < LMC_ALPHA_LIT + LMC_RUN_EXACT) {
                run = s - LMC_ALPHA_LIT + 1;
            } else {
                unsigned const j = s - (LMC_ALPHA_LIT + LMC_RUN_EXACT), nb = 4 + j;
                run = ((size_t)LMC_RUN_EXACT << j) + 1 + (size_t)(r.bits & ((1u << nb) - 1));
                r.bits >>= nb; r.n -= nb;
            }
            LMC_RETURN_IF(run > m - o, CORRUPT);
            memset(dst + o, rb, run);
            o += run;
        }
    }
    LMC_RETURN_IF(o != m, CORRUPT);
    LMC_RETURN_IF(!br_finished_exactly(&r), CORRUPT);
    return 0;
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
    case LMC_CODER_RLE_HUF: {
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
    default:              LMC_FORWARD(decode_rle(ws, dst, m, src + 4, total - 4)); break;
    }
    return total;
}
