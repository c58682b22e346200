/* test_refctx.c - the reference-modelled layout: REFCTX value blocks round
 * trip on every kind of difference (none, tiny, sign crossings, extremes,
 * NaN patterns), hand-built blocks decode to the values the format defines,
 * malformed blocks fail with the documented error, and frames choose REFCTX
 * for float deltas only when allowed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"
#include "mem.h"
#include "error.h"
#include "refctx_enc.h"
#include "refctx_dec.h"
#include "freq_dec.h"
#include "frame.h"

typedef struct { lmc_refctx_ws* enc; lmc_refctx_dws* dec; uint8_t *cur, *ref, *buf, *out; } rc_state;

#define BUFCAP (4 * LMC_VBLOCK_MAX + 4096)

static int setup(void** state)
{
    rc_state* const s = (rc_state*)calloc(1, sizeof(*s));
    s->enc = (lmc_refctx_ws*)calloc(1, sizeof(lmc_refctx_ws));
    s->dec = (lmc_refctx_dws*)calloc(1, sizeof(lmc_refctx_dws));
    s->cur = (uint8_t*)tu_xmalloc(4 * LMC_VBLOCK_MAX);
    s->ref = (uint8_t*)tu_xmalloc(4 * LMC_VBLOCK_MAX);
    s->buf = (uint8_t*)tu_xmalloc(BUFCAP + 64);
    s->out = (uint8_t*)tu_xmalloc(4 * LMC_VBLOCK_MAX);
    *state = s;
    return 0;
}

static int teardown(void** state)
{
    rc_state* const s = (rc_state*)*state;
    free(s->enc); free(s->dec); free(s->cur); free(s->ref); free(s->buf); free(s->out); free(s);
    return 0;
}

static void wr(uint8_t* p, unsigned w, uint32_t v) { if (w == 2) lmc_wr16(p, (uint16_t)v); else lmc_wr32(p, v); }

/* The instruction sets the encoder and decoder may use: all this CPU has,
 * the same taking gathers as slow (the loops that replace them with
 * permutes, on an Intel CPU too), AVX-512 without VBMI, AVX2 without
 * AVX-512, BMI2 only, and none (SSE2 and C), so that the loops of older CPUs
 * run too. */
static const unsigned cpu_modes[] = { ~0u, ~LMC_CPU_FASTGATHER, LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2 | LMC_CPU_AVX512,
                                      LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2, LMC_CPU_BMI2, 0 };
#define NMODES (sizeof(cpu_modes) / sizeof(cpu_modes[0]))

/* Encodes m values, checks the estimate, decodes, compares. Every CPU mode
 * must write the same block, and each decoder mode must read it. Returns
 * the block size. */
static size_t roundtrip(rc_state* s, size_t m, unsigned w)
{
    size_t sz = 0;
    uint8_t* const first = (uint8_t*)tu_xmalloc(BUFCAP);
    for (size_t mode = 0; mode < NMODES; mode++) {
        lmc_cpu_restrict(cpu_modes[mode]);
        size_t const est = lmc_refctx_prepare(s->enc, s->cur, s->ref, m, w);
        size_t const z = lmc_refctx_encode(s->enc, s->buf, BUFCAP);
        assert_true(z > 4);
        assert_int_equal(s->buf[0], LMC_KIND_REFCTX);
        assert_int_equal(lmc_rd24(s->buf + 1), z - 4);
        /* the estimate guides the choice against GROUPED: it must be close */
        if (!(est + 64 + z / 50 >= z && z + 64 + z / 50 >= est)) print_message("m %zu w %u est %zu size %zu\n", m, w, est, z);
        assert_true(est + 64 + z / 50 >= z && z + 64 + z / 50 >= est);
        if (mode == 0) { sz = z; memcpy(first, s->buf, z); }
        assert_int_equal(z, sz);
        assert_memory_equal(s->buf, first, sz);
    }
    /* Each decoder mode reads the block from a buffer of its exact size,
     * against a reference and into an output of exactly m values, so that
     * ASan (C loops) and valgrind's memcheck (`make memcheck`: the asm loop
     * of a normal build) see any access past them; then the same for a
     * truncated copy (refused) and a copy with a few bytes changed (any
     * result, but no access outside). */
    uint8_t* const blk = (uint8_t*)tu_xmalloc(sz - 4);
    uint8_t* const ref = (uint8_t*)tu_xmalloc(m * w);
    uint8_t* const out = (uint8_t*)tu_xmalloc(m * w);
    memcpy(ref, s->ref, m * w);
    tu_rng rng = { m * 31 + w + sz };
    for (size_t mode = 0; mode < NMODES; mode++) {
        lmc_cpu_restrict(cpu_modes[mode]);
        memcpy(blk, s->buf + 4, sz - 4);
        memset(out, 0xEE, m * w);
        size_t const r = lmc_refctx_decode(s->dec, out, m, w, ref, blk, sz - 4);
        assert_false(lmc_is_error(r));
        assert_memory_equal(out, s->cur, m * w);
        size_t const cut = (size_t)(tu_next(&rng) % (sz - 4));
        uint8_t* const part = (uint8_t*)tu_xmalloc(cut ? cut : 1);
        memcpy(part, blk, cut);
        assert_true(lmc_is_error(lmc_refctx_decode(s->dec, out, m, w, ref, part, cut)));
        free(part);
        for (int k = 0; k < 4; k++) blk[tu_next(&rng) % (sz - 4)] ^= (uint8_t)(1 + tu_next(&rng) % 255);
        (void)lmc_refctx_decode(s->dec, out, m, w, ref, blk, sz - 4);
    }
    lmc_cpu_restrict(~0u);
    free(blk); free(ref); free(out);
    free(first);
    return sz;
}

/* Outside the round-trip loop: K_FEWWORDS, most magnitudes move by
 * 2^9..2^10-1, one token, so a block with many raw bits and few rANS words;
 * K_RARE, one value in about 300 moves by a few ulps (a late-training bf16
 * delta), so a block of 4 states with few words and few raw bits */
enum { K_SAME, K_SMALL, K_CROSS, K_EXTREME, K_RANDOM, K_SPARSE, K_COUNT, K_FEWWORDS = K_COUNT, K_RARE };

