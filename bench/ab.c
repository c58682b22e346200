/* ab.c - the working tree's library against another build of it, in one
 * process, call by call: lmc_compress or lmc_decompress of one file, the
 * two builds taking turns (and which goes first alternating), so that the
 * box's slow and fast moments fall on both alike. Separate processes run
 * one after the other did not do: on the 2-core VM the speed of whole
 * runs moved by 20-30 % from minute to minute, and an A/A comparison of
 * one binary against a copy of itself came out 8 to 2 in 10 rounds. Here
 * an A/A run gives a median speed ratio of 0.997-1.003.
 *
 * The other build is a liblmc.a whose global symbols objcopy renamed to
 * old_*: bench/ab.sh makes it from a commit (HEAD by default) and builds
 * this program against both.
 *
 *   bench/ab.sh [-b COMMIT] NEW REF|none c|d [rounds [threads]]
 *
 * Prints each build's median and best MB/s and the median (and quartiles)
 * of the per-round ratio new / old of speeds: above 1, the working tree is
 * faster. Both builds must give the same frame (it is checked), and every
 * decompression the original bytes. */
#include "lmc.h"
#include <string.h>
#include "bench_util.h"

/* the other build, renamed */
lmc_cctx* old_lmc_cctx_create(void);
void old_lmc_cctx_free(lmc_cctx*);
size_t old_lmc_cctx_set_param(lmc_cctx*, lmc_cparam, long long);
size_t old_lmc_cctx_set_ref_hashed(lmc_cctx*, const void*, size_t, uint64_t);
size_t old_lmc_compress(lmc_cctx*, void*, size_t, const void*, size_t);
lmc_dctx* old_lmc_dctx_create(void);
void old_lmc_dctx_free(lmc_dctx*);
size_t old_lmc_dctx_set_param(lmc_dctx*, lmc_dparam, long long);
size_t old_lmc_dctx_set_ref_hashed(lmc_dctx*, const void*, size_t, uint64_t);
size_t old_lmc_decompress(lmc_dctx*, void*, size_t, const void*, size_t);

int main(int argc, char** argv)
{
    if (argc < 4 || (strcmp(argv[3], "c") && strcmp(argv[3], "d"))) {
        fprintf(stderr, "usage: %s NEW REF|none c|d [rounds [threads]]\n", argv[0]);
        return 2;
    }
    int const decode = !strcmp(argv[3], "d");
    int const rounds = argc > 4 ? atoi(argv[4]) : 200;
    int const threads = argc > 5 ? atoi(argv[5]) : 1;
    if (rounds < 4) { fprintf(stderr, "rounds: at least 4\n"); return 2; }
    size_t n, rn = 0;
    void* const src = slurp(argv[1], &n);
    int const keyframe = !strcmp(argv[2], "none");
    void* const ref = keyframe ? NULL : slurp(argv[2], &rn);
    uint64_t const rh = keyframe ? 0 : lmc_hash64(ref, rn);
    size_t const cap = lmc_compress_bound(n);
    void *const frame = malloc(cap), *const frame2 = malloc(cap), *const back = malloc(n ? n : 1);
    double *const t_old = malloc(sizeof(double) * (size_t)rounds), *const t_new = malloc(sizeof(double) * (size_t)rounds);
    double* const ratio = malloc(sizeof(double) * (size_t)rounds);
    lmc_cctx *const c = lmc_cctx_create(), *const oc = old_lmc_cctx_create();
    lmc_dctx *const d = lmc_dctx_create(), *const od = old_lmc_dctx_create();
    if (!frame || !frame2 || !back || !t_old || !t_new || !ratio || !c || !oc || !d || !od) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    lmc_cctx_set_param(c, LMC_P_THREADS, threads);
    old_lmc_cctx_set_param(oc, LMC_P_THREADS, threads);
    lmc_dctx_set_param(d, LMC_D_THREADS, threads);
    old_lmc_dctx_set_param(od, LMC_D_THREADS, threads);
    if (!keyframe) { lmc_cctx_set_ref_hashed(c, ref, rn, rh); old_lmc_cctx_set_ref_hashed(oc, ref, rn, rh); }
    size_t const z = lmc_compress(c, frame, cap, src, n);
    size_t const z2 = old_lmc_compress(oc, frame2, cap, src, n);
    if (lmc_is_error(z) || lmc_is_error(z2)) { fprintf(stderr, "compression failed\n"); return 1; }
    if (z != z2 || memcmp(frame, frame2, z)) fprintf(stderr, "note: the two builds give different frames (%zu, %zu bytes)\n", z, z2);
    for (int i = 0; i < rounds; i++)
        for (int k = 0; k < 2; k++) {
            int const old = k ^ (i & 1);
            size_t r;
            double const t0 = now();
            if (decode) {
                if (old) {
                    if (!keyframe) old_lmc_dctx_set_ref_hashed(od, ref, rn, rh);
                    r = old_lmc_decompress(od, back, n, frame2, z2);
                } else {
                    if (!keyframe) lmc_dctx_set_ref_hashed(d, ref, rn, rh);
                    r = lmc_decompress(d, back, n, frame, z);
                }
            } else if (old) {
                if (!keyframe) old_lmc_cctx_set_ref_hashed(oc, ref, rn, rh);
                r = old_lmc_compress(oc, frame2, cap, src, n);
            } else {
                if (!keyframe) lmc_cctx_set_ref_hashed(c, ref, rn, rh);
                r = lmc_compress(c, frame, cap, src, n);
            }
            double const t = now() - t0;
            if (lmc_is_error(r)) { fprintf(stderr, "%s build: %s\n", old ? "old" : "new", lmc_error_name(r)); return 1; }
            if (decode) {
                if (r != n || memcmp(back, src, n)) { fprintf(stderr, "%s build: round trip differs\n", old ? "old" : "new"); return 1; }
                memset(back, 0, n);   /* each run writes all of it again */
            }
            (old ? t_old : t_new)[i] = t;
        }
    for (int i = 0; i < rounds; i++) ratio[i] = t_old[i] / t_new[i];
    qsort(t_old, (size_t)rounds, sizeof(double), cmpd);
    qsort(t_new, (size_t)rounds, sizeof(double), cmpd);
    qsort(ratio, (size_t)rounds, sizeof(double), cmpd);
    double const mb = (double)n / 1e6;
    printf("%s, %s, %d thread%s, %d rounds: old %.0f MB/s (best %.0f), new %.0f MB/s (best %.0f); "
           "new / old per round %.3f (quartiles %.3f, %.3f)\n",
           argv[1], decode ? "decompress" : "compress", threads, threads == 1 ? "" : "s", rounds,
           mb / t_old[rounds / 2], mb / t_old[0], mb / t_new[rounds / 2], mb / t_new[0],
           ratio[rounds / 2], ratio[rounds / 4], ratio[3 * rounds / 4]);
    lmc_cctx_free(c); old_lmc_cctx_free(oc);
    lmc_dctx_free(d); old_lmc_dctx_free(od);
    free(src); free(ref); free(frame); free(frame2); free(back);
    free(t_old); free(t_new); free(ratio);
    return 0;
}
