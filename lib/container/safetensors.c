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
        if (len && st_dtypes[i].name[0] == s[0] && strlen(st_dtypes[i].name) == len
            && memcmp(st_dtypes[i].name, s, len) == 0)
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

/* The rules on one tensor's values, whichever parser read them: fills
 * everything but the name; header_total turns relative offsets absolute. */
static int fill_entry(lmc_st_tensor* t, const char* ds, size_t dl, const uint64_t* dims, size_t nd,
                      uint64_t b, uint64_t en, uint64_t header_total)
{
    const st_dtype* d = find_dtype(ds, dl);
    if (d == NULL || nd > LMC_ST_MAX_DIMS) return -1;
    t->dtype = d->dtype;
    t->width = d->width;
    t->ndim = (uint32_t)nd;
    memset(t->shape, 0, sizeof t->shape);
    uint64_t nelem = 1; /* shape [] is a scalar: one element */
    for (size_t i = 0; i < nd; i++) {
        uint64_t const dim = dims[i];
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
    if (b > en || en - b != nbits / 8) return -1;
    if (en > UINT64_MAX - header_total) return -1;
    t->begin = header_total + b;
    t->end = header_total + en;
    return 0;
}

/* A tensor entry as jansson parsed it. */
static int parse_entry(lmc_st_tensor* t, const json_t* e, uint64_t header_total)
{
    if (!json_is_object(e)) return -1;
    const json_t* jd = json_object_get(e, "dtype");
    const json_t* js = json_object_get(e, "shape");
    const json_t* jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo)) return -1;
    size_t const nd = json_array_size(js);
    if (nd > LMC_ST_MAX_DIMS) return -1;
    uint64_t dims[LMC_ST_MAX_DIMS], b, en;
    for (size_t i = 0; i < nd; i++)
        if (get_u64(json_array_get(js, i), &dims[i])) return -1;
    if (json_array_size(jo) != 2) return -1;
    if (get_u64(json_array_get(jo, 0), &b) || get_u64(json_array_get(jo, 1), &en)) return -1;
    return fill_entry(t, json_string_value(jd), json_string_length(jd), dims, nd, b, en, header_total);
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

/* The checks on the whole list, whichever parser filled it: sorted by
 * begin, the tensors must tile the data buffer from offset 0 with no hole
 * (what the reference calls a valid buffer: it forbids polyglot files and
 * lets the encoder cover the data section with tensor spans alone). */
static int finish(lmc_st_info* info, uint64_t header_total, uint64_t file_size)
{
    /* writers usually list the tensors in file order already */
    size_t sorted = 1;
    while (sorted < info->count && cmp_by_begin(&info->tensors[sorted - 1], &info->tensors[sorted]) < 0) sorted++;
    if (sorted < info->count) qsort(info->tensors, info->count, sizeof *info->tensors, cmp_by_begin);
    uint64_t pos = header_total;
    for (size_t i = 0; i < info->count; i++) {
        if (info->tensors[i].begin != pos) return -1;
        pos = info->tensors[i].end;
    }
    info->data_end = pos;
    if (file_size != UINT64_MAX && pos != file_size) return -1;
    info->header_total = header_total;
    if (info->count > 0 && build_by_name(info)) return -1;
    return 0;
}

static int set_name(lmc_st_tensor* t, const char* key, size_t key_len)
{
    t->name = (char*)malloc(key_len + 1);
    if (t->name == NULL) return -1;
    memcpy(t->name, key, key_len);
    t->name[key_len] = '\0';
    t->name_len = key_len;
    return 0;
}

/* Without JSON_DISABLE_EOF_CHECK jansson skips trailing whitespace and
 * fails on anything else, which is exactly the padding rule; leading
 * whitespace is skipped as JSON allows. It also checks UTF-8 and caps
 * nesting depth, so hostile headers cannot overflow the stack. */
