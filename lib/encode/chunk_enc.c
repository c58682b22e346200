/* chunk_enc.c - chunk = header + pieces; piece = header + w streams + tail. */
#include <string.h>
#include "chunk_enc.h"
#include "group.h"
#include "hash.h"
#include "mem.h"
#include "refctx.h"

/* The chunk's content hash and payload checksum are taken as the coding
 * goes: after each value block of the reference-modelled layout, whose
 * 64 Ki values were just read and coded, so that XXH3 reads them from cache
 * instead of reading the whole chunk back from memory at its end (bf16
 * delta, bench/api_loop.c, one thread, medians of alternated runs: 6.6 MB
 * +9 to +10 %, 200 MB +7 %; two threads +13 %). Other pieces are left to
 * the chunk's end: hashing a byte-grouped piece right after grouping it
 * pushed its streams out of L2 before they were coded (keyframe 6.6 MB
 * 0.93-0.95 of the time before, with AVX-512 or AVX2 hashing alike). Less
 * than 4 KiB waits for the next call (last: not), so that each update is
 * long enough for the vector loop; XXH3's streaming form gives the one-shot
 * hash of the same bytes. */
static void hash_upto(lmc_hash_cursor* hc, const uint8_t* upto, int last)
{
    size_t const n = (size_t)(upto - hc->base);
    if (n <= hc->done || n - hc->done < (last ? 1u : 4096u)) return;
    lmc_hstate_update(hc->st, hc->base + hc->done, n - hc->done);
    hc->done = n;
}

/* A value block coded: the content up to its end, the payload up to p. */
static void hash_block(lmc_chunk_ws* ws, const uint8_t* content_end, const uint8_t* p)
{
    hash_upto(&ws->content_hash, content_end, 0);
    hash_upto(&ws->payload_hash, p, 0);
}

static void hash_begin(lmc_hash_cursor* hc, const uint8_t* base)
{
    XXH3_64bits_reset(hc->st);
    hc->base = base;
    hc->done = 0;
}

static uint8_t* encode_stream(lmc_chunk_ws* ws, uint8_t* p, const uint8_t* s, size_t n, unsigned coders,
                              unsigned row, lmc_frame_stats* st, uint64_t* out_bytes)
{
    uint32_t hist[256];
    for (size_t b = 0; b < n; b += LMC_BLOCK_MAX) {
        size_t const m = LMC_MIN((size_t)LMC_BLOCK_MAX, n - b);
        size_t sz;
        if (lmc_block_scan(hist, s + b, m)) {
            p[0] = LMC_CODER_RAW;
            memcpy(p + 1, s + b, m);
            sz = 1 + m;
        } else {
            sz = lmc_block_encode(&ws->blk, p, s + b, m, hist, coders, row);
        }
        unsigned const coder = p[0];
        st->blocks[coder]++;
        st->block_in[coder] += m;
        st->block_out[coder] += sz;
        *out_bytes += sz;
        p += sz;
    }
    return p;
}

static void add_block_stat(lmc_frame_stats* st, unsigned coder, size_t in, size_t out)
{
    st->blocks[coder]++;
    st->block_in[coder] += in;
    st->block_out[coder] += out;
}

/* GROUPED value block: kind, mode, then one ordinary block per byte stream. */
static size_t encode_grouped_vblock(lmc_chunk_ws* ws, uint8_t* dst, const uint8_t* src, const uint8_t* r,
                                    size_t m, unsigned w, int rot, unsigned coders, lmc_frame_stats* st)
{
    uint32_t hist[256];
    uint8_t* p = dst;
    *p++ = LMC_KIND_GROUPED;
    *p++ = (uint8_t)((rot ? LMC_GROUPED_ROTATED : 0) | (r ? 0 : LMC_GROUPED_PLAIN));
    lmc_group(ws->streams, src, r, m, w, rot);
    for (unsigned k = 0; k < w; k++) {
        const uint8_t* const s = ws->streams + k * m;
        size_t sz;
        if (lmc_block_scan(hist, s, m)) {
            p[0] = LMC_CODER_RAW;
            memcpy(p + 1, s, m);
            sz = 1 + m;
        } else {
            sz = lmc_block_encode(&ws->blk, p, s, m, hist, coders, 0);
        }
        add_block_stat(st, p[0], m, sz);
        p += sz;
    }
    return (size_t)(p - dst);
}

