/* test_stream.c - round trips through lmc_compress/lmc_decompress and the
 * streaming APIs: every width, awkward sizes, references shorter/equal/longer
 * than the input, thread counts and chunk sizes (identical bytes required),
 * real checkpoints and deltas, and safetensors handling. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "workmem.h"
#include "mem.h"
#if defined(__linux__)
#  include <sys/mman.h>
#endif

enum { REF_NONE = 0, REF_SHORTER, REF_EQUAL, REF_LONGER };

typedef struct {
    int      fmt;          /* LMC_FORMAT_GENERIC, LMC_FORMAT_RAW, LMC_FORMAT_AUTO */
    int      dtype;        /* for RAW */
    unsigned chunk_log;
    int      full;         /* also threads 3, unpledged stream and threaded decode */
    int      fixed;        /* LMC_P_CHUNK_BALANCE 0: chunks of 2^chunk_log */
} cfg;

static lmc_cctx* make_cctx(const cfg* c, unsigned threads)
{
    lmc_cctx* const cc = lmc_cctx_create();
    assert_non_null(cc);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_FORMAT, c->fmt), 0);
    if (c->fmt == LMC_FORMAT_RAW) assert_int_equal(lmc_cctx_set_param(cc, LMC_P_DTYPE, c->dtype), 0);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_THREADS, threads), 0);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CHUNK_LOG, c->chunk_log), 0);
    if (c->fixed) assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CHUNK_BALANCE, 0), 0);
    return cc;
}

/* One frame from a fresh context of c with `threads`; returns its size. */
static size_t fresh_frame(const cfg* c, unsigned threads, const uint8_t* src, size_t n, const uint8_t* ref, size_t refn,
                          uint8_t** frame)
{
    lmc_cctx* const cc = make_cctx(c, threads);
    if (ref) assert_int_equal(lmc_cctx_set_ref(cc, ref, refn), 0);
    size_t const s = tu_compress(cc, frame, src, n);
    assert_false(lmc_is_error(s));
    lmc_cctx_free(cc);
    return s;
}

/* How lmc_compress cuts n bytes (lmc.h, LMC_P_CHUNK_LOG; widths that
 * divide 2^L): the header's chunk_log, the chunk count and the nominal
 * chunk size. With 2 to 63
 * chunks of 2^L: the largest count that is a multiple of 16, 8, 4 or 2
 * (else kmax) at most kmax = n / 2^L whose equal chunks are at most
 * 2^(L+1) - 64 bytes. */
static void expect_chunks(const cfg* c, size_t n, unsigned* log, size_t* k, size_t* size)
{
    unsigned const L = c->chunk_log;
    size_t const C = (size_t)1 << L, kmax = n / C;
    /* fixed: a chunk is cut while at least C + 8 bytes are left */
    *log = L; *k = n > 0; *size = C;
    for (size_t left = n; left >= C + 8; left -= C) ++*k;
    if (c->fixed || L >= 26 || kmax < 2 || kmax > 63) return;
    size_t best = kmax;
    for (size_t m = 16; m >= 2; m /= 2) {
        size_t const kk = kmax / m * m;
        if (kk && (n + kk - 1) / kk <= 2 * C - 64) { best = kk; break; }
    }
    *k = best; *size = (n + best - 1) / best;
    if (*size > C) *log = L + 1;
}

/* The chunks' content sizes from the seek table: each but the last the
 * nominal size plus up to a value's bytes less one, the last at most that. */
static void check_chunk_sizes(const uint8_t* f, size_t s, size_t k, size_t size)
{
    assert_true(s >= 32 + 12 * k);
    const uint8_t* const footer = f + s - 32;
    assert_int_equal(lmc_rd64(footer), k);
    const uint8_t* const seek = footer - 12 * k;
    for (size_t i = 0; i < k; i++) {
        uint32_t const cs = lmc_rd32(seek + 12 * i + 4);
        if (i + 1 < k) assert_in_range(cs, size, size + 7);
        else assert_in_range(cs, 1, size + 7);
    }
}

static void check_decode_oneshot(const uint8_t* frame, size_t fsize, const uint8_t* src, size_t n,
                                 const uint8_t* ref, size_t refn, unsigned threads)
{
    lmc_dctx* const d = lmc_dctx_create();
    assert_non_null(d);
    assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, threads), 0);
    if (ref) assert_int_equal(lmc_dctx_set_ref(d, ref, refn), 0);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n + 1);
    size_t const r = lmc_decompress(d, out, n + 1, frame, fsize);
    if (lmc_is_error(r)) fail_msg("lmc_decompress: %s", lmc_error_name(r));
    assert_int_equal(r, n);
    assert_true(n == 0 || memcmp(out, src, n) == 0);
    /* exact-size destination too */
    size_t const r2 = lmc_decompress(d, out, n, frame, fsize);
    assert_int_equal(r2, n);
    free(out);
    lmc_dctx_free(d);
}

static void check_decode_stream(const uint8_t* frame, size_t fsize, const uint8_t* src, size_t n,
                                const uint8_t* ref, size_t refn, unsigned threads)
{
    lmc_dctx* const d = lmc_dctx_create();
    assert_non_null(d);
    assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, threads), 0);
    if (ref) assert_int_equal(lmc_dctx_set_ref(d, ref, refn), 0);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n + 1);
    size_t const r = tu_decompress_stream(d, out, n + 1, frame, fsize, tu_pieces_default, TU_NPIECES);
    if (lmc_is_error(r)) fail_msg("lmc_decompress_stream: %s", lmc_error_name(r));
    assert_int_equal(r, n);
    assert_true(n == 0 || memcmp(out, src, n) == 0);
    free(out);
    lmc_dctx_free(d);
}

/* The core round trip: one-shot threads 1 (reference bytes), threads 2 (and 3)
 * identical, streaming with a pledged size identical, decoded every way. */