static int parse_json_lib(lmc_st_info* info, const char* hdr, uint64_t n, uint64_t header_total, uint64_t file_size)
{
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
        if (parse_entry(t, val, header_total) || set_name(t, key, key_len)) goto fail;
        info->count++;
    }
    if (finish(info, header_total, file_size)) goto fail;
    json_decref(root);
    return 0;

fail:
    json_decref(root);
    return -1;
}

/*-*** The fast path ***-*/

/* jansson takes about 80 us for the 4.5 KB header of a 6.6 MB checkpoint
 * (2 % of compressing its delta on one thread, 4 % on two: nothing runs
 * beside it). The headers that writers produce are a plain subset of JSON:
 * ASCII strings without escapes, small non-negative integers, tensor
 * entries with exactly their three keys. This reads that subset alone,
 * byte by byte, and declines (ST_DECLINED) anything outside it, which
 * jansson then judges: so every header gets jansson's verdict, and what
 * both parse comes out the same (fuzz/fuzz_safetensors.c checks that). */
#define ST_DECLINED 1

typedef struct { const unsigned char* p; const unsigned char* end; } st_scan;

static void skip_ws(st_scan* s)
{
    while (s->p < s->end && is_json_ws(*s->p)) s->p++;
}

static int eat(st_scan* s, unsigned char c)
{
    skip_ws(s);
    if (s->p < s->end && *s->p == c) { s->p++; return 1; }
    return 0;
}

/* A string of ASCII with no escape and no control character. */
static int plain_string(st_scan* s, const char** str, size_t* len)
{
    if (!eat(s, '"')) return 0;
    const unsigned char* q = s->p;
    while (q < s->end && *q != '"') {
        if (*q < 0x20 || *q >= 0x80 || *q == '\\') return 0;
        q++;
    }
    if (q == s->end) return 0;
    *str = (const char*)s->p;
    *len = (size_t)(q - s->p);
    s->p = q + 1;
    return 1;
}

/* A JSON integer >= 0 (no leading zero) of at most 18 digits, so below
 * 2^63 as jansson needs it; not the start of a real. */
