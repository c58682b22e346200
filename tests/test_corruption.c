/* test_corruption.c - corruption of real frames, and allocation bounds.
 *
 * 1. Bit flips. The shipped sample checkpoints (data/trajectory/) are
 *    compressed here at chunk_log 20: model_bf16 step 300 as a full frame,
 *    and model_bf16, model_fp32 and optim step 350 as deltas against step
 *    300. In each frame, LMC_CORRUPTION_FLIPS (default 10000) single-bit flips
 *    are made at positions spread over every region: every bit of the frame
 *    header, of each chunk header, of each piece header and of the end
 *    marker, seek table and footer; the block headers and their coding tables
 *    (Huffman / rANS frequency tables, bitstream sizes, final states) and the
 *    block data at even strides over what the budget leaves. Every flipped
 *    frame must make lmc_decompress fail; every 50th also goes through
 *    lmc_decompress_stream (error, or the input ends before the frame does:
 *    never success). Figures are printed per frame and per region.
 * 2. Truncation at every chunk boundary (and +-1, and around every chunk
 *    header, the end marker, seek table and footer) and at 500 random points.
 * 3. References: the step-400 file instead of step 300 is LMC_ERR_REF_WRONG,
 *    none is LMC_ERR_REF_REQUIRED; both before any output.
 * 4. Hostile 1 KB inputs: the peak of the bytes the decoder holds allocated
 *    (malloc is wrapped in this binary; glibc has no hooks) stays bounded.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <malloc.h>
#include <stdatomic.h>

#include "testutil.h"
#include "frame.h"
#include "block_dec.h"

#define ERR(e) ((size_t)-(ptrdiff_t)(e))

/*-*** allocation accounting ***-*/
/* The test binary provides malloc & co. (glibc supports replacing them); they
 * call glibc's own allocator and keep a count of the bytes held (usable size)
 * and its peak. Not under a sanitizer, whose runtime owns malloc. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define LMC_NO_MALLOC_WRAP 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#    define LMC_NO_MALLOC_WRAP 1
#  endif
#endif

static _Atomic long long g_live, g_peak;

#ifndef LMC_NO_MALLOC_WRAP
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void  __libc_free(void*);

static void acct_add(void* p)
{
    if (!p) return;
    long long const now = atomic_fetch_add(&g_live, (long long)malloc_usable_size(p)) + (long long)malloc_usable_size(p);
    long long pk = atomic_load(&g_peak);
    while (now > pk && !atomic_compare_exchange_weak(&g_peak, &pk, now)) {}
}
static void acct_sub(void* p) { if (p) atomic_fetch_sub(&g_live, (long long)malloc_usable_size(p)); }

void* malloc(size_t n) { void* const p = __libc_malloc(n); acct_add(p); return p; }
void* calloc(size_t a, size_t b) { void* const p = __libc_calloc(a, b); acct_add(p); return p; }
void  free(void* p) { acct_sub(p); __libc_free(p); }
void* realloc(void* p, size_t n)
{
    if (!p) return malloc(n);
    if (!n) { free(p); return NULL; }
    long long const old = (long long)malloc_usable_size(p);
    void* const q = __libc_realloc(p, n);
    if (!q) return NULL;
    atomic_fetch_sub(&g_live, old);
    acct_add(q);
    return q;
}
void* memalign(size_t a, size_t n) { void* const p = __libc_memalign(a, n); acct_add(p); return p; }
void* aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void** r, size_t a, size_t n)
{
    if (a < sizeof(void*) || (a & (a - 1))) return 22; /* EINVAL */
    void* const p = memalign(a, n);
    if (!p) return 12; /* ENOMEM */
    *r = p;
    return 0;
}
void* valloc(size_t n) { return memalign(4096, n); }
void* pvalloc(size_t n) { return memalign(4096, (n + 4095) & ~(size_t)4095); }
static int const k_alloc_tracked = 1;
#else
static int const k_alloc_tracked = 0;
#endif

/* Start measuring: the peak restarts at what is held now. Returns it. */
static long long acct_begin(void) { long long const now = atomic_load(&g_live); atomic_store(&g_peak, now); return now; }
/* Most bytes held since acct_begin(base), above base. */
static long long acct_peak(long long base) { return atomic_load(&g_peak) - base; }

/*-*** the sample frames ***-*/
enum { R_HEADER, R_CHUNK_HDR, R_PIECE_HDR, R_BLOCK_TABLE, R_BLOCK_DATA, R_TRAILER, R_COUNT };
static const char* const k_region[R_COUNT] = {
    "frame header", "chunk headers", "piece headers", "block headers+tables", "block data", "end+seek+footer" };

typedef struct {
    const char* name;
    const char* file;
    int         delta;
    /* filled by setup */
    uint8_t*    src;  size_t n;       /* content (step 350, or 300 for the full frame) */
    uint8_t*    ref;                  /* step 300 for deltas */
    uint8_t*    frame; size_t s;
    uint8_t*    cls;                  /* region of every frame byte */
    size_t      chunk_off[64], chunk_payload[64], nchunks, end_marker, footer;
    size_t      blocks[LMC_CODER_COUNT];
} sample;