static void roundtrip(const cfg* c, const uint8_t* src, size_t n, const uint8_t* ref, size_t refn)
{
    lmc_cctx* const c1 = make_cctx(c, 1);
    if (ref) assert_int_equal(lmc_cctx_set_ref(c1, ref, refn), 0);
    uint8_t* f1;
    size_t const s1 = tu_compress(c1, &f1, src, n);
    if (lmc_is_error(s1)) fail_msg("lmc_compress: %s", lmc_error_name(s1));
    assert_true(s1 <= lmc_compress_bound(n));

    /* structure walk agrees with the encoder's own statistics */
    lmc_frame_stats st, cs;
    assert_int_equal(lmc_frame_stats_get(&st, f1, s1), s1);
    assert_int_equal(lmc_cctx_last_stats(c1, &cs), 0);
    assert_int_equal(st.content_size, n);
    assert_int_equal(st.frame_size, s1);
    assert_int_equal(cs.frame_size, s1);
    /* format 5: the chunks' hashes hashed, not the whole content's */
    assert_int_equal(st.content_hash, tu_frame_content_hash(f1, s1, src));
    assert_int_equal(cs.content_hash, st.content_hash);
    if (st.chunks > 1) assert_true(st.content_hash != lmc_hash64(src, n));
    assert_int_equal(st.header.has_ref, ref != NULL);
    /* lmc_cctx_set_ref leaves the hash to lmc_compress, which hashes the
     * reference between its chunk jobs: the same hash as in one pass */
    if (ref) assert_int_equal(st.header.ref_hash, lmc_hash64(ref, refn));
    unsigned elog;
    size_t ek, esize;
    expect_chunks(c, n, &elog, &ek, &esize);
    assert_int_equal(st.header.chunk_log, elog);
    assert_int_equal(st.header.content_size, n);
    assert_int_equal(st.chunks, cs.chunks);
    assert_int_equal(st.pieces, cs.pieces);
    assert_int_equal(st.pieces_xor, cs.pieces_xor);
    for (int k = 0; k < LMC_CODER_COUNT; k++) {
        assert_int_equal(st.blocks[k], cs.blocks[k]);
        assert_int_equal(st.block_in[k], cs.block_in[k]);
    }
    uint64_t din = 0;
    for (int dt = 0; dt < LMC_DTYPE_COUNT; dt++) { din += st.dtype_in[dt]; assert_int_equal(st.dtype_in[dt], cs.dtype_in[dt]); }
    assert_int_equal(din, n);
    assert_int_equal(st.chunks, ek);
    check_chunk_sizes(f1, s1, ek, esize);

    check_decode_oneshot(f1, s1, src, n, ref, refn, 1);
    check_decode_oneshot(f1, s1, src, n, ref, refn, c->full ? 3 : 2);
    check_decode_stream(f1, s1, src, n, ref, refn, 1);

    /* every thread count writes the same bytes, with the reference's hash
     * computed during the call or given (3 threads) */
    for (unsigned t = 2; t <= (c->full ? 3u : 2u); t++) {
        lmc_cctx* const ct = make_cctx(c, t);
        if (ref && t == 3) assert_int_equal(lmc_cctx_set_ref_hashed(ct, ref, refn, lmc_hash64(ref, refn)), 0);
        else if (ref) assert_int_equal(lmc_cctx_set_ref(ct, ref, refn), 0);
        uint8_t* ft;
        size_t const stt = tu_compress(ct, &ft, src, n);
        assert_int_equal(stt, s1);
        assert_memory_equal(ft, f1, s1);
        free(ft);
        lmc_cctx_free(ct);
    }

    /* streaming with a pledged size: the same bytes again */
    {
        lmc_cctx* const cst = make_cctx(c, 2);
        if (ref) assert_int_equal(lmc_cctx_set_ref(cst, ref, refn), 0);
        assert_int_equal(lmc_cctx_set_param(cst, LMC_P_CONTENT_SIZE, (long long)n), 0);
        size_t const cap = lmc_compress_bound(n);
        uint8_t* const fs = (uint8_t*)tu_xmalloc(cap);
        size_t const ss = tu_compress_stream(cst, fs, cap, src, n, tu_pieces_default, TU_NPIECES);
        if (lmc_is_error(ss)) fail_msg("lmc_compress_stream: %s", lmc_error_name(ss));
        assert_int_equal(ss, s1);
        assert_memory_equal(fs, f1, s1);
        lmc_frame_stats ss_st;
        assert_int_equal(lmc_cctx_last_stats(cst, &ss_st), 0);
        assert_int_equal(ss_st.frame_size, s1);
        free(fs);
        lmc_cctx_free(cst);
    }

    /* streaming without a pledge: another frame, same content */
    if (c->full) {
        lmc_cctx* const cu = make_cctx(c, 1);
        if (ref) assert_int_equal(lmc_cctx_set_ref(cu, ref, refn), 0);
        size_t const cap = lmc_compress_bound(n);
        uint8_t* const fu = (uint8_t*)tu_xmalloc(cap);
        size_t const su = tu_compress_stream(cu, fu, cap, src, n, tu_pieces_default, TU_NPIECES);
        if (lmc_is_error(su)) fail_msg("lmc_compress_stream (unpledged): %s", lmc_error_name(su));
        lmc_frame_header h;
        assert_int_equal(lmc_get_frame_header(&h, fu, su), LMC_FRAME_HEADER_SIZE);
        assert_int_equal(h.content_size_known, 0);
        check_decode_oneshot(fu, su, src, n, ref, refn, 2);
        check_decode_stream(fu, su, src, n, ref, refn, 1);
        free(fu);
        lmc_cctx_free(cu);
    }
    free(f1);
    lmc_cctx_free(c1);
}

/* Data of n bytes for a width: Gaussian floats, or bytes. Reference: a
 * perturbed copy cut to the wanted size (longer: random extra bytes). */
static void make_case(unsigned w, size_t n, int refkind, uint64_t seed, uint8_t** src, uint8_t** ref, size_t* refn)
{
    *src = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(*src, n, w >= 2 ? w : 2, seed);
    *ref = NULL; *refn = 0;
    if (refkind == REF_NONE) return;
    size_t const rn = refkind == REF_SHORTER ? n / 2 : refkind == REF_EQUAL ? n : n + 1000;
    uint8_t* const r = (uint8_t*)tu_xmalloc(rn);
    size_t const common = rn < n ? rn : n;
    tu_perturb(r, *src, common, w, 10, seed + 1);
    if (rn > n) tu_fill_random(r + n, rn - n, seed + 2);
    *ref = r; *refn = rn;
}

typedef struct { int fmt, dtype; } width_case;
static const width_case k_widths[] = {
    { LMC_FORMAT_GENERIC, LMC_DTYPE_BYTES }, { LMC_FORMAT_RAW, LMC_DTYPE_BF16 }, { LMC_FORMAT_RAW, LMC_DTYPE_F16 },
    { LMC_FORMAT_RAW, LMC_DTYPE_F32 },       { LMC_FORMAT_RAW, LMC_DTYPE_F64 },  { LMC_FORMAT_RAW, LMC_DTYPE_U8 },
};
#define NWIDTHS (sizeof(k_widths) / sizeof(k_widths[0]))

static void test_small_sizes(void** state)
{
    (void)state;
    for (size_t wi = 0; wi < NWIDTHS; wi++) {
        unsigned const w = lmc_dtype_width((lmc_dtype)k_widths[wi].dtype);
        size_t const sizes[] = { 0, 1, w - 1, 2 * w + 1, 1000, 65535, 65536, 65537 };
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            for (int rk = REF_NONE; rk <= REF_LONGER; rk++) {
                size_t const n = sizes[si];
                if (rk == REF_SHORTER && n < 2) continue;   /* an empty reference is no reference */
                uint8_t *src, *ref; size_t refn;
                make_case(w, n, rk, 100 + wi * 31 + si * 7 + (size_t)rk, &src, &ref, &refn);
                cfg const c = { k_widths[wi].fmt, k_widths[wi].dtype, 20, n >= 65535 && rk == REF_EQUAL, 0 };
                roundtrip(&c, src, n, ref, refn);
                free(src); free(ref);
            }
        }
    }
}

/* Several MB: more than one chunk at chunk_log 20, lengths not a multiple of the width. */
static void test_multi_chunk(void** state)
{
    (void)state;
    /* 2.5 MiB + 3: at log 20 two chunks of 1.25 MiB (header log 21), or 3
     * fixed ones; at log 21 two fixed ones */
    size_t const n = (size_t)5 * (1u << 19) + 3;
    for (size_t wi = 0; wi < NWIDTHS; wi++) {
        unsigned const w = lmc_dtype_width((lmc_dtype)k_widths[wi].dtype);
        int const refs[] = { REF_NONE, REF_EQUAL };
        for (int k = 0; k < 2; k++) {
            uint8_t *src, *ref; size_t refn;
            make_case(w, n, refs[k], 7000 + wi * 3 + (size_t)k, &src, &ref, &refn);
            cfg const c = { k_widths[wi].fmt, k_widths[wi].dtype, (wi + (size_t)k) % 2 ? 21u : 20u, wi == 1 && k == 1,
                            wi % 3 == 0 };
            roundtrip(&c, src, n, ref, refn);
            free(src); free(ref);
        }
    }
}

