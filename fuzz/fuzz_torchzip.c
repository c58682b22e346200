/*
 * fuzz_torchzip.c - libFuzzer target for the torch.save zip + pickle scanner.
 *
 * First byte even: the rest is a whole file, parsed as a zip. First byte odd:
 * the rest is a data.pkl, wrapped here in a well-formed torch-style zip
 * ("a/data.pkl", "a/data/0".."a/data/3"; ZIP64 records when bit 1 is set) so
 * mutations reach the pickle walker without having to keep a zip directory
 * valid. Successful parses are checked
 * for the invariants the encoder relies on, and the segment list built from
 * them must tile [0, UINT64_MAX) in order, so a wrong accept aborts; so
 * must the public tensor map's entries lie in the file, in order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"
#include "container/torchzip.h"
#include "container/segments.h"
#include "../tests/tzbuild.h"

static void check(const lmc_tz_info* t, size_t n)
{
    for (size_t i = 0; i < t->count; i++) {
        const lmc_tz_storage* s = &t->v[i];
        if (s->len == 0 || s->off > n || s->len > n - s->off) abort();
        if (s->width != 1 && s->width != 2 && s->width != 4 && s->width != 8) abort();
        if (s->len % s->width) abort();
        if (i && t->v[i - 1].off + t->v[i - 1].len > s->off) abort();
        if (!s->key) abort();
        if (lmc_tz_find(t, s->key, s->key_len) != (long)i) abort();
    }
}

static void check_segs(const uint8_t* f, size_t n)
{
    lmc_segs s;
    memset(&s, 0, sizeof(s));
    /* the file as its own reference exercises the matching path too */
    if (lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, f, n, n, f, n) != 0) return;
    uint64_t pos = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.v[i].off != pos || s.v[i].len == 0) abort();
        if (s.v[i].xor_ref && (s.v[i].ref_off > n || s.v[i].len > n - s.v[i].ref_off) && s.v[i].off + s.v[i].len != UINT64_MAX) abort();
        pos = s.v[i].off + s.v[i].len;
    }
    if (pos != UINT64_MAX) abort();
    lmc_segs_free(&s);
}

/* The public tensor map (one archive or several): entries inside the file,
 * in order, not overlapping, each found by its name. */
static void check_map(const uint8_t* f, size_t n)
{
    lmc_tensor_map* m = NULL;
    size_t const r = lmc_tensor_map_torch(&m, f, n);
    if (lmc_is_error(r)) { if (m) abort(); return; }
    uint64_t end = lmc_tensor_map_header_size(m);
    for (size_t i = 0; i < lmc_tensor_map_count(m); i++) {
        const lmc_tensor_info* const t = lmc_tensor_map_get(m, i);
        if (t->offset < end || t->offset > n || t->size > n - t->offset || t->size == 0) abort();
        if (strlen(t->name) != t->name_len || lmc_tensor_map_find(m, t->name, t->name_len) != (long)i) abort();
        end = t->offset + t->size;
    }
    lmc_tensor_map_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t* f = data + 1;
    size_t n = size - 1;
    uint8_t* zip = NULL;
    if (data[0] & 1) {
        static const char* const names[] = { "a/data.pkl", "a/data/0", "a/data/1", "a/data/2", "a/data/3" };
        static uint8_t st[64];
        const uint8_t* d[5] = { f, st, st, st, st };
        size_t len[5] = { n, 64, 64, 16, 8 };
        zip = (uint8_t*)malloc(TZB_BOUND(5, 64, n + 256));
        if (!zip) return 0;
        n = tzb_build(zip, names, d, len, 5, (data[0] & 2) != 0);
        f = zip;
    }
    lmc_tz_info t;
    if (lmc_tz_parse(&t, f, n) == 0) {
        check(&t, n);
        lmc_tz_free(&t);
    }
    if (t.count != 0 || t.v != NULL || t.by_key != NULL) abort();
    check_segs(f, n);
    check_map(f, n);
    /* archives one after another (torch's distributed checkpoints): the
     * archive found at the end starts inside the file, and the segments of
     * the two still tile it */
    if (data[0] & 4) {
        uint8_t* const two = (uint8_t*)malloc(2 * n + 1);
        if (two) {
            memcpy(two, f, n);
            memcpy(two + n, f, n);
            size_t const a = lmc_tz_archive_start(two, 2 * n);
            if (a != SIZE_MAX && (a > 2 * n - 4 || memcmp(two + a, "PK\3\4", 4) != 0)) abort();
            check_segs(two, 2 * n);
            check_map(two, 2 * n);
            free(two);
        }
    }
    free(zip);
    return 0;
}
