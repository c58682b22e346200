/*
 * analyze.c - `lmc analyze`: the measurements of arXiv 2505.09810 on real
 * checkpoints, per file, per dtype, per tensor class and per tensor:
 *
 *   - the fraction of ones at every bit position (0 = least significant);
 *   - against the previous checkpoint: the XOR flip rate at every bit
 *     position and the fraction of values left unchanged;
 *   - the order-0 entropy of every byte group, cut in 64 KiB blocks as the
 *     LMC coder cuts them: the ideal (floor) size of what lmc codes;
 *   - the size lmc actually reaches (per tensor: the tensor as a raw dump,
 *     delta against the matching reference tensor; per file: the whole file);
 *   - optionally (--baselines, implied by --plot) what `zstd -3` and
 *     `bzip2 -9` reach on the same bytes;
 *   - over a trajectory, all of this for every step against the one before.
 *
 * Uses only the public API of liblmc (include/lmc.h). Files are read with
 * pread() in 4 MiB windows; a reference is mmap()ed read-only, as `lmc -r`
 * does, because lmc borrows it whole. The whole-file compression runs in a
 * second thread while the main thread computes the statistics and the
 * per-tensor frames.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lmc.h"
#include "analyze.h"
#include "zipsig.h"

#define MAXW        8                    /* widest value (f64, i64, u64) */
#define BLOCK_VALUES 65536u              /* the coder's block: 64 Ki values per byte group */
#define WINDOW_BYTES ((size_t)4 << 20)   /* read window */
#define OUT_BYTES    ((size_t)1 << 20)   /* discarded compressed output */
#define STUCK_LIMIT  1000000u

/*-************************************************************
 * Tensor classes
 **************************************************************/
enum { C_EMBED, C_ATTN, C_MLP, C_NORM, C_OPTIM, C_HEAD, C_OTHER, NCLS };
static const char* const g_cls_name[NCLS] = {
    "embedding", "attention", "mlp", "norm", "optimizer", "head", "other"
};

/*-************************************************************
 * Options and messages
 **************************************************************/
static struct {
    const char* ref;
    const char* json;      /* "-" = stdout */
    const char* csv;
    const char* plot;
    int baselines;
    int brief, tensors, quiet, verbose;
    int threads;
} o;

