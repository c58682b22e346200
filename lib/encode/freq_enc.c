/* freq_enc.c - rANS frequency tables (doc/format.md, "ANS"). */
#include <string.h>
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

/* Bits to code a group's symbols with its own table, plus the table: the
 * entropy, then lmc_freq_write's bytes roughly (a frequency >= 128 of 4096,
 * two bytes, goes to roughly the symbols above 1/32). */
static float group_cost(const uint32_t* c, unsigned alpha)
{
    uint32_t n = 0;
    float s = 0;
    size_t table = 2 + 1;
    unsigned zeros = 0;
    for (unsigned a = 0; a < alpha; a++) {
        if (!c[a]) { zeros++; continue; }
        if (zeros) { table += 2; zeros = 0; }
        n += c[a];
        s += (float)c[a] * lmc_fast_log2((float)c[a]);
        table += 1;
    }
    if (!n) return 0;
    for (unsigned a = 0; a < alpha; a++) table += (uint64_t)c[a] * 32 >= n;
    return (float)n * lmc_fast_log2((float)n) - s + 8.0f * (float)table;
}

static float merged_cost(const uint32_t* a, const uint32_t* b, unsigned alpha)
{
    uint32_t t[256];
    for (unsigned s = 0; s < alpha; s++) t[s] = a[s] + b[s];
    return group_cost(t, alpha);
}

unsigned lmc_freq_merge(uint32_t* rows, size_t stride, uint8_t* first, unsigned n, unsigned alpha, unsigned max_groups)
{
    unsigned G = n;
    float cost[256], delta[256];
#define ROW(g) (rows + (size_t)(g) * stride)
    for (unsigned g = 0; g < G; g++) cost[g] = group_cost(ROW(g), alpha);
    for (unsigned g = 0; g + 1 < G; g++) delta[g] = merged_cost(ROW(g), ROW(g + 1), alpha) - cost[g] - cost[g + 1];
    while (G > 1) {
        unsigned best = 0;
        for (unsigned g = 1; g + 1 < G; g++) if (delta[g] < delta[best]) best = g;
        if (G <= max_groups && delta[best] >= 0) break;
        for (unsigned s = 0; s < alpha; s++) ROW(best)[s] += ROW(best + 1)[s];
        cost[best] += cost[best + 1] + delta[best];
        for (unsigned g = best + 1; g + 1 < G; g++) {
            first[g] = first[g + 1];
            cost[g] = cost[g + 1];
            delta[g] = delta[g + 1];
            memcpy(ROW(g), ROW(g + 1), alpha * sizeof(uint32_t));
        }
        G--;
        if (best > 0) delta[best - 1] = merged_cost(ROW(best - 1), ROW(best), alpha) - cost[best - 1] - cost[best];
        if (best + 1 < G) delta[best] = merged_cost(ROW(best), ROW(best + 1), alpha) - cost[best] - cost[best + 1];
    }
#undef ROW
    return G;
}
