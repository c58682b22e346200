/*
 * test_safetensors.c - header validation and span mapping (cmocka).
 *
 * Files are built in memory: 8-byte length, JSON text, then `data_len` zero
 * bytes, so every case states only the header it is about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lmc.h"
#include "safetensors.h"
#include "segments.h"

typedef struct {
    unsigned char* buf;
    size_t size;
} file_t;

/* Header `json` padded with `pad` trailing spaces, then data_len data bytes. */
static file_t make_file(const char* json, size_t pad, size_t data_len)
{
    size_t jl = strlen(json), n = jl + pad;
    file_t f;
    f.size = 8 + n + data_len;
    f.buf = (unsigned char*)calloc(1, f.size);
    assert_non_null(f.buf);
    for (int i = 0; i < 8; i++) f.buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(f.buf + 8, json, jl);
    memset(f.buf + 8 + jl, ' ', pad);
    return f;
}

static void set_n(file_t* f, uint64_t n)
{
    for (int i = 0; i < 8; i++) f->buf[i] = (unsigned char)(n >> (8 * i));
}

static void assert_same_info(const lmc_st_info* a, const lmc_st_info* b)
{
    assert_int_equal(a->header_total, b->header_total);
    assert_int_equal(a->data_end, b->data_end);
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const lmc_st_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        assert_int_equal(x->name_len, y->name_len);
        assert_memory_equal(x->name, y->name, x->name_len + 1);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->width, y->width);
        assert_int_equal(x->ndim, y->ndim);
        assert_memory_equal(x->shape, y->shape, sizeof x->shape);
        assert_int_equal(x->begin, y->begin);
        assert_int_equal(x->end, y->end);
        assert_int_equal(a->by_name[i], b->by_name[i]);
    }
}

/* One parse with each parser: jansson's verdict is the answer, and the fast
 * scanner either declines or gives the same verdict and tensors. Returns
 * the verdict; *fast (if not NULL) says whether the scanner took it. */
static int parse_checked(const file_t* f, uint64_t file_size, int* fast)
{
    lmc_st_info any, lib, fst;
    int const r = lmc_st_parse(&any, f->buf, f->size, file_size);
    int const rl = lmc_st_parse_with(&lib, f->buf, f->size, file_size, LMC_ST_JSON_LIB);
    int const rf = lmc_st_parse_with(&fst, f->buf, f->size, file_size, LMC_ST_FAST_ONLY);
    assert_int_equal(r, rl);
    if (rf != LMC_ST_DECLINED) assert_int_equal(rf, rl);
    if (r == 0) assert_same_info(&any, &lib);
    if (rf == 0) assert_same_info(&fst, &lib);
    lmc_st_free(&any); lmc_st_free(&lib); lmc_st_free(&fst);
    if (fast) *fast = rf != LMC_ST_DECLINED;
    return r;
}

/* Parses with the exact file size and with an unknown size; both must agree
 * on failure for the header-only cases below. */
static int parse_both(const char* json, size_t data_len)
{
    file_t f = make_file(json, 0, data_len);
    lmc_st_info info;
    int r1 = lmc_st_parse(&info, f.buf, f.size, f.size);
    if (r1 == 0) lmc_st_free(&info);
    int r2 = lmc_st_parse(&info, f.buf, f.size, UINT64_MAX);
    if (r2 == 0) lmc_st_free(&info);
    /* A failed parse leaves info empty. */
    assert_int_equal(info.count, 0);
    assert_null(info.tensors);
    assert_null(info.by_name);
    assert_int_equal(parse_checked(&f, f.size, NULL), r1);
    assert_int_equal(parse_checked(&f, UINT64_MAX, NULL), r2);
    free(f.buf);
    return r1 == 0 && r2 == 0 ? 0 : -1;
}

/* The verdict on `json` (with data_len data bytes) and whether the fast
 * scanner reached it itself. */
static int parse_fast(const char* json, size_t pad, size_t data_len, int* fast)
{
    file_t f = make_file(json, pad, data_len);
    int const r = parse_checked(&f, f.size, fast);
    free(f.buf);
    return r;
}

static const char valid_json[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[16,40]},"
    "\"a.weight\":{\"dtype\":\"BF16\",\"shape\":[2,4],\"data_offsets\":[0,16]},"
    "\"c.ids\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[40,45]}}";

