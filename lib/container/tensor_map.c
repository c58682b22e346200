/* tensor_map.c - the public face of the safetensors parser (lmc.h, "Containers"). */
#include <stdlib.h>
#include <string.h>
#include "lmc.h"
#include "error.h"
#include "safetensors.h"

struct lmc_tensor_map_s {
    lmc_st_info      st;
    lmc_tensor_info* t;
};

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
        t->dtype = (lmc_dtype)s->dtype; t->width = s->width;
        t->ndim = s->ndim; t->shape = s->shape;
        t->offset = s->begin; t->size = s->end - s->begin;
    }
    *out = m;
    return 0;
}

size_t lmc_tensor_map_count(const lmc_tensor_map* m) { return m ? m->st.count : 0; }

const lmc_tensor_info* lmc_tensor_map_get(const lmc_tensor_map* m, size_t i)
{
    return (m && i < m->st.count) ? &m->t[i] : NULL;
}

long lmc_tensor_map_find(const lmc_tensor_map* m, const char* name, size_t name_len)
{
    return (m && name) ? lmc_st_find(&m->st, name, name_len) : -1;
}

uint64_t lmc_tensor_map_header_size(const lmc_tensor_map* m) { return m ? m->st.header_total : 0; }

void lmc_tensor_map_free(lmc_tensor_map* m)
{
    if (!m) return;
    lmc_st_free(&m->st);
    free(m->t);
    free(m);
}
