/*
 * test_torchzip.c - torch.save archives: zip + pickle scan, round trips,
 * deltas, fallbacks (cmocka).
 *
 * Fixtures in tests/data/torch/ were written by torch 1.13 (gen.py there);
 * each NAME.pt has a sidecar NAME.json with the storages (key, dtype, data
 * offset, size) as torch and Python's zipfile see them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include <cmocka.h>
#include <jansson.h>

#include "lmc.h"
#include "torchzip.h"
#include "segments.h"
#include "testutil.h"
#include "tzbuild.h"

#define FIXDIR "tests/data/torch/"

static const char* const k_typed[] = { "bf16", "f32", "f16", "i64", "shared", "step2", "step3", "nostorage", "views" };
#define NTYPED (sizeof(k_typed) / sizeof(k_typed[0]))

static uint8_t* load(const char* name, const char* ext, size_t* n)
{
    char path[256];
    snprintf(path, sizeof(path), FIXDIR "%s%s", name, ext);
    uint8_t* const p = tu_read_file(path, n);
    if (!p) fail_msg("cannot read %s (run the tests from the repository root)", path);
    return p;
}

/* Checks invariants every successful parse must meet, whatever the input. */
static void check_sane(const lmc_tz_info* t, size_t n)
{
    for (size_t i = 0; i < t->count; i++) {
        const lmc_tz_storage* const s = &t->v[i];
        assert_true(s->len > 0 && s->off <= n && s->len <= n - s->off);
        assert_true(s->width == 1 || s->width == 2 || s->width == 4 || s->width == 8);
        assert_int_equal(s->len % s->width, 0);
        assert_int_equal(s->width, lmc_dtype_width((lmc_dtype)s->dtype));
        if (i) assert_true(t->v[i - 1].off + t->v[i - 1].len <= s->off);
        assert_int_equal(lmc_tz_find(t, s->key, s->key_len), (long)i);
    }
}

static void test_parse_matches_torch(void** state)
{
    (void)state;
    for (size_t f = 0; f < NTYPED; f++) {
        size_t n, jn;
        uint8_t* const buf = load(k_typed[f], ".pt", &n);
        char* const js = (char*)load(k_typed[f], ".json", &jn);
        json_error_t err;
        json_t* const root = json_loadb(js, jn, 0, &err);
        assert_non_null(root);
        json_t* const arr = json_object_get(root, "storages");
        assert_true(json_is_array(arr));

        lmc_tz_info t;
        assert_int_equal(lmc_tz_parse(&t, buf, n), 0);
        check_sane(&t, n);
        assert_int_equal(t.count, json_array_size(arr));
        for (size_t i = 0; i < t.count; i++) {
            json_t* const e = json_array_get(arr, i);
            const char* const key = json_string_value(json_object_get(e, "key"));
            const char* const dt = json_string_value(json_object_get(e, "dtype"));
            assert_non_null(key); assert_non_null(dt);
            assert_int_equal(t.v[i].key_len, strlen(key));
            assert_memory_equal(t.v[i].key, key, strlen(key));
            assert_int_equal(t.v[i].dtype, lmc_dtype_from_name(dt));
            assert_int_equal(t.v[i].off, json_integer_value(json_object_get(e, "offset")));
            assert_int_equal(t.v[i].len, json_integer_value(json_object_get(e, "nbytes")));
        }
        lmc_tz_free(&t);
        json_decref(root);
        free(js); free(buf);
    }
}

/* Loads fixture `file`.pt, parses it into *t and returns the index of
 * storage `key` (which must be there); free *buf and *t after. */
static size_t parse_find(const char* file, const char* key, uint8_t** buf, size_t* n, lmc_tz_info* t)
{
    *buf = load(file, ".pt", n);
    assert_int_equal(lmc_tz_parse(t, *buf, *n), 0);
    long const i = lmc_tz_find(t, (const uint8_t*)key, strlen(key));
    assert_true(i >= 0);
    return (size_t)i;
}

/* Row lengths from the _rebuild_tensor_v2 arguments, against the shapes
 * gen.py saved: the last dimension of row-major tensors of 2+ dimensions,
 * 0 for 1-D and 0-d tensors, transposed views and views that disagree. */
