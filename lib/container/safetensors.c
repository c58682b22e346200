/*
 * safetensors.c - validate a safetensors header and map it to tensor spans.
 *
 * The rules follow the reference reader (huggingface/safetensors,
 * SafeTensors::read_metadata + Metadata::validate) so that a file we treat as
 * safetensors is one the reference would load. Anything doubtful returns -1:
 * the caller then falls back to generic mode, which is always lossless, so
 * rejecting costs only ratio while accepting wrongly could cost correctness.
 */
#include "safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"

typedef struct {
    const char* name;
    uint8_t     dtype;
    uint8_t     width; /* grouping width, not the storage size */
    uint8_t     bits;  /* storage size per element, for the size rule */
} st_dtype;

/* Dtypes without an lmc code are grouped as bytes. C64 is two f32 values, so
 * grouping it as f32 keeps real and imaginary parts in the same byte planes. */
static const st_dtype st_dtypes[] = {
    {"BOOL", LMC_DTYPE_BOOL, 1, 8},
    {"F4", LMC_DTYPE_BYTES, 1, 4},
    {"F6_E2M3", LMC_DTYPE_BYTES, 1, 6},
    {"F6_E3M2", LMC_DTYPE_BYTES, 1, 6},
    {"U8", LMC_DTYPE_U8, 1, 8},
    {"I8", LMC_DTYPE_I8, 1, 8},
    {"F8_E5M2", LMC_DTYPE_F8_E5M2, 1, 8},
    {"F8_E4M3", LMC_DTYPE_F8_E4M3, 1, 8},
    {"F8_E8M0", LMC_DTYPE_BYTES, 1, 8},
    {"F8_E4M3FNUZ", LMC_DTYPE_BYTES, 1, 8},
    {"F8_E5M2FNUZ", LMC_DTYPE_BYTES, 1, 8},
    {"I16", LMC_DTYPE_I16, 2, 16},
    {"U16", LMC_DTYPE_U16, 2, 16},
    {"F16", LMC_DTYPE_F16, 2, 16},
    {"BF16", LMC_DTYPE_BF16, 2, 16},
    {"I32", LMC_DTYPE_I32, 4, 32},
    {"U32", LMC_DTYPE_U32, 4, 32},
    {"F32", LMC_DTYPE_F32, 4, 32},
    {"C64", LMC_DTYPE_F32, 4, 64},
    {"F64", LMC_DTYPE_F64, 8, 64},
    {"I64", LMC_DTYPE_I64, 8, 64},
    {"U64", LMC_DTYPE_U64, 8, 64},
};

static const char st_meta_key[] = "__metadata__";

static uint64_t rd_le64(const unsigned char* p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* JSON whitespace, as serde_json skips it (space, tab, LF, CR). */
static int is_json_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int lmc_st_probe(const void* buf, size_t avail, uint64_t* header_total)
{
    const unsigned char* p = (const unsigned char*)buf;
    if (buf == NULL || avail < 8) return 0;
    uint64_t n = rd_le64(p);
    /* "{}" is the smallest object, and the cap keeps a hostile length from
     * making the caller buffer gigabytes before parsing. */
    if (n < 2 || n > LMC_ST_MAX_HEADER) return 0;
    size_t vis = avail - 8;
    if (vis > n) vis = (size_t)n;
    for (size_t i = 0; i < vis; i++) {
        if (is_json_ws(p[8 + i])) continue;
        if (p[8 + i] != '{') return 0;
        break;
    }
    if (header_total) *header_total = 8 + n;
    return 1;
}

static const st_dtype* find_dtype(const char* s, size_t len)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strlen(st_dtypes[i].name) == len && memcmp(st_dtypes[i].name, s, len) == 0)
            return &st_dtypes[i];
    return NULL;
}

/* serde's usize: a JSON integer >= 0. Reals (1.0, 1e3) are refused as the
 * reference refuses them; jansson already fails on integers beyond int64. */