static int plain_u64(st_scan* s, uint64_t* v)
{
    skip_ws(s);
    const unsigned char* q = s->p;
    uint64_t x = 0;
    while (q < s->end && *q >= '0' && *q <= '9') {
        if (q - s->p == 18) return 0;
        x = x * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (q == s->p || (q - s->p > 1 && *s->p == '0')) return 0;
    if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E')) return 0;
    *v = x;
    s->p = q;
    return 1;
}

/* [integer, ...] of at most max entries. */
static int plain_u64_array(st_scan* s, uint64_t* v, size_t max, size_t* n)
{
    *n = 0;
    if (!eat(s, '[')) return 0;
    if (eat(s, ']')) return 1;
    for (;;) {
        if (*n == max || !plain_u64(s, &v[(*n)++])) return 0;
        if (eat(s, ']')) return 1;
        if (!eat(s, ',')) return 0;
    }
}

static int is_key(const char* k, size_t kl, const char* name)
{
    return kl == strlen(name) && memcmp(k, name, kl) == 0;
}

/* {"dtype": string, "shape": [..], "data_offsets": [a, b]} in any order. */
static int fast_entry(st_scan* s, lmc_st_tensor* t, uint64_t header_total, int* bad)
{
    const char *ds = NULL, *k;
    size_t dl = 0, kl, nd = 0, no = 0;
    uint64_t dims[LMC_ST_MAX_DIMS], off[2];
    unsigned seen = 0;
    if (!eat(s, '{')) return 0;
    for (int i = 0; i < 3; i++) {
        if (!plain_string(s, &k, &kl) || !eat(s, ':')) return 0;
        unsigned const f = is_key(k, kl, "dtype") ? 1u : is_key(k, kl, "shape") ? 2u : is_key(k, kl, "data_offsets") ? 4u : 0u;
        if (!f || (seen & f)) return 0;
        seen |= f;
        if (f == 1 && !plain_string(s, &ds, &dl)) return 0;
        if (f == 2 && !plain_u64_array(s, dims, LMC_ST_MAX_DIMS, &nd)) return 0;
        if (f == 4 && (!plain_u64_array(s, off, 2, &no) || no != 2)) return 0;
        if (!eat(s, i < 2 ? ',' : '}')) return 0;
    }
    *bad = fill_entry(t, ds, dl, dims, nd, off[0], off[1], header_total) != 0;
    return 1;
}

/* {"key": "value", ...} with distinct keys (few: more declines). */
static int fast_metadata(st_scan* s)
{
    enum { MAX_KEYS = 64 };
    const char *k[MAX_KEYS], *v;
    size_t kl[MAX_KEYS], vl, n = 0;
    if (!eat(s, '{')) return 0;
    if (eat(s, '}')) return 1;
    for (;;) {
        if (n == MAX_KEYS || !plain_string(s, &k[n], &kl[n]) || !eat(s, ':') || !plain_string(s, &v, &vl)) return 0;
        for (size_t i = 0; i < n; i++)
            if (kl[i] == kl[n] && memcmp(k[i], k[n], kl[n]) == 0) return 0;
        n++;
        if (eat(s, '}')) return 1;
        if (!eat(s, ',')) return 0;
    }
}

static int parse_fast(lmc_st_info* info, const char* hdr, uint64_t n, uint64_t header_total, uint64_t file_size)
{
    st_scan s = { (const unsigned char*)hdr, (const unsigned char*)hdr + n };
    size_t cap = 0;
    int meta = 0;
    if (!eat(&s, '{')) return ST_DECLINED;
    if (!eat(&s, '}')) {
        for (;;) {
            const char* k;
            size_t kl;
            if (!plain_string(&s, &k, &kl) || !eat(&s, ':')) return ST_DECLINED;
            if (is_key(k, kl, st_meta_key)) {
                if (meta++ || !fast_metadata(&s)) return ST_DECLINED;
            } else {
                if (info->count == cap) {
                    size_t const nc = cap ? 2 * cap : 64;
                    lmc_st_tensor* const v = (lmc_st_tensor*)realloc(info->tensors, nc * sizeof *v);
                    if (v == NULL) return -1;
                    info->tensors = v;
                    cap = nc;
                }
                lmc_st_tensor* const t = &info->tensors[info->count];
                int bad = 0;
                if (!fast_entry(&s, t, header_total, &bad)) return ST_DECLINED;
                if (bad) return -1;
                if (set_name(t, k, kl)) return -1;
                info->count++;
            }
            if (eat(&s, '}')) break;
            if (!eat(&s, ',')) return ST_DECLINED;
        }
    }
    skip_ws(&s);
    if (s.p != s.end) return ST_DECLINED;
    if (finish(info, header_total, file_size)) return -1;
    /* a name twice: jansson's JSON_REJECT_DUPLICATES refuses it */
    for (size_t i = 1; i < info->count; i++) {
        const lmc_st_tensor* const a = &info->tensors[info->by_name[i - 1]];
        const lmc_st_tensor* const b = &info->tensors[info->by_name[i]];
        if (name_cmp(a->name, a->name_len, b->name, b->name_len) == 0) return ST_DECLINED;
    }
    return 0;
}

int lmc_st_parse_with(lmc_st_info* info, const void* buf, size_t avail, uint64_t file_size, lmc_st_parser how)
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

    int r = ST_DECLINED;
    if (how != LMC_ST_JSON_LIB) {
        r = parse_fast(info, hdr, n, header_total, file_size);
        if (r != 0) lmc_st_free(info);
        if (r == ST_DECLINED && how == LMC_ST_FAST_ONLY) return LMC_ST_DECLINED;
    }
    if (r == ST_DECLINED) {
        r = parse_json_lib(info, hdr, n, header_total, file_size);
        if (r != 0) lmc_st_free(info);
    }
    return r == 0 ? 0 : -1;
}

int lmc_st_parse(lmc_st_info* info, const void* buf, size_t avail, uint64_t file_size)
{
    return lmc_st_parse_with(info, buf, avail, file_size, LMC_ST_ANY);
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
