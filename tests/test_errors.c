/* test_errors.c - every way a caller or a frame can be wrong: references,
 * truncation, bit flips, trailing bytes, small buffers, bad parameters,
 * error names, hostile inputs (fast errors, bounded allocation). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <malloc.h>

#include "testutil.h"

#define ERR(e) ((size_t)-(ptrdiff_t)(e))

static void assert_err(size_t r, lmc_error e)
{
    if (lmc_get_error(r) != e)
        fail_msg("expected error %d (%s), got %d (%s)", (int)e, lmc_error_id(e), (int)lmc_get_error(r),
                 lmc_is_error(r) ? lmc_error_name(r) : "success");
}

/* A delta frame of n bytes against ref. */
static size_t make_delta(uint8_t** frame, uint8_t** src, uint8_t** ref, size_t n)
{
    *src = (uint8_t*)tu_xmalloc(n);
    *ref = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(*ref, n, 2, 11);
    tu_perturb(*src, *ref, n, 2, 8, 12);
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    assert_int_equal(lmc_cctx_set_ref(c, *ref, n), 0);
    size_t const s = tu_compress(c, frame, *src, n);
    assert_false(lmc_is_error(s));
    lmc_cctx_free(c);
    return s;
}

/* Streaming decode of the whole frame at once: the error, and no output. */
static void stream_ref_error(lmc_dctx* d, const uint8_t* f, size_t s, size_t n, lmc_error e)
{
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    lmc_inbuf in = { f, s, 0 };
    lmc_outbuf o = { out, n, 0 };
    size_t const r = lmc_decompress_stream(d, &o, &in);
    assert_err(r, e);
    assert_int_equal(o.pos, 0);
    /* byte by byte too */
    lmc_dctx_reset(d);
    size_t r2 = 0;
    o.pos = 0;
    for (size_t i = 0; i < s; i++) {
        lmc_inbuf one = { f + i, 1, 0 };
        r2 = lmc_decompress_stream(d, &o, &one);
        if (lmc_is_error(r2)) break;
    }
    assert_err(r2, e);
    assert_int_equal(o.pos, 0);
    free(out);
}

static void test_reference_errors(void** state)
{
    (void)state;
    size_t const n = 300001;
    uint8_t *f, *src, *ref;
    size_t const s = make_delta(&f, &src, &ref, n);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n + 10);
    lmc_dctx* const d = lmc_dctx_create();

    /* none */
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_REQUIRED);
    stream_ref_error(d, f, s, n, LMC_ERR_REF_REQUIRED);
    /* same size, one byte different */
    uint8_t* const bad = (uint8_t*)tu_xmalloc(n + 10);
    memcpy(bad, ref, n);
    bad[n / 2] ^= 1;
    assert_int_equal(lmc_dctx_set_ref(d, bad, n), 0);
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_WRONG);
    stream_ref_error(d, f, s, n, LMC_ERR_REF_WRONG);
    /* other sizes */
    memcpy(bad, ref, n);
    assert_int_equal(lmc_dctx_set_ref(d, bad, n - 1), 0);
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_WRONG);
    stream_ref_error(d, f, s, n, LMC_ERR_REF_WRONG);
    assert_int_equal(lmc_dctx_set_ref(d, bad, n + 10), 0);
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_WRONG);
    stream_ref_error(d, f, s, n, LMC_ERR_REF_WRONG);
    /* the right bytes with a wrong given hash */
    assert_int_equal(lmc_dctx_set_ref_hashed(d, ref, n, lmc_hash64(ref, n) ^ 1), 0);
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_WRONG);
    stream_ref_error(d, f, s, n, LMC_ERR_REF_WRONG);
    /* cleared reference */
    assert_int_equal(lmc_dctx_set_ref(d, NULL, 0), 0);
    assert_err(lmc_decompress(d, out, n, f, s), LMC_ERR_REF_REQUIRED);
    /* and the right one works, one-shot and streaming, also with its hash */
    assert_int_equal(lmc_dctx_set_ref_hashed(d, ref, n, lmc_hash64(ref, n)), 0);
    assert_int_equal(lmc_decompress(d, out, n, f, s), n);
    assert_memory_equal(out, src, n);
    assert_int_equal(lmc_dctx_set_ref(d, ref, n), 0);
    assert_int_equal(tu_decompress_stream(d, out, n, f, s, tu_pieces_default, TU_NPIECES), n);
    assert_memory_equal(out, src, n);
    /* a reference on a frame that is not a delta is ignored */
    lmc_cctx* const c = lmc_cctx_create();
    uint8_t* f2;
    size_t const s2 = tu_compress(c, &f2, src, n);
    assert_int_equal(lmc_decompress(d, out, n, f2, s2), n);
    lmc_cctx_free(c);
    free(f2); free(bad); free(out); free(f); free(src); free(ref);
    lmc_dctx_free(d);
}

