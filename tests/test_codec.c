/* test_codec.c - the block coder (lmc_block_encode / lmc_block_decode), the
 * Huffman length builder and table reader, and the choice of coder seen
 * through frame statistics (incl. LMC_P_CODERS restrictions). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "huf.h"
#include "block_enc.h"
#include "block_dec.h"
#include "mem.h"
#include "hash.h"
#include "group.h"
#include "ungroup.h"

typedef struct { lmc_block_ws* enc; lmc_block_dws* dec; uint8_t* buf; uint8_t* out; } codec_state;

static int setup(void** state)
{
    codec_state* const s = (codec_state*)calloc(1, sizeof(*s));
    s->enc = (lmc_block_ws*)tu_xmalloc(sizeof(lmc_block_ws));
    s->dec = (lmc_block_dws*)tu_xmalloc(sizeof(lmc_block_dws));
    s->buf = (uint8_t*)tu_xmalloc(LMC_BLOCK_BOUND(LMC_BLOCK_MAX) + LMC_BLOCK_SLACK);
    s->out = (uint8_t*)tu_xmalloc(LMC_BLOCK_MAX);
    *state = s;
    return 0;
}

static int teardown(void** state)
{
    codec_state* const s = (codec_state*)*state;
    free(s->enc); free(s->dec); free(s->buf); free(s->out); free(s);
    return 0;
}

enum { D_ONE, D_TWO, D_ALL256, D_FIB, D_GAUSS_HI, D_GAUSS_LO, D_SPARSE, D_RANDOM, D_RUNS_LONG, D_COUNT };

/* Fibonacci-like frequencies: the optimal code is ~m symbols deep, so the
 * 11-bit limit must bite. */
static void fill_fib(uint8_t* p, size_t m, tu_rng* r)
{
    size_t i = 0;
    uint64_t a = 1, b = 1;
    for (unsigned s = 0; s < 256 && i < m; s++) {
        size_t k = (size_t)a;
        if (k > m - i) k = m - i;
        memset(p + i, (int)s, k);
        i += k;
        uint64_t const c = a + b; a = b; b = c;
    }
    if (i < m) memset(p + i, 0, m - i);
    for (size_t j = m; j > 1; j--) { size_t const x = tu_below(r, j); uint8_t const t = p[j - 1]; p[j - 1] = p[x]; p[x] = t; }
}

static void fill_dist(uint8_t* p, size_t m, int dist, uint64_t seed)
{
    tu_rng r; tu_seed(&r, seed);
    switch (dist) {
    case D_ONE: memset(p, 0x3C, m); break;
    case D_TWO: for (size_t i = 0; i < m; i++) p[i] = tu_below(&r, 5) ? 0x10 : 0xF0; break;
    case D_ALL256: for (size_t i = 0; i < m; i++) p[i] = (uint8_t)(i + tu_below(&r, 2)); break;
    case D_FIB: fill_fib(p, m, &r); break;
    case D_GAUSS_HI:
    case D_GAUSS_LO:
        for (size_t i = 0; i < m; i++) {
            uint16_t const b = tu_f32_to_bf16((float)(0.02 * tu_gauss(&r)));
            p[i] = dist == D_GAUSS_HI ? (uint8_t)(b >> 8) : (uint8_t)b;
        }
        break;
    case D_SPARSE: tu_fill_sparse(p, m, seed); break;
    case D_RANDOM: tu_fill_random(p, m, seed); break;
    default: /* long zero runs (some longer than 2^15) between single literals */
        for (size_t i = 0; i < m;) {
            size_t k = 1 + tu_below(&r, 40000);
            if (k > m - i) k = m - i;
            memset(p + i, 0, k);
            i += k;
            if (i < m) p[i++] = (uint8_t)(1 + tu_below(&r, 255));
        }
        break;
    }
}

static unsigned coder_of(const uint8_t* blk) { return blk[0]; }

/* Encodes with `coders`, checks the size bound and the coder, decodes back. */
static size_t block_roundtrip(codec_state* s, const uint8_t* src, size_t m, unsigned coders, unsigned* coder)
{
    uint32_t hist[256];
    lmc_histogram(hist, src, m);
    uint32_t total = 0;
    for (int k = 0; k < 256; k++) total += hist[k];
    assert_int_equal(total, m);
    memset(s->buf, 0xEE, LMC_BLOCK_BOUND(m) + LMC_BLOCK_SLACK);
    size_t const sz = lmc_block_encode(s->enc, s->buf, src, m, hist, coders, 0);
    assert_true(sz >= 2 && sz <= LMC_BLOCK_BOUND(m));
    *coder = coder_of(s->buf);
    assert_true(*coder <= LMC_CODER_ANS || *coder == LMC_CODER_ANS1);
    assert_true(((coders | 1u) >> *coder) & 1u);
    memset(s->out, 0xAB, m);
    size_t const used = lmc_block_decode(s->dec, s->out, m, s->buf, sz);
    if (lmc_is_error(used)) fail_msg("lmc_block_decode (coder %u, m %zu): %s", *coder, m, lmc_error_name(used));
    assert_int_equal(used, sz);
    assert_memory_equal(s->out, src, m);
    /* skip agrees */
    unsigned c2;
    assert_int_equal(lmc_block_skip(s->buf, sz, m, &c2), sz);
    assert_int_equal(c2, *coder);
    /* with trailing bytes after it, the block still ends where it ends */
    assert_int_equal(lmc_block_decode(s->dec, s->out, m, s->buf, sz + LMC_BLOCK_SLACK), sz);
    /* every shorter source is an error, never a crash */
    for (size_t cut = 0; cut < sz; cut += 1 + sz / 7) {
        uint8_t* const t = (uint8_t*)tu_xmalloc(cut);
        memcpy(t, s->buf, cut);
        assert_true(lmc_is_error(lmc_block_decode(s->dec, s->out, m, t, cut)));
        free(t);
    }
    return sz;
}

static void test_block_roundtrip(void** state)
{
    codec_state* const s = (codec_state*)*state;
    size_t const ms[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 100, 4097, 65535, 65536 };
    unsigned const masks[] = { 0xFF, 0x01, 0x03, 0x05, 0x09, 0x0D, 0x0C, 0x00 };
    uint8_t* const src = (uint8_t*)tu_xmalloc(LMC_BLOCK_MAX);
    unsigned seen[LMC_CODER_ANS + 1] = { 0 };
    for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
        for (int d = 0; d < D_COUNT; d++) {
            size_t const m = ms[mi];
            fill_dist(src, m, d, 1000 + mi * 10 + (size_t)d);
            for (size_t k = 0; k < sizeof(masks) / sizeof(masks[0]); k++) {
                unsigned coder;
                block_roundtrip(s, src, m, masks[k], &coder);
                seen[coder]++;
            }
        }
    }
    for (int c = 0; c <= LMC_CODER_ANS; c++) assert_true(seen[c] > 0);
    free(src);
}

/* Each coder wins where it should, with every coder allowed. */
static void test_block_choice(void** state)
{
    codec_state* const s = (codec_state*)*state;
    uint8_t* const src = (uint8_t*)tu_xmalloc(LMC_BLOCK_MAX);
    size_t const m = LMC_BLOCK_MAX;
    unsigned coder;
    fill_dist(src, m, D_ONE, 1);
    assert_int_equal(block_roundtrip(s, src, m, 0xFF, &coder), 2);
    assert_int_equal(coder, LMC_CODER_CONST);
    fill_dist(src, m, D_RANDOM, 2);
    block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_RAW);
    /* two bytes at 4:1, independent: rANS (fractional bits) when allowed, else Huffman */
    unsigned const no_ans = 0xFFu & ~(1u << LMC_CODER_ANS);
    fill_dist(src, m, D_TWO, 3);
    block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_ANS);
    block_roundtrip(s, src, m, no_ans & ~(1u << LMC_CODER_RLE_HUF), &coder);
    assert_int_equal(coder, LMC_CODER_HUF);
    /* Gaussian weights' high bytes: Huffman is within 3 % of the entropy */
    fill_dist(src, m, D_GAUSS_HI, 3);
    block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_HUF);
    fill_dist(src, m, D_FIB, 4);
    block_roundtrip(s, src, m, no_ans, &coder);
    assert_int_equal(coder, LMC_CODER_HUF);
    fill_dist(src, m, D_SPARSE, 5);
    block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_RLE_HUF);
    fill_dist(src, m, D_RUNS_LONG, 6);
    size_t const sz = block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_RLE_HUF);
    assert_true(sz < 200);
    /* a single symbol without CONST: RLE (runs) if allowed, else RAW */
    fill_dist(src, m, D_ONE, 7);
    block_roundtrip(s, src, m, 1u << LMC_CODER_RLE_HUF, &coder);
    assert_int_equal(coder, LMC_CODER_RLE_HUF);
    block_roundtrip(s, src, m, 1u << LMC_CODER_HUF, &coder);
    assert_int_equal(coder, LMC_CODER_RAW);
    /* zero runs at the start of the block */
    memset(src, 0, m);
    src[m - 1] = 1;
    block_roundtrip(s, src, m, 1u << LMC_CODER_RLE_HUF, &coder);
    assert_int_equal(coder, LMC_CODER_RLE_HUF);
    free(src);
}

