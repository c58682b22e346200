/* bgzstd.c - "byte-grouped + zstd" baseline for bench/run.sh.
 * Splits FILE into W byte streams (byte k of every W-byte value goes to stream
 * k; the whole file is treated as values, header included; the n % W tail
 * bytes are stored raw), compresses each stream with zstd at LEVEL, in memory.
 * THREADS > 1 sets ZSTD_c_nbWorkers (zstd's own multi-threaded compression;
 * zstd decompression is single-threaded, so decompression always uses 1).
 * Timing: one warm-up, then the median of REPS wall-clock runs per direction.
 * Size counted: sum of zstd frames + 8 bytes per stream (length) + tail.
 * Every decompression is checked byte for byte against the input.
 * Usage: bgzstd FILE W THREADS [LEVEL=1] [REPS=5]
 * Output: "IN OUT COMP_MBps DECOMP_MBps"; exit 2 if THREADS>1 unsupported. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_util.h"
#include <zstd.h>

int main(int argc, char** argv)
{
    if (argc < 4) { fprintf(stderr, "usage: bgzstd FILE W THREADS [LEVEL] [REPS]\n"); return 1; }
    size_t n;
    unsigned char* in = slurp(argv[1], &n);
    size_t w = (size_t)atoi(argv[2]);
    int threads = atoi(argv[3]);
    int level = argc > 4 ? atoi(argv[4]) : 1;
    int reps = argc > 5 ? atoi(argv[5]) : 5;
    if (w < 1 || w > 16 || reps < 1 || reps > 100) { fprintf(stderr, "bgzstd: bad args\n"); return 1; }
    size_t nv = n / w, tail = n - nv * w;

    ZSTD_CCtx* cc = ZSTD_createCCtx();
    ZSTD_DCtx* dc = ZSTD_createDCtx();
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level))) return 1;
    if (threads > 1 && ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, threads))) {
        fprintf(stderr, "bgzstd: libzstd without multi-threading\n");
        return 2;
    }

    unsigned char* g = malloc(n + 1);            /* grouped streams, back to back */
    unsigned char* back = malloc(n + 1);         /* decoded streams */
    unsigned char* out = malloc(n + 1);          /* ungrouped result */
    size_t cap = ZSTD_compressBound(nv) ;
    unsigned char** z = malloc(w * sizeof *z);
    size_t* zs = malloc(w * sizeof *zs);
    for (size_t k = 0; k < w; k++) z[k] = malloc(cap);
    double* tc = malloc((reps + 1) * sizeof *tc);
    double* td = malloc((reps + 1) * sizeof *td);
    size_t total = 0;

    for (int r = 0; r <= reps; r++) {            /* r == 0 is the warm-up */
        double t0 = now();
        for (size_t i = 0; i < nv; i++)
            for (size_t k = 0; k < w; k++) g[k * nv + i] = in[i * w + k];
        for (size_t k = 0; k < w; k++) {
            zs[k] = ZSTD_compress2(cc, z[k], cap, g + k * nv, nv);
            if (ZSTD_isError(zs[k])) { fprintf(stderr, "compress: %s\n", ZSTD_getErrorName(zs[k])); return 1; }
        }
        double t1 = now();
        total = tail + 8 * w;
        for (size_t k = 0; k < w; k++) total += zs[k];

        memset(out, 0, n);
        double t2 = now();
        for (size_t k = 0; k < w; k++) {
            size_t d = ZSTD_decompressDCtx(dc, back + k * nv, nv, z[k], zs[k]);
            if (ZSTD_isError(d) || d != nv) { fprintf(stderr, "decompress failed\n"); return 1; }
        }
        for (size_t i = 0; i < nv; i++)
            for (size_t k = 0; k < w; k++) out[i * w + k] = back[k * nv + i];
        memcpy(out + nv * w, in + nv * w, tail);  /* tail stored raw */
        double t3 = now();
        if (memcmp(out, in, n) != 0) { fprintf(stderr, "bgzstd: ROUND TRIP MISMATCH\n"); return 1; }
        tc[r] = t1 - t0; td[r] = t3 - t2;
    }
    qsort(tc + 1, reps, sizeof *tc, cmpd);
    qsort(td + 1, reps, sizeof *td, cmpd);
    double mc = reps % 2 ? tc[1 + reps / 2] : (tc[reps / 2] + tc[reps / 2 + 1]) / 2;
    double md = reps % 2 ? td[1 + reps / 2] : (td[reps / 2] + td[reps / 2 + 1]) / 2;
    printf("%zu %zu %.2f %.2f\n", n, total, n / mc / 1e6, n / md / 1e6);
    return 0;
}