/*-*** a 3-chunk frame and its layout ***-*/
typedef struct { size_t off[4]; size_t payload[3]; size_t nchunks; size_t end_marker; size_t footer; } layout;

static void frame_layout(const uint8_t* f, size_t s, layout* L)
{
    size_t pos = LMC_FRAME_HEADER_SIZE;
    L->nchunks = 0;
    for (;;) {
        uint32_t const content = (uint32_t)f[pos] | (uint32_t)f[pos + 1] << 8 | (uint32_t)f[pos + 2] << 16 | (uint32_t)f[pos + 3] << 24;
        if (!content) break;
        uint32_t const ps = (uint32_t)f[pos + 4] | (uint32_t)f[pos + 5] << 8 | (uint32_t)f[pos + 6] << 16 | (uint32_t)f[pos + 7] << 24;
        assert_true(L->nchunks < 3);
        L->off[L->nchunks] = pos;
        L->payload[L->nchunks] = ps;
        L->nchunks++;
        pos += 16 + ps;
    }
    L->end_marker = pos;
    L->footer = pos + 4 + 12 * L->nchunks;
    assert_int_equal(L->footer + 32, s);
}

/* 2.2 MB at chunk_log 20: 3 chunks, each with CONST, RAW, HUF and RLE_HUF
 * blocks, small enough to decode thousands of times. */
static size_t make_three_chunks(uint8_t** frame, uint8_t** src, size_t* n, int delta, uint8_t** refp)
{
    size_t const N = (size_t)(1u << 21) + 900000 + 1;
    uint8_t* const a = (uint8_t*)tu_xmalloc(N);
    memset(a, 0, N);
    for (size_t c = 0; c < 3; c++) {
        size_t const base = c << 20;
        tu_fill_random(a + base + 100000, 200000, 1 + c);
        tu_fill_gauss(a + base + 300000, 200000, 2, 2 + c);
        tu_fill_sparse(a + base + 500000, 200000, 3 + c);
        memset(a + base + 750000, 0x33, 150000);
    }
    uint8_t* ref = NULL;
    lmc_cctx* const cc = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CHUNK_LOG, 20), 0);
    assert_int_equal(lmc_cctx_set_param(cc, LMC_P_CHUNK_BALANCE, 0), 0);   /* 1 MiB chunks, as laid out */
    if (delta) {
        ref = (uint8_t*)tu_xmalloc(N);
        tu_perturb(ref, a, N, 2, 50, 9);
        assert_int_equal(lmc_cctx_set_ref(cc, ref, N), 0);
    }
    size_t const s = tu_compress(cc, frame, a, N);
    assert_false(lmc_is_error(s));
    lmc_frame_stats st;
    assert_int_equal(lmc_frame_stats_get(&st, *frame, s), s);
    assert_int_equal(st.chunks, 3);
    /* the flips must reach every kind of block: RAW, CONST, RLE_HUF and an entropy-coded one */
    if (!delta && (!st.blocks[LMC_CODER_RAW] || !st.blocks[LMC_CODER_CONST] || !st.blocks[LMC_CODER_RLE_HUF]
                   || !(st.blocks[LMC_CODER_HUF] + st.blocks[LMC_CODER_ANS])))
        fail_msg("coders unused (%d %d %d %d %d)", (int)st.blocks[0], (int)st.blocks[1], (int)st.blocks[2], (int)st.blocks[3], (int)st.blocks[4]);
    lmc_cctx_free(cc);
    *src = a; *n = N;
    if (refp) *refp = ref; else free(ref);
    return s;
}

