/* freq_dec.c - rANS frequency tables, read from hostile bytes. */
#include <string.h>
#include "freq_dec.h"
#include "error.h"
#include "mem.h"

size_t lmc_freq_read(uint16_t* f, unsigned alpha, const uint8_t* src, size_t size)
{
    LMC_RETURN_IF(size < 2, TRUNCATED);
    unsigned const nsym = lmc_rd16(src);
    LMC_RETURN_IF(nsym == 0 || nsym > alpha, CORRUPT);
    memset(f, 0, alpha * sizeof(*f));
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

void lmc_freq_slots(uint32_t* T, const uint16_t* f, unsigned alpha)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < alpha; s++) {
        uint32_t const fs = f[s];
        uint32_t const base = s | ((fs - 1) << 20);
        for (uint32_t k = 0; k < fs; k++) T[cum + k] = base | (k << 8);
        cum += fs;
    }
}