static void aerr(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void aerr(const char* fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("lmc analyze: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void* xmalloc(size_t n)
{
    void* p = malloc(n ? n : 1);
    if (!p) { aerr("out of memory"); exit(1); }
    return p;
}
static void* xcalloc(size_t n, size_t s)
{
    void* p = calloc(n ? n : 1, s ? s : 1);
    if (!p) { aerr("out of memory"); exit(1); }
    return p;
}
static void* xrealloc(void* p, size_t n)
{
    void* q = realloc(p, n ? n : 1);
    if (!q) { aerr("out of memory"); exit(1); }
    return q;
}
static char* xstrdup(const char* s) { size_t n = strlen(s) + 1; char* d = (char*)xmalloc(n); memcpy(d, s, n); return d; }

static void usage(FILE* f)
{
    fprintf(f,
"Usage: lmc analyze [OPTIONS] [--ref PREV] CKPT    one checkpoint (file or folder)\n"
"       lmc analyze [OPTIONS] DIR                  a trajectory: DIR/*/ in step order\n"
"       lmc analyze [OPTIONS] CKPT1 CKPT2 ...      a trajectory in the given order\n"
"\n"
"Measures what the LMC coder (arXiv 2505.09810) exploits in a checkpoint and in\n"
"its XOR delta against the previous one. For every file, dtype, tensor class\n"
"and tensor:\n"
"  ones       fraction of ones at each bit position (0 = least significant bit;\n"
"             sign/exponent/mantissa labelled for bf16, f16, f32, f64, f8)\n"
"  flips      XOR flip rate at each bit position against the reference value\n"
"  unchanged  fraction of values bit-identical to the reference value\n"
"  entropy    order-0 entropy (bits/byte) of each byte group k (byte k of every\n"
"             value, k = 0 least significant), measured per 64 KiB block as\n"
"             the coder codes it; xor_entropy: the same for the XOR delta\n"
"  ideal      bytes / floor, where floor = sum over blocks of n*H(block)/8 for\n"
"             what lmc codes (the XOR delta for tensors matched in the reference)\n"
"  lmc        bytes / lmc's output: per tensor, the tensor compressed alone as a\n"
"             raw dump of its dtype (delta against the matching reference\n"
"             tensor); per file, the whole file as `lmc` compresses it\n"
"  tokens     with a reference, for matched bf16, f16 and f32 tensors: the\n"
"             difference tokens of lmc's reference-conditioned coder (REFCTX).\n"
"             With mono() mapping W-bit float patterns to integers in numeric\n"
"             order, t = mono(c) - mono(r), negated when r is negative; token\n"
"             0 for t = 0, else 2k-1+(t<0) with k the bit length of |t|, whose\n"
"             k-1 bits below the leading one are stored raw. Context: bits\n"
"             W-9..W-2 of r (the exponent for bf16, f32). Per 64 Ki-value\n"
"             block, in bits/value, raw bits included: tok_entropy from\n"
"             n*H(token), ctx_entropy from n*H(token | context), beside\n"
"             xor_value_entropy, the XOR byte-group floor of the same values\n"
"             (table columns xor/v tok/v ctx/v); *_floor_bytes: the same in\n"
"             bytes; tok_gain, ctx_gain = 1 - floor / XOR floor\n"
"Tensors are matched with the reference by name, dtype and shape, as lmc does.\n"
"\n"
"Tensor classes, by name, case-insensitive, first rule that matches:\n"
"  optimizer  file name starts with optim, or name contains exp_avg, momentum,\n"
"             adam, optim, or its first or last dot-separated part is m or v\n"
"  head       lm_head, embed_out\n"
"  norm       a dot-part ln, ln_*, ln<digit>; or contains norm\n"
"  embedding  wte, wpe, embed, tok_embeddings, word_embeddings, position\n"
"  attention  attn, attention, q_proj, k_proj, v_proj, o_proj, qkv\n"
"  mlp        mlp, ffn, a dot-part fc, fc_*, fc<digit>; c_fc, up_proj,\n"
"             down_proj, gate_proj, dense_h_to_4h, dense_4h_to_h\n"
"  other      everything else\n"
"A torch.save zip is read as lmc reads it: one \"tensor\" per typed storage,\n"
"named data/<key>, labelled and classed by the dict key its tensor was stored\n"
"under, by the rules above (shapes are not read). Several torch.save archives\n"
"one after another (torch's distributed checkpoints, .distcp) are read as lmc\n"
"reads them too: archive k's storages are a<k>/data/<key>, compared with\n"
"archive k of the reference. A file that is neither is\n"
"analysed as bytes (u8), and says so.\n"
"\n"
"Inputs:\n"
"  A DIR with sub-folders is a trajectory: each sub-folder is a checkpoint,\n"
"  ordered by the last number in its name (step-000300 -> 300), and each file\n"
"  in it is compared with the file of the same name in the previous one.\n"
"  A DIR of files only is a trajectory if every file name has a number and\n"
"  there are several numbers (ckpt-100.safetensors, ckpt-200.safetensors);\n"
"  files are then matched by their name without digits. Otherwise it is one\n"
"  checkpoint made of all its files.\n"
"\n"
"Options:\n"
"  -r, --ref PREV      reference (previous) checkpoint: a file, or a folder\n"
"                      whose files are matched by name; --ref=PREV also works\n"
"      --json[=FILE]   write JSON (to stdout unless FILE is given)\n"
"      --csv[=FILE]    write CSV, one figure per row (stdout unless FILE)\n"
"      --plot DIR      write PNG figures with gnuplot (gnuplot-nox) into DIR:\n"
"                      bits-*.png (ones per bit), flips-*.png (flip rate per\n"
"                      bit), ratio-*.png (ideal vs lmc vs zstd vs bzip2),\n"
"                      time-*.png (delta ratio per step and class); the\n"
"                      gnuplot scripts, data included, are kept as *.gp\n"
"      --baselines     also run `zstd -3` and `bzip2 -9` (the CLIs) on each\n"
"                      whole file: the raw, ungrouped bytes lmc's encoder sees,\n"
"                      i.e. the file, or for a delta the file XOR its reference\n"
"                      (header at the same offset, tensors matched by name).\n"
"                      Implied by --plot. Slow: bzip2 runs at ~10 MB/s\n"
"      --brief         terminal: no per-bit tables\n"
"      --tensors       terminal: a row per tensor too\n"
"  -T N                threads of each lmc compressor (default 1); the\n"
"                      whole-file compression always runs beside the rest\n"
"  -q, --quiet         no terminal table (with --json=FILE, --csv=FILE, --plot)\n"
"  -v, --verbose       say what is being read\n"
"  -h, --help          this help\n"
"\n"
"JSON: {checkpoints: [{label, step, files: [{path, ref, container, note, bytes,\n"
"floor_bytes, ideal_ratio, lmc_bytes, lmc_ratio, zstd_bytes, bzip2_bytes,\n"
"dtypes: [{dtype, width, bit_labels, <figures> (whole file, this dtype),\n"
"classes: [{class, <figures>}], tensors: [{name, class, shape, matched,\n"
"<figures>}]}]}]}], trajectory: [{step, file, class, lmc_ratio, ideal_ratio}]}\n"
"with <figures> = values, bytes, ones[], flips[], unchanged, compared_values,\n"
"entropy[], xor_entropy[], floor_bytes, ideal_ratio, lmc_bytes, lmc_ratio,\n"
"ctx_values, ctx_bytes (the matched bf16/f16/f32 values and bytes that the\n"
"token figures cover), xor_value_entropy, tok_entropy, ctx_entropy,\n"
"tok_raw_bits, xor_value_floor_bytes, tok_floor_bytes, ctx_floor_bytes,\n"
"tok_gain, ctx_gain; files carry the token figures too, over all their dtypes.\n"
"Lists are indexed by bit position or byte group, 0 least significant.\n"
"Figures that do not exist (no reference, no values, no matched bf16/f16/f32\n"
"values for the token figures) are null, as is a gain against an XOR floor of\n"
"0; an infinite ratio (floor of 0 bytes) is null with floor_bytes 0.\n"
"CSV columns: step,checkpoint,file,ref,dtype,scope,name,class,metric,index,value\n"
"with scope file, dtype, class or tensor; the token figures only where there\n"
"are matched bf16/f16/f32 values.\n"
"Exit status: 0 on success, 1 on any error.\n");
}

/*-************************************************************
 * Classification and labels
 **************************************************************/
static int ci_contains(const char* s, const char* pat)
{
    size_t n = strlen(pat);
    for (; *s; s++)
        if (strncasecmp(s, pat, n) == 0) return 1;
    return 0;
}

/* Does a dot- or slash-separated part of name equal pat, or start with pat
 * followed by '_' or a digit (when loose)? */
static int has_part(const char* name, const char* pat, int loose)
{
    size_t n = strlen(pat);
    const char* p = name;
    while (*p) {
        const char* e = p;
        while (*e && *e != '.' && *e != '/') e++;
        size_t len = (size_t)(e - p);
        if (len >= n && strncasecmp(p, pat, n) == 0) {
            if (len == n) return 1;
            if (loose && (p[n] == '_' || isdigit((unsigned char)p[n]))) return 1;
        }
        p = *e ? e + 1 : e;
    }
    return 0;
}

static int first_or_last_part_is(const char* name, const char* pat)
{
    size_t n = strlen(pat);
    const char* dot = strchr(name, '.');
    if (dot && (size_t)(dot - name) == n && strncasecmp(name, pat, n) == 0) return 1;
    const char* last = strrchr(name, '.');
    if (last && strcasecmp(last + 1, pat) == 0) return 1;
    return 0;
}

static int classify(const char* name, const char* file_base)
{
    if (file_base && strncasecmp(file_base, "optim", 5) == 0) return C_OPTIM;
    if (ci_contains(name, "exp_avg") || ci_contains(name, "momentum") || ci_contains(name, "adam")
        || ci_contains(name, "optim") || first_or_last_part_is(name, "m") || first_or_last_part_is(name, "v"))
        return C_OPTIM;
    if (ci_contains(name, "lm_head") || ci_contains(name, "embed_out")) return C_HEAD;
    if (has_part(name, "ln", 1) || ci_contains(name, "norm")) return C_NORM;
    if (has_part(name, "wte", 0) || has_part(name, "wpe", 0) || ci_contains(name, "embed")
        || ci_contains(name, "tok_embeddings") || ci_contains(name, "word_embeddings") || ci_contains(name, "position"))
        return C_EMBED;
    if (ci_contains(name, "attn") || ci_contains(name, "attention") || ci_contains(name, "q_proj")
        || ci_contains(name, "k_proj") || ci_contains(name, "v_proj") || ci_contains(name, "o_proj")
        || ci_contains(name, "qkv"))
        return C_ATTN;
    if (ci_contains(name, "mlp") || ci_contains(name, "ffn") || has_part(name, "fc", 1) || ci_contains(name, "c_fc")
        || ci_contains(name, "up_proj") || ci_contains(name, "down_proj") || ci_contains(name, "gate_proj")
        || ci_contains(name, "dense_h_to_4h") || ci_contains(name, "dense_4h_to_h"))
        return C_MLP;
    return C_OTHER;
}

/* Layout of a dtype's bits: sign bit (or -1), exponent bits. */
static void float_layout(lmc_dtype dt, int* sign, int* exp_bits)
{
    *sign = -1; *exp_bits = 0;
    switch (dt) {
    case LMC_DTYPE_BF16: *sign = 15; *exp_bits = 8; break;
    case LMC_DTYPE_F16: *sign = 15; *exp_bits = 5; break;
    case LMC_DTYPE_F32: *sign = 31; *exp_bits = 8; break;
    case LMC_DTYPE_F64: *sign = 63; *exp_bits = 11; break;
    case LMC_DTYPE_F8_E4M3: *sign = 7; *exp_bits = 4; break;
    case LMC_DTYPE_F8_E5M2: *sign = 7; *exp_bits = 5; break;
    case LMC_DTYPE_I8: *sign = 7; break;
    case LMC_DTYPE_I16: *sign = 15; break;
    case LMC_DTYPE_I32: *sign = 31; break;
    case LMC_DTYPE_I64: *sign = 63; break;
    default: break;
    }
}

/* "sign", "exp3" (exponent bit 3 counted from its LSB), "man5", or "b12". */
static void bit_label(lmc_dtype dt, unsigned bit, char* buf, size_t cap)
{
    int sign, eb;
    float_layout(dt, &sign, &eb);
    if ((int)bit == sign) { snprintf(buf, cap, "sign"); return; }
    if (eb > 0) {
        int man = sign - eb;  /* mantissa bits: 0..man-1 */
        if ((int)bit >= man) snprintf(buf, cap, "exp%u", bit - (unsigned)man);
        else snprintf(buf, cap, "man%u", bit);
        return;
    }
    snprintf(buf, cap, "b%u", bit);
}

/*-************************************************************
 * Statistics
 **************************************************************/
typedef struct {
    unsigned w;               /* bytes per value; 0 = empty */
    uint64_t values;          /* whole values */
    uint64_t bytes;           /* bytes, a trailing partial value included */
    uint64_t ntensors;
    uint64_t ones[MAXW * 8];
    uint64_t xvalues;         /* values compared with a reference value */
    uint64_t unchanged;
    uint64_t flips[MAXW * 8];
    double   hbits[MAXW];     /* sum over blocks of n*H(block), byte group k */
    double   xhbits[MAXW];    /* the same for the XOR with the reference */
    double   floor_bits;      /* floor of what lmc codes: XOR where matched */
    uint64_t lmc_bytes;       /* sum of per-tensor frames */
    /* Reference-conditioned difference tokens (the REFCTX coder's view),
     * only for matched bf16, f16 and f32 values; see block_refctx(). The
     * XOR floor of the same values is kept apart so that an aggregate
     * that mixes eligible and other tensors still compares like with like. */
    uint64_t cvalues;         /* values measured */
    uint64_t cbytes;          /* their bytes */
    double   cxbits;          /* their XOR byte-group floor, bits */
    double   tbits;           /* sum over blocks of n*H(token) */
    double   cbits;           /* sum over blocks of n*H(token | reference context) */
    uint64_t rawbits;         /* bits of |t| below its leading one, stored uncoded */
} astats;

static void stats_add(astats* d, const astats* s)
{
    if (!s->w) return;
    if (!d->w) d->w = s->w;
    d->values += s->values; d->bytes += s->bytes; d->ntensors += s->ntensors;
    d->xvalues += s->xvalues; d->unchanged += s->unchanged;
    for (unsigned b = 0; b < MAXW * 8; b++) { d->ones[b] += s->ones[b]; d->flips[b] += s->flips[b]; }
    for (unsigned k = 0; k < MAXW; k++) { d->hbits[k] += s->hbits[k]; d->xhbits[k] += s->xhbits[k]; }
    d->floor_bits += s->floor_bits;
    d->lmc_bytes += s->lmc_bytes;
    d->cvalues += s->cvalues; d->cbytes += s->cbytes; d->cxbits += s->cxbits;
    d->tbits += s->tbits; d->cbits += s->cbits; d->rawbits += s->rawbits;
}

#define NTOK  65       /* difference tokens: 0, then 2 per bit length 1..32 */
#define NSLOT 66       /* counted slots: 2 * bit length + sign (see block_refctx) */
#define TROW  128      /* a context's row: the index is then a shift and a mask */

/* Two copies of each histogram, for even and odd values: runs of one byte
 * value (the high bytes) then do not wait on the previous increment.
 * tc: the (reference context, slot) counts of one block, zero again once
 * the block has been summed; ix: the block's slots. */
typedef struct {
    uint32_t h[MAXW][256]; uint32_t x[MAXW][256]; uint32_t h2[MAXW][256]; uint32_t x2[MAXW][256];
    uint32_t tc[256 * TROW];
    uint16_t ix[BLOCK_VALUES];
} hists;

/* Empirical order-0 entropy, in bits, of m bytes with histogram h (as bench/floor.c). */
static double hist_bits(const uint32_t* h, size_t m)
{
    double bits = 0;
    for (int v = 0; v < 256; v++)
        if (h[v]) bits -= h[v] * log2((double)h[v] / (double)m);
    return bits > 0 ? bits : 0;
}

static void hist_ones(uint64_t* ones, const uint32_t* h)
{
    for (unsigned v = 1; v < 256; v++) {
        if (!h[v]) continue;
        for (unsigned b = 0; b < 8; b++)
            if ((v >> b) & 1) ones[b] += h[v];
    }
}

#define HIST_RAW(W) do { \
    size_t i = 0; \
    for (; i + 1 < nv; i += 2) { const uint8_t* v = p + i * (W); \
        for (unsigned k = 0; k < (W); k++) { H->h[k][v[k]]++; H->h2[k][v[k + (W)]]++; } } \
    for (; i < nv; i++) { const uint8_t* v = p + i * (W); \
        for (unsigned k = 0; k < (W); k++) H->h[k][v[k]]++; } } while (0)
#define HIST_XOR(W) do { \
    size_t i = 0; \
    for (; i + 1 < nv; i += 2) { const uint8_t* v = p + i * (W); const uint8_t* q = r + i * (W); \
        uint8_t acc = 0, acc2 = 0; \
        for (unsigned k = 0; k < (W); k++) { \
            uint8_t const b = (uint8_t)(v[k] ^ q[k]), b2 = (uint8_t)(v[k + (W)] ^ q[k + (W)]); \
            H->x[k][b]++; H->x2[k][b2]++; acc |= b; acc2 |= b2; } \
        same += (acc == 0) + (acc2 == 0); } \
    for (; i < nv; i++) { const uint8_t* v = p + i * (W); const uint8_t* q = r + i * (W); \
        uint8_t acc = 0; \
        for (unsigned k = 0; k < (W); k++) { uint8_t const b = (uint8_t)(v[k] ^ q[k]); H->x[k][b]++; acc |= b; } \
        same += (acc == 0); } } while (0)

static void hist_merge(uint32_t* a, const uint32_t* b)
{
    for (unsigned v = 0; v < 256; v++) a[v] += b[v];
}

/* REFCTX's difference token of current value c against reference value r,
 * both W-bit float patterns: with mono() mapping a pattern to an unsigned
 * integer in numeric order, t = mono(c) - mono(r), negated when r is
 * negative so that t > 0 means "|value| grew" on both sides of zero. The
 * token is 0 for t = 0, else 2k - 1 + (t < 0) with k the bit length of |t|;
 * the k - 1 bits below the leading one go uncoded. That leaves at most 65
 * tokens, few enough to condition on the reference's exponent.
 *
 * Computed here as v(x) = mono(x) - 2^(W-1), a two's-complement integer:
 * |t| = |v(c) - v(r)|, and t < 0 iff exactly one of d = v(c) - v(r) and r
 * is negative (for t != 0). A value is counted in the row of r's context,
 * at slot 2k + (t < 0) so computed: slots 0 and 1 (t = 0, whichever sign r
 * has) are token 0, and slot j >= 2 is token j - 1. No branch: the signs and the
 * zero deltas are unpredictable. bitlen(2a + 1) = bitlen(a) + 1, for a = 0
 * too. The slots go to a buffer first and are counted in a second loop:
 * an increment whose address comes at the end of this chain of operations
 * took as long as the rest of the loop, as the next values' loads of the
 * same popular slot wait on it. */
static inline uint32_t le16(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t le32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static double xlog2x(double x) { return x > 0 ? x * log2(x) : 0; }

/* The difference tokens of one block (nv <= 64 Ki values of w = 2 or 4
 * bytes at p, the reference values at r): n*H(token), n*H(token | context),
 * with the context bits W-9..W-2 of the reference value (its exponent for
 * bf16 and f32), and the raw bits. The coder builds its tables per block,
 * as for the byte groups. */
static void block_refctx(astats* s, hists* H, const uint8_t* p, const uint8_t* r, size_t nv, unsigned w)
{
    uint16_t* const ix = H->ix;
    if (w == 2) {
        for (size_t i = 0; i < nv; i++) {
            int32_t const c = (int16_t)le16(p + 2 * i), q = (int16_t)le16(r + 2 * i);
            int32_t const sq = q >> 31;
            int32_t const d = (c ^ ((c >> 31) & 0x7FFF)) - (q ^ (sq & 0x7FFF));
            int32_t const sd = d >> 31;
            uint32_t const a = (uint32_t)((d ^ sd) - sd);
            unsigned const k = (unsigned)__builtin_clz(2 * a + 1) ^ 31;
            ix[i] = (uint16_t)(((uint32_t)q & 0x7F80) | 2 * k | (unsigned)((sd ^ sq) & 1));
        }
    } else {
        for (size_t i = 0; i < nv; i++) {
            int32_t const c = (int32_t)le32(p + 4 * i), q = (int32_t)le32(r + 4 * i);
            int32_t const sq = q >> 31;
            int64_t const d = (int64_t)(c ^ ((c >> 31) & 0x7FFFFFFF)) - (int64_t)(q ^ (sq & 0x7FFFFFFF));
            int64_t const sd = d >> 63;
            uint64_t const a = (uint64_t)((d ^ sd) - sd);
            unsigned const k = (unsigned)__builtin_clzll(2 * a + 1) ^ 63;
            ix[i] = (uint16_t)((((uint32_t)q >> 16) & 0x7F80) | 2 * k | (unsigned)((sd ^ sq) & 1));
        }
    }
    for (size_t i = 0; i < nv; i++) H->tc[ix[i]]++;

    uint64_t nt[NTOK] = { 0 };
    double cb = 0;
    for (unsigned c = 0; c < 256; c++) {
        uint32_t* const row = H->tc + c * TROW;
        uint64_t nc = 0;
        for (unsigned j = 0; j < NSLOT; j++) nc += row[j];
        if (!nc) continue;
        double e = xlog2x((double)nc) - xlog2x((double)row[0] + row[1]);
        nt[0] += (uint64_t)row[0] + row[1];
        for (unsigned j = 2; j < NSLOT; j++)
            if (row[j]) { nt[j - 1] += row[j]; e -= xlog2x((double)row[j]); }
        cb += e > 0 ? e : 0;
        memset(row, 0, NSLOT * sizeof *row);
    }
    double tb = xlog2x((double)nv);
    uint64_t raw = 0;
    for (unsigned t = 0; t < NTOK; t++) {
        tb -= xlog2x((double)nt[t]);
        unsigned const k = (t + 1) / 2;
        if (k > 1) raw += nt[t] * (k - 1);
    }
    s->cvalues += nv;
    s->cbytes += nv * w;
    s->tbits += tb > 0 ? tb : 0;
    s->cbits += cb;
    s->rawbits += raw;
}

/* One coder block: nv <= 64 Ki values of w bytes at p; r: the reference
 * values or NULL; refctx: measure the difference tokens too (a matched
 * bf16, f16 or f32 tensor). */
static void block_stats(astats* s, hists* H, const uint8_t* p, const uint8_t* r, size_t nv, unsigned w, int refctx)
{
    if (!nv) return;
    for (unsigned k = 0; k < w; k++) { memset(H->h[k], 0, sizeof H->h[k]); memset(H->h2[k], 0, sizeof H->h2[k]); }
    switch (w) {
    case 1: HIST_RAW(1); break;
    case 2: HIST_RAW(2); break;
    case 4: HIST_RAW(4); break;
    case 8: HIST_RAW(8); break;
    default: HIST_RAW(w); break;
    }
    double raw = 0, xr = 0;
    for (unsigned k = 0; k < w; k++) {
        hist_merge(H->h[k], H->h2[k]);
        double const b = hist_bits(H->h[k], nv);
        s->hbits[k] += b; raw += b;
        hist_ones(s->ones + 8 * k, H->h[k]);
    }
    s->values += nv;
    s->bytes += nv * w;
    if (r) {
        uint64_t same = 0;
        for (unsigned k = 0; k < w; k++) { memset(H->x[k], 0, sizeof H->x[k]); memset(H->x2[k], 0, sizeof H->x2[k]); }
        switch (w) {
        case 1: HIST_XOR(1); break;
        case 2: HIST_XOR(2); break;
        case 4: HIST_XOR(4); break;
        case 8: HIST_XOR(8); break;
        default: HIST_XOR(w); break;
        }
        for (unsigned k = 0; k < w; k++) {
            hist_merge(H->x[k], H->x2[k]);
            double const b = hist_bits(H->x[k], nv);
            s->xhbits[k] += b; xr += b;
            hist_ones(s->flips + 8 * k, H->x[k]);
        }
        s->xvalues += nv;
        s->unchanged += same;
        s->floor_bits += xr;
        if (refctx && (w == 2 || w == 4)) {
            block_refctx(s, H, p, r, nv, w);
            s->cxbits += xr;
        }
    } else {
        s->floor_bits += raw;
    }
}

/*-************************************************************
 * Results
 **************************************************************/
typedef struct {
    char* name;
    char* label;              /* torch.save: the dict key of the tensor on the storage; NULL none */
    lmc_dtype dt;
    int cls;
    int matched;
    char* shape;              /* JSON list, e.g. "[256,64]" */
    astats st;
} tensor_res;

typedef struct {
    lmc_dtype dt;
    astats all;
    astats cls[NCLS];
} dtype_res;

typedef struct {
    char* key;                /* matches files across checkpoints */
    char* path;
    char* ref;                /* NULL: none */
    int is_st;                /* a tensor map: safetensors or a torch.save archive */
    const char* container;    /* "safetensors", "torch.save" or "bytes" */
    const char* note;
    uint64_t size, header;
    size_t ntensors, nmatched;
    double floor_bits;        /* whole file, as bench/floor.c */
    uint64_t lmc_bytes;
    long long zstd_bytes, bzip2_bytes;   /* -1: not run */
    tensor_res* t; size_t nt;
    dtype_res* d; size_t nd;
    int ok;
} file_res;

typedef struct { char* key; char* path; } ckfile;
typedef struct {
    char* label;
    long long step;
    ckfile* f; size_t nf;
    file_res* res;
} ckpt;

/*-************************************************************
 * I/O helpers
 **************************************************************/
static int read_at(int fd, void* buf, size_t n, uint64_t off)
{
    uint8_t* p = (uint8_t*)buf;
    while (n) {
        ssize_t const r = pread(fd, p, n, (off_t)off);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) { errno = EIO; return -1; }
        p += r; n -= (size_t)r; off += (uint64_t)r;
    }
    return 0;
}

static int write_all(int fd, const void* buf, size_t n)
{
    const uint8_t* p = (const uint8_t*)buf;
    while (n) {
        ssize_t const r = write(fd, p, n);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        p += r; n -= (size_t)r;
    }
    return 0;
}

/* Feeds n bytes to a compression stream (end: finish the frame), adding the
 * output size to *total; after each call, after(arg, bytes of src coded)
 * when given. Returns 0 or an lmc error code. */
static size_t stream_feed(lmc_cctx* c, const void* src, size_t n, int end, uint8_t* obuf, uint64_t* total,
                          void (*after)(void*, size_t), void* arg)
{
    lmc_inbuf in = { src, n, 0 };
    unsigned stuck = 0;
    for (;;) {
        lmc_outbuf out = { obuf, OUT_BYTES, 0 };
        size_t const before = in.pos;
        size_t const r = lmc_compress_stream(c, &out, &in, end);
        if (lmc_is_error(r)) return r;
        *total += out.pos;
        if (after) after(arg, in.pos);
        if (end ? r == 0 : in.pos == in.size) return 0;
        if (in.pos == before && out.pos == 0 && ++stuck > STUCK_LIMIT) return (size_t)-LMC_ERR_GENERIC;
    }
}

/* A compressor CLI reading a pipe and writing to an unlinked temporary file. */
typedef struct { pid_t pid; int wfd; int outfd; int failed; } child_t;

static int child_start(child_t* c, const char* const* argv)
{
    int pfd[2];
    char tmpl[] = "/tmp/lmc-analyze.XXXXXX";
    memset(c, 0, sizeof *c);
    c->pid = -1; c->wfd = -1; c->outfd = -1;
    c->outfd = mkostemp(tmpl, O_CLOEXEC);
    if (c->outfd < 0) return -1;
    unlink(tmpl);
    if (pipe2(pfd, O_CLOEXEC) != 0) { close(c->outfd); c->outfd = -1; return -1; }
    pid_t const pid = fork();
    if (pid < 0) { close(pfd[0]); close(pfd[1]); close(c->outfd); c->outfd = -1; return -1; }
    if (pid == 0) {
        if (dup2(pfd[0], 0) < 0 || dup2(c->outfd, 1) < 0) _exit(127);
        execvp(argv[0], (char* const*)argv);
        _exit(127);
    }
    close(pfd[0]);
    c->pid = pid;
    c->wfd = pfd[1];
    return 0;
}

static void child_write(child_t* c, const void* p, size_t n)
{
    if (c->pid < 0 || c->failed || !n) return;
    if (write_all(c->wfd, p, n) != 0) c->failed = 1;
}

/* Returns the compressed size, or -1. */
static long long child_finish(child_t* c)
{
    long long res = -1;
    int status = 0;
    if (c->wfd >= 0) close(c->wfd);
    if (c->pid > 0) {
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {}
        struct stat sb;
        if (!c->failed && WIFEXITED(status) && WEXITSTATUS(status) == 0 && fstat(c->outfd, &sb) == 0)
            res = (long long)sb.st_size;
    }
    if (c->outfd >= 0) close(c->outfd);
    c->pid = -1; c->wfd = -1; c->outfd = -1;
    return res;
}

/* Drops the pages of the mmap()ed reference from this process's memory every
 * REF_DROP bytes that a reader (the statistics loop, the whole-file thread)
 * has passed: they stay in the page cache, and come back from it when read
 * again (the other reader's current pages, a fault per 64 KiB). The
 * reference then costs a window, not its size, in memory: analysing a 200 MB
 * bf16 delta took 211 MB of RSS, and takes 39-42 MB. The whole-file frame and
 * the per-tensor frames, of which only the sizes are used, no longer hash
 * their references either. Every 8 MiB, not 16: between two drops each
 * reader maps its own pages back, the whole-file coder up to a 16 MiB run
 * ahead, and at -T6 a 151 MB fp32 delta held 31 MiB of its reference (81-85
 * MiB in all, over the 76 MiB bound). */
#define REF_DROP ((uint64_t)8 << 20)
static void ref_drop(const void* map, size_t size, uint64_t pos, uint64_t* last)
{
    if (!map || !size || pos < *last + REF_DROP) return;
    madvise((void*)map, size, MADV_DONTNEED);
    *last = pos;
}

/*-************************************************************
 * Whole-file compression thread
 **************************************************************/
typedef struct {
    const char* path;
    uint64_t size;
    const void* ref;          /* NULL: no reference */
    size_t ref_size;
    uint64_t out;
    size_t err;               /* lmc error, or 0 */
    int io_errno;
    int ref_mapped;           /* ref is an mmap()ed file: see ref_drop */
} fjob;

/* A mapped input's pages, and the reference's, dropped behind the coder. */
typedef struct { const fjob* j; const unsigned char* map; size_t dropped; uint64_t* ref_dropped; } zipfeed;

static void zipfeed_after(void* arg, size_t pos)
{
    zipfeed* const z = (zipfeed*)arg;
    size_t const page = (size_t)sysconf(_SC_PAGESIZE), upto = pos / page * page;
    if (upto > z->dropped) {
        madvise((void*)(z->map + z->dropped), upto - z->dropped, MADV_DONTNEED);
        z->dropped = upto;
    }
    if (z->j->ref_mapped) ref_drop(z->j->ref, z->j->ref_size, pos, z->ref_dropped);
}

static void* fjob_run(void* arg)
{
    fjob* j = (fjob*)arg;
    uint64_t dropped = 0;
    int fd = -1;
    uint8_t* buf = (uint8_t*)malloc(WINDOW_BYTES);
    uint8_t* obuf = (uint8_t*)malloc(OUT_BYTES);
    lmc_cctx* c = lmc_cctx_create();
    if (!buf || !obuf || !c) { j->err = (size_t)-LMC_ERR_MEMORY; goto out; }
    lmc_cctx_set_param(c, LMC_P_THREADS, o.threads);
    lmc_cctx_set_param(c, LMC_P_CONTENT_SIZE, (long long)j->size);
    if (j->ref) {
        /* only the frame's size is kept: no pass to hash the reference */
        size_t const r = lmc_cctx_set_ref_hashed(c, j->ref, j->ref_size, 0);
        if (lmc_is_error(r)) { j->err = r; goto out; }
    }
    fd = open(j->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { j->io_errno = errno; goto out; }
    if (j->size >= 4 && j->size == (uint64_t)(size_t)j->size && fd_starts_zip(fd)) {
        /* A zip (torch.save): mapped whole and coded in place, as `lmc`
         * does; given in windows, the library would stage the whole file to
         * reach its directory (a 231 MB archive took 465 MiB of RSS). */
        void* const map = mmap(NULL, (size_t)j->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            zipfeed z = { j, (const unsigned char*)map, 0, &dropped };
            j->err = stream_feed(c, map, (size_t)j->size, 1, obuf, &j->out, zipfeed_after, &z);
            munmap(map, (size_t)j->size);
            goto out;
        }
    }
    for (uint64_t off = 0; off < j->size || off == 0; ) {
        size_t const n = (size_t)(j->size - off < WINDOW_BYTES ? j->size - off : WINDOW_BYTES);
        if (n && read_at(fd, buf, n, off) != 0) { j->io_errno = errno; goto out; }
        off += n;
        size_t const r = stream_feed(c, buf, n, off >= j->size, obuf, &j->out, NULL, NULL);
        if (lmc_is_error(r)) { j->err = r; goto out; }
        if (j->ref_mapped) ref_drop(j->ref, j->ref_size, off, &dropped);
        if (off >= j->size) break;
    }
out:
    if (fd >= 0) close(fd);
    lmc_cctx_free(c);
    free(buf);
    free(obuf);
    return NULL;
}

/*-************************************************************
 * One file
 **************************************************************/
typedef struct {
    uint64_t off, len, ref_off;
    unsigned w;
    int xr;
    long tensor;              /* index in file_res.t, or -1 (header, trailing bytes) */
} seg_t;

typedef struct { seg_t* v; size_t n, cap; } segs_t;

static void seg_push(segs_t* s, uint64_t off, uint64_t len, unsigned w, int xr, uint64_t ref_off, long tensor)
{
    if (!len) return;
    if (s->n == s->cap) { s->cap = s->cap ? 2 * s->cap : 16; s->v = (seg_t*)xrealloc(s->v, s->cap * sizeof *s->v); }
    seg_t* g = &s->v[s->n++];
    g->off = off; g->len = len; g->w = w; g->xr = xr; g->ref_off = ref_off; g->tensor = tensor;
}

/* [off, end) as width-w bytes XORed at the same offset with the part the
 * reference has (lmc's rule for a safetensors header or a generic file). */
static void seg_push_same_offset(segs_t* s, uint64_t off, uint64_t end, unsigned w, int has_ref, uint64_t ref_size, long tensor)
{
    if (has_ref && off < ref_size) {
        uint64_t const x = end < ref_size ? end : ref_size;
        seg_push(s, off, x - off, w, 1, off, tensor);
        off = x;
    }
    if (off < end) seg_push(s, off, end - off, w, 0, 0, tensor);
}

static int same_tensor_shape(const lmc_tensor_info* a, const lmc_tensor_info* b)
{
    if (a->dtype != b->dtype || a->width != b->width || a->ndim != b->ndim || a->size != b->size) return 0;
    for (unsigned d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static const char* base_name(const char* p)
{
    const char* s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static char* shape_json(const lmc_tensor_info* t)
{
    size_t cap = 4 + (size_t)t->ndim * 22, n = 0;
    char* s = (char*)xmalloc(cap);
    s[n++] = '[';
    for (unsigned d = 0; d < t->ndim; d++)
        n += (size_t)snprintf(s + n, cap - n, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
    s[n++] = ']'; s[n] = 0;
    return s;
}

/* The dtypes that REFCTX codes: floats of 2 or 4 bytes. */
static int is_refctx_dtype(lmc_dtype dt)
{
    return dt == LMC_DTYPE_BF16 || dt == LMC_DTYPE_F16 || dt == LMC_DTYPE_F32;
}

static dtype_res* dtype_slot(file_res* f, lmc_dtype dt)
{
    for (size_t i = 0; i < f->nd; i++) if (f->d[i].dt == dt) return &f->d[i];
    f->d = (dtype_res*)xrealloc(f->d, (f->nd + 1) * sizeof *f->d);
    dtype_res* d = &f->d[f->nd++];
    memset(d, 0, sizeof *d);
    d->dt = dt;
    return d;
}

/* After a container parse r: 0 with f->container set, or *map cleared and
 * f->note set; -1 (after a message) when memory ran out. */
static int took_map(file_res* f, size_t r, lmc_tensor_map** map, const char* container, const char* note)
{
    if (!lmc_is_error(r)) { f->container = container; return 0; }
    *map = NULL;
    if (lmc_get_error(r) == LMC_ERR_MEMORY) { aerr("out of memory"); return -1; }
    f->note = note;
    return 0;
}

static int analyze_file(file_res* f, const char* path, const char* refpath, const char* key)
{
    int fd = -1, rc = 1;
    const uint8_t* ref = NULL;
    size_t ref_size = 0;
    void* ref_map = NULL;
    static const uint8_t empty_ref[1];
    lmc_tensor_map* map = NULL;
    lmc_tensor_map* rmap = NULL;
    uint8_t* head = NULL;
    uint8_t* buf = NULL;
    uint8_t* xbuf = NULL;
    uint8_t* obuf = NULL;
    size_t obuf_cap = 0;
    hists* H = NULL;
    lmc_cctx* tc = NULL;
    segs_t S = { NULL, 0, 0 };
    child_t ch[2];
    int nch = 0;
    pthread_t th;
    int th_started = 0;
    fjob job;
    uint64_t ref_dropped = 0;
    struct stat sb;

    memset(f, 0, sizeof *f);
    memset(&job, 0, sizeof job);
    f->key = xstrdup(key);
    f->path = xstrdup(path);
    f->ref = refpath ? xstrdup(refpath) : NULL;
    f->zstd_bytes = f->bzip2_bytes = -1;
    if (o.verbose) fprintf(stderr, "lmc analyze: %s%s%s\n", path, refpath ? " vs " : "", refpath ? refpath : "");

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) { aerr("%s: %s", path, strerror(errno)); goto out; }
    if (!S_ISREG(sb.st_mode)) { aerr("%s: not a regular file", path); goto out; }
    f->size = (uint64_t)sb.st_size;

    if (refpath) {
        int rfd = open(refpath, O_RDONLY | O_CLOEXEC);
        struct stat rs;
        if (rfd < 0 || fstat(rfd, &rs) != 0) { aerr("%s: %s", refpath, strerror(errno)); if (rfd >= 0) close(rfd); goto out; }
        ref_size = (size_t)rs.st_size;
        if (ref_size) {
            ref_map = mmap(NULL, ref_size, PROT_READ, MAP_PRIVATE, rfd, 0);
            if (ref_map == MAP_FAILED) { ref_map = NULL; aerr("%s: mmap: %s", refpath, strerror(errno)); close(rfd); goto out; }
            ref = (const uint8_t*)ref_map;
        } else {
            ref = empty_ref;
        }
        close(rfd);
        if (ref_size >= 8) {
            uint64_t const rp = lmc_safetensors_prefix(ref, ref_size);
            if (rp && rp <= ref_size && lmc_is_error(lmc_tensor_map_safetensors(&rmap, ref, ref_size, ref_size))) rmap = NULL;
            if (!rp && lmc_is_error(lmc_tensor_map_torch(&rmap, ref, ref_size))) rmap = NULL;
        }
    }

    /* the container */
    {
        size_t avail = (size_t)(f->size < 65536 ? f->size : 65536);
        head = (uint8_t*)xmalloc(avail + 1);
        if (avail && read_at(fd, head, avail, 0) != 0) { aerr("%s: %s", path, strerror(errno)); goto out; }
        uint64_t const need = avail >= 8 ? lmc_safetensors_prefix(head, avail) : 0;
        if (need && need <= f->size) {
            if (need > avail) {
                head = (uint8_t*)xrealloc(head, (size_t)need);
                if (read_at(fd, head, (size_t)need, 0) != 0) { aerr("%s: %s", path, strerror(errno)); goto out; }
                avail = (size_t)need;
            }
            size_t const r = lmc_tensor_map_safetensors(&map, head, avail, f->size);
            if (took_map(f, r, &map, "safetensors", "not a valid safetensors file: analysed as bytes (u8)")) goto out;
        } else if (f->size >= 4 && f->size == (uint64_t)(size_t)f->size) {
            /* a torch.save zip? its directory is at the end: map the whole file */
            void* const fm = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (fm == MAP_FAILED) { aerr("%s: mmap: %s", path, strerror(errno)); goto out; }
            size_t const r = lmc_tensor_map_torch(&map, fm, (size_t)f->size);
            munmap(fm, (size_t)f->size);   /* the map keeps copies */
            if (took_map(f, r, &map, "torch.save", "neither safetensors nor a torch.save zip: analysed as bytes (u8)")) goto out;
        } else {
            f->note = "not a safetensors file: analysed as bytes (u8)";
        }
        free(head); head = NULL;
    }

    if (map) {
        f->is_st = 1;
        f->header = lmc_tensor_map_header_size(map);
        size_t const n = lmc_tensor_map_count(map);
        int const torch = strcmp(f->container, "torch.save") == 0;
        f->t = (tensor_res*)xcalloc(n ? n : 1, sizeof *f->t);
        /* the bytes around the tensors as lmc codes them: XORed with the
         * reference at the same offset, except a safetensors file's tail */
        uint64_t data_end = 0;
        for (size_t i = 0; i < n; i++) {
            const lmc_tensor_info* t = lmc_tensor_map_get(map, i);
            if (!t->size) continue;
            if (t->offset > data_end) seg_push_same_offset(&S, data_end, t->offset, 1, ref != NULL, ref_size, -1);
            if (t->offset + t->size > data_end) data_end = t->offset + t->size;
            tensor_res* tr = &f->t[f->nt];
            tr->name = xstrdup(t->name);
            tr->label = t->label && strcmp(t->label, t->name) != 0 ? xstrdup(t->label) : NULL;
            tr->dt = t->dtype;
            tr->cls = classify(tr->label ? tr->label : t->name, base_name(path));
            tr->shape = shape_json(t);
            unsigned w = t->width;
            if (w < 1 || w > MAXW) w = 1;
            tr->st.w = w;
            tr->st.ntensors = 1;
            long const j = rmap ? lmc_tensor_map_find(rmap, t->name, t->name_len) : -1;
            const lmc_tensor_info* rt = j >= 0 ? lmc_tensor_map_get(rmap, (size_t)j) : NULL;
            tr->matched = rt && same_tensor_shape(t, rt);
            seg_push(&S, t->offset, t->size, w, tr->matched, tr->matched ? rt->offset : 0, (long)f->nt);
            f->nt++;
            f->nmatched += (size_t)tr->matched;
        }
        f->ntensors = f->nt;
        if (data_end < f->header) {   /* no tensors: the header alone */
            seg_push_same_offset(&S, data_end, f->header, 1, ref != NULL, ref_size, -1);
            data_end = f->header;
        }
        if (data_end < f->size && torch) seg_push_same_offset(&S, data_end, f->size, 1, ref != NULL, ref_size, -1);
        else if (data_end < f->size) seg_push(&S, data_end, f->size - data_end, 1, 0, 0, -1);
    } else {
        f->header = 0;
        f->t = (tensor_res*)xcalloc(1, sizeof *f->t);
        tensor_res* tr = &f->t[0];
        tr->name = xstrdup("(bytes)");
        tr->dt = LMC_DTYPE_U8;
        tr->cls = C_OTHER;
        tr->shape = (char*)xmalloc(32);
        snprintf(tr->shape, 32, "[%llu]", (unsigned long long)f->size);
        tr->st.w = 1;
        tr->st.ntensors = 1;
        tr->matched = ref != NULL && ref_size > 0;
        f->nt = 1;
        f->ntensors = 1;
        f->nmatched = (size_t)tr->matched;
        seg_push_same_offset(&S, 0, f->size, 1, ref != NULL, ref_size, 0);
    }

    /* baselines and the whole-file frame, beside the statistics */
    if (o.baselines) {
        static const char* const zargv[] = { "zstd", "-3", "-q", "-c", NULL };
        static const char* const bargv[] = { "bzip2", "-9", "-c", NULL };
        if (child_start(&ch[nch], zargv) == 0) nch++; else ch[nch].pid = -1;
        if (nch == 1 && child_start(&ch[nch], bargv) == 0) nch++;
    }
    job.path = path;
    job.size = f->size;
    job.ref = ref;
    job.ref_size = ref_size;
    job.ref_mapped = ref_map != NULL;
    if (pthread_create(&th, NULL, fjob_run, &job) != 0) { aerr("cannot start a thread"); goto out; }
    th_started = 1;

    buf = (uint8_t*)xmalloc(WINDOW_BYTES);
    xbuf = (uint8_t*)xmalloc(WINDOW_BYTES);
    obuf_cap = lmc_compress_bound(WINDOW_BYTES);
    if (obuf_cap < OUT_BYTES) obuf_cap = OUT_BYTES;
    obuf = (uint8_t*)xmalloc(obuf_cap);
    H = (hists*)xcalloc(1, sizeof *H);   /* tc must start at zero */
    tc = lmc_cctx_create();
    if (!tc) { aerr("out of memory"); goto out; }
    /* a tensor is coded a window at a time, at most WINDOW_BYTES: 4 chunks
     * of 1 MiB, so more threads than that would only hold workspaces
     * (beside the whole-file coder's: -T6 went over the memory bound) */
    lmc_cctx_set_param(tc, LMC_P_THREADS, o.threads < (int)(WINDOW_BYTES >> 20) ? o.threads : (int)(WINDOW_BYTES >> 20));
    lmc_cctx_set_param(tc, LMC_P_FORMAT, LMC_FORMAT_RAW);

    {
        astats side;            /* header and trailing bytes: floor only */
        memset(&side, 0, sizeof side);
        side.w = 1;
        for (size_t si = 0; si < S.n; si++) {
            const seg_t* g = &S.v[si];
            tensor_res* tr = g->tensor >= 0 ? &f->t[g->tensor] : NULL;
            astats* st = tr ? &tr->st : &side;
            const uint8_t* rp = g->xr ? ref + g->ref_off : NULL;
            int const compress = tr && f->is_st;
            unsigned const w = g->w;
            size_t const win = (size_t)BLOCK_VALUES * (64 / w) * w;
            uint64_t const whole = g->len - g->len % w;
            int const one_shot = g->len <= win;   /* the usual case: one window, one lmc_compress() */
            int const refctx = rp && tr && f->is_st && is_refctx_dtype(tr->dt);
            if (compress) {
                lmc_cctx_reset(tc);
                lmc_cctx_set_param(tc, LMC_P_DTYPE, tr->dt);
                lmc_cctx_set_param(tc, LMC_P_CONTENT_SIZE, one_shot ? -1 : (long long)g->len);
                /* only the size is kept: no pass to hash the reference */
                size_t const r = g->xr ? lmc_cctx_set_ref_hashed(tc, rp, (size_t)g->len, 0) : lmc_cctx_set_ref(tc, NULL, 0);
                if (lmc_is_error(r)) { aerr("%s: %s", path, lmc_error_name(r)); goto out; }
            }
            for (uint64_t pos = 0; pos < g->len; ) {
                size_t const n = (size_t)(g->len - pos < win ? g->len - pos : win);
                if (read_at(fd, buf, n, g->off + pos) != 0) { aerr("%s: %s", path, strerror(errno)); goto out; }
                size_t const nvals = (size_t)((pos + n <= whole ? n : (size_t)(whole - pos)) / w);
                for (size_t b = 0; b < nvals; b += BLOCK_VALUES) {
                    size_t const m = nvals - b < BLOCK_VALUES ? nvals - b : BLOCK_VALUES;
                    block_stats(st, H, buf + b * w, rp ? rp + pos + b * w : NULL, m, w, refctx);
                }
                if (pos + n > whole) {   /* a trailing partial value: stored as is */
                    uint64_t const rem = pos + n - (whole > pos ? whole : pos);
                    st->bytes += rem;
                    st->floor_bits += 8.0 * (double)rem;
                }
                if (compress) {
                    size_t r;
                    if (one_shot) {
                        r = lmc_compress(tc, obuf, obuf_cap, buf, n);
                        if (!lmc_is_error(r)) st->lmc_bytes += r;
                    } else {
                        r = stream_feed(tc, buf, n, pos + n >= g->len, obuf, &st->lmc_bytes, NULL, NULL);
                    }
                    if (lmc_is_error(r)) { aerr("%s: lmc: %s", path, lmc_error_name(r)); goto out; }
                }
                if (nch) {
                    const uint8_t* wp = buf;
                    if (rp) {
                        for (size_t i = 0; i < n; i++) xbuf[i] = (uint8_t)(buf[i] ^ rp[pos + i]);
                        wp = xbuf;
                    }
                    for (int c = 0; c < nch; c++) child_write(&ch[c], wp, n);
                }
                pos += n;
                ref_drop(ref_map, ref_size, g->off + pos, &ref_dropped);
            }
            if (!tr) { f->floor_bits += side.floor_bits; side.floor_bits = 0; }
        }
        for (size_t i = 0; i < f->nt; i++) f->floor_bits += f->t[i].st.floor_bits;
    }

    pthread_join(th, NULL);
    th_started = 0;
    if (job.io_errno) { aerr("%s: %s", path, strerror(job.io_errno)); goto out; }
    if (job.err) { aerr("%s: lmc: %s", path, lmc_error_name(job.err)); goto out; }
    f->lmc_bytes = job.out;
    if (!f->is_st) f->t[0].st.lmc_bytes = job.out;   /* the same frame */
    if (nch >= 1) f->zstd_bytes = child_finish(&ch[0]);
    if (nch >= 2) f->bzip2_bytes = child_finish(&ch[1]);
    if (o.baselines && (f->zstd_bytes < 0 || f->bzip2_bytes < 0))
        aerr("warning: %s: zstd or bzip2 could not be run (Debian: apt-get install zstd bzip2)", path);
    nch = 0;

    for (size_t i = 0; i < f->nt; i++) {
        dtype_res* d = dtype_slot(f, f->t[i].dt);
        stats_add(&d->all, &f->t[i].st);
        stats_add(&d->cls[f->t[i].cls], &f->t[i].st);
    }
    f->ok = 1;
    rc = 0;
out:
    if (th_started) pthread_join(th, NULL);
    for (int c = 0; c < nch; c++) child_finish(&ch[c]);
    lmc_cctx_free(tc);
    free(H); free(buf); free(xbuf); free(obuf); free(head); free(S.v);
    lmc_tensor_map_free(map);
    lmc_tensor_map_free(rmap);
    if (ref_map) munmap(ref_map, ref_size);
    if (fd >= 0) close(fd);
    return rc;
}

static void file_res_free(file_res* f)
{
    for (size_t i = 0; i < f->nt; i++) { free(f->t[i].name); free(f->t[i].label); free(f->t[i].shape); }
    free(f->t); free(f->d); free(f->key); free(f->path); free(f->ref);
}

/*-************************************************************
 * Finding checkpoints
 **************************************************************/
static int is_dir(const char* p) { struct stat s; return stat(p, &s) == 0 && S_ISDIR(s.st_mode); }
static int is_reg(const char* p) { struct stat s; return stat(p, &s) == 0 && S_ISREG(s.st_mode); }

static char* path_join(const char* a, const char* b)
{
    size_t la = strlen(a), lb = strlen(b);
    char* s = (char*)xmalloc(la + lb + 2);
    memcpy(s, a, la);
    size_t n = la;
    if (n && s[n - 1] != '/') s[n++] = '/';
    memcpy(s + n, b, lb + 1);
    return s;
}

/* The last number in a name, or -1. */
static long long last_number(const char* s)
{
    long long v = -1;
    for (const char* p = s; *p; ) {
        if (isdigit((unsigned char)*p)) {
            long long x = 0;
            while (isdigit((unsigned char)*p)) { if (x < LLONG_MAX / 10 - 10) x = x * 10 + (*p - '0'); p++; }
            v = x;
        } else p++;
    }
    return v;
}

static char* strip_digits(const char* s)
{
    char* d = (char*)xmalloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s; s++) if (!isdigit((unsigned char)*s)) d[n++] = *s;
    d[n] = 0;
    return d;
}

typedef struct { char* name; long long num; } dent;

static int dent_cmp(const void* a, const void* b)
{
    const dent* x = (const dent*)a;
    const dent* y = (const dent*)b;
    if (x->num != y->num) return x->num < y->num ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Entries of a folder (no hidden ones): want 1 = regular files, 2 = folders. */
static dent* list_dir(const char* dir, int want, size_t* count)
{
    DIR* d = opendir(dir);
    dent* v = NULL;
    size_t n = 0;
    *count = 0;
    if (!d) return NULL;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char* p = path_join(dir, e->d_name);
        int const ok = want == 1 ? is_reg(p) : is_dir(p);
        free(p);
        if (!ok) continue;
        v = (dent*)xrealloc(v, (n + 1) * sizeof *v);
        v[n].name = xstrdup(e->d_name);
        v[n].num = last_number(e->d_name);
        n++;
    }
    closedir(d);
    if (n > 1) qsort(v, n, sizeof *v, dent_cmp);
    *count = n;
    return v;
}

static void dents_free(dent* v, size_t n) { for (size_t i = 0; i < n; i++) free(v[i].name); free(v); }

static void ckpt_add_file(ckpt* c, const char* key, const char* path)
{
    c->f = (ckfile*)xrealloc(c->f, (c->nf + 1) * sizeof *c->f);
    c->f[c->nf].key = xstrdup(key);
    c->f[c->nf].path = xstrdup(path);
    c->nf++;
}

/* One checkpoint from a file or a folder of files. */
static int ckpt_from_path(ckpt* c, const char* p)
{
    memset(c, 0, sizeof *c);
    c->label = xstrdup(base_name(p)[0] ? base_name(p) : p);
    c->step = last_number(c->label);
    if (is_reg(p)) { ckpt_add_file(c, base_name(p), p); return 0; }
    if (!is_dir(p)) { aerr("%s: %s", p, strerror(errno ? errno : ENOENT)); return -1; }
    size_t n;
    dent* v = list_dir(p, 1, &n);
    for (size_t i = 0; i < n; i++) {
        char* fp = path_join(p, v[i].name);
        ckpt_add_file(c, v[i].name, fp);
        free(fp);
    }
    dents_free(v, n);
    if (!c->nf) { aerr("%s: no files", p); return -1; }
    return 0;
}

static void ckpt_free(ckpt* c)
{
    for (size_t i = 0; i < c->nf; i++) {
        free(c->f[i].key); free(c->f[i].path);
        if (c->res) file_res_free(&c->res[i]);
    }
    free(c->f); free(c->res); free(c->label);
}

/* DIR: a trajectory of sub-folders, of numbered files, or one checkpoint. */
static int ckpts_from_dir(const char* dir, ckpt** out, size_t* nout)
{
    size_t nd, nf;
    dent* subs = list_dir(dir, 2, &nd);
    ckpt* v = NULL;
    size_t n = 0;
    if (nd) {
        for (size_t i = 0; i < nd; i++) {
            char* p = path_join(dir, subs[i].name);
            size_t k;
            dent* files = list_dir(p, 1, &k);
            if (k) {
                v = (ckpt*)xrealloc(v, (n + 1) * sizeof *v);
                if (ckpt_from_path(&v[n], p) == 0) n++;
            }
            dents_free(files, k);
            free(p);
        }
        dents_free(subs, nd);
        if (!n) { aerr("%s: no checkpoint files in its sub-folders", dir); free(v); return -1; }
        *out = v; *nout = n;
        return 0;
    }
    dents_free(subs, nd);
    dent* files = list_dir(dir, 1, &nf);
    if (!nf) { aerr("%s: no files", dir); free(files); return -1; }
    int numbered = 1;
    size_t distinct = 0;
    for (size_t i = 0; i < nf; i++) {
        if (files[i].num < 0) numbered = 0;
        if (i == 0 || files[i].num != files[i - 1].num) distinct++;
    }
    if (numbered && distinct >= 2) {
        for (size_t i = 0; i < nf; i++) {
            if (i == 0 || files[i].num != files[i - 1].num) {
                v = (ckpt*)xrealloc(v, (n + 1) * sizeof *v);
                memset(&v[n], 0, sizeof v[n]);
                char lab[32];
                snprintf(lab, sizeof lab, "%lld", files[i].num);
                v[n].label = xstrdup(lab);
                v[n].step = files[i].num;
                n++;
            }
            char* key = strip_digits(files[i].name);
            char* p = path_join(dir, files[i].name);
            ckpt_add_file(&v[n - 1], key, p);
            free(key); free(p);
        }
    } else {
        v = (ckpt*)xcalloc(1, sizeof *v);
        if (ckpt_from_path(&v[0], dir) != 0) { ckpt_free(&v[0]); free(v); dents_free(files, nf); return -1; }
        n = 1;
    }
    dents_free(files, nf);
    *out = v; *nout = n;
    return 0;
}

static const char* find_key(const ckpt* c, const char* key)
{
    for (size_t i = 0; c && i < c->nf; i++) if (!strcmp(c->f[i].key, key)) return c->f[i].path;
    return NULL;
}

/*-************************************************************
 * Figures
 **************************************************************/
static double ratio_of(double bytes, double coded) { return coded > 0 ? bytes / coded : INFINITY; }
static double floor_bytes(const astats* s) { return s->floor_bits / 8.0; }

static double entropy_of(const astats* s, unsigned k, int xor_)
{
    if (xor_) return s->xvalues ? s->xhbits[k] / (double)s->xvalues : NAN;
    return s->values ? s->hbits[k] / (double)s->values : NAN;
}

/* Reference-conditioned figures, in the order JSON and CSV give them. */
enum { CX_XOR_H, CX_TOK_H, CX_CTX_H, CX_RAW, CX_XOR_FLOOR, CX_TOK_FLOOR, CX_CTX_FLOOR, CX_TOK_GAIN, CX_CTX_GAIN, NCX };
static const char* const g_cx_name[NCX] = {
    "xor_value_entropy", "tok_entropy", "ctx_entropy", "tok_raw_bits",
    "xor_value_floor_bytes", "tok_floor_bytes", "ctx_floor_bytes", "tok_gain", "ctx_gain"
};

/* Entropies in bits per value (raw bits included), floors in bytes, gains
 * as 1 - floor / XOR floor; NaN where there is nothing to measure. */
static void ctx_figures(const astats* s, double* v)
{
    double const n = (double)s->cvalues, raw = (double)s->rawbits;
    double const xf = s->cxbits, tf = s->tbits + raw, cf = s->cbits + raw;
    v[CX_XOR_H] = n > 0 ? xf / n : NAN;
    v[CX_TOK_H] = n > 0 ? tf / n : NAN;
    v[CX_CTX_H] = n > 0 ? cf / n : NAN;
    v[CX_RAW] = n > 0 ? raw / n : NAN;
    v[CX_XOR_FLOOR] = n > 0 ? xf / 8 : NAN;
    v[CX_TOK_FLOOR] = n > 0 ? tf / 8 : NAN;
    v[CX_CTX_FLOOR] = n > 0 ? cf / 8 : NAN;
    v[CX_TOK_GAIN] = n > 0 && xf > 0 ? 1 - tf / xf : NAN;
    v[CX_CTX_GAIN] = n > 0 && xf > 0 ? 1 - cf / xf : NAN;
}

/* A file's figures summed over its dtypes. */
static void file_ctx_stats(const file_res* f, astats* s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < f->nd; i++) stats_add(s, &f->d[i].all);
}

static const char* human_ratio(double r, char* buf, size_t cap)
{
    if (isnan(r)) snprintf(buf, cap, "-");
    else if (isinf(r)) snprintf(buf, cap, "inf");
    else snprintf(buf, cap, "%.3fx", r);
    return buf;
}

/*-************************************************************
 * Terminal
 **************************************************************/
static void print_bits_table(const dtype_res* d, int flips)
{
    unsigned const w = d->all.w, nb = w * 8;
    int present[NCLS];
    printf("    %s per bit (all, then per class)\n", flips ? "flip rate" : "fraction of ones");
    printf("      bit  label  %8s", "all");
    for (int c = 0; c < NCLS; c++) {
        present[c] = d->cls[c].values > 0 && (!flips || d->cls[c].xvalues > 0);
        if (present[c]) printf(" %10.10s", g_cls_name[c]);
    }
    printf("\n");
    for (unsigned b = nb; b-- > 0; ) {
        char lab[16];
        bit_label(d->dt, b, lab, sizeof lab);
        const astats* a = &d->all;
        double const v = flips ? (double)a->flips[b] / (double)a->xvalues : (double)a->ones[b] / (double)a->values;
        printf("      %3u  %-5s  %8.5f", b, lab, v);
        for (int c = 0; c < NCLS; c++) {
            if (!present[c]) continue;
            const astats* s = &d->cls[c];
            double const x = flips ? (double)s->flips[b] / (double)s->xvalues : (double)s->ones[b] / (double)s->values;
            printf(" %10.5f", x);
        }
        printf("\n");
    }
}

/* cx: the table has reference-conditioned columns (bits per value). */
static void print_row(const char* name, const astats* s, int ntens, unsigned w, int cx)
{
    char r1[32], r2[32];
    int const x = s->xvalues > 0;
    printf("    %-22.22s %7d %11llu ", name, ntens, (unsigned long long)s->values);
    if (x) printf("%8.3f%% ", 100.0 * (double)s->unchanged / (double)s->xvalues);
    else printf("%9s ", "-");
    for (unsigned k = 0; k < w; k++) {
        if (k < s->w) printf(" %5.3f", entropy_of(s, k, x && s->xvalues == s->values));
        else printf("      ");
    }
    printf("%*s", w < 3 ? 6 * (3 - (int)w) : 0, "");
    if (cx) {
        double v[NCX];
        ctx_figures(s, v);
        if (s->cvalues) printf(" %5.2f %5.2f %5.2f", v[CX_XOR_H], v[CX_TOK_H], v[CX_CTX_H]);
        else printf(" %5s %5s %5s", "-", "-", "-");
    }
    printf(" %9s %9s\n", human_ratio(ratio_of((double)s->bytes, floor_bytes(s)), r1, sizeof r1),
           human_ratio(ratio_of((double)s->bytes, (double)s->lmc_bytes), r2, sizeof r2));
}

static void print_file(const ckpt* c, const file_res* f, int traj)
{
    char r1[32], r2[32], r3[32], r4[32];
    if (traj) printf("== %s: %s\n", c->label, f->key);
    else printf("== %s\n", f->path);
    if (traj) printf("   path: %s\n", f->path);
    if (f->ref) printf("   ref:  %s (%zu of %zu tensors matched: coded as XOR deltas)\n", f->ref, f->nmatched, f->ntensors);
    else printf("   ref:  none (coded whole)\n");
    if (f->is_st && strcmp(f->container, "torch.save") == 0)
        printf("   torch.save zip, %llu bytes, %llu bytes before the first storage, %zu typed storages (named %s)\n",
               (unsigned long long)f->size, (unsigned long long)f->header, f->ntensors,
               f->nt && f->t[0].name[0] == 'a' ? "a<archive>/data/<key>" : "data/<key>");
    else if (f->is_st) printf("   safetensors, %llu bytes, header %llu bytes, %zu tensors\n",
                         (unsigned long long)f->size, (unsigned long long)f->header, f->ntensors);
    else printf("   %s, %llu bytes\n", f->note, (unsigned long long)f->size);
    printf("   whole file: ideal %s (floor %.0f B)  lmc %s (%llu B",
           human_ratio(ratio_of((double)f->size, f->floor_bits / 8), r1, sizeof r1), f->floor_bits / 8,
           human_ratio(ratio_of((double)f->size, (double)f->lmc_bytes), r2, sizeof r2), (unsigned long long)f->lmc_bytes);
    if (f->floor_bits > 0) printf(", %.3f x floor)", (double)f->lmc_bytes / (f->floor_bits / 8));
    else printf(")");
    if (f->zstd_bytes >= 0) printf("  zstd -3 %s", human_ratio(ratio_of((double)f->size, (double)f->zstd_bytes), r3, sizeof r3));
    if (f->bzip2_bytes >= 0) printf("  bzip2 -9 %s", human_ratio(ratio_of((double)f->size, (double)f->bzip2_bytes), r4, sizeof r4));
    printf("\n");
    {
        astats a;
        file_ctx_stats(f, &a);
        if (a.cvalues) {
            double v[NCX];
            ctx_figures(&a, v);
            double const b = (double)a.cbytes;
            char gain[32];
            if (isnan(v[CX_CTX_GAIN])) snprintf(gain, sizeof gain, "-");
            else snprintf(gain, sizeof gain, "%.1f%%", 100.0 * v[CX_CTX_GAIN]);
            printf("   difference tokens (%llu matched bf16/f16/f32 values): floor / bytes: XOR groups %.4f, tokens %.4f,"
                   " tokens | ref ctx %.4f (gain %s)\n", (unsigned long long)a.cvalues,
                   v[CX_XOR_FLOOR] / b, v[CX_TOK_FLOOR] / b, v[CX_CTX_FLOOR] / b, gain);
        }
    }
    for (size_t i = 0; i < f->nd; i++) {
        const dtype_res* d = &f->d[i];
        int const x = d->all.xvalues > 0;
        int const cx = d->all.cvalues > 0;
        printf("   %s: %u bytes/value, %llu values\n", lmc_dtype_name(d->dt), d->all.w, (unsigned long long)d->all.values);
        char hl[32];
        snprintf(hl, sizeof hl, "%s b0..b%u", x ? "H(xor)" : "H", d->all.w - 1);
        printf("    %-22s %7s %11s %9s  %-*s%s %9s %9s\n", "class", "tensors", "values", "unchanged",
               6 * (int)(d->all.w < 3 ? 3 : d->all.w) - 1, hl, cx ? " xor/v tok/v ctx/v" : "", "ideal", "lmc");
        for (int k = 0; k < NCLS; k++)
            if (d->cls[k].values || d->cls[k].bytes) print_row(g_cls_name[k], &d->cls[k], (int)d->cls[k].ntensors, d->all.w, cx);
        print_row("all", &d->all, (int)d->all.ntensors, d->all.w, cx);
        if (o.tensors) {
            for (size_t t = 0; t < f->nt; t++)
                if (f->t[t].dt == d->dt) print_row(f->t[t].name, &f->t[t].st, 1, d->all.w, cx);
        }
        if (!o.brief && d->all.values) {
            print_bits_table(d, 0);
            if (x) print_bits_table(d, 1);
        }
    }
    printf("\n");
}

static void print_trajectory(const ckpt* cs, size_t n)
{
    /* one table per file key, over the checkpoints that have it */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < cs[i].nf; j++) {
            const char* key = cs[i].f[j].key;
            int seen = 0;
            for (size_t a = 0; a < i && !seen; a++) if (find_key(&cs[a], key)) seen = 1;
            for (size_t b = 0; b < j && !seen; b++) if (!strcmp(cs[i].f[b].key, key)) seen = 1;
            if (seen) continue;
            int present[NCLS] = { 0 };
            for (size_t a = i; a < n; a++)
                for (size_t b = 0; b < cs[a].nf; b++) {
                    if (strcmp(cs[a].f[b].key, key) || !cs[a].res[b].ok) continue;
                    for (size_t t = 0; t < cs[a].res[b].nt; t++) present[cs[a].res[b].t[t].cls] = 1;
                }
            printf("== compressibility over time: %s (lmc ratio / ideal ratio; delta = vs the previous step)\n", key);
            printf("   %-14s %-5s %17s", "step", "kind", "whole file");
            for (int k = 0; k < NCLS; k++) if (present[k]) printf(" %17s", g_cls_name[k]);
            printf("\n");
            for (size_t a = i; a < n; a++)
                for (size_t b = 0; b < cs[a].nf; b++) {
                    const file_res* f = &cs[a].res[b];
                    if (strcmp(cs[a].f[b].key, key) || !f->ok) continue;
                    char r1[32], r2[32], cell[80];
                    printf("   %-14s %-5s", cs[a].label, f->ref ? "delta" : "full");
                    snprintf(cell, sizeof cell, "%s/%s", human_ratio(ratio_of((double)f->size, (double)f->lmc_bytes), r1, sizeof r1),
                             human_ratio(ratio_of((double)f->size, f->floor_bits / 8), r2, sizeof r2));
                    printf(" %17s", cell);
                    for (int k = 0; k < NCLS; k++) {
                        if (!present[k]) continue;
                        astats s;
                        memset(&s, 0, sizeof s);
                        for (size_t t = 0; t < f->nt; t++) if (f->t[t].cls == k) stats_add(&s, &f->t[t].st);
                        if (!s.bytes) { printf(" %17s", "-"); continue; }
                        snprintf(cell, sizeof cell, "%s/%s", human_ratio(ratio_of((double)s.bytes, (double)s.lmc_bytes), r1, sizeof r1),
                                 human_ratio(ratio_of((double)s.bytes, floor_bytes(&s)), r2, sizeof r2));
                        printf(" %17s", cell);
                    }
                    printf("\n");
                }
            printf("\n");
        }
    }
}

/*-************************************************************
 * JSON
 **************************************************************/
static void json_str(FILE* out, const char* s)
{
    fputc('"', out);
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}

static void json_num(FILE* out, double v)
{
    if (isnan(v) || isinf(v)) fputs("null", out);
    else fprintf(out, "%.17g", v);
}

static void json_refctx(FILE* out, const astats* s, const char* ind)
{
    double v[NCX];
    ctx_figures(s, v);
    fprintf(out, "%s\"ctx_values\": %llu, \"ctx_bytes\": %llu", ind, (unsigned long long)s->cvalues, (unsigned long long)s->cbytes);
    for (int i = 0; i < NCX; i++) {
        if (i == CX_XOR_FLOOR) fprintf(out, ",\n%s", ind); else fputs(", ", out);
        fprintf(out, "\"%s\": ", g_cx_name[i]);
        json_num(out, v[i]);
    }
}

static void json_stats(FILE* out, const astats* s, const char* ind)
{
    unsigned const w = s->w;
    fprintf(out, "%s\"values\": %llu, \"bytes\": %llu, \"tensors\": %llu,\n", ind,
            (unsigned long long)s->values, (unsigned long long)s->bytes, (unsigned long long)s->ntensors);
    fprintf(out, "%s\"ones\": [", ind);
    for (unsigned b = 0; b < 8 * w; b++) { if (b) fputs(", ", out); json_num(out, s->values ? (double)s->ones[b] / (double)s->values : NAN); }
    fprintf(out, "],\n%s\"compared_values\": %llu, \"unchanged\": ", ind, (unsigned long long)s->xvalues);
    json_num(out, s->xvalues ? (double)s->unchanged / (double)s->xvalues : NAN);
    fprintf(out, ",\n%s\"flips\": ", ind);
    if (s->xvalues) {
        fputc('[', out);
        for (unsigned b = 0; b < 8 * w; b++) { if (b) fputs(", ", out); json_num(out, (double)s->flips[b] / (double)s->xvalues); }
        fputc(']', out);
    } else fputs("null", out);
    fprintf(out, ",\n%s\"entropy\": [", ind);
    for (unsigned k = 0; k < w; k++) { if (k) fputs(", ", out); json_num(out, entropy_of(s, k, 0)); }
    fprintf(out, "],\n%s\"xor_entropy\": ", ind);
    if (s->xvalues) {
        fputc('[', out);
        for (unsigned k = 0; k < w; k++) { if (k) fputs(", ", out); json_num(out, entropy_of(s, k, 1)); }
        fputc(']', out);
    } else fputs("null", out);
    fprintf(out, ",\n%s\"floor_bytes\": ", ind);
    json_num(out, floor_bytes(s));
    fputs(", \"ideal_ratio\": ", out);
    json_num(out, ratio_of((double)s->bytes, floor_bytes(s)));
    fprintf(out, ", \"lmc_bytes\": %llu, \"lmc_ratio\": ", (unsigned long long)s->lmc_bytes);
    json_num(out, ratio_of((double)s->bytes, (double)s->lmc_bytes));
    fputs(",\n", out);
    json_refctx(out, s, ind);
}

static void json_file(FILE* out, const file_res* f)
{
    fputs("      {\"key\": ", out); json_str(out, f->key);
    fputs(", \"path\": ", out); json_str(out, f->path);
    fputs(", \"ref\": ", out); if (f->ref) json_str(out, f->ref); else fputs("null", out);
    fprintf(out, ",\n       \"container\": \"%s\", \"note\": ", f->is_st ? f->container : "bytes");
    if (f->note) json_str(out, f->note); else fputs("null", out);
    fprintf(out, ", \"bytes\": %llu, \"header_bytes\": %llu, \"tensors\": %zu, \"tensors_matched\": %zu,\n",
            (unsigned long long)f->size, (unsigned long long)f->header, f->ntensors, f->nmatched);
    fputs("       \"floor_bytes\": ", out); json_num(out, f->floor_bits / 8);
    fputs(", \"ideal_ratio\": ", out); json_num(out, ratio_of((double)f->size, f->floor_bits / 8));
    fprintf(out, ", \"lmc_bytes\": %llu, \"lmc_ratio\": ", (unsigned long long)f->lmc_bytes);
    json_num(out, ratio_of((double)f->size, (double)f->lmc_bytes));
    fputs(",\n       \"zstd_bytes\": ", out);
    if (f->zstd_bytes >= 0) fprintf(out, "%lld", f->zstd_bytes); else fputs("null", out);
    fputs(", \"zstd_ratio\": ", out);
    json_num(out, f->zstd_bytes >= 0 ? ratio_of((double)f->size, (double)f->zstd_bytes) : NAN);
    fputs(", \"bzip2_bytes\": ", out);
    if (f->bzip2_bytes >= 0) fprintf(out, "%lld", f->bzip2_bytes); else fputs("null", out);
    fputs(", \"bzip2_ratio\": ", out);
    json_num(out, f->bzip2_bytes >= 0 ? ratio_of((double)f->size, (double)f->bzip2_bytes) : NAN);
    fputs(",\n", out);
    {
        astats a;
        file_ctx_stats(f, &a);
        json_refctx(out, &a, "       ");
    }
    fputs(",\n       \"dtypes\": [", out);
    for (size_t i = 0; i < f->nd; i++) {
        const dtype_res* d = &f->d[i];
        fprintf(out, "%s\n        {\"dtype\": \"%s\", \"width\": %u, \"bit_labels\": [", i ? "," : "", lmc_dtype_name(d->dt), d->all.w);
        for (unsigned b = 0; b < 8 * d->all.w; b++) {
            char lab[16];
            bit_label(d->dt, b, lab, sizeof lab);
            fprintf(out, "%s\"%s\"", b ? ", " : "", lab);
        }
        fputs("],\n", out);
        json_stats(out, &d->all, "         ");
        fputs(",\n         \"classes\": [", out);
        int first = 1;
        for (int k = 0; k < NCLS; k++) {
            if (!d->cls[k].ntensors) continue;
            fprintf(out, "%s\n          {\"class\": \"%s\",\n", first ? "" : ",", g_cls_name[k]);
            json_stats(out, &d->cls[k], "           ");
            fputs("}", out);
            first = 0;
        }
        fputs("],\n         \"tensors\": [", out);
        first = 1;
        for (size_t t = 0; t < f->nt; t++) {
            const tensor_res* tr = &f->t[t];
            if (tr->dt != d->dt) continue;
            fprintf(out, "%s\n          {\"name\": ", first ? "" : ",");
            json_str(out, tr->name);
            fputs(", \"label\": ", out);
            if (tr->label) json_str(out, tr->label); else fputs("null", out);
            fprintf(out, ", \"class\": \"%s\", \"shape\": %s, \"matched\": %s,\n", g_cls_name[tr->cls], tr->shape, tr->matched ? "true" : "false");
            json_stats(out, &tr->st, "           ");
            fputs("}", out);
            first = 0;
        }
        fputs("]}", out);
    }
    fputs("]}", out);
}

static void json_write(FILE* out, const ckpt* cs, size_t n)
{
    fprintf(out, "{\"tool\": \"lmc analyze\", \"version\": \"%s\", \"block_values\": %u,\n", lmc_version_string(), BLOCK_VALUES);
    fputs(" \"baselines\": ", out);
    if (o.baselines) fputs("{\"zstd\": \"zstd -3\", \"bzip2\": \"bzip2 -9\", \"input\": \"raw bytes as lmc's encoder sees them: the file, or the file XOR its reference\"}", out);
    else fputs("null", out);
    fputs(",\n \"checkpoints\": [", out);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s\n  {\"label\": ", i ? "," : "");
        json_str(out, cs[i].label);
        fputs(", \"step\": ", out);
        if (cs[i].step >= 0) fprintf(out, "%lld", cs[i].step); else fputs("null", out);
        fputs(", \"files\": [\n", out);
        for (size_t j = 0; j < cs[i].nf; j++) {
            if (j) fputs(",\n", out);
            json_file(out, &cs[i].res[j]);
        }
        fputs("]}", out);
    }
    fputs("],\n \"trajectory\": [", out);
    int first = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < cs[i].nf; j++) {
            const file_res* f = &cs[i].res[j];
            if (!f->ref) continue;
            for (int k = -1; k < NCLS; k++) {
                astats s;
                memset(&s, 0, sizeof s);
                double bytes, coded, fl;
                if (k < 0) { bytes = (double)f->size; coded = (double)f->lmc_bytes; fl = f->floor_bits / 8; }
                else {
                    for (size_t t = 0; t < f->nt; t++) if (f->t[t].cls == k) stats_add(&s, &f->t[t].st);
                    if (!s.ntensors) continue;
                    bytes = (double)s.bytes; coded = (double)s.lmc_bytes; fl = floor_bytes(&s);
                }
                fprintf(out, "%s\n  {\"step\": ", first ? "" : ",");
                if (cs[i].step >= 0) fprintf(out, "%lld", cs[i].step); else fputs("null", out);
                fputs(", \"label\": ", out); json_str(out, cs[i].label);
                fputs(", \"file\": ", out); json_str(out, f->key);
                fprintf(out, ", \"class\": \"%s\", \"lmc_ratio\": ", k < 0 ? "all" : g_cls_name[k]);
                json_num(out, ratio_of(bytes, coded));
                fputs(", \"ideal_ratio\": ", out);
                json_num(out, ratio_of(bytes, fl));
                fputs("}", out);
                first = 0;
            }
        }
    fputs("]}\n", out);
}