static void test_rows(void** state)
{
    (void)state;
    static const struct { const char* file; const char* key; uint32_t row; } k_rows[] = {
        { "bf16", "0", 32 }, { "f32", "0", 32 }, { "f16", "0", 32 }, { "i64", "0", 0 },
        { "shared", "0", 32 },                         /* w (32x32) and its 4x32 slice agree */
        { "shared", "1", 0 }, { "shared", "4", 0 },
        /* model (Linear 32->64, Linear 64->32) then Adam: step, exp_avg, exp_avg_sq per parameter */
        { "step2", "0", 32 }, { "step2", "1", 0 }, { "step2", "2", 64 }, { "step2", "3", 0 },
        { "step2", "4", 0 }, { "step2", "5", 32 }, { "step2", "6", 32 }, { "step2", "9", 0 },
        { "step2", "11", 64 }, { "step2", "12", 64 },
        { "views", "0", 0 },                           /* 32x32 and a 16x64 view of it */
        { "views", "1", 0 },                           /* transposed: not row-major */
        { "views", "2", 40 }, { "views", "3", 0 },
    };
    for (size_t r = 0; r < sizeof(k_rows) / sizeof(k_rows[0]); r++) {
        size_t n;
        uint8_t* buf;
        lmc_tz_info t;
        size_t const i = parse_find(k_rows[r].file, k_rows[r].key, &buf, &n, &t);
        if (t.v[i].row != k_rows[r].row)
            print_message("%s.pt storage %s: row %u, expected %u\n", k_rows[r].file, k_rows[r].key, t.v[i].row, k_rows[r].row);
        assert_int_equal(t.v[i].row, k_rows[r].row);
        lmc_tz_free(&t);
        free(buf);
    }
}

/* Labels: the dict key each storage's tensor was stored under, from the
 * pickle's SETITEM(S), against what gen.py saved; none for a bare tensor and
 * for a storage under two keys (a tensor and its view). */
static void test_labels(void** state)
{
    (void)state;
    static const struct { const char* file; const char* key; const char* label; } k_labels[] = {
        { "bf16", "0", NULL },
        { "shared", "0", NULL }, { "shared", "1", "b" }, { "shared", "2", "mask" }, { "shared", "3", "idx" },
        { "shared", "4", "d" },
        { "step2", "0", "0.weight" }, { "step2", "1", "0.bias" }, { "step2", "2", "2.weight" }, { "step2", "3", "2.bias" },
        { "step2", "4", "step" }, { "step2", "5", "exp_avg" }, { "step2", "6", "exp_avg_sq" },
        { "views", "0", NULL }, { "views", "1", "t" }, { "views", "2", "c" }, { "views", "3", "v" },
    };
    for (size_t r = 0; r < sizeof(k_labels) / sizeof(k_labels[0]); r++) {
        size_t n;
        uint8_t* buf;
        lmc_tz_info t;
        size_t const i = parse_find(k_labels[r].file, k_labels[r].key, &buf, &n, &t);
        lmc_tensor_map* m = NULL;
        assert_int_equal(lmc_tensor_map_torch(&m, buf, n), 0);
        const lmc_tensor_info* const ti = lmc_tensor_map_get(m, i);
        if (!k_labels[r].label) {
            assert_null(t.v[i].name);
            assert_null(ti->label);
        } else {
            assert_int_equal(t.v[i].name_len, strlen(k_labels[r].label));
            assert_memory_equal(t.v[i].name, k_labels[r].label, t.v[i].name_len);
            assert_string_equal(ti->label, k_labels[r].label);
            assert_int_equal(ti->label_len, strlen(k_labels[r].label));
        }
        lmc_tensor_map_free(m);
        lmc_tz_free(&t);
        free(buf);
    }
}

/* The public map (lmc.h): the same storages as lmc_tz_parse, in file order,
 * named data/<key>, found by name; anything else is NOT_CONTAINER. */
static void test_public_map(void** state)
{
    (void)state;
    for (size_t f = 0; f < NTYPED; f++) {
        size_t n;
        uint8_t* const buf = load(k_typed[f], ".pt", &n);
        lmc_tz_info t;
        assert_int_equal(lmc_tz_parse(&t, buf, n), 0);
        lmc_tensor_map* m = NULL;
        assert_int_equal(lmc_tensor_map_torch(&m, buf, n), 0);
        assert_int_equal(lmc_tensor_map_count(m), t.count);
        assert_int_equal(lmc_tensor_map_header_size(m), t.count ? t.v[0].off : n);
        for (size_t i = 0; i < t.count; i++) {
            const lmc_tensor_info* const ti = lmc_tensor_map_get(m, i);
            char name[64];
            assert_true(t.v[i].key_len + 6 <= sizeof(name));
            memcpy(name, "data/", 5);
            memcpy(name + 5, t.v[i].key, t.v[i].key_len);
            name[5 + t.v[i].key_len] = 0;
            assert_string_equal(ti->name, name);
            assert_int_equal(ti->name_len, strlen(name));
            assert_int_equal(ti->offset, t.v[i].off);
            assert_int_equal(ti->size, t.v[i].len);
            assert_int_equal(ti->dtype, t.v[i].dtype);
            assert_int_equal(ti->ndim, 1);
            assert_int_equal(ti->shape[0], t.v[i].len / t.v[i].width);
            assert_int_equal(lmc_tensor_map_find(m, name, strlen(name)), (long)i);
        }
        assert_null(lmc_tensor_map_get(m, t.count));
        assert_int_equal(lmc_tensor_map_find(m, "data/nope", 9), -1);
        lmc_tensor_map_free(m);
        lmc_tz_free(&t);
        /* the same bytes less their last one: the zip directory is gone */
        m = NULL;
        size_t const r = lmc_tensor_map_torch(&m, buf, n - 1);
        assert_true(lmc_is_error(r));
        assert_int_equal(lmc_get_error(r), LMC_ERR_NOT_CONTAINER);
        assert_null(m);
        free(buf);
    }
}