/* Sizes on the edges of the balanced cuts (lmc.h, LMC_P_CHUNK_LOG): one
 * 1 MiB chunk and a bit (fixed chunks), exactly two, just under four (two
 * equal chunks would pass 2 MiB - 64: three), 17 (16 equal ones); roundtrip
 * checks the header's log, the count and every chunk's size against
 * expect_chunks, and the same bytes from 1 and 2 threads and from a
 * pledged stream. */
static void test_balanced_chunks(void** state)
{
    (void)state;
    size_t const M = (size_t)1 << 20;
    size_t const sizes[] = { 2 * M - 1, 2 * M, 4 * M - 100, 17 * M + 5 };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t const n = sizes[i];
        uint8_t* const a = (uint8_t*)tu_xmalloc(n);
        tu_fill_sparse(a, n, 300 + i);
        for (int fixed = 0; fixed < 2; fixed++) {
            cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_U8, 20, 0, fixed };
            roundtrip(&c, a, n, NULL, 0);
        }
        free(a);
    }
}

/* One context through frames whose chunks are larger, a little smaller
 * (its buffers kept), much smaller and larger again (made again): each
 * frame is the one a fresh context writes. */
static void test_context_chunk_sizes(void** state)
{
    (void)state;
    size_t const M = (size_t)1 << 20;
    size_t const sizes[] = { 5 * M + 100, 4 * M + M / 2, 100000, 3 * M - 10, 5 * M + 100 };
    size_t const nmax = 5 * M + 100;
    uint8_t* const a = (uint8_t*)tu_xmalloc(nmax);
    tu_fill_gauss(a, nmax, 2, 4711);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 0 };
    lmc_cctx* const kept = make_cctx(&c, 2);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *f1, *f2;
        size_t const s1 = tu_compress(kept, &f1, a, sizes[i]);
        size_t const s2 = fresh_frame(&c, 2, a, sizes[i], NULL, 0, &f2);
        assert_false(lmc_is_error(s1));
        assert_int_equal(s1, s2);
        assert_memory_equal(f1, f2, s1);
        check_decode_oneshot(f1, s1, a, sizes[i], NULL, 0, 2);
        free(f1); free(f2);
    }
    lmc_cctx_free(kept);
    free(a);
}

static void test_multi_chunk_ref_lengths(void** state)
{
    (void)state;
    size_t const n = (size_t)(1u << 21) + 12345;
    int const kinds[] = { REF_SHORTER, REF_LONGER };
    for (int wi = 0; wi < 2; wi++) {             /* generic and bf16 */
        unsigned const w = wi ? 2 : 1;
        for (int k = 0; k < 2; k++) {
            uint8_t *src, *ref; size_t refn;
            make_case(w, n, kinds[k], 9100 + (uint64_t)(wi * 2 + k), &src, &ref, &refn);
            cfg const c = { k_widths[wi].fmt, k_widths[wi].dtype, 20, 0, 0 };
            roundtrip(&c, src, n, ref, refn);
            free(src); free(ref);
        }
    }
}

static void test_data_kinds(void** state)
{
    (void)state;
    size_t const n = 300000 + 1;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    uint8_t* const b = (uint8_t*)tu_xmalloc(n);
    for (int kind = 0; kind < 6; kind++) {
        switch (kind) {
        case 0: tu_fill_const(a, n, 0); break;
        case 1: tu_fill_const(a, n, 0xA5); break;
        case 2: tu_fill_random(a, n, 42); break;
        case 3: tu_fill_gauss(a, n, 2, 43); break;
        case 4: tu_fill_gauss(a, n, 4, 44); break;
        default: tu_fill_sparse(a, n, 45); break;
        }
        for (int dt = 0; dt < 3; dt++) {
            cfg const c = { dt == 0 ? LMC_FORMAT_GENERIC : LMC_FORMAT_RAW, dt == 1 ? LMC_DTYPE_BF16 : LMC_DTYPE_F32, 20, 0, 0 };
            roundtrip(&c, a, n, NULL, 0);
            unsigned const w = dt == 0 ? 1 : dt == 1 ? 2 : 4;
            tu_perturb(b, a, n, w, 20, 46 + (uint64_t)kind);
            roundtrip(&c, b, n, a, n);   /* sparse XOR delta */
        }
    }
    free(a); free(b);
}

/* Chunk-size and contexts reused across frames: parameters and reference kept. */
static void test_context_reuse(void** state)
{
    (void)state;
    size_t const n = 200001;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    uint8_t* const b = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(a, n, 2, 1);
    tu_perturb(b, a, n, 2, 5, 2);
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    assert_int_equal(lmc_cctx_set_ref(c, a, n), 0);
    assert_int_equal(lmc_dctx_set_ref(d, a, n), 0);
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const o = (uint8_t*)tu_xmalloc(n);
    size_t prev = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_LOG, i % 2 ? 21 : 20), 0);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, 1 + i % 3), 0);
        size_t const s = lmc_compress(c, f, cap, b, n);
        assert_false(lmc_is_error(s));
        if (i >= 2) assert_int_equal(s, prev);   /* same parameters as two frames ago */
        prev = i == 0 ? prev : s;
        assert_int_equal(lmc_decompress(d, o, n, f, s), n);
        assert_memory_equal(o, b, n);
        /* streaming on the same contexts, after a one-shot */
        size_t const ss = tu_compress_stream(c, f, cap, b, n, tu_pieces_default, TU_NPIECES);
        assert_false(lmc_is_error(ss));
        assert_int_equal(tu_decompress_stream(d, o, n, f, ss, tu_pieces_default, TU_NPIECES), n);
        assert_memory_equal(o, b, n);
    }
    /* reset mid-frame, then a whole frame */
    {
        lmc_inbuf in = { b, 1000, 0 };
        lmc_outbuf out = { f, 10, 0 };
        assert_false(lmc_is_error(lmc_compress_stream(c, &out, &in, 0)));
        lmc_cctx_reset(c);
        size_t const s = lmc_compress(c, f, cap, b, n);
        assert_false(lmc_is_error(s));
        lmc_inbuf din = { f, 100, 0 };
        lmc_outbuf dout = { o, n, 0 };
        assert_false(lmc_is_error(lmc_decompress_stream(d, &dout, &din)));
        lmc_dctx_reset(d);
        assert_int_equal(tu_decompress_stream(d, o, n, f, s, tu_pieces_default, TU_NPIECES), n);
        assert_memory_equal(o, b, n);
    }
    free(f); free(o); free(a); free(b);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
}

/*-*** real checkpoints ***-*/
static const char* const k_steps[] = { "000300", "000350", "000400", "000450", "000500", "000550" };
static const char* const k_files[] = { "model_bf16", "model_fp32", "optim" };

static void real_case(const uint8_t* cur, size_t n, const uint8_t* prev, size_t pn, int full)
{
    cfg const c = { LMC_FORMAT_AUTO, 0, 20, full, 0 };
    roundtrip(&c, cur, n, prev, pn);
    lmc_frame_stats st;
    lmc_cctx* const cc = make_cctx(&c, 2);
    if (prev) assert_int_equal(lmc_cctx_set_ref(cc, prev, pn), 0);
    uint8_t* f;
    size_t const s = tu_compress(cc, &f, cur, n);
    assert_false(lmc_is_error(s));
    assert_int_equal(lmc_frame_stats_get(&st, f, s), s);
    assert_int_equal(st.header.container, LMC_FORMAT_SAFETENSORS);
    assert_true(s < n);   /* real weights compress */
    if (prev) assert_true(st.pieces_xor > 0);
    free(f);
    lmc_cctx_free(cc);
}