/* Not success: one-shot, streaming (if asked) and the frame walk. */
static void expect_failure(lmc_dctx* d, const uint8_t* f, size_t s, uint8_t* out, size_t n, int stream, int walk_must_fail,
                           const char* what, size_t where)
{
    size_t const r = lmc_decompress(d, out, n, f, s);
    if (!lmc_is_error(r)) fail_msg("%s at %zu: lmc_decompress succeeded", what, where);
    if (stream) {
        size_t const r2 = tu_decompress_stream(d, out, n, f, s, tu_pieces_default, TU_NPIECES);
        if (r2 == n) fail_msg("%s at %zu: lmc_decompress_stream succeeded", what, where);
        lmc_dctx_reset(d);
    }
    if (walk_must_fail) {
        lmc_frame_stats st;
        if (!lmc_is_error(lmc_frame_stats_get(&st, f, s))) fail_msg("%s at %zu: lmc_frame_stats_get succeeded", what, where);
    }
}

static void test_truncation(void** state)
{
    (void)state;
    uint8_t *f, *src, *ref; size_t n;
    size_t const s = make_three_chunks(&f, &src, &n, 1, &ref);
    layout L;
    frame_layout(f, s, &L);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    lmc_dctx* const d = lmc_dctx_create();
    assert_int_equal(lmc_dctx_set_ref(d, ref, n), 0);
    assert_int_equal(lmc_decompress(d, out, n, f, s), n);
    size_t cuts[64], nc = 0;
    for (size_t k = 0; k < L.nchunks; k++) {
        size_t const o = L.off[k];
        size_t const at[] = { o - 1, o, o + 1, o + 4, o + 15, o + 16, o + 17, o + 16 + L.payload[k] - 1 };
        for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) cuts[nc++] = at[i];
    }
    size_t const tail[] = { 0, 1, 3, 4, 39, 40, L.end_marker, L.end_marker + 3, L.end_marker + 4, L.footer - 1, L.footer,
                            L.footer + 8, L.footer + 31, s - 1 };
    for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++) cuts[nc++] = tail[i];
    for (size_t i = 0; i < nc; i++) expect_failure(d, f, cuts[i], out, n, 1, 1, "truncated", cuts[i]);
    tu_rng r; tu_seed(&r, 5);
    for (int i = 0; i < 200; i++) {
        size_t const cut = tu_below(&r, s);
        expect_failure(d, f, cut, out, n, i % 8 == 0, 1, "truncated", cut);
    }
    free(out); free(f); free(src); free(ref);
    lmc_dctx_free(d);
}

static void test_bit_flips(void** state)
{
    (void)state;
    uint8_t *f, *src; size_t n;
    size_t const s = make_three_chunks(&f, &src, &n, 0, NULL);
    layout L;
    frame_layout(f, s, &L);
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    lmc_dctx* const d = lmc_dctx_create();
    size_t* const bits = (size_t*)tu_xmalloc(4000 * sizeof(size_t));
    size_t nb = 0;
    for (size_t b = 0; b < 40 * 8; b++) bits[nb++] = b;                                       /* frame header */
    for (size_t k = 0; k < L.nchunks; k++) {
        for (size_t b = 0; b < 16 * 8; b++) bits[nb++] = L.off[k] * 8 + b;                    /* chunk header */
        for (size_t b = 0; b < 40 * 8; b += 2) bits[nb++] = (L.off[k] + 16) * 8 + b;          /* piece header + table */
    }
    for (size_t b = 0; b < (s - L.end_marker) * 8; b += 2) bits[nb++] = L.end_marker * 8 + b;  /* marker, seek, footer */
    tu_rng r; tu_seed(&r, 6);
    while (nb < 2400) bits[nb++] = tu_below(&r, s * 8);                                         /* anywhere */
    uint8_t* const g = (uint8_t*)tu_xmalloc(s);
    memcpy(g, f, s);
    for (size_t i = 0; i < nb; i++) {
        size_t const byte = bits[i] / 8;
        uint8_t const mask = (uint8_t)(1u << (bits[i] % 8));
        g[byte] ^= mask;
        /* the walk does not check content checksums: only decoders must fail everywhere */
        expect_failure(d, g, s, out, n, i % 16 == 0, 0, "bit flip", bits[i]);
        g[byte] ^= mask;
    }
    assert_true(nb >= 2000);
    assert_int_equal(lmc_decompress(d, out, n, g, s), n);
    free(g); free(bits); free(out); free(f); free(src);
    lmc_dctx_free(d);
}