static void test_not_a_zip(void** state)
{
    (void)state;
    size_t n;
    uint8_t* const buf = load("legacy", ".pt", &n);   /* pre-1.6 format: a bare pickle */
    lmc_tz_info t;
    assert_int_equal(lmc_tz_parse(&t, buf, n), -1);
    assert_int_equal(t.count, 0);
    assert_null(t.v);
    assert_int_equal(lmc_tz_parse(&t, buf, 0), -1);
    assert_int_equal(lmc_tz_parse(&t, (const uint8_t*)"PK\3\4", 4), -1);
    free(buf);
}

/* Compresses (one-shot) with format `fmt` against ref (may be NULL), checks
 * that it decodes back, and returns the frame size; *st gets the stats.
 * RAW_AS(dtype) for fmt: raw with that dtype. */
#define RAW_AS(dt) (LMC_FORMAT_RAW | (dt) << 8)
static size_t roundtrip(const uint8_t* src, size_t n, const uint8_t* ref, size_t rn, int fmt, lmc_frame_stats* st)
{
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    assert_non_null(c); assert_non_null(d);
    assert_false(lmc_is_error(lmc_cctx_set_param(c, LMC_P_FORMAT, fmt & 0xFF)));
    if (fmt >> 8) assert_false(lmc_is_error(lmc_cctx_set_param(c, LMC_P_DTYPE, fmt >> 8)));
    if (ref) assert_false(lmc_is_error(lmc_cctx_set_ref(c, ref, rn)));
    uint8_t* comp;
    size_t const cs = tu_compress(c, &comp, src, n);
    assert_false(lmc_is_error(cs));
    lmc_frame_stats s2;
    assert_int_equal(lmc_cctx_last_stats(c, st), 0);
    assert_int_equal(lmc_frame_stats_get(&s2, comp, cs), cs);
    assert_int_equal(s2.header.container, st->header.container);
    assert_memory_equal(s2.dtype_in, st->dtype_in, sizeof(s2.dtype_in));
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    if (ref) assert_false(lmc_is_error(lmc_dctx_set_ref(d, ref, rn)));
    size_t const dn = lmc_decompress(d, out, n, comp, cs);
    assert_false(lmc_is_error(dn));
    assert_int_equal(dn, n);
    assert_memory_equal(out, src, n);
    free(out); free(comp);
    lmc_cctx_free(c); lmc_dctx_free(d);
    return cs;
}

static void test_roundtrip_and_stats(void** state)
{
    (void)state;
    static const struct { const char* name; lmc_dtype dt; uint64_t bytes; } k[] = {
        { "bf16", LMC_DTYPE_BF16, 4096 }, { "f32", LMC_DTYPE_F32, 4096 },
        { "f16", LMC_DTYPE_F16, 4096 },   { "i64", LMC_DTYPE_I64, 4096 },
        { "shared", LMC_DTYPE_F32, 4096 }, { "shared", LMC_DTYPE_BF16, 600 },
        { "shared", LMC_DTYPE_I32, 256 },  { "shared", LMC_DTYPE_F64, 128 },
        { "step2", LMC_DTYPE_F32, 0 },
    };
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        size_t n;
        uint8_t* const buf = load(k[i].name, ".pt", &n);
        lmc_frame_stats st;
        roundtrip(buf, n, NULL, 0, LMC_FORMAT_AUTO, &st);
        assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
        if (k[i].bytes) assert_int_equal(st.dtype_in[k[i].dt], k[i].bytes);
        else assert_true(st.dtype_in[k[i].dt] > n / 2);
        roundtrip(buf, n, NULL, 0, LMC_FORMAT_TORCH_ZIP, &st);
        assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
        /* generic: bytes, or floats where the bytes look like them (detect.h) */
        roundtrip(buf, n, NULL, 0, LMC_FORMAT_GENERIC, &st);
        assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
        assert_int_equal(st.dtype_in[LMC_DTYPE_BYTES] + st.dtype_in[LMC_DTYPE_BF16] + st.dtype_in[LMC_DTYPE_F32], n);
        free(buf);
    }
    /* not a zip, or forced on something else: generic, still lossless */
    size_t n;
    uint8_t* const buf = load("legacy", ".pt", &n);
    lmc_frame_stats st;
    roundtrip(buf, n, NULL, 0, LMC_FORMAT_AUTO, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
    roundtrip(buf, n, NULL, 0, LMC_FORMAT_TORCH_ZIP, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
    roundtrip(buf, 0, NULL, 0, LMC_FORMAT_TORCH_ZIP, &st);
    free(buf);
}

/* Streaming: with a pledged size the whole zip is buffered and parsed;
 * without one it is coded in generic mode. Both decode to the input. */
static void test_streaming(void** state)
{
    (void)state;
    size_t n;
    uint8_t* const buf = load("shared", ".pt", &n);
    for (int pledge = 0; pledge < 2; pledge++) {
        lmc_cctx* const c = lmc_cctx_create();
        lmc_dctx* const d = lmc_dctx_create();
        if (pledge) assert_false(lmc_is_error(lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, (long long)n)));
        size_t const cap = lmc_compress_bound(n);
        uint8_t* const comp = (uint8_t*)tu_xmalloc(cap);
        size_t const cs = tu_compress_stream(c, comp, cap, buf, n, tu_pieces_default, TU_NPIECES);
        assert_false(lmc_is_error(cs));
        lmc_frame_stats st;
        assert_int_equal(lmc_frame_stats_get(&st, comp, cs), cs);
        assert_int_equal(st.header.container, pledge ? LMC_FORMAT_TORCH_ZIP : LMC_FORMAT_GENERIC);
        if (pledge) assert_int_equal(st.dtype_in[LMC_DTYPE_BF16], 600);
        uint8_t* const out = (uint8_t*)tu_xmalloc(n);
        assert_int_equal(lmc_decompress(d, out, n, comp, cs), n);
        assert_memory_equal(out, buf, n);
        free(out); free(comp);
        lmc_cctx_free(c); lmc_dctx_free(d);
    }
    /* The whole zip is asked for up to LMC_TZ_MAX_BUFFERED (32 MiB, which
     * keeps a stream within the memory bound); a larger pledged size, or
     * none, gets generic mode (0: nothing more needed); a caller's buffer
     * holding the whole file, of any size, is parsed in place (0 too). */
    assert_int_equal(LMC_TZ_MAX_BUFFERED, (uint64_t)32 << 20);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_AUTO, buf, 4, n), n);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_AUTO, buf, 4, LMC_TZ_MAX_BUFFERED), LMC_TZ_MAX_BUFFERED);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_AUTO, buf, 4, LMC_TZ_MAX_BUFFERED + 1), 0);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_TORCH_ZIP, buf, 4, (uint64_t)1 << 30), 0);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_AUTO, buf, 4, UINT64_MAX), 0);
    assert_int_equal(lmc_segs_prefix_needed(LMC_FORMAT_AUTO, buf, n, n), 0);
    free(buf);
}