static sample g_samples[] = {
    { "model_bf16 full",  "model_bf16.safetensors",  0, 0, 0, 0, 0, 0, 0, {0}, {0}, 0, 0, 0, {0} },
    { "model_bf16 delta", "model_bf16.safetensors",  1, 0, 0, 0, 0, 0, 0, {0}, {0}, 0, 0, 0, {0} },
    { "model_fp32 delta", "model_fp32.safetensors",  1, 0, 0, 0, 0, 0, 0, {0}, {0}, 0, 0, 0, {0} },
    { "optim delta",      "optim.safetensors",       1, 0, 0, 0, 0, 0, 0, {0}, {0}, 0, 0, 0, {0} },
};
#define NSAMPLES (sizeof(g_samples) / sizeof(g_samples[0]))

static uint8_t* read_traj(const char* step, const char* file, size_t* n)
{
    char path[256];
    snprintf(path, sizeof(path), "data/trajectory/%s/%s", step, file);
    uint8_t* const p = tu_read_file(path, n);
    if (!p) fail_msg("cannot read %s (tests run from the repository root)", path);
    return p;
}

static uint32_t rd32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t* p, uint32_t v) { for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k)); }
static void wr64(uint8_t* p, uint64_t v) { for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k)); }

/* Bytes of a block's header and table(s): what precedes its coded data. */
static size_t block_table_bytes(const uint8_t* b, size_t size, unsigned coder)
{
    size_t t = 1;
    if (coder == LMC_CODER_CONST) return size;
    if (coder == LMC_CODER_RAW) return 1;
    uint8_t len[LMC_ALPHA_RLE];
    if (coder == LMC_CODER_HUF || coder == LMC_CODER_RLE_HUF) {
        unsigned const alpha = coder == LMC_CODER_HUF ? LMC_ALPHA_LIT : LMC_ALPHA_RLE;
        size_t const r = lmc_huf_read_table(len, alpha, b + 4, size - 4);
        assert_false(lmc_is_error(r));
        t = 4 + r + (coder == LMC_CODER_HUF ? 6 : 4);   /* 3 x u16 sizes | run byte + u24 count */
    } else if (coder == LMC_CODER_ANS) {
        size_t p = 4;
        unsigned const nsym = (unsigned)b[p] | (unsigned)b[p + 1] << 8;
        p += 2;
        for (unsigned s = 0; s < nsym;) {
            uint8_t const c = b[p++];
            if (c == 0) s += (unsigned)b[p++] + 1;
            else { if (c >= 128) p++; s++; }
        }
        t = p + 16;   /* 4 final states */
    }
    return t < size ? t : size;
}

/* Labels one ordinary block of m bytes at frame offset `at`; returns its size. */
static size_t label_block(sample* S, const uint8_t* b, size_t avail, size_t at, size_t m)
{
    unsigned coder;
    size_t const used = lmc_block_skip(b, avail, m, &coder);
    assert_false(lmc_is_error(used));
    S->blocks[coder]++;
    size_t const tb = block_table_bytes(b, used, coder);
    memset(S->cls + at, R_BLOCK_TABLE, tb);
    memset(S->cls + at + tb, R_BLOCK_DATA, used - tb);
    return used;
}