static void test_trailing_and_dst(void** state)
{
    (void)state;
    size_t const n = 100003;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(a, n, 4, 3);
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    size_t const cap = lmc_compress_bound(n) + 16;
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    size_t const s = lmc_compress(c, f, cap, a, n);
    assert_false(lmc_is_error(s));
    uint8_t* const out = (uint8_t*)tu_xmalloc(n + 1);
    /* trailing garbage: one-shot, streaming, walk */
    for (size_t extra = 1; extra <= 16; extra *= 4) {
        memset(f + s, 0x89, extra);
        assert_err(lmc_decompress(d, out, n + 1, f, s + extra), LMC_ERR_TRAILING);
        lmc_frame_stats st;
        assert_err(lmc_frame_stats_get(&st, f, s + extra), LMC_ERR_TRAILING);
        lmc_inbuf in = { f, s + extra, 0 };
        lmc_outbuf o = { out, n + 1, 0 };
        size_t r;
        do { r = lmc_decompress_stream(d, &o, &in); } while (!lmc_is_error(r) && r != 0 && in.pos < in.size);
        assert_err(r, LMC_ERR_TRAILING);
        lmc_dctx_reset(d);
    }
    /* dst too small */
    assert_err(lmc_decompress(d, out, n - 1, f, s), LMC_ERR_DST_TOO_SMALL);
    assert_err(lmc_decompress(d, out, 0, f, s), LMC_ERR_DST_TOO_SMALL);
    assert_err(lmc_compress(c, f, 10, a, n), LMC_ERR_DST_TOO_SMALL);
    assert_err(lmc_compress(c, f, s - 1, a, n), LMC_ERR_DST_TOO_SMALL);
    assert_err(lmc_compress(c, f, 50, a, n), LMC_ERR_DST_TOO_SMALL);
    assert_int_equal(lmc_compress(c, f, s, a, n), s);
    /* frames without a content size (unpledged streaming) and a small dst */
    size_t const su = tu_compress_stream(c, f, cap, a, n, tu_pieces_default, TU_NPIECES);
    assert_false(lmc_is_error(su));
    assert_err(lmc_decompress(d, out, n - 1, f, su), LMC_ERR_DST_TOO_SMALL);
    assert_int_equal(lmc_decompress(d, out, n, f, su), n);
    /* pledged size that is not kept */
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, (long long)n + 1), 0);
    assert_err(tu_compress_stream(c, f, cap, a, n, tu_pieces_default, TU_NPIECES), LMC_ERR_SIZE_MISMATCH);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, (long long)n - 1), 0);
    size_t const r = tu_compress_stream(c, f, cap, a, n, tu_pieces_default, TU_NPIECES);
    assert_true(lmc_is_error(r));
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, -1), 0);
    assert_false(lmc_is_error(tu_compress_stream(c, f, cap, a, n, tu_pieces_default, TU_NPIECES)));
    /* two frames back to back are trailing bytes for a one-frame API */
    size_t const s1 = lmc_compress(c, f, cap / 2, a, 1000);
    assert_false(lmc_is_error(s1));
    memcpy(f + s1, f, s1);
    assert_err(lmc_decompress(d, out, n, f, 2 * s1), LMC_ERR_TRAILING);
    free(out); free(f); free(a);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
}

