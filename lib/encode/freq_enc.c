/* freq_enc.c - rANS frequency tables (doc/format.md, "ANS"). */
#include "freq_enc.h"
#include "mem.h"

void lmc_freq_normalise(uint16_t* f, const uint32_t* hist, unsigned alpha, uint64_t total)
{
    uint32_t sum = 0;
    unsigned top = 0;
    for (unsigned s = 0; s < alpha; s++) {
        if (!hist[s]) { f[s] = 0; continue; }
        uint64_t const v = ((uint64_t)hist[s] * LMC_ANS_M + total / 2) / total;
        f[s] = (uint16_t)(v ? v : 1);
        sum += f[s];
        if (hist[s] > hist[top]) top = s;
    }
    /* rounding leaves the sum a little off: settle the difference on the
     * largest frequencies, where it costs the least */
    if (sum < LMC_ANS_M) { f[top] = (uint16_t)(f[top] + (LMC_ANS_M - sum)); sum = LMC_ANS_M; }
    while (sum > LMC_ANS_M) {
        unsigned big = top;
        for (unsigned s = 0; s < alpha; s++) if (f[s] > f[big]) big = s;
        uint32_t const take = LMC_MIN(sum - LMC_ANS_M, (uint32_t)f[big] - 1);
        if (take == 0) break;   /* cannot happen: at most 256 symbols of 1 */
        f[big] = (uint16_t)(f[big] - take);
        sum -= take;
    }
}

static unsigned used_symbols(const uint16_t* f, unsigned alpha)
{
    while (alpha > 0 && f[alpha - 1] == 0) alpha--;
    return alpha;
}

size_t lmc_freq_size(const uint16_t* f, unsigned alpha)
{
    unsigned const nsym = used_symbols(f, alpha);
    size_t n = 2;
    for (unsigned s = 0; s < nsym;) {
        if (f[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && f[s + z] == 0 && z < 256) z++;
            n += 2; s += z;
            continue;
        }
        n += f[s] < 128 ? 1 : 2;
        s++;
    }
    return n;
}

size_t lmc_freq_write(uint8_t* dst, const uint16_t* f, unsigned alpha)
{
    unsigned const nsym = used_symbols(f, alpha);
    uint8_t* p = dst;
    lmc_wr16(p, (uint16_t)nsym); p += 2;
    for (unsigned s = 0; s < nsym;) {
        if (f[s] == 0) {
            unsigned z = 1;
            while (s + z < nsym && f[s + z] == 0 && z < 256) z++;
            *p++ = 0; *p++ = (uint8_t)(z - 1);
            s += z;
            continue;
        }
        if (f[s] < 128) *p++ = (uint8_t)f[s];
        else { *p++ = (uint8_t)(0x80 | (f[s] >> 8)); *p++ = (uint8_t)f[s]; }
        s++;
    }
    return (size_t)(p - dst);
}

void lmc_freq_esyms(lmc_freq_esym* e, const uint16_t* f, unsigned alpha)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < alpha; s++) {
        uint32_t const fs = f[s];
        if (!fs) continue;
        e[s].xmax = ((LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * fs;
        e[s].cmpl = (uint16_t)(LMC_ANS_M - fs);
        if (fs < 2) {
            /* x / 1 == x: a reciprocal of ~0 with shift 0 gives q = x - 1, fixed by the bias */
            e[s].rcp = ~0u; e[s].shift = 0; e[s].bias = cum + LMC_ANS_M - 1;
        } else {
            unsigned shift = 0;
            while (fs > (1u << shift)) shift++;
            e[s].rcp = (uint32_t)(((1ull << (shift + 31)) + fs - 1) / fs);
            e[s].shift = (uint8_t)(shift - 1);
            e[s].bias = cum;
        }
        cum += fs;
    }
}