/* Walks the frame as doc/format.md lays it out and labels every byte. */
static void label_frame(sample* S)
{
    const uint8_t* const f = S->frame;
    S->cls = (uint8_t*)tu_xmalloc(S->s);
    memset(S->cls, R_HEADER, LMC_HDR_SIZE);
    size_t pos = LMC_HDR_SIZE;
    uint64_t const ref_size = S->delta ? S->n : 0;
    (void)ref_size;
    for (;;) {
        uint32_t const content = rd32(f + pos);
        if (!content) break;
        uint32_t const ps = rd32(f + pos + 4);
        assert_true(S->nchunks < 64);
        S->chunk_off[S->nchunks] = pos;
        S->chunk_payload[S->nchunks] = ps;
        S->nchunks++;
        memset(S->cls + pos, R_CHUNK_HDR, LMC_CHUNK_HDR_SIZE);
        const uint8_t* const pl = f + pos + LMC_CHUNK_HDR_SIZE;
        size_t pp = 0, out = 0;
        while (out < content) {
            uint32_t const len = rd32(pl + pp);
            unsigned const w = pl[pp + 4], flags = pl[pp + 5];
            size_t const hdr = LMC_PIECE_HDR + ((flags & LMC_PIECE_XOR) ? 8 : 0);
            memset(S->cls + pos + 16 + pp, R_PIECE_HDR, hdr);
            pp += hdr;
            size_t const nv = len / w;
            int const refmodel = ((flags & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT) == 2;
            for (size_t b = 0; refmodel && b < nv; b += 65536) {
                size_t const m = nv - b < 65536 ? nv - b : 65536;
                const uint8_t* const v = pl + pp;
                if (v[0] == LMC_CODER_REFCTX) {
                    /* kind, u24 size, G (bit 7: 32 states, not 4), bounds, G tables, the
                     * states, raw size: table; then data */
                    size_t const size = 4 + ((size_t)v[1] | (size_t)v[2] << 8 | (size_t)v[3] << 16);
                    size_t t = 4;
                    unsigned const states = (v[t] & 0x80) ? 32 : 4;
                    unsigned const G = v[t++] & 0x7F;
                    t += G - 1;
                    for (unsigned g = 0; g < G; g++) {
                        unsigned const nsym = (unsigned)v[t] | (unsigned)v[t + 1] << 8;
                        t += 2;
                        for (unsigned q = 0; q < nsym;) {
                            uint8_t const c = v[t++];
                            if (c == 0) q += (unsigned)v[t++] + 1;
                            else { if (c >= 128) t++; q++; }
                        }
                    }
                    t += 4 * states + 4;
                    S->blocks[LMC_CODER_REFCTX]++;
                    memset(S->cls + pos + 16 + pp, R_BLOCK_TABLE, t);
                    memset(S->cls + pos + 16 + pp + t, R_BLOCK_DATA, size - t);
                    pp += size;
                    continue;
                }
                assert_int_equal(v[0], 6);   /* GROUPED: kind, mode, then w ordinary blocks */
                memset(S->cls + pos + 16 + pp, R_BLOCK_TABLE, 2);
                pp += 2;
                for (unsigned k = 0; k < w; k++) pp += label_block(S, pl + pp, ps - pp, pos + 16 + pp, m);
            }
            for (unsigned k = 0; !refmodel && k < w; k++)
                for (size_t b = 0; b < nv; b += LMC_BLOCK_MAX)
                    pp += label_block(S, pl + pp, ps - pp, pos + 16 + pp, nv - b < LMC_BLOCK_MAX ? nv - b : LMC_BLOCK_MAX);
            memset(S->cls + pos + 16 + pp, R_BLOCK_DATA, len % w);   /* the tail, stored */
            pp += len % w;
            out += len;
        }
        assert_int_equal(pp, ps);
        pos += LMC_CHUNK_HDR_SIZE + ps;
    }
    S->end_marker = pos;
    S->footer = pos + LMC_END_MARKER + LMC_SEEK_ENTRY * S->nchunks;
    assert_int_equal(S->footer + LMC_FOOTER_SIZE, S->s);
    memset(S->cls + pos, R_TRAILER, S->s - pos);
}

static int setup_samples(void** state)
{
    (void)state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        sample* const S = &g_samples[i];
        size_t rn = 0;
        S->src = read_traj(S->delta ? "step-000350" : "step-000300", S->file, &S->n);
        lmc_cctx* const c = lmc_cctx_create();
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CHUNK_LOG, 20), 0);
        if (S->delta) {
            S->ref = read_traj("step-000300", S->file, &rn);
            assert_int_equal(rn, S->n);
            assert_int_equal(lmc_cctx_set_ref(c, S->ref, rn), 0);
        }
        S->s = tu_compress(c, &S->frame, S->src, S->n);
        assert_false(lmc_is_error(S->s));
        lmc_cctx_free(c);
        label_frame(S);
    }
    return 0;
}

static int teardown_samples(void** state)
{
    (void)state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        sample* const S = &g_samples[i];
        free(S->src); free(S->ref); free(S->frame); free(S->cls);
        S->src = S->ref = S->frame = S->cls = NULL;
    }
    return 0;
}

static lmc_dctx* sample_dctx(const sample* S)
{
    lmc_dctx* const d = lmc_dctx_create();
    assert_non_null(d);
    if (S->delta) assert_int_equal(lmc_dctx_set_ref_hashed(d, S->ref, S->n, lmc_hash64(S->ref, S->n)), 0);
    return d;
}

static size_t flips_wanted(void)
{
    const char* const e = getenv("LMC_CORRUPTION_FLIPS");
    long const v = e ? strtol(e, NULL, 10) : 10000;
    return v > 0 ? (size_t)v : 10000;
}

/* Bit positions: all bits of the small structural regions, then even strides
 * over tables and data for what the budget leaves. */
static size_t pick_bits(const sample* S, size_t want, size_t* bits, size_t cap)
{
    size_t bytes[R_COUNT] = { 0 };
    for (size_t i = 0; i < S->s; i++) bytes[S->cls[i]]++;
    size_t take[R_COUNT];
    size_t used = 0;
    int const order[R_COUNT] = { R_HEADER, R_CHUNK_HDR, R_TRAILER, R_PIECE_HDR, R_BLOCK_TABLE, R_BLOCK_DATA };
    for (int o = 0; o < R_COUNT; o++) {
        int const r = order[o];
        size_t const all = bytes[r] * 8, left = want > used ? want - used : 0;
        size_t share;
        switch (r) {
        case R_HEADER: case R_CHUNK_HDR: case R_TRAILER: share = all; break;   /* always every bit */
        case R_PIECE_HDR: share = left / 3; break;
        case R_BLOCK_TABLE: share = left / 2; break;
        default: share = left; break;
        }
        take[r] = share < all ? share : all;
        used += take[r];
    }
    assert_true(used <= cap);
    size_t nb = 0;
    for (int r = 0; r < R_COUNT; r++) {
        if (!take[r]) continue;
        size_t const all = bytes[r] * 8;
        /* the k-th chosen bit of the region is its floor(k * all / take)-th bit */
        size_t k = 0, seen = 0;
        for (size_t i = 0; i < S->s && k < take[r]; i++) {
            if (S->cls[i] != r) continue;
            while (k < take[r]) {
                size_t const b = (size_t)((unsigned __int128)k * all / take[r]);
                if (b >= seen + 8) break;
                bits[nb++] = i * 8 + (b - seen);
                k++;
            }
            seen += 8;
        }
        assert_int_equal(k, take[r]);
    }
    return nb;
}