/* With several threads a chunk's job copies its output to its place in dst
 * when the chunk before is committed: a dst that ends anywhere in the frame
 * is still refused, and one of the frame's exact size gets the same bytes
 * as one thread writes. */
static void test_dst_too_small_threads(void** state)
{
    (void)state;
    size_t const n = (size_t)5 << 20 | 12345;
    uint8_t* const a = (uint8_t*)tu_xmalloc(n);
    tu_fill_gauss(a, n, 4, 5);
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const f1 = (uint8_t*)tu_xmalloc(cap);
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_F32), 0);
    size_t const s = lmc_compress(c, f1, cap, a, n);
    assert_false(lmc_is_error(s));
    for (int t = 2; t <= 3; t++) {
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, t), 0);
        for (int k = 1; k <= 8; k++) {
            size_t const short_cap = k == 8 ? s - 1 : s * (size_t)k / 8;
            assert_err(lmc_compress(c, f, short_cap, a, n), LMC_ERR_DST_TOO_SMALL);
        }
        memset(f, 0, cap);
        assert_int_equal(lmc_compress(c, f, s, a, n), s);
        assert_memory_equal(f, f1, s);
    }
    lmc_cctx_free(c);
    free(a); free(f1); free(f);
}

static void test_params(void** state)
{
    (void)state;
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    struct { lmc_cparam p; long long v; } const bad[] = {
        { LMC_P_FORMAT, -1 }, { LMC_P_FORMAT, 5 }, { LMC_P_FORMAT, 100 }, { LMC_P_DTYPE, -1 }, { LMC_P_DTYPE, LMC_DTYPE_COUNT },
        { LMC_P_THREADS, 0 }, { LMC_P_THREADS, -3 }, { LMC_P_THREADS, LMC_THREADS_MAX + 1 }, { LMC_P_THREADS, 100000 },
        { LMC_P_CHUNK_LOG, 19 }, { LMC_P_CHUNK_LOG, 27 },
        { LMC_P_LAYOUT, -1 }, { LMC_P_LAYOUT, 3 }, { LMC_P_CONTENT_SIZE, -2 }, { LMC_P_CODERS, 256 }, { (lmc_cparam)0, 1 },
        { (lmc_cparam)99, 1 },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) assert_err(lmc_cctx_set_param(c, bad[i].p, bad[i].v), LMC_ERR_PARAM);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_LOG, 26), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_LOG, 21), 0);
    assert_err(lmc_cctx_set_param(NULL, LMC_P_THREADS, 1), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_param(d, LMC_D_THREADS, 0), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_param(d, LMC_D_THREADS, LMC_THREADS_MAX + 1), LMC_ERR_PARAM);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_THREADS, LMC_THREADS_MAX), 0);
    assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, LMC_THREADS_MAX), 0);
    assert_err(lmc_dctx_set_param(d, LMC_D_MAX_CHUNK_LOG, 19), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_param(d, LMC_D_MAX_CHUNK_LOG, 27), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_param(d, (lmc_dparam)7, 1), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_param(NULL, LMC_D_THREADS, 1), LMC_ERR_PARAM);
    uint8_t buf[64];
    assert_err(lmc_cctx_set_ref(c, NULL, 5), LMC_ERR_PARAM);
    assert_err(lmc_dctx_set_ref(d, NULL, 5), LMC_ERR_PARAM);
    assert_err(lmc_cctx_set_ref(NULL, buf, 5), LMC_ERR_PARAM);
    assert_err(lmc_compress(NULL, buf, 64, buf, 1), LMC_ERR_PARAM);
    assert_err(lmc_compress(c, NULL, 64, buf, 1), LMC_ERR_PARAM);
    assert_err(lmc_compress(c, buf, 64, NULL, 1), LMC_ERR_PARAM);
    assert_err(lmc_decompress(NULL, buf, 64, buf, 1), LMC_ERR_PARAM);
    assert_err(lmc_decompress(d, buf, 64, NULL, 1), LMC_ERR_PARAM);
    assert_err(lmc_decompress(d, NULL, 64, buf, 1), LMC_ERR_PARAM);
    lmc_inbuf in = { buf, 10, 11 };
    lmc_outbuf out = { buf, 10, 0 };
    assert_err(lmc_compress_stream(c, &out, &in, 0), LMC_ERR_PARAM);
    assert_err(lmc_decompress_stream(d, &out, &in), LMC_ERR_PARAM);
    in.pos = 0; out.pos = 11;
    assert_err(lmc_compress_stream(c, &out, &in, 0), LMC_ERR_PARAM);
    assert_err(lmc_decompress_stream(d, &out, &in), LMC_ERR_PARAM);
    assert_err(lmc_compress_stream(NULL, &out, &in, 0), LMC_ERR_PARAM);
    assert_err(lmc_compress_stream(c, NULL, &in, 0), LMC_ERR_PARAM);
    assert_err(lmc_decompress_stream(d, &out, NULL), LMC_ERR_PARAM);
    lmc_frame_stats st;
    assert_err(lmc_cctx_last_stats(c, &st), LMC_ERR_STAGE);
    assert_err(lmc_cctx_last_stats(c, NULL), LMC_ERR_PARAM);
    assert_err(lmc_frame_stats_get(NULL, buf, 10), LMC_ERR_PARAM);
    lmc_frame_header h;
    assert_err(lmc_get_frame_header(NULL, buf, 10), LMC_ERR_PARAM);
    assert_err(lmc_get_frame_header(&h, NULL, 10), LMC_ERR_PARAM);
    /* changing the reference in the middle of a streamed frame */
    uint8_t src[100] = { 0 };
    lmc_inbuf sin = { src, 100, 0 };
    lmc_outbuf sout = { buf, 64, 0 };
    assert_false(lmc_is_error(lmc_compress_stream(c, &sout, &sin, 0)));
    assert_err(lmc_cctx_set_ref(c, src, 100), LMC_ERR_STAGE);
    lmc_cctx_reset(c);
    assert_int_equal(lmc_cctx_set_ref(c, src, 100), 0);
    /* free(NULL) is fine */
    lmc_cctx_free(NULL);
    lmc_dctx_free(NULL);
    lmc_cctx_reset(NULL);
    lmc_dctx_reset(NULL);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
}