static void test_real_checkpoints(void** state)
{
    (void)state;
    char path[256];
    int found = 0;
    for (size_t fi = 0; fi < 3; fi++) {
        uint8_t* prev = NULL; size_t pn = 0;
        for (size_t si = 0; si < sizeof(k_steps) / sizeof(k_steps[0]); si++) {
            snprintf(path, sizeof(path), "data/trajectory/step-%s/%s.safetensors", k_steps[si], k_files[fi]);
            size_t n;
            uint8_t* const cur = tu_read_file(path, &n);
            if (!cur) continue;
            found++;
            /* full frames of the first and last step; deltas against the previous step for all */
            if (si == 0 || si + 1 == sizeof(k_steps) / sizeof(k_steps[0])) real_case(cur, n, NULL, 0, 0);
            if (prev) real_case(cur, n, prev, pn, si == 1);
            free(prev);
            prev = cur; pn = n;
        }
        free(prev);
    }
    if (!found) skip();
}

/*-*** safetensors ***-*/
static void st_fill(size_t i, uint8_t* p, size_t n, uint64_t seed)
{
    switch (i % 3) {
    case 0: tu_fill_gauss(p, n, 2, seed + i); break;
    case 1: tu_fill_gauss(p, n, 4, seed + i); break;
    default: tu_fill_random(p, n, seed + i); break;
    }
}

static const size_t k_shape_bf16[] = { 64, 48 };
static const size_t k_shape_f32[] = { 1500 };
static const size_t k_shape_one[] = { 1 };
static const size_t k_shape_odd[] = { 1001 };
static const size_t k_shape_bf16b[] = { 48, 64 };

static void st_stats(const uint8_t* f, size_t s, lmc_frame_stats* st)
{
    size_t const r = lmc_frame_stats_get(st, f, s);
    if (lmc_is_error(r)) fail_msg("lmc_frame_stats_get: %s", lmc_error_name(r));
}

static void test_safetensors(void** state)
{
    (void)state;
    /* order: the tiny ones first so they merge with the header's bytes */
    tu_tensor const t[] = {
        { "a.one_bf16", "BF16", 2, 1, k_shape_one, 1 },   /* 2 bytes: merged into bytes */
        { "b.one_u8", "U8", 1, 1, k_shape_one, 1 },       /* 1 byte:  merged */
        { "c.w", "BF16", 2, 64 * 48, k_shape_bf16, 2 },
        { "d.f", "F32", 4, 1500, k_shape_f32, 1 },
        { "e.odd", "U8", 1, 1001, k_shape_odd, 1 },
        { "f.w2", "BF16", 2, 64 * 48, k_shape_bf16, 2 },
    };
    size_t const nt = sizeof(t) / sizeof(t[0]);
    size_t n;
    uint8_t* const file = tu_build_safetensors(t, nt, &n, 77, st_fill);
    size_t const hdr_total = 8 + (size_t)file[0] + ((size_t)file[1] << 8);

    cfg const c = { LMC_FORMAT_AUTO, 0, 20, 1, 0 };
    roundtrip(&c, file, n, NULL, 0);
    lmc_cctx* const cc = make_cctx(&c, 1);
    uint8_t* f;
    size_t s = tu_compress(cc, &f, file, n);
    assert_false(lmc_is_error(s));
    lmc_frame_stats st;
    st_stats(f, s, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_SAFETENSORS);
    assert_int_equal(st.dtype_in[LMC_DTYPE_BF16], 2 * 2 * 64 * 48);
    assert_int_equal(st.dtype_in[LMC_DTYPE_F32], 4 * 1500);
    assert_int_equal(st.dtype_in[LMC_DTYPE_U8], 1001);
    assert_int_equal(st.dtype_in[LMC_DTYPE_BYTES], hdr_total + 3);
    assert_int_equal(st.pieces_xor, 0);
    free(f);

    /* same with LMC_FORMAT_SAFETENSORS forced */
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_FORMAT, LMC_FORMAT_SAFETENSORS), 0);
    s = tu_compress(cc, &f, file, n);
    assert_false(lmc_is_error(s));
    st_stats(f, s, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_SAFETENSORS);
    free(f);

    /* a reference where c.w changed shape, d.f changed dtype, e.odd is missing */
    tu_tensor const rt[] = {
        { "a.one_bf16", "BF16", 2, 1, k_shape_one, 1 },
        { "b.one_u8", "U8", 1, 1, k_shape_one, 1 },
        { "c.w", "BF16", 2, 64 * 48, k_shape_bf16b, 2 },
        { "d.f", "I32", 4, 1500, k_shape_f32, 1 },
        { "f.w2", "BF16", 2, 64 * 48, k_shape_bf16, 2 },
    };
    size_t rn;
    uint8_t* const ref = tu_build_safetensors(rt, sizeof(rt) / sizeof(rt[0]), &rn, 78, st_fill);
    cfg const c2 = { LMC_FORMAT_AUTO, 0, 21, 1, 0 };
    roundtrip(&c2, file, n, ref, rn);
    assert_int_equal(lmc_cctx_set_ref(cc, ref, rn), 0);
    s = tu_compress(cc, &f, file, n);
    assert_false(lmc_is_error(s));
    st_stats(f, s, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_SAFETENSORS);
    assert_true(st.header.has_ref);
    /* XOR pieces: the header bytes (same offset) and f.w2 (same name, dtype, shape) */
    assert_int_equal(st.pieces_xor, 2);
    free(f);

    /* reference equal to the input: every tensor piece of >= 64 bytes is a delta */
    assert_int_equal(lmc_cctx_set_ref(cc, file, n), 0);
    s = tu_compress(cc, &f, file, n);
    assert_false(lmc_is_error(s));
    st_stats(f, s, &st);
    assert_int_equal(st.pieces_xor, 5);
    assert_int_equal(st.blocks[LMC_CODER_CONST] + st.blocks[LMC_CODER_RAW] + st.blocks[LMC_CODER_HUF]
                     + st.blocks[LMC_CODER_RLE_HUF] > 0, 1);
    assert_true(s < 1000);
    free(f);
    lmc_cctx_free(cc);

    /* invalid JSON: generic mode, still round trips */
    uint8_t* const bad = (uint8_t*)tu_xmalloc(n);
    memcpy(bad, file, n);
    bad[8 + 2] = '!';
    cfg const c3 = { LMC_FORMAT_AUTO, 0, 20, 1, 0 };
    roundtrip(&c3, bad, n, NULL, 0);
    roundtrip(&c3, bad, n, file, n);
    lmc_cctx* const cb = make_cctx(&c3, 1);
    s = tu_compress(cb, &f, bad, n);
    assert_false(lmc_is_error(s));
    st_stats(f, s, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
    free(f);
    /* truncated file (tensors do not reach the declared end): generic too */
    s = tu_compress(cb, &f, file, n - 1);
    assert_false(lmc_is_error(s));
    st_stats(f, s, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
    free(f);
    lmc_cctx_free(cb);
    cfg const c4 = { LMC_FORMAT_SAFETENSORS, 0, 20, 0, 0 };
    roundtrip(&c4, file, n - 1, NULL, 0);
    free(bad); free(ref); free(file);
}

/* Streaming decoder with several threads, input arriving in pieces that end
 * inside a chunk: the partially received chunk in job slot k > 0 must survive
 * the batch of the complete ones (see the report: it was lost, LMC_ERR_CORRUPT). */
static void test_stream_decode_threads(void** state)
{
    (void)state;
    size_t const n = (size_t)(1u << 21) + 12345;
    uint8_t* const src = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(src, n, 2, 5);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 0 };
    lmc_cctx* const cc = make_cctx(&c, 1);
    uint8_t* f;
    size_t const s = tu_compress(cc, &f, src, n);
    assert_false(lmc_is_error(s));
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    static const size_t pat64k[] = { 65536 };
    for (unsigned t = 1; t <= 3; t++) {
        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
        size_t const r = tu_decompress_stream(d, out, n, f, s, pat64k, 1);
        if (lmc_is_error(r)) fail_msg("threads %u, 64 KiB input pieces: %s", t, lmc_error_name(r));
        assert_int_equal(r, n);
        assert_memory_equal(out, src, n);
        size_t const r2 = tu_decompress_stream(d, out, n, f, s, tu_pieces_default, TU_NPIECES);
        if (lmc_is_error(r2)) fail_msg("threads %u, odd input pieces: %s", t, lmc_error_name(r2));
        assert_int_equal(r2, n);
        lmc_dctx_free(d);
    }
    free(out); free(f); free(src);
    lmc_cctx_free(cc);
}