static void test_bit_flips_samples(void** state)
{
    (void)state;
    size_t const want = flips_wanted();
    size_t grand_tried = 0, grand_detected = 0;
    for (size_t si = 0; si < NSAMPLES; si++) {
        sample* const S = &g_samples[si];
        size_t const cap = want + 8 * (S->s - 0);
        size_t* const bits = (size_t*)tu_xmalloc(cap * sizeof(size_t));
        size_t const nb = pick_bits(S, want, bits, cap);
        if (want >= 10000) assert_true(nb >= 10000);
        uint8_t* const g = (uint8_t*)tu_xmalloc(S->s);
        uint8_t* const out = (uint8_t*)tu_xmalloc(S->n);
        memcpy(g, S->frame, S->s);
        lmc_dctx* const d = sample_dctx(S);
        assert_int_equal(lmc_decompress(d, out, S->n, g, S->s), S->n);
        assert_memory_equal(out, S->src, S->n);
        size_t tried[R_COUNT] = { 0 }, detected[R_COUNT] = { 0 }, region_bytes[R_COUNT] = { 0 };
        size_t errs[LMC_ERR_MAX_CODE + 1] = { 0 };
        size_t st_tried = 0, st_err = 0, st_trunc = 0, undetected = 0, first_bad = (size_t)-1;
        for (size_t i = 0; i < S->s; i++) region_bytes[S->cls[i]]++;
        for (size_t i = 0; i < nb; i++) {
            size_t const byte = bits[i] / 8;
            uint8_t const mask = (uint8_t)(1u << (bits[i] % 8));
            int const r = S->cls[byte];
            g[byte] ^= mask;
            size_t const res = lmc_decompress(d, out, S->n, g, S->s);
            tried[r]++;
            if (lmc_is_error(res)) { detected[r]++; errs[lmc_get_error(res)]++; }
            else { undetected++; if (first_bad == (size_t)-1) first_bad = bits[i]; }
            if (i % 50 == 0) {
                st_tried++;
                lmc_dctx_reset(d);
                size_t const r2 = tu_decompress_stream(d, out, S->n, g, S->s, tu_pieces_default, TU_NPIECES);
                lmc_dctx_reset(d);
                if (lmc_is_error(r2)) st_err++;
                else if (r2 == TU_STALL) st_trunc++;
                else { undetected++; if (first_bad == (size_t)-1) first_bad = bits[i]; }
            }
            g[byte] ^= mask;
        }
        size_t t_all = 0, d_all = 0;
        for (int r = 0; r < R_COUNT; r++) { t_all += tried[r]; d_all += detected[r]; }
        print_message("%s: frame %zu B (content %zu B, %zu chunks; blocks raw %zu const %zu huf %zu rle_huf %zu ans %zu refctx %zu)\n",
                      S->name, S->s, S->n, S->nchunks, S->blocks[0], S->blocks[1], S->blocks[2], S->blocks[3], S->blocks[4], S->blocks[5]);
        print_message("  one-shot: %zu flips tried, %zu detected\n", t_all, d_all);
        for (int r = 0; r < R_COUNT; r++)
            print_message("    %-22s %8zu B  %6zu tried  %6zu detected\n", k_region[r], region_bytes[r], tried[r], detected[r]);
        print_message("  errors:");
        for (int e = 0; e <= LMC_ERR_MAX_CODE; e++) if (errs[e]) print_message(" %s %zu", lmc_error_id((lmc_error)e), errs[e]);
        print_message("\n  streaming (every 50th): %zu tried, %zu error, %zu input ended before the frame, %zu success\n",
                      st_tried, st_err, st_trunc, st_tried - st_err - st_trunc);
        grand_tried += t_all; grand_detected += d_all;
        /* the pristine frame still decodes with the same context */
        assert_int_equal(lmc_decompress(d, out, S->n, g, S->s), S->n);
        if (undetected) fail_msg("%s: %zu flips not detected (first at bit %zu, byte %zu, %s)", S->name, undetected,
                                 first_bad, first_bad / 8, k_region[S->cls[first_bad / 8]]);
        lmc_dctx_free(d);
        free(out); free(g); free(bits);
    }
    print_message("all frames: %zu flips tried, %zu detected\n", grand_tried, grand_detected);
}