static int get_u64(const json_t* v, uint64_t* out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0) return -1;
    *out = (uint64_t)x;
    return 0;
}

static int check_metadata(const json_t* m)
{
    const char* k;
    json_t* v;
    if (!json_is_object(m)) return -1;
    json_object_foreach((json_t*)m, k, v) {
        if (!json_is_string(v)) return -1;
    }
    return 0;
}

/* Fills everything but name; header_total turns relative offsets absolute. */
static int parse_entry(lmc_st_tensor* t, const json_t* e, uint64_t header_total)
{
    if (!json_is_object(e)) return -1;
    const json_t* jd = json_object_get(e, "dtype");
    const json_t* js = json_object_get(e, "shape");
    const json_t* jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo)) return -1;

    const st_dtype* d = find_dtype(json_string_value(jd), json_string_length(jd));
    if (d == NULL) return -1;
    t->dtype = d->dtype;
    t->width = d->width;

    size_t nd = json_array_size(js);
    if (nd > LMC_ST_MAX_DIMS) return -1;
    t->ndim = (uint32_t)nd;
    uint64_t nelem = 1; /* shape [] is a scalar: one element */
    for (size_t i = 0; i < nd; i++) {
        uint64_t dim;
        if (get_u64(json_array_get(js, i), &dim)) return -1;
        t->shape[i] = dim;
        /* Once a dimension is 0 the product stays 0, but a later dimension
         * still has to be checked for overflow as the reference does
         * (checked_mul over the whole shape), so no early exit. */
        if (dim != 0 && nelem > UINT64_MAX / dim) return -1;
        nelem *= dim;
    }
    if (nelem > UINT64_MAX / d->bits) return -1;
    uint64_t nbits = nelem * d->bits;
    if (nbits % 8 != 0) return -1; /* sub-byte dtypes must fill whole bytes */

    uint64_t b, en;
    if (json_array_size(jo) != 2) return -1;
    if (get_u64(json_array_get(jo, 0), &b) || get_u64(json_array_get(jo, 1), &en)) return -1;
    if (b > en || en - b != nbits / 8) return -1;
    if (en > UINT64_MAX - header_total) return -1;
    t->begin = header_total + b;
    t->end = header_total + en;
    return 0;
}

/* Byte order of names, shorter first on a common prefix: memcmp-based so any
 * UTF-8 works, and the same order lmc_st_find searches in. */
static int name_cmp(const char* a, size_t al, const char* b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0) return c;
    return (al > bl) - (al < bl);
}

/* Zero-size tensors may share an offset with each other and with the tensor
 * that follows; (begin, end, name) is a total order, so the result does not
 * depend on the JSON key order or on qsort's instability. */
