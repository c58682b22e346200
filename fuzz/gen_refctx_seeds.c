/*
 * gen_refctx_seeds.c - writes REFCTX seeds for fuzz_refctx that reach the
 * decoder's special loops: blocks large enough to be coded with 32 rANS
 * states (format 4: the wide loops, AVX-512 or four states at a time), and
 * sparse blocks (4 states, at most one word per 32 tokens: the loops with
 * renormalisation as a branch, alone and paired). The reference values are
 * fuzz_refctx's; each value moves by a few units in the last place, or
 * keeps its reference value (in a sparse seed, all but about one in 40).
 *
 *   gcc -O1 -Iinclude -Ilib/common -Ilib/encode -Ilib/decode -Ilib/container -Ilib \
 *       fuzz/gen_refctx_seeds.c fuzz/fuzz_refctx.c liblmc.a -ljansson -lpthread -lm \
 *       -o build/gen_refctx_seeds && build/gen_refctx_seeds fuzz/corpus/refctx
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refctx.h"
#include "refctx_enc.h"

void lmc_fuzz_refctx_ref(uint8_t* ref, size_t m, unsigned w);

static int write_seed(const char* dir, unsigned w, size_t m, int sparse, lmc_refctx_ws* ws)
{
    uint8_t* const ref = (uint8_t*)malloc(m * w);
    uint8_t* const cur = (uint8_t*)malloc(m * w);
    uint8_t* const out = (uint8_t*)malloc(3 + 4 * m * w + 4096);
    if (!ref || !cur || !out) return 1;
    lmc_fuzz_refctx_ref(ref, m, w);
    uint32_t x = 88675123u;
    for (size_t i = 0; i < m; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        uint32_t r = 0;
        memcpy(&r, ref + i * w, w);
        uint32_t const sign = w == 2 ? 0x8000u : 0x80000000u;
        int32_t d = (x % 4) ? (int32_t)((x >> 8) % (w == 2 ? 401 : 40001)) - (w == 2 ? 200 : 20000) : 0;
        if (sparse) d = (x >> 4) % 40 ? 0 : (int32_t)((x >> 12) % 7) - 3;
        uint32_t const c = (r & sign) | ((r & ~sign) + (uint32_t)d);
        memcpy(cur + i * w, &c, w);
    }
    (void)lmc_refctx_prepare(ws, cur, ref, m, w);
    size_t const z = lmc_refctx_encode(ws, out, 4 * m * w + 4096);
    if (z < 5) return 1;
    /* fuzz input: the width bit and m - 1, then the block after its kind and size */
    uint8_t const pre[3] = { (uint8_t)(w == 4), (uint8_t)((m - 1) & 0xFF), (uint8_t)((m - 1) >> 8) };
    int const wide = (out[4] & LMC_REFCTX_WIDE) != 0;
    char path[512];
    snprintf(path, sizeof(path), "%s/w%u_m%zu_%s", dir, w, m, sparse ? "sparse" : "wide");
    FILE* const f = fopen(path, "wb");
    if (!f || fwrite(pre, 1, 3, f) != 3 || fwrite(out + 4, 1, z - 4, f) != z - 4 || fclose(f)) return 1;
    printf("%s: %zu bytes, %s\n", path, 3 + z - 4, wide ? "32 states" : "4 states");
    free(ref); free(cur); free(out);
    return sparse ? wide || (z - 4) * 16 > m : !wide;
}

int main(int argc, char** argv)
{
    if (argc != 2) { fprintf(stderr, "usage: gen_refctx_seeds DIR\n"); return 2; }
    lmc_refctx_ws* const ws = (lmc_refctx_ws*)calloc(1, sizeof(*ws));
    if (!ws) return 1;
    int bad = write_seed(argv[1], 2, 40000, 0, ws) | write_seed(argv[1], 4, 24000, 0, ws)
            | write_seed(argv[1], 2, 40000, 1, ws) | write_seed(argv[1], 4, 24000, 1, ws);
    free(ws);
    return bad;
}