static void fill(rc_state* s, size_t m, unsigned w, int kind, uint64_t seed)
{
    tu_rng r = { seed * 2654435761u + 17 };
    uint32_t const mask = w == 2 ? 0xFFFFu : 0xFFFFFFFFu;
    uint32_t const special[] = { 0, 0x8000u, 0x7FFFu, 0xFFFFu, 0x7F80u, 0xFF80u, 0x7FC1u, 0x0001u, 0x8001u,
                                 0x7F800000u, 0xFF800000u, 0x7FC00001u, 0x80000000u, 0x7FFFFFFFu, 0xFFFFFFFFu };
    for (size_t i = 0; i < m; i++) {
        uint32_t ref, cur;
        /* references look like weights: a Gaussian-ish exponent spread */
        uint32_t const e = (uint32_t)(118 + tu_next(&r) % 12);
        uint32_t const mant = (uint32_t)tu_next(&r);
        ref = w == 2 ? ((uint32_t)(tu_next(&r) & 1) << 15) | e << 7 | (mant & 0x7F)
                     : ((uint32_t)(tu_next(&r) & 1) << 31) | e << 23 | (mant & 0x7FFFFF);
        switch (kind) {
        case K_SAME: cur = ref; break;
        case K_SMALL: {
            int32_t const d = (int32_t)(tu_next(&r) % 9) - 4;
            uint32_t const sign = ref & (w == 2 ? 0x8000u : 0x80000000u);
            cur = sign | ((ref & ~sign) + (uint32_t)d);   /* magnitude moves by a few ulps */
            break;
        }
        case K_CROSS:   /* tiny magnitudes on both sides of zero */
            ref = (uint32_t)(tu_next(&r) % 5) | ((tu_next(&r) & 1) ? (w == 2 ? 0x8000u : 0x80000000u) : 0);
            cur = (uint32_t)(tu_next(&r) % 5) | ((tu_next(&r) & 1) ? (w == 2 ? 0x8000u : 0x80000000u) : 0);
            break;
        case K_EXTREME:
            ref = special[tu_next(&r) % 15] & mask;
            cur = special[tu_next(&r) % 15] & mask;
            break;
        case K_SPARSE:
            cur = (tu_next(&r) % 8) ? ref : (ref ^ (uint32_t)(tu_next(&r) & 0x3F));
            break;
        case K_FEWWORDS:
            cur = ref + (tu_next(&r) % 16 ? 512 + (uint32_t)(tu_next(&r) % 512) : (uint32_t)(tu_next(&r) % 64));
            break;
        case K_RARE:
            cur = tu_next(&r) % 300 ? ref : ref + 1 + (uint32_t)(tu_next(&r) % 7);
            break;
        default:
            ref = (uint32_t)tu_next(&r) & mask;
            cur = (uint32_t)tu_next(&r) & mask;
            break;
        }
        wr(s->ref + i * w, w, ref & mask);
        wr(s->cur + i * w, w, cur & mask);
    }
}

static void test_roundtrip(void** state)
{
    rc_state* const s = (rc_state*)*state;
    size_t const sizes[] = { 1, 2, 3, 4, 5, 7, 64, 1000, 4099, LMC_VBLOCK_MAX };
    for (unsigned w = 2; w <= 4; w += 2)
        for (int kind = 0; kind < K_COUNT; kind++)
            for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                fill(s, sizes[z], w, kind, 100 * z + (size_t)kind + w);
                size_t const sz = roundtrip(s, sizes[z], w);
                if (kind == K_SAME && sizes[z] == LMC_VBLOCK_MAX) assert_true(sz < 64);      /* one token, M/M */
                if (kind == K_SMALL && sizes[z] == LMC_VBLOCK_MAX) assert_true(sz < sizes[z] * w / 3);
                /* 32 states for large blocks only (s->buf holds the block) */
                int const wide = (s->buf[4] & LMC_REFCTX_WIDE) != 0;
                if (sz < LMC_REFCTX_WIDE_MIN) assert_false(wide);
                if (sz > LMC_REFCTX_WIDE_MIN + 4096) assert_true(wide);
                if (kind == K_RANDOM && sizes[z] == LMC_VBLOCK_MAX) assert_true(wide);
            }
}

/* Blocks that keep many groups of contexts: the difference's size grows
 * with the reference's exponent, band by band, so merging stops at several
 * groups. The VBMI coder looks each token's group up by its context less
 * the block's first one, from one table of 128 contexts or, when they span
 * more, two; every CPU mode must write the same bytes (roundtrip), over
 * exponents spanning 40 (one table) and 250 (two), in 16- and 32-bit
 * values, with an odd and an even number of groups among them. */
static void test_many_groups(void** state)
{
    rc_state* const s = (rc_state*)*state;
    unsigned odd = 0, even = 0;
    for (unsigned w = 2; w <= 4; w += 2)
        for (unsigned span = 40; span <= 250; span += 210)
            for (unsigned bands = 3; bands <= 8; bands++) {
                size_t const m = LMC_VBLOCK_MAX;
                tu_rng r = { 977u * w + span + bands };
                unsigned const e0 = span > 128 ? 2 : 100;
                for (size_t i = 0; i < m; i++) {
                    uint32_t const e = e0 + (uint32_t)(tu_next(&r) % span);
                    uint32_t const band = (e - e0) * bands / span;
                    uint32_t const ref = w == 2 ? ((uint32_t)(tu_next(&r) & 1) << 15) | e << 7 | (uint32_t)(tu_next(&r) & 0x7F)
                                                : ((uint32_t)(tu_next(&r) & 1) << 31) | e << 23 | (uint32_t)(tu_next(&r) & 0x7FFFFF);
                    uint32_t const mag = 1u << (2 * band);
                    uint32_t const cur = ref + (uint32_t)(tu_next(&r) % (2 * mag + 1)) - mag;
                    wr(s->ref + i * w, w, ref);
                    wr(s->cur + i * w, w, cur);
                }
                lmc_refctx_prepare(s->enc, s->cur, s->ref, m, w);
                unsigned const G = s->enc->ngroups;
                assert_true(G >= 3);
                assert_true(s->enc->present[s->enc->npresent - 1] - s->enc->present[0] >= (span > 128 ? 128 : 30));
                if (G & 1) odd++; else even++;
                roundtrip(s, m, w);
            }
    assert_true(odd > 0 && even > 0);
}

/* Two blocks decoded as a pair (lmc_refctx_decode_pair: their token loops
 * interleaved where the CPU has AVX-512, one after the other elsewhere)
 * give what each gives alone, in every CPU mode, for pairs whose word
 * streams differ in length (one may end long before the other, or be too
 * short for the paired loop at all) and pairs of different sizes (the
 * longer one goes on alone); a truncated or damaged block of either place
 * is refused. */
