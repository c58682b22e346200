/* floor.c - the order-0 entropy floor of the LMC coder on a file (or a delta):
 * the file is mapped to tensors exactly as the encoder does (safetensors
 * names, widths, XOR against the matched reference tensor), byte-grouped,
 * cut in 64 KiB blocks per stream, and the empirical order-0 entropy of each
 * block is summed. Prints floor bytes, lmc bytes and their quotient.
 * Usage: floor FILE [REF] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lmc.h"
#include "segments.h"
#include "group.h"

static unsigned char* slurp(const char* p, size_t* n)
{
    FILE* f = fopen(p, "rb");
    if (!f) { perror(p); exit(1); }
    fseek(f, 0, SEEK_END); *n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char* b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) { perror(p); exit(1); }
    fclose(f);
    return b;
}

static double block_entropy_bytes(const unsigned char* s, size_t m)
{
    unsigned h[256] = { 0 };
    for (size_t i = 0; i < m; i++) h[s[i]]++;
    double bits = 0;
    for (int k = 0; k < 256; k++) if (h[k]) bits -= h[k] * log2((double)h[k] / m);
    return bits / 8;
}

int main(int argc, char** argv)
{
    if (argc < 2) { fprintf(stderr, "usage: floor FILE [REF]\n"); return 1; }
    size_t n, rn = 0;
    unsigned char* a = slurp(argv[1], &n);
    unsigned char* r = argc > 2 ? slurp(argv[2], &rn) : NULL;
    lmc_segs segs; memset(&segs, 0, sizeof(segs));
    lmc_segs_build(&segs, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, a, n, n, r, rn);
    unsigned char* g = malloc(n + 8);
    double floor_b = 0;
    for (size_t i = 0; i < segs.n; i++) {
        const lmc_seg* s = &segs.v[i];
        if (s->off >= n) break;
        size_t len = (size_t)(s->len < n - s->off ? s->len : n - s->off);
        size_t w = s->width, nv = len / w;
        lmc_group(g, a + s->off, s->xor_ref ? r + s->ref_off : NULL, nv, (unsigned)w, 0);
        for (size_t k = 0; k < w; k++)
            for (size_t b = 0; b < nv; b += 65536)
                floor_b += block_entropy_bytes(g + k * nv + b, nv - b < 65536 ? nv - b : 65536);
        floor_b += len % w;
    }
    lmc_cctx* c = lmc_cctx_create();
    if (r) lmc_cctx_set_ref(c, r, rn);
    size_t cap = lmc_compress_bound(n);
    unsigned char* z = malloc(cap);
    size_t zs = lmc_compress(c, z, cap, a, n);
    if (lmc_is_error(zs)) { fprintf(stderr, "compress: %s\n", lmc_error_name(zs)); return 1; }
    printf("%s%s%s: %zu bytes, floor %.0f (%.4f), lmc %zu (%.4f), lmc/floor %.4f\n", argv[1], r ? " vs " : "", r ? argv[2] : "",
           n, floor_b, floor_b / n, zs, (double)zs / n, zs / floor_b);
    return 0;
}