/* lmc_workmem_alloc gives zeroed memory (the contexts no longer clear
 * their 2 MB workspaces, which made all of them resident), and on Linux a
 * block above the huge-page limit has no page resident until one is
 * written: -T16 compression of an 8 GiB delta held 102 MiB against its
 * 96 MiB bound while every workspace was cleared. Sizes on both paths;
 * each block is written, freed, and allocated again, zero again. */
static void test_work_memory_zeroed(void** state)
{
    (void)state;
    size_t const sizes[] = { 1, 4095, 64 << 10, (1u << 20) + 8, LMC_WORKMEM_HUGE_MAX, LMC_WORKMEM_HUGE_MAX + 1,
                             (size_t)40 << 20 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t const n = sizes[k];
        for (int round = 0; round < 2; round++) {
            uint8_t* const p = (uint8_t*)lmc_workmem_alloc(n);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % 64, 0);
#if defined(__linux__)
            if (n > LMC_WORKMEM_HUGE_MAX && round == 0) {
                size_t const pages = (n + 4095) / 4096;
                unsigned char* const vec = (unsigned char*)tu_xmalloc(pages);
                assert_int_equal(mincore(p, n, vec), 0);
                size_t resident = 0;
                for (size_t i = 0; i < pages; i++) resident += vec[i] & 1;
                if (resident) fail_msg("%zu of %zu pages of a fresh %zu-byte block resident", resident, pages, n);
                free(vec);
            }
#endif
            size_t nonzero = 0;
            for (size_t i = 0; i < n; i++) nonzero += p[i] != 0;
            if (nonzero) fail_msg("%zu-byte block (round %d): %zu bytes not zero", n, round, nonzero);
            memset(p, 0xA5, n);
            lmc_workmem_free(p, n);
        }
    }
}

/* Work memory (lib/common/workmem.h): a context whose buffers fit the
 * huge-page limit keeps them in one block, a larger one (many threads, or
 * large chunks) on the allocator's pages. Frames are the same bytes either
 * way and decode with either; a decoding context that meets small chunks
 * first, then larger ones, grows its buffers from one kind to the other. */
static void test_work_memory_layouts(void** state)
{
    (void)state;
    size_t const n = (size_t)(5u << 20) + 999;
    uint8_t *src, *ref;
    size_t refn;
    make_case(2, n, REF_EQUAL, 2024, &src, &ref, &refn);
    size_t const cap = lmc_compress_bound(n);
    /* frame 0: a small input (one chunk of 200000 bytes); then the whole
     * input in chunks of 1, 2 and 4 MiB */
    static const unsigned logs[] = { 20, 20, 21, 22 };
    static const unsigned threads[] = { 1, 2, 12 };
    uint8_t* frames[4];
    size_t sizes[4], lens[4];
    uint8_t* const got = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    for (unsigned li = 0; li < 4; li++) {
        cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, logs[li], 0, 0 };
        frames[li] = NULL; sizes[li] = 0;
        lens[li] = li ? n : 200000;
        for (unsigned ti = 0; ti < 3; ti++) {
            lmc_cctx* const cc = make_cctx(&c, threads[ti]);
            assert_int_equal(lmc_cctx_set_ref(cc, ref, refn), 0);
            size_t const z = lmc_compress(cc, got, cap, src, lens[li]);
            if (lmc_is_error(z)) fail_msg("chunk log %u, %u threads: %s", logs[li], threads[ti], lmc_error_name(z));
            if (!frames[li]) {
                frames[li] = (uint8_t*)tu_xmalloc(z);
                memcpy(frames[li], got, z);
                sizes[li] = z;
            } else {
                assert_int_equal(z, sizes[li]);
                assert_memory_equal(got, frames[li], z);
            }
            /* a second frame from the same context: its buffers reused */
            assert_int_equal(lmc_cctx_set_ref(cc, ref, refn), 0);
            assert_int_equal(lmc_compress(cc, got, cap, src, lens[li]), sizes[li]);
            assert_memory_equal(got, frames[li], sizes[li]);
            lmc_cctx_free(cc);
        }
    }
    static const size_t pat[] = { 70000, 1 << 20, 333 };
    for (unsigned ti = 0; ti < 3; ti++) {
        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, threads[ti]), 0);
        for (unsigned li = 0; li < 4; li++) {   /* chunks grow from frame to frame */
            size_t const m = lens[li];
            assert_int_equal(lmc_dctx_set_ref(d, ref, refn), 0);
            memset(out, 0, m);
            assert_int_equal(lmc_decompress(d, out, m, frames[li], sizes[li]), m);
            assert_memory_equal(out, src, m);
            /* streaming into small outputs: chunks staged in the jobs' buffers */
            memset(out, 0, m);
            size_t const r = tu_decompress_stream(d, out, m, frames[li], sizes[li], pat, 3);
            if (lmc_is_error(r)) fail_msg("frame %u, %u threads, streaming: %s", li, threads[ti], lmc_error_name(r));
            assert_int_equal(r, m);
            assert_memory_equal(out, src, m);
        }
        lmc_dctx_free(d);
    }
    for (unsigned li = 0; li < 4; li++) free(frames[li]);
    free(got); free(out); free(src); free(ref);
}

/* LMC_P_REF_HASH_LAST / LMC_D_REF_CHECK_LAST: streams whose reference is
 * hashed between chunk jobs. Compression: the header carries 0, the frame
 * is the usual one once the caller writes the hash (from the last stats)
 * and the header checksum over it. Decompression: the right reference
 * decodes; a wrong one of the same size (given without its hash) ends in
 * LMC_ERR_REF_WRONG, not in the checksum error its chunks run into. */