static void test_pairs(void** state)
{
    rc_state* const s = (rc_state*)*state;
    size_t const M = LMC_VBLOCK_MAX;
    static const struct { int kind[2]; size_t m[2]; } cases[] = {
        { { K_RANDOM, K_SMALL }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SMALL, K_RANDOM }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SPARSE, K_RANDOM }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_RANDOM, K_SAME }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SAME, K_SPARSE }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_EXTREME, K_CROSS }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SMALL, K_SMALL }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_FEWWORDS, K_RANDOM }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SMALL, K_FEWWORDS }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_RANDOM, K_SMALL }, { 40001, LMC_VBLOCK_MAX } },
        { { K_SMALL, K_RANDOM }, { LMC_VBLOCK_MAX, 30017 } },
        { { K_RANDOM, K_RANDOM }, { 20000, 20031 } },
        { { K_RANDOM, K_SMALL }, { 100, LMC_VBLOCK_MAX } },
        /* sparse blocks (4 states, few words) pair too: with each other, of
         * unequal sizes (a tail of fewer than 4 tokens after the shorter
         * one), and not with a wide block or a narrow block that is not
         * sparse (then one after the other) */
        { { K_RARE, K_RARE }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_RARE, K_RARE }, { 40001, LMC_VBLOCK_MAX } },
        { { K_RARE, K_RARE }, { LMC_VBLOCK_MAX, 9003 } },
        { { K_RARE, K_SAME }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_SAME, K_RARE }, { 30000, LMC_VBLOCK_MAX } },
        { { K_RARE, K_SMALL }, { LMC_VBLOCK_MAX, LMC_VBLOCK_MAX } },
        { { K_RARE, K_RANDOM }, { LMC_VBLOCK_MAX, 100 } },
    };
    for (unsigned w = 2; w <= 4; w += 2)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            uint8_t *cur[2], *ref[2], *out[2], *blk[2];
            lmc_refctx_job job[2];
            for (int b = 0; b < 2; b++) {
                size_t const m = cases[k].m[b];
                cur[b] = (uint8_t*)tu_xmalloc(m * w);
                ref[b] = (uint8_t*)tu_xmalloc(m * w);
                out[b] = (uint8_t*)tu_xmalloc(m * w);
                fill(s, m, w, cases[k].kind[b], 1000 + 10 * k + (size_t)b + w);
                memcpy(cur[b], s->cur, m * w);
                memcpy(ref[b], s->ref, m * w);
                (void)lmc_refctx_prepare(s->enc, s->cur, s->ref, m, w);
                size_t const z = lmc_refctx_encode(s->enc, s->buf, BUFCAP);
                assert_true(z > 4);
                if (m == M && (cases[k].kind[b] == K_FEWWORDS || cases[k].kind[b] == K_RANDOM))
                    assert_true(s->buf[4] & LMC_REFCTX_WIDE);
                lmc_refctx_job const probe = { NULL, NULL, s->buf + 4, m, z - 4 };
                if (cases[k].kind[b] == K_RARE) assert_int_equal(lmc_refctx_pair_class(&probe), 2);
                if (cases[k].kind[b] == K_RANDOM && m == 100) assert_int_equal(lmc_refctx_pair_class(&probe), 0);
                blk[b] = (uint8_t*)tu_xmalloc(z - 4);   /* exact sizes: ASan sees any access past them */
                memcpy(blk[b], s->buf + 4, z - 4);
                job[b] = (lmc_refctx_job){ out[b], ref[b], blk[b], m, z - 4 };
            }
            lmc_refctx_dws* const ws2 = (lmc_refctx_dws*)calloc(1, sizeof(lmc_refctx_dws));
            tu_rng rng = { 77 * k + w };
            for (size_t mode = 0; mode < NMODES; mode++) {
                lmc_cpu_restrict(cpu_modes[mode]);
                for (int b = 0; b < 2; b++) memset(out[b], 0xEE, cases[k].m[b] * w);
                assert_false(lmc_is_error(lmc_refctx_decode_pair(s->dec, ws2, w, &job[0], &job[1])));
                for (int b = 0; b < 2; b++) assert_memory_equal(out[b], cur[b], cases[k].m[b] * w);
                /* either block cut short, or with a byte changed in its
                 * last 8 (words, or for a block without words the raw
                 * stream's size or a state): refused */
                for (int b = 0; b < 2; b++) {
                    lmc_refctx_job cut[2] = { job[0], job[1] };
                    cut[b].size -= 1 + (size_t)(tu_next(&rng) % 16);
                    assert_true(lmc_is_error(lmc_refctx_decode_pair(s->dec, ws2, w, &cut[0], &cut[1])));
                    size_t const at = job[b].size - 1 - (size_t)(tu_next(&rng) % 8);
                    blk[b][at] ^= 0x5A;
                    size_t const bad = lmc_refctx_decode_pair(s->dec, ws2, w, &job[0], &job[1]);
                    blk[b][at] ^= 0x5A;
                    assert_true(lmc_is_error(bad));
                }
            }
            lmc_cpu_restrict(~0u);
            free(ws2);
            for (int b = 0; b < 2; b++) { free(cur[b]); free(ref[b]); free(out[b]); free(blk[b]); }
        }
}

/* A delta frame of tensors of one block or a few, of three float types,
 * with integer tensors and a tensor unrelated to its reference (plain
 * GROUPED blocks) between them: where the CPU pairs REFCTX blocks, a block
 * waits for the next one of its width, across tensors, and the content
 * hash must wait with it. Every CPU mode and thread count decodes the frame
 * to the content. */
static const size_t pt_s1[] = { 65536 }, pt_s2[] = { 1000 }, pt_s3[] = { 5000 }, pt_s4[] = { 3 * 65536 + 5 },
                    pt_s5[] = { 2 * 65536 }, pt_s6[] = { 40000 };
static const tu_tensor pair_tensors[] = {
    { "a", "BF16", 2, 65536, pt_s1, 1 },   { "s0", "BF16", 2, 65536, pt_s1, 1 }, { "b", "BF16", 2, 1000, pt_s2, 1 },
    { "c", "F32", 4, 65536, pt_s1, 1 },
    { "d", "BF16", 2, 65536, pt_s1, 1 },   { "e", "I32", 4, 5000, pt_s3, 1 },   { "f", "BF16", 2, 3 * 65536 + 5, pt_s4, 1 },
    { "g", "BF16", 2, 65536, pt_s1, 1 },   { "h", "BF16", 2, 65536, pt_s1, 1 }, { "i", "F16", 2, 65536, pt_s1, 1 },
    { "j", "F32", 4, 2 * 65536, pt_s5, 1 }, { "k", "F32", 4, 40000, pt_s6, 1 },
    { "s1", "BF16", 2, 65536, pt_s1, 1 },  { "s2", "BF16", 2, 3 * 65536 + 5, pt_s4, 1 }, { "s3", "F32", 4, 65536, pt_s1, 1 },
};
#define PAIR_NT (sizeof(pair_tensors) / sizeof(pair_tensors[0]))

/* seed 0: the reference; 1: the new file, each float value moved by a few
 * units in the last place, but for tensor g, unrelated, and the tensors
 * s0-s3, where one value in about 40 moves (sparse blocks, which pair with
 * each other; s0 comes while a wide block waits for its partner, and is
 * decoded alone meanwhile) */
static void pair_fill(size_t ti, uint8_t* p, size_t n, uint64_t seed)
{
    unsigned const w = pair_tensors[ti].width;
    if (!strcmp(pair_tensors[ti].dtype, "I32")) { tu_fill_random(p, n, 7 + ti + 100 * seed); return; }
    int const unrelated = !strcmp(pair_tensors[ti].name, "g");
    int const sparse = pair_tensors[ti].name[0] == 's';
    tu_fill_gauss(p, n, w, 1000 + ti + (seed && unrelated ? 5000 : 0));
    if (!seed || unrelated) return;
    tu_rng r;
    tu_seed(&r, 99 + ti);
    for (size_t i = 0; i + w <= n; i += w) {
        uint32_t d = (uint32_t)tu_below(&r, 7) - 3u;
        if (sparse && tu_below(&r, 40)) d = 0;
        if (w == 2) lmc_wr16(p + i, (uint16_t)(lmc_rd16(p + i) + d));
        else lmc_wr32(p + i, lmc_rd32(p + i) + d);
    }
}

