/* tzbuild.h - builds small STORED zip archives in memory, torch.save style
 * (header-only; used by tests/test_torchzip.c and fuzz/fuzz_torchzip.c).
 * With zip64 set, every central directory entry carries its sizes and
 * local header offset in a ZIP64 extended-information extra field (the
 * 32-bit fields read 0xFFFFFFFF) and the archive ends with a ZIP64 end of
 * central directory record + locator before the classic record. */
#ifndef LMC_TZBUILD_H
#define LMC_TZBUILD_H

#include <stdint.h>
#include <string.h>

static inline uint8_t* tzb_put16(uint8_t* p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); return p + 2; }
static inline uint8_t* tzb_put32(uint8_t* p, uint32_t v) { p = tzb_put16(p, v & 0xFFFF); return tzb_put16(p, v >> 16); }
static inline uint8_t* tzb_put64(uint8_t* p, uint64_t v) { p = tzb_put32(p, (uint32_t)v); return tzb_put32(p, (uint32_t)(v >> 32)); }

/* Bytes tzb_build writes at most for k entries whose names and data total names_len + data_len. */
#define TZB_BOUND(k, names_len, data_len) ((size_t)(k) * 130 + 2 * (names_len) + (data_len) + 200)

/* Writes a zip of k (<= 16) entries to out; returns its size. */
static inline size_t tzb_build(uint8_t* out, const char* const* names, const uint8_t* const* data,
                               const size_t* len, int k, int zip64)
{
    uint8_t* p = out;
    uint64_t lho[16];
    for (int i = 0; i < k && i < 16; i++) {
        size_t const nl = strlen(names[i]);
        lho[i] = (uint64_t)(p - out);
        p = tzb_put32(p, 0x04034b50u); p = tzb_put16(p, zip64 ? 45 : 20); p = tzb_put16(p, 0); p = tzb_put16(p, 0);
        p = tzb_put32(p, 0); p = tzb_put32(p, 0); p = tzb_put32(p, (uint32_t)len[i]); p = tzb_put32(p, (uint32_t)len[i]);
        p = tzb_put16(p, (unsigned)nl); p = tzb_put16(p, 0);
        memcpy(p, names[i], nl); p += nl;
        memcpy(p, data[i], len[i]); p += len[i];
    }
    uint64_t const cd = (uint64_t)(p - out);
    for (int i = 0; i < k && i < 16; i++) {
        size_t const nl = strlen(names[i]);
        uint32_t const s32 = zip64 ? 0xFFFFFFFFu : (uint32_t)len[i];
        p = tzb_put32(p, 0x02014b50u); p = tzb_put16(p, 45); p = tzb_put16(p, 45); p = tzb_put16(p, 0); p = tzb_put16(p, 0);
        p = tzb_put32(p, 0); p = tzb_put32(p, 0); p = tzb_put32(p, s32); p = tzb_put32(p, s32);
        p = tzb_put16(p, (unsigned)nl); p = tzb_put16(p, zip64 ? 28 : 0); p = tzb_put16(p, 0); p = tzb_put16(p, 0);
        p = tzb_put16(p, 0); p = tzb_put32(p, 0); p = tzb_put32(p, zip64 ? 0xFFFFFFFFu : (uint32_t)lho[i]);
        memcpy(p, names[i], nl); p += nl;
        if (zip64) {
            p = tzb_put16(p, 1); p = tzb_put16(p, 24);
            p = tzb_put64(p, len[i]); p = tzb_put64(p, len[i]); p = tzb_put64(p, lho[i]);
        }
    }
    uint64_t const cds = (uint64_t)(p - out) - cd;
    if (zip64) {
        uint64_t const z = (uint64_t)(p - out);
        p = tzb_put32(p, 0x06064b50u); p = tzb_put64(p, 44); p = tzb_put16(p, 45); p = tzb_put16(p, 45);
        p = tzb_put32(p, 0); p = tzb_put32(p, 0); p = tzb_put64(p, (uint64_t)k); p = tzb_put64(p, (uint64_t)k);
        p = tzb_put64(p, cds); p = tzb_put64(p, cd);
        p = tzb_put32(p, 0x07064b50u); p = tzb_put32(p, 0); p = tzb_put64(p, z); p = tzb_put32(p, 1);
    }
    p = tzb_put32(p, 0x06054b50u); p = tzb_put16(p, 0); p = tzb_put16(p, 0);
    p = tzb_put16(p, zip64 ? 0xFFFF : (unsigned)k); p = tzb_put16(p, zip64 ? 0xFFFF : (unsigned)k);
    p = tzb_put32(p, zip64 ? 0xFFFFFFFFu : (uint32_t)cds); p = tzb_put32(p, zip64 ? 0xFFFFFFFFu : (uint32_t)cd);
    p = tzb_put16(p, 0);
    return (size_t)(p - out);
}

#endif
