/*
 * manifest.c - the snapshot store's manifest (doc/store.md).
 *
 * The manifest is read from disk, so it is hostile input: every field is
 * type- and range-checked, names are restricted to safe relative paths, frame
 * file names to one fixed pattern, and the chain structure (parents, depths)
 * is verified before any other code relies on it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "lmc.h"
#include "error.h"
#include "manifest.h"

static size_t fail(char* err, size_t cap, size_t code, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t fail(char* err, size_t cap, size_t code, const char* fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

void lmc_manifest_init(lmc_manifest* m)
{
    memset(m, 0, sizeof *m);
    m->keyframe_every = LMC_STORE_KEYFRAME_EVERY_DEFAULT;
}

void lmc_manifest_free(lmc_manifest* m)
{
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) free(m->e[i].name);
    free(m->e);
    lmc_manifest_init(m);
}

int lmc_store_name_ok(const char* name, size_t len)
{
    size_t comp = 0;  /* length of the current component */
    if (!name || len == 0 || len > LMC_STORE_NAME_MAX) return 0;
    for (size_t i = 0; i <= len; i++) {
        unsigned char c = i < len ? (unsigned char)name[i] : '/';
        if (i < len && (c < 0x20 || c == 0x7f || c == '\\')) return 0;
        if (c == '/') {
            const char* s = name + i - comp;
            if (comp == 0) return 0;
            if (comp == 1 && s[0] == '.') return 0;
            if (comp == 2 && s[0] == '.' && s[1] == '.') return 0;
            comp = 0;
        } else {
            comp++;
        }
    }
    return 1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int parse_hex64(const char* s, size_t len, uint64_t* v)
{
    uint64_t x = 0;
    if (len != 16) return -1;
    for (size_t i = 0; i < 16; i++) {
        int h = hexval((unsigned char)s[i]);
        if (h < 0) return -1;
        x = (x << 4) | (uint64_t)h;
    }
    *v = x;
    return 0;
}

/* "frames/" + 16 lower-case hex digits + ".lmc"; *id receives the number. */
static int frame_name_ok(const char* s, size_t len, uint64_t* id)
{
    if (len != LMC_FRAME_NAME_LEN) return 0;
    if (memcmp(s, "frames/", 7) != 0 || memcmp(s + 23, ".lmc", 4) != 0) return 0;
    return parse_hex64(s + 7, 16, id) == 0;
}

static int get_int(json_t* o, const char* key, int64_t lo, int64_t hi, int64_t* v)
{
    json_t* x = json_object_get(o, key);
    json_int_t i;
    if (!x || !json_is_integer(x)) return -1;
    i = json_integer_value(x);
    if (i < lo || i > hi) return -1;
    *v = (int64_t)i;
    return 0;
}