typedef struct { size_t xor_, plain, refctx; } vblock_estimates;

/* The sampled values [a, b) into the byte histograms and REFCTX token
 * counts; compiled per width, so that loads and byte loops are fixed. */
LMC_FORCE_INLINE uint64_t sample_values(uint32_t (*hx)[256], uint32_t (*hp)[256], uint16_t* tc, uint8_t* seen,
                                        const uint8_t* src, const uint8_t* r, size_t a, size_t b, unsigned w, int rot)
{
    unsigned const bits = 8 * w;
    uint64_t raw = 0;
    for (size_t i = a; i < b; i++) {
        uint32_t const v = w == 2 ? lmc_rd16(src + i * 2) : lmc_rd32(src + i * 4);
        uint32_t const x = w == 2 ? lmc_rd16(r + i * 2) : lmc_rd32(r + i * 4);
        uint32_t vx = v ^ x, vp = v;
        if (rot) {
            vx = bits == 32 ? (vx << 1) | (vx >> 31) : (((vx << 1) | (vx >> 15)) & 0xFFFFu);
            vp = bits == 32 ? (vp << 1) | (vp >> 31) : (((vp << 1) | (vp >> 15)) & 0xFFFFu);
        }
        /* unrolled: gcc -O2 keeps the loop, at twice the instructions */
#pragma GCC unroll 4
        for (unsigned k = 0; k < w; k++) { hx[k][(uint8_t)(vx >> (8 * k))]++; hp[k][(uint8_t)(vp >> (8 * k))]++; }
        uint64_t mag;
        int64_t sm;
        unsigned kb;
        unsigned const tok = lmc_refctx_diff(v, x, bits, &mag, &sm, &kb);
        unsigned const ctx = lmc_refctx_ctx(x, bits);
        if (!seen[ctx]) { seen[ctx] = 1; memset(tc + ctx * LMC_REFCTX_ALPHA_MAX, 0, LMC_REFCTX_ALPHA_MAX * sizeof(*tc)); }
        tc[ctx * LMC_REFCTX_ALPHA_MAX + tok]++;
        raw += kb ? kb - 1 : 0;
    }
    return raw;
}

/* Bytes to code the w byte streams whose sampled histograms are h (n
 * sampled values standing for n * scale): order-0 entropy, plus some tens of
 * bytes for each code table (two for a CONST stream). */
static size_t streams_estimate(const uint32_t (*h)[256], unsigned w, float n, float scale)
{
    float f = 0;
    size_t t = 0;
    for (unsigned k = 0; k < w; k++) {
        unsigned d = 0;
        float fk = 0;
        for (unsigned s = 0; s < 256; s++)
            if (h[k][s]) { fk += (float)h[k][s] * lmc_fast_log2(n / (float)h[k][s]); d++; }
        /* a sample's plug-in entropy is low by about (d - 1) / (2 ln 2) bits
         * (Miller and Madow): 1 % of the near-uniform low bytes of a dense
         * delta, enough to turn clear REFCTX wins into close calls */
        if (scale > 1) fk += (float)(d - 1) * 0.7213475f;
        f += LMC_MIN(fk, 8 * n);   /* a stream never costs more than RAW */
        t += d > 1 ? 40 : 2;
    }
    return (size_t)(f / 8 * scale) + 2 + t;
}

/* Order-0 estimates, in bytes, of a value block's codes, from a sample of it
 * (4 windows of 512 values, or all of a small block): byte groups of the XOR
 * delta, byte groups of the plain values, and REFCTX tokens given their
 * contexts plus raw bits. A sample's entropy is optimistic, most for REFCTX,
 * whose tables multiply with the contexts: callers leave it a margin. */
