/*
 * fuzz_refctx.c - libFuzzer target for one REFCTX value block:
 * lmc_refctx_decode on the bytes after a 3-byte prefix: byte 0 bit 0 picks the
 * width (2 or 4 bytes), bytes 1-2 give m - 1 (m = 1..65536 values). The
 * reference values come from a fixed generator (weights-like exponents), so
 * the input is all block. The decoder must never read past the block or the
 * m reference values, nor write past dst + m*w. Then the same bytes as both
 * blocks of a pair (lmc_refctx_decode_pair: the token loops of two wide,
 * or two sparse, blocks interleaved), the second read as m - (byte 0 bits
 * 1-6) values, with the same bounds on each.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "refctx_dec.h"
#include "lmc.h"

static lmc_refctx_dws g_rc_ws, g_rc_ws2;

/* Shared with fuzz/corpus generation and the regression replay. */
void lmc_fuzz_refctx_ref(uint8_t* ref, size_t m, unsigned w);
void lmc_fuzz_refctx_ref(uint8_t* ref, size_t m, unsigned w)
{
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < m; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        uint32_t const e = 112 + (x >> 8) % 20;
        uint32_t const v = w == 2 ? ((x & 1) << 15 | e << 7 | ((x >> 16) & 0x7F))
                                  : ((x & 1) << 31 | e << 23 | ((x >> 9) & 0x7FFFFF));
        memcpy(ref + i * w, &v, w);   /* little-endian hosts: the fuzzer runs on x86 */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 3) return 0;
    unsigned const w = (data[0] & 1) ? 4 : 2;
    size_t const m = ((size_t)data[1] | (size_t)data[2] << 8) + 1;
    uint8_t* const ref = (uint8_t*)malloc(m * w);   /* exact sizes: ASan sees any overrun */
    uint8_t* const dst = (uint8_t*)malloc(m * w);
    uint8_t* const blk = (uint8_t*)malloc(size - 3 ? size - 3 : 1);
    if (!ref || !dst || !blk) abort();
    lmc_fuzz_refctx_ref(ref, m, w);
    memcpy(blk, data + 3, size - 3);
    (void)lmc_refctx_decode(&g_rc_ws, dst, m, w, ref, blk, size - 3);
    size_t const less = (data[0] >> 1) & 63, m2 = m > less ? m - less : 1;
    uint8_t* const dst2 = (uint8_t*)malloc(m2 * w);
    if (!dst2) abort();
    lmc_refctx_job const a = { dst, ref, blk, m, size - 3 }, b = { dst2, ref, blk, m2, size - 3 };
    (void)lmc_refctx_decode_pair(&g_rc_ws, &g_rc_ws2, w, &a, &b);
    free(ref); free(dst); free(dst2); free(blk);
    return 0;
}
