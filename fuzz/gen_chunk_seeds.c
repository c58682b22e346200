/*
 * gen_chunk_seeds.c - writes seeds for fuzz_chunk: the first chunk payload
 * of frames that lmc_compress makes of raw bf16 and fp32 values against
 * fuzz_chunk's reference (dense deltas of one and of two wide REFCTX blocks
 * with a short one, sparse deltas of three blocks, fp32, and a keyframe of
 * byte-grouped blocks), each behind fuzz_chunk's 4-byte prefix. Payloads
 * stay under 64 KiB, the fuzzer's input limit (fuzz/run.sh).
 *
 *   gcc -O1 -Iinclude -Ilib/common -Ilib/decode -Ilib \
 *       fuzz/gen_chunk_seeds.c fuzz/fuzz_chunk.c liblmc.a -ljansson -lpthread -lm \
 *       -o build/gen_chunk_seeds && build/gen_chunk_seeds fuzz/corpus/chunk
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "lmc.h"

void lmc_fuzz_chunk_ref(uint8_t* ref, size_t n);

static uint32_t g_x = 88172645u;
static uint32_t next(void) { g_x ^= g_x << 13; g_x ^= g_x >> 17; g_x ^= g_x << 5; return g_x; }

/* n values of w bytes: the reference's moved by -k..k units in the last
 * place, one in every `every` (1: all), or random where k is 0 */
static int write_seed(const char* dir, const char* name, unsigned w, size_t n, unsigned k, unsigned every,
                      int with_ref, int hashed)
{
    size_t const bytes = n * w;
    uint8_t* const ref = (uint8_t*)malloc(bytes);
    uint8_t* const cur = (uint8_t*)malloc(bytes);
    size_t const cap = lmc_compress_bound(bytes);
    uint8_t* const frame = (uint8_t*)malloc(cap);
    if (!ref || !cur || !frame) return 1;
    lmc_fuzz_chunk_ref(ref, bytes);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = 0;
        memcpy(&v, ref + i * w, w);
        if (!k) v = next();
        else if (next() % every == 0) v += next() % (2 * k + 1) - k;
        memcpy(cur + i * w, &v, w);
    }
    lmc_cctx* const c = lmc_cctx_create();
    if (!c || lmc_is_error(lmc_cctx_set_param(c, LMC_P_FORMAT, LMC_FORMAT_RAW))
        || lmc_is_error(lmc_cctx_set_param(c, LMC_P_DTYPE, w == 2 ? LMC_DTYPE_BF16 : LMC_DTYPE_F32))
        || (with_ref && lmc_is_error(lmc_cctx_set_ref(c, ref, bytes))))
        return 1;
    size_t const fs = lmc_compress(c, frame, cap, cur, bytes);
    lmc_cctx_free(c);
    if (lmc_is_error(fs) || fs < LMC_HDR_SIZE + LMC_CHUNK_HDR_SIZE) return 1;
    const uint8_t* const ch = frame + LMC_HDR_SIZE;
    uint32_t const content = (uint32_t)ch[0] | (uint32_t)ch[1] << 8 | (uint32_t)ch[2] << 16 | (uint32_t)ch[3] << 24;
    uint32_t const ps = (uint32_t)ch[4] | (uint32_t)ch[5] << 8 | (uint32_t)ch[6] << 16 | (uint32_t)ch[7] << 24;
    if (ps > 65532) { fprintf(stderr, "%s: payload of %u bytes, over the fuzzer's limit\n", name, ps); return 1; }
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE* const f = fopen(path, "wb");
    uint8_t const pre[4] = { (uint8_t)(with_ref | hashed << 1), (uint8_t)content, (uint8_t)(content >> 8),
                             (uint8_t)(content >> 16) };
    if (!f || fwrite(pre, 1, 4, f) != 4 || fwrite(ch + LMC_CHUNK_HDR_SIZE, 1, ps, f) != ps || fclose(f) != 0) return 1;
    printf("%s: %u content bytes, %u payload bytes\n", name, content, ps);
    free(ref); free(cur); free(frame);
    return 0;
}

int main(int argc, char** argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const char* const d = argv[1];
    int bad = 0;
    bad |= write_seed(d, "bf16_dense", 2, 30000, 3, 1, 1, 1);
    bad |= write_seed(d, "bf16_two_wide_and_short", 2, 2 * 65536 + 3000, 1, 2, 1, 0);
    bad |= write_seed(d, "bf16_sparse_three", 2, 2 * 65536 + 20000, 2, 60, 1, 1);
    bad |= write_seed(d, "f32_dense", 4, 9000, 7, 1, 1, 0);
    bad |= write_seed(d, "bf16_keyframe", 2, 20000, 3, 1, 0, 1);
    bad |= write_seed(d, "bf16_unrelated", 2, 12000, 0, 1, 1, 0);
    return bad;
}