static vblock_estimates sample_estimates(lmc_chunk_ws* ws, const uint8_t* src, const uint8_t* r, size_t m, unsigned w, int rot)
{
    uint32_t hx[4][256], hp[4][256];
    memset(hx, 0, sizeof(hx[0]) * w);
    memset(hp, 0, sizeof(hp[0]) * w);
    uint16_t* const tc = ws->tcount;          /* [context][token], rows cleared as used */
    uint8_t* const seen = ws->tseen;
    memset(seen, 0, LMC_REFCTX_CONTEXTS);
    size_t const nwin = m >= 8192 ? 4 : 1, span = nwin == 1 ? m : 512, step = m / nwin;
    unsigned const bits = 8 * w;
    uint64_t raw = 0;
    for (size_t wi = 0; wi < nwin; wi++) {
        size_t const a = wi * step, b = wi * step + span;
        if (w == 2) raw += rot ? sample_values(hx, hp, tc, seen, src, r, a, b, 2, 1) : sample_values(hx, hp, tc, seen, src, r, a, b, 2, 0);
        else        raw += rot ? sample_values(hx, hp, tc, seen, src, r, a, b, 4, 1) : sample_values(hx, hp, tc, seen, src, r, a, b, 4, 0);
    }
    float const n = (float)(nwin * span), scale = (float)m / n;
    vblock_estimates e;
    e.xor_ = streams_estimate((const uint32_t (*)[256])hx, w, n, scale);
    e.plain = streams_estimate((const uint32_t (*)[256])hp, w, n, scale);
    float fr = 0;
    unsigned groups = 0;
    for (unsigned c = 0; c < LMC_REFCTX_CONTEXTS; c++) {
        if (!seen[c]) continue;
        const uint16_t* const row = tc + c * LMC_REFCTX_ALPHA_MAX;
        uint32_t nc = 0;
        for (unsigned s = 0; s < 2 * bits + 1; s++) nc += row[s];
        for (unsigned s = 0; s < 2 * bits + 1; s++)
            if (row[s]) fr += (float)row[s] * lmc_fast_log2((float)nc / (float)row[s]);
        groups++;
    }
    /* tables: merging keeps only the groups that pay for themselves */
    e.refctx = (size_t)((fr + (float)raw) / 8 * scale) + 28 + 20 * LMC_MIN(LMC_MIN(groups, 16u), 1u + (unsigned)(m >> 12));
    return e;
}

/* The XOR byte histograms alone of sample_estimates' windows: what a block
 * costs to check when REFCTX won the one before by a wide margin. Value i
 * counts into copy i mod 4 of the histograms: a delta's high bytes are
 * nearly all alike, and one counter for them made each value wait on the
 * last one's increment (store to load, a fifth of this pass's time; 4 % of
 * a bf16 delta's compression). */
LMC_FORCE_INLINE uint32_t xor_value(const uint8_t* src, const uint8_t* r, size_t i, unsigned w, int rot)
{
    uint32_t vx = w == 2 ? lmc_rd16(src + i * 2) ^ lmc_rd16(r + i * 2) : lmc_rd32(src + i * 4) ^ lmc_rd32(r + i * 4);
    if (rot) vx = w == 4 ? (vx << 1) | (vx >> 31) : (((vx << 1) | (vx >> 15)) & 0xFFFFu);
    return vx;
}

LMC_FORCE_INLINE void sample_xor_values(uint32_t (*hc)[4][256], const uint8_t* src, const uint8_t* r, size_t a, size_t b,
                                        unsigned w, int rot)
{
    size_t i = a;
    for (; i + 4 <= b; i += 4) {
#pragma GCC unroll 4
        for (unsigned c = 0; c < 4; c++) {
            uint32_t const vx = xor_value(src, r, i + c, w, rot);
#pragma GCC unroll 4
            for (unsigned k = 0; k < w; k++) hc[c][k][(uint8_t)(vx >> (8 * k))]++;
        }
    }
    for (; i < b; i++) {
        uint32_t const vx = xor_value(src, r, i, w, rot);
        for (unsigned k = 0; k < w; k++) hc[0][k][(uint8_t)(vx >> (8 * k))]++;
    }
}