/* Decodes frame f in every CPU mode with 1 and 2 threads; each gives cur. */
static void decode_everywhere(const uint8_t* f, size_t fs, const uint8_t* ref, size_t rn, const uint8_t* cur, size_t nn)
{
    uint8_t* const back = (uint8_t*)tu_xmalloc(nn);
    for (size_t mode = 0; mode < NMODES; mode++)
        for (int t = 1; t <= 2; t++) {
            lmc_cpu_restrict(cpu_modes[mode]);
            lmc_dctx* const d = lmc_dctx_create();
            assert_int_equal(lmc_dctx_set_param(d, LMC_D_THREADS, t), 0);
            assert_int_equal(lmc_dctx_set_ref(d, ref, rn), 0);
            memset(back, 0xEE, nn);
            assert_int_equal(lmc_decompress(d, back, nn, f, fs), nn);
            assert_memory_equal(back, cur, nn);
            lmc_dctx_free(d);
        }
    lmc_cpu_restrict(~0u);
    free(back);
}

static void test_frame_pairs(void** state)
{
    (void)state;
    size_t rn, nn;
    uint8_t* const ref = tu_build_safetensors(pair_tensors, PAIR_NT, &rn, 0, pair_fill);
    uint8_t* const cur = tu_build_safetensors(pair_tensors, PAIR_NT, &nn, 1, pair_fill);
    assert_int_equal(rn, nn);
    lmc_cctx* const c = lmc_cctx_create();
    assert_int_equal(lmc_cctx_set_ref(c, ref, rn), 0);
    uint8_t* f = NULL;
    size_t const fs = tu_compress(c, &f, cur, nn);
    assert_false(lmc_is_error(fs));
    lmc_frame_stats st;
    assert_int_equal(lmc_frame_stats_get(&st, f, fs), fs);
    assert_true(st.blocks[LMC_CODER_REFCTX] >= 17);
    assert_true(st.blocks[LMC_CODER_REFCTX] <= 20);   /* 21 blocks; g's is GROUPED */
    decode_everywhere(f, fs, ref, rn, cur, nn);
    lmc_cctx_free(c);
    free(f); free(ref); free(cur);
}

/* Many small tensors in one chunk whose blocks would pair (sparse ones):
 * more than the chunk decoder plans pairs for (PLAN_MAX, 64), so they pair
 * as they come; and a chunk cut across float tensors of a few blocks each
 * (a short block, full ones, a long partial one), which the plan pairs by
 * length. Every CPU mode and thread count decodes both to the content.
 * (The small tensors alternate bf16 and fp32: adjacent tensors of one
 * dtype would be coded as one piece.) */
#define MANY_NT 70
static size_t const many_shape[] = { 4096 };
static void many_fill(size_t ti, uint8_t* p, size_t n, uint64_t seed)
{
    unsigned const w = ti & 1 ? 4 : 2;
    tu_fill_gauss(p, n, w, 300 + ti);
    if (!seed) return;
    tu_rng r;
    tu_seed(&r, 17 + ti);
    for (size_t i = 0; i + w <= n; i += w) {
        if (tu_below(&r, 40)) continue;
        uint32_t const d = (uint32_t)tu_below(&r, 5) - 2u;
        if (w == 2) lmc_wr16(p + i, (uint16_t)(lmc_rd16(p + i) + d));
        else lmc_wr32(p + i, lmc_rd32(p + i) + d);
    }
}

static size_t const cut_shape[] = { 3 * 65536 + 4000 };
static void cut_fill(size_t ti, uint8_t* p, size_t n, uint64_t seed)
{
    tu_fill_gauss(p, n, 4, 600 + ti);
    if (!seed) return;
    tu_rng r;
    tu_seed(&r, 23 + ti);
    for (size_t i = 0; i + 4 <= n; i += 4) lmc_wr32(p + i, lmc_rd32(p + i) + (uint32_t)tu_below(&r, 9) - 4u);
}

static void test_frame_pair_plans(void** state)
{
    (void)state;
    static char names[MANY_NT][8];
    tu_tensor many[MANY_NT], cut[6];
    for (size_t i = 0; i < MANY_NT; i++) {
        snprintf(names[i], sizeof names[i], "t%02zu", i);
        many[i] = i & 1 ? (tu_tensor){ names[i], "F32", 4, 4096, many_shape, 1 }
                        : (tu_tensor){ names[i], "BF16", 2, 4096, many_shape, 1 };
    }
    for (size_t i = 0; i < 6; i++) cut[i] = (tu_tensor){ names[i], "F32", 4, 3 * 65536 + 4000, cut_shape, 1 };
    for (int which = 0; which < 2; which++) {
        const tu_tensor* const t = which ? cut : many;
        size_t const nt = which ? 6 : MANY_NT;
        void (*const fill_fn)(size_t, uint8_t*, size_t, uint64_t) = which ? cut_fill : many_fill;
        size_t rn, nn;
        uint8_t* const ref = tu_build_safetensors(t, nt, &rn, 0, fill_fn);
        uint8_t* const cur = tu_build_safetensors(t, nt, &nn, 1, fill_fn);
        lmc_cctx* const c = lmc_cctx_create();
        assert_int_equal(lmc_cctx_set_ref(c, ref, rn), 0);
        /* the small tensors as REFCTX blocks: byte groups would win some */
        if (!which) assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, 1 << LMC_CODER_RAW | 1 << LMC_CODER_REFCTX), 0);
        uint8_t* f = NULL;
        size_t const fs = tu_compress(c, &f, cur, nn);
        assert_false(lmc_is_error(fs));
        lmc_frame_stats st;
        assert_int_equal(lmc_frame_stats_get(&st, f, fs), fs);
        if (!which) {
            /* every tensor a REFCTX block, all in the first chunk, and sparse
             * ones on average (at most a byte per 16 values) */
            assert_int_equal(st.blocks[LMC_CODER_REFCTX], MANY_NT);
            assert_true(st.block_out[LMC_CODER_REFCTX] * 16 <= (uint64_t)MANY_NT * 4096);
        } else {
            assert_true(st.blocks[LMC_CODER_REFCTX] >= 6 * 4);   /* 4 a tensor, more where chunks cut one */
        }
        decode_everywhere(f, fs, ref, rn, cur, nn);
        lmc_cctx_free(c);
        free(f); free(ref); free(cur);
    }
}

/* Contexts joined from the start (float16: one group per exponent at
 * most): contexts present in the block that agree but for their low
 * ctx_join bits share a group, the block still
 * decodes in every CPU mode, and it is not much larger than with the
 * contexts free. */
