/*
 * fuzz_detect.c - libFuzzer target for generic mode's width detection
 * (lib/encode/detect.c). Detection only looks at pieces of 4 KiB and more,
 * and its closer look at 128 KiB and more, beyond what a fuzzer's inputs
 * reach, so the input is a recipe: runs of bf16, f32 or byte values of
 * fuzzed lengths and alignments, up to 3 MiB. Checks that the runs
 * lmc_detect_split returns tile the piece exactly, in order, with sane
 * widths and reference offsets; every 16th input is also compressed in
 * generic mode (against a perturbed reference when the recipe asks) and
 * must decode to itself.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"
#include "detect.h"

static uint64_t next(uint64_t* s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* bf16 / f32 bits of a Gaussian-ish float of a given scale (sum of uniforms) */
static float gaussish(uint64_t* s, float scale)
{
    float t = 0;
    for (int k = 0; k < 4; k++) t += (float)(next(s) >> 40) / 16777216.0f - 0.5f;
    return t * scale;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 2) return 0;
    size_t const cap = (size_t)3 << 20;
    uint8_t* const a = (uint8_t*)malloc(cap);
    uint8_t* const r = (uint8_t*)malloc(cap);
    uint64_t s = 0x9E3779B97F4A7C15ull ^ data[0];
    int const with_ref = data[0] & 1, roundtrip = (data[0] >> 1 & 15) == 0;
    size_t n = 0;
    /* each 2 recipe bytes: kind (bf16, f32, random bytes, zeros), filler
     * bytes before it (0-3), length in 4 KiB steps (1-64) */
    for (size_t i = 1; i + 1 < size && n < cap; i += 2) {
        unsigned const kind = data[i] & 3, skip = data[i] >> 2 & 3;
        size_t len = ((size_t)(data[i + 1] & 63) + 1) * 4096;
        for (unsigned k = 0; k < skip && n < cap; k++, n++) a[n] = r[n] = (uint8_t)next(&s);
        if (len > cap - n) len = cap - n;
        float const scale = 0.001f + (float)(data[i] >> 4) * 0.01f;
        size_t j = 0;
        if (kind == 0) {
            for (; j + 2 <= len; j += 2) {
                float const w = gaussish(&s, scale), v = w + gaussish(&s, scale * 0.01f);
                uint32_t x, y;
                memcpy(&x, &w, 4); memcpy(&y, &v, 4);
                a[n + j] = (uint8_t)(x >> 16); a[n + j + 1] = (uint8_t)(x >> 24);
                r[n + j] = (uint8_t)(y >> 16); r[n + j + 1] = (uint8_t)(y >> 24);
            }
        } else if (kind == 1) {
            for (; j + 4 <= len; j += 4) {
                float const w = gaussish(&s, scale), v = w + gaussish(&s, scale * 0.001f);
                memcpy(a + n + j, &w, 4); memcpy(r + n + j, &v, 4);
            }
        } else if (kind == 2) {
            for (; j < len; j++) a[n + j] = r[n + j] = (uint8_t)next(&s);
        } else {
            memset(a + n, 0, len); memset(r + n, 0, len);
            j = len;
        }
        for (; j < len; j++) a[n + j] = r[n + j] = 0;
        n += len;
    }
    if (n == 0) { free(a); free(r); return 0; }

    /* the split itself, as the chunk encoder calls it, at an odd content offset */
    static lmc_piece out[LMC_DETECT_MAX_OUT];
    size_t const len = n > 0xFFFFFFFFu ? 0xFFFFFFFFu : n;
    lmc_piece in;
    memset(&in, 0, sizeof(in));
    in.off = 1000003; in.len = (uint32_t)len; in.width = 1; in.dtype = LMC_DTYPE_BYTES;
    in.xor_ref = (uint8_t)with_ref; in.ref_off = with_ref ? 77 : 0; in.detect = 1;
    size_t const k = lmc_detect_split(&in, a, with_ref ? r : NULL, out);
    if (k == 0 || k > LMC_DETECT_MAX_OUT) abort();
    uint64_t pos = 0;
    for (size_t i = 0; i < k; i++) {
        const lmc_piece* const p = &out[i];
        if (p->off != in.off + pos || p->len == 0 || p->detect) abort();
        if (p->ref_off != in.ref_off + pos || p->xor_ref != in.xor_ref) abort();
        if (p->width != 1 && p->width != 2 && p->width != 4) abort();
        if ((p->width > 1) != (p->float_like != 0)) abort();
        if (p->width > 1 && p->len < LMC_MIN_PIECE) abort();
        pos += p->len;
    }
    if (pos != len) abort();

    if (roundtrip) {
        lmc_cctx* const c = lmc_cctx_create();
        lmc_dctx* const d = lmc_dctx_create();
        lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_GENERIC);
        lmc_cctx_set_param(c, LMC_P_THREADS, 1);
        if (with_ref) { lmc_cctx_set_ref(c, r, n); lmc_dctx_set_ref(d, r, n); }
        size_t const bound = lmc_compress_bound(n);
        uint8_t* const f = (uint8_t*)malloc(bound);
        uint8_t* const o = (uint8_t*)malloc(n);
        size_t const fs = lmc_compress(c, f, bound, a, n);
        if (lmc_is_error(fs)) abort();
        if (lmc_decompress(d, o, n, f, fs) != n || memcmp(o, a, n) != 0) abort();
        free(f); free(o);
        lmc_cctx_free(c); lmc_dctx_free(d);
    }
    free(a); free(r);
    return 0;
}
