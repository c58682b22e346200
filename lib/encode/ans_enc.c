/* ans_enc.c - order-0 rANS with 4 interleaved 32-bit states and byte-wise
 * renormalisation. Division by the symbol frequency is replaced by a
 * multiplication with a precomputed reciprocal (Alverson's method), so the
 * per-symbol cost is a multiply, a shift and an add. */
#include <string.h>
#include "ans_enc.h"
#include "mem.h"

static void normalise(uint16_t* f, const uint32_t hist[256], size_t m)
{
    uint32_t sum = 0;
    unsigned top = 0;
    for (unsigned s = 0; s < 256; s++) {
        if (!hist[s]) { f[s] = 0; continue; }
        uint64_t v = ((uint64_t)hist[s] * LMC_ANS_M + m / 2) / m;
        f[s] = (uint16_t)(v ? v : 1);
        sum += f[s];
        if (hist[s] > hist[top]) top = s;
    }
    /* rounding leaves the sum a little off: settle the difference on the
     * largest frequencies, where it costs the least */
    while (sum < LMC_ANS_M) { f[top]++; sum++; }
    while (sum > LMC_ANS_M) {
        unsigned big = top;
        for (unsigned s = 0; s < 256; s++) if (f[s] > f[big]) big = s;
        uint32_t const take = LMC_MIN(sum - LMC_ANS_M, (uint32_t)f[big] - 1);
        if (take == 0) break;   /* cannot happen: 256 symbols of 1 sum to << M */
        f[big] = (uint16_t)(f[big] - take);
        sum -= take;
    }
}

static size_t table_bytes(const uint16_t* f)
{
    unsigned nsym = 256;
    while (nsym > 0 && f[nsym - 1] == 0) nsym--;
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

size_t lmc_ans_prepare(lmc_ans_ws* ws, const uint32_t hist[256], size_t m)
{
    normalise(ws->freq, hist, m);
    float bits = 0;
    for (unsigned s = 0; s < 256; s++)
        if (hist[s]) bits += (float)hist[s] * (LMC_ANS_PROB_BITS - lmc_fast_log2((float)ws->freq[s]));
    return table_bytes(ws->freq) + 4 * LMC_ANS_STATES + (size_t)(bits / 8) + 2;
}

static size_t write_table(uint8_t* p, const uint16_t* f)
{
    unsigned nsym = 256;
    while (nsym > 0 && f[nsym - 1] == 0) nsym--;
    uint8_t* const start = p;
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
    return (size_t)(p - start);
}

size_t lmc_ans_encode(lmc_ans_ws* ws, uint8_t* dst, size_t cap, const uint8_t* src, size_t m)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t const f = ws->freq[s];
        lmc_ans_esym* const e = &ws->sym[s];
        if (!f) continue;
        e->xmax = ((LMC_ANS_L >> LMC_ANS_PROB_BITS) << 16) * f;
        e->cmpl = (uint16_t)(LMC_ANS_M - f);
        if (f < 2) {
            /* x / 1 == x: a reciprocal of ~0 with shift 0 gives q = x - 1, fixed by the bias */
            e->rcp = ~0u; e->shift = 0; e->bias = cum + LMC_ANS_M - 1;
        } else {
            unsigned shift = 0;
            while (f > (1u << shift)) shift++;
            e->rcp = (uint32_t)(((1ull << (shift + 31)) + f - 1) / f);
            e->shift = (uint8_t)(shift - 1);
            e->bias = cum;
        }
        cum += f;
    }
    uint8_t* const end = ws->scratch + sizeof(ws->scratch);
    uint8_t* p = end;
    uint8_t* const lo = ws->scratch + 16;
    const lmc_ans_esym* const S = ws->sym;
    /* states live in registers: symbol i uses state i mod 4; a state emits at
     * most one 16-bit word per symbol */
#define ANS_PUT(xs, sym)                                                          \
    do {                                                                          \
        const lmc_ans_esym* const e_ = &S[sym];                                   \
        if ((xs) >= e_->xmax) { p -= 2; lmc_wr16(p, (uint16_t)(xs)); (xs) >>= 16; } \
        uint32_t const q_ = (uint32_t)(((uint64_t)(xs) * e_->rcp) >> 32) >> e_->shift; \
        (xs) = (xs) + e_->bias + q_ * e_->cmpl;                                   \
    } while (0)
    uint32_t x0 = LMC_ANS_L, x1 = LMC_ANS_L, x2 = LMC_ANS_L, x3 = LMC_ANS_L;
    size_t i = m;
    while (i & 3) {               /* the tail first: coding runs backwards */
        i--;
        switch (i & 3) { case 0: ANS_PUT(x0, src[i]); break; case 1: ANS_PUT(x1, src[i]); break;
                         case 2: ANS_PUT(x2, src[i]); break; default: ANS_PUT(x3, src[i]); break; }
    }
    while (i) {
        if (p - lo < 16) return 0;
        i -= 4;
        ANS_PUT(x3, src[i + 3]); ANS_PUT(x2, src[i + 2]); ANS_PUT(x1, src[i + 1]); ANS_PUT(x0, src[i]);
    }
#undef ANS_PUT
    uint32_t const x[LMC_ANS_STATES] = { x0, x1, x2, x3 };
    size_t const body = (size_t)(end - p);
    size_t const tsz = table_bytes(ws->freq);
    size_t const total = tsz + 4 * LMC_ANS_STATES + body;
    if (total > cap) return 0;
    uint8_t* o = dst + write_table(dst, ws->freq);
    for (int j = 0; j < LMC_ANS_STATES; j++) { lmc_wr32(o, x[j]); o += 4; }
    memcpy(o, p, body);
    return total;
}