/*-*** Huffman lengths ***-*/

/* Optimal (unlimited) Huffman cost, O(n^2): sum of all merged weights. */
static uint64_t ref_huffman_cost(const uint32_t* freq, unsigned alpha)
{
    uint64_t w[LMC_ALPHA_RLE];
    unsigned n = 0;
    for (unsigned s = 0; s < alpha; s++) if (freq[s]) w[n++] = freq[s];
    if (n == 1) return w[0];
    uint64_t cost = 0;
    while (n > 1) {
        unsigned a = 0, b = 1;
        if (w[b] < w[a]) { a = 1; b = 0; }
        for (unsigned i = 2; i < n; i++) {
            if (w[i] < w[a]) { b = a; a = i; }
            else if (w[i] < w[b]) b = i;
        }
        uint64_t const m = w[a] + w[b];
        cost += m;
        unsigned const lo = a < b ? a : b, hi = a < b ? b : a;
        w[lo] = m;
        w[hi] = w[--n];
    }
    return cost;
}

static void check_lengths(codec_state* s, const uint32_t* freq, unsigned alpha, unsigned maxbits)
{
    uint8_t len[LMC_ALPHA_RLE];
    unsigned const maxlen = lmc_huf_lengths(s->enc, len, freq, alpha, maxbits);
    uint64_t kraft = 0, cost = 0;
    unsigned used = 0, top = 0;
    for (unsigned k = 0; k < alpha; k++) {
        if (!freq[k]) { assert_int_equal(len[k], 0); continue; }
        assert_true(len[k] >= 1 && len[k] <= maxbits);
        kraft += (uint64_t)1 << (maxbits - len[k]);
        cost += (uint64_t)freq[k] * len[k];
        used++;
        if (len[k] > top) top = len[k];
    }
    if (!used) { assert_int_equal(maxlen, 0); return; }
    assert_true(kraft <= ((uint64_t)1 << maxbits));
    assert_int_equal(maxlen, top);
    uint64_t const opt = ref_huffman_cost(freq, alpha);
    assert_true(cost >= opt);
    if (maxlen < maxbits) assert_int_equal(cost, opt);   /* not limited: must be optimal */
    if (used >= 2 && maxbits == LMC_HUF_MAXBITS) {
        uint16_t code[LMC_ALPHA_RLE];
        assert_int_equal(lmc_huf_canonical(code, len, alpha), 0);
    }
}

static void test_huf_lengths(void** state)
{
    codec_state* const s = (codec_state*)*state;
    uint32_t freq[LMC_ALPHA_RLE];
    tu_rng r; tu_seed(&r, 99);
    unsigned const alphas[] = { LMC_ALPHA_LIT, LMC_ALPHA_RLE };
    for (int it = 0; it < 400; it++) {
        unsigned const alpha = alphas[it & 1];
        unsigned const maxbits = it % 5 == 0 ? 9 + (unsigned)(it % 3) : LMC_HUF_MAXBITS;
        memset(freq, 0, sizeof(freq));
        int const kind = it % 4;
        unsigned const nsym = 1 + (unsigned)tu_below(&r, alpha);
        uint32_t budget = 65536;
        for (unsigned k = 0; k < nsym && budget; k++) {
            unsigned const sym = (unsigned)tu_below(&r, alpha);
            uint32_t f;
            if (kind == 0) f = 1 + (uint32_t)tu_below(&r, 100);
            else if (kind == 1) f = 1u << tu_below(&r, 16);                  /* very skewed */
            else if (kind == 2) f = 1;                                         /* flat */
            else f = 1 + (uint32_t)tu_below(&r, 3000);
            if (f > budget) f = budget;
            freq[sym] += f; budget -= f;
        }
        check_lengths(s, freq, alpha, maxbits);
    }
    /* Fibonacci frequencies: unlimited depth ~ 24, the 11-bit limit binds */
    for (unsigned alpha = LMC_ALPHA_LIT; alpha <= LMC_ALPHA_RLE; alpha += LMC_RUN_CODES) {
        memset(freq, 0, sizeof(freq));
        uint32_t a = 1, b = 1;
        for (unsigned k = 0; k < 24; k++) { freq[k * 7 % alpha] = a; uint32_t const c = a + b; a = b; b = c; }
        uint8_t len[LMC_ALPHA_RLE];
        assert_int_equal(lmc_huf_lengths(s->enc, len, freq, alpha, LMC_HUF_MAXBITS), LMC_HUF_MAXBITS);
        check_lengths(s, freq, alpha, LMC_HUF_MAXBITS);
    }
    /* every symbol present, equal counts: all length 8 for 256 */
    for (unsigned k = 0; k < LMC_ALPHA_LIT; k++) freq[k] = 256;
    uint8_t len[LMC_ALPHA_RLE];
    assert_int_equal(lmc_huf_lengths(s->enc, len, freq, LMC_ALPHA_LIT, LMC_HUF_MAXBITS), 8);
    for (unsigned k = 0; k < LMC_ALPHA_LIT; k++) assert_int_equal(len[k], 8);
    /* all 273 symbols with skew: limit with a full alphabet */
    for (unsigned k = 0; k < LMC_ALPHA_RLE; k++) freq[k] = k < 20 ? (1u << (k < 16 ? k : 15)) : 1;
    check_lengths(s, freq, LMC_ALPHA_RLE, LMC_HUF_MAXBITS);
    /* one symbol, none */
    memset(freq, 0, sizeof(freq));
    freq[200] = 65536;
    assert_int_equal(lmc_huf_lengths(s->enc, len, freq, LMC_ALPHA_LIT, LMC_HUF_MAXBITS), 1);
    assert_int_equal(len[200], 1);
    freq[200] = 0;
    assert_int_equal(lmc_huf_lengths(s->enc, len, freq, LMC_ALPHA_LIT, LMC_HUF_MAXBITS), 0);
}

static void test_huf_canonical(void** state)
{
    (void)state;
    uint8_t len[LMC_ALPHA_RLE];
    uint16_t code[LMC_ALPHA_RLE];
    memset(len, 0, sizeof(len));
    assert_int_equal(lmc_huf_canonical(code, len, LMC_ALPHA_LIT), -1);    /* no symbol */
    len[5] = 1; len[9] = 1;
    assert_int_equal(lmc_huf_canonical(code, len, LMC_ALPHA_LIT), 0);
    assert_int_equal(code[5], 0); assert_int_equal(code[9], 1);
    len[10] = 1;
    assert_int_equal(lmc_huf_canonical(code, len, LMC_ALPHA_LIT), -1);    /* Kraft > 1 */
    memset(len, 0, sizeof(len));
    len[0] = 12;
    assert_int_equal(lmc_huf_canonical(code, len, LMC_ALPHA_LIT), -1);    /* too long */
    /* DEFLATE's example: lengths 3 3 3 3 3 2 4 4 -> codes 010 011 100 101 110 00 1110 1111 */
    memset(len, 0, sizeof(len));
    const uint8_t l[8] = { 3, 3, 3, 3, 3, 2, 4, 4 };
    const unsigned c[8] = { 2, 3, 4, 5, 6, 0, 14, 15 };
    memcpy(len, l, 8);
    assert_int_equal(lmc_huf_canonical(code, len, LMC_ALPHA_LIT), 0);
    for (int k = 0; k < 8; k++) {
        unsigned rev = 0, x = c[k];
        for (unsigned b = 0; b < l[k]; b++) { rev = (rev << 1) | (x & 1); x >>= 1; }
        assert_int_equal(code[k], rev);
    }
}