static size_t sample_xor_estimate(const uint8_t* src, const uint8_t* r, size_t m, unsigned w, int rot)
{
    uint32_t hc[4][4][256];
    for (unsigned c = 0; c < 4; c++) memset(hc[c], 0, sizeof(hc[c][0]) * w);
    size_t const nwin = m >= 8192 ? 4 : 1, span = nwin == 1 ? m : 512, step = m / nwin;
    for (size_t wi = 0; wi < nwin; wi++) {
        size_t const a = wi * step, b = wi * step + span;
        if (w == 2) { if (rot) sample_xor_values(hc, src, r, a, b, 2, 1); else sample_xor_values(hc, src, r, a, b, 2, 0); }
        else        { if (rot) sample_xor_values(hc, src, r, a, b, 4, 1); else sample_xor_values(hc, src, r, a, b, 4, 0); }
    }
    for (unsigned k = 0; k < w; k++)
        for (unsigned s = 0; s < 256; s++) hc[0][k][s] += hc[1][k][s] + hc[2][k][s] + hc[3][k][s];
    float const n = (float)(nwin * span);
    return streams_estimate((const uint32_t (*)[256])hc[0], w, n, (float)m / n);
}

/* Layout 2: value blocks, each REFCTX or GROUPED (XOR or plain), whichever
 * is smaller. After a block that REFCTX won outright (by the margin below;
 * in this piece or an earlier one of the chunk: a file's tensors of one
 * kind behave alike), the next one runs REFCTX's pass first and checks it
 * only against the sampled XOR bytes (the token and plain-value sampling is
 * what costs); if that is not a clear REFCTX win either, the full sample
 * decides as usual. (An eighth until 2026-12-01: fp32 weight deltas, which
 * REFCTX wins by about a twentieth, then sampled every block in full; the
 * 18 deltas of bench/data/traj-3m and data/trajectory came out the same.)
 * REFCTX is taken without coding the block GROUPED too when the sampled
 * GROUPED estimate exceeds REFCTX's (exact) one by a 128th; a
 * thirty-second until 2026-12-02, when the sampled estimate gained its
 * bias correction (streams_estimate), then a sixty-fourth. Adam's second
 * moment, which REFCTX wins by about 3 %, was until then coded both ways in
 * most blocks; the 27 deltas of those trajectories give the same bytes at
 * each step (and, for the 128th, 12 deltas 100-400 steps apart and 5 sparse
 * ones too), and the moments delta of traj-3m compresses 3.7 % faster at a
 * 128th than at a sixty-fourth. Small blocks, estimated whole, keep the
 * thirty-second. */
/* ws->lean after a REFCTX block whose sampled XOR estimate was an eighth
 * or more over REFCTX's (bf16 deltas: about a sixth): the next block skips
 * even that sample and codes REFCTX, the one after it samples again. */
#define LEAN_WIDE 2

