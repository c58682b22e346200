/*
 * fuzz_huftable.c - libFuzzer target for the Huffman table reader and the
 * canonical code builder, for both alphabets (literals, and literals + runs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block_dec.h"
#include "huf.h"
#include "lmc.h"

static void one(const uint8_t* data, size_t size, unsigned alpha)
{
    uint8_t len[LMC_ALPHA_RLE + 16];
    uint16_t code[LMC_ALPHA_RLE + 16];
    memset(len, 0xEE, sizeof(len));
    size_t const r = lmc_huf_read_table(len, alpha, data, size);
    if (lmc_is_error(r)) return;
    if (r < 2 || r > size) abort();
    for (unsigned s = alpha; s < sizeof(len); s++) if (len[s] != 0xEE) abort();   /* nothing past alpha */
    uint64_t kraft = 0;
    unsigned used = 0;
    for (unsigned s = 0; s < alpha; s++) {
        if (len[s] > LMC_HUF_MAXBITS) abort();
        if (len[s]) { used++; kraft += (uint64_t)1 << (LMC_HUF_MAXBITS - len[s]); }
    }
    int const c = lmc_huf_canonical(code, len, alpha);
    int const valid = used > 0 && kraft <= (1u << LMC_HUF_MAXBITS);
    if ((c == 0) != valid) abort();
    if (c == 0) {
        /* prefix-free: no code is a prefix of another (bit-reversed: low bits) */
        for (unsigned a = 0; a < alpha; a++) {
            if (!len[a]) continue;
            if (code[a] >> len[a]) abort();
            for (unsigned b = a + 1; b < alpha; b++) {
                if (!len[b]) continue;
                unsigned const l = len[a] < len[b] ? len[a] : len[b];
                if ((code[a] & ((1u << l) - 1)) == (code[b] & ((1u << l) - 1))) abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    one(data, size, LMC_ALPHA_LIT);
    one(data, size, LMC_ALPHA_RLE);
    return 0;
}