static void test_ref_hash_last(void** state)
{
    (void)state;
    size_t const n = (size_t)(5u << 20) + 4321;
    uint8_t *src, *ref;
    size_t refn;
    make_case(2, n, REF_EQUAL, 77, &src, &ref, &refn);
    uint8_t* const other = (uint8_t*)tu_xmalloc(refn);
    tu_perturb(other, ref, refn, 2, 10, 78);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 0 };
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const want = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const got = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    for (unsigned t = 1; t <= 2; t++) {
        lmc_cctx* const ca = make_cctx(&c, t);
        assert_int_equal(lmc_cctx_set_ref_hashed(ca, ref, refn, lmc_hash64(ref, refn)), 0);
        size_t const sw = tu_compress_stream(ca, want, cap, src, n, tu_pieces_default, TU_NPIECES);
        assert_false(lmc_is_error(sw));
        lmc_cctx* const cb = make_cctx(&c, t);
        assert_int_equal(lmc_cctx_set_param(cb, LMC_P_REF_HASH_LAST, 1), 0);
        assert_int_equal(lmc_cctx_set_ref(cb, ref, refn), 0);
        size_t const sg = tu_compress_stream(cb, got, cap, src, n, tu_pieces_default, TU_NPIECES);
        assert_int_equal(sg, sw);
        lmc_frame_header h;
        assert_int_equal(lmc_get_frame_header(&h, got, sg), LMC_FRAME_HEADER_SIZE);
        assert_int_equal(h.has_ref, 1);
        assert_int_equal(h.ref_hash, 0);
        lmc_frame_stats st;
        assert_int_equal(lmc_cctx_last_stats(cb, &st), 0);
        assert_int_equal(st.header.ref_hash, lmc_hash64(ref, refn));
        uint64_t const rh = st.header.ref_hash;
        for (int b = 0; b < 8; b++) got[28 + b] = (uint8_t)(rh >> (8 * b));
        uint32_t const hc = (uint32_t)lmc_hash64(got, 36);
        for (int b = 0; b < 4; b++) got[36 + b] = (uint8_t)(hc >> (8 * b));
        assert_memory_equal(got, want, sw);
        /* the next frame of the context knows the hash: a usual header */
        size_t const s2 = tu_compress_stream(cb, got, cap, src, n, tu_pieces_default, TU_NPIECES);
        assert_int_equal(s2, sw);
        assert_memory_equal(got, want, sw);
        lmc_cctx_free(ca); lmc_cctx_free(cb);

        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_REF_CHECK_LAST, 1), 0);
        assert_int_equal(lmc_dctx_set_ref(d, ref, refn), 0);
        assert_int_equal(tu_decompress_stream(d, out, n, want, sw, tu_pieces_default, TU_NPIECES), n);
        assert_memory_equal(out, src, n);
        for (int k = 0; k < 2; k++) {   /* both the pipeline and the gathering paths */
            assert_int_equal(lmc_dctx_set_ref(d, other, refn), 0);
            size_t const r = k ? tu_decompress_stream(d, out, n, want, sw, tu_pieces_default, TU_NPIECES)
                               : tu_decompress_stream(d, out, n, want, sw, (const size_t[]){ (size_t)1 << 30 }, 1);
            assert_int_equal(lmc_get_error(r), LMC_ERR_REF_WRONG);
        }
        /* without the parameter, the wrong reference is refused at the header */
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_REF_CHECK_LAST, 0), 0);
        assert_int_equal(lmc_dctx_set_ref(d, other, refn), 0);
        lmc_dctx_reset(d);
        lmc_inbuf in = { want, sw, 0 };
        lmc_outbuf o = { out, n, 0 };
        assert_int_equal(lmc_get_error(lmc_decompress_stream(d, &o, &in)), LMC_ERR_REF_WRONG);
        assert_int_equal(o.pos, 0);
        lmc_dctx_free(d);
    }
    assert_int_equal(lmc_get_error(lmc_dctx_set_param(NULL, LMC_D_REF_CHECK_LAST, 1)), LMC_ERR_PARAM);
    free(want); free(got); free(out); free(src); free(ref); free(other);
}

/* Streams with separate input and output piece patterns; 0 in a pattern
 * means "everything left". */
static size_t piece(const size_t* pat, size_t np, size_t* k, size_t left)
{
    size_t const p = pat[(*k)++ % np];
    return p == 0 || p > left ? left : p;
}

static size_t compress_shaped(lmc_cctx* c, uint8_t* dst, size_t cap, const uint8_t* src, size_t n,
                              const size_t* ip_pat, size_t nip, const size_t* op_pat, size_t nop)
{
    size_t ip = 0, op = 0, ki = 0, ko = 0;
    for (;;) {
        size_t const il = piece(ip_pat, nip, &ki, n - ip);
        int const end = ip + il == n;
        lmc_inbuf in = { src + ip, il, 0 };
        for (unsigned calls = 0;; calls++) {
            if (calls > 100000) return TU_STALL;
            lmc_outbuf out = { dst + op, piece(op_pat, nop, &ko, cap - op), 0 };
            size_t const r = lmc_compress_stream(c, &out, &in, end);
            op += out.pos;
            if (lmc_is_error(r)) return r;
            if (end && r == 0) return in.pos == in.size ? op : TU_STALL;
            if (!end && in.pos == in.size) break;
        }
        ip += il;
    }
}

static size_t decompress_shaped(lmc_dctx* d, uint8_t* dst, size_t cap, const uint8_t* src, size_t n,
                                const size_t* ip_pat, size_t nip, const size_t* op_pat, size_t nop)
{
    size_t ip = 0, op = 0, ki = 0, ko = 0;
    for (;;) {
        size_t const il = piece(ip_pat, nip, &ki, n - ip);
        lmc_inbuf in = { src + ip, il, 0 };
        for (unsigned calls = 0;; calls++) {
            if (calls > 100000) return TU_STALL;
            lmc_outbuf out = { dst + op, piece(op_pat, nop, &ko, cap - op), 0 };
            size_t const r = lmc_decompress_stream(d, &out, &in);
            op += out.pos;
            if (lmc_is_error(r)) return r;
            if (r == 0) return ip + in.pos == n ? op : TU_STALL;
            if (in.pos == in.size && out.pos < out.size) break;   /* wants input */
        }
        ip += il;
        if (ip >= n) return TU_STALL;
    }
}

/* Large pieces take the in-place paths: chunks coded straight from the
 * caller's input into its output, chunks straddling staged and new input,
 * outputs too small for the next chunk, and the end marker arriving with the
 * last chunk. Every shape writes the one-shot bytes and decodes back. */