static void test_huf_read_table(void** state)
{
    (void)state;
    uint8_t len[LMC_ALPHA_RLE];
    /* nsym 3: lengths 1, 2, 2 -> nibbles 1 2 | 2 pad */
    const uint8_t ok[] = { 3, 0, 0x21, 0x02 };
    assert_int_equal(lmc_huf_read_table(len, LMC_ALPHA_LIT, ok, sizeof(ok)), 4);
    assert_int_equal(len[0], 1); assert_int_equal(len[1], 2); assert_int_equal(len[2], 2); assert_int_equal(len[3], 0);
    /* zero run: nsym 6 = 15,z=2 (5 absent) then 1 */
    const uint8_t zr[] = { 6, 0, 0x2F, 0x01 };
    assert_int_equal(lmc_huf_read_table(len, LMC_ALPHA_LIT, zr, sizeof(zr)), 4);
    for (int k = 0; k < 5; k++) assert_int_equal(len[k], 0);
    assert_int_equal(len[5], 1);
    /* errors */
    const uint8_t nsym0[] = { 0, 0, 0x11 };
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, nsym0, sizeof(nsym0))), LMC_ERR_CORRUPT);
    const uint8_t big[] = { 0x01, 0x01, 0x11 };   /* 257 > 256 */
    assert_true(lmc_is_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, big, sizeof(big))));
    const uint8_t nib12[] = { 2, 0, 0xC1 };
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, nib12, sizeof(nib12))), LMC_ERR_CORRUPT);
    const uint8_t runover[] = { 4, 0, 0x5F };    /* run of 8 > 4 */
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, runover, sizeof(runover))), LMC_ERR_CORRUPT);
    const uint8_t pad[] = { 1, 0, 0x31 };        /* padding nibble must be 0 */
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, pad, sizeof(pad))), LMC_ERR_CORRUPT);
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, ok, 3)), LMC_ERR_TRUNCATED);
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, ok, 1)), LMC_ERR_TRUNCATED);
    const uint8_t zr_trunc[] = { 6, 0, 0x0F };   /* run nibble without its count */
    assert_int_equal(lmc_get_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, zr_trunc, sizeof(zr_trunc))), LMC_ERR_TRUNCATED);
    /* the RLE alphabet accepts nsym = its size, the literal one does not */
    uint8_t tr[2 + (LMC_ALPHA_RLE + 1) / 2];
    tr[0] = (uint8_t)(LMC_ALPHA_RLE & 0xFF); tr[1] = (uint8_t)(LMC_ALPHA_RLE >> 8);
    memset(tr + 2, 0x99, sizeof(tr) - 2);
    if (LMC_ALPHA_RLE % 2) tr[sizeof(tr) - 1] = 0x09;
    assert_int_equal(lmc_huf_read_table(len, LMC_ALPHA_RLE, tr, sizeof(tr)), sizeof(tr));
    for (unsigned k = 0; k < LMC_ALPHA_RLE; k++) assert_int_equal(len[k], 9);
    assert_true(lmc_is_error(lmc_huf_read_table(len, LMC_ALPHA_LIT, tr, sizeof(tr))));
}

/* Bytes that follow the byte 4 back (a float exponent stream whose rows
 * have their own scale): ANS1 wins, smaller than order 0 by far; with
 * mutations, every decode ends in an error or a clean result. */
/* Bytes that the byte lag places back predicts. */
static void fill_order1_lag(uint8_t* src, size_t m, uint32_t seed, size_t lag)
{
    uint32_t r = seed;
    for (size_t i = 0; i < m; i++) {
        r = r * 1103515245u + 12345u;
        unsigned const u = (r >> 16) & 1023;
        unsigned const prev = i >= lag ? src[i - lag] : 100 + (unsigned)(i & 3);
        /* mostly the same as lag back, sometimes a step, rarely a jump */
        unsigned v = prev;
        if (u < 200) v = prev + 1;
        else if (u < 400) v = prev - 1;
        else if (u < 420) v = 100 + (u & 15);
        if (v < 96) v = 96;
        if (v > 124) v = 124;
        src[i] = (uint8_t)v;
    }
}

/* The encoder's context distance (LMC_ANS1_DIST) */
static void fill_order1(uint8_t* src, size_t m, uint32_t seed) { fill_order1_lag(src, m, seed, LMC_ANS1_DIST); }

/* ANS1 blocks of 4 and of 32 states (format 6), for context distances below,
 * at and above 32 and lengths that are not multiples of 32, each decoded
 * with every instruction set the decoder may use (the 32-state vector loop
 * needs AVX-512 and D >= 32; the others go one symbol at a time). */
static void test_ans1_states(void** state)
{
    codec_state* const s = (codec_state*)*state;
    size_t const ms[] = { 65536, 65535, 40001, 12345 };
    size_t const dists[] = { 4, 31, 32, 33, 300, 4000 };
    unsigned const modes[] = { ~0u, 0 };
    uint8_t* const src = (uint8_t*)tu_xmalloc(65536);
    uint8_t* const enc = (uint8_t*)tu_xmalloc(4 * 65536 + 8192);
    for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++)
        for (size_t di = 0; di < sizeof(dists) / sizeof(dists[0]); di++) {
            size_t const m = ms[mi];
            unsigned const d = (unsigned)dists[di];
            if (m <= d + 8192) continue;   /* too short for the sample: not tried */
            fill_order1_lag(src, m, (uint32_t)(mi * 16 + di), d);
            uint32_t hist[256];
            lmc_histogram(hist, src, m);
            for (unsigned S = 4; S <= 32; S *= 8) {
                size_t const est = lmc_ans1_prepare(&s->enc->ans1, src, m, hist, &d, 1);
                assert_true(est != SIZE_MAX);
                assert_int_equal(s->enc->ans1.dist, d);
                /* prepare's own choice: 32 states from D = 32 on, for a block this size */
                assert_int_equal(s->enc->ans1.states, d >= LMC_ANS1_WIDE_DIST && est >= LMC_ANS1_WIDE_MIN + 4 * 32 ? 32u : 4u);
                s->enc->ans1.states = S;
                size_t const sz = lmc_ans1_encode(&s->enc->ans1, enc, 2 * 65536 + 4096, src, m);
                assert_true(sz > 0);
                /* the encoder's paths (AVX-512 lanes, scalar) give the same bytes */
                lmc_cpu_restrict(0);
                size_t const sz0 = lmc_ans1_encode(&s->enc->ans1, enc + sz, 2 * 65536 + 4096, src, m);
                lmc_cpu_restrict(~0u);
                assert_int_equal(sz0, sz);
                assert_memory_equal(enc + sz, enc, sz);
                assert_int_equal(enc[2], s->enc->ans1.ngroups | (S == 32 ? LMC_ANS1_WIDE : 0));
                for (size_t md = 0; md < sizeof(modes) / sizeof(modes[0]); md++) {
                    lmc_cpu_restrict(modes[md]);
                    memset(s->out, 0xAB, m);
                    size_t const r = lmc_ans1_decode(&s->dec->ans1, s->out, m, enc, sz);
                    if (lmc_is_error(r)) fail_msg("ANS1 m %zu D %u S %u mode %zu: %s", m, d, S, md, lmc_error_name(r));
                    assert_memory_equal(s->out, src, m);
                    /* a byte short or a byte more: the words must all be read, and exist */
                    assert_true(lmc_is_error(lmc_ans1_decode(&s->dec->ans1, s->out, m, enc, sz - 1)));
                    enc[sz] = 0;
                    assert_true(lmc_is_error(lmc_ans1_decode(&s->dec->ans1, s->out, m, enc, sz + 1)));
                }
                lmc_cpu_restrict(~0u);
            }
        }
    free(enc);
    free(src);
}

