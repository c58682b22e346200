/* group.c - the first pass over the input: delta, rotate, scatter bytes. */
#include <math.h>
#include <string.h>
#include "group.h"
#include "mem.h"

LMC_FORCE_INLINE uint16_t rot16(uint16_t v) { return (uint16_t)((v << 1) | (v >> 15)); }
LMC_FORCE_INLINE uint32_t rot32(uint32_t v) { return (v << 1) | (v >> 31); }
LMC_FORCE_INLINE uint64_t rot64(uint64_t v) { return (v << 1) | (v >> 63); }

/* Specialised per (width, ref?, rotated?) so the inner loops carry no branches. */
#define GROUP2(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint16_t v = lmc_rd16(src + 2 * i); \
        if (REF) v ^= lmc_rd16(ref + 2 * i); \
        if (ROT) v = rot16(v); \
        d0[i] = (uint8_t)v; d1[i] = (uint8_t)(v >> 8); \
    }
#define GROUP4(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint32_t v = lmc_rd32(src + 4 * i); \
        if (REF) v ^= lmc_rd32(ref + 4 * i); \
        if (ROT) v = rot32(v); \
        d0[i] = (uint8_t)v; d1[i] = (uint8_t)(v >> 8); d2[i] = (uint8_t)(v >> 16); d3[i] = (uint8_t)(v >> 24); \
    }

void lmc_group(uint8_t* dst, const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int rotated)
{
    if (w == 1) {
        if (!ref) { memcpy(dst, src, n); return; }
        for (size_t i = 0; i < n; i++) dst[i] = src[i] ^ ref[i];
        return;
    }
    if (w == 2) {
        uint8_t* const d0 = dst; uint8_t* const d1 = dst + n;
        if (ref) { if (rotated) { GROUP2(1, 1) } else { GROUP2(1, 0) } }
        else     { if (rotated) { GROUP2(0, 1) } else { GROUP2(0, 0) } }
        return;
    }
    if (w == 4) {
        uint8_t* const d0 = dst; uint8_t* const d1 = dst + n; uint8_t* const d2 = dst + 2 * n; uint8_t* const d3 = dst + 3 * n;
        if (ref) { if (rotated) { GROUP4(1, 1) } else { GROUP4(1, 0) } }
        else     { if (rotated) { GROUP4(0, 1) } else { GROUP4(0, 0) } }
        return;
    }
    /* w == 8 */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = lmc_rd64(src + 8 * i);
        if (ref) v ^= lmc_rd64(ref + 8 * i);
        if (rotated) v = rot64(v);
        for (unsigned k = 0; k < 8; k++) dst[k * n + i] = (uint8_t)(v >> (8 * k));
    }
}

static double entropy_bits(const uint32_t* h, uint32_t total)
{
    double bits = 0;
    for (int s = 0; s < 256; s++)
        if (h[s]) bits -= (double)h[s] * log2((double)h[s] / total);
    return bits;
}

unsigned lmc_choose_coding(const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int float_like)
{
    int const try_rot = float_like && w >= 2;
    if (n < 16 || (!try_rot && !ref)) return ref ? LMC_CODING_XOR : 0;
    /* Candidates: {plain, XOR} x {grouped, rotated}, compared by the order-0
     * entropy of their byte streams on evenly spaced windows of the piece.
     * XOR is not always better: Adam moments change by more than their
     * magnitude, and then the delta is noisier than the values. */
    enum { WINDOW = 256, WINDOWS = 8 };
    uint32_t h[4][8][256];
    memset(h, 0, sizeof(h[0]) * 4);
    size_t const nwin = n <= (size_t)WINDOW * WINDOWS ? 1 : WINDOWS;
    size_t const span = nwin == 1 ? n : WINDOW;
    size_t const stride = nwin == 1 ? 0 : (n - span) / (nwin - 1);
    unsigned const bits = 8 * w;
    for (size_t wi = 0; wi < nwin; wi++) {
        size_t const start = wi * stride;
        for (size_t i = start; i < start + span; i++) {
            uint64_t v = 0, r = 0;
            memcpy(&v, src + i * w, w);
            if (ref) memcpy(&r, ref + i * w, w);
            for (unsigned c = 0; c < 4; c++) {
                uint64_t x = (c & LMC_CODING_XOR) ? v ^ r : v;
                if (c & LMC_CODING_ROT) x = bits == 64 ? ((x << 1) | (x >> 63)) : (((x << 1) | (x >> (bits - 1))) & ((1ull << bits) - 1));
                for (unsigned k = 0; k < w; k++) h[c][k][(uint8_t)(x >> (8 * k))]++;
            }
        }
    }
    uint32_t const total = (uint32_t)(nwin * span);
    unsigned best = ref ? LMC_CODING_XOR : 0;
    double best_e = 0;
    for (unsigned k = 0; k < w; k++) best_e += entropy_bits(h[best][k], total);
    for (unsigned c = 0; c < 4; c++) {
        if (((c & LMC_CODING_XOR) && !ref) || ((c & LMC_CODING_ROT) && !try_rot) || c == best) continue;
        double e = 0;
        for (unsigned k = 0; k < w; k++) e += entropy_bits(h[c][k], total);
        if (e < best_e * 0.995) { best_e = e; best = c; }
    }
    return best;
}
