/* ungroup.c - the last pass of decoding, fused like the encoder's first. */
#include <string.h>
#include "ungroup.h"
#include "mem.h"

LMC_FORCE_INLINE uint16_t unrot16(uint16_t v) { return (uint16_t)((v >> 1) | (v << 15)); }
LMC_FORCE_INLINE uint32_t unrot32(uint32_t v) { return (v >> 1) | (v << 31); }
LMC_FORCE_INLINE uint64_t unrot64(uint64_t v) { return (v >> 1) | (v << 63); }

#define UNGROUP2(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint16_t v = (uint16_t)(s0[i] | (s1[i] << 8)); \
        if (ROT) v = unrot16(v); \
        if (REF) v ^= lmc_rd16(ref + 2 * i); \
        lmc_wr16(dst + 2 * i, v); \
    }
#define UNGROUP4(REF, ROT) \
    for (size_t i = 0; i < n; i++) { \
        uint32_t v = (uint32_t)s0[i] | ((uint32_t)s1[i] << 8) | ((uint32_t)s2[i] << 16) | ((uint32_t)s3[i] << 24); \
        if (ROT) v = unrot32(v); \
        if (REF) v ^= lmc_rd32(ref + 4 * i); \
        lmc_wr32(dst + 4 * i, v); \
    }

void lmc_ungroup(uint8_t* dst, const uint8_t* streams, const uint8_t* ref, size_t n, unsigned w, int rotated)
{
    if (w == 1) {
        if (!ref) { memcpy(dst, streams, n); return; }
        for (size_t i = 0; i < n; i++) dst[i] = streams[i] ^ ref[i];
        return;
    }
    if (w == 2) {
        const uint8_t* const s0 = streams; const uint8_t* const s1 = streams + n;
        if (ref) { if (rotated) { UNGROUP2(1, 1) } else { UNGROUP2(1, 0) } }
        else     { if (rotated) { UNGROUP2(0, 1) } else { UNGROUP2(0, 0) } }
        return;
    }
    if (w == 4) {
        const uint8_t* const s0 = streams; const uint8_t* const s1 = streams + n;
        const uint8_t* const s2 = streams + 2 * n; const uint8_t* const s3 = streams + 3 * n;
        if (ref) { if (rotated) { UNGROUP4(1, 1) } else { UNGROUP4(1, 0) } }
        else     { if (rotated) { UNGROUP4(0, 1) } else { UNGROUP4(0, 0) } }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (unsigned k = 0; k < 8; k++) v |= (uint64_t)streams[k * n + i] << (8 * k);
        if (rotated) v = unrot64(v);
        if (ref) v ^= lmc_rd64(ref + 8 * i);
        lmc_wr64(dst + 8 * i, v);
    }
}