static void test_block_ans1(void** state)
{
    codec_state* const s = (codec_state*)*state;
    size_t const m = LMC_BLOCK_MAX;
    uint8_t* const src = (uint8_t*)tu_xmalloc(m);
    unsigned coder;
    fill_order1(src, m, 7);
    size_t const o1 = block_roundtrip(s, src, m, 0xFF, &coder);
    assert_int_equal(coder, LMC_CODER_ANS1);
    size_t const o0 = block_roundtrip(s, src, m, 0xFF & ~(1u << LMC_CODER_ANS1), &coder);
    assert_true(coder != LMC_CODER_ANS1);
    assert_true(o1 < o0 * 3 / 4);
    /* other lengths, down to where ANS1 is no longer tried */
    size_t const ms[] = { 65535, 40001, 8197, 4096, 1000 };
    for (size_t k = 0; k < sizeof(ms) / sizeof(ms[0]); k++) {
        fill_order1(src, ms[k], (uint32_t)k);
        block_roundtrip(s, src, ms[k], 0xFF, &coder);
    }
    /* columns with their own scale: the byte a row up predicts, the one 4
     * back does not; given the row length the encoder takes D = row */
    {
        unsigned const row = 300;
        uint32_t r = 11;
        uint8_t col[300];
        for (unsigned c = 0; c < row; c++) { r = r * 1103515245u + 12345u; col[c] = (uint8_t)(100 + ((r >> 16) % 24)); }
        for (size_t i = 0; i < m; i++) {
            r = r * 1103515245u + 12345u;
            unsigned const u = (r >> 16) & 1023;
            src[i] = (uint8_t)(col[i % row] + (u < 300 ? 1 : 0) - (u > 900 ? 1 : 0));
        }
        uint32_t h[256];
        lmc_histogram(h, src, m);
        size_t const a = lmc_block_encode(s->enc, s->buf, src, m, h, 0xFF, row);
        assert_int_equal(s->buf[0], LMC_CODER_ANS1);
        assert_int_equal(s->buf[4] | s->buf[5] << 8, row);
        assert_true(s->buf[6] & LMC_ANS1_WIDE);   /* D >= 32 and a block of this size: 32 states */
        assert_int_equal(lmc_block_decode(s->dec, s->out, m, s->buf, a), a);
        assert_memory_equal(s->out, src, m);
        size_t const b = lmc_block_encode(s->enc, s->buf, src, m, h, 0xFF, 0);
        assert_true(a < b * 3 / 4);
    }
    /* the same block made hostile */
    fill_order1(src, m, 7);
    uint32_t hist[256];
    lmc_histogram(hist, src, m);
    size_t const sz = lmc_block_encode(s->enc, s->buf, src, m, hist, 0xFF, 0);
    assert_int_equal(s->buf[0], LMC_CODER_ANS1);
    assert_true(s->buf[6] & LMC_ANS1_WIDE);
    uint8_t* const t = (uint8_t*)tu_xmalloc(sz);
    uint32_t r = 99;
    for (int trial = 0; trial < 3000; trial++) {
        lmc_cpu_restrict(trial & 1 ? 0u : ~0u);   /* the vector loop and the scalar one */
        memcpy(t, s->buf, sz);
        for (int j = 0; j < 1 + trial % 4; j++) {
            r = r * 1103515245u + 12345u;
            /* the header and tables most of the time, anywhere else sometimes */
            size_t const at = trial % 3 ? 4 + (r >> 8) % 200 : (r >> 8) % sz;
            t[at] ^= (uint8_t)(1u << ((r >> 4) & 7));
        }
        size_t const used = lmc_block_decode(s->dec, s->out, m, t, sz);
        assert_true(lmc_is_error(used) || used == sz);
    }
    lmc_cpu_restrict(~0u);
    /* fields out of range */
    memcpy(t, s->buf, sz);
    t[4] = 0; t[5] = 0;   /* distance 0 */
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    memcpy(t, s->buf, sz);
    t[6] = 0;             /* no groups */
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    t[6] = LMC_ANS1_MAX_GROUPS + 1;
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    t[6] = LMC_ANS1_WIDE;   /* 32 states, no groups */
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    t[6] = LMC_ANS1_WIDE | (LMC_ANS1_MAX_GROUPS + 1);
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    memcpy(t, s->buf, sz);
    if (t[6] >= 2) {      /* first bound 0: not after the implicit 0 */
        t[7] = 0;
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, m, t, sz)), LMC_ERR_CORRUPT);
    }
    /* a distance of m or more: every context is 0. By hand: one group whose
     * table gives symbol 100 all of M, so no state moves and no word is read */
    {
        uint8_t const blk[] = { 0x60, 0xEA,                 /* D = 60000 */
                                1,                          /* G */
                                101, 0, 0, 99, 0x90, 0x00,  /* nsym 101: 100 absent, then 4096 */
                                0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0 };
        memset(s->out, 0, 5000);
        assert_int_equal(lmc_ans1_decode(&s->dec->ans1, s->out, 5000, blk, sizeof(blk)), 0);
        for (size_t i = 0; i < 5000; i++) assert_int_equal(s->out[i], 100);
        /* one byte more is not consumed: refused */
        uint8_t longer[sizeof(blk) + 2];
        memcpy(longer, blk, sizeof(blk));
        longer[sizeof(blk)] = longer[sizeof(blk) + 1] = 0;
        assert_int_equal(lmc_get_error(lmc_ans1_decode(&s->dec->ans1, s->out, 5000, longer, sizeof(longer))), LMC_ERR_CORRUPT);
    }
    free(t);
    free(src);
}

/* Hand-made blocks the decoder must refuse. */
static void test_block_decode_hostile(void** state)
{
    codec_state* const s = (codec_state*)*state;
    uint8_t b[64];
    /* unknown coder */
    b[0] = LMC_CODER_ANS + 1;
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 10, b, 20)), LMC_ERR_CODER);
    b[0] = 255;
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 10, b, 20)), LMC_ERR_CODER);
    /* m = 0 or > 65536 */
    b[0] = LMC_CODER_CONST; b[1] = 7;
    assert_true(lmc_is_error(lmc_block_decode(s->dec, s->out, 0, b, 2)));
    assert_true(lmc_is_error(lmc_block_decode(s->dec, s->out, LMC_BLOCK_MAX + 1, b, 2)));
    /* RAW shorter than m */
    b[0] = LMC_CODER_RAW;
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 30, b, 30)), LMC_ERR_TRUNCATED);
    /* HUF with a declared size past the end */
    b[0] = LMC_CODER_HUF; b[1] = 0xFF; b[2] = 0xFF; b[3] = 0x00;
    assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 10, b, 64)), LMC_ERR_TRUNCATED);
    /* HUF: one symbol of length 1 coded, bitstream uses the unassigned code */
    {
        size_t p = 0;
        b[p++] = LMC_CODER_HUF; p += 3;
        b[p++] = 1; b[p++] = 0; b[p++] = 0x01;           /* table: symbol 0, len 1 */
        b[p++] = 0; b[p++] = 0; b[p++] = 0; b[p++] = 0; b[p++] = 0; b[p++] = 0;   /* s0..s2 = 0 */
        b[p++] = 0x01;                                    /* stream 3: bit 1 = unassigned */
        size_t const payload = p - 4;
        b[1] = (uint8_t)payload; b[2] = 0; b[3] = 0;
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 1, b, p)), LMC_ERR_CORRUPT);
        b[p - 1] = 0x00;                                  /* code 0: symbol 0, ok */
        assert_int_equal(lmc_block_decode(s->dec, s->out, 1, b, p), p);
        assert_int_equal(s->out[0], 0);
        b[p - 1] = 0x02;                                  /* second symbol uses the unassigned code */
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 2, b, p)), LMC_ERR_CORRUPT);
        b[p - 1] = 0x00;                                  /* 2 symbols of 1 bit: fine */
        assert_int_equal(lmc_block_decode(s->dec, s->out, 2, b, p), p);
        assert_true(lmc_is_error(lmc_block_decode(s->dec, s->out, 9, b, p)));   /* 9 bits do not fit 1 byte */
    }
    /* RLE_HUF: one code, symbol 256 + 15 (exact run of 16 run bytes), length 1 */
    {
        size_t p = 0;
        unsigned const sym = LMC_ALPHA_LIT + 15;
        b[p++] = LMC_CODER_RLE_HUF; p += 3;
        b[p++] = (uint8_t)((sym + 1) & 0xFF); b[p++] = (uint8_t)((sym + 1) >> 8);   /* nsym 272 */
        for (int k = 0; k < 14; k++) b[p++] = 0xFF;      /* 14 runs of 18 absent = 252 */
        b[p++] = 0xDF;                                    /* run of 16 absent: 268 */
        b[p++] = 0x0F;                                    /* run of 3 absent: 271 */
        b[p++] = 0x01;                                    /* symbol 271: length 1, pad 0 */
        b[p++] = 0x77;                                    /* run byte */
        size_t const tok = p;
        b[p++] = 1; b[p++] = 0; b[p++] = 0;               /* 1 token */
        b[p++] = 0x00;                                    /* code 0 */
        size_t const payload = p - 4;
        b[1] = (uint8_t)payload; b[2] = 0; b[3] = 0;
        size_t r = lmc_block_decode(s->dec, s->out, 16, b, p);
        if (lmc_is_error(r)) fail_msg("hand-made RLE block: %s", lmc_error_name(r));
        assert_int_equal(r, p);
        for (int k = 0; k < 16; k++) assert_int_equal(s->out[k], 0x77);
        r = lmc_block_decode(s->dec, s->out, 15, b, p);  /* run past the block */
        assert_int_equal(lmc_get_error(r), LMC_ERR_CORRUPT);
        r = lmc_block_decode(s->dec, s->out, 17, b, p);  /* block not filled */
        assert_int_equal(lmc_get_error(r), LMC_ERR_CORRUPT);
        b[tok] = 0;                                       /* 0 tokens */
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 16, b, p)), LMC_ERR_CORRUPT);
        b[tok] = 2;                                       /* 2 tokens of 1 bit each: 32 bytes */
        assert_int_equal(lmc_block_decode(s->dec, s->out, 32, b, p), p);
        b[tok] = 9;                                       /* 9 bits do not fit the 1-byte stream */
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 144, b, p)), LMC_ERR_CORRUPT);
        b[tok] = 17;                                      /* more tokens than bytes in the block */
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 16, b, p)), LMC_ERR_CORRUPT);
        b[tok] = 1;
        assert_int_equal(lmc_get_error(lmc_block_decode(s->dec, s->out, 16, b, p - 1)), LMC_ERR_TRUNCATED);
    }
}