static void test_ctx_join(void** state)
{
    rc_state* const s = (rc_state*)*state;
    for (int kind = K_SMALL; kind <= K_RANDOM; kind++) {
        fill(s, LMC_VBLOCK_MAX, 2, kind, 77 + (size_t)kind);
        size_t const free_sz = roundtrip(s, LMC_VBLOCK_MAX, 2);
        s->enc->ctx_join = 3;
        size_t const joined = roundtrip(s, LMC_VBLOCK_MAX, 2);
        (void)lmc_refctx_prepare(s->enc, s->cur, s->ref, LMC_VBLOCK_MAX, 2);
        s->enc->ctx_join = 0;
        for (unsigned k = 1; k < s->enc->npresent; k++) {
            unsigned const a = s->enc->present[k - 1], b = s->enc->present[k];
            if (a >> 3 == b >> 3) assert_int_equal(s->enc->map[a], s->enc->map[b]);
        }
        assert_true(joined < free_sz + free_sz / 20 + 256);
    }
}

/* Every 16-bit pair (c, r) on a grid of patterns that covers both signs,
 * zeros, the largest magnitudes, infinities and NaNs. */
static void test_all_sign_pairs(void** state)
{
    rc_state* const s = (rc_state*)*state;
    static const uint16_t p[] = { 0x0000, 0x0001, 0x0002, 0x3F80, 0x3F81, 0x7F7F, 0x7F80, 0x7FC0, 0x7FFE, 0x7FFF,
                                  0x8000, 0x8001, 0x8002, 0xBF80, 0xBF81, 0xFF7F, 0xFF80, 0xFFC0, 0xFFFE, 0xFFFF };
    size_t const np = sizeof(p) / sizeof(p[0]);
    size_t m = 0;
    for (size_t a = 0; a < np; a++)
        for (size_t b = 0; b < np; b++, m++) { lmc_wr16(s->cur + 2 * m, p[a]); lmc_wr16(s->ref + 2 * m, p[b]); }
    roundtrip(s, m, 2);
    for (size_t i = 0; i < m; i++) {
        lmc_wr32(s->cur + 4 * i, (uint32_t)lmc_rd16(s->cur + 2 * i) << 16 | 0xFFFF);
        lmc_wr32(s->ref + 4 * i, (uint32_t)lmc_rd16(s->ref + 2 * i) << 16);
    }
    roundtrip(s, m, 4);
}

/* Hand-built block: one group whose only token is "+1" (token 1, freq M),
 * no raw bits, states at L. */
static size_t plus_one_block(uint8_t* b)
{
    size_t n = 0;
    b[n++] = 1;                     /* G */
    b[n++] = 2; b[n++] = 0;         /* nsym = 2 */
    b[n++] = 0; b[n++] = 0;         /* token 0 absent */
    b[n++] = 0x90; b[n++] = 0x00;   /* token 1: 4096 */
    for (int j = 0; j < 4; j++) { lmc_wr32(b + n, LMC_ANS_L); n += 4; }
    lmc_wr32(b + n, 0); n += 4;     /* raw_size */
    return n;
}

/* The same block with 32 states (G byte 0x81). */
static size_t plus_one_block_wide(uint8_t* b)
{
    size_t n = 0;
    b[n++] = 1 | LMC_REFCTX_WIDE;
    b[n++] = 2; b[n++] = 0;
    b[n++] = 0; b[n++] = 0;
    b[n++] = 0x90; b[n++] = 0x00;
    for (int j = 0; j < LMC_REFCTX_STATES_WIDE; j++) { lmc_wr32(b + n, LMC_ANS_L); n += 4; }
    lmc_wr32(b + n, 0); n += 4;
    return n;
}

static void test_handmade_mode(rc_state* s)
{
    size_t const n = plus_one_block(s->buf);
    /* +1 on the magnitude: 1.0 -> next float up, -1.0 -> next float down, -0 -> smallest negative */
    uint16_t const refs[] = { 0x3F80, 0xBF80, 0x8000, 0x0000, 0xFFFE };
    uint16_t const want[] = { 0x3F81, 0xBF81, 0x8001, 0x0001, 0xFFFF };
    for (size_t i = 0; i < 5; i++) lmc_wr16(s->ref + 2 * i, refs[i]);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 5, 2, s->ref, s->buf, n), 0);
    for (size_t i = 0; i < 5; i++) assert_int_equal(lmc_rd16(s->out + 2 * i), want[i]);
    /* a magnitude past the largest one is out of range */
    lmc_wr16(s->ref + 2 * 3, 0x7FFF);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 5, 2, s->ref, s->buf, n), LMC_ERR(CORRUPT));
    lmc_wr16(s->ref + 2 * 3, 0xFFFF);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 5, 2, s->ref, s->buf, n), LMC_ERR(CORRUPT));
    /* the same check where values go 8 at a time */
    for (size_t i = 0; i < 40; i++) lmc_wr16(s->ref + 2 * i, 0x3F80);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 40, 2, s->ref, s->buf, n), 0);
    for (size_t i = 0; i < 40; i++) assert_int_equal(lmc_rd16(s->out + 2 * i), 0x3F81);
    for (size_t at = 0; at < 40; at += 13) {
        lmc_wr16(s->ref + 2 * at, 0x7FFF);
        assert_int_equal(lmc_refctx_decode(s->dec, s->out, 40, 2, s->ref, s->buf, n), LMC_ERR(CORRUPT));
        lmc_wr16(s->ref + 2 * at, 0x3F80);
    }
    /* with 32 states: the same values, at every length around a round of 32 */
    size_t const nw = plus_one_block_wide(s->buf);
    for (size_t i = 0; i < 100; i++) lmc_wr16(s->ref + 2 * i, 0x3F80);
    for (size_t len = 1; len <= 100; len += (len < 70 ? 1 : 29)) {
        assert_int_equal(lmc_refctx_decode(s->dec, s->out, len, 2, s->ref, s->buf, nw), 0);
        for (size_t i = 0; i < len; i++) assert_int_equal(lmc_rd16(s->out + 2 * i), 0x3F81);
    }
    (void)plus_one_block(s->buf);
    /* the same table read as a 32-bit block: +1 ulp of 1.0f */
    lmc_wr32(s->ref, 0x3F800000u);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 1, 4, s->ref, s->buf, n), 0);
    assert_int_equal(lmc_rd32(s->out), 0x3F800001u);
}

static void test_handmade(void** state)
{
    rc_state* const s = (rc_state*)*state;
    for (size_t mode = 0; mode < NMODES; mode++) {
        lmc_cpu_restrict(cpu_modes[mode]);
        test_handmade_mode(s);
    }
    lmc_cpu_restrict(~0u);
}