static void test_valid(void** state)
{
    (void)state;
    file_t f = make_file(valid_json, 3, 45);
    uint64_t ht = 0;
    assert_int_equal(lmc_st_probe(f.buf, f.size, &ht), 1);
    uint64_t n = strlen(valid_json) + 3;
    assert_int_equal(ht, 8 + n);

    lmc_st_info info;
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
    assert_int_equal(info.header_total, 8 + n);
    assert_int_equal(info.data_end, f.size);
    assert_int_equal(info.count, 3);

    const lmc_st_tensor* t = info.tensors;
    assert_string_equal(t[0].name, "a.weight");
    assert_int_equal(t[0].name_len, 8);
    assert_int_equal(t[0].dtype, LMC_DTYPE_BF16);
    assert_int_equal(t[0].width, 2);
    assert_int_equal(t[0].ndim, 2);
    assert_int_equal(t[0].shape[0], 2);
    assert_int_equal(t[0].shape[1], 4);
    assert_int_equal(t[0].begin, ht);
    assert_int_equal(t[0].end, ht + 16);

    assert_string_equal(t[1].name, "b.weight");
    assert_int_equal(t[1].dtype, LMC_DTYPE_F32);
    assert_int_equal(t[1].width, 4);
    assert_int_equal(t[1].begin, ht + 16);
    assert_int_equal(t[1].end, ht + 40);

    assert_string_equal(t[2].name, "c.ids");
    assert_int_equal(t[2].dtype, LMC_DTYPE_U8);
    assert_int_equal(t[2].width, 1);
    assert_int_equal(t[2].ndim, 1);
    assert_int_equal(t[2].begin, ht + 40);
    assert_int_equal(t[2].end, ht + 45);

    assert_int_equal(lmc_st_find(&info, "a.weight", 8), 0);
    assert_int_equal(lmc_st_find(&info, "b.weight", 8), 1);
    assert_int_equal(lmc_st_find(&info, "c.ids", 5), 2);
    assert_int_equal(lmc_st_find(&info, "c.id", 4), -1);
    assert_int_equal(lmc_st_find(&info, "c.idsx", 6), -1);
    assert_int_equal(lmc_st_find(&info, "__metadata__", 12), -1);
    assert_int_equal(lmc_st_find(&info, "", 0), -1);

    lmc_st_free(&info);
    assert_int_equal(info.count, 0);
    assert_null(info.tensors);
    lmc_st_free(&info); /* safe twice / on a zeroed struct */

    /* Unknown file size (streaming) accepts the same header. */
    assert_int_equal(lmc_st_parse(&info, f.buf, ht, UINT64_MAX), 0);
    assert_int_equal(info.data_end, f.size);
    lmc_st_free(&info);

    /* Trailing bytes after the last tensor: a polyglot, refused when the
     * size is known. */
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size + 1), -1);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size - 1), -1);
    free(f.buf);
}

#define T1(dt, sh, off) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":" off "}}"

/* Headers as writers produce them are read by the fast scanner; anything
 * outside its subset of JSON goes to jansson, with the same verdicts. */