static int cmp_step_name(const lmc_mentry* a, const lmc_mentry* b)
{
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int qcmp_entries(const void* a, const void* b)
{
    return cmp_step_name((const lmc_mentry*)a, (const lmc_mentry*)b);
}

/* for sorting by (name, step) and by frame: (pointer, index) pairs, so that qsort needs no context */
typedef struct { const lmc_mentry* e; long i; } lmc_eref;

static int qcmp_chain(const void* a, const void* b)
{
    const lmc_mentry* x = ((const lmc_eref*)a)->e;
    const lmc_mentry* y = ((const lmc_eref*)b)->e;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return 0;
}

static int qcmp_frames(const void* a, const void* b)
{
    return strcmp(((const lmc_eref*)a)->e->frame, ((const lmc_eref*)b)->e->frame);
}

size_t lmc_manifest_link(lmc_manifest* m, int fix_depth, char* err, size_t errcap)
{
    lmc_eref* idx;
    size_t n = m->count;
    size_t r = 0;
    if (n == 0) return 0;
    qsort(m->e, n, sizeof *m->e, qcmp_entries);
    idx = (lmc_eref*)malloc(n * sizeof *idx);
    if (!idx) return fail(err, errcap, LMC_ERR(MEMORY), "out of memory");
    for (size_t i = 0; i < n; i++) { idx[i].e = &m->e[i]; idx[i].i = (long)i; m->e[i].prev = m->e[i].next = -1; }
    qsort(idx, n, sizeof *idx, qcmp_frames);
    for (size_t i = 1; i < n && !r; i++)
        if (strcmp(idx[i].e->frame, idx[i - 1].e->frame) == 0)
            r = fail(err, errcap, LMC_ERR(STORE), "frame file %s is used by two snapshots", idx[i].e->frame);
    if (!r) qsort(idx, n, sizeof *idx, qcmp_chain);
    for (size_t i = 0; i < n && !r; i++) {
        lmc_mentry* e = &m->e[idx[i].i];
        lmc_mentry* p = NULL;
        if (i > 0 && strcmp(idx[i - 1].e->name, e->name) == 0) {
            p = &m->e[idx[i - 1].i];
            if (p->step == e->step) {
                r = fail(err, errcap, LMC_ERR(STORE), "step %lld holds '%s' twice", (long long)e->step, e->name);
                break;
            }
            e->prev = idx[i - 1].i;
            p->next = idx[i].i;
        }
        if (fix_depth) {
            if (e->parent >= 0 && p) { e->parent = p->step; e->depth = p->depth + 1; }
            else { e->parent = -1; e->depth = 0; }
        } else if (e->parent < 0) {
            if (e->depth != 0)
                r = fail(err, errcap, LMC_ERR(STORE), "keyframe step %lld '%s' has depth %u", (long long)e->step, e->name, e->depth);
        } else if (!p || p->step != e->parent) {
            r = fail(err, errcap, LMC_ERR(STORE), "step %lld '%s': parent %lld is not the previous snapshot of that name",
                     (long long)e->step, e->name, (long long)e->parent);
        } else if (e->depth != p->depth + 1) {
            r = fail(err, errcap, LMC_ERR(STORE), "step %lld '%s': depth %u, expected %u",
                     (long long)e->step, e->name, e->depth, p->depth + 1);
        }
    }
    free(idx);
    return r;
}

size_t lmc_manifest_push(lmc_manifest* m, const lmc_mentry* e)
{
    if (m->count == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        lmc_mentry* ne = (lmc_mentry*)realloc(m->e, nc * sizeof *ne);
        if (!ne) return LMC_ERR(MEMORY);
        m->e = ne;
        m->cap = nc;
    }
    m->e[m->count++] = *e;
    return 0;
}

static size_t parse_entry(lmc_manifest* m, json_t* o, size_t k, char* err, size_t errcap)
{
    lmc_mentry e;
    json_t* x;
    int64_t v;
    uint64_t id;
    const char* s;
    size_t len;
    int kf;

    memset(&e, 0, sizeof e);
    if (!json_is_object(o)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu is not an object", k);
    if (get_int(o, "step", 0, LMC_STORE_STEP_MAX, &e.step))
        return fail(err, errcap, LMC_ERR(STORE), "entry %zu: missing or invalid step", k);
    x = json_object_get(o, "name");
    if (!json_is_string(x)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: missing name", k);
    s = json_string_value(x);
    len = json_string_length(x);
    if (strlen(s) != len || !lmc_store_name_ok(s, len))
        return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid file name", k);
    x = json_object_get(o, "frame");
    if (!json_is_string(x) || !frame_name_ok(json_string_value(x), json_string_length(x), &id))
        return fail(err, errcap, LMC_ERR(STORE), "entry %zu: missing or invalid frame file name", k);
    if (id >= m->next_id) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: frame id not below next_id", k);
    memcpy(e.frame, json_string_value(x), LMC_FRAME_NAME_LEN + 1);
    x = json_object_get(o, "keyframe");
    if (!json_is_boolean(x)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: missing keyframe flag", k);
    kf = json_is_true(x);
    x = json_object_get(o, "parent");
    if (kf) {
        if (!x || !json_is_null(x)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: a keyframe has a null parent", k);
        e.parent = -1;
    } else {
        if (get_int(o, "parent", 0, LMC_STORE_STEP_MAX, &e.parent) || e.parent >= e.step)
            return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid parent step", k);
    }
    if (get_int(o, "depth", 0, LMC_STORE_K_MAX, &v)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid depth", k);
    e.depth = (unsigned)v;
    if (get_int(o, "content_size", 0, INT64_MAX, &v)) return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid content_size", k);
    e.content_size = (uint64_t)v;
    if (get_int(o, "frame_size", LMC_FRAME_HEADER_SIZE, INT64_MAX, &v))
        return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid frame_size", k);
    e.frame_size = (uint64_t)v;
    x = json_object_get(o, "content_hash");
    if (!json_is_string(x) || parse_hex64(json_string_value(x), json_string_length(x), &e.content_hash))
        return fail(err, errcap, LMC_ERR(STORE), "entry %zu: invalid content_hash", k);
    e.name = strdup(s);
    if (!e.name) return fail(err, errcap, LMC_ERR(MEMORY), "out of memory");
    if (LMC_IS_ERR(lmc_manifest_push(m, &e))) { free(e.name); return fail(err, errcap, LMC_ERR(MEMORY), "out of memory"); }
    return 0;
}

size_t lmc_manifest_parse(lmc_manifest* m, const char* json, size_t size, char* err, size_t errcap)
{
    json_error_t je;
    json_t *root, *x, *entries;
    int64_t v;
    size_t r = 0;

    lmc_manifest_init(m);
    if (size > LMC_MANIFEST_MAX_SIZE) return fail(err, errcap, LMC_ERR(STORE), "manifest too large");
    root = json_loadb(json, size, JSON_REJECT_DUPLICATES, &je);
    if (!root) return fail(err, errcap, LMC_ERR(STORE), "manifest is not valid JSON (line %d: %s)", je.line, je.text);
    if (!json_is_object(root)) { r = fail(err, errcap, LMC_ERR(STORE), "manifest is not a JSON object"); goto out; }
    x = json_object_get(root, "format");
    if (!json_is_string(x) || strcmp(json_string_value(x), LMC_MANIFEST_FORMAT) != 0) {
        r = fail(err, errcap, LMC_ERR(STORE), "not an lmc store manifest (format is not \"%s\")", LMC_MANIFEST_FORMAT);
        goto out;
    }
    if (get_int(root, "version", 1, INT32_MAX, &v)) { r = fail(err, errcap, LMC_ERR(STORE), "invalid manifest version"); goto out; }
    if (v > LMC_MANIFEST_VERSION) {
        r = fail(err, errcap, LMC_ERR(VERSION), "manifest version %lld is newer than this lmc supports (%d)", (long long)v, LMC_MANIFEST_VERSION);
        goto out;
    }
    if (get_int(root, "keyframe_every", 1, LMC_STORE_K_MAX, &v)) { r = fail(err, errcap, LMC_ERR(STORE), "invalid keyframe_every"); goto out; }
    m->keyframe_every = (unsigned)v;
    if (get_int(root, "next_id", 0, INT64_MAX, &v)) { r = fail(err, errcap, LMC_ERR(STORE), "invalid next_id"); goto out; }
    m->next_id = (uint64_t)v;
    entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) { r = fail(err, errcap, LMC_ERR(STORE), "missing entries array"); goto out; }
    for (size_t k = 0; k < json_array_size(entries); k++) {
        r = parse_entry(m, json_array_get(entries, k), k, err, errcap);
        if (LMC_IS_ERR(r)) goto out;
    }
    r = lmc_manifest_link(m, 0, err, errcap);
out:
    json_decref(root);
    if (LMC_IS_ERR(r)) lmc_manifest_free(m);
    return r;
}

char* lmc_manifest_dump(const lmc_manifest* m)
{
    json_t* root = json_object();
    json_t* entries = json_array();
    char* out = NULL;
    int bad = !root || !entries;
    if (!bad) {
        bad |= json_object_set_new(root, "format", json_string(LMC_MANIFEST_FORMAT));
        bad |= json_object_set_new(root, "version", json_integer(LMC_MANIFEST_VERSION));
        bad |= json_object_set_new(root, "keyframe_every", json_integer((json_int_t)m->keyframe_every));
        bad |= json_object_set_new(root, "next_id", json_integer((json_int_t)m->next_id));
    }
    for (size_t i = 0; !bad && i < m->count; i++) {
        const lmc_mentry* e = &m->e[i];
        char hex[17];
        json_t* o = json_object();
        if (!o) { bad = 1; break; }
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)e->content_hash);
        bad |= json_object_set_new(o, "step", json_integer((json_int_t)e->step));
        bad |= json_object_set_new(o, "name", json_string(e->name));
        bad |= json_object_set_new(o, "frame", json_string(e->frame));
        bad |= json_object_set_new(o, "keyframe", json_boolean(e->parent < 0));
        bad |= json_object_set_new(o, "parent", e->parent < 0 ? json_null() : json_integer((json_int_t)e->parent));
        bad |= json_object_set_new(o, "depth", json_integer((json_int_t)e->depth));
        bad |= json_object_set_new(o, "content_size", json_integer((json_int_t)e->content_size));
        bad |= json_object_set_new(o, "content_hash", json_string(hex));
        bad |= json_object_set_new(o, "frame_size", json_integer((json_int_t)e->frame_size));
        bad |= json_array_append_new(entries, o);
    }
    if (!bad) {
        bad |= json_object_set_new(root, "entries", entries);
        entries = NULL;
    }
    if (!bad) out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(entries);
    json_decref(root);
    if (out) {  /* end with a newline, like a text file */
        size_t n = strlen(out);
        char* o2 = (char*)realloc(out, n + 2);
        if (!o2) { free(out); return NULL; }
        o2[n] = '\n'; o2[n + 1] = 0;
        out = o2;
    }
    return out;
}

long lmc_manifest_find(const lmc_manifest* m, int64_t step, const char* name)
{
    size_t lo = 0, hi = m->count;
    lmc_mentry key;
    key.step = step;
    key.name = (char*)name;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_step_name(&m->e[mid], &key);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

long lmc_manifest_last_of(const lmc_manifest* m, const char* name)
{
    for (size_t i = m->count; i-- > 0;)
        if (strcmp(m->e[i].name, name) == 0) return (long)i;
    return -1;
}