/* Random bytes as a block: always returns, decodes at most m bytes. */
static void test_block_decode_random(void** state)
{
    codec_state* const s = (codec_state*)*state;
    tu_rng r; tu_seed(&r, 4242);
    uint8_t buf[600];
    for (int it = 0; it < 20000; it++) {
        size_t const n = 1 + tu_below(&r, sizeof(buf));
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)tu_next(&r);
        buf[0] = (uint8_t)(it % 5 == 0 ? tu_below(&r, 256) : (size_t)(2 + it % 2));
        if (n >= 4 && buf[0] >= 2) { size_t const p = n - 4; buf[1] = (uint8_t)p; buf[2] = (uint8_t)(p >> 8); buf[3] = 0; }
        size_t const m = 1 + tu_below(&r, it % 3 ? 64 : LMC_BLOCK_MAX);
        size_t const res = lmc_block_decode(s->dec, s->out, m, buf, n);
        if (!lmc_is_error(res)) assert_true(res <= n);
    }
}

/*-*** coder choice seen through frames ***-*/
static void frame_stats_of(lmc_cctx* c, const uint8_t* src, size_t n, lmc_frame_stats* st)
{
    uint8_t* f;
    size_t const s = tu_compress(c, &f, src, n);
    if (lmc_is_error(s)) fail_msg("lmc_compress: %s", lmc_error_name(s));
    assert_int_equal(lmc_frame_stats_get(st, f, s), s);
    lmc_frame_stats cs;
    assert_int_equal(lmc_cctx_last_stats(c, &cs), 0);
    for (int k = 0; k < LMC_CODER_COUNT; k++) assert_int_equal(cs.blocks[k], st->blocks[k]);
    lmc_dctx* const d = lmc_dctx_create();
    uint8_t* const o = (uint8_t*)tu_xmalloc(n);
    assert_int_equal(lmc_decompress(d, o, n, f, s), n);
    assert_memory_equal(o, src, n);
    free(o); free(f);
    lmc_dctx_free(d);
}

static uint64_t total_blocks(const lmc_frame_stats* st)
{
    uint64_t t = 0;
    for (int k = 0; k < LMC_CODER_COUNT; k++) t += st->blocks[k];
    return t;
}

/* A chunk whose pieces outgrow the payload bound is written again as one
 * stored piece (doc/format.md, "Chunk"): here 128 KiB random tensors that
 * alternate bf16 and f32, so that pieces cannot join and each adds its
 * header, against a random reference (REFCTX loses, every value block is
 * GROUPED RAW). The encoder hashes a chunk's payload as it codes value
 * blocks; the stored chunk's checksum must be that of the bytes written
 * again, which the decoder checks. The last tensor, a small change of its
 * reference, keeps a reference-modelled piece in the last chunk. Frames of
 * one and two threads must be the same. */
static void fill_random_tensor(size_t i, uint8_t* p, size_t n, uint64_t seed) { tu_fill_random(p, n, seed * 100 + i); }

static void test_stored_chunk(void** state)
{
    (void)state;
    enum { NT = 17 };
    tu_tensor t[NT];
    char names[NT][8];
    size_t shapes[NT];
    for (size_t i = 0; i < NT; i++) {
        snprintf(names[i], sizeof(names[i]), "t%zu", i);
        int const bf = (i % 2 == 0);
        t[i].name = names[i];
        t[i].dtype = bf ? "BF16" : "F32";
        t[i].width = bf ? 2 : 4;
        t[i].nelem = i == NT - 1 ? (size_t)1 << 19 : (bf ? (size_t)65536 : (size_t)32768);
        shapes[i] = t[i].nelem;
        t[i].shape = &shapes[i];
        t[i].ndim = 1;
    }
    size_t n, rn;
    uint8_t* const a = tu_build_safetensors(t, NT, &n, 1, fill_random_tensor);
    uint8_t* const r = tu_build_safetensors(t, NT, &rn, 2, fill_random_tensor);
    assert_int_equal(n, rn);
    /* the last tensor (1 MiB of bf16 Gaussians): the new one a small change of the reference's */
    size_t const last = t[NT - 1].nelem * 2;
    tu_fill_gauss(r + rn - last, last, 2, 7);
    tu_perturb(a + n - last, r + rn - last, last, 2, 3, 8);

    uint8_t* frames[2];
    size_t sizes[2];
    for (int k = 0; k < 2; k++) {
        lmc_cctx* const c = lmc_cctx_create();
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, k + 1), 0);
        /* chunks of exactly 1 MiB, so that one of them lies in the random tensor */
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_BALANCE, 0), 0);
        assert_int_equal(lmc_cctx_set_ref(c, r, rn), 0);
        sizes[k] = tu_compress(c, &frames[k], a, n);
        if (lmc_is_error(sizes[k])) fail_msg("lmc_compress: %s", lmc_error_name(sizes[k]));
        lmc_cctx_free(c);
    }
    assert_int_equal(sizes[0], sizes[1]);
    assert_memory_equal(frames[0], frames[1], sizes[0]);

    lmc_frame_stats st;
    assert_int_equal(lmc_frame_stats_get(&st, frames[0], sizes[0]), sizes[0]);
    assert_true(st.chunks >= 3);
    assert_true(st.dtype_in[LMC_DTYPE_BYTES] >= ((uint64_t)1 << 20));   /* a whole chunk stored */
    assert_true(st.pieces_refmodel >= 1);                                /* and the last tensor modelled */

    lmc_dctx* const d = lmc_dctx_create();
    uint8_t* const o = (uint8_t*)tu_xmalloc(n);
    assert_int_equal(lmc_dctx_set_ref(d, r, rn), 0);
    assert_int_equal(lmc_decompress(d, o, n, frames[0], sizes[0]), n);
    assert_memory_equal(o, a, n);
    assert_int_equal(lmc_dctx_set_ref(d, r, rn), 0);
    assert_int_equal(tu_decompress_stream(d, o, n, frames[0], sizes[0], tu_pieces_default, TU_NPIECES), n);
    assert_memory_equal(o, a, n);
    free(o); free(frames[0]); free(frames[1]); free(a); free(r);
    lmc_dctx_free(d);
}

