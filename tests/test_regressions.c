/* test_regressions.c - replays every fuzzer crash input kept under
 * fuzz/regressions/<target>/ through that target's decoder entry point and
 * checks it returns (error or success) without crashing. An empty or missing
 * folder passes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>

#include "testutil.h"
#include "huf.h"
#include "block_dec.h"
#include "container/safetensors.h"
#include "store/manifest.h"
/* the REFCTX target is replayed through its own entry point (it builds the reference) */
#include "../fuzz/fuzz_refctx.c"
/* and the chunk target through its function (LLVMFuzzerTestOneInput is fuzz_refctx's here) */
#define LMC_FUZZ_CHUNK_NO_ENTRY
#include "../fuzz/fuzz_chunk.c"

static lmc_block_dws g_ws;

static void replay_frame(const uint8_t* p, size_t n)
{
    static uint8_t ref[4096];
    uint32_t x = 2463534242u;   /* the reference fuzz_frame.c sets */
    for (size_t i = 0; i < sizeof(ref); i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; ref[i] = (uint8_t)x; }
    size_t const cap = 1u << 20;
    uint8_t* const out = (uint8_t*)tu_xmalloc(cap);
    lmc_dctx* const d = lmc_dctx_create();
    assert_int_equal(lmc_dctx_set_param(d, LMC_D_MAX_CHUNK_LOG, 21), 0);
    assert_int_equal(lmc_dctx_set_ref(d, ref, sizeof(ref)), 0);
    (void)lmc_decompress(d, out, cap, p, n);
    for (unsigned t = 1; t <= 3; t += 2) {
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
        (void)tu_decompress_stream(d, out, cap, p, n, tu_pieces_default, TU_NPIECES);
        lmc_dctx_reset(d);
    }
    lmc_frame_stats st;
    (void)lmc_frame_stats_get(&st, p, n);
    lmc_dctx_free(d);
    free(out);
}

static void replay_block(const uint8_t* p, size_t n)
{
    if (n < 2) return;
    size_t const m = ((size_t)p[0] | (size_t)p[1] << 8) + 1;
    uint8_t* const dst = (uint8_t*)tu_xmalloc(m);
    (void)lmc_block_decode(&g_ws, dst, m, p + 2, n - 2);
    unsigned coder;
    (void)lmc_block_skip(p + 2, n - 2, m, &coder);
    free(dst);
}

static void replay_huftable(const uint8_t* p, size_t n)
{
    uint8_t len[LMC_ALPHA_RLE];
    uint16_t code[LMC_ALPHA_RLE];
    unsigned const alphas[2] = { LMC_ALPHA_LIT, LMC_ALPHA_RLE };
    for (int k = 0; k < 2; k++)
        if (!lmc_is_error(lmc_huf_read_table(len, alphas[k], p, n))) (void)lmc_huf_canonical(code, len, alphas[k]);
}

static void replay_roundtrip(const uint8_t* p, size_t n)
{
    if (n < 1) return;
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    int const fmts[4] = { LMC_FORMAT_AUTO, LMC_FORMAT_GENERIC, LMC_FORMAT_RAW, LMC_FORMAT_SAFETENSORS };
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, fmts[p[0] & 3]), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    uint8_t* f;
    size_t const s = tu_compress(c, &f, p + 1, n - 1);
    assert_false(lmc_is_error(s));
    uint8_t* const out = (uint8_t*)tu_xmalloc(n);
    assert_int_equal(lmc_decompress(d, out, n, f, s), n - 1);
    assert_true(n == 1 || memcmp(out, p + 1, n - 1) == 0);
    free(out); free(f);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
}

static void replay_safetensors(const uint8_t* p, size_t n)
{
    uint64_t ht;
    (void)lmc_st_probe(p, n, &ht);
    lmc_st_info info;
    if (lmc_st_parse(&info, p, n, n) == 0) lmc_st_free(&info);
    if (lmc_st_parse(&info, p, n, UINT64_MAX) == 0) lmc_st_free(&info);
    replay_roundtrip(p, n);
}

static void replay_refctx(const uint8_t* p, size_t n) { (void)LLVMFuzzerTestOneInput(p, n); }

static void replay_chunk(const uint8_t* p, size_t n) { (void)lmc_fuzz_chunk_one(p, n); }

static void replay_manifest(const uint8_t* p, size_t n)
{
    lmc_manifest m;
    char err[256];
    if (lmc_is_error(lmc_manifest_parse(&m, (const char*)p, n, err, sizeof err))) return;
    free(lmc_manifest_dump(&m));
    lmc_manifest_free(&m);
}

static const struct { const char* target; void (*fn)(const uint8_t*, size_t); } k_targets[] = {
    { "frame", replay_frame }, { "block", replay_block }, { "huftable", replay_huftable },
    { "roundtrip", replay_roundtrip }, { "safetensors", replay_safetensors },
    { "refctx", replay_refctx }, { "chunk", replay_chunk }, { "manifest", replay_manifest },
};

static void test_replay(void** state)
{
    (void)state;
    char dir[256], path[768];
    size_t replayed = 0;
    for (size_t k = 0; k < sizeof(k_targets) / sizeof(k_targets[0]); k++) {
        snprintf(dir, sizeof(dir), "fuzz/regressions/%s", k_targets[k].target);
        DIR* const dp = opendir(dir);
        if (!dp) continue;
        struct dirent* e;
        while ((e = readdir(dp)) != NULL) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            size_t n;
            uint8_t* const p = tu_read_file(path, &n);
            if (!p) continue;
            k_targets[k].fn(p, n);
            free(p);
            replayed++;
        }
        closedir(dp);
    }
    (void)replayed;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay),
    };
    return cmocka_run_group_tests_name("regressions", tests, NULL, NULL);
}