static int cmp_by_begin(const void* pa, const void* pb)
{
    const lmc_st_tensor* a = (const lmc_st_tensor*)pa;
    const lmc_st_tensor* b = (const lmc_st_tensor*)pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

static int cmp_ptr_by_name(const void* pa, const void* pb)
{
    const lmc_st_tensor* a = *(const lmc_st_tensor* const*)pa;
    const lmc_st_tensor* b = *(const lmc_st_tensor* const*)pb;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

static int build_by_name(lmc_st_info* info)
{
    size_t n = info->count;
    lmc_st_tensor** tmp = (lmc_st_tensor**)malloc(n * sizeof *tmp);
    info->by_name = (size_t*)malloc(n * sizeof *info->by_name);
    if (tmp == NULL || info->by_name == NULL) {
        free(tmp);
        return -1;
    }
    for (size_t i = 0; i < n; i++) tmp[i] = &info->tensors[i];
    qsort(tmp, n, sizeof *tmp, cmp_ptr_by_name);
    for (size_t i = 0; i < n; i++) info->by_name[i] = (size_t)(tmp[i] - info->tensors);
    free(tmp);
    return 0;
}

int lmc_st_parse(lmc_st_info* info, const void* buf, size_t avail, uint64_t file_size)
{
    const unsigned char* p = (const unsigned char*)buf;
    if (info == NULL) return -1;
    memset(info, 0, sizeof *info);
    if (buf == NULL || avail < 8) return -1;

    uint64_t n = rd_le64(p);
    if (n < 2 || n > LMC_ST_MAX_HEADER || n > avail - 8) return -1;
    uint64_t header_total = 8 + n;
    if (file_size != UINT64_MAX && header_total > file_size) return -1;

    /* The reference parses the header as a Rust str, where NUL is a control
     * character JSON does not allow outside strings (and jansson rejects
     * \u0000 in keys). Refusing raw NULs up front also means padding with
     * NULs, which the reference rejects, is rejected here for certain. */
    const char* hdr = (const char*)p + 8;
    if (memchr(hdr, 0, (size_t)n) != NULL) return -1;

    /* Without JSON_DISABLE_EOF_CHECK jansson skips trailing whitespace and
     * fails on anything else, which is exactly the padding rule; leading
     * whitespace is skipped as JSON allows. It also checks UTF-8 and caps
     * nesting depth, so hostile headers cannot overflow the stack. */
    json_error_t err;
    json_t* root = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) return -1;
    if (!json_is_object(root)) goto fail;

    size_t total = json_object_size(root);
    const json_t* meta = json_object_get(root, st_meta_key);
    if (meta != NULL && check_metadata(meta)) goto fail;
    size_t cap = total - (meta != NULL);

    if (cap > 0) {
        info->tensors = (lmc_st_tensor*)calloc(cap, sizeof *info->tensors);
        if (info->tensors == NULL) goto fail;
    }

    const char* key;
    size_t key_len;
    json_t* val;
    json_object_keylen_foreach(root, key, key_len, val) {
        if (key_len == sizeof st_meta_key - 1 && memcmp(key, st_meta_key, key_len) == 0)
            continue;
        if (info->count >= cap) goto fail; /* cannot happen; guards the array */
        lmc_st_tensor* t = &info->tensors[info->count];
        if (parse_entry(t, val, header_total)) goto fail;
        t->name = (char*)malloc(key_len + 1);
        if (t->name == NULL) goto fail;
        memcpy(t->name, key, key_len);
        t->name[key_len] = '\0';
        t->name_len = key_len;
        info->count++;
    }

    if (info->count > 1) qsort(info->tensors, info->count, sizeof *info->tensors, cmp_by_begin);

    /* Tiling from offset 0 with no holes is what the reference calls a valid
     * buffer; it forbids polyglot files and lets the encoder cover the data
     * section with tensor spans alone. */
    uint64_t pos = header_total;
    for (size_t i = 0; i < info->count; i++) {
        if (info->tensors[i].begin != pos) goto fail;
        pos = info->tensors[i].end;
    }
    info->data_end = pos;
    if (file_size != UINT64_MAX && pos != file_size) goto fail;
    info->header_total = header_total;

    if (info->count > 0 && build_by_name(info)) goto fail;
    json_decref(root);
    return 0;

fail:
    json_decref(root);
    lmc_st_free(info);
    return -1;
}

void lmc_st_free(lmc_st_info* info)
{
    if (info == NULL) return;
    if (info->tensors != NULL)
        for (size_t i = 0; i < info->count; i++) free(info->tensors[i].name);
    free(info->tensors);
    free(info->by_name);
    memset(info, 0, sizeof *info);
}

long lmc_st_find(const lmc_st_info* info, const char* name, size_t name_len)
{
    if (info == NULL || info->by_name == NULL || (name == NULL && name_len != 0)) return -1;
    size_t lo = 0, hi = info->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lmc_st_tensor* t = &info->tensors[info->by_name[mid]];
        int c = name_cmp(t->name, t->name_len, name ? name : "", name_len);
        if (c == 0) return (long)info->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}
