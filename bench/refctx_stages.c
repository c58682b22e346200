/* refctx_stages.c - where REFCTX time goes: per-stage single-thread speed of
 * the reference-conditioned coder on the float tensors of a real checkpoint
 * pair, in memory, without framing, checksums or threads.
 *
 * Usage: refctx_stages NEW.safetensors REF.safetensors [iterations [CPU]]
 * CPU: all (default), avx512 (no VBMI), avx2 (no AVX-512), bmi2 or none: the
 * instruction sets the coder may use, to time the loops older CPUs run.
 * Every 64 Ki-value block of every bf16/f16/f32 tensor with a same-named,
 * same-size reference tensor is timed through:
 *   prepare  tokens, contexts, counts, context merging, tables (encoder pass 1)
 *   encode   rANS (backwards) and raw bits (encoder pass 2)
 *   decode   tokens, then raw bits and values (both decoder passes), wide
 *            blocks two at a time as a pair, as lmc's chunk decoder pairs
 *            them (here across the whole file, not within 1 MiB chunks)
 *   decode 1 the same, one block at a time
 * and the round trip is checked. MB/s = tensor bytes / median seconds. */
#include <string.h>
#include "bench_util.h"
#include "lmc.h"
#include "refctx_enc.h"
#include "refctx_dec.h"
#include "mem.h"

typedef struct { const uint8_t* cur; const uint8_t* ref; size_t m; unsigned w; } vblock;