static void test_frame_coders(void** state)
{
    (void)state;
    size_t const n = 4 * LMC_BLOCK_MAX;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC), 0);
    lmc_frame_stats st;

    tu_fill_const(a, n, 0x5A);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.blocks[LMC_CODER_CONST], 4);
    assert_int_equal(total_blocks(&st), 4);

    tu_fill_random(a, n, 1);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.blocks[LMC_CODER_RAW], 4);
    assert_int_equal(total_blocks(&st), 4);

    for (size_t b = 0; b < 4; b++) fill_dist(a + b * LMC_BLOCK_MAX, LMC_BLOCK_MAX, D_TWO, 2 + b);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.blocks[LMC_CODER_ANS], 4);     /* fractional bits win on a skewed byte */
    unsigned const no_ans = 0xFFu & ~(1u << LMC_CODER_ANS);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, no_ans), 0);
    fill_dist(a, n, D_GAUSS_HI, 2);   /* bf16 high bytes of Gaussian weights */
    for (size_t b = 1; b < 4; b++) fill_dist(a + b * LMC_BLOCK_MAX, LMC_BLOCK_MAX, D_GAUSS_HI, 2 + b);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.blocks[LMC_CODER_HUF], 4);

    tu_fill_sparse(a, n, 3);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.blocks[LMC_CODER_RLE_HUF], 4);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, 0xFF), 0);

    /* bf16 Gaussian weights as RAW bf16, byte-grouped: the exponent stream is Huffman coded */
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_LAYOUT, 1), 0);
    tu_fill_gauss(a, n, 2, 4);
    frame_stats_of(c, a, n, &st);
    assert_true(st.blocks[LMC_CODER_HUF] + st.blocks[LMC_CODER_ANS] >= 2);
    assert_int_equal(st.pieces_rotated, 0);
    assert_int_equal(st.dtype_in[LMC_DTYPE_BF16], n);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_LAYOUT, 2), 0);
    frame_stats_of(c, a, n, &st);
    assert_int_equal(st.pieces_rotated, 1);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_LAYOUT, 0), 0);
    lmc_cctx_free(c);
    free(a);
}

/* LMC_P_CODERS: disallowed coders never appear, and frames still decode. */
static void test_coder_mask(void** state)
{
    (void)state;
    size_t const n = 6 * LMC_BLOCK_MAX + 11;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    tu_fill_const(a, LMC_BLOCK_MAX, 0);
    tu_fill_const(a + LMC_BLOCK_MAX, LMC_BLOCK_MAX, 9);
    tu_fill_random(a + 2 * LMC_BLOCK_MAX, LMC_BLOCK_MAX, 5);
    fill_dist(a + 3 * LMC_BLOCK_MAX, LMC_BLOCK_MAX, D_TWO, 6);   /* ANS, or HUF without it */
    tu_fill_sparse(a + 4 * LMC_BLOCK_MAX, LMC_BLOCK_MAX, 7);
    fill_dist(a + 5 * LMC_BLOCK_MAX, LMC_BLOCK_MAX + 11, D_FIB, 8);
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC), 0);
    lmc_frame_stats st;
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, 0x0F), 0);
    frame_stats_of(c, a, n, &st);
    for (int k = 0; k < 4; k++) assert_true(st.blocks[k] > 0);   /* RAW, CONST, HUF, RLE_HUF in one frame */
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, 0xFF), 0);
    frame_stats_of(c, a, n, &st);
    assert_true(st.blocks[LMC_CODER_ANS] > 0);
    for (unsigned mask = 0; mask < 32; mask++) {
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, mask), 0);
        frame_stats_of(c, a, n, &st);
        unsigned const allowed = mask | 1u;
        for (unsigned k = 0; k < LMC_CODER_COUNT; k++)
            if (!((allowed >> k) & 1u)) assert_int_equal(st.blocks[k], 0);
        for (unsigned k = 0; k < 4; k++)   /* HUF may lose every block to ANS when both are allowed */
            if ((allowed >> k) & 1u)
                assert_true(st.blocks[k] > 0 || k == LMC_CODER_RAW || (k == LMC_CODER_HUF && ((allowed >> LMC_CODER_ANS) & 1u)));
        assert_int_equal(total_blocks(&st), 7);
    }
    assert_int_equal(lmc_get_error(lmc_cctx_set_param(c, LMC_P_CODERS, 0x100)), LMC_ERR_PARAM);
    assert_int_equal(lmc_get_error(lmc_cctx_set_param(c, LMC_P_CODERS, -1)), LMC_ERR_PARAM);
    lmc_cctx_free(c);
    free(a);
}

/* Bytes of unknown layout (generic mode): runs of floats are found and
 * coded as floats, at whatever offset they start; other bytes stay bytes. */
static size_t compress_size(lmc_cctx* c, const uint8_t* src, size_t n, const uint8_t* ref, lmc_frame_stats* st,
                            uint8_t** frame)
{
    if (ref) assert_int_equal(lmc_cctx_set_ref(c, ref, n), 0);
    else assert_int_equal(lmc_cctx_set_ref(c, NULL, 0), 0);
    uint8_t* f;
    size_t const s = tu_compress(c, &f, src, n);
    assert_false(lmc_is_error(s));
    assert_int_equal(lmc_frame_stats_get(st, f, s), s);
    lmc_dctx* const d = lmc_dctx_create();
    if (ref) assert_int_equal(lmc_dctx_set_ref(d, ref, n), 0);
    uint8_t* const o = (uint8_t*)tu_xmalloc(n);
    assert_int_equal(lmc_decompress(d, o, n, f, s), n);
    assert_memory_equal(o, src, n);
    free(o);
    lmc_dctx_free(d);
    if (frame) *frame = f; else free(f);
    return s;
}

static void test_generic_detects_floats(void** state)
{
    (void)state;
    size_t const M = (size_t)1 << 20, n = 3 * M + 3;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    uint8_t* const r = (uint8_t*)tu_xmalloc(n);
    /* 3 odd bytes; 1 MiB of bf16 (values at odd offsets); 1 MiB of f32
     * (offsets 3 mod 4); 1 MiB of sparse bytes. The reference: the floats
     * a small step of training before. */
    tu_rng g; tu_seed(&g, 77);
    a[0] = 0x11; a[1] = 0x22; a[2] = 0x33;
    for (size_t i = 3; i + 2 <= 3 + M; i += 2) {
        float const w = (float)(0.02 * tu_gauss(&g)), s = (float)(0.0002 * tu_gauss(&g));
        uint16_t const x = tu_f32_to_bf16(w), y = tu_f32_to_bf16(w + s);
        memcpy(a + i, &x, 2); memcpy(r + i, &y, 2);
    }
    for (size_t i = 3 + M; i + 4 <= 3 + 2 * M; i += 4) {
        float const w = (float)(0.02 * tu_gauss(&g)), s = w + (float)(0.00001 * tu_gauss(&g));
        memcpy(a + i, &w, 4); memcpy(r + i, &s, 4);
    }
    tu_fill_sparse(a + 3 + 2 * M, M, 78);
    memcpy(r, a, 3);
    memcpy(r + 3 + 2 * M, a + 3 + 2 * M, M);
    r[3 + 2 * M + 100] ^= 1;

    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC), 0);
    /* the runs start on 1 MiB chunk boundaries (+3), and detection works a
     * chunk at a time: fixed chunks, not balanced ones of 1.5 MiB */
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_BALANCE, 0), 0);
    for (int with_ref = 0; with_ref < 2; with_ref++) {
        const uint8_t* const ref = with_ref ? r : NULL;
        lmc_frame_stats st, sb;
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, 1), 0);
        uint8_t* f1;
        size_t const s1 = compress_size(c, a, n, ref, &st, &f1);
        assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
        /* the runs' edges move by at most a value's bytes */
        assert_in_range(st.dtype_in[LMC_DTYPE_BF16], M - 4, M + 4);
        assert_in_range(st.dtype_in[LMC_DTYPE_F32], M - 4, M + 4);
        assert_int_equal(st.dtype_in[LMC_DTYPE_BYTES] + st.dtype_in[LMC_DTYPE_BF16] + st.dtype_in[LMC_DTYPE_F32], n);
        if (with_ref) assert_true(st.pieces_refmodel >= 2);
        /* the same frame from two threads */
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, 2), 0);
        uint8_t* f2;
        lmc_frame_stats s2;
        assert_int_equal(compress_size(c, a, n, ref, &s2, &f2), s1);
        assert_memory_equal(f1, f2, s1);
        free(f1); free(f2);
        /* against bytes coded as bytes (raw u8): much smaller */
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_U8), 0);
        size_t const sbytes = compress_size(c, a, n, ref, &sb, NULL);
        assert_int_equal(sb.dtype_in[LMC_DTYPE_U8], n);
        print_message("generic %s: %zu bytes, as bytes %zu\n", with_ref ? "delta" : "whole", s1, sbytes);
        assert_true(s1 < sbytes - sbytes / (with_ref ? 8 : 16));
        /* raw without a dtype guesses as generic does */
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BYTES), 0);
        assert_int_equal(compress_size(c, a, n, ref, &sb, NULL), s1);
        assert_int_equal(sb.dtype_in[LMC_DTYPE_F32], st.dtype_in[LMC_DTYPE_F32]);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC), 0);
    }
    /* no floats: random, sparse and constant bytes stay bytes */
    lmc_frame_stats st;
    tu_fill_random(a, M, 5);
    tu_fill_sparse(a + M, M, 6);
    tu_fill_const(a + 2 * M, M + 3, 7);
    compress_size(c, a, n, NULL, &st, NULL);
    assert_int_equal(st.dtype_in[LMC_DTYPE_BYTES], n);
    memcpy(r, a, n);
    for (size_t i = 0; i < n; i += 4099) r[i] ^= 0x40;
    compress_size(c, a, n, r, &st, NULL);
    assert_int_equal(st.dtype_in[LMC_DTYPE_BYTES], n);
    lmc_cctx_free(c);
    free(a); free(r);
}