static void test_stream_buffer_shapes(void** state)
{
    (void)state;
    size_t const n = (size_t)6 * (1u << 20) + 1234;
    uint8_t *src, *ref; size_t refn;
    make_case(2, n, REF_EQUAL, 4242, &src, &ref, &refn);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 0 };
    lmc_cctx* const c1 = make_cctx(&c, 1);
    assert_int_equal(lmc_cctx_set_ref(c1, ref, refn), 0);
    uint8_t* f1;
    size_t const s1 = tu_compress(c1, &f1, src, n);
    assert_false(lmc_is_error(s1));
    /* an unpledged stream does not know the size: its chunks are the fixed
     * ones (LMC_P_CHUNK_BALANCE 0), its header has no size */
    cfg const cfix = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 1 };
    uint8_t* ffix;
    size_t const sfix = fresh_frame(&cfix, 1, src, n, ref, refn, &ffix);
    /* one thread codes a chunk in place in dst while a job buffer's worth of
     * room is left there, else in its buffer and copies it: the same bytes
     * with a roomy, an exact and a short destination */
    {
        uint8_t* const fe = (uint8_t*)tu_xmalloc(s1 + 1);
        size_t const short_caps[] = { s1 - 1, s1 - s1 / 8, s1 / 2 };
        for (size_t k = 0; k < 3; k++) {
            size_t const want = short_caps[k];
            size_t const r = lmc_compress(c1, fe, want, src, n);
            assert_true(lmc_is_error(r));
            assert_int_equal(lmc_get_error(r), LMC_ERR_DST_TOO_SMALL);
        }
        memset(fe, 0, s1 + 1);
        assert_int_equal(lmc_compress(c1, fe, s1, src, n), s1);
        assert_memory_equal(fe, f1, s1);
        memset(fe, 0, s1 + 1);
        assert_int_equal(lmc_compress(c1, fe, s1 + 1, src, n), s1);
        assert_memory_equal(fe, f1, s1);
        free(fe);
    }
    lmc_cctx_free(c1);

    static const size_t whole[] = { 0 };
    static const size_t big_odd[] = { (1u << 20) + 5, 3u << 20 };
    static const size_t mixed[] = { 3u << 20, 1, 65536, 0 };
    static const size_t out_small[] = { 100000, 7, 3u << 20 };
    static const size_t out_2m[] = { 2u << 20 };
    static const size_t out_tiny[] = { 1, 1u << 20, 777 };
    struct { const size_t* ip; size_t nip; const size_t* op; size_t nop; } const shapes[] = {
        { whole, 1, whole, 1 }, { whole, 1, out_small, 3 }, { big_odd, 2, out_2m, 1 },
        { mixed, 4, out_tiny, 3 }, { big_odd, 2, whole, 1 }, { whole, 1, out_2m, 1 },
    };
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const fs = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const back = (uint8_t*)tu_xmalloc(n);
    for (unsigned t = 1; t <= 3; t++) {
        for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
            lmc_cctx* const cc = make_cctx(&c, t);
            assert_int_equal(lmc_cctx_set_ref(cc, ref, refn), 0);
            if (k % 2) assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CONTENT_SIZE, (long long)n), 0);
            size_t const ss = compress_shaped(cc, fs, cap, src, n, shapes[k].ip, shapes[k].nip, shapes[k].op, shapes[k].nop);
            if (lmc_is_error(ss)) fail_msg("threads %u, shape %zu: compress: %s", t, k, lmc_error_name(ss));
            assert_int_not_equal(ss, TU_STALL);
            if (k % 2) {
                assert_int_equal(ss, s1);
                assert_memory_equal(fs, f1, s1);
            } else {
                /* unpledged: the fixed chunks, in a header without the size */
                assert_int_equal(ss, sfix);
                assert_memory_equal(fs + LMC_FRAME_HEADER_SIZE, ffix + LMC_FRAME_HEADER_SIZE, sfix - LMC_FRAME_HEADER_SIZE);
            }
            lmc_cctx_free(cc);

            lmc_dctx* const d = lmc_dctx_create();
            assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
            assert_int_equal(lmc_dctx_set_ref(d, ref, refn), 0);
            memset(back, 0, n);
            size_t const r = decompress_shaped(d, back, n, f1, s1, shapes[k].ip, shapes[k].nip, shapes[k].op, shapes[k].nop);
            if (lmc_is_error(r)) fail_msg("threads %u, shape %zu: decompress: %s", t, k, lmc_error_name(r));
            assert_int_equal(r, n);
            assert_memory_equal(back, src, n);

            /* a damaged chunk in the middle fails in the in-place path too */
            f1[s1 / 2] ^= 0x10;
            size_t const e = decompress_shaped(d, back, n, f1, s1, shapes[k].ip, shapes[k].nip, shapes[k].op, shapes[k].nop);
            f1[s1 / 2] ^= 0x10;
            assert_true(lmc_is_error(e));
            assert_int_equal(lmc_get_error(e), LMC_ERR_CHECKSUM);
            lmc_dctx_free(d);
        }
    }
    free(back); free(fs); free(f1); free(ffix); free(src); free(ref);
}

/* A frame read in windows of a few chunks (as the lmc command reads a pipe):
 * the chunk across a window's end is gathered, and once it is whole it is
 * decoded at once when the rest of the window holds the next chunk whole;
 * those then decode in place. Before, every chunk after a straddling one
 * was copied into a job slot until all slots were full (a chunk's payload
 * and content each), which held `lmc -d -T24` from a pipe over its memory
 * bound. Observable: the calls over the window that completes the
 * straddling chunk also produce the whole chunks after it. A bad header
 * after the straddling chunk is still reported. */
static void test_stream_decode_windows(void** state)
{
    (void)state;
    size_t const n = (size_t)6 << 20;
    uint8_t *src, *ref; size_t refn;
    make_case(2, n, REF_NONE, 777, &src, &ref, &refn);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 1 };   /* fixed 1 MiB chunks */
    lmc_cctx* const cc = make_cctx(&c, 1);
    uint8_t* f;
    size_t const s = tu_compress(cc, &f, src, n);
    assert_false(lmc_is_error(s));
    lmc_cctx_free(cc);
    /* chunk starts: header, then 16-byte chunk headers with the payload size at +4 */
    size_t at[8], nch = 0, pos = LMC_FRAME_HEADER_SIZE;
    while (nch < 8 && lmc_rd32(f + pos) != 0) { at[nch++] = pos; pos += 16 + lmc_rd32(f + pos + 4); }
    assert_int_equal(nch, 6);
    at[nch] = pos;
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    for (unsigned t = 2; t <= 3; t++) {
        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
        /* window 1 ends in the middle of chunk 2 (0-based), window 2 in
         * the middle of chunk 4; window 3 is the rest */
        size_t const cut[3] = { (at[2] + at[3]) / 2, (at[4] + at[5]) / 2, s };
        size_t ip = 0, op = 0, r = 1, after2 = 0;
        for (unsigned w = 0; w < 3; w++) {
            lmc_inbuf in = { f + ip, cut[w] - ip, 0 };
            unsigned guard = 0;
            for (;;) {
                lmc_outbuf o = { out + op, n - op, 0 };
                r = lmc_decompress_stream(d, &o, &in);
                if (lmc_is_error(r)) fail_msg("threads %u, window %u: %s", t, w, lmc_error_name(r));
                op += o.pos;
                if (r == 0 || (in.pos == in.size && o.pos == 0)) break;
                assert_true(++guard < 100);
            }
            ip = cut[w];
            if (w == 1) after2 = op;
        }
        assert_int_equal(r, 0);
        assert_int_equal(op, n);
        assert_memory_equal(out, src, n);
        /* chunks 0-3 are out after window 2: 2 and 3 were not held back */
        assert_true(after2 >= (size_t)4 << 20);

        /* chunk 3's header says content size 0: CORRUPT, found after chunk 2
         * (across the first window's end) is gathered */
        uint8_t* const bad = (uint8_t*)tu_xmalloc(s);
        memcpy(bad, f, s);
        memset(bad + at[3], 0, 4);
        lmc_dctx_reset(d);
        ip = 0; op = 0;
        size_t e = 0;
        for (unsigned w = 0; w < 3 && !lmc_is_error(e); w++) {
            lmc_inbuf in = { bad + ip, cut[w] - ip, 0 };
            unsigned guard = 0;
            for (;;) {
                lmc_outbuf o = { out + op, n - op, 0 };
                e = lmc_decompress_stream(d, &o, &in);
                op += o.pos;
                if (lmc_is_error(e) || e == 0 || (in.pos == in.size && o.pos == 0)) break;
                assert_true(++guard < 100);
            }
            ip = cut[w];
        }
        assert_true(lmc_is_error(e));
        assert_int_equal(lmc_get_error(e), LMC_ERR_CORRUPT);
        free(bad);
        lmc_dctx_free(d);
    }
    free(out); free(f); free(src); free(ref);
}

