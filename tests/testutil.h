/* testutil.h - shared helpers of the cmocka unit tests (header-only).
 *
 * Deterministic data (own xorshift PRNG, fixed seeds), one-shot and streaming
 * round-trip helpers that feed input and output in odd-sized pieces, a small
 * in-memory safetensors builder and a file reader (paths relative to the
 * repository root: tests run from there). Include after <cmocka.h>. */
#ifndef LMC_TESTUTIL_H
#define LMC_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"

#define TU_UNUSED __attribute__((unused))

/*-*** PRNG: xorshift64* ***-*/
typedef struct { uint64_t s; } tu_rng;

static TU_UNUSED void tu_seed(tu_rng* r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull; if (!r->s) r->s = 1; }
static TU_UNUSED uint64_t tu_next(tu_rng* r)
{
    uint64_t x = r->s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
static TU_UNUSED uint32_t tu_u32(tu_rng* r) { return (uint32_t)(tu_next(r) >> 32); }
static TU_UNUSED size_t tu_below(tu_rng* r, size_t n) { return n ? (size_t)(tu_next(r) % n) : 0; }
static TU_UNUSED double tu_unit(tu_rng* r) { return ((double)(tu_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static TU_UNUSED double tu_gauss(tu_rng* r)
{
    double const u1 = tu_unit(r), u2 = tu_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static TU_UNUSED void* tu_xmalloc(size_t n)
{
    void* const p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); abort(); }
    return p;
}

/*-*** data generators (all write exactly n bytes) ***-*/
static TU_UNUSED void tu_fill_const(uint8_t* p, size_t n, uint8_t v) { memset(p, v, n); }

static TU_UNUSED void tu_fill_random(uint8_t* p, size_t n, uint64_t seed)
{
    tu_rng r; tu_seed(&r, seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t const v = tu_next(&r); memcpy(p + i, &v, 8); }
    for (; i < n; i++) p[i] = (uint8_t)tu_next(&r);
}

static TU_UNUSED uint16_t tu_f32_to_bf16(float f)
{
    uint32_t u; memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);   /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* Gaussian floats (sigma 0.02, like weights) as bf16 (w=2) or f32 (w=4);
 * the last n % w bytes are random. */
static TU_UNUSED void tu_fill_gauss(uint8_t* p, size_t n, unsigned w, uint64_t seed)
{
    tu_rng r; tu_seed(&r, seed);
    size_t i = 0;
    for (; i + w <= n; i += w) {
        float const f = (float)(0.02 * tu_gauss(&r));
        if (w == 2) { uint16_t const b = tu_f32_to_bf16(f); memcpy(p + i, &b, 2); }
        else if (w == 4) memcpy(p + i, &f, 4);
        else if (w == 8) { double const d = f; memcpy(p + i, &d, 8); }
        else p[i] = (uint8_t)(int8_t)(f * 1000.0f);
    }
    for (; i < n; i++) p[i] = (uint8_t)tu_next(&r);
}

/* A copy of `a` in which about 1 value in `every` (of width w) gets a small
 * perturbation of its low mantissa bits: XOR deltas are sparse. */
static TU_UNUSED void tu_perturb(uint8_t* dst, const uint8_t* a, size_t n, unsigned w, unsigned every, uint64_t seed)
{
    tu_rng r; tu_seed(&r, seed);
    memcpy(dst, a, n);
    if (n < w) return;
    size_t const nv = n / w;
    for (size_t i = 0; i < nv; i++) {
        if (tu_below(&r, every)) continue;
        dst[i * w] ^= (uint8_t)(1 + tu_below(&r, 7));
    }
}

/* ~95% zeros in runs, the rest random bytes: RLE_HUF's home ground. */
static TU_UNUSED void tu_fill_sparse(uint8_t* p, size_t n, uint64_t seed)
{
    tu_rng r; tu_seed(&r, seed);
    size_t i = 0;
    while (i < n) {
        size_t run = 20 + tu_below(&r, 200);
        if (run > n - i) run = n - i;
        memset(p + i, 0, run);
        i += run;
        size_t lit = 1 + tu_below(&r, 10);
        if (lit > n - i) lit = n - i;
        for (size_t k = 0; k < lit; k++) p[i + k] = (uint8_t)(1 + tu_below(&r, 255));
        i += lit;
    }
}

/*-*** files ***-*/
/* Reads a whole file; returns NULL if it cannot be read. */
static TU_UNUSED uint8_t* tu_read_file(const char* path, size_t* size)
{
    FILE* const f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long const n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    uint8_t* const p = (uint8_t*)tu_xmalloc((size_t)n);
    if (fread(p, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(p); return NULL; }
    fclose(f);
    *size = (size_t)n;
    return p;
}

/*-*** one-shot helpers ***-*/
/* Compresses into a fresh buffer of lmc_compress_bound bytes; *out gets it
 * (caller frees). Returns the frame size or an error. */
static TU_UNUSED size_t tu_compress(lmc_cctx* c, uint8_t** out, const void* src, size_t n)
{
    size_t const cap = lmc_compress_bound(n);
    *out = (uint8_t*)tu_xmalloc(cap);
    return lmc_compress(c, *out, cap, src, n);
}

/*-*** streaming helpers: pieces cycle through a size pattern ***-*/
/* The footer's content hash of a format-5 frame of `content`, computed here
 * from the format's rule (doc/format.md, "Footer") and the seek table's
 * chunk sizes: H64 of the chunks' H64s, each as 8 little-endian bytes. */
static TU_UNUSED uint64_t tu_frame_content_hash(const uint8_t* frame, size_t fsize, const uint8_t* content)
{
    const uint8_t* const foot = frame + fsize - 32;
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--) n = n << 8 | foot[b];
    const uint8_t* e = foot - 12 * n;
    uint8_t* const hs = (uint8_t*)tu_xmalloc(8 * n + 1);
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++, e += 12) {
        size_t const cs = (size_t)e[4] | (size_t)e[5] << 8 | (size_t)e[6] << 16 | (size_t)e[7] << 24;
        uint64_t const h = lmc_hash64(content + off, cs);
        for (int b = 0; b < 8; b++) hs[8 * i + (uint64_t)b] = (uint8_t)(h >> (8 * b));
        off += cs;
    }
    uint64_t const r = lmc_hash64(hs, 8 * n);
    free(hs);
    return r;
}

static const size_t tu_pieces_default[] = { 1, 7, 777, 65536, 3, 100000 };
#define TU_NPIECES (sizeof(tu_pieces_default) / sizeof(tu_pieces_default[0]))

#define TU_STALL ((size_t)-1000)   /* not an lmc error: the stream stopped making progress */

/* Streaming compression of src[0..n) into dst[0..cap), input and output
 * offered in pieces whose sizes cycle through pat[0..np). */
static TU_UNUSED size_t tu_compress_stream(lmc_cctx* c, uint8_t* dst, size_t cap, const uint8_t* src, size_t n,
                                           const size_t* pat, size_t np)
{
    size_t ip = 0, op = 0, pi = 0, po = 1;
    for (;;) {
        size_t il = pat[pi++ % np];
        if (il > n - ip) il = n - ip;
        int const end = ip + il == n;
        lmc_inbuf in = { src + ip, il, 0 };
        unsigned stall = 0;
        for (;;) {
            size_t ol = pat[po++ % np];
            if (ol > cap - op) ol = cap - op;
            lmc_outbuf out = { dst + op, ol, 0 };
            size_t const before = in.pos;
            size_t const r = lmc_compress_stream(c, &out, &in, end);
            op += out.pos;
            if (lmc_is_error(r)) return r;
            if (end && r == 0) { if (in.pos != in.size) return TU_STALL; return op; }
            if (!end && in.pos == in.size) break;
            if (in.pos == before && out.pos == 0) { if (++stall > 64) return TU_STALL; }
            else stall = 0;
        }
        ip += il;
    }
}

/* Streaming decompression of src[0..n) into dst[0..cap), pieces as above.
 * Returns the content size (the decoder returned 0 exactly at the end of the
 * input), an lmc error, or TU_STALL (input exhausted before the frame ended,
 * or no progress possible). */
static TU_UNUSED size_t tu_decompress_stream(lmc_dctx* d, uint8_t* dst, size_t cap, const uint8_t* src, size_t n,
                                             const size_t* pat, size_t np)
{
    size_t ip = 0, op = 0, pi = 2, po = 0;
    do {
        size_t il = pat[pi++ % np];
        if (il > n - ip) il = n - ip;
        int const last = ip + il == n;
        lmc_inbuf in = { src + ip, il, 0 };
        unsigned stall = 0;
        for (;;) {
            size_t ol = pat[po++ % np];
            if (ol > cap - op) ol = cap - op;
            lmc_outbuf out = { dst + op, ol, 0 };
            size_t const before = in.pos;
            size_t const r = lmc_decompress_stream(d, &out, &in);
            op += out.pos;
            if (lmc_is_error(r)) return r;
            if (r == 0) return (last && in.pos == in.size) ? op : TU_STALL;
            if (in.pos == in.size && out.pos < out.size) break;   /* wants input */
            if (in.pos == before && out.pos == 0) { if (++stall > 64) return TU_STALL; }
            else stall = 0;
        }
        ip += il;
        if (last) return TU_STALL;
    } while (ip <= n);
    return TU_STALL;
}

/*-*** tiny JSON/safetensors builder ***-*/
typedef struct { const char* name; const char* dtype; unsigned width; size_t nelem; const size_t* shape; unsigned ndim; } tu_tensor;

/* Builds a safetensors file from tensors in the given order, data filled by
 * `fill(tensor index, bytes, n, seed)`. Returns the buffer (caller frees). */
static TU_UNUSED uint8_t* tu_build_safetensors(const tu_tensor* t, size_t nt, size_t* size, uint64_t seed,
                                               void (*fill)(size_t, uint8_t*, size_t, uint64_t))
{
    char json[8192];
    size_t jl = 0, off = 0;
    jl += (size_t)snprintf(json + jl, sizeof(json) - jl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < nt; i++) {
        size_t const bytes = t[i].nelem * t[i].width;
        jl += (size_t)snprintf(json + jl, sizeof(json) - jl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (unsigned d = 0; d < t[i].ndim; d++)
            jl += (size_t)snprintf(json + jl, sizeof(json) - jl, "%s%zu", d ? "," : "", t[i].shape[d]);
        jl += (size_t)snprintf(json + jl, sizeof(json) - jl, "],\"data_offsets\":[%zu,%zu]}", off, off + bytes);
        off += bytes;
    }
    jl += (size_t)snprintf(json + jl, sizeof(json) - jl, "}");
    while (jl % 8) json[jl++] = ' ';
    *size = 8 + jl + off;
    uint8_t* const p = (uint8_t*)tu_xmalloc(*size);
    uint64_t const hl = jl;
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(hl >> (8 * k));
    memcpy(p + 8, json, jl);
    size_t pos = 8 + jl;
    for (size_t i = 0; i < nt; i++) {
        size_t const bytes = t[i].nelem * t[i].width;
        fill(i, p + pos, bytes, seed);
        pos += bytes;
    }
    return p;
}

#endif