/* bf16 tensors of 600 KiB to 2 MiB one after another, each after a byte of
 * something else (as torch.save per tensor leaves them: the phase changes at
 * every tensor): coded almost as small as the same tensors all aligned.
 * (Tensors smaller than a window, 512 KiB, between two of the other phase
 * can go unseen, and are then coded at the wrong phase.) */
static size_t tensors_frame(lmc_cctx* c, int shifted, size_t n, lmc_frame_stats* st)
{
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    uint8_t* const r = (uint8_t*)tu_xmalloc(n);
    tu_rng g; tu_seed(&g, 91);
    size_t i = 0, fillers = 0;
    while (i < n) {
        size_t const t = (600 + tu_below(&g, 1449)) * 1024;
        if (shifted && i < n) { a[i] = r[i] = (uint8_t)tu_next(&g); i++; fillers++; }
        double const scale = 0.002 + 0.05 * tu_unit(&g);
        for (size_t k = 0; k < t && i + 2 <= n; k += 2, i += 2) {
            float const w = (float)(scale * tu_gauss(&g)), s = w + (float)(scale * 0.01 * tu_gauss(&g));
            uint16_t const x = tu_f32_to_bf16(w), y = tu_f32_to_bf16(s);
            memcpy(a + i, &x, 2); memcpy(r + i, &y, 2);
        }
        if (i + 2 > n) break;
    }
    for (; i < n; i++) a[i] = r[i] = 0;
    size_t const s = compress_size(c, a, n, r, st, NULL);
    if (shifted) print_message("%zu tensors\n", fillers);
    free(a); free(r);
    return s;
}

static void test_generic_finds_tensor_edges(void** state)
{
    (void)state;
    size_t const n = 12u << 20;
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC), 0);
    lmc_frame_stats st;
    size_t const aligned = tensors_frame(c, 0, n, &st);
    size_t const shifted = tensors_frame(c, 1, n, &st);
    print_message("aligned %zu, shifted %zu\n", aligned, shifted);
    assert_true(st.dtype_in[LMC_DTYPE_BF16] > n - n / 50);
    assert_true(shifted < aligned + aligned / 100);
    lmc_cctx_free(c);
}

/* bf16 weights saved as f32 (low halves 0) code about as small as the
 * bf16 weights themselves, and are still reported as f32. */
static void test_upcast_bf16(void** state)
{
    (void)state;
    size_t const nv = 600000;
    uint8_t* const a2 = (uint8_t*)tu_xmalloc(2 * nv);
    uint8_t* const r2 = (uint8_t*)tu_xmalloc(2 * nv);
    uint8_t* const a4 = (uint8_t*)tu_xmalloc(4 * nv);
    uint8_t* const r4 = (uint8_t*)tu_xmalloc(4 * nv);
    tu_rng g; tu_seed(&g, 123);
    for (size_t i = 0; i < nv; i++) {
        float const w = (float)(0.02 * tu_gauss(&g)), s = w + (float)(0.0002 * tu_gauss(&g));
        uint16_t const x = tu_f32_to_bf16(w), y = tu_f32_to_bf16(s);
        memcpy(a2 + 2 * i, &x, 2); memcpy(r2 + 2 * i, &y, 2);
        uint32_t const X = (uint32_t)x << 16, Y = (uint32_t)y << 16;
        memcpy(a4 + 4 * i, &X, 4); memcpy(r4 + 4 * i, &Y, 4);
    }
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    lmc_frame_stats st;
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    size_t const s16 = compress_size(c, a2, 2 * nv, r2, &st, NULL);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_F32), 0);
    size_t const s32 = compress_size(c, a4, 4 * nv, r4, &st, NULL);
    print_message("bf16 %zu bytes, the same as f32 %zu\n", s16, s32);
    assert_true(s32 < s16 + s16 / 50);
    assert_int_equal(st.dtype_in[LMC_DTYPE_F32], 4 * nv);
    assert_true(st.pieces_refmodel >= 1);
    /* one value with a low half: still lossless (the sample may miss it) */
    a4[4 * (nv / 2 + 3)] = 1;
    compress_size(c, a4, 4 * nv, r4, &st, NULL);
    lmc_cctx_free(c);
    free(a2); free(r2); free(a4); free(r4);
}

static void test_names(void** state)
{
    (void)state;
    assert_int_equal(lmc_version_number(), LMC_VERSION_NUMBER);
    assert_string_equal(lmc_version_string(), LMC_VERSION_STRING);
    const unsigned widths[LMC_DTYPE_COUNT] = { 1, 2, 2, 4, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1, 1, 1 };
    for (int d = 0; d < LMC_DTYPE_COUNT; d++) {
        assert_int_equal(lmc_dtype_width((lmc_dtype)d), widths[d]);
        assert_non_null(lmc_dtype_name((lmc_dtype)d));
        assert_int_equal(lmc_dtype_from_name(lmc_dtype_name((lmc_dtype)d)), d);
    }
    assert_int_equal(lmc_dtype_width((lmc_dtype)99), 1);
    assert_non_null(lmc_dtype_name((lmc_dtype)99));
    assert_int_equal(lmc_dtype_from_name("BF16"), LMC_DTYPE_BF16);
    assert_int_equal(lmc_dtype_from_name("uint8"), LMC_DTYPE_U8);
    assert_int_equal(lmc_dtype_from_name("bf1"), -1);
    assert_int_equal(lmc_dtype_from_name("bf166"), -1);
    assert_int_equal(lmc_dtype_from_name(""), -1);
    assert_int_equal(lmc_dtype_from_name(NULL), -1);
    for (int f = 0; f < 8; f++) assert_non_null(lmc_format_name((lmc_format)f));
    for (unsigned k = 0; k < 300; k++) assert_non_null(lmc_coder_name(k));
    /* XXH3-64 of the empty input (seed 0) */
    assert_int_equal(lmc_hash64("", 0), 0x2D06800538D394C2ull);
    assert_int_equal(lmc_hash64("abc", 3), lmc_hash64("abc", 3));
    assert_true(lmc_hash64("abc", 3) != lmc_hash64("abd", 3));
}

/* The checksums go through AVX-512, AVX2 or the baseline XXH3 loop by CPU:
 * every loop, one-shot and streamed in uneven slices, must give the hash
 * that XXH3 compiled here (baseline) gives, or frames would not decode on
 * another machine. */
/* lmc_group and lmc_ungroup are inverses in every CPU mode, for each width,
 * with and without a reference, rotated or not, at sizes around the vector
 * steps; and every mode groups into the same streams. */
