/* tensor_map.c - the public face of the safetensors and torch.save parsers (lmc.h, "Containers"). */
#include <stdlib.h>
#include <string.h>
#include "lmc.h"
#include "error.h"
#include "safetensors.h"
#include "torchzip.h"

struct lmc_tensor_map_s {
    lmc_st_info      st;       /* safetensors: the parse, which owns names and shapes */
    lmc_tensor_info* t;
    size_t           n;
    uint64_t         header;   /* bytes before the first tensor */
    int              torch;
    char*            names;    /* torch: "data/<key>" strings, NUL-terminated */
    uint64_t*        numel;    /* torch: each entry's one dimension */
    lmc_tz_keyref*   byname;   /* torch: the entries sorted by name */
};

static int cmp_name(const void* x, const void* y)
{
    const lmc_tz_keyref* const a = (const lmc_tz_keyref*)x;
    const lmc_tz_keyref* const b = (const lmc_tz_keyref*)y;
    size_t const n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int const c = memcmp(a->key, b->key, n);
    return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

uint64_t lmc_safetensors_prefix(const void* head, size_t avail)
{
    uint64_t total;
    if (!head || avail < 8 || !lmc_st_probe(head, avail, &total)) return 0;
    return total;
}

size_t lmc_tensor_map_safetensors(lmc_tensor_map** out, const void* head, size_t avail, uint64_t file_size)
{
    LMC_RETURN_IF(!out || (!head && avail), PARAM);
    *out = NULL;
    lmc_tensor_map* const m = (lmc_tensor_map*)calloc(1, sizeof(*m));
    LMC_RETURN_IF(!m, MEMORY);
    uint64_t total;
    if (!head || !lmc_st_probe(head, avail, &total) || total > avail || lmc_st_parse(&m->st, head, avail, file_size) != 0) {
        free(m);
        return LMC_ERR(NOT_CONTAINER);
    }
    m->t = (lmc_tensor_info*)calloc(m->st.count ? m->st.count : 1, sizeof(*m->t));
    if (!m->t) { lmc_tensor_map_free(m); return LMC_ERR(MEMORY); }
    for (size_t i = 0; i < m->st.count; i++) {
        const lmc_st_tensor* const s = &m->st.tensors[i];
        lmc_tensor_info* const t = &m->t[i];
        t->name = s->name; t->name_len = s->name_len;
        t->label = s->name; t->label_len = s->name_len;
        t->dtype = (lmc_dtype)s->dtype; t->width = s->width;
        t->ndim = s->ndim; t->shape = s->shape;
        t->offset = s->begin; t->size = s->end - s->begin;
    }
    m->n = m->st.count;
    m->header = m->st.header_total;
    *out = m;
    return 0;
}

size_t lmc_tensor_map_torch(lmc_tensor_map** out, const void* file, size_t size)
{
    LMC_RETURN_IF(!out || (!file && size), PARAM);
    *out = NULL;
    lmc_tz_info tz;
    if (!file || lmc_tz_parse(&tz, (const uint8_t*)file, size) != 0) return LMC_ERR(NOT_CONTAINER);
    lmc_tensor_map* const m = (lmc_tensor_map*)calloc(1, sizeof(*m));
    size_t chars = 0;
    for (size_t i = 0; i < tz.count; i++) chars += 5 + tz.v[i].key_len + 1 + (tz.v[i].name ? tz.v[i].name_len + 1 : 0);
    if (m) {
        m->torch = 1;
        m->n = tz.count;
        m->t = (lmc_tensor_info*)calloc(tz.count ? tz.count : 1, sizeof(*m->t));
        m->numel = (uint64_t*)calloc(tz.count ? tz.count : 1, sizeof(*m->numel));
        m->names = (char*)malloc(chars ? chars : 1);
        m->byname = (lmc_tz_keyref*)malloc((tz.count ? tz.count : 1) * sizeof(*m->byname));
    }
    if (!m || !m->t || !m->numel || !m->names || !m->byname) { lmc_tz_free(&tz); lmc_tensor_map_free(m); return LMC_ERR(MEMORY); }
    char* nm = m->names;
    for (size_t i = 0; i < tz.count; i++) {   /* tz.v is in file order */
        const lmc_tz_storage* const s = &tz.v[i];
        lmc_tensor_info* const t = &m->t[i];
        memcpy(nm, "data/", 5);
        memcpy(nm + 5, s->key, s->key_len);
        nm[5 + s->key_len] = 0;
        t->name = nm; t->name_len = 5 + s->key_len;
        nm += t->name_len + 1;
        if (s->name) {
            memcpy(nm, s->name, s->name_len);
            nm[s->name_len] = 0;
            t->label = nm; t->label_len = s->name_len;
            nm += s->name_len + 1;
        }
        t->dtype = (lmc_dtype)s->dtype; t->width = s->width;
        m->numel[i] = s->len / s->width;
        t->ndim = 1; t->shape = &m->numel[i];
        t->offset = s->off; t->size = s->len;
        m->byname[i].key = (const uint8_t*)t->name; m->byname[i].key_len = t->name_len; m->byname[i].index = i;
    }
    if (tz.count) qsort(m->byname, tz.count, sizeof(*m->byname), cmp_name);   /* keys are unique (lmc_tz_parse) */
    m->header = tz.count ? tz.v[0].off : size;
    lmc_tz_free(&tz);
    *out = m;
    return 0;
}

size_t lmc_tensor_map_count(const lmc_tensor_map* m) { return m ? m->n : 0; }

const lmc_tensor_info* lmc_tensor_map_get(const lmc_tensor_map* m, size_t i)
{
    return (m && i < m->n) ? &m->t[i] : NULL;
}

long lmc_tensor_map_find(const lmc_tensor_map* m, const char* name, size_t name_len)
{
    if (!m || !name) return -1;
    if (!m->torch) return lmc_st_find(&m->st, name, name_len);
    lmc_tz_keyref const want = { (const uint8_t*)name, name_len, 0 };
    const lmc_tz_keyref* const hit = (const lmc_tz_keyref*)bsearch(&want, m->byname, m->n, sizeof(*m->byname), cmp_name);
    return hit ? (long)hit->index : -1;
}

uint64_t lmc_tensor_map_header_size(const lmc_tensor_map* m) { return m ? m->header : 0; }

void lmc_tensor_map_free(lmc_tensor_map* m)
{
    if (!m) return;
    lmc_st_free(&m->st);
    free(m->t);
    free(m->names);
    free(m->numel);
    free(m->byname);
    free(m);
}