/*-************************************************************
 * CSV: step,checkpoint,file,ref,dtype,scope,name,class,metric,index,value
 **************************************************************/
static void csv_field(FILE* out, const char* s)
{
    if (!s) return;
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', out);
        for (; *s; s++) { if (*s == '"') fputc('"', out); fputc(*s, out); }
        fputc('"', out);
    } else fputs(s, out);
}

typedef struct { FILE* out; const ckpt* c; const file_res* f; const char* dtype; const char* scope; const char* name; const char* cls; } csv_ctx;

static void csv_val(const csv_ctx* x, const char* metric, int index, double v)
{
    FILE* out = x->out;
    if (x->c->step >= 0) fprintf(out, "%lld", x->c->step);
    fputc(',', out); csv_field(out, x->c->label);
    fputc(',', out); csv_field(out, x->f->path);
    fputc(',', out); csv_field(out, x->f->ref);
    fputc(',', out); csv_field(out, x->dtype);
    fputc(',', out); csv_field(out, x->scope);
    fputc(',', out); csv_field(out, x->name);
    fputc(',', out); csv_field(out, x->cls);
    fprintf(out, ",%s,", metric);
    if (index >= 0) fprintf(out, "%d", index);
    fputc(',', out);
    if (!isnan(v) && !isinf(v)) fprintf(out, "%.17g", v);
    else if (isinf(v)) fputs("inf", out);
    fputc('\n', out);
}