static void test_error_codes(void** state)
{
    (void)state;
    for (unsigned k = 0; k <= 130; k++) {
        assert_non_null(lmc_error_name(ERR(k)));
        assert_non_null(lmc_error_id((lmc_error)k));
    }
    assert_non_null(lmc_error_name(0));
    assert_non_null(lmc_error_name(12345));
    const lmc_error all[] = { LMC_ERR_GENERIC, LMC_ERR_PARAM, LMC_ERR_MEMORY, LMC_ERR_DST_TOO_SMALL, LMC_ERR_STAGE,
                              LMC_ERR_THREAD, LMC_ERR_NOT_LMC, LMC_ERR_VERSION, LMC_ERR_HEADER, LMC_ERR_TRUNCATED,
                              LMC_ERR_CORRUPT, LMC_ERR_CHECKSUM, LMC_ERR_TRAILING, LMC_ERR_LIMIT, LMC_ERR_REF_REQUIRED,
                              LMC_ERR_REF_WRONG, LMC_ERR_SIZE_MISMATCH, LMC_ERR_CODER };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        size_t const code = ERR(all[i]);
        assert_true(lmc_is_error(code));
        assert_int_equal(lmc_get_error(code), all[i]);
        assert_string_not_equal(lmc_error_id(all[i]), "unknown");
        assert_string_not_equal(lmc_error_name(code), "unknown error");
        for (size_t j = 0; j < i; j++) assert_string_not_equal(lmc_error_id(all[i]), lmc_error_id(all[j]));
    }
    assert_string_equal(lmc_error_id(LMC_ERR_CHECKSUM), "checksum");
    assert_false(lmc_is_error(0));
    assert_false(lmc_is_error(1u << 30));
    assert_int_equal(lmc_get_error(0), LMC_OK);
    assert_int_equal(lmc_get_error(777), LMC_OK);
}