static void test_malformed(void** state)
{
    rc_state* const s = (rc_state*)*state;
    uint8_t* const b = s->buf;
    size_t const n = plus_one_block(b);
    for (size_t i = 0; i < 8; i++) lmc_wr16(s->ref + 2 * i, 0x3F80);
#define DEC(len) lmc_refctx_decode(s->dec, s->out, 8, 2, s->ref, b, (len))
    assert_int_equal(DEC(n), 0);
    for (size_t t = 0; t < n; t++) assert_true(lmc_is_error(DEC(t)));        /* every truncation */
    b[n] = 0; b[n + 1] = 0;
    assert_int_equal(DEC(n + 2), LMC_ERR(CORRUPT));                          /* a word never read */
    b[0] = 0;  assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); b[0] = 1;         /* no group */
    b[0] = 17; assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); b[0] = 1;         /* too many groups */
    b[1] = 34; assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); b[1] = 2;         /* nsym > 2W+1: not a 16-bit token */
    b[6] = 0x01; assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); b[6] = 0x00;    /* frequencies do not sum to M */
    lmc_wr32(b + 7, LMC_ANS_L - 1); assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); lmc_wr32(b + 7, LMC_ANS_L);
    lmc_wr32(b + 7, LMC_ANS_L + 1); assert_int_equal(DEC(n), LMC_ERR(CORRUPT)); lmc_wr32(b + 7, LMC_ANS_L);
    lmc_wr32(b + 23, 1); assert_int_equal(DEC(n), LMC_ERR(TRUNCATED));      /* raw bytes missing */
    b[n] = 0; assert_int_equal(DEC(n + 1), LMC_ERR(CORRUPT));                /* a raw byte never read */
    lmc_wr32(b + 23, 0);
    /* two groups: bounds must increase; here the second table is missing */
    uint8_t g2[64];
    g2[0] = 2; g2[1] = 0;
    memcpy(g2 + 2, b + 1, n - 1);
    assert_int_equal(lmc_refctx_decode(s->dec, s->out, 8, 2, s->ref, g2, n + 1), LMC_ERR(CORRUPT));
    /* 32 states: every truncation, any state below L, and the flag cleared
     * (the states then misread as raw size and data) */
    size_t const nw = plus_one_block_wide(b);
    assert_int_equal(DEC(nw), 0);
    for (size_t t = 0; t < nw; t++) assert_true(lmc_is_error(DEC(t)));
    for (size_t j = 0; j < LMC_REFCTX_STATES_WIDE; j += 5) {
        lmc_wr32(b + 7 + 4 * j, LMC_ANS_L - 1); assert_int_equal(DEC(nw), LMC_ERR(CORRUPT));
        lmc_wr32(b + 7 + 4 * j, LMC_ANS_L + 1); assert_int_equal(DEC(nw), LMC_ERR(CORRUPT));
        lmc_wr32(b + 7 + 4 * j, LMC_ANS_L);
    }
    assert_int_equal(DEC(nw), 0);
    b[0] = 1; assert_true(lmc_is_error(DEC(nw))); b[0] = 1 | LMC_REFCTX_WIDE;
    b[0] = 17 | LMC_REFCTX_WIDE; assert_int_equal(DEC(nw), LMC_ERR(CORRUPT));
    (void)plus_one_block(b);
#undef DEC
    /* random bytes after a valid table never crash and never read outside */
    tu_rng r = { 77 };
    for (int it = 0; it < 2000; it++) {
        size_t const len = 8 + tu_next(&r) % 200;
        memcpy(b, s->buf, 7);
        for (size_t i = 7; i < len; i++) b[i] = (uint8_t)tu_next(&r);
        uint8_t* const tight = (uint8_t*)tu_xmalloc(len);
        memcpy(tight, b, len);
        (void)lmc_refctx_decode(s->dec, s->out, 8, 2, s->ref, tight, len);
        free(tight);
    }
}

/* Where the raw stream's size lies in the block blk[0..n) (after the kind
 * and size): after G (bit 7: 32 states), the bounds, G tables and the
 * states. */
static size_t raw_size_at(const uint8_t* blk, size_t n, unsigned w)
{
    unsigned const G = blk[0] & 0x7Fu, states = (blk[0] & 0x80u) ? 32 : 4;
    size_t pos = 1 + (G - 1u);
    uint16_t f[LMC_REFCTX_ALPHA_MAX];
    for (unsigned g = 0; g < G; g++) {
        size_t const t = lmc_freq_read(f, lmc_refctx_alpha(w), blk + pos, n - pos);
        assert_false(lmc_is_error(t));
        pos += t;
    }
    return pos + 4 * states;
}

/* A raw stream one byte short, or one byte long, fails as CORRUPT: for a
 * short stream (a sparse delta's, which the decoder copies in front of
 * zeros so that its vector loops can run to the end) and a long one (read
 * in place, the last values one at a time). */
/* Every value's difference of one bit length k (k - 1 raw bits), for each
 * k a width allows, and mixtures of two neighbouring lengths: the encoders
 * join the raw bits of several values before writing them (up to 63 bits
 * at a time), so that runs of exactly 64 or just over bits, the writer's
 * bound, are met at every alignment; every CPU mode must write the same
 * block, and each decode it. */
static void test_raw_widths(void** state)
{
    rc_state* const s = (rc_state*)*state;
    size_t const m = 4099;
    for (unsigned w = 2; w <= 4; w += 2)
        for (unsigned k = 1; k <= (w == 2 ? 15u : 31u); k++)
            for (int mix = 0; mix < 2; mix++) {
                tu_rng r = { 31u * k + w + (unsigned)mix };
                for (size_t i = 0; i < m; i++) {
                    uint32_t const e = (uint32_t)(100 + tu_next(&r) % 20);
                    uint32_t const ref = w == 2 ? e << 7 | (uint32_t)(tu_next(&r) & 0x7F) : e << 23 | (uint32_t)(tu_next(&r) & 0x7FFFFF);
                    unsigned const kk = mix && k > 1 && (tu_next(&r) & 1) ? k - 1 : k;
                    /* |t| of bit length kk, added: the sign stays, the magnitude grows */
                    uint32_t const mag = (1u << (kk - 1)) | ((uint32_t)tu_next(&r) & ((1u << (kk - 1)) - 1));
                    uint32_t const cur = (ref + mag) & (w == 2 ? 0x7FFFu : 0x7FFFFFFFu);
                    wr(s->ref + i * w, w, ref);
                    wr(s->cur + i * w, w, cur);
                }
                (void)roundtrip(s, m, w);
            }
}