static void csv_refctx(const csv_ctx* x, const astats* s)
{
    if (!s->cvalues) return;
    double v[NCX];
    ctx_figures(s, v);
    csv_val(x, "ctx_values", -1, (double)s->cvalues);
    csv_val(x, "ctx_bytes", -1, (double)s->cbytes);
    for (int i = 0; i < NCX; i++) csv_val(x, g_cx_name[i], -1, v[i]);
}

static void csv_stats(const csv_ctx* x, const astats* s)
{
    csv_val(x, "values", -1, (double)s->values);
    csv_val(x, "bytes", -1, (double)s->bytes);
    for (unsigned b = 0; b < 8 * s->w; b++) csv_val(x, "ones", (int)b, s->values ? (double)s->ones[b] / (double)s->values : NAN);
    if (s->xvalues) {
        csv_val(x, "compared_values", -1, (double)s->xvalues);
        csv_val(x, "unchanged", -1, (double)s->unchanged / (double)s->xvalues);
        for (unsigned b = 0; b < 8 * s->w; b++) csv_val(x, "flips", (int)b, (double)s->flips[b] / (double)s->xvalues);
    }
    for (unsigned k = 0; k < s->w; k++) csv_val(x, "entropy", (int)k, entropy_of(s, k, 0));
    if (s->xvalues) for (unsigned k = 0; k < s->w; k++) csv_val(x, "xor_entropy", (int)k, entropy_of(s, k, 1));
    csv_val(x, "floor_bytes", -1, floor_bytes(s));
    csv_val(x, "ideal_ratio", -1, ratio_of((double)s->bytes, floor_bytes(s)));
    csv_val(x, "lmc_bytes", -1, (double)s->lmc_bytes);
    csv_val(x, "lmc_ratio", -1, ratio_of((double)s->bytes, (double)s->lmc_bytes));
    csv_refctx(x, s);
}