static void test_truncation_samples(void** state)
{
    (void)state;
    size_t grand_tried = 0, grand_detected = 0;
    for (size_t si = 0; si < NSAMPLES; si++) {
        sample* const S = &g_samples[si];
        uint8_t* const out = (uint8_t*)tu_xmalloc(S->n);
        lmc_dctx* const d = sample_dctx(S);
        size_t cuts[64 * 10 + 600], nc = 0;
        for (size_t k = 0; k < S->nchunks; k++) {
            size_t const o = S->chunk_off[k], e = o + 16 + S->chunk_payload[k];
            size_t const at[] = { o - 1, o, o + 1, o + 4, o + 15, o + 16, o + 17, e - 1, e, e + 1 };
            for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) cuts[nc++] = at[i];
        }
        size_t const fixed[] = { 0, 1, 3, 4, 39, 40, 41, S->end_marker + 3, S->end_marker + 4, S->end_marker + 5,
                                 S->footer - 1, S->footer, S->footer + 1, S->footer + 24, S->s - 1 };
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) cuts[nc++] = fixed[i];
        size_t const nboundary = nc;
        tu_rng r; tu_seed(&r, 1000 + si);
        for (int i = 0; i < 500; i++) cuts[nc++] = tu_below(&r, S->s);
        size_t detected = 0, st_tried = 0, st_ok = 0;
        for (size_t i = 0; i < nc; i++) {
            size_t const cut = cuts[i];
            assert_true(cut < S->s);
            size_t const res = lmc_decompress(d, out, S->n, S->frame, cut);
            lmc_frame_stats st;
            size_t const walk = lmc_frame_stats_get(&st, S->frame, cut);
            if (lmc_is_error(res) && lmc_is_error(walk)) detected++;
            else fail_msg("%s: truncation at %zu of %zu not detected (decode %s, walk %s)", S->name, cut, S->s,
                          lmc_error_name(res), lmc_error_name(walk));
            if (i < nboundary || i % 10 == 0) {
                st_tried++;
                lmc_dctx_reset(d);
                size_t const r2 = tu_decompress_stream(d, out, S->n, S->frame, cut, tu_pieces_default, TU_NPIECES);
                lmc_dctx_reset(d);
                if (lmc_is_error(r2) || r2 == TU_STALL) st_ok++;
                else fail_msg("%s: streaming decode of %zu of %zu bytes claimed success", S->name, cut, S->s);
            }
        }
        print_message("%s: %zu truncations tried (%zu at boundaries, 500 random), %zu detected; streaming %zu/%zu\n",
                      S->name, nc, nboundary, detected, st_ok, st_tried);
        grand_tried += nc; grand_detected += detected;
        lmc_dctx_free(d);
        free(out);
    }
    print_message("all frames: %zu truncations tried, %zu detected\n", grand_tried, grand_detected);
}

static void stream_expect(lmc_dctx* d, const sample* S, uint8_t* out, lmc_error e)
{
    lmc_dctx_reset(d);
    lmc_inbuf in = { S->frame, S->s, 0 };
    lmc_outbuf o = { out, S->n, 0 };
    size_t const r = lmc_decompress_stream(d, &o, &in);
    assert_int_equal(lmc_get_error(r), e);
    assert_int_equal(o.pos, 0);
    lmc_dctx_reset(d);
}

static void test_wrong_reference(void** state)
{
    (void)state;
    size_t tried = 0;
    for (size_t si = 0; si < NSAMPLES; si++) {
        sample* const S = &g_samples[si];
        if (!S->delta) continue;
        size_t n4;
        uint8_t* const r400 = read_traj("step-000400", S->file, &n4);
        assert_int_equal(n4, S->n);   /* same size: only the hash tells them apart */
        /* out: streaming, which checks the reference before it decodes and
         * so writes nothing; one: lmc_decompress, which (given a reference
         * without its hash) hashes it while it decodes and may have written
         * into its buffer when it refuses */
        uint8_t* const out = (uint8_t*)tu_xmalloc(S->n);
        uint8_t* const one = (uint8_t*)tu_xmalloc(S->n);
        memset(out, 0xA5, S->n);
        memset(one, 0xA5, S->n);
        lmc_dctx* const d = lmc_dctx_create();
        /* none: refused before anything is decoded */
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_REQUIRED);
        stream_expect(d, S, out, LMC_ERR_REF_REQUIRED);
        /* step 300 minus its last byte: refused on its size, before anything is decoded */
        assert_int_equal(lmc_dctx_set_ref(d, S->ref, S->n - 1), 0);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);
        stream_expect(d, S, out, LMC_ERR_REF_WRONG);
        for (size_t i = 0; i < S->n; i++) if (one[i] != 0xA5) fail_msg("%s: output written at %zu", S->name, i);
        /* step 400 instead of 300, one-shot with and without the hash given, and streaming */
        assert_int_equal(lmc_dctx_set_ref(d, r400, n4), 0);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);   /* hash now kept */
        assert_int_equal(lmc_dctx_set_ref_hashed(d, r400, n4, lmc_hash64(r400, n4)), 0);
        memset(one, 0xA5, S->n);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);
        for (size_t i = 0; i < S->n; i++) if (one[i] != 0xA5) fail_msg("%s: output written at %zu (hash given)", S->name, i);
        assert_int_equal(lmc_dctx_set_ref(d, r400, n4), 0);
        stream_expect(d, S, out, LMC_ERR_REF_WRONG);
        /* the step-350 file itself (the content) as its own reference */
        assert_int_equal(lmc_dctx_set_ref(d, S->src, S->n), 0);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);
        assert_int_equal(lmc_dctx_set_ref(d, S->src, S->n), 0);
        stream_expect(d, S, out, LMC_ERR_REF_WRONG);
        /* streaming wrote nothing */
        for (size_t i = 0; i < S->n; i++) if (out[i] != 0xA5) fail_msg("%s: output written at %zu", S->name, i);
        /* the right one, with 1 and 2 threads (the hash then runs between the jobs of two threads) */
        assert_int_equal(lmc_dctx_set_ref(d, S->ref, S->n), 0);
        memset(one, 0, S->n);
        assert_int_equal(lmc_decompress(d, one, S->n, S->frame, S->s), S->n);
        assert_memory_equal(one, S->src, S->n);
        assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, 2), 0);
        assert_int_equal(lmc_dctx_set_ref(d, S->ref, S->n), 0);
        memset(one, 0, S->n);
        assert_int_equal(lmc_decompress(d, one, S->n, S->frame, S->s), S->n);
        assert_memory_equal(one, S->src, S->n);
        assert_int_equal(lmc_dctx_set_ref(d, r400, n4), 0);
        assert_int_equal(lmc_get_error(lmc_decompress(d, one, S->n, S->frame, S->s)), LMC_ERR_REF_WRONG);
        /* streaming, the right one */
        assert_int_equal(lmc_dctx_set_ref(d, S->ref, S->n), 0);
        lmc_dctx_reset(d);
        lmc_inbuf in = { S->frame, S->s, 0 };
        lmc_outbuf o = { out, S->n, 0 };
        size_t r;
        unsigned guard = 0;
        do { r = lmc_decompress_stream(d, &o, &in); assert_false(lmc_is_error(r)); } while (r != 0 && ++guard < 1000);
        assert_int_equal(r, 0);
        assert_int_equal(o.pos, S->n);
        assert_memory_equal(out, S->src, S->n);
        tried += 5;
        print_message("%s: no reference -> ref_required, step-000400 / step-000350 / short step-000300 -> ref_wrong\n", S->name);
        lmc_dctx_free(d);
        free(out); free(one); free(r400);
    }
    assert_true(tried > 0);
}