/* Consecutive training steps: storages are XORed against the same key. */
static void test_delta(void** state)
{
    (void)state;
    size_t n2, n3;
    uint8_t* const s2 = load("step2", ".pt", &n2);
    uint8_t* const s3 = load("step3", ".pt", &n3);
    lmc_frame_stats st, sg, sb;
    size_t const auto_size = roundtrip(s3, n3, s2, n2, LMC_FORMAT_AUTO, &st);
    size_t const gen_size = roundtrip(s3, n3, s2, n2, LMC_FORMAT_GENERIC, &sg);
    size_t const bytes_size = roundtrip(s3, n3, s2, n2, RAW_AS(LMC_DTYPE_U8), &sb);
    assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
    assert_true(st.pieces_xor > 0);
    assert_true(st.dtype_in[LMC_DTYPE_F32] > n3 / 2);
    print_message("step3 vs step2 (%zu bytes): torch %zu, generic %zu, bytes %zu\n", n3, auto_size, gen_size, bytes_size);
    assert_true(auto_size < bytes_size);
    /* generic mode finds the f32 storages itself (at the same offsets in
     * both steps); a byte-wise XOR does much worse */
    assert_true(sg.dtype_in[LMC_DTYPE_F32] > n3 / 2);
    assert_true(gen_size < bytes_size - bytes_size / 10);
    assert_int_equal(sb.dtype_in[LMC_DTYPE_U8], n3);
    /* against an unrelated reference (not a torch zip): still lossless */
    size_t nl;
    uint8_t* const leg = load("legacy", ".pt", &nl);
    roundtrip(s3, n3, leg, nl, LMC_FORMAT_AUTO, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
    free(leg); free(s2); free(s3);
}

/* In a delta, the zip entry header between two float storages ends the
 * first one's segment when it is as long in the reference (both at most
 * 1 KiB and a whole number of values): no byte segment lies between them.
 * A keyframe keeps every header a byte segment. The delta still round
 * trips (test_delta) and takes fewer pieces than it has storages. */
static void test_delta_headers_in_segments(void** state)
{
    (void)state;
    size_t n2, n3;
    uint8_t* const s2 = load("step2", ".pt", &n2);
    uint8_t* const s3 = load("step3", ".pt", &n3);
    lmc_tz_info a, b;
    assert_int_equal(lmc_tz_parse(&a, s3, n3), 0);
    assert_int_equal(lmc_tz_parse(&b, s2, n2), 0);
    lmc_segs sd, sk;
    memset(&sd, 0, sizeof sd); memset(&sk, 0, sizeof sk);
    assert_int_equal(lmc_segs_build(&sd, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, s3, n3, n3, s2, n2), 0);
    assert_int_equal(lmc_segs_build(&sk, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, s3, n3, n3, NULL, 0), 0);
    unsigned absorbed = 0, kept = 0;
    for (size_t i = 0; i + 1 < a.count; i++) {
        const lmc_tz_storage *const t = &a.v[i], *const u = &a.v[i + 1];
        long const jt = lmc_tz_find(&b, t->key, t->key_len), ju = lmc_tz_find(&b, u->key, u->key_len);
        assert_true(jt >= 0 && ju >= 0);
        uint64_t const gap = u->off - (t->off + t->len);
        int const is_float = t->dtype == LMC_DTYPE_F32 || t->dtype == LMC_DTYPE_BF16 || t->dtype == LMC_DTYPE_F16;
        int const expect = is_float && gap <= 1024 && gap % t->width == 0 && b.v[ju].len == u->len
                           && b.v[ju].off - (b.v[jt].off + b.v[jt].len) == gap;
        const lmc_seg* const g = &sd.v[lmc_segs_find(&sd, t->off, 0)];
        const lmc_seg* const k = &sk.v[lmc_segs_find(&sk, t->off, 0)];
        assert_int_equal(k->off + k->len, t->off + t->len);   /* keyframe: the storage alone */
        if (expect) {
            assert_true(g->xor_ref);
            assert_int_equal(g->off + g->len, u->off);
            assert_int_equal(sd.v[lmc_segs_find(&sd, u->off, 0)].off, u->off);   /* the next starts its own */
            absorbed++;
        } else {
            assert_int_equal(g->off + g->len, t->off + t->len);
            kept++;
        }
    }
    print_message("step3 against step2: %u headers in float segments, %u kept as bytes\n", absorbed, kept);
    assert_true(absorbed > 0);
    lmc_frame_stats st;
    roundtrip(s3, n3, s2, n2, LMC_FORMAT_AUTO, &st);
    assert_true(st.pieces < a.count);
    lmc_segs_free(&sd); lmc_segs_free(&sk);
    lmc_tz_free(&a); lmc_tz_free(&b);
    free(s2); free(s3);
}

static uint8_t* concat(const uint8_t* const* parts, const size_t* lens, int k, size_t* n)
{
    size_t total = 0;
    for (int i = 0; i < k; i++) total += lens[i];
    uint8_t* const out = (uint8_t*)tu_xmalloc(total ? total : 1);
    size_t o = 0;
    for (int i = 0; i < k; i++) { memcpy(out + o, parts[i], lens[i]); o += lens[i]; }
    *n = total;
    return out;
}

/* torch.save archives one after another, as torch's distributed
 * checkpoints write them: each archive is found from its end records
 * (lmc_tz_archive_start), its storages are coded with their types against
 * the reference's archive of the same rank, and the file round trips,
 * smaller than in generic mode. Two archives of one layout (whose end
 * records, read as the whole file's, describe the first) are two archives
 * too. A concatenation cut short, or with bytes in front, is still coded
 * losslessly. */
static void test_concatenated_archives(void** state)
{
    (void)state;
    size_t n2, n3, nf;
    uint8_t* const s2 = load("step2", ".pt", &n2);
    uint8_t* const s3 = load("step3", ".pt", &n3);
    uint8_t* const f32 = load("f32", ".pt", &nf);
    lmc_tz_info a3, af;
    assert_int_equal(lmc_tz_parse(&a3, s3, n3), 0);
    assert_int_equal(lmc_tz_parse(&af, f32, nf), 0);
    assert_int_equal(lmc_tz_archive_start(s3, n3), 0);
    assert_int_equal(lmc_tz_archive_start(s3, n3 - 1), SIZE_MAX);

    const uint8_t* const in_parts[] = { s3, f32, s3 };
    const uint8_t* const ref_parts[] = { s2, f32, s2 };
    size_t const in_lens[] = { n3, nf, n3 }, ref_lens[] = { n2, nf, n2 };
    size_t n, rn;
    uint8_t* const c = concat(in_parts, in_lens, 3, &n);
    uint8_t* const r = concat(ref_parts, ref_lens, 3, &rn);
    assert_int_equal(lmc_tz_archive_start(c, n), n3 + nf);
    assert_int_equal(lmc_tz_archive_start(c, n3 + nf), n3);
    assert_int_equal(lmc_tz_archive_start(c, n3), 0);

    lmc_segs s;
    memset(&s, 0, sizeof s);
    assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, c, n, n, r, rn), 0);
    assert_int_equal(s.format, LMC_FORMAT_TORCH_ZIP);
    assert_int_equal(s.tensors_total, 2 * a3.count + af.count);
    assert_int_equal(s.tensors_matched, s.tensors_total);
    /* every storage of the third archive lies in a segment against the
     * reference's third archive (its storages at the same places in it) */
    for (size_t i = 0; i < a3.count; i++) {
        uint64_t const off = n3 + nf + a3.v[i].off;
        const lmc_seg* const g = &s.v[lmc_segs_find(&s, off, 0)];
        assert_true(g->xor_ref);
        assert_int_equal(g->ref_off + (off - g->off), n2 + nf + (off - n3 - nf));
    }
    lmc_frame_stats st, sg;
    size_t const tz = roundtrip(c, n, r, rn, LMC_FORMAT_AUTO, &st);
    size_t const gen = roundtrip(c, n, r, rn, LMC_FORMAT_GENERIC, &sg);
    assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
    size_t const whole = roundtrip(c, n, NULL, 0, LMC_FORMAT_AUTO, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_TORCH_ZIP);
    print_message("three archives against three (%zu bytes): torch %zu, generic %zu, without the reference %zu\n", n, tz,
                  gen, whole);
    /* these small archives code about as well either way (the floats are
     * found in generic mode too); coded without their references they take
     * far more */
    assert_true(tz < gen + gen / 50);
    assert_true(tz + tz / 10 < whole);
    uint64_t f32_bytes = 0;   /* a keyframe's storages are pieces of their own type, headers bytes */
    for (size_t i = 0; i < a3.count; i++) f32_bytes += a3.v[i].dtype == LMC_DTYPE_F32 && a3.v[i].len >= 64 ? 2 * a3.v[i].len : 0;
    for (size_t i = 0; i < af.count; i++) f32_bytes += af.v[i].dtype == LMC_DTYPE_F32 && af.v[i].len >= 64 ? af.v[i].len : 0;
    assert_int_equal(st.dtype_in[LMC_DTYPE_F32], f32_bytes);
    /* the same layout twice: two archives, not one */
    size_t nd;
    const uint8_t* const twice[] = { s3, s3 };
    size_t const twice_lens[] = { n3, n3 };
    uint8_t* const d = concat(twice, twice_lens, 2, &nd);
    assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, d, nd, nd, d, nd), 0);
    assert_int_equal(s.tensors_total, 2 * a3.count);
    assert_int_equal(s.tensors_matched, 2 * a3.count);
    roundtrip(d, nd, s2, n2, LMC_FORMAT_AUTO, &st);
    /* cut short, or behind other bytes: lossless all the same */
    roundtrip(c, n - 7, r, rn, LMC_FORMAT_AUTO, &st);
    uint8_t* const j = (uint8_t*)tu_xmalloc(n + 100);
    memset(j, 'x', 100);
    memcpy(j + 100, c, n);
    roundtrip(j, n + 100, r, rn, LMC_FORMAT_AUTO, &st);
    /* zips one after another that are not torch's (no data.pkl): generic mode */
    static const char* const names[] = { "x/readme.txt" };
    static const uint8_t text[] = "not a checkpoint";
    const uint8_t* const data[] = { text };
    size_t const len[] = { sizeof text };
    uint8_t z[TZB_BOUND(1, 12, sizeof text)];
    size_t const zn = tzb_build(z, names, data, len, 1, 0);
    const uint8_t* const zz[] = { z, z };
    size_t const zl[] = { zn, zn };
    size_t n2z;
    uint8_t* const z2 = concat(zz, zl, 2, &n2z);
    assert_int_equal(lmc_tz_archive_start(z2, n2z), zn);
    assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, z2, n2z, n2z, NULL, 0), 0);
    assert_int_equal(s.format, LMC_FORMAT_GENERIC);
    lmc_tensor_map* m = NULL;
    assert_int_equal(lmc_get_error(lmc_tensor_map_torch(&m, z2, n2z)), LMC_ERR_NOT_CONTAINER);
    assert_null(m);
    /* the public tensor map reads the archives as the encoder does: archive
     * k's storages named a<k>/data/<key>, at their offsets in the file, so
     * that the names match archive k of another checkpoint */
    assert_int_equal(lmc_tensor_map_torch(&m, c, n), 0);
    assert_int_equal(lmc_tensor_map_count(m), 2 * a3.count + af.count);
    assert_int_equal(lmc_tensor_map_header_size(m), a3.v[0].off);
    size_t e = 0;
    for (int k = 0; k < 3; k++) {
        const lmc_tz_info* const a = k == 1 ? &af : &a3;
        uint64_t const base = k == 0 ? 0 : k == 1 ? n3 : n3 + nf;
        for (size_t i = 0; i < a->count; i++, e++) {
            const lmc_tensor_info* const t = lmc_tensor_map_get(m, e);
            char want[64];
            snprintf(want, sizeof want, "a%d/data/%.*s", k, (int)a->v[i].key_len, (const char*)a->v[i].key);
            assert_string_equal(t->name, want);
            assert_int_equal(t->offset, base + a->v[i].off);
            assert_int_equal(t->size, a->v[i].len);
            assert_int_equal(lmc_tensor_map_find(m, want, strlen(want)), (long)e);
        }
    }
    lmc_tensor_map_free(m);
    /* one archive keeps its plain names */
    assert_int_equal(lmc_tensor_map_torch(&m, s3, n3), 0);
    assert_int_equal(strncmp(lmc_tensor_map_get(m, 0)->name, "data/", 5), 0);
    lmc_tensor_map_free(m);
    free(z2);
    free(j); free(d);
    lmc_segs_free(&s);
    lmc_tz_free(&a3); lmc_tz_free(&af);
    free(c); free(r); free(s2); free(s3); free(f32);
}