static void test_fast_path(void** state)
{
    (void)state;
    int fast = 0;
    assert_int_equal(parse_fast(valid_json, 0, 45, &fast), 0);
    assert_true(fast);
    assert_int_equal(parse_fast(valid_json, 7, 45, &fast), 0);   /* padded to 8 bytes */
    assert_true(fast);
    assert_int_equal(parse_fast(" {\n  \"a\" : {\"shape\" :[ 2 , 1 ],\r\n\t\"data_offsets\": [0, 2], \"dtype\":\"U8\"} }", 0, 2, &fast), 0);
    assert_true(fast);
    assert_int_equal(parse_fast("{}", 0, 0, &fast), 0);
    assert_true(fast);
    /* plain syntax, wrong content: the scanner's verdict */
    assert_int_equal(parse_fast(T1("F32", "[2]", "[0,4]"), 0, 4, &fast), -1);
    assert_true(fast);
    assert_int_equal(parse_fast(T1("F128", "[2]", "[0,8]"), 0, 8, &fast), -1);
    assert_true(fast);
    assert_int_equal(parse_fast("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                                "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 0, 5, &fast), -1);
    assert_true(fast);
    /* outside the subset: jansson decides */
    assert_int_equal(parse_fast("{\"a\\\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, &fast), 0);
    assert_false(fast);   /* an escape */
    assert_int_equal(parse_fast("{\"caf\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, &fast), 0);
    assert_false(fast);   /* UTF-8 beyond ASCII */
    assert_int_equal(parse_fast("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":0}}", 0, 1, &fast), 0);
    assert_false(fast);   /* a key beside the three */
    assert_int_equal(parse_fast("{\"__metadata__\":{\"a\":\"b\",\"a\":\"c\"}}", 0, 0, &fast), -1);
    assert_false(fast);   /* duplicate metadata key */
    assert_int_equal(parse_fast("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                                "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 0, 2, &fast), -1);
    assert_false(fast);   /* duplicate tensor name */
    assert_int_equal(parse_fast(T1("U8", "[1.0]", "[0,1]"), 0, 1, &fast), -1);
    assert_false(fast);
    assert_int_equal(parse_fast(T1("U8", "[01]", "[0,1]"), 0, 1, &fast), -1);
    assert_false(fast);
    assert_int_equal(parse_fast(T1("U8", "[1]", "[0,1000000000000000000]"), 0, 1, &fast), -1);
    assert_false(fast);   /* 19 digits */
    assert_int_equal(parse_fast(T1("U8", "[1]", "[0,1]") "x", 0, 1, &fast), -1);
    assert_false(fast);
}

static void test_whitespace_padding(void** state)
{
    (void)state;
    const char* j = "  \n\t {\"x\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}";
    file_t f = make_file(j, 13, 6);
    lmc_st_info info;
    uint64_t ht;
    assert_int_equal(lmc_st_probe(f.buf, f.size, &ht), 1);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
    assert_int_equal(info.count, 1);
    assert_int_equal(info.tensors[0].begin, ht);
    assert_int_equal(info.tensors[0].dtype, LMC_DTYPE_F16);
    lmc_st_free(&info);
    /* NUL padding is not whitespace. */
    f.buf[f.size - 6 - 1] = 0;
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), -1);
    free(f.buf);
}

static void test_empty_and_zero_size(void** state)
{
    (void)state;
    assert_int_equal(parse_both("{}", 0), 0);
    assert_int_equal(parse_both("{\"__metadata__\":{}}", 0), 0);
    assert_int_equal(parse_both("{}", 1), -1); /* data nobody indexes */

    /* Zero-size tensors share offsets; order is (begin, end, name). */
    const char* j = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[4,4]},"
                    "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"y\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
    file_t f = make_file(j, 0, 12);
    lmc_st_info info;
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
    assert_int_equal(info.count, 5);
    const char* order[] = {"d", "e", "s", "z", "y"};
    for (int i = 0; i < 5; i++) {
        assert_string_equal(info.tensors[i].name, order[i]);
        assert_int_equal(lmc_st_find(&info, order[i], 1), i);
    }
    assert_int_equal(info.tensors[2].ndim, 0);
    assert_int_equal(info.tensors[4].dtype, LMC_DTYPE_I64);
    assert_int_equal(info.tensors[4].width, 8);
    lmc_st_free(&info);
    free(f.buf);
}

static void test_dtypes(void** state)
{
    (void)state;
    static const struct { const char* s; unsigned bytes_per_4; int dtype; int width; } c[] = {
        {"BF16", 8, LMC_DTYPE_BF16, 2},     {"F16", 8, LMC_DTYPE_F16, 2},
        {"F32", 16, LMC_DTYPE_F32, 4},      {"F64", 32, LMC_DTYPE_F64, 8},
        {"I8", 4, LMC_DTYPE_I8, 1},         {"U8", 4, LMC_DTYPE_U8, 1},
        {"I16", 8, LMC_DTYPE_I16, 2},       {"U16", 8, LMC_DTYPE_U16, 2},
        {"I32", 16, LMC_DTYPE_I32, 4},      {"U32", 16, LMC_DTYPE_U32, 4},
        {"I64", 32, LMC_DTYPE_I64, 8},      {"U64", 32, LMC_DTYPE_U64, 8},
        {"BOOL", 4, LMC_DTYPE_BOOL, 1},     {"F8_E4M3", 4, LMC_DTYPE_F8_E4M3, 1},
        {"F8_E5M2", 4, LMC_DTYPE_F8_E5M2, 1}, {"F8_E8M0", 4, LMC_DTYPE_BYTES, 1},
        {"F8_E4M3FNUZ", 4, LMC_DTYPE_BYTES, 1}, {"F8_E5M2FNUZ", 4, LMC_DTYPE_BYTES, 1},
        {"C64", 32, LMC_DTYPE_F32, 4},      {"F4", 2, LMC_DTYPE_BYTES, 1},
        {"F6_E2M3", 3, LMC_DTYPE_BYTES, 1}, {"F6_E3M2", 3, LMC_DTYPE_BYTES, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char j[160];
        snprintf(j, sizeof j, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,2],\"data_offsets\":[0,%u]}}",
                 c[i].s, c[i].bytes_per_4);
        file_t f = make_file(j, 0, c[i].bytes_per_4);
        lmc_st_info info;
        assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
        assert_int_equal(info.tensors[0].dtype, c[i].dtype);
        assert_int_equal(info.tensors[0].width, c[i].width);
        lmc_st_free(&info);
        free(f.buf);
    }
    /* Sub-byte dtypes must fill whole bytes: 3 F4 values = 12 bits. */
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 1), -1);
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2), -1);
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"F6_E3M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2), -1);
    /* Case matters, as in the reference. */
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"bf16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2), -1);
}

