/*
 * fuzz_block.c - libFuzzer target for one block: lmc_block_decode with the
 * block size m taken from the first two bytes (1..65536), then the block skip.
 * The decoder must never read past src + srcSize nor write past dst + m.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block_dec.h"
#include "lmc.h"

static lmc_block_dws g_ws;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 2) return 0;
    size_t const m = ((size_t)data[0] | (size_t)data[1] << 8) + 1;
    uint8_t* const dst = (uint8_t*)malloc(m);   /* exact size: ASan sees any overrun */
    if (!dst) return 0;
    size_t const r = lmc_block_decode(&g_ws, dst, m, data + 2, size - 2);
    unsigned coder;
    size_t const sk = lmc_block_skip(data + 2, size - 2, m, &coder);
    if (!lmc_is_error(r)) {
        if (r > size - 2 || lmc_is_error(sk) || sk != r) abort();
    }
    free(dst);
    return 0;
}