/* Locates data.pkl's bytes in a fixture (via the parser's own answer for the
 * first storage: data.pkl precedes it) so that it can be damaged. */
static size_t pkl_start(const uint8_t* buf, size_t n)
{
    (void)n;
    /* local header of the first entry at 0: 30 + name + extra */
    return 30 + (size_t)(buf[26] | (buf[27] << 8)) + (size_t)(buf[28] | (buf[29] << 8));
}

static void test_damaged_fall_back(void** state)
{
    (void)state;
    size_t n;
    uint8_t* const orig = load("shared", ".pt", &n);
    uint8_t* const buf = (uint8_t*)tu_xmalloc(n);
    lmc_tz_info t;
    lmc_frame_stats st;

    /* every truncation: never crashes; the directory is at the end, so all fail */
    for (size_t len = 0; len < n; len++) {
        assert_int_equal(lmc_tz_parse(&t, orig, len), -1);
    }
    for (size_t len = 0; len < n; len += 997) {
        roundtrip(orig, len, NULL, 0, LMC_FORMAT_AUTO, &st);
        assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);
    }

    /* an unknown opcode in data.pkl: dtypes not understood, generic */
    size_t const p0 = pkl_start(orig, n);
    memcpy(buf, orig, n);
    assert_int_equal(buf[p0], 0x80);   /* PROTO */
    buf[p0 + 2] = 0xFF;
    assert_int_equal(lmc_tz_parse(&t, buf, n), -1);
    roundtrip(buf, n, NULL, 0, LMC_FORMAT_AUTO, &st);
    assert_int_equal(st.header.container, LMC_FORMAT_GENERIC);

    /* pickle cut short (no STOP): generic */
    memcpy(buf, orig, n);
    assert_int_equal(lmc_tz_parse(&t, buf, n), 0);
    uint64_t const first = t.v[0].off;
    lmc_tz_free(&t);
    for (size_t i = p0; i < first; i++) if (buf[i] == '.') buf[i] = 'N';
    assert_int_equal(lmc_tz_parse(&t, buf, n), -1);

    /* central directory damaged */
    memcpy(buf, orig, n);
    for (size_t i = n - 22; i-- > 0;) if (buf[i] == 'P' && buf[i + 1] == 'K' && buf[i + 2] == 1 && buf[i + 3] == 2) { buf[i + 10] = 8; break; }
    roundtrip(buf, n, NULL, 0, LMC_FORMAT_AUTO, &st);   /* a deflated entry: that storage is plain bytes */

    /* random single-byte damage anywhere: any parse is sane, every file round-trips */
    tu_rng r; tu_seed(&r, 42);
    for (int k = 0; k < 300; k++) {
        memcpy(buf, orig, n);
        size_t const at = tu_below(&r, n);
        buf[at] = (uint8_t)tu_next(&r);
        if (lmc_tz_parse(&t, buf, n) == 0) { check_sane(&t, n); lmc_tz_free(&t); }
        if (k % 10 == 0) roundtrip(buf, n, NULL, 0, LMC_FORMAT_AUTO, &st);
    }
    /* damage in the directory region only (where the offsets live) */
    for (int k = 0; k < 2000; k++) {
        memcpy(buf, orig, n);
        size_t const at = n - 1 - tu_below(&r, 400);
        buf[at] = (uint8_t)tu_next(&r);
        if (lmc_tz_parse(&t, buf, n) == 0) { check_sane(&t, n); lmc_tz_free(&t); }
    }
    free(buf); free(orig);
}

