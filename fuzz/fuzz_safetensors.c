/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header parser.
 *
 * The input is a whole file. Parsing runs twice: with the exact size (the
 * tiling must reach the end) and streaming (UINT64_MAX), since the two take
 * different paths through the end checks. Successful parses are checked for
 * the invariants the encoder relies on, so a wrong accept aborts like a crash.
 * Each parse also runs with jansson alone and with the fast scanner alone:
 * where the scanner does not decline, it must reach jansson's verdict and,
 * on success, the same tensors.
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

static void same(const lmc_st_info* a, const lmc_st_info* b)
{
    if (a->header_total != b->header_total || a->data_end != b->data_end || a->count != b->count) abort();
    for (size_t i = 0; i < a->count; i++) {
        const lmc_st_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (x->name_len != y->name_len || memcmp(x->name, y->name, x->name_len) != 0) abort();
        if (x->dtype != y->dtype || x->width != y->width || x->ndim != y->ndim) abort();
        if (x->begin != y->begin || x->end != y->end) abort();
        if (memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]) != 0) abort();
        if (a->by_name[i] != b->by_name[i]) abort();
    }
}

static void empty(const lmc_st_info* info)
{
    if (info->count != 0 || info->tensors != NULL || info->by_name != NULL) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    uint64_t ht = 0;
    int probed = lmc_st_probe(data, size, &ht);
    const uint64_t sizes[2] = {size, UINT64_MAX};
    for (int k = 0; k < 2; k++) {
        lmc_st_info info, lib, fast;
        int const r = lmc_st_parse(&info, data, size, sizes[k]);
        int const rl = lmc_st_parse_with(&lib, data, size, sizes[k], LMC_ST_JSON_LIB);
        int const rf = lmc_st_parse_with(&fast, data, size, sizes[k], LMC_ST_FAST_ONLY);
        if (r != rl || (rf != LMC_ST_DECLINED && rf != rl)) abort();
        if (r == 0) {
            /* whatever parses must also pass the cheaper probe */
            if (!probed || ht != info.header_total) abort();
            check(&info, size, sizes[k]);
            same(&info, &lib);
            if (rf == 0) same(&fast, &lib);
            lmc_st_free(&info);
            lmc_st_free(&lib);
            if (rf == 0) lmc_st_free(&fast);
        }
        empty(&info); empty(&lib); empty(&fast);
    }
    return 0;
}