static void test_group_paths(void** state)
{
    (void)state;
    static const unsigned modes[] = { ~0u, LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2, 0 };
    static const size_t counts[] = { 1, 15, 16, 31, 32, 33, 64 + 7, 1000, 4099 };
    static const unsigned widths[] = { 1, 2, 4, 8 };
    size_t const maxb = 8 * 4099;
    uint8_t* const src = (uint8_t*)tu_xmalloc(maxb);
    uint8_t* const ref = (uint8_t*)tu_xmalloc(maxb);
    uint8_t* const g = (uint8_t*)tu_xmalloc(maxb);
    uint8_t* const g0 = (uint8_t*)tu_xmalloc(maxb);
    uint8_t* const back = (uint8_t*)tu_xmalloc(maxb);
    tu_fill_random(src, maxb, 5);
    tu_fill_random(ref, maxb, 6);
    for (size_t wi = 0; wi < 4; wi++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (int variant = 0; variant < 4; variant++) {
                unsigned const w = widths[wi];
                size_t const n = counts[ci], bytes = n * w;
                const uint8_t* const r = variant & 1 ? ref : NULL;
                int const rot = (variant & 2) != 0;
                for (size_t md = 0; md < sizeof(modes) / sizeof(modes[0]); md++) {
                    lmc_cpu_restrict(modes[md]);
                    lmc_group(g, src, r, n, w, rot);
                    if (md == 0) memcpy(g0, g, bytes);
                    else assert_memory_equal(g, g0, bytes);
                    memset(back, 0xCD, bytes);
                    lmc_ungroup(back, g, r, n, w, rot);
                    assert_memory_equal(back, src, bytes);
                }
            }
    lmc_cpu_restrict(~0u);
    free(src); free(ref); free(g); free(g0); free(back);
}

/* A HUF block by hand: symbols 0 and 1 with codes "0" and "10" (an
 * incomplete code: "11" is unassigned), four streams of n bytes each, all
 * bytes `fill` except stream 2's byte `bad_at` (if < n), set to 0xFF. */
static size_t hand_huf_block(uint8_t* b, size_t n, uint8_t fill, size_t bad_at)
{
    uint8_t* p = b + 4;
    *p++ = 2; *p++ = 0;          /* nsym */
    *p++ = 0x21;                 /* lengths 1, 2 */
    for (int j = 0; j < 3; j++) { *p++ = (uint8_t)n; *p++ = (uint8_t)(n >> 8); }
    memset(p, fill, 4 * n);
    if (bad_at < n) p[2 * n + bad_at] = 0xFF;
    p += 4 * n;
    size_t const payload = (size_t)(p - (b + 4));
    b[0] = LMC_CODER_HUF;
    b[1] = (uint8_t)payload; b[2] = (uint8_t)(payload >> 8); b[3] = (uint8_t)(payload >> 16);
    return 4 + payload;
}

/* The several-symbols-a-lookup Huffman loop (large blocks with short codes):
 * a stream that meets an unassigned code stops the loop (it would otherwise
 * decode nothing and go round for ever) and the block is refused, wherever
 * the code lies; the same block without it decodes. */
static void test_huf_multi_unassigned(void** state)
{
    codec_state* const s = (codec_state*)*state;
    size_t const m = LMC_BLOCK_MAX, n = m / 4 / 8;   /* m / 4 one-bit codes a stream */
    size_t sz = hand_huf_block(s->buf, n, 0x00, n);
    assert_int_equal(lmc_block_decode(s->dec, s->out, m, s->buf, sz), sz);
    for (size_t i = 0; i < m; i++) if (s->out[i]) fail_msg("byte %zu is %u", i, s->out[i]);
    size_t const at[] = { 0, 1, 100, n / 2, n - 20, n - 1 };
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        sz = hand_huf_block(s->buf, n, 0x00, at[k]);
        size_t const r = lmc_block_decode(s->dec, s->out, m, s->buf, sz);
        assert_true(lmc_is_error(r));
    }
    /* every code unassigned from the start, in all four streams */
    sz = hand_huf_block(s->buf, n, 0xFF, n);
    assert_true(lmc_is_error(lmc_block_decode(s->dec, s->out, m, s->buf, sz)));
}

/* Byte streams for the histogram paths: exponent-like (a few values hold
 * most bytes), with the values that start a block rare later on, flat, one
 * dominant value, and fewer distinct values than the candidates. */
static void fill_hist_case(uint8_t* p, size_t m, int kind, uint32_t seed)
{
    uint32_t r = seed * 2654435761u + 1;
    for (size_t i = 0; i < m; i++) {
        r = r * 1103515245u + 12345u;
        unsigned const u = r >> 8;
        switch (kind) {
        case 0: { unsigned b = 0; while (b < 20 && (u >> b & 1)) b++; p[i] = (uint8_t)(126 - b); break; }
        case 1: p[i] = (uint8_t)(i < 2048 ? 60 + u % 12 : (u % 16 ? 120 + u % 8 : u)); break;
        case 2: p[i] = (uint8_t)u; break;
        case 3: p[i] = (uint8_t)(u % 10 ? 0 : u >> 8); break;
        case 4: p[i] = (uint8_t)(200 + u % 3); break;
        default: p[i] = (uint8_t)(u % 100 ? 7 + (u % 14) : u >> 9); break;
        }
    }
}

/* lmc_histogram and lmc_block_scan count every byte exactly in every CPU
 * mode (AVX-512 counts the most frequent values by compare and popcount),
 * block_scan's raw decision does not depend on the mode, and neither does
 * lmc_count_runs (32 bytes a step with AVX2). */
static void test_histogram_paths(void** state)
{
    (void)state;
    static const unsigned modes[] = { ~0u, LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2, 0 };
    static const size_t sizes[] = { 1, 63, 1000, 4096, 4097, 16384, 20000 + 13, 65536 };
    uint8_t* const b = (uint8_t*)tu_xmalloc(65536);
    for (int kind = 0; kind < 6; kind++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t const m = sizes[k];
            fill_hist_case(b, m, kind, (uint32_t)(kind * 31 + k));
            uint32_t want[256] = { 0 };
            for (size_t i = 0; i < m; i++) want[b[i]]++;
            int raw0 = -1;
            for (size_t md = 0; md < sizeof(modes) / sizeof(modes[0]); md++) {
                lmc_cpu_restrict(modes[md]);
                uint32_t h[256];
                memset(h, 0xA5, sizeof(h));
                lmc_histogram(h, b, m);
                assert_memory_equal(h, want, sizeof(want));
                memset(h, 0xA5, sizeof(h));
                int const raw = lmc_block_scan(h, b, m);
                if (!raw) assert_memory_equal(h, want, sizeof(want));
                if (raw0 < 0) raw0 = raw;
                for (unsigned v = 0; v < 256; v += 51) {
                    size_t runs = 0;
                    for (size_t i = 0; i < m; i++) runs += b[i] == v && (i == 0 || b[i - 1] != v);
                    assert_int_equal(lmc_count_runs(b, m, (uint8_t)v), runs);
                }
                assert_int_equal(raw, raw0);
                assert_int_equal(raw, kind == 2 && m >= 16384);
            }
        }
    }
    lmc_cpu_restrict(~0u);
    free(b);
}

static void test_hash_cpu_paths(void** state)
{
    (void)state;
    static const unsigned modes[] = { ~0u, LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2, 0 };
    static const size_t sizes[] = { 0, 1, 240, 1023, 1024, 1025, 4096, 65536 + 17, 1000003 };
    size_t const maxn = 1000003;
    uint8_t* const b = (uint8_t*)tu_xmalloc(maxn);
    tu_fill_random(b, maxn, 31337);
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        lmc_cpu_restrict(modes[m]);
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t const n = sizes[k];
            uint64_t const want = XXH3_64bits(b, n);
            assert_int_equal(lmc_hash64(b, n), want);
            lmc_hash_state* const h = lmc_hash_create();
            assert_non_null(h);
            for (size_t o = 0, step = 1; o < n; o += step, step = step * 3 + 7) {
                size_t const len = n - o < step ? n - o : step;
                lmc_hash_update(h, b + o, len);
            }
            assert_int_equal(lmc_hash_digest(h), want);
            lmc_hash_free(h);
            assert_int_equal(lmc_h64(b, n), want);
            XXH3_state_t st;
            XXH3_64bits_reset(&st);
            for (size_t o = 0, step = 5; o < n; o += step, step = step * 2 + 1000)
                lmc_hstate_update(&st, b + o, n - o < step ? n - o : step);
            assert_int_equal(XXH3_64bits_digest(&st), want);
        }
    }
    lmc_cpu_restrict(~0u);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_roundtrip),
        cmocka_unit_test(test_block_choice),
        cmocka_unit_test(test_block_ans1),
        cmocka_unit_test(test_ans1_states),
        cmocka_unit_test(test_huf_lengths),
        cmocka_unit_test(test_huf_canonical),
        cmocka_unit_test(test_huf_read_table),
        cmocka_unit_test(test_block_decode_hostile),
        cmocka_unit_test(test_block_decode_random),
        cmocka_unit_test(test_frame_coders),
        cmocka_unit_test(test_stored_chunk),
        cmocka_unit_test(test_coder_mask),
        cmocka_unit_test(test_generic_detects_floats),
        cmocka_unit_test(test_generic_finds_tensor_edges),
        cmocka_unit_test(test_upcast_bf16),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_hash_cpu_paths),
        cmocka_unit_test(test_histogram_paths),
        cmocka_unit_test(test_huf_multi_unassigned),
        cmocka_unit_test(test_group_paths),
    };
    return cmocka_run_group_tests_name("codec", tests, setup, teardown);
}