static uint8_t* encode_refmodel(lmc_chunk_ws* ws, uint8_t* p, const uint8_t* src, const uint8_t* r,
                                size_t n, unsigned w, int rot, unsigned coders, lmc_frame_stats* st)
{
    int lean = ws->lean;
    for (size_t b = 0; b < n; b += LMC_VBLOCK_MAX) {
        size_t const m = LMC_MIN((size_t)LMC_VBLOCK_MAX, n - b);
        const uint8_t* const s = src + b * w;
        const uint8_t* const rr = r + b * w;
        /* A block equal to its reference (a frozen tensor: fine-tuning that
         * trains adapters or some layers only) codes smallest as GROUPED XOR
         * with a CONST 0 block per stream: 2 + 2w bytes (10 for f32, where
         * an all-zero REFCTX block took 29). The choice below got there only after
         * estimating, grouping and scanning, and after a REFCTX block it
         * could take REFCTX instead (a constant stream's sampled estimate
         * is not 0: lmc_fast_log2(1) is 0.0049). A comparison gets there at
         * memcmp's speed. */
        if ((coders & (1u << LMC_CODER_CONST)) && memcmp(s, rr, m * w) == 0) {
            *p++ = LMC_KIND_GROUPED;
            *p++ = (uint8_t)(rot ? LMC_GROUPED_ROTATED : 0);
            for (unsigned k = 0; k < w; k++) {
                *p++ = LMC_CODER_CONST;
                *p++ = 0;
                add_block_stat(st, LMC_CODER_CONST, m, 2);
            }
            lean = 0;
            hash_block(ws, s + m * w, p);
            continue;
        }
        size_t const worst = 2 + w * (1 + m);    /* GROUPED of RAW blocks */
        size_t rc_est = SIZE_MAX, g_est;
        size_t const clear = m >= 8192 ? 128 : 32;   /* sampled (sample_estimates) or whole */
        vblock_estimates e;
        if (lean) {
            rc_est = lmc_refctx_prepare(&ws->rc, s, rr, m, w);
            e.plain = SIZE_MAX;
            if (lean == LEAN_WIDE) {
                e.xor_ = SIZE_MAX;   /* not sampled: see LEAN_WIDE */
                lean = 1;
            } else {
                e.xor_ = sample_xor_estimate(s, rr, m, w, rot);
                lean = e.xor_ > rc_est + rc_est / clear;
            }
        }
        if (!lean) {
            e = sample_estimates(ws, s, rr, m, w, rot);
            g_est = LMC_MIN(e.plain, e.xor_);
            /* REFCTX clearly behind on the sample (Adam's first moment): skip its full
             * pass (a small block is its own sample, and cheap to try) */
            if (rc_est == SIZE_MAX && !(m >= 8192 && e.refctx > g_est + g_est / 32)) rc_est = lmc_refctx_prepare(&ws->rc, s, rr, m, w);
        }
        const uint8_t* const gref = e.plain < e.xor_ ? NULL : rr;
        g_est = LMC_MIN(e.plain, e.xor_);
        size_t sz = 0;
        if (rc_est != SIZE_MAX && g_est > rc_est + rc_est / clear) {
            sz = lmc_refctx_encode(&ws->rc, p, worst);
            /* after a block checked and won by an eighth, the next is not */
            lean = !sz ? 0 : lean == 1 && g_est != SIZE_MAX && g_est > rc_est + rc_est / 8 ? LEAN_WIDE : 1;
            if (sz) {
                add_block_stat(st, LMC_CODER_REFCTX, m * w, sz);
                p += sz;
                hash_block(ws, s + m * w, p);
                continue;
            }
        }
        lean = 0;
        lmc_frame_stats gst;
        memset(&gst, 0, sizeof(gst));
        size_t const gsz = encode_grouped_vblock(ws, p, s, gref, m, w, rot, coders, &gst);
        if (rc_est != SIZE_MAX && rc_est < gsz + gsz / 32 && !sz) {
            /* close call: code REFCTX too and keep the smaller */
            size_t const rsz = lmc_refctx_encode(&ws->rc, ws->vtmp, LMC_MIN(gsz, worst));
            if (rsz && rsz < gsz) {
                memcpy(p, ws->vtmp, rsz);
                add_block_stat(st, LMC_CODER_REFCTX, m * w, rsz);
                p += rsz;
                hash_block(ws, s + m * w, p);
                continue;
            }
        }
        for (int c = 0; c < LMC_CODER_COUNT; c++) {
            st->blocks[c] += gst.blocks[c]; st->block_in[c] += gst.block_in[c]; st->block_out[c] += gst.block_out[c];
        }
        p += gsz;
        hash_block(ws, s + m * w, p);
    }
    ws->lean = lean;
    return p;
}

/* f32 values whose low 16 bits are 0, in the piece and in its reference:
 * bf16 weights saved as f32 (an upcast checkpoint). Judged on a sample (8
 * spans of 64 values, or the whole of a small piece): a wrong guess only
 * costs ratio. */
static int low_halves_zero(const uint8_t* src, const uint8_t* ref, size_t n)
{
    size_t const span = 64, spans = n >= 8 * span ? 8 : 1, len = spans == 1 ? n : span;
    size_t const step = spans == 1 ? 0 : (n - span) / 7;
    uint32_t any = 0;
    for (size_t k = 0; k < spans; k++)
        for (size_t i = k * step; i < k * step + len; i++) any |= (lmc_rd32(src + 4 * i) | lmc_rd32(ref + 4 * i)) & 0xFFFFu;
    return n > 0 && any == 0;
}