static void test_raw_length(void** state)
{
    rc_state* const s = (rc_state*)*state;
    size_t const m = LMC_VBLOCK_MAX;
    int const kinds[2] = { K_SPARSE, K_RANDOM };
    int tried = 0;
    for (unsigned w = 2; w <= 4; w += 2)
        for (int k = 0; k < 2; k++, tried++) {
            int const kind = kinds[k];
            fill(s, m, w, kind, 4242u + w);
            (void)lmc_refctx_prepare(s->enc, s->cur, s->ref, m, w);
            size_t const z = lmc_refctx_encode(s->enc, s->buf, BUFCAP);
            assert_true(z > 4);
            const uint8_t* const blk = s->buf + 4;
            size_t const n = z - 4;
            size_t const pos = raw_size_at(blk, n, w);
            size_t const raw = lmc_rd32(blk + pos);
            assert_true(raw > 0);
            if (kind == K_SPARSE) assert_true(raw < LMC_REFCTX_RAWPAD);
            else assert_true(raw >= LMC_REFCTX_RAWPAD);
            uint8_t* const bad = (uint8_t*)tu_xmalloc(n + 1);
            for (size_t mode = 0; mode < NMODES; mode++) {
                lmc_cpu_restrict(cpu_modes[mode]);
                assert_int_equal(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, blk, n), 0);
                assert_memory_equal(s->out, s->cur, m * w);
                /* the last raw byte dropped */
                memcpy(bad, blk, pos + 4 + raw - 1);
                memcpy(bad + pos + 4 + raw - 1, blk + pos + 4 + raw, n - pos - 4 - raw);
                lmc_wr32(bad + pos, (uint32_t)(raw - 1));
                assert_int_equal(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, bad, n - 1), LMC_ERR(CORRUPT));
                /* a zero byte added */
                memcpy(bad, blk, pos + 4 + raw);
                bad[pos + 4 + raw] = 0;
                memcpy(bad + pos + 4 + raw + 1, blk + pos + 4 + raw, n - pos - 4 - raw);
                lmc_wr32(bad + pos, (uint32_t)(raw + 1));
                assert_int_equal(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, bad, n + 1), LMC_ERR(CORRUPT));
            }
            lmc_cpu_restrict(~0u);
            free(bad);
        }
    assert_int_equal(tried, 4);
}

/* The word stream's length of the block at buf (kind and size first, z bytes in all). */
static size_t block_words(const uint8_t* buf, size_t z, unsigned w)
{
    size_t const pos = raw_size_at(buf + 4, z - 4, w);
    return z - 4 - (pos + 4 + lmc_rd32(buf + 4 + pos));
}

/* Sparse blocks (4 states, at most one word per 32 tokens), which the
 * encoder and decoder code with loops of their own (renormalisation as a
 * branch): the encoder's gives the general loop's bytes, they round-trip in
 * every CPU mode (roundtrip), every cut into the word stream is refused,
 * and so is a word too many. */
static void test_sparse_blocks(void** state)
{
    rc_state* const s = (rc_state*)*state;
    size_t const sizes[] = { LMC_VBLOCK_MAX, 40000, 9001 };
    int tried = 0;
    for (unsigned w = 2; w <= 4; w += 2)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t const m = sizes[k];
            fill(s, m, w, K_RARE, 31 * k + w);
            size_t const z = roundtrip(s, m, w);
            (void)lmc_refctx_prepare(s->enc, s->cur, s->ref, m, w);
            assert_true(s->enc->sparse);
            assert_int_equal(lmc_refctx_encode(s->enc, s->buf, BUFCAP), z);
            assert_false(s->buf[4] & LMC_REFCTX_WIDE);
            /* the encoder's loop for sparse blocks writes what the general one does */
            uint8_t* const general = (uint8_t*)tu_xmalloc(z + 64);   /* 8 bytes of slack needed */
            s->enc->sparse = 0;
            assert_int_equal(lmc_refctx_encode(s->enc, general, z), z);
            assert_memory_equal(general, s->buf, z);
            free(general);
            size_t const nw = block_words(s->buf, z, w) / 2;
            assert_true(nw >= 2 && nw * 32 <= m);
            uint8_t* const blk = (uint8_t*)tu_xmalloc(z - 4 + 2);
            memcpy(blk, s->buf + 4, z - 4);
            for (size_t mode = 0; mode < NMODES; mode++) {
                lmc_cpu_restrict(cpu_modes[mode]);
                assert_int_equal(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, blk, z - 4), 0);
                assert_memory_equal(s->out, s->cur, m * w);
                for (size_t cut = 1; cut <= 2 * nw; cut++) {
                    uint8_t* const part = (uint8_t*)tu_xmalloc(z - 4 - cut);
                    memcpy(part, blk, z - 4 - cut);
                    assert_true(lmc_is_error(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, part, z - 4 - cut)));
                    free(part);
                }
                blk[z - 4] = 0x12; blk[z - 3] = 0x34;
                assert_int_equal(lmc_refctx_decode(s->dec, s->out, m, w, s->ref, blk, z - 2), LMC_ERR(CORRUPT));
            }
            lmc_cpu_restrict(~0u);
            free(blk);
            tried++;
        }
    assert_int_equal(tried, 6);
}

/* Frames: float deltas use REFCTX unless the coder mask or a forced layout says no. */
/* The AVX-512 encoder divides by f in single floats, whose quotient may be
 * one off, and corrects it from the remainder: the new state must be the
 * exact one for every f a table can hold, at both ends of each quotient. */
static void test_state_update(void** state)
{
    (void)state;
    long const misses = lmc_refctx_next_misses();
    if (misses < 0) { print_message("no AVX-512 coder here: state update not checked\n"); skip(); }
    assert_int_equal(misses, 0);
}

