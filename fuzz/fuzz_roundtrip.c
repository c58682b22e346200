/*
 * fuzz_roundtrip.c - libFuzzer target: compress then decompress must give the
 * input back, for a format/dtype/threads/reference choice taken from the
 * first byte. Streaming with a pledged size must give the same frame bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"

static const int k_dtypes[8] = { LMC_DTYPE_BF16, LMC_DTYPE_F16, LMC_DTYPE_F32, LMC_DTYPE_F64,
                                  LMC_DTYPE_U8, LMC_DTYPE_I32, LMC_DTYPE_BYTES, LMC_DTYPE_U64 };

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 1) return 0;
    unsigned const sel = data[0];
    const uint8_t* const src = data + 1;
    size_t const n = size - 1;
    int const fmt = (sel & 3) == 0 ? LMC_FORMAT_AUTO : (sel & 3) == 1 ? LMC_FORMAT_GENERIC
                  : (sel & 3) == 2 ? LMC_FORMAT_RAW : LMC_FORMAT_SAFETENSORS;
    int const dtype = k_dtypes[(sel >> 2) & 7];
    unsigned const threads = 1 + ((sel >> 5) & 1);
    unsigned const refmode = sel >> 6;   /* 0 none, 1 itself shifted, 2 half, 3 perturbed */

    uint8_t* ref = NULL;
    size_t refn = 0;
    if (refmode && n) {
        refn = refmode == 2 ? n / 2 + 1 : n;
        ref = (uint8_t*)malloc(refn);
        for (size_t i = 0; i < refn; i++) ref[i] = refmode == 1 ? src[(i + 1) % n] : src[i % n] ^ (uint8_t)(refmode == 3 && i % 7 == 0);
    }
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    lmc_cctx_set_param(c, LMC_P_FORMAT, fmt);
    lmc_cctx_set_param(c, LMC_P_DTYPE, dtype);
    lmc_cctx_set_param(c, LMC_P_THREADS, threads);
    lmc_cctx_set_param(c, LMC_P_CHUNK_LOG, 20);
    if (ref) { lmc_cctx_set_ref(c, ref, refn); lmc_dctx_set_ref(d, ref, refn); }
    size_t const cap = lmc_compress_bound(n);
    uint8_t* const f = (uint8_t*)malloc(cap);
    uint8_t* const g = (uint8_t*)malloc(cap);
    uint8_t* const out = (uint8_t*)malloc(n + 1);
    size_t const s = lmc_compress(c, f, cap, src, n);
    if (lmc_is_error(s)) abort();
    size_t const r = lmc_decompress(d, out, n + 1, f, s);
    if (r != n || (n && memcmp(out, src, n) != 0)) abort();
    /* streaming with the size pledged: identical bytes */
    lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, (long long)n);
    lmc_inbuf in = { src, n, 0 };
    lmc_outbuf o = { g, cap, 0 };
    size_t rs;
    int guard = 0;
    do { rs = lmc_compress_stream(c, &o, &in, 1); } while (!lmc_is_error(rs) && rs != 0 && ++guard < 1000);
    if (rs != 0 || o.pos != s || memcmp(f, g, s) != 0) abort();
    free(f); free(g); free(out); free(ref);
    lmc_cctx_free(c);
    lmc_dctx_free(d);
    return 0;
}