/* data.pkl in protocols 2, 4, 5 (gen.py), wrapped in a built zip, plain and
 * ZIP64: '0' BFloat16Storage, '1' UntypedStorage without a dtype (plain
 * bytes, left out), '2' UntypedStorage with torch.float32. */
static void test_pickle_protocols_zip64(void** state)
{
    (void)state;
    static const char* const names[] = { "arch/data.pkl", "arch/data/0", "arch/data/1", "arch/data/2", "arch/version" };
    static const char* const pk[] = { "proto2", "proto4", "proto5" };
    uint8_t st[64];
    for (int i = 0; i < 64; i++) st[i] = (uint8_t)(i * 37);
    for (int f = 0; f < 3; f++) {
        size_t pn;
        uint8_t* const pkl = load(pk[f], ".pkl", &pn);
        for (int z64 = 0; z64 < 2; z64++) {
            const uint8_t* d[5] = { pkl, st, st, st, (const uint8_t*)"3\n" };
            size_t len[5] = { pn, 64, 64, 32, 2 };
            uint8_t* const zip = (uint8_t*)tu_xmalloc(TZB_BOUND(5, 64, pn + 200));
            size_t const n = tzb_build(zip, names, d, len, 5, z64);
            lmc_tz_info t;
            assert_int_equal(lmc_tz_parse(&t, zip, n), 0);
            check_sane(&t, n);
            assert_int_equal(t.count, 2);
            assert_int_equal(t.v[0].dtype, LMC_DTYPE_BF16);
            assert_int_equal(t.v[0].len, 64);
            assert_int_equal(t.v[1].dtype, LMC_DTYPE_F32);
            assert_int_equal(t.v[1].len, 32);
            assert_memory_equal(t.v[1].key, "2", 1);
            assert_int_equal(lmc_tz_find(&t, (const uint8_t*)"1", 1), -1);
            lmc_tz_free(&t);
            lmc_frame_stats fs;
            roundtrip(zip, n, NULL, 0, LMC_FORMAT_AUTO, &fs);
            assert_int_equal(fs.header.container, LMC_FORMAT_TORCH_ZIP);
            /* a storage whose size is not a multiple of its width is left out */
            len[1] = 63;
            size_t const n2 = tzb_build(zip, names, d, len, 5, z64);
            assert_int_equal(lmc_tz_parse(&t, zip, n2), 0);
            assert_int_equal(t.count, 1);
            lmc_tz_free(&t);
            /* two data.pkl candidates: ambiguous, declined */
            static const char* const dup[] = { "arch/data.pkl", "arch/data/0", "b/data.pkl" };
            size_t const n3 = tzb_build(zip, dup, d, len, 3, z64);
            assert_int_equal(lmc_tz_parse(&t, zip, n3), -1);
            free(zip);
        }
        free(pkl);
    }
}