/* A changed payload byte is LMC_ERR_CHECKSUM, whatever decoding it would
 * give. The decoder takes the payload checksum as it decodes, not before,
 * and checks it after decoding whatever the decoding gave; a flipped piece
 * header or coding table would otherwise come out as CORRUPT, TRUNCATED or
 * CODER, and a flip in the last bytes of a payload would show only if the
 * hash took in every byte. Per chunk: the first and last payload byte and
 * the first byte of every run of one region (piece header, block header and
 * table, block data), up to 48 a chunk; one-shot at 1 and 2 threads, and
 * streaming for every 7th. */
static void test_payload_flips_are_checksum(void** state)
{
    (void)state;
    size_t tried = 0;
    for (size_t si = 0; si < NSAMPLES; si++) {
        sample* const S = &g_samples[si];
        uint8_t* const g = (uint8_t*)tu_xmalloc(S->s);
        uint8_t* const out = (uint8_t*)tu_xmalloc(S->n);
        memcpy(g, S->frame, S->s);
        lmc_dctx* const d1 = sample_dctx(S);
        lmc_dctx* const d2 = sample_dctx(S);
        assert_int_equal(lmc_dctx_set_param(d2, LMC_D_THREADS, 2), 0);
        if (S->delta) assert_int_equal(lmc_dctx_set_ref_hashed(d2, S->ref, S->n, lmc_hash64(S->ref, S->n)), 0);
        size_t here = 0;
        for (size_t k = 0; k < S->nchunks; k++) {
            size_t const p0 = S->chunk_off[k] + 16, p1 = p0 + S->chunk_payload[k];
            size_t at[50], na = 0;
            at[na++] = p0;
            at[na++] = p1 - 1;
            for (size_t i = p0 + 1; i < p1 - 1 && na < 50; i++)
                if (S->cls[i] != S->cls[i - 1]) at[na++] = i;
            for (size_t a = 0; a < na; a++) {
                uint8_t const mask = (uint8_t)(a & 1 ? 0x80 : 0x01);
                g[at[a]] ^= mask;
                size_t const r1 = lmc_decompress(d1, out, S->n, g, S->s);
                if (lmc_get_error(r1) != LMC_ERR_CHECKSUM)
                    fail_msg("%s: payload byte %zu (%s) flipped: %s, not checksum", S->name, at[a],
                             k_region[S->cls[at[a]]], lmc_error_name(r1));
                size_t const r2 = lmc_decompress(d2, out, S->n, g, S->s);
                if (lmc_get_error(r2) != LMC_ERR_CHECKSUM)
                    fail_msg("%s: payload byte %zu flipped, 2 threads: %s", S->name, at[a], lmc_error_name(r2));
                if (here % 7 == 0) {
                    lmc_dctx_reset(d1);
                    size_t const r3 = tu_decompress_stream(d1, out, S->n, g, S->s, tu_pieces_default, TU_NPIECES);
                    lmc_dctx_reset(d1);
                    if (lmc_get_error(r3) != LMC_ERR_CHECKSUM)
                        fail_msg("%s: payload byte %zu flipped, streaming: %s", S->name, at[a],
                                 r3 == TU_STALL ? "stalled" : lmc_error_name(r3));
                }
                g[at[a]] ^= mask;
                here++;
            }
        }
        /* the frame as it was still decodes, with both contexts */
        assert_int_equal(lmc_decompress(d1, out, S->n, g, S->s), S->n);
        assert_memory_equal(out, S->src, S->n);
        assert_int_equal(lmc_decompress(d2, out, S->n, g, S->s), S->n);
        assert_memory_equal(out, S->src, S->n);
        print_message("%s: %zu payload flips, each checksum (1 and 2 threads, streaming every 7th)\n", S->name, here);
        tried += here;
        lmc_dctx_free(d1);
        lmc_dctx_free(d2);
        free(out); free(g);
    }
    assert_true(tried >= 40);
}

