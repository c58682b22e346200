/*
 * fuzz_frame.c - libFuzzer target for whole-frame decoding.
 *
 * The input is a frame. It is decoded one-shot into a bounded buffer, then
 * streamed in small pieces (sizes from the input's hash), streamed whole
 * into a large buffer (the in-place path), and walked by
 * lmc_frame_stats_get. A fixed reference (derived deterministically) is set,
 * so delta frames made against it reach the XOR paths. Any success must be
 * consistent: one-shot and streaming agree on the content.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"

#define OUT_CAP (1u << 20)
#define REF_SIZE 4096

static uint8_t g_ref[REF_SIZE];
static uint8_t* g_out1;
static uint8_t* g_out2;

static void init(void)
{
    if (g_out1) return;
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < REF_SIZE; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; g_ref[i] = (uint8_t)x; }
    g_out1 = (uint8_t*)malloc(OUT_CAP);
    g_out2 = (uint8_t*)malloc(OUT_CAP);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    init();
    lmc_dctx* const d = lmc_dctx_create();
    if (!d) return 0;
    lmc_dctx_set_param(d, LMC_D_MAX_CHUNK_LOG, 21);
    lmc_dctx_set_ref(d, g_ref, REF_SIZE);
    size_t const r1 = lmc_decompress(d, g_out1, OUT_CAP, data, size);

    /* streaming, small pieces */
    lmc_dctx_set_param(d, LMC_D_THREADS, size % 3 + 1);
    size_t ip = 0, op = 0, step = 1 + (size % 13), r2 = 1;
    unsigned idle = 0;
    while (!lmc_is_error(r2) && r2 != 0 && idle < 4) {
        size_t const il = ip + step <= size ? step : size - ip;
        size_t const ol = op + 37 <= OUT_CAP ? 37 : OUT_CAP - op;
        lmc_inbuf in = { data + ip, il, 0 };
        lmc_outbuf out = { g_out2 + op, ol, 0 };
        r2 = lmc_decompress_stream(d, &out, &in);
        ip += in.pos; op += out.pos;
        idle = (in.pos == 0 && out.pos == 0) ? idle + 1 : 0;
    }
    int const ok2 = r2 == 0 && ip == size;
    if (!lmc_is_error(r1)) {
        if (!ok2 || op != r1 || memcmp(g_out1, g_out2, r1) != 0) abort();
    }
    if (ok2 && lmc_is_error(r1) && lmc_get_error(r1) != LMC_ERR_DST_TOO_SMALL) abort();

    /* streaming, the whole frame at once into a large buffer: the in-place
     * path (chunks decoded straight from the input into the output) */
    lmc_dctx_set_param(d, LMC_D_THREADS, (size >> 1) % 3 + 1);
    lmc_dctx_reset(d);
    {
        size_t ip3 = 0, op3 = 0, r4 = 1;
        unsigned idle3 = 0;
        while (!lmc_is_error(r4) && r4 != 0 && idle3 < 4) {
            lmc_inbuf in = { data + ip3, size - ip3, 0 };
            lmc_outbuf out = { g_out2 + op3, OUT_CAP - op3, 0 };
            r4 = lmc_decompress_stream(d, &out, &in);
            ip3 += in.pos; op3 += out.pos;
            idle3 = (in.pos == 0 && out.pos == 0) ? idle3 + 1 : 0;
        }
        int const ok4 = r4 == 0 && ip3 == size;
        if (!lmc_is_error(r1) && (!ok4 || op3 != r1 || memcmp(g_out1, g_out2, r1) != 0)) abort();
        if (ok4 && lmc_is_error(r1) && lmc_get_error(r1) != LMC_ERR_DST_TOO_SMALL) abort();
    }

    lmc_frame_stats st;
    size_t const r3 = lmc_frame_stats_get(&st, data, size);
    if (!lmc_is_error(r1) && (lmc_is_error(r3) || st.content_size != r1)) abort();
    lmc_dctx_free(d);
    return 0;
}