static void test_frame_choice(void** state)
{
    (void)state;
    size_t const m = 3 * LMC_VBLOCK_MAX / 2;
    uint8_t* const cur = (uint8_t*)tu_xmalloc(2 * m);
    uint8_t* const ref = (uint8_t*)tu_xmalloc(2 * m);
    tu_rng r = { 5 };
    for (size_t i = 0; i < m; i++) {
        uint16_t const v = (uint16_t)(((tu_next(&r) & 1) << 15) | (118 + tu_next(&r) % 10) << 7 | (tu_next(&r) & 0x7F));
        lmc_wr16(ref + 2 * i, v);
        lmc_wr16(cur + 2 * i, (tu_next(&r) % 3) ? v : (uint16_t)(v + 1 - (tu_next(&r) % 3)));
    }
    size_t const cap = lmc_compress_bound(2 * m);
    uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
    assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, LMC_DTYPE_BF16), 0);
    assert_int_equal(lmc_cctx_set_ref(c, ref, 2 * m), 0);
    assert_int_equal(lmc_dctx_set_ref(d, ref, 2 * m), 0);
    size_t sizes[3];
    for (int mode = 0; mode < 3; mode++) {
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, mode == 1 ? 0xFF & ~(1u << LMC_CODER_REFCTX) : 0xFF), 0);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_LAYOUT, mode == 2 ? 1 : 0), 0);
        size_t const fs = lmc_compress(c, f, cap, cur, 2 * m);
        assert_false(lmc_is_error(fs));
        sizes[mode] = fs;
        lmc_frame_stats st;
        assert_int_equal(lmc_frame_stats_get(&st, f, fs), fs);
        if (mode == 0) assert_int_equal(st.blocks[LMC_CODER_REFCTX], 2);
        else assert_int_equal(st.blocks[LMC_CODER_REFCTX], 0);
        assert_int_equal(st.pieces_refmodel, mode == 0 ? 1 : 0);
        lmc_frame_stats cs;   /* the encoder's own count agrees with the walk */
        assert_int_equal(lmc_cctx_last_stats(c, &cs), 0);
        assert_int_equal(cs.pieces_refmodel, st.pieces_refmodel);
        assert_int_equal(cs.blocks[LMC_CODER_REFCTX], st.blocks[LMC_CODER_REFCTX]);
        uint8_t* const back = (uint8_t*)tu_xmalloc(2 * m);
        assert_int_equal(lmc_decompress(d, back, 2 * m, f, fs), 2 * m);
        assert_memory_equal(back, cur, 2 * m);
        /* without its reference a REFCTX frame is refused */
        if (mode == 0) {
            lmc_dctx* const d2 = lmc_dctx_create();
            assert_int_equal(lmc_decompress(d2, back, 2 * m, f, fs), LMC_ERR(REF_REQUIRED));
            lmc_dctx_free(d2);
        }
        free(back);
    }
    /* the differences are +-1 ulp: far cheaper than their XOR, which flips runs of bits */
    assert_true(sizes[0] < sizes[1]);

    /* values unrelated to their reference (Adam's first moment after many
     * steps): the blocks fall back to plain byte groups, within a few bytes
     * of what the coder without REFCTX writes, and still round trip */
    for (size_t i = 0; i < m; i++)
        lmc_wr16(cur + 2 * i, (uint16_t)(((tu_next(&r) & 1) << 15) | (100 + tu_next(&r) % 4) << 7 | (tu_next(&r) & 0x7F)));
    size_t fresh[2];
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, mode ? 0xFF & ~(1u << LMC_CODER_REFCTX) : 0xFF), 0);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_LAYOUT, 0), 0);
        fresh[mode] = lmc_compress(c, f, cap, cur, 2 * m);
        assert_false(lmc_is_error(fresh[mode]));
        if (mode == 0) {
            /* frame header, chunk header, piece header (layout 2, XOR flag, ref offset), first value block */
            size_t const piece = LMC_HDR_SIZE + LMC_CHUNK_HDR_SIZE, vb = piece + LMC_PIECE_HDR + 8;
            assert_int_equal((f[piece + 5] & LMC_PIECE_LAYOUT_MASK) >> LMC_PIECE_LAYOUT_SHIFT, LMC_LAYOUT_REFMODEL);
            assert_int_equal(f[vb], LMC_KIND_GROUPED);
            assert_true(f[vb + 1] & LMC_GROUPED_PLAIN);
        }
        uint8_t* const back = (uint8_t*)tu_xmalloc(2 * m);
        assert_int_equal(lmc_decompress(d, back, 2 * m, f, fresh[mode]), 2 * m);
        assert_memory_equal(back, cur, 2 * m);
        free(back);
    }
    assert_true(fresh[0] <= fresh[1] + 64);
    lmc_cctx_free(c); lmc_dctx_free(d);
    free(cur); free(ref); free(f);
}

/* Value blocks equal to their reference (frozen tensors) take a shortcut to
 * GROUPED XOR with a CONST block per stream; a block that differs in its
 * first or in its very last byte must not, and all of it round trips, with
 * and without CONST among the allowed coders. */
static void test_frame_unchanged_blocks(void** state)
{
    (void)state;
    size_t const V = LMC_VBLOCK_MAX, m = 4 * V + 1000;
    for (unsigned w = 2; w <= 4; w += 2) {
        uint8_t* const ref = (uint8_t*)tu_xmalloc(w * m);
        uint8_t* const cur = (uint8_t*)tu_xmalloc(w * m);
        uint8_t* const back = (uint8_t*)tu_xmalloc(w * m);
        tu_rng r = { 11 + w };
        for (size_t i = 0; i < m; i++) {
            uint32_t const v = (uint32_t)(((tu_next(&r) & 1) << 15) | (118 + tu_next(&r) % 10) << 7 | (tu_next(&r) & 0x7F));
            if (w == 2) lmc_wr16(ref + 2 * i, (uint16_t)v);
            else lmc_wr32(ref + 4 * i, v << 16 | (uint32_t)(tu_next(&r) & 0xFFFF));
        }
        memcpy(cur, ref, w * m);
        cur[2 * V * w - 1] ^= 0x80;   /* block 1: the sign of its last value, its last byte */
        cur[2 * V * w] ^= 0x01;       /* block 2: its first byte */
        size_t const cap = lmc_compress_bound(w * m);
        uint8_t* const f = (uint8_t*)tu_xmalloc(cap);
        lmc_cctx* const c = lmc_cctx_create();
        lmc_dctx* const d = lmc_dctx_create();
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW), 0);
        assert_int_equal(lmc_cctx_set_param(c, LMC_P_DTYPE, w == 2 ? LMC_DTYPE_BF16 : LMC_DTYPE_F32), 0);
        assert_int_equal(lmc_cctx_set_ref(c, ref, w * m), 0);
        assert_int_equal(lmc_dctx_set_ref(d, ref, w * m), 0);
        for (int mode = 0; mode < 2; mode++) {
            assert_int_equal(lmc_cctx_set_param(c, LMC_P_CODERS, mode ? 0xFF & ~(1u << LMC_CODER_CONST) : 0xFF), 0);
            size_t const fs = lmc_compress(c, f, cap, cur, w * m);
            assert_false(lmc_is_error(fs));
            lmc_frame_stats st;
            assert_int_equal(lmc_frame_stats_get(&st, f, fs), fs);
            assert_int_equal(st.pieces_refmodel, w == 2 ? 1 : 2);   /* f32: two chunks */
            /* blocks 0, 3 and the tail: every stream CONST; blocks 1 and 2 one stream at most */
            if (mode == 0) assert_true(st.blocks[LMC_CODER_CONST] >= 3 * w && st.blocks[LMC_CODER_CONST] <= 5 * w);
            else assert_int_equal(st.blocks[LMC_CODER_CONST], 0);
            memset(back, 0, w * m);
            assert_int_equal(lmc_decompress(d, back, w * m, f, fs), w * m);
            assert_memory_equal(back, cur, w * m);
        }
        lmc_cctx_free(c); lmc_dctx_free(d);
        free(ref); free(cur); free(back); free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_many_groups),
        cmocka_unit_test(test_frame_pairs),
        cmocka_unit_test(test_frame_pair_plans),
        cmocka_unit_test(test_all_sign_pairs),
        cmocka_unit_test(test_ctx_join),
        cmocka_unit_test(test_handmade),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_raw_length),
        cmocka_unit_test(test_raw_widths),
        cmocka_unit_test(test_sparse_blocks),
        cmocka_unit_test(test_state_update),
        cmocka_unit_test(test_frame_choice),
        cmocka_unit_test(test_frame_unchanged_blocks),
    };
    return cmocka_run_group_tests_name("refctx", tests, setup, teardown);
}