/*-*** hostile 1 KB inputs: bounded allocation ***-*/
static void put_header(uint8_t* p, unsigned flags, unsigned chunk_log, uint64_t content_size, uint64_t ref_size, uint64_t ref_hash)
{
    memset(p, 0, LMC_HDR_SIZE);
    wr32(p, LMC_MAGIC);
    p[4] = 1; p[5] = (uint8_t)flags; p[6] = 1; p[7] = 0; p[8] = (uint8_t)chunk_log;
    wr64(p + 12, content_size); wr64(p + 20, ref_size); wr64(p + 28, ref_hash);
    wr32(p + 36, (uint32_t)lmc_hash64(p, 36));
}

#define HOSTILE_N 5000
#define HOSTILE_BOUND (4ll << 20)

static void test_hostile_alloc_peak(void** state)
{
    (void)state;
    /* is the accounting alive? */
    long long const b0 = acct_begin();
    void* volatile probe = malloc(8 << 20);
    int const live = acct_peak(b0) >= (8 << 20);
    free(probe);
    if (!k_alloc_tracked || !live) {
        print_message("hostile inputs: allocation accounting unavailable in this build (sanitizer): errors only\n");
    }
    size_t const cap = ((size_t)1 << 26) + 8;
    uint8_t* const out = (uint8_t*)tu_xmalloc(cap);   /* the caller's buffer: room for the largest chunk */
    static uint8_t refbuf[4096];
    tu_fill_random(refbuf, sizeof(refbuf), 77);
    uint64_t const refhash = lmc_hash64(refbuf, sizeof(refbuf));
    tu_rng r; tu_seed(&r, 4242);
    uint8_t in[1024];
    long long worst[6] = { 0 };
    size_t count[6] = { 0 };
    int worst_it[6] = { 0 };
    for (int it = 0; it < HOSTILE_N; it++) {
        int const kind = it % 6;
        size_t n = sizeof(in);
        tu_fill_random(in, sizeof(in), 0xC0FFEEull + (uint64_t)it);
        unsigned const cl = 20 + (unsigned)tu_below(&r, 7);
        uint32_t const maxc = (uint32_t)((1u << cl) + 8);
        int with_ref = 0;
        switch (kind) {
        case 0:   /* random bytes of random length */
            n = 1 + tu_below(&r, sizeof(in));
            break;
        case 1:   /* a valid header declaring a huge content size */
            put_header(in, LMC_FLAG_SIZE, cl, tu_next(&r) >> tu_below(&r, 40), 0, 0);
            break;
        case 2:   /* a valid delta header declaring a huge reference, a reference given */
            put_header(in, LMC_FLAG_REF, cl, 0, tu_next(&r) >> tu_below(&r, 50), tu_next(&r));
            with_ref = 1;
            break;
        case 3: { /* valid header, a chunk header at the largest content and payload sizes, random payload */
            put_header(in, 0, cl, 0, 0, 0);
            uint32_t const c = maxc - (uint32_t)tu_below(&r, 16);
            wr32(in + 40, c);
            wr32(in + 44, (uint32_t)(c + (c >> 15) + 64));
            break;
        }
        case 4: { /* valid header and a chunk whose payload checksum is right: a piece of the largest
                     size made of CONST blocks, ending early (the payload is the rest of the 1 KB) */
            int const delta = (int)tu_below(&r, 2);
            put_header(in, delta ? LMC_FLAG_REF : 0, cl, 0, delta ? sizeof(refbuf) : 0, delta ? refhash : 0);
            with_ref = delta;
            uint32_t const c = maxc - (uint32_t)tu_below(&r, 9);
            unsigned const ws[4] = { 1, 2, 4, 8 };
            unsigned const w = ws[tu_below(&r, 4)];
            uint8_t* const pl = in + 56;
            size_t const ps = sizeof(in) - 56;
            wr32(pl, c); pl[4] = (uint8_t)w; pl[5] = (uint8_t)(w > 1 ? (tu_below(&r, 2) << 1) : 0); pl[6] = 0; pl[7] = 0;
            for (size_t k = 8; k + 1 < ps; k += 2) { pl[k] = LMC_CODER_CONST; pl[k + 1] = (uint8_t)k; }
            wr32(in + 40, c);
            wr32(in + 44, (uint32_t)ps);
            wr32(in + 48, (uint32_t)lmc_hash64(pl, ps));
            break;
        }
        default: { /* valid header, an end marker, then a footer declaring a huge chunk count */
            put_header(in, 0, cl, 0, 0, 0);
            wr32(in + 40, 0);
            wr64(in + 44, tu_next(&r));
            n = 44 + 32 + tu_below(&r, 64);
            break;
        }
        }
        long long const base = acct_begin();
        lmc_dctx* const d = lmc_dctx_create();
        assert_non_null(d);
        if (with_ref) assert_int_equal(lmc_dctx_set_ref(d, refbuf, sizeof(refbuf)), 0);
        size_t const r1 = lmc_decompress(d, out, cap, in, n);
        assert_true(lmc_is_error(r1));
        lmc_dctx_reset(d);
        size_t const r2 = tu_decompress_stream(d, out, cap, in, n, tu_pieces_default, TU_NPIECES);
        assert_true(lmc_is_error(r2) || r2 == TU_STALL);
        lmc_frame_stats st;
        assert_true(lmc_is_error(lmc_frame_stats_get(&st, in, n)));
        lmc_dctx_free(d);
        long long const peak = acct_peak(base);
        count[kind]++;
        if (peak > worst[kind]) { worst[kind] = peak; worst_it[kind] = it; }
    }
    static const char* const kinds[6] = {
        "random bytes", "valid header, huge content size", "valid delta header, huge ref size",
        "max-size chunk header, random payload", "max-size chunk, valid payload checksum", "huge chunk count in footer" };
    long long worst_all = 0;
    for (int k = 0; k < 6; k++) {
        if (k_alloc_tracked && live)
            print_message("hostile %-40s %4zu inputs, peak held by the decoder %lld B (input %d)\n", kinds[k], count[k],
                          worst[k], worst_it[k]);
        if (worst[k] > worst_all) worst_all = worst[k];
    }
    if (k_alloc_tracked && live)
        print_message("hostile inputs: %d of <= 1 KB, one-shot + streaming + walk each, fresh context; worst peak %lld B (bound %lld B)\n",
                      HOSTILE_N, worst_all, HOSTILE_BOUND);
    else
        print_message("hostile inputs: %d of <= 1 KB, one-shot + streaming + walk each: all errors\n", HOSTILE_N);
    if (k_alloc_tracked && live && worst_all > HOSTILE_BOUND)
        fail_msg("a 1 KB input made the decoder hold %lld bytes (bound %lld)", worst_all, HOSTILE_BOUND);

    /* What is left: a 1 KB chunk whose structure is complete (450 CONST blocks,
     * a 29 MiB piece) does describe 29 MiB of content, and decoding it needs
     * chunk-sized buffers before the content checksum (wrong here) can be
     * checked. The decoder holds at most 2 x content (streams + streaming
     * output) plus a little, never more. */
    for (int it = 0; it < 4; it++) {
        uint8_t* const pl = in + 56;
        size_t const nblk = (sizeof(in) - 56 - 8 - 4 - 12 - 32) / 2;
        uint32_t const c = (uint32_t)(nblk * LMC_BLOCK_MAX);
        size_t const psu = 8 + 2 * nblk;
        put_header(in, 0, 25, 0, 0, 0);
        wr32(pl, c); pl[4] = 1; pl[5] = 0; pl[6] = 0; pl[7] = 0;
        for (size_t k = 0; k < nblk; k++) { pl[8 + 2 * k] = LMC_CODER_CONST; pl[9 + 2 * k] = (uint8_t)(k + (size_t)it); }
        wr32(in + 40, c); wr32(in + 44, (uint32_t)psu); wr32(in + 48, (uint32_t)lmc_hash64(pl, psu));
        wr32(in + 52, 0x12345678u + (uint32_t)it);   /* content checksum: wrong */
        wr32(pl + psu, 0);                           /* end marker */
        size_t const n = 56 + psu + 4 + 12 + 32;
        assert_true(n <= sizeof(in));
        long long const base = acct_begin();
        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_get_error(lmc_decompress(d, out, cap, in, n)), LMC_ERR_CHECKSUM);
        lmc_dctx_reset(d);
        size_t const r2 = tu_decompress_stream(d, out, cap, in, n, tu_pieces_default, TU_NPIECES);
        assert_int_equal(lmc_get_error(r2), LMC_ERR_CHECKSUM);
        lmc_dctx_free(d);
        long long const peak = acct_peak(base);
        if (it == 0 && k_alloc_tracked && live)
            print_message("hostile %zu-byte frame, complete structure for %u B of content, wrong content checksum: "
                          "peak held %lld B (%.2f x content)\n", n, c, peak, (double)peak / c);
        if (k_alloc_tracked && live && peak > 2ll * c + HOSTILE_BOUND)
            fail_msg("a %zu-byte frame describing %u bytes made the decoder hold %lld bytes", n, c, peak);
    }
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bit_flips_samples),
        cmocka_unit_test(test_truncation_samples),
        cmocka_unit_test(test_wrong_reference),
        cmocka_unit_test(test_payload_flips_are_checksum),
        cmocka_unit_test(test_hostile_alloc_peak),
    };
    return cmocka_run_group_tests_name("corruption", tests, setup_samples, teardown_samples);
}
