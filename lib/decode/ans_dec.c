/* ans_dec.c - order-0 rANS decoding: one 16 KiB slot table gives symbol,
 * frequency and offset in a single load. The fast loop decodes 4 symbols
 * (one per state) per round while 10 input bytes remain: a state reads at
 * most one 16-bit word per symbol, with a conditional move. The stream is accepted only if it is consumed
 * exactly and every state returns to its initial value L. */
#include <string.h>
#include "ans_dec.h"
#include "error.h"
#include "mem.h"

static size_t read_table(uint16_t* f, const uint8_t* src, size_t size)
{
    LMC_RETURN_IF(size < 2, TRUNCATED);
    unsigned const nsym = lmc_rd16(src);
    LMC_RETURN_IF(nsym == 0 || nsym > 256, CORRUPT);
    memset(f, 0, 256 * sizeof(*f));
    size_t pos = 2;
    uint32_t sum = 0;
    for (unsigned s = 0; s < nsym;) {
        LMC_RETURN_IF(pos >= size, TRUNCATED);
        unsigned const b = src[pos++];
        if (b == 0) {
            LMC_RETURN_IF(pos >= size, TRUNCATED);
            unsigned const z = (unsigned)src[pos++] + 1;
            LMC_RETURN_IF(z > nsym - s, CORRUPT);
            s += z;
            continue;
        }
        unsigned v = b;
        if (b >= 128) {
            LMC_RETURN_IF(pos >= size, TRUNCATED);
            v = ((b & 127) << 8) | src[pos++];
            LMC_RETURN_IF(v < 128, CORRUPT);   /* one encoding per value */
        }
        LMC_RETURN_IF(v > LMC_ANS_M, CORRUPT);
        f[s++] = (uint16_t)v;
        sum += v;
    }
    LMC_RETURN_IF(sum != LMC_ANS_M, CORRUPT);
    return pos;
}

#define ANS_STEP(j, o)                                                            \
    do {                                                                          \
        uint32_t const e_ = T[x[j] & (LMC_ANS_M - 1)];                            \
        (o) = (uint8_t)e_;                                                        \
        x[j] = ((e_ >> 20) + 1) * (x[j] >> LMC_ANS_PROB_BITS) + ((e_ >> 8) & (LMC_ANS_M - 1)); \
    } while (0)

size_t lmc_ans_decode(lmc_ans_dws* ws, uint8_t* dst, size_t m, const uint8_t* src, size_t size)
{
    size_t const tsz = read_table(ws->freq, src, size);
    LMC_FORWARD(tsz);
    uint32_t* const T = ws->slot;
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = ws->freq[s];
        for (uint32_t k = 0; k < f; k++) T[cum + k] = s | (k << 8) | ((f - 1) << 20);
        cum += f;
    }
    size_t pos = tsz;
    LMC_RETURN_IF(size - pos < 4 * LMC_ANS_STATES, TRUNCATED);
    uint32_t x[LMC_ANS_STATES];
    for (int j = 0; j < LMC_ANS_STATES; j++) {
        x[j] = lmc_rd32(src + pos); pos += 4;
        LMC_RETURN_IF(x[j] < LMC_ANS_L, CORRUPT);
    }
    const uint8_t* p = src + pos;
    const uint8_t* const end = src + size;
    uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    size_t i = 0;
#define ANS_GET(xs, o)                                                                      \
    do {                                                                                    \
        uint32_t const e_ = T[(xs) & (LMC_ANS_M - 1)];                                      \
        (o) = (uint8_t)e_;                                                                  \
        (xs) = ((e_ >> 20) + 1) * ((xs) >> LMC_ANS_PROB_BITS) + ((e_ >> 8) & (LMC_ANS_M - 1)); \
        uint32_t const need_ = (xs) < LMC_ANS_L;                                            \
        uint32_t const w_ = lmc_rd16(p);                                                    \
        (xs) = need_ ? ((xs) << 16) | w_ : (xs);                                            \
        p += 2 * need_;                                                                     \
    } while (0)
    /* a round of 4 symbols reads at most 8 bytes (and peeks 2 more) */
    for (; i + 4 <= m && end - p >= 10; i += 4) {
        ANS_GET(x0, dst[i]); ANS_GET(x1, dst[i + 1]); ANS_GET(x2, dst[i + 2]); ANS_GET(x3, dst[i + 3]);
    }
#undef ANS_GET
    x[0] = x0; x[1] = x1; x[2] = x2; x[3] = x3;
    for (; i < m; i++) {
        int const j = (int)(i & 3);
        ANS_STEP(j, dst[i]);
        if (x[j] < LMC_ANS_L) {
            LMC_RETURN_IF(end - p < 2, CORRUPT);
            x[j] = (x[j] << 16) | lmc_rd16(p);
            p += 2;
        }
    }
    LMC_RETURN_IF(p != end, CORRUPT);
    for (int j = 0; j < LMC_ANS_STATES; j++) LMC_RETURN_IF(x[j] != LMC_ANS_L, CORRUPT);
    return 0;
}
