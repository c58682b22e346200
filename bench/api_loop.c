/* api_loop.c - times lmc_compress or lmc_decompress of one file against a
 * reference, in memory, as a library user calls them; prints the best of N
 * runs (the 2-core VMs this project runs on have slow minutes, and the best
 * of many runs moves less than a median when two builds are alternated).
 *
 *   gcc -O2 -Iinclude bench/api_loop.c liblmc.a -ljansson -lpthread -lm -o build/bench/api_loop
 *   build/bench/api_loop NEW REF c|d [runs [threads]]     (default 30 runs, 1 thread)
 *   OUT=frame.lmc build/bench/api_loop NEW REF c           (also writes the frame)
 *   build/bench/api_loop NEW none c|d ...                   (no reference: a keyframe)
 *   DTYPE=bf16 build/bench/api_loop NEW.raw REF.raw c       (raw input of that dtype: bf16, f16, f32)
 *   BALANCE=0 build/bench/api_loop ...                      (chunks of exactly 1 MiB: LMC_P_CHUNK_BALANCE)
 */
#include "lmc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void* slurp(const char* path, size_t* n)
{
    FILE* const f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long const size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* const b = malloc(size > 0 ? (size_t)size : 1);
    if (!b || fread(b, 1, (size_t)size, f) != (size_t)size) { fprintf(stderr, "%s: read failed\n", path); exit(2); }
    fclose(f);
    *n = (size_t)size;
    return b;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv)
{
    if (argc < 4 || (strcmp(argv[3], "c") && strcmp(argv[3], "d"))) {
        fprintf(stderr, "usage: %s NEW REF c|d [runs [threads]]\n", argv[0]);
        return 2;
    }
    int const decode = !strcmp(argv[3], "d");
    int const runs = argc > 4 ? atoi(argv[4]) : 30;
    int const threads = argc > 5 ? atoi(argv[5]) : 1;
    size_t n, rn;
    void* const src = slurp(argv[1], &n);
    int const keyframe = !strcmp(argv[2], "none");
    void* const ref = keyframe ? NULL : slurp(argv[2], &rn);
    size_t const cap = lmc_compress_bound(n);
    void* const frame = malloc(cap);
    void* const back = malloc(n ? n : 1);
    lmc_cctx* const c = lmc_cctx_create();
    lmc_dctx* const d = lmc_dctx_create();
    if (!frame || !back || !c || !d) { fprintf(stderr, "out of memory\n"); return 2; }
    lmc_cctx_set_param(c, LMC_P_THREADS, threads);
    const char* const bal = getenv("BALANCE");   /* LMC_P_CHUNK_BALANCE, for A/B runs */
    if (bal) lmc_cctx_set_param(c, LMC_P_CHUNK_BALANCE, atoi(bal));
    const char* const cm = getenv("CODERS");   /* LMC_P_CODERS mask, e.g. 0x7f without ANS1 */
    if (cm) lmc_cctx_set_param(c, LMC_P_CODERS, strtoll(cm, NULL, 0));
    const char* const dt = getenv("DTYPE");
    if (dt) {
        int const t = !strcmp(dt, "bf16") ? LMC_DTYPE_BF16 : !strcmp(dt, "f16") ? LMC_DTYPE_F16 : !strcmp(dt, "f32") ? LMC_DTYPE_F32 : -1;
        if (t < 0) { fprintf(stderr, "DTYPE: bf16, f16 or f32\n"); return 2; }
        lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW);
        lmc_cctx_set_param(c, LMC_P_DTYPE, t);
    }
    lmc_dctx_set_param(d, LMC_D_THREADS, threads);
    uint64_t const rh = keyframe ? 0 : lmc_hash64(ref, rn);
    if (!keyframe) lmc_cctx_set_ref_hashed(c, ref, rn, rh);
    size_t z = lmc_compress(c, frame, cap, src, n);
    if (lmc_is_error(z)) { fprintf(stderr, "compress: %s\n", lmc_error_name(z)); return 1; }
    double best = 1e30;
    for (int i = 0; i < runs; i++) {
        double const t0 = now();
        if (decode) {
            if (!keyframe) lmc_dctx_set_ref_hashed(d, ref, rn, rh);
            size_t const r = lmc_decompress(d, back, n, frame, z);
            if (r != n) { fprintf(stderr, "decompress: %s\n", lmc_is_error(r) ? lmc_error_name(r) : "wrong size"); return 1; }
        } else {
            if (!keyframe) lmc_cctx_set_ref_hashed(c, ref, rn, rh);
            z = lmc_compress(c, frame, cap, src, n);
            if (lmc_is_error(z)) { fprintf(stderr, "compress: %s\n", lmc_error_name(z)); return 1; }
        }
        double const t = now() - t0;
        if (t < best) best = t;
    }
    if (decode && memcmp(back, src, n)) { fprintf(stderr, "round trip differs\n"); return 1; }
    const char* const out = getenv("OUT");
    if (out) {
        FILE* const f = fopen(out, "wb");
        if (!f || fwrite(frame, 1, z, f) != z || fclose(f)) { perror(out); return 2; }
    }
    printf("%s: %zu -> %zu, %s best of %d: %.1f MB/s (%d thread%s)\n", argv[1], n, z, decode ? "decompress" : "compress",
           runs, (double)n / best / 1e6, threads, threads == 1 ? "" : "s");
    lmc_cctx_free(c);
    lmc_dctx_free(d);
    free(frame); free(back); free(src); free(ref);
    return 0;
}
