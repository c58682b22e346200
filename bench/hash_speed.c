/* hash_speed.c - XXH3-64 speed as the coder uses it on one thread, both
 * ways the format has had: format 5 hashes each 1 MiB chunk once and then
 * the chunks' hashes (8 bytes each); formats 1-4 also fed every byte, in
 * the same 32 KiB slices, into a running hash of the whole input. Build it
 * once per vector width to compare XXH3's loops (the hash values are the
 * same):
 *
 *   gcc -O2 -mavx2 bench/hash_speed.c -o build/bench/hash_avx2
 *   gcc -O2 -mavx512f -mavx2 bench/hash_speed.c -o build/bench/hash_avx512
 *   build/bench/hash_avx2 [bytes]        (default 6651360: the bf16 checkpoint's size)
 */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv)
{
    size_t const n = argc > 1 ? (size_t)atol(argv[1]) : 6651360;
    size_t const slice = (size_t)32 << 10, chunk = (size_t)1 << 20;
    unsigned char* const b = (unsigned char*)malloc(n ? n : 1);
    if (!b) return 2;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7 + (i >> 9));
    for (int whole = 0; whole < 2; whole++) {
        double best = 1e30;
        XXH64_hash_t first = 0;
        for (int it = 0; it < 50; it++) {
            double const t0 = now();
            XXH3_state_t own, all;
            XXH3_64bits_reset(&all);
            for (size_t o = 0; o < n; o += chunk) {
                size_t const end = o + chunk < n ? o + chunk : n;
                XXH64_hash_t hc;
                if (whole) {
                    XXH3_64bits_reset(&own);
                    for (size_t q = o; q < end; q += slice) {
                        size_t const k = end - q < slice ? end - q : slice;
                        XXH3_64bits_update(&own, b + q, k);
                        XXH3_64bits_update(&all, b + q, k);
                    }
                    hc = XXH3_64bits_digest(&own);
                } else {
                    hc = XXH3_64bits(b + o, end - o);
                    unsigned char le[8];
                    for (int k = 0; k < 8; k++) le[k] = (unsigned char)(hc >> (8 * k));
                    XXH3_64bits_update(&all, le, 8);
                }
                (void)hc;
            }
            XXH64_hash_t const h = XXH3_64bits_digest(&all);
            double const t = now() - t0;
            if (it == 0) first = h;
            else if (h != first) { fprintf(stderr, "hash changed between runs\n"); return 1; }
            if (t < best) best = t;
        }
        printf("%zu bytes, %s: %.2f GB/s of input, best of 50; frame hash %016llx\n", n,
               whole ? "formats 1-4 (chunk hashes and the whole input's)" : "format 5 (chunk hashes, then theirs)",
               (double)n / best / 1e9, (unsigned long long)first);
    }
    free(b);
    return 0;
}
