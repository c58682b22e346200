/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header parser.
 *
 * The input is a whole file. Parsing runs twice: with the exact size (the
 * tiling must reach the end) and streaming (UINT64_MAX), since the two take
 * different paths through the end checks. Successful parses are checked for
 * the invariants the encoder relies on, so a wrong accept aborts like a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "container/safetensors.h"

static void check(const lmc_st_info* info, size_t size, uint64_t file_size)
{
    uint64_t pos = info->header_total;
    if (info->header_total < 10 || info->header_total > size) abort();
    for (size_t i = 0; i < info->count; i++) {
        const lmc_st_tensor* t = &info->tensors[i];
        if (t->begin != pos || t->end < t->begin) abort();
        if (t->ndim > LMC_ST_MAX_DIMS || strlen(t->name) != t->name_len) abort();
        if (t->width != 1 && t->width != 2 && t->width != 4 && t->width != 8) abort();
        pos = t->end;
        if (lmc_st_find(info, t->name, t->name_len) != (long)i) abort();
    }
    if (pos != info->data_end) abort();
    if (file_size != UINT64_MAX && pos != file_size) abort();
    for (size_t i = 0; i < info->count; i++)
        if (info->by_name[i] >= info->count) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    uint64_t ht = 0;
    int probed = lmc_st_probe(data, size, &ht);
    const uint64_t sizes[2] = {size, UINT64_MAX};
    for (int k = 0; k < 2; k++) {
        lmc_st_info info;
        if (lmc_st_parse(&info, data, size, sizes[k]) == 0) {
            /* whatever parses must also pass the cheaper probe */
            if (!probed || ht != info.header_total) abort();
            check(&info, size, sizes[k]);
            lmc_st_free(&info);
        }
        if (info.count != 0 || info.tensors != NULL || info.by_name != NULL) abort();
    }
    return 0;
}