static void csv_write(FILE* out, const ckpt* cs, size_t n)
{
    fputs("step,checkpoint,file,ref,dtype,scope,name,class,metric,index,value\n", out);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < cs[i].nf; j++) {
            const file_res* f = &cs[i].res[j];
            csv_ctx x = { out, &cs[i], f, NULL, "file", f->key, NULL };
            csv_val(&x, "bytes", -1, (double)f->size);
            csv_val(&x, "floor_bytes", -1, f->floor_bits / 8);
            csv_val(&x, "ideal_ratio", -1, ratio_of((double)f->size, f->floor_bits / 8));
            csv_val(&x, "lmc_bytes", -1, (double)f->lmc_bytes);
            csv_val(&x, "lmc_ratio", -1, ratio_of((double)f->size, (double)f->lmc_bytes));
            if (f->zstd_bytes >= 0) { csv_val(&x, "zstd_bytes", -1, (double)f->zstd_bytes); csv_val(&x, "zstd_ratio", -1, ratio_of((double)f->size, (double)f->zstd_bytes)); }
            if (f->bzip2_bytes >= 0) { csv_val(&x, "bzip2_bytes", -1, (double)f->bzip2_bytes); csv_val(&x, "bzip2_ratio", -1, ratio_of((double)f->size, (double)f->bzip2_bytes)); }
            {
                astats a;
                file_ctx_stats(f, &a);
                csv_refctx(&x, &a);
            }
            for (size_t d = 0; d < f->nd; d++) {
                const dtype_res* dr = &f->d[d];
                x.dtype = lmc_dtype_name(dr->dt);
                x.scope = "dtype"; x.name = NULL; x.cls = NULL;
                csv_stats(&x, &dr->all);
                x.scope = "class";
                for (int k = 0; k < NCLS; k++) {
                    if (!dr->cls[k].ntensors) continue;
                    x.cls = g_cls_name[k];
                    csv_stats(&x, &dr->cls[k]);
                }
                x.scope = "tensor";
                for (size_t t = 0; t < f->nt; t++) {
                    if (f->t[t].dt != dr->dt) continue;
                    x.name = f->t[t].name; x.cls = g_cls_name[f->t[t].cls];
                    csv_stats(&x, &f->t[t].st);
                }
            }
        }
}