/* A storage the pickle scan cannot type (UntypedStorage without a dtype)
 * holding 256 KiB of bf16 values: coded as bf16 all the same, by generic
 * mode's width detection on the bytes between typed storages. */
static void test_untyped_storage_detected(void** state)
{
    (void)state;
    static const char* const names[] = { "arch/data.pkl", "arch/data/0", "arch/data/1", "arch/data/2", "arch/version" };
    size_t pn;
    uint8_t* const pkl = load("proto4", ".pkl", &pn);
    size_t const big = 256 * 1024;
    uint8_t* const vals = (uint8_t*)tu_xmalloc(big);
    tu_fill_gauss(vals, big, 2, 17);
    uint8_t st[64];
    for (int i = 0; i < 64; i++) st[i] = (uint8_t)(i * 37);
    const uint8_t* d[5] = { pkl, st, vals, st, (const uint8_t*)"3\n" };
    size_t len[5] = { pn, 64, big, 32, 2 };
    uint8_t* const zip = (uint8_t*)tu_xmalloc(TZB_BOUND(5, 64, pn + big + 200));
    size_t const n = tzb_build(zip, names, d, len, 5, 0);
    lmc_frame_stats fs;
    roundtrip(zip, n, NULL, 0, LMC_FORMAT_AUTO, &fs);
    assert_int_equal(fs.header.container, LMC_FORMAT_TORCH_ZIP);
    assert_true(fs.dtype_in[LMC_DTYPE_BF16] >= 64 + big - 64);
    free(zip); free(vals); free(pkl);
}