/* A valid header with chosen fields (checksum fixed up). */
static void put_header(uint8_t* h, unsigned version, unsigned flags, unsigned chunk_log, uint64_t size)
{
    memset(h, 0, 40);
    h[0] = 0x89; h[1] = 'L'; h[2] = 'M'; h[3] = 'C';
    h[4] = (uint8_t)version; h[5] = (uint8_t)flags; h[6] = LMC_FORMAT_GENERIC; h[8] = (uint8_t)chunk_log;
    for (int k = 0; k < 8; k++) h[12 + k] = (uint8_t)(size >> (8 * k));
    uint32_t const c = (uint32_t)lmc_hash64(h, 36);
    for (int k = 0; k < 4; k++) h[36 + k] = (uint8_t)(c >> (8 * k));
}

static void test_headers(void** state)
{
    (void)state;
    lmc_dctx* const d = lmc_dctx_create();
    uint8_t f[2048], out[64];
    lmc_frame_header h;
    memset(f, 'x', sizeof(f));
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_NOT_LMC);
    assert_err(lmc_get_frame_header(&h, f, 4), LMC_ERR_NOT_LMC);
    put_header(f, 1, 2, 20, 0);
    assert_int_equal(lmc_get_frame_header(&h, f, 40), 40);
    assert_err(lmc_get_frame_header(&h, f, 39), LMC_ERR_TRUNCATED);
    assert_err(lmc_decompress(d, out, sizeof(out), f, 39), LMC_ERR_TRUNCATED);
    assert_err(lmc_decompress(d, out, sizeof(out), f, 40), LMC_ERR_TRUNCATED);
    put_header(f, LMC_FORMAT_VERSION + 1, 2, 20, 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_VERSION);
    put_header(f, 0, 2, 20, 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_VERSION);
    put_header(f, 1, 4, 20, 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_HEADER);
    put_header(f, 1, 2, 27, 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_HEADER);
    put_header(f, 1, 2, 19, 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_HEADER);
    put_header(f, 1, 0, 20, 5);   /* size without the SIZE flag */
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_HEADER);
    put_header(f, 1, 2, 26, 0);
    assert_int_equal(lmc_dctx_set_param(d, LMC_D_MAX_CHUNK_LOG, 21), 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_LIMIT);
    put_header(f, 1, 2, 20, 1000);   /* declared size over the destination */
    assert_err(lmc_decompress(d, out, sizeof(out), f, sizeof(f)), LMC_ERR_DST_TOO_SMALL);
    /* header, end marker, no chunks, a footer for 0 chunks: the empty frame */
    put_header(f, 1, 2, 20, 0);
    memset(f + 40, 0, 4 + 32);
    uint8_t* const foot = f + 44;
    uint64_t const eh = lmc_hash64("", 0);
    for (int k = 0; k < 8; k++) foot[16 + k] = (uint8_t)(eh >> (8 * k));
    uint32_t const sc = (uint32_t)lmc_hash64(foot, 24);
    for (int k = 0; k < 4; k++) foot[24 + k] = (uint8_t)(sc >> (8 * k));
    foot[28] = 0x8F; foot[29] = 'L'; foot[30] = 'M'; foot[31] = 'C';
    assert_int_equal(lmc_decompress(d, out, sizeof(out), f, 76), 0);
    assert_err(lmc_decompress(d, out, sizeof(out), f, 77), LMC_ERR_TRAILING);
    foot[0] = 1;   /* chunk count 1 */
    assert_true(lmc_is_error(lmc_decompress(d, out, sizeof(out), f, 76)));
    lmc_dctx_free(d);
}