/*-************************************************************
 * Plots (gnuplot)
 **************************************************************/
static char* plot_name(const char* key)
{
    char* s = xstrdup(base_name(key));
    size_t n = strlen(s);
    if (n > 12 && !strcmp(s + n - 12, ".safetensors")) s[n - 12] = 0;
    for (char* p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') *p = '_';
    if (!*s) { free(s); s = xstrdup("file"); }
    return s;
}

static void gp_num(FILE* g, double v)
{
    if (isnan(v) || isinf(v)) fputs(" NaN", g);
    else fprintf(g, " %.6g", v);
}

static void gp_header(FILE* g, const char* png, const char* title)
{
    fprintf(g, "set terminal pngcairo size 960,540 font 'DejaVu Sans,10' noenhanced\n");
    fprintf(g, "set output '%s'\n", png);
    fprintf(g, "set title '%s'\nset datafile missing 'NaN'\nset grid\nset key outside right top\n", title);
}

static void gp_bit_fields(FILE* g, lmc_dtype dt, unsigned nb)
{
    int sign, eb;
    float_layout(dt, &sign, &eb);
    fprintf(g, "set tmargin 4\nset xrange [%g:%g]\nset xtics 1\n", (double)nb - 0.5, -0.5);
    if (nb > 16) fputs("set xtics 2\n", g);
    if (sign >= 0) {
        fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'gray40'\n", sign - 0.5, sign - 0.5);
        fprintf(g, "set label 'sign' at %d, graph 1.03 center\n", sign);
    }
    if (eb > 0) {
        int const man = sign - eb;
        fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'gray40'\n", man - 0.5, man - 0.5);
        fprintf(g, "set label 'exponent' at %g, graph 1.03 center\n", (sign - 1 + man) / 2.0);
        fprintf(g, "set label 'mantissa' at %g, graph 1.03 center\n", (man - 1) / 2.0);
    }
}

static int run_gnuplot(const char* script)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (!o.verbose) {
            int nul = open("/dev/null", O_WRONLY);
            if (nul >= 0) { dup2(nul, 2); close(nul); }
        }
        execlp("gnuplot", "gnuplot", script, (char*)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st)) return -1;
    return WEXITSTATUS(st) == 127 ? -2 : WEXITSTATUS(st) ? -1 : 0;
}