static uint8_t* encode_piece(lmc_chunk_ws* ws, uint8_t* p, const uint8_t* src, const lmc_piece* pc0,
                             const uint8_t* ref, unsigned coders, int layout, lmc_frame_stats* st)
{
    const lmc_piece* pc = pc0;
    /* Upcast bf16 (f32 whose low halves are 0 on both sides) is coded as 16-bit
     * values in the reference-modelled layout: each high half is a bf16 value
     * in its exponent's context, each low half a 0 in context 0 (about nothing
     * each). As f32, every difference carried 16 zero raw bits, or the block
     * went byte-grouped: 18 % larger than the bf16 file on the 6.6 MB bf16
     * delta of bench/data/traj-3m saved as f32. The piece keeps its dtype:
     * widths and dtypes are separate fields of its header. */
    lmc_piece half;
    if (pc->width == 4 && pc->dtype == LMC_DTYPE_F32 && pc->xor_ref && layout == 0 && ref
        && (coders & (1u << LMC_CODER_REFCTX)) && low_halves_zero(src, ref + pc->ref_off, pc->len / 4)) {
        half = *pc;
        half.width = 2;
        pc = &half;
    }
    unsigned const w = pc->width;
    size_t const n = pc->len / w, tail = pc->len % w;
    const uint8_t* const rfull = pc->xor_ref ? ref + pc->ref_off : NULL;
    const uint8_t* r = rfull;
    int rot = 0;
    if (layout == 0) {
        unsigned const how = lmc_choose_coding(src, r, n, w, pc->float_like);
        rot = (how & LMC_CODING_ROT) != 0;
        if (!(how & LMC_CODING_XOR)) r = NULL;
    } else {
        rot = w > 1 && pc->float_like && layout == 2;
    }
    /* floats with a reference: the reference-modelled layout, when allowed;
     * its blocks choose between difference, XOR and plain values themselves */
    int const refmodel = layout == 0 && rfull && (w == 2 || w == 4) && pc->float_like
                         && (coders & (1u << LMC_CODER_REFCTX));
    if (refmodel) r = rfull;
    uint8_t* const start = p;
    lmc_wr32(p, pc->len);
    p[4] = (uint8_t)w;
    p[5] = (uint8_t)((r ? LMC_PIECE_XOR : 0) | ((refmodel ? LMC_LAYOUT_REFMODEL : rot) << LMC_PIECE_LAYOUT_SHIFT));
    p[6] = pc->dtype;
    p[7] = 0;
    p += LMC_PIECE_HDR;
    if (r) { lmc_wr64(p, pc->ref_off); p += 8; }

    /* ANS1 only without a reference: on deltas (XOR or plain blocks beside
     * REFCTX) its trial never paid on our trajectories and cost 13 % of the
     * compression time */
    if (rfull) coders &= ~(1u << LMC_CODER_ANS1);
    if (refmodel) {
        /* float16's contexts are its 5 exponent bits and 3 mantissa bits:
         * within a binade the unit in the last place is the same, so they
         * start as one group per exponent */
        ws->rc.ctx_join = pc->dtype == LMC_DTYPE_F16 ? 3 : 0;
        p = encode_refmodel(ws, p, src, r, n, w, rot, coders, st);
    } else {
        lmc_group(ws->streams, src, r, n, w, rot);
        uint64_t coded = 0;
        for (unsigned k = 0; k < w; k++) p = encode_stream(ws, p, ws->streams + k * n, n, coders, pc->row, st, &coded);
    }
    for (size_t t = 0; t < tail; t++) {
        size_t const i = n * w + t;
        *p++ = r ? (uint8_t)(src[i] ^ r[i]) : src[i];
    }
    st->pieces++;
    st->pieces_xor += r != NULL;
    st->pieces_rotated += rot && !refmodel;
    st->pieces_refmodel += refmodel;
    st->dtype_in[pc->dtype < LMC_DTYPE_COUNT ? pc->dtype : 0] += pc->len;
    st->dtype_out[pc->dtype < LMC_DTYPE_COUNT ? pc->dtype : 0] += (uint64_t)(p - start);
    return p;
}

/* One width-1 piece of RAW blocks: the chunk-level fallback that bounds the output. */
static size_t encode_stored(uint8_t* dst, const uint8_t* content, size_t size)
{
    uint8_t* p = dst + LMC_CHUNK_HDR_SIZE;
    lmc_wr32(p, (uint32_t)size); p[4] = 1; p[5] = 0; p[6] = LMC_DTYPE_BYTES; p[7] = 0;
    p += LMC_PIECE_HDR;
    for (size_t b = 0; b < size; b += LMC_BLOCK_MAX) {
        size_t const m = LMC_MIN((size_t)LMC_BLOCK_MAX, size - b);
        *p++ = LMC_CODER_RAW;
        memcpy(p, content + b, m);
        p += m;
    }
    return (size_t)(p - dst);
}