/* Bytes held by the allocator now (glibc), or 0 if not measurable (ASan). */
static size_t heap_now(void)
{
    struct mallinfo2 const mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Hostile inputs: errors, quickly, without allocating in proportion to
 * sizes they merely declare. */
static void test_hostile(void** state)
{
    (void)state;
    tu_rng r; tu_seed(&r, 31337);
    uint8_t in[1024];
    uint8_t* const out = (uint8_t*)tu_xmalloc(1 << 16);
    /* is mallinfo2 meaningful here? (not under ASan) */
    size_t const h0 = heap_now();
    volatile char* const probe = (volatile char*)malloc(8 << 20);
    probe[0] = 1;
    int const measurable = heap_now() >= h0 + (8 << 20);
    free((void*)probe);
    for (int it = 0; it < 3000; it++) {
        tu_fill_random(in, sizeof(in), (uint64_t)it);
        size_t const n = 1 + tu_below(&r, sizeof(in));
        if (it % 2) {
            /* a valid header with random flags, then random chunks */
            put_header(in, 1, (unsigned)tu_below(&r, 4) & 2, 20 + (unsigned)tu_below(&r, 7), 0);
            if (it % 4 == 1) {   /* a plausible chunk header */
                uint32_t const cs = (uint32_t)tu_below(&r, 1u << 20) + 1, ps = (uint32_t)tu_below(&r, 1u << 20);
                for (int k = 0; k < 4; k++) { in[40 + k] = (uint8_t)(cs >> (8 * k)); in[44 + k] = (uint8_t)(ps >> (8 * k)); }
            }
        }
        lmc_dctx* const d = lmc_dctx_create();
        size_t const before = heap_now();
        size_t const res = lmc_decompress(d, out, 1 << 16, in, n);
        assert_true(lmc_is_error(res));
        size_t const mid = heap_now();
        size_t const r2 = tu_decompress_stream(d, out, 1 << 16, in, n, tu_pieces_default, TU_NPIECES);
        assert_true(r2 != (size_t)n || lmc_is_error(r2) || r2 == TU_STALL);
        lmc_frame_stats st;
        assert_true(lmc_is_error(lmc_frame_stats_get(&st, in, n)));
        if (measurable && n < 40) {
            /* not even a header: nothing worth mentioning */
            assert_true(mid - before < (1u << 20));
            assert_true(heap_now() - before < (1u << 20));
        }
        lmc_dctx_free(d);
    }
    free(out);
}

/* The limit on chunk size bounds what one declared chunk can make a streaming
 * decoder allocate: with LMC_D_MAX_CHUNK_LOG 20 a 1 KB input stays small. */
static void test_hostile_alloc_bounded(void** state)
{
    (void)state;
    size_t const h0 = heap_now();
    volatile char* const probe = (volatile char*)malloc(8 << 20);
    probe[0] = 1;
    int const measurable = heap_now() >= h0 + (8 << 20);
    free((void*)probe);
    if (!measurable) skip();
    uint8_t in[1024];
    memset(in, 0, sizeof(in));
    put_header(in, 1, 0, 20, 0);
    uint32_t const cs = 1u << 20, ps = cs + (cs >> 15) + 64;   /* the largest allowed payload */
    for (int k = 0; k < 4; k++) { in[40 + k] = (uint8_t)(cs >> (8 * k)); in[44 + k] = (uint8_t)(ps >> (8 * k)); }
    uint8_t out[256];
    lmc_dctx* const d = lmc_dctx_create();
    size_t const before = heap_now();
    lmc_inbuf i = { in, sizeof(in), 0 };
    lmc_outbuf o = { out, sizeof(out), 0 };
    size_t const r = lmc_decompress_stream(d, &o, &i);
    assert_false(r == 0);
    size_t const used = heap_now() - before;
    /* per job: streams + content buffer (2 x 1 MiB + 8) and the payload staging (<= 1 MiB + 96) */
    assert_true(used < (4u << 20));
    lmc_dctx_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_errors),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_trailing_and_dst),
        cmocka_unit_test(test_dst_too_small_threads),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_error_codes),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_hostile_alloc_bounded),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
