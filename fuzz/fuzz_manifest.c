/*
 * fuzz_manifest.c - libFuzzer target for the snapshot store's manifest parser
 * (lib/store/manifest.c). The input is a whole manifest.json. Whatever parses
 * must satisfy the invariants the store relies on (safe names, frame names of
 * the fixed pattern, consistent chains), and must survive a dump and re-parse
 * unchanged; a wrong accept aborts like a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmc.h"
#include "error.h"
#include "store/manifest.h"

static void check(const lmc_manifest* m)
{
    for (size_t i = 0; i < m->count; i++) {
        const lmc_mentry* e = &m->e[i];
        if (!lmc_store_name_ok(e->name, strlen(e->name))) abort();
        if (strlen(e->frame) != LMC_FRAME_NAME_LEN || memcmp(e->frame, "frames/", 7) != 0) abort();
        if (i > 0 && (m->e[i - 1].step > e->step || (m->e[i - 1].step == e->step && strcmp(m->e[i - 1].name, e->name) >= 0))) abort();
        if (e->parent < 0) { if (e->depth != 0) abort(); }
        else {
            if (e->prev < 0 || (size_t)e->prev >= m->count) abort();
            if (m->e[e->prev].step != e->parent || strcmp(m->e[e->prev].name, e->name) != 0) abort();
            if (e->depth != m->e[e->prev].depth + 1) abort();
        }
        if (e->next >= 0 && ((size_t)e->next >= m->count || m->e[e->next].prev != (long)i)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    lmc_manifest m, m2;
    char err[256];
    if (LMC_IS_ERR(lmc_manifest_parse(&m, (const char*)data, size, err, sizeof err))) {
        if (m.count != 0 || m.e != NULL) abort();
        return 0;
    }
    check(&m);
    {
        char* text = lmc_manifest_dump(&m);
        if (text) {
            if (LMC_IS_ERR(lmc_manifest_parse(&m2, text, strlen(text), err, sizeof err))) abort();
            if (m2.count != m.count || m2.next_id != m.next_id || m2.keyframe_every != m.keyframe_every) abort();
            for (size_t i = 0; i < m.count; i++)
                if (m2.e[i].step != m.e[i].step || strcmp(m2.e[i].name, m.e[i].name) || strcmp(m2.e[i].frame, m.e[i].frame)
                    || m2.e[i].content_hash != m.e[i].content_hash || m2.e[i].depth != m.e[i].depth) abort();
            lmc_manifest_free(&m2);
            free(text);
        }
    }
    lmc_manifest_free(&m);
    return 0;
}