/* Runs gnuplot on DIR/NAME.gp, which writes DIR/NAME.png; returns 0 or -1. */
static int plot_one(const char* dir, const char* name, int* count)
{
    char gp[PATH_MAX], png[PATH_MAX];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    snprintf(png, sizeof png, "%s/%s.png", dir, name);
    int const r = run_gnuplot(gp);
    if (r == -2) { aerr("--plot: cannot run gnuplot (Debian: apt-get install gnuplot-nox)"); return -1; }
    if (r != 0 || !is_reg(png)) { aerr("--plot: gnuplot failed on %s (rerun with -v to see why)", gp); return -1; }
    if (o.verbose) fprintf(stderr, "lmc analyze: wrote %s\n", png);
    (*count)++;
    return 0;
}

static FILE* gp_open(const char* dir, const char* name, const char* title)
{
    char gp[PATH_MAX], png[PATH_MAX];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    snprintf(png, sizeof png, "%s/%s.png", dir, name);
    FILE* g = fopen(gp, "w");
    if (!g) { aerr("%s: %s", gp, strerror(errno)); return NULL; }
    gp_header(g, png, title);
    return g;
}

static void class_stats(const file_res* f, lmc_dtype dt, int k, astats* s)
{
    memset(s, 0, sizeof *s);
    for (size_t t = 0; t < f->nt; t++)
        if (f->t[t].cls == k && (f->t[t].dt == dt || (int)dt < 0)) stats_add(s, &f->t[t].st);
}