/* fuzz/regressions/torchzip/: inputs that once crashed fuzz/fuzz_torchzip.c,
 * replayed the way the target reads them (first byte odd: a data.pkl to wrap). */
static void test_fuzz_regressions(void** state)
{
    (void)state;
    DIR* const dp = opendir("fuzz/regressions/torchzip");
    if (!dp) return;
    static const char* const names[] = { "a/data.pkl", "a/data/0", "a/data/1", "a/data/2", "a/data/3" };
    static const uint8_t st[64];
    struct dirent* e;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof(path), "fuzz/regressions/torchzip/%s", e->d_name);
        size_t n;
        uint8_t* const p = tu_read_file(path, &n);
        if (!p || n == 0) { free(p); continue; }
        const uint8_t* f = p + 1;
        size_t fn = n - 1;
        uint8_t* zip = NULL;
        if (p[0] & 1) {
            const uint8_t* d[5] = { f, st, st, st, st };
            size_t len[5] = { fn, 64, 64, 16, 8 };
            zip = (uint8_t*)tu_xmalloc(TZB_BOUND(5, 64, fn + 256));
            fn = tzb_build(zip, names, d, len, 5, (p[0] & 2) != 0);
            f = zip;
        }
        lmc_tz_info t;
        if (lmc_tz_parse(&t, f, fn) == 0) { check_sane(&t, fn); lmc_tz_free(&t); }
        lmc_frame_stats fs;
        roundtrip(f, fn, f, fn, LMC_FORMAT_AUTO, &fs);
        free(zip); free(p);
    }
    closedir(dp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_matches_torch),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_public_map),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_not_a_zip),
        cmocka_unit_test(test_roundtrip_and_stats),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_delta_headers_in_segments),
        cmocka_unit_test(test_concatenated_archives),
        cmocka_unit_test(test_damaged_fall_back),
        cmocka_unit_test(test_untyped_storage_detected),
        cmocka_unit_test(test_pickle_protocols_zip64),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
