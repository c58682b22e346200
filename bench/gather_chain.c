/* gather_chain.c - is the REFCTX token loop bound by its chain or by its
 * gathers? Times a stand-in for one round of the 32-state decoder (gather
 * the slot's table entry, multiply, renormalise) on 1, 2, 4 and 8
 * independent vectors of 16 states, and the same round with some gather
 * lanes masked off. If two vectors (one block) take much longer per vector
 * than four (two blocks interleaved), the round waits on its chain.
 *
 *   gcc -O2 bench/gather_chain.c -o build/bench/gather_chain && build/bench/gather_chain
 *
 * Needs AVX-512 (F, BW); prints ns per 16-lane round, best of 5. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TARGET __attribute__((target("avx512f,avx512bw"), noinline))

static uint32_t table[16 * 4096];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* nv vectors of states, each round: entry = table[x & 4095] (only the
 * lanes of `lanes`), x = f * (x >> 12) + (entry's slot offset), and a
 * renormalising shift where x fell below 2^16. */
TARGET static uint32_t rounds(int nv, __mmask16 lanes, long n)
{
    __m512i x[8];
    for (int v = 0; v < 8; v++) x[v] = _mm512_set1_epi32(70001 + 13 * v);
    __m512i const slot = _mm512_set1_epi32(4095), low = _mm512_set1_epi32(1 << 16), m12 = _mm512_set1_epi32(0xFFF);
    for (long r = 0; r < n; r++)
        for (int v = 0; v < nv; v++) {
            __m512i const i = _mm512_and_si512(x[v], slot);
            __m512i const e = _mm512_mask_i32gather_epi32(i, lanes, i, (const int*)table, 4);
            __m512i y = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(e, 19), _mm512_srli_epi32(x[v], 12)),
                                         _mm512_and_si512(_mm512_srli_epi32(e, 7), m12));
            __mmask16 const k = _mm512_cmplt_epu32_mask(y, low);
            x[v] = _mm512_mask_or_epi32(y, k, _mm512_slli_epi32(y, 16), _mm512_set1_epi32((int)(r & 0xFFFF)));
        }
    uint32_t acc = 0;
    for (int v = 0; v < 8; v++) acc += (uint32_t)_mm512_reduce_add_epi32(x[v]);
    return acc;
}

static void time_it(int nv, __mmask16 lanes)
{
    long const n = 8000000 / nv;
    double best = 1e9;
    uint32_t sink = 0;
    for (int t = 0; t < 5; t++) {
        double const t0 = now();
        sink += rounds(nv, lanes, n);
        double const s = now() - t0;
        if (s < best) best = s;
    }
    printf("%d vector%s, gather lanes %04x: %6.2f ns per 16-lane round  (%u)\n", nv, nv > 1 ? "s" : " ",
           (unsigned)lanes, best / ((double)n * nv) * 1e9, sink);
}

int main(void)
{
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) {
        fprintf(stderr, "gather_chain: needs AVX-512 F and BW\n");
        return 2;
    }
    srand(1);
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        table[i] = (uint32_t)(1 + rand() % 64) << 19 | (uint32_t)(rand() % 4096) << 7 | (uint32_t)(rand() % 33);
    for (int nv = 1; nv <= 8; nv *= 2) time_it(nv, 0xFFFF);
    time_it(8, 0x00FF);
    time_it(8, 0x0000);
    return 0;
}