static int plots_write(const char* dir, const ckpt* cs, size_t n)
{
    int count = 0, rc = 0;
    static const char* const colors[NCLS + 1] = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f", "#000000" };
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) { aerr("%s: %s", dir, strerror(errno)); return -1; }
    /* keys in order of appearance */
    const char** keys = NULL;
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < cs[i].nf; j++) {
            size_t k;
            for (k = 0; k < nk; k++) if (!strcmp(keys[k], cs[i].f[j].key)) break;
            if (k == nk) { keys = (const char**)xrealloc(keys, (nk + 1) * sizeof *keys); keys[nk++] = cs[i].f[j].key; }
        }
    int time_files = 0;
    for (size_t k = 0; k < nk && rc == 0; k++) {
        char* pn = plot_name(keys[k]);
        /* the checkpoints holding this key */
        const file_res** fs = (const file_res**)xcalloc(n, sizeof *fs);
        const ckpt** fc = (const ckpt**)xcalloc(n, sizeof *fc);
        size_t nf = 0, ndelta = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < cs[i].nf; j++)
                if (!strcmp(cs[i].f[j].key, keys[k]) && cs[i].res[j].ok) { fs[nf] = &cs[i].res[j]; fc[nf] = &cs[i]; nf++; ndelta += cs[i].res[j].ref != NULL; }
        if (!nf) { free(fs); free(fc); free(pn); continue; }
        if (ndelta >= 2) time_files = 1;
        const file_res* last = fs[nf - 1];
        const ckpt* lastc = fc[nf - 1];
        for (size_t d = 0; d < last->nd && rc == 0; d++) {
            const dtype_res* dr = &last->d[d];
            unsigned const nb = dr->all.w * 8;
            char name[PATH_MAX / 2], title[512];
            const char* dn = lmc_dtype_name(dr->dt);
            /* ones per bit */
            snprintf(name, sizeof name, "bits-%s-%s", pn, dn);
            snprintf(title, sizeof title, "Fraction of ones per bit: %s (%s), %s", keys[k], dn, lastc->label);
            FILE* g = gp_open(dir, name, title);
            if (!g) { rc = -1; break; }
            gp_bit_fields(g, dr->dt, nb);
            fputs("set xlabel 'bit position (0 = least significant)'\nset ylabel 'fraction of ones'\nset yrange [0:1.08]\n", g);
            fputs("$d << EOD\n", g);
            for (unsigned b = 0; b < nb; b++) {
                fprintf(g, "%u", b);
                gp_num(g, (double)dr->all.ones[b] / (double)dr->all.values);
                for (int c = 0; c < NCLS; c++)
                    gp_num(g, dr->cls[c].values ? (double)dr->cls[c].ones[b] / (double)dr->cls[c].values : NAN);
                fputc('\n', g);
            }
            fputs("EOD\nplot $d using 1:2 with linespoints lw 3 pt 7 lc rgb '#000000' title 'all'", g);
            for (int c = 0; c < NCLS; c++)
                if (dr->cls[c].values) fprintf(g, ", $d using 1:%d with linespoints lw 1.5 pt 7 ps 0.6 lc rgb '%s' title '%s'", c + 3, colors[c], g_cls_name[c]);
            fputs("\n", g);
            fclose(g);
            if (plot_one(dir, name, &count)) { rc = -1; break; }

            /* flip rate per bit: per step over a trajectory, else per class */
            int const series = ndelta >= 2;
            if (dr->all.xvalues || series) {
                snprintf(name, sizeof name, "flips-%s-%s", pn, dn);
                snprintf(title, sizeof title, "XOR flip rate per bit vs the previous checkpoint: %s (%s)%s%s", keys[k], dn,
                         series ? "" : ", ", series ? "" : lastc->label);
                g = gp_open(dir, name, title);
                if (!g) { rc = -1; break; }
                gp_bit_fields(g, dr->dt, nb);
                fputs("set xlabel 'bit position (0 = least significant)'\nset ylabel 'fraction of values whose bit flipped'\n"
                      "set logscale y\nset yrange [1e-5:1]\nset format y '%.0e'\n", g);
                fputs("$d << EOD\n", g);
                for (unsigned b = 0; b < nb; b++) {
                    fprintf(g, "%u", b);
                    if (series) {
                        for (size_t i = 0; i < nf; i++) {
                            if (!fs[i]->ref) continue;
                            const astats* a = NULL;
                            for (size_t e = 0; e < fs[i]->nd; e++) if (fs[i]->d[e].dt == dr->dt) a = &fs[i]->d[e].all;
                            gp_num(g, a && a->xvalues && a->flips[b] ? (double)a->flips[b] / (double)a->xvalues : NAN);
                        }
                    } else {
                        const astats* a = &dr->all;
                        gp_num(g, a->flips[b] ? (double)a->flips[b] / (double)a->xvalues : NAN);
                        for (int c = 0; c < NCLS; c++) {
                            const astats* s = &dr->cls[c];
                            gp_num(g, s->xvalues && s->flips[b] ? (double)s->flips[b] / (double)s->xvalues : NAN);
                        }
                    }
                    fputc('\n', g);
                }
                fputs("EOD\nplot ", g);
                if (series) {
                    int col = 2, first = 1;
                    size_t const nd_ = ndelta;
                    size_t idx = 0;
                    for (size_t i = 0; i < nf; i++) {
                        if (!fs[i]->ref) continue;
                        /* light to dark: later steps darker */
                        double const t = nd_ > 1 ? (double)idx / (double)(nd_ - 1) : 1.0;
                        int const r_ = (int)(200 - 180 * t), g_ = (int)(220 - 150 * t), b_ = 255 - (int)(60 * t);
                        fprintf(g, "%s$d using 1:%d with linespoints lw 2 pt 7 ps 0.6 lc rgb '#%02x%02x%02x' title '%s'",
                                first ? "" : ", ", col, r_, g_, b_, fc[i]->label);
                        col++; idx++; first = 0;
                    }
                } else {
                    fputs("$d using 1:2 with linespoints lw 3 pt 7 lc rgb '#000000' title 'all'", g);
                    for (int c = 0; c < NCLS; c++)
                        if (dr->cls[c].xvalues) fprintf(g, ", $d using 1:%d with linespoints lw 1.5 pt 7 ps 0.6 lc rgb '%s' title '%s'", c + 3, colors[c], g_cls_name[c]);
                }
                fputs("\n", g);
                fclose(g);
                if (plot_one(dir, name, &count)) { rc = -1; break; }
            }
        }
        if (rc) { free(fs); free(fc); free(pn); break; }

        /* ratios of the last checkpoint: ideal vs lmc (per class) vs zstd and bzip2 (whole file) */
        {
            char name[PATH_MAX / 2], title[512];
            snprintf(name, sizeof name, "ratio-%s", pn);
            snprintf(title, sizeof title, "Compression ratio, %s: %s %s", keys[k], lastc->label,
                     last->ref ? "(XOR delta vs the previous checkpoint)" : "(whole, no reference)");
            FILE* g = gp_open(dir, name, title);
            if (!g) { rc = -1; free(fs); free(fc); free(pn); break; }
            fputs("set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
                  "set boxwidth 0.9\nset ylabel 'original / compressed (higher is better)'\nset yrange [0:*]\nset xtics nomirror rotate by -20\n"
                  "set key outside top center horizontal\n", g);
            fputs("$d << EOD\n", g);
            for (size_t d = 0; d < last->nd; d++)
                for (int c = 0; c < NCLS; c++) {
                    const astats* s = &last->d[d].cls[c];
                    if (!s->ntensors) continue;
                    if (last->nd > 1) fprintf(g, "\"%s %s\"", lmc_dtype_name(last->d[d].dt), g_cls_name[c]);
                    else fprintf(g, "\"%s\"", g_cls_name[c]);
                    gp_num(g, ratio_of((double)s->bytes, floor_bytes(s)));
                    gp_num(g, ratio_of((double)s->bytes, (double)s->lmc_bytes));
                    fputs(" NaN NaN\n", g);
                }
            fputs("\"whole file\"", g);
            gp_num(g, ratio_of((double)last->size, last->floor_bits / 8));
            gp_num(g, ratio_of((double)last->size, (double)last->lmc_bytes));
            gp_num(g, last->zstd_bytes >= 0 ? ratio_of((double)last->size, (double)last->zstd_bytes) : NAN);
            gp_num(g, last->bzip2_bytes >= 0 ? ratio_of((double)last->size, (double)last->bzip2_bytes) : NAN);
            fputs("\nEOD\n", g);
            fputs("plot $d using 2:xtic(1) lc rgb '#9ecae1' title 'ideal (order-0 floor, 64 KiB blocks)', "
                  "$d using 3 lc rgb '#08519c' title 'lmc', "
                  "$d using 4 lc rgb '#fdae6b' title 'zstd -3 (raw bytes)', "
                  "$d using 5 lc rgb '#e6550d' title 'bzip2 -9 (raw bytes)'\n", g);
            fclose(g);
            if (plot_one(dir, name, &count)) { rc = -1; free(fs); free(fc); free(pn); break; }
        }

        /* compressibility over time */
        if (ndelta >= 2) {
            char name[PATH_MAX / 2], title[512];
            snprintf(name, sizeof name, "time-%s", pn);
            snprintf(title, sizeof title, "Delta compression ratio over training: %s (solid: lmc, dashed: ideal)", keys[k]);
            FILE* g = gp_open(dir, name, title);
            if (!g) { rc = -1; free(fs); free(fc); free(pn); break; }
            fputs("set xlabel 'training step'\nset ylabel 'original / compressed delta'\nset yrange [0:*]\n", g);
            int present[NCLS] = { 0 };
            fputs("$d << EOD\n", g);
            for (size_t i = 0; i < nf; i++) {
                if (!fs[i]->ref) continue;
                fprintf(g, "%lld", fc[i]->step >= 0 ? fc[i]->step : (long long)i);
                gp_num(g, ratio_of((double)fs[i]->size, (double)fs[i]->lmc_bytes));
                gp_num(g, ratio_of((double)fs[i]->size, fs[i]->floor_bits / 8));
                for (int c = 0; c < NCLS; c++) {
                    astats s;
                    class_stats(fs[i], (lmc_dtype)-1, c, &s);
                    if (s.ntensors) present[c] = 1;
                    gp_num(g, s.ntensors ? ratio_of((double)s.bytes, (double)s.lmc_bytes) : NAN);
                    gp_num(g, s.ntensors ? ratio_of((double)s.bytes, floor_bytes(&s)) : NAN);
                }
                fputc('\n', g);
            }
            fputs("EOD\nplot $d using 1:2 with linespoints lw 3 pt 7 lc rgb '#000000' title 'whole file', "
                  "$d using 1:3 with lines lw 2 dt 2 lc rgb '#000000' notitle", g);
            for (int c = 0; c < NCLS; c++) {
                if (!present[c]) continue;
                fprintf(g, ", $d using 1:%d with linespoints lw 1.5 pt 7 ps 0.6 lc rgb '%s' title '%s'", 4 + 2 * c, colors[c], g_cls_name[c]);
                fprintf(g, ", $d using 1:%d with lines lw 1 dt 2 lc rgb '%s' notitle", 5 + 2 * c, colors[c]);
            }
            fputs("\n", g);
            fclose(g);
            if (plot_one(dir, name, &count)) { rc = -1; free(fs); free(fc); free(pn); break; }
        }
        free(fs); free(fc); free(pn);
    }

    /* every file's whole-file delta ratio over time */
    if (rc == 0 && time_files) {
        FILE* g = gp_open(dir, "time-files", "Whole-file delta compression ratio over training (lmc; dashed: ideal)");
        if (!g) rc = -1;
        else {
            fputs("set xlabel 'training step'\nset ylabel 'original / compressed delta'\nset yrange [0:*]\n", g);
            for (size_t k = 0; k < nk; k++) {
                fprintf(g, "$d%zu << EOD\n", k);
                for (size_t i = 0; i < n; i++)
                    for (size_t j = 0; j < cs[i].nf; j++) {
                        const file_res* f = &cs[i].res[j];
                        if (strcmp(cs[i].f[j].key, keys[k]) || !f->ok || !f->ref) continue;
                        fprintf(g, "%lld", cs[i].step >= 0 ? cs[i].step : (long long)i);
                        gp_num(g, ratio_of((double)f->size, (double)f->lmc_bytes));
                        gp_num(g, ratio_of((double)f->size, f->floor_bits / 8));
                        fputc('\n', g);
                    }
                fputs("EOD\n", g);
            }
            fputs("plot ", g);
            for (size_t k = 0; k < nk; k++) {
                char* pn = plot_name(keys[k]);
                fprintf(g, "%s$d%zu using 1:2 with linespoints lw 2 pt 7 lc %zu title '%s', $d%zu using 1:3 with lines dt 2 lc %zu notitle",
                        k ? ", " : "", k, k + 1, pn, k, k + 1);
                free(pn);
            }
            fputs("\n", g);
            fclose(g);
            if (plot_one(dir, "time-files", &count)) rc = -1;
        }
    }
    free(keys);
    if (rc == 0 && !o.quiet && o.verbose) fprintf(stderr, "lmc analyze: %d figures in %s\n", count, dir);
    return rc;
}

/*-************************************************************
 * Command
 **************************************************************/
static void usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char* fmt, ...)
{
    va_list ap;
    fputs("lmc analyze: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'lmc analyze --help' for more information.\n", stderr);
    exit(1);
}

/* --name=VALUE or --name VALUE; NULL if a does not start with --name. */
static const char* opt_value(const char* a, const char* name, int argc, char** argv, int* i, int* matched)
{
    size_t n = strlen(name);
    *matched = 0;
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') { *matched = 1; return a + n + 1; }
    if (a[n] != 0) return NULL;
    *matched = 1;
    if (*i + 1 >= argc) usage_error("option '%s' needs a value", name);
    return argv[++*i];
}

static FILE* open_out(const char* p)
{
    if (!strcmp(p, "-")) return stdout;
    FILE* f = fopen(p, "w");
    if (!f) aerr("%s: %s", p, strerror(errno));
    return f;
}

int lmc_cmd_analyze(int argc, char** argv)
{
    const char** pos = (const char**)xcalloc((size_t)argc + 1, sizeof *pos);
    int npos = 0, failed = 0, opts_done = 0;
    memset(&o, 0, sizeof o);
    o.threads = 1;

    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v;
        int m;
        if (opts_done || a[0] != '-' || a[1] == 0) { pos[npos++] = a; continue; }
        if (!strcmp(a, "--")) { opts_done = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); free(pos); return 0; }
        else if (!strcmp(a, "--json")) o.json = "-";
        else if (!strncmp(a, "--json=", 7)) o.json = a + 7;
        else if (!strcmp(a, "--csv")) o.csv = "-";
        else if (!strncmp(a, "--csv=", 6)) o.csv = a + 6;
        else if (!strcmp(a, "--baselines")) o.baselines = 1;
        else if (!strcmp(a, "--brief")) o.brief = 1;
        else if (!strcmp(a, "--tensors")) o.tensors = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = 1;
        else if ((v = opt_value(a, "--ref", argc, argv, &i, &m)), m) o.ref = v;
        else if ((v = opt_value(a, "--plot", argc, argv, &i, &m)), m) o.plot = v;
        else if (!strcmp(a, "-r") || !strncmp(a, "-r", 2)) {
            if (a[2]) o.ref = a + 2;
            else if (i + 1 < argc) o.ref = argv[++i];
            else usage_error("option '-r' needs a value");
        }
        else if (!strncmp(a, "-T", 2)) {
            const char* t = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            char* end = NULL;
            long x = t ? strtol(t, &end, 10) : -1;
            if (!t || *end || x < 1 || x > LMC_THREADS_MAX) usage_error("-T needs a thread count from 1 to %d", LMC_THREADS_MAX);
            o.threads = (int)x;
        }
        else usage_error("unknown option '%s'", a);
    }
    if (npos == 0) usage_error("no checkpoint given");
    if (o.json && o.csv && !strcmp(o.json, "-") && !strcmp(o.csv, "-")) usage_error("--json and --csv cannot both go to stdout");
    if (o.plot) o.baselines = 1;
    int const table = !o.quiet && !(o.json && !strcmp(o.json, "-")) && !(o.csv && !strcmp(o.csv, "-"));

    ckpt* cs = NULL;
    size_t n = 0;
    ckpt refc;
    int have_refc = 0;
    int traj = 0;
    memset(&refc, 0, sizeof refc);

    if (npos == 1 && is_dir(pos[0]) && !o.ref) {
        if (ckpts_from_dir(pos[0], &cs, &n) != 0) { free(pos); return 1; }
        traj = n > 1;
    } else {
        cs = (ckpt*)xcalloc((size_t)npos, sizeof *cs);
        for (int i = 0; i < npos; i++) {
            if (ckpt_from_path(&cs[n], pos[i]) != 0) { ckpt_free(&cs[n]); failed = 1; break; }
            n++;
        }
        traj = n > 1;
        if (!failed && o.ref) {
            if (ckpt_from_path(&refc, o.ref) != 0) failed = 1;
            have_refc = 1;
        }
    }
    free(pos);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    for (size_t i = 0; i < n && !failed; i++) {
        cs[i].res = (file_res*)xcalloc(cs[i].nf, sizeof *cs[i].res);
        for (size_t j = 0; j < cs[i].nf; j++) {
            const char* refpath = NULL;
            if (i > 0) refpath = find_key(&cs[i - 1], cs[i].f[j].key);
            else if (have_refc) {
                /* a single file against a single file: whatever their names */
                refpath = (refc.nf == 1 && cs[i].nf == 1) ? refc.f[0].path : find_key(&refc, cs[i].f[j].key);
                if (!refpath) aerr("warning: no reference for %s in %s", cs[i].f[j].key, o.ref);
            }
            if (analyze_file(&cs[i].res[j], cs[i].f[j].path, refpath, cs[i].f[j].key) != 0) failed = 1;
        }
    }

    if (!failed) {
        if (table) {
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < cs[i].nf; j++) print_file(&cs[i], &cs[i].res[j], traj);
            if (traj) print_trajectory(cs, n);
        }
        if (o.json) {
            FILE* f = open_out(o.json);
            if (!f) failed = 1;
            else {
                json_write(f, cs, n);
                if (f != stdout && fclose(f) != 0) { aerr("%s: %s", o.json, strerror(errno)); failed = 1; }
            }
        }
        if (o.csv) {
            FILE* f = open_out(o.csv);
            if (!f) failed = 1;
            else {
                csv_write(f, cs, n);
                if (f != stdout && fclose(f) != 0) { aerr("%s: %s", o.csv, strerror(errno)); failed = 1; }
            }
        }
        if (!failed && o.plot && plots_write(o.plot, cs, n) != 0) failed = 1;
    }

    for (size_t i = 0; i < n; i++) ckpt_free(&cs[i]);
    free(cs);
    if (have_refc) ckpt_free(&refc);
    if (fflush(stdout) != 0) { aerr("stdout: write error: %s", strerror(errno)); failed = 1; }
    return failed ? 1 : 0;
}