int main(int argc, char** argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s NEW.safetensors REF.safetensors [iterations [all|permutes|avx512|avx2|bmi2|none]]\n", argv[0]); return 2; }
    int const iters = argc > 3 ? atoi(argv[3]) : 5;
    if (argc > 4) {
        const char* const c = argv[4];
        if (!strcmp(c, "avx512")) lmc_cpu_restrict(LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2 | LMC_CPU_AVX512);
        else if (!strcmp(c, "avx2")) lmc_cpu_restrict(LMC_CPU_AVX2 | LMC_CPU_BMI1 | LMC_CPU_BMI2);
        else if (!strcmp(c, "bmi2")) lmc_cpu_restrict(LMC_CPU_BMI2);
        else if (!strcmp(c, "none")) lmc_cpu_restrict(0);
        else if (!strcmp(c, "permutes")) lmc_cpu_restrict(~LMC_CPU_FASTGATHER);   /* VBMI lookups on Intel too */
        else if (strcmp(c, "all")) { fprintf(stderr, "unknown CPU set %s\n", c); return 2; }
    }
    size_t nn, nr;
    unsigned char* const nb = slurp(argv[1], &nn);
    unsigned char* const rb = slurp(argv[2], &nr);
    lmc_tensor_map *mn, *mr;
    if (lmc_is_error(lmc_tensor_map_safetensors(&mn, nb, nn, nn)) || lmc_is_error(lmc_tensor_map_safetensors(&mr, rb, nr, nr))) {
        fprintf(stderr, "not safetensors\n");
        return 1;
    }
    size_t cap = 1024, nblk = 0;
    vblock* blk = malloc(cap * sizeof(*blk));
    uint64_t bytes = 0;
    for (size_t i = 0; i < lmc_tensor_map_count(mn); i++) {
        const lmc_tensor_info* t = lmc_tensor_map_get(mn, i);
        if (t->dtype != LMC_DTYPE_BF16 && t->dtype != LMC_DTYPE_F16 && t->dtype != LMC_DTYPE_F32) continue;
        long const j = lmc_tensor_map_find(mr, t->name, t->name_len);
        if (j < 0) continue;
        const lmc_tensor_info* u = lmc_tensor_map_get(mr, (size_t)j);
        if (u->dtype != t->dtype || u->size != t->size) continue;
        size_t const n = t->size / t->width;
        for (size_t b = 0; b < n; b += LMC_VBLOCK_MAX) {
            if (nblk == cap) blk = realloc(blk, (cap *= 2) * sizeof(*blk));
            size_t const m = n - b < LMC_VBLOCK_MAX ? n - b : LMC_VBLOCK_MAX;
            blk[nblk++] = (vblock){ nb + t->offset + b * t->width, rb + u->offset + b * t->width, m, t->width };
            bytes += m * t->width;
        }
    }
    lmc_refctx_ws* ews = calloc(1, sizeof(*ews));
    lmc_refctx_dws* dws = calloc(1, sizeof(*dws));
    lmc_refctx_dws* dws2 = calloc(1, sizeof(*dws2));
    uint8_t** enc = malloc(nblk * sizeof(*enc));
    size_t* esz = malloc(nblk * sizeof(*esz));
    for (size_t k = 0; k < nblk; k++) enc[k] = malloc(blk[k].m * blk[k].w * 2 + 4096);
    uint8_t* out = malloc(8 * LMC_VBLOCK_MAX);
    double* tp = malloc(iters * sizeof(double));
    double* te = malloc(iters * sizeof(double));
    double* td = malloc(iters * sizeof(double));
    double* t1 = malloc(iters * sizeof(double));
    uint64_t coded = 0;
    for (int it = 0; it < iters; it++) {
        double a = 0, e = 0, d = 0;
        coded = 0;
        for (size_t k = 0; k < nblk; k++) {
            double const t0 = now();
            (void)lmc_refctx_prepare(ews, blk[k].cur, blk[k].ref, blk[k].m, blk[k].w);
            double const t1 = now();
            esz[k] = lmc_refctx_encode(ews, enc[k], blk[k].m * blk[k].w * 2 + 4000);
            double const t2 = now();
            a += t1 - t0; e += t2 - t1;
            coded += esz[k];
        }
        /* as lmc's chunk decoder pairs them: a wide block waits for the
         * next wide one of its width; narrow ones decode at once */
        long held = -1;
        for (size_t k = 0; k <= nblk; k++) {
            int const wide = k < nblk && (enc[k][4] & LMC_REFCTX_WIDE);
            if (k < nblk && !wide) {
                double const t0 = now();
                size_t const r = lmc_refctx_decode(dws2, out + 4 * LMC_VBLOCK_MAX, blk[k].m, blk[k].w, blk[k].ref,
                                                   enc[k] + 4, esz[k] - 4);
                d += now() - t0;
                if (r != 0 || memcmp(out + 4 * LMC_VBLOCK_MAX, blk[k].cur, blk[k].m * blk[k].w)) {
                    fprintf(stderr, "round trip failed\n");
                    return 1;
                }
                continue;
            }
            if (held >= 0 && k < nblk && blk[held].w == blk[k].w) {
                size_t const h = (size_t)held;
                lmc_refctx_job const a = { out, blk[h].ref, enc[h] + 4, blk[h].m, esz[h] - 4 };
                lmc_refctx_job const b = { out + 4 * LMC_VBLOCK_MAX, blk[k].ref, enc[k] + 4, blk[k].m, esz[k] - 4 };
                double const t0 = now();
                size_t const r = lmc_refctx_decode_pair(dws, dws2, blk[k].w, &a, &b);
                d += now() - t0;
                if (r != 0 || memcmp(out, blk[h].cur, blk[h].m * blk[h].w)
                    || memcmp(out + 4 * LMC_VBLOCK_MAX, blk[k].cur, blk[k].m * blk[k].w)) {
                    fprintf(stderr, "round trip failed\n");
                    return 1;
                }
                held = -1;
                continue;
            }
            if (held >= 0) {   /* a held block with no partner of its width */
                size_t const h = (size_t)held;
                double const t0 = now();
                size_t const r = lmc_refctx_decode(dws, out, blk[h].m, blk[h].w, blk[h].ref, enc[h] + 4, esz[h] - 4);
                d += now() - t0;
                if (r != 0 || memcmp(out, blk[h].cur, blk[h].m * blk[h].w)) { fprintf(stderr, "round trip failed\n"); return 1; }
            }
            held = k < nblk ? (long)k : -1;
        }
        double d1 = 0;
        for (size_t k = 0; k < nblk; k++) {
            double const t0 = now();
            size_t const r = lmc_refctx_decode(dws, out, blk[k].m, blk[k].w, blk[k].ref, enc[k] + 4, esz[k] - 4);
            d1 += now() - t0;
            if (r != 0 || memcmp(out, blk[k].cur, blk[k].m * blk[k].w)) { fprintf(stderr, "round trip failed\n"); return 1; }
        }
        tp[it] = a; te[it] = e; td[it] = d; t1[it] = d1;
    }
    qsort(tp, iters, sizeof(double), cmpd);
    qsort(te, iters, sizeof(double), cmpd);
    qsort(td, iters, sizeof(double), cmpd);
    qsort(t1, iters, sizeof(double), cmpd);
    double const mb = (double)bytes / 1e6;
    printf("%s: %zu blocks, %.1f MB of float tensors, REFCTX %.4f of them\n", argv[1], nblk, mb, (double)coded / (double)bytes);
    printf("  prepare %7.1f MB/s\n  encode  %7.1f MB/s\n  compress (both) %7.1f MB/s\n  decode  %7.1f MB/s\n"
           "  decode 1 %6.1f MB/s (one block at a time)   (median of %d, 1 thread)\n",
           mb / tp[iters / 2], mb / te[iters / 2], mb / (tp[iters / 2] + te[iters / 2]), mb / td[iters / 2],
           mb / t1[iters / 2], iters);
    return 0;
}
