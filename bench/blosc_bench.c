/* blosc_bench.c - c-blosc (Debian libblosc1) baseline for bench/run.sh.
 * Compresses FILE as one blosc buffer: typesize TS (dtype width), BLOSC_SHUFFLE,
 * compressor CNAME (default "zstd") at CLEVEL, automatic blocksize, NTHREADS,
 * in memory. One warm-up, then the median of REPS runs per direction; every
 * decompression is checked byte for byte.
 * Usage: blosc_bench FILE TS NTHREADS [CLEVEL=1] [REPS=5] [CNAME=zstd]
 * Output: "IN OUT COMP_MBps DECOMP_MBps" */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_util.h"
#include <blosc.h>

int main(int argc, char** argv)
{
    if (argc < 4) { fprintf(stderr, "usage: blosc_bench FILE TS NTHREADS [CLEVEL] [REPS] [CNAME]\n"); return 1; }
    size_t n;
    unsigned char* in = slurp(argv[1], &n);
    int ts = atoi(argv[2]), nt = atoi(argv[3]);
    int clevel = argc > 4 ? atoi(argv[4]) : 1;
    int reps = argc > 5 ? atoi(argv[5]) : 5;
    const char* cname = argc > 6 ? argv[6] : "zstd";
    if (reps < 1 || reps > 100 || n > (size_t)BLOSC_MAX_BUFFERSIZE) { fprintf(stderr, "blosc_bench: bad args/size\n"); return 1; }
    if (!strstr(blosc_list_compressors(), cname)) { fprintf(stderr, "blosc_bench: no %s in %s\n", cname, blosc_list_compressors()); return 1; }
    blosc_init();
    size_t cap = n + BLOSC_MAX_OVERHEAD;
    unsigned char* z = malloc(cap);
    unsigned char* out = malloc(n + 1);
    double* tc = malloc((reps + 1) * sizeof *tc);
    double* td = malloc((reps + 1) * sizeof *td);
    int zs = 0;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        zs = blosc_compress_ctx(clevel, BLOSC_SHUFFLE, (size_t)ts, n, in, z, cap, cname, 0, nt);
        double t1 = now();
        if (zs <= 0) { fprintf(stderr, "blosc compress failed: %d\n", zs); return 1; }
        memset(out, 0, n);
        double t2 = now();
        int d = blosc_decompress_ctx(z, out, n, nt);
        double t3 = now();
        if (d < 0 || (size_t)d != n || memcmp(out, in, n) != 0) { fprintf(stderr, "blosc_bench: ROUND TRIP MISMATCH\n"); return 1; }
        tc[r] = t1 - t0; td[r] = t3 - t2;
    }
    qsort(tc + 1, reps, sizeof *tc, cmpd);
    qsort(td + 1, reps, sizeof *td, cmpd);
    double mc = reps % 2 ? tc[1 + reps / 2] : (tc[reps / 2] + tc[reps / 2 + 1]) / 2;
    double md = reps % 2 ? td[1 + reps / 2] : (td[reps / 2] + td[reps / 2 + 1]) / 2;
    printf("%zu %d %.2f %.2f\n", n, zs, n / mc / 1e6, n / md / 1e6);
    blosc_destroy();
    return 0;
}
