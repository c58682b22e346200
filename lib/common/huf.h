/* huf.h - what the Huffman encoder and decoder must agree on (doc/format.md, "Block"). */
#ifndef LMC_HUF_H
#define LMC_HUF_H

#include <stddef.h>
#include <stdint.h>

#define LMC_BLOCK_MAX     65536u
#define LMC_HUF_MAXBITS   11
#define LMC_HUF_TABLE_SIZE (1u << LMC_HUF_MAXBITS)
#define LMC_ALPHA_LIT     256
/* Run symbols (RLE_HUF): 256..271 repeat the previous byte 1..16 times;
 * 272+j (j = 0..11) repeat it 16*2^j + 1 + e times, e in 4+j extra bits.
 * Exact short lengths let the Huffman code follow the (roughly geometric)
 * run-length distribution instead of paying raw extra bits for it. */
#define LMC_RUN_EXACT     16
#define LMC_RUN_CLASSES   12
#define LMC_RUN_CODES     (LMC_RUN_EXACT + LMC_RUN_CLASSES)
#define LMC_ALPHA_RLE     (LMC_ALPHA_LIT + LMC_RUN_CODES)
#define LMC_NIBBLE_ZRUN   15          /* table nibble: next nibble z gives z+3 absent symbols */

/* Canonical codes from lengths (DEFLATE's rule), returned bit-reversed so that
 * they can be written LSB-first and looked up by the decoder's low bits.
 * Returns 0, or -1 if the lengths oversubscribe the code space (Kraft > 1)
 * or no symbol has a code. */
static inline int lmc_huf_canonical(uint16_t* rev_code, const uint8_t* len, unsigned alpha)
{
    unsigned count[LMC_HUF_MAXBITS + 1] = { 0 };
    unsigned next[LMC_HUF_MAXBITS + 2];
    unsigned used = 0;
    for (unsigned s = 0; s < alpha; s++) {
        if (len[s] > LMC_HUF_MAXBITS) return -1;
        count[len[s]]++;
    }
    count[0] = 0;
    unsigned code = 0;
    uint32_t kraft = 0;  /* in units of 2^-MAXBITS */
    for (unsigned b = 1; b <= LMC_HUF_MAXBITS; b++) {
        code = (code + count[b - 1]) << 1;
        next[b] = code;
        kraft += count[b] << (LMC_HUF_MAXBITS - b);
        used += count[b];
    }
    if (used == 0 || kraft > (1u << LMC_HUF_MAXBITS)) return -1;
    for (unsigned s = 0; s < alpha; s++) {
        unsigned const l = len[s];
        if (!l) { rev_code[s] = 0; continue; }
        unsigned c = next[l]++, r = 0;
        for (unsigned i = 0; i < l; i++) { r = (r << 1) | (c & 1); c >>= 1; }
        rev_code[s] = (uint16_t)r;
    }
    return 0;
}

#endif