size_t lmc_chunk_encode(lmc_chunk_ws* ws, uint8_t* dst, size_t dst_cap, const uint8_t* content, size_t size,
                        const lmc_piece* pieces, size_t npieces, const uint8_t* ref,
                        unsigned coders, int layout, lmc_frame_stats* st, uint64_t* content_hash)
{
    lmc_frame_stats local;
    memset(&local, 0, sizeof(local));
    uint64_t const base = pieces[0].off;
    uint8_t* p = dst + LMC_CHUNK_HDR_SIZE;
    uint8_t* const room_end = dst + dst_cap - LMC_BLOCK_SLACK;
    int overflow = 0;
    hash_begin(&ws->content_hash, content);
    hash_begin(&ws->payload_hash, p);
    ws->lean = 0;   /* a chunk's bytes must not depend on which chunk its thread coded before */
    for (size_t i = 0; i < npieces && !overflow; i++) {
        const lmc_piece* run = &pieces[i];
        size_t nrun = 1;
        if (run->detect) {
            nrun = lmc_detect_split(run, content + (run->off - base), run->xor_ref ? ref + run->ref_off : NULL, ws->split);
            run = ws->split;
        }
        for (size_t k = 0; k < nrun; k++) {
            const lmc_piece* const pc = &run[k];
            /* worst case of a piece: header, every block RAW (1 + m), the tail */
            size_t const w = pc->width, n = pc->len / w;
            size_t const worst = LMC_PIECE_HDR + 8 + pc->len + (w + 2) * ((n + LMC_BLOCK_MAX - 1) / LMC_BLOCK_MAX);
            if ((size_t)(room_end - p) < worst) { overflow = 1; break; }
            p = encode_piece(ws, p, content + (pc->off - base), pc, ref, coders, layout, &local);
        }
    }
    size_t total = (size_t)(p - dst);
    if (overflow || total - LMC_CHUNK_HDR_SIZE > lmc_chunk_payload_limit(size)) {
        memset(&local, 0, sizeof(local));
        total = encode_stored(dst, content, size);
        hash_begin(&ws->payload_hash, dst + LMC_CHUNK_HDR_SIZE);   /* the payload was written again */
        local.pieces = 1;
        local.blocks[LMC_CODER_RAW] = (size + LMC_BLOCK_MAX - 1) / LMC_BLOCK_MAX;
        local.block_in[LMC_CODER_RAW] = size;
        local.block_out[LMC_CODER_RAW] = size + local.blocks[LMC_CODER_RAW];
        local.dtype_in[0] = size;
        local.dtype_out[0] = total - LMC_CHUNK_HDR_SIZE;
    }
    size_t const payload = total - LMC_CHUNK_HDR_SIZE;
    lmc_wr32(dst, (uint32_t)size);
    lmc_wr32(dst + 4, (uint32_t)payload);
    hash_upto(&ws->payload_hash, dst + total, 1);
    lmc_wr32(dst + 8, (uint32_t)XXH3_64bits_digest(ws->payload_hash.st));
    hash_upto(&ws->content_hash, content + size, 1);
    uint64_t const h = XXH3_64bits_digest(ws->content_hash.st);
    lmc_wr32(dst + 12, (uint32_t)h);
    *content_hash = h;
    st->pieces += local.pieces; st->pieces_xor += local.pieces_xor; st->pieces_rotated += local.pieces_rotated;
    st->pieces_refmodel += local.pieces_refmodel;
    for (int c = 0; c < LMC_CODER_COUNT; c++) {
        st->blocks[c] += local.blocks[c]; st->block_in[c] += local.block_in[c]; st->block_out[c] += local.block_out[c];
    }
    for (int d = 0; d < LMC_DTYPE_COUNT; d++) { st->dtype_in[d] += local.dtype_in[d]; st->dtype_out[d] += local.dtype_out[d]; }
    return total;
}
