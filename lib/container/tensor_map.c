/* tensor_map.c - the public face of the safetensors and torch.save parsers (lmc.h, "Containers"). */
#include <stdio.h>
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

/* One archive's storages into m's entries from *i on, named "data/<key>"
 * (prefix "", one archive) or "a<k>/data/<key>" (archive k of several),
 * their offsets counted from the file's start (base: the archive's). */
static void tz_entries(lmc_tensor_map* m, size_t* i, char** nm, const lmc_tz_info* tz, const char* prefix,
                       uint64_t base)
{
    for (size_t s_i = 0; s_i < tz->count; s_i++, (*i)++) {   /* tz->v is in file order */
        const lmc_tz_storage* const s = &tz->v[s_i];
        lmc_tensor_info* const t = &m->t[*i];
        char* p = *nm;
        size_t const pl = strlen(prefix);
        memcpy(p, prefix, pl);
        memcpy(p + pl, "data/", 5);
        memcpy(p + pl + 5, s->key, s->key_len);
        p[pl + 5 + s->key_len] = 0;
        t->name = p; t->name_len = pl + 5 + s->key_len;
        p += t->name_len + 1;
        if (s->name) {
            memcpy(p, s->name, s->name_len);
            p[s->name_len] = 0;
            t->label = p; t->label_len = s->name_len;
            p += s->name_len + 1;
        }
        *nm = p;
        t->dtype = (lmc_dtype)s->dtype; t->width = s->width;
        m->numel[*i] = s->len / s->width;
        t->ndim = 1; t->shape = &m->numel[*i];
        t->offset = base + s->off; t->size = s->len;
        m->byname[*i].key = (const uint8_t*)t->name; m->byname[*i].key_len = t->name_len; m->byname[*i].index = *i;
    }
}

/* One torch.save archive, or several one after another (torch's distributed
 * checkpoints write a torch.save per tensor), found as the encoder finds
 * them (lmc_tz_split): archive k's storages are then "a<k>/data/<key>",
 * so that each keeps its name from one checkpoint to the next. Bytes before
 * the first archive, and archives that do not parse, hold no entries. */
size_t lmc_tensor_map_torch(lmc_tensor_map** out, const void* filev, size_t size)
{
    LMC_RETURN_IF(!out || (!filev && size), PARAM);
    *out = NULL;
    const uint8_t* const file = (const uint8_t*)filev;
    if (!file) return LMC_ERR(NOT_CONTAINER);
    size_t one[2] = { 0, size };
    size_t* at = one;
    long na = 1;
    /* the last archive's start, as lmc_segs_build judges: a run of archives
     * of one layout could make the whole file's end records read as the first's */
    size_t const last = lmc_tz_archive_start(file, size);
    if (last != 0 && last != SIZE_MAX) {
        na = lmc_tz_split(file, size, &at);
        LMC_RETURN_IF(na < 0, MEMORY);
    }
    lmc_tz_info* const tz = (lmc_tz_info*)calloc((size_t)na, sizeof(*tz));
    if (!tz) { if (at != one) free(at); return LMC_ERR(MEMORY); }
    size_t count = 0, chars = 0, parsed = 0;
    for (long k = 0; k < na; k++) {
        if (lmc_tz_parse(&tz[k], file + at[k], at[k + 1] - at[k]) != 0) continue;   /* left empty */
        parsed++;
        count += tz[k].count;
        for (size_t i = 0; i < tz[k].count; i++)
            chars += 24 + 5 + tz[k].v[i].key_len + 1 + (tz[k].v[i].name ? tz[k].v[i].name_len + 1 : 0);
    }
    size_t rc = 0;
    lmc_tensor_map* m = NULL;
    if (!parsed) { rc = LMC_ERR(NOT_CONTAINER); goto out; }
    m = (lmc_tensor_map*)calloc(1, sizeof(*m));
    if (m) {
        m->torch = 1;
        m->n = count;
        m->t = (lmc_tensor_info*)calloc(count ? count : 1, sizeof(*m->t));
        m->numel = (uint64_t*)calloc(count ? count : 1, sizeof(*m->numel));
        m->names = (char*)malloc(chars ? chars : 1);
        m->byname = (lmc_tz_keyref*)malloc((count ? count : 1) * sizeof(*m->byname));
    }
    if (!m || !m->t || !m->numel || !m->names || !m->byname) { lmc_tensor_map_free(m); m = NULL; rc = LMC_ERR(MEMORY); goto out; }
    size_t i = 0;
    char* nm = m->names;
    for (long k = 0; k < na; k++) {
        char prefix[24] = "";
        if (na > 1) snprintf(prefix, sizeof prefix, "a%ld/", k);
        tz_entries(m, &i, &nm, &tz[k], prefix, at[k]);
    }
    if (count) qsort(m->byname, count, sizeof(*m->byname), cmp_name);   /* keys are unique within an archive (lmc_tz_parse) */
    m->header = count ? m->t[0].offset : size;
    *out = m;
out:
    for (long k = 0; k < na; k++) lmc_tz_free(&tz[k]);
    free(tz);
    if (at != one) free(at);
    return rc;
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