/* The input worth feeding a stream per call: a chunk per job slot (threads
 * + 2), but above 4 threads no more than one call codes (a chunk per thread
 * up to 10 threads, then 8 + threads / 4 chunks, 8 to 16 of them): the
 * caller's buffer counts against the memory bound, and `lmc -T24` from a
 * pipe read 26 chunks a call and held 131 MiB against 64 + 24 x 2. */
static void test_cstream_in_size(void** state)
{
    (void)state;
    static const unsigned threads[] = { 1, 2, 4, 5, 8, 10, 12, 16, 24, 32, 64 };
    static const unsigned chunks[] =  { 1, 4, 6, 7, 8, 10, 11, 12, 14, 16, 16 };
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 1 };
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        lmc_cctx* const cc = make_cctx(&c, threads[i]);
        size_t const got = lmc_cstream_in_size(cc);
        if (got != (size_t)chunks[i] * ((1u << 20) + 8))
            fail_msg("%u threads: %zu bytes, want %u chunks", threads[i], got, chunks[i]);
        lmc_cctx_free(cc);
    }
}

/* A call codes at most one run's worth of input, whatever the output room:
 * a run that stops for want of room used to be followed by more runs in
 * the same call while room was left, so a caller whose output buffer took
 * a run's output but not its chunks' bounds got several runs a call (and
 * kept all their input mapped: -T8 on 2 GB of bf16 held 69 MiB, not 43).
 * 8 threads: runs of 8 chunks; the output buffer is the bound of
 * lmc_cstream_in_size, less than 8 chunks' bounds. Every call but the last
 * takes at most 8 chunks and a straddling one; the bytes are the one-shot
 * frame's. */
static void test_stream_call_bound(void** state)
{
    (void)state;
    size_t const n = (size_t)40 << 20, chunk = (size_t)1 << 20;
    uint8_t* const src = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(src, n, 2, 99);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 1 };
    lmc_cctx* const cc = make_cctx(&c, 8);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CONTENT_SIZE, (long long)n), 0);
    size_t const outcap = lmc_compress_bound(lmc_cstream_in_size(cc));
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    lmc_inbuf in = { src, n, 0 };
    size_t fs = 0, calls = 0, r;
    do {
        lmc_outbuf out = { f + fs, LMC_MIN(outcap, cap - fs), 0 };
        size_t const before = in.pos;
        r = lmc_compress_stream(cc, &out, &in, 1);
        if (lmc_is_error(r)) fail_msg("call %zu: %s", calls, lmc_error_name(r));
        fs += out.pos;
        if (in.pos - before > 9 * chunk + 64) fail_msg("call %zu took %zu bytes of input", calls, in.pos - before);
        assert_true(++calls < 1000);
    } while (r != 0);
    assert_true(calls >= n / (9 * chunk));
    uint8_t* g;
    size_t const gs = fresh_frame(&c, 1, src, n, NULL, 0, &g);
    assert_int_equal(fs, gs);
    assert_memory_equal(f, g, gs);
    free(g); free(f); free(src);
    lmc_cctx_free(cc);
}

/* Input fed in pieces much smaller than a call's run (a tensor at a time)
 * is gathered above 2 threads, so that a call still codes a run of several
 * chunks: at 8 threads, pieces of 1.5 MiB; random bytes, so that each
 * chunk's output is about its size. Before 2026-12-04 a call coded the
 * chunk staged from the piece before and the piece's one whole chunk: at
 * most 2 MiB of output a call. At 2 threads nothing is gathered: no call
 * takes in a piece without coding from it. The frames are the same. */
static void test_stream_gathers_small_pieces(void** state)
{
    (void)state;
    size_t const n = (size_t)24 << 20, piece = ((size_t)3 << 19) + 5;
    uint8_t* const src = (uint8_t*)tu_xmalloc(n);
    tu_fill_random(src, n, 31);
    cfg const c = { LMC_FORMAT_RAW, LMC_DTYPE_BF16, 20, 0, 1 };
    uint8_t* g;
    size_t const gs = fresh_frame(&c, 1, src, n, NULL, 0, &g);
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    for (unsigned threads = 2; threads <= 8; threads += 6) {
        lmc_cctx* const cc = make_cctx(&c, threads);
        assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CONTENT_SIZE, (long long)n), 0);
        size_t const outcap = lmc_compress_bound(lmc_cstream_in_size(cc));
        size_t fs = 0, calls = 0, most = 0, idle = 0, r = 1;
        for (size_t at = 0; at < n || r != 0;) {
            size_t const len = LMC_MIN(piece, n - at);
            int const end = at + len == n;
            lmc_inbuf in = { src + at, len, 0 };
            do {
                lmc_outbuf out = { f + fs, LMC_MIN(outcap, cap - fs), 0 };
                r = lmc_compress_stream(cc, &out, &in, end);
                if (lmc_is_error(r)) fail_msg("call %zu: %s", calls, lmc_error_name(r));
                fs += out.pos;
                most = LMC_MAX(most, out.pos);
                if (in.pos == in.size && out.pos == 0 && !end) idle++;
                assert_true(++calls < 10000);
            } while (end ? r != 0 : in.pos < in.size);
            at += len;
        }
        assert_int_equal(fs, gs);
        assert_memory_equal(f, g, gs);
        if (threads == 8) {
            if (most < ((size_t)7 << 19)) fail_msg("8 threads: at most %zu bytes of output a call", most);
            assert_true(idle > 0);
        } else {
            assert_int_equal(idle, 0);
        }
        lmc_cctx_free(cc);
    }
    free(g); free(f); free(src);
}

/* Empty content with NULL buffers of size 0, as a caller may pass them. */
static void test_empty_null_buffers(void** state)
{
    (void)state;
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    uint8_t f[256];
    lmc_inbuf in = { NULL, 0, 0 };
    lmc_outbuf out = { f, sizeof(f), 0 };
    size_t r = lmc_compress_stream(c, &out, &in, 1);
    assert_int_equal(r, 0);
    size_t const s = out.pos;
    assert_true(s > LMC_FRAME_HEADER_SIZE);
    size_t const s1 = lmc_compress(c, f, sizeof(f), NULL, 0);
    assert_false(lmc_is_error(s1));
    assert_int_equal(lmc_decompress(d, NULL, 0, f, s1), 0);
    lmc_inbuf din = { f, s1, 0 };
    lmc_outbuf dout = { NULL, 0, 0 };
    r = lmc_decompress_stream(d, &dout, &din);
    assert_int_equal(r, 0);
    assert_int_equal(din.pos, s1);
    lmc_frame_stats st;
    assert_int_equal(lmc_frame_stats_get(&st, f, s1), s1);
    assert_int_equal(st.chunks, 0);
    assert_int_equal(st.content_size, 0);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_sizes),
        cmocka_unit_test(test_multi_chunk),
        cmocka_unit_test(test_balanced_chunks),
        cmocka_unit_test(test_context_chunk_sizes),
        cmocka_unit_test(test_multi_chunk_ref_lengths),
        cmocka_unit_test(test_data_kinds),
        cmocka_unit_test(test_context_reuse),
        cmocka_unit_test(test_real_checkpoints),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_stream_decode_threads),
        cmocka_unit_test(test_work_memory_layouts),
        cmocka_unit_test(test_work_memory_zeroed),
        cmocka_unit_test(test_ref_hash_last),
        cmocka_unit_test(test_stream_buffer_shapes),
        cmocka_unit_test(test_stream_decode_windows),
        cmocka_unit_test(test_cstream_in_size),
        cmocka_unit_test(test_stream_call_bound),
        cmocka_unit_test(test_stream_gathers_small_pieces),
        cmocka_unit_test(test_empty_null_buffers),
    };
    return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