static void test_invalid_headers(void** state)
{
    (void)state;
    /* sanity: the template itself is valid */
    assert_int_equal(parse_both(T1("F32", "[2]", "[0,8]"), 8), 0);

    assert_int_equal(parse_both("not json", 0), -1);
    assert_int_equal(parse_both("[1,2,3]", 0), -1);
    assert_int_equal(parse_both("\"{}\"", 0), -1);
    assert_int_equal(parse_both("{}x", 0), -1);
    assert_int_equal(parse_both("{\"t\":1}", 0), -1);
    assert_int_equal(parse_both(
        "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2), -1);
    assert_int_equal(parse_both(T1("F128", "[2]", "[0,32]"), 32), -1);
    assert_int_equal(parse_both(T1("", "[2]", "[0,8]"), 8), -1);
    /* size mismatch, either direction */
    assert_int_equal(parse_both(T1("F32", "[2]", "[0,4]"), 4), -1);
    assert_int_equal(parse_both(T1("F32", "[2]", "[0,12]"), 12), -1);
    assert_int_equal(parse_both(T1("F32", "[2]", "[8,0]"), 8), -1);
    /* gap, overlap, not starting at 0 */
    assert_int_equal(parse_both(
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 5), -1);
    assert_int_equal(parse_both(
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", 3), -1);
    assert_int_equal(parse_both(
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2), -1);
    assert_int_equal(parse_both(T1("U8", "[2]", "[1,3]"), 3), -1);
    /* products that overflow 64 bits, in elements and in bits */
    assert_int_equal(parse_both(T1("U8", "[1099511627776,1099511627776]", "[0,0]"), 0), -1);
    assert_int_equal(parse_both(T1("U8", "[1099511627776,1099511627776,0]", "[0,0]"), 0), -1);
    assert_int_equal(parse_both(T1("F64", "[4611686018427387904]", "[0,0]"), 0), -1);
    assert_int_equal(parse_both(T1("U8", "[4294967296,4294967296]", "[0,0]"), 0), -1);
    /* offsets that would run past the end; integers beyond int64 */
    assert_int_equal(parse_both(T1("U8", "[9223372036854775807]", "[0,9223372036854775807]"), 0), -1);
    assert_int_equal(parse_both(T1("U8", "[1]", "[0,18446744073709551615]"), 1), -1);
    /* negative numbers, reals, wrong arity and types */
    assert_int_equal(parse_both(T1("U8", "[-1]", "[0,1]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[1]", "[-1,0]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[1.0]", "[0,1]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[1]", "[0,1e0]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[1]", "[0,1,1]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[1]", "[1]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "1", "[0,1]"), 1), -1);
    assert_int_equal(parse_both(T1("U8", "[\"1\"]", "[0,1]"), 1), -1);
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 0), -1);
    assert_int_equal(parse_both("{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1), -1);
    assert_int_equal(parse_both("{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1), -1);
    /* too many dimensions (all 1, so sizes would match) */
    assert_int_equal(parse_both(T1("U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "[0,1]"), 1), 0);
    assert_int_equal(parse_both(T1("U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "[0,1]"), 1), -1);
    /* metadata must be a string->string object */
    assert_int_equal(parse_both("{\"__metadata__\":{\"a\":\"b\",\"c\":\"\"}}", 0), 0);
    assert_int_equal(parse_both("{\"__metadata__\":{\"a\":1}}", 0), -1);
    assert_int_equal(parse_both("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0), -1);
    assert_int_equal(parse_both("{\"__metadata__\":{\"a\":null}}", 0), -1);
    assert_int_equal(parse_both("{\"__metadata__\":\"x\"}", 0), -1);
    assert_int_equal(parse_both("{\"__metadata__\":[]}", 0), -1);
    /* invalid UTF-8 in a name; \u0000 in a name */
    assert_int_equal(parse_both("{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), -1);
    assert_int_equal(parse_both("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), -1);
}

static void test_invalid_lengths(void** state)
{
    (void)state;
    const char* j = T1("U8", "[1]", "[0,1]");
    file_t f = make_file(j, 0, 1);
    lmc_st_info info;
    uint64_t n = strlen(j);

    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
    lmc_st_free(&info);
    /* avail shorter than 8 + N */
    assert_int_equal(lmc_st_parse(&info, f.buf, 8 + n - 1, UINT64_MAX), -1);
    assert_int_equal(lmc_st_parse(&info, f.buf, 7, UINT64_MAX), -1);
    assert_int_equal(lmc_st_parse(&info, NULL, 0, UINT64_MAX), -1);
    /* file_size smaller than the header */
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, 8 + n - 1), -1);
    /* N beyond what is available, beyond the cap, overflowing, tiny */
    set_n(&f, n + 2);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    set_n(&f, (uint64_t)LMC_ST_MAX_HEADER + 1);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    set_n(&f, UINT64_MAX);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    set_n(&f, UINT64_MAX - 7);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    set_n(&f, 1);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    /* a shorter N makes the JSON end early: not an object */
    set_n(&f, n - 1);
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, UINT64_MAX), -1);
    free(f.buf);
}

static void test_probe(void** state)
{
    (void)state;
    unsigned char b[32] = {0};
    uint64_t ht = 0;
    assert_int_equal(lmc_st_probe(b, 7, &ht), 0);
    assert_int_equal(lmc_st_probe(NULL, 0, &ht), 0);
    assert_int_equal(lmc_st_probe(b, 8, &ht), 0); /* N = 0 */
    b[0] = 1;
    assert_int_equal(lmc_st_probe(b, 8, &ht), 0); /* N = 1 */
    b[0] = 2;
    assert_int_equal(lmc_st_probe(b, 8, &ht), 1); /* nothing visible yet */
    assert_int_equal(ht, 10);
    b[8] = '{';
    assert_int_equal(lmc_st_probe(b, 9, &ht), 1);
    b[8] = '[';
    assert_int_equal(lmc_st_probe(b, 9, &ht), 0);
    b[8] = ' ';
    b[9] = '\n';
    assert_int_equal(lmc_st_probe(b, 10, &ht), 1); /* all of N is whitespace */
    b[0] = 4;
    b[10] = '{';
    assert_int_equal(lmc_st_probe(b, 32, &ht), 1);
    assert_int_equal(ht, 12);
    b[10] = 'x';
    assert_int_equal(lmc_st_probe(b, 32, &ht), 0);
    /* the '{' must lie within N */
    b[0] = 2;
    b[10] = '{';
    assert_int_equal(lmc_st_probe(b, 32, &ht), 1);
    b[10] = 'x';
    assert_int_equal(lmc_st_probe(b, 32, &ht), 1);
    /* cap */
    memset(b, 0, 8);
    uint64_t big = LMC_ST_MAX_HEADER;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(big >> (8 * i));
    b[8] = '{';
    assert_int_equal(lmc_st_probe(b, 32, &ht), 1);
    assert_int_equal(ht, 8 + big);
    big++;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(big >> (8 * i));
    assert_int_equal(lmc_st_probe(b, 32, &ht), 0);
    memset(b, 0xff, 8);
    assert_int_equal(lmc_st_probe(b, 32, &ht), 0);
    /* NULL header_total is allowed */
    b[0] = 2;
    memset(b + 1, 0, 7);
    assert_int_equal(lmc_st_probe(b, 32, NULL), 1);
}

static void test_find_utf8_and_prefixes(void** state)
{
    (void)state;
    const char* j = "{\"\xc3\xa9t\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"ab\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
                    "\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]},"
                    "\"abc\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[4,5]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[5,6]}}";
    file_t f = make_file(j, 0, 6);
    lmc_st_info info;
    assert_int_equal(lmc_st_parse(&info, f.buf, f.size, f.size), 0);
    assert_int_equal(info.count, 6);
    assert_int_equal(lmc_st_find(&info, "\xc3\xa9t\xc3\xa9", 5), 0);
    assert_int_equal(lmc_st_find(&info, "ab", 2), 1);
    assert_int_equal(lmc_st_find(&info, "a", 1), 2);
    assert_int_equal(lmc_st_find(&info, "", 0), 3);
    assert_int_equal(lmc_st_find(&info, NULL, 0), 3);
    assert_int_equal(lmc_st_find(&info, "abc", 3), 4);
    assert_int_equal(lmc_st_find(&info, "b", 1), 5);
    assert_int_equal(lmc_st_find(&info, "abcd", 4), -1);
    assert_int_equal(lmc_st_find(&info, "abc", 2), 1); /* length, not NUL, ends names */
    for (size_t i = 1; i < info.count; i++) {
        const lmc_st_tensor* p = &info.tensors[info.by_name[i - 1]];
        const lmc_st_tensor* q = &info.tensors[info.by_name[i]];
        size_t m = p->name_len < q->name_len ? p->name_len : q->name_len;
        int c = memcmp(p->name, q->name, m);
        assert_true(c < 0 || (c == 0 && p->name_len < q->name_len));
    }
    lmc_st_free(&info);
    lmc_st_info zero;
    memset(&zero, 0, sizeof zero);
    assert_int_equal(lmc_st_find(&zero, "a", 1), -1);
    lmc_st_free(&zero);
    lmc_st_free(NULL);
    free(f.buf);
}

/* The segments of a file against a reference: each tensor XORed against
 * the reference's tensor of that name and shape, found by parsing the
 * reference's header, or, when the header is byte-identical and the sizes
 * agree, from the file's own parse. A reference of another size is never
 * matched through its header (its tensors could lie past its end). */
static size_t xor_tensors(const lmc_segs* s, const file_t* f)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lmc_seg* g = &s->v[i];
        if (g->dtype == LMC_DTYPE_BYTES || !g->xor_ref) continue;
        assert_true(g->ref_off + g->len <= f->size);
        n++;
    }
    return n;
}

static void test_segments_against_reference(void** state)
{
    (void)state;
    static const char reordered[] =
        "{\"c.ids\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[0,5]},"
        "\"a.weight\":{\"dtype\":\"BF16\",\"shape\":[2,4],\"data_offsets\":[5,21]},"
        "\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[21,45]}}";
    file_t f = make_file(valid_json, 0, 45);
    for (size_t i = 0; i < 45; i++) f.buf[f.size - 45 + i] = (unsigned char)(i * 7 + 1);
    size_t const hdr = f.size - 45;
    lmc_segs s;
    memset(&s, 0, sizeof s);

    /* same header, same size: every tensor matched, at its own offsets */
    file_t r = make_file(valid_json, 0, 45);
    assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, f.buf, f.size, f.size, r.buf, r.size), 0);
    assert_int_equal(s.tensors_total, 3);
    assert_int_equal(s.tensors_matched, 3);
    assert_int_equal(xor_tensors(&s, &r), 3);
    for (size_t i = 0; i < s.n; i++)
        if (s.v[i].dtype != LMC_DTYPE_BYTES) assert_int_equal(s.v[i].ref_off, s.v[i].off);

    /* same header bytes, one byte longer or shorter: not a valid file, no tensor matched */
    for (int d = -1; d <= 1; d += 2) {
        assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, f.buf, f.size, f.size, r.buf,
                                        (size_t)((long)r.size + d)), 0);
        assert_int_equal(s.tensors_matched, 0);
        assert_int_equal(xor_tensors(&s, &r), 0);
    }
    free(r.buf);

    /* another header, the same tensors elsewhere: matched by name, at the reference's offsets */
    r = make_file(reordered, 0, 45);
    assert_int_equal(lmc_segs_build(&s, LMC_FORMAT_AUTO, LMC_DTYPE_BYTES, f.buf, f.size, f.size, r.buf, r.size), 0);
    assert_int_equal(s.tensors_matched, 3);
    size_t const rh = r.size - 45;
    for (size_t i = 0; i < s.n; i++) {
        const lmc_seg* g = &s.v[i];
        if (g->dtype == LMC_DTYPE_BF16) assert_int_equal(g->ref_off, rh + 5);
        if (g->dtype == LMC_DTYPE_F32) assert_int_equal(g->ref_off, rh + 21);
        if (g->dtype == LMC_DTYPE_U8 && g->off >= hdr) assert_int_equal(g->ref_off, rh);
    }
    assert_int_equal(xor_tensors(&s, &r), 3);
    free(r.buf);
    lmc_segs_free(&s);
    free(f.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_fast_path),
        cmocka_unit_test(test_whitespace_padding),
        cmocka_unit_test(test_empty_and_zero_size),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_invalid_headers),
        cmocka_unit_test(test_invalid_lengths),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_find_utf8_and_prefixes),
        cmocka_unit_test(test_segments_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
