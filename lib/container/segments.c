/* segments.c - container -> segment list. Decoders never see this: every
 * piece in a frame carries its own width, layout and reference offset, so a
 * wrong guess here only costs ratio, never correctness. */
#include <stdlib.h>
#include <string.h>
#include "segments.h"
#include "safetensors.h"
#include "torchzip.h"
#include "error.h"
#include "mem.h"

static int is_float(unsigned dt)
{
    return dt == LMC_DTYPE_BF16 || dt == LMC_DTYPE_F16 || dt == LMC_DTYPE_F32 || dt == LMC_DTYPE_F64;
}

static int push(lmc_segs* s, uint64_t off, uint64_t len, unsigned width, unsigned dtype, int xr, uint64_t ref_off)
{
    if (len == 0) return 0;
    if (s->n == s->cap) {
        size_t const nc = s->cap ? s->cap * 2 : 16;
        lmc_seg* const v = (lmc_seg*)realloc(s->v, nc * sizeof(*v));
        if (!v) return -1;
        s->v = v; s->cap = nc;
    }
    lmc_seg* const g = &s->v[s->n++];
    g->off = off; g->len = len; g->ref_off = ref_off;
    g->width = (uint8_t)width; g->dtype = (uint8_t)dtype; g->xor_ref = (uint8_t)(xr != 0);
    g->float_like = (uint8_t)(is_float(dtype) && width > 1);
    g->row = 0;
    g->detect = 0;
    return 0;
}

/* The last segment pushed is tensor t: its row length, for order-1 contexts
 * one row up (doc/format.md, "ANS1"). */
static void set_row(lmc_segs* s, const lmc_st_tensor* t)
{
    if (s->n && t->ndim >= 2 && t->shape[t->ndim - 1] <= 65535) s->v[s->n - 1].row = (uint32_t)t->shape[t->ndim - 1];
}

/* [off, end): coded with `width`, XORed against the reference at the same
 * offset for the bytes the reference has. end may be UINT64_MAX. */
static int push_same_offset(lmc_segs* s, uint64_t off, uint64_t end, unsigned width, unsigned dtype,
                            const uint8_t* ref, size_t ref_size)
{
    if (ref && off < ref_size) {
        uint64_t const x = LMC_MIN(end, (uint64_t)ref_size);
        if (push(s, off, x - off, width, dtype, 1, off)) return -1;
        off = x;
    }
    if (off < end) return push(s, off, end - off, width, dtype, 0, 0);
    return 0;
}

uint64_t lmc_segs_prefix_needed(lmc_format fmt, const uint8_t* head, size_t avail, uint64_t file_size)
{
    if (fmt == LMC_FORMAT_TORCH_ZIP || (fmt == LMC_FORMAT_AUTO && lmc_tz_probe(head, avail))) {
        /* a zip's directory is at its end: only a whole, not too large file will do */
        if (avail < 4) return 4;
        /* all here (a caller's whole buffer, or a mapped file): any size will do */
        if (!lmc_tz_probe(head, avail) || file_size <= avail || file_size > LMC_TZ_MAX_BUFFERED) return 0;
        return file_size;
    }
    if (fmt != LMC_FORMAT_AUTO && fmt != LMC_FORMAT_SAFETENSORS) return 0;
    if (avail < 8) return 8;
    uint64_t total;
    if (!lmc_st_probe(head, avail, &total)) return 0;
    return total <= avail ? 0 : total;
}

static int same_shape(const lmc_st_tensor* a, const lmc_st_tensor* b)
{
    if (a->dtype != b->dtype || a->width != b->width || a->ndim != b->ndim) return 0;
    if (a->end - a->begin != b->end - b->begin) return 0;
    for (uint32_t d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static int build_safetensors(lmc_segs* s, const lmc_st_info* in, const uint8_t* head, const uint8_t* ref, size_t ref_size)
{
    lmc_st_info ri;
    memset(&ri, 0, sizeof(ri));
    /* Consecutive checkpoints of a run have the same header, byte for byte
     * (names, dtypes, shapes, offsets): its parse is the one at hand. A
     * parse costs about 85 us for a 4.5 KB header (jansson), 2 % of
     * compressing the 6.6 MB bf16 delta of bench/data/traj-3m. The sizes must
     * agree too: a parse checks that the tensors end where the file does. */
    int const same_header = ref && ref_size == in->data_end && !memcmp(ref, head, in->header_total);
    int const have_ri = same_header || (ref && lmc_st_parse(&ri, ref, ref_size, ref_size) == 0);
    const lmc_st_info* const rinfo = same_header ? in : &ri;
    int rc = 0;
    /* the header is kept verbatim; against a reference it is mostly equal bytes */
    if (push_same_offset(s, 0, in->header_total, 1, LMC_DTYPE_BYTES, ref, ref_size)) { rc = -1; goto out; }
    for (size_t i = 0; i < in->count; i++) {
        const lmc_st_tensor* const t = &in->tensors[i];
        if (t->end == t->begin) continue;
        s->tensors_total++;
        long const j = same_header ? (long)i : have_ri ? lmc_st_find(rinfo, t->name, t->name_len) : -1;
        if (j >= 0 && same_shape(t, &rinfo->tensors[j])) {
            s->tensors_matched++;
            if (push(s, t->begin, t->end - t->begin, t->width, t->dtype, 1, rinfo->tensors[j].begin)) { rc = -1; goto out; }
        } else {
            if (push(s, t->begin, t->end - t->begin, t->width, t->dtype, 0, 0)) { rc = -1; goto out; }
        }
        set_row(s, t);
    }
    if (push(s, in->data_end, UINT64_MAX - in->data_end, 1, LMC_DTYPE_BYTES, 0, 0)) rc = -1;
out:
    lmc_st_free(&ri);
    return rc;
}

/* torch.save zip: storages coded with their dtype width (against the storage
 * of the same key in the reference when its size and dtype match); every
 * other byte (zip headers, data.pkl, directory) width 1, against the
 * reference at the same offset. In a delta, the zip entry header between
 * two storages (at most TZ_GAP_MAX bytes, a whole number of the first one's
 * values, as far from the first as in the reference) ends the first one's
 * segment: coded as its values against the reference's header, which
 * differs in the CRC alone, it costs a few bytes, where a piece of its own
 * between two float pieces took a piece header and a code table (and
 * small storages, kept apart by it, could not share a piece). The next
 * storage still starts a segment: blocks do not mix two large tensors.
 * bench/data/traj-3m's moments saved by torch.save (106 storages), step
 * 600 against 500: 238 pieces -> 81, 21105904 -> 21105942 bytes, coded 13 %
 * slower than the same tensors in safetensors before, 8-9 % after; its
 * bf16 weights 2706794 -> 2704084 bytes. (Whole tensors with their headers
 * as one segment: 28 pieces, but blocks mixing the two moments, 1 % larger.)
 * A keyframe keeps its headers as bytes: as values, in byte groups with no
 * reference to match, they made the bf16 file 0.17 % larger. */
#define TZ_GAP_MAX 1024

/* The segments of one archive's storages (its offsets count from base in
 * the file), against the reference's archive ri at rbase (NULL: none), the
 * bytes before each from *pos on. */
static int tz_storages(lmc_segs* s, const lmc_tz_info* in, uint64_t base, const lmc_tz_info* ri, uint64_t rbase,
                       const uint8_t* ref, size_t ref_size, uint64_t* pos)
{
    for (size_t i = 0; i < in->count; i++) {
        const lmc_tz_storage* const t = &in->v[i];
        uint64_t const off = base + t->off;
        s->tensors_total++;
        long const j = ri ? lmc_tz_find(ri, t->key, t->key_len) : -1;
        int const matched = j >= 0 && ri->v[j].len == t->len && ri->v[j].dtype == t->dtype && ri->v[j].width == t->width;
        uint64_t const roff = matched ? rbase + ri->v[j].off : 0;
        if (matched && s->n) {
            lmc_seg* const last = &s->v[s->n - 1];
            uint64_t const gap = off - *pos;
            if (last->xor_ref && last->float_like && last->off + last->len == *pos && gap <= TZ_GAP_MAX
                && gap % last->width == 0 && last->ref_off + last->len + gap == roff) {
                last->len += gap;
                *pos = off;
            }
        }
        if (push_same_offset(s, *pos, off, 1, LMC_DTYPE_BYTES, ref, ref_size)) return -1;
        if (push(s, off, t->len, t->width, t->dtype, matched, roff)) return -1;
        s->tensors_matched += (uint64_t)matched;
        s->v[s->n - 1].row = t->row;   /* storages are never empty: that push made a segment */
        *pos = off + t->len;
    }
    return 0;
}

/* The rest of the file from pos: bytes against the reference at the same
 * offset. Bytes between storages hold storages of a type the pickle scan
 * did not know, or entries it could not place: the chunk encoder looks for
 * floats in them as in generic mode (a few KiB of zip and pickle come out
 * as bytes, as before). */
static int tz_finish(lmc_segs* s, uint64_t pos, const uint8_t* ref, size_t ref_size)
{
    if (push_same_offset(s, pos, UINT64_MAX, 1, LMC_DTYPE_BYTES, ref, ref_size)) return -1;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].dtype == LMC_DTYPE_BYTES) s->v[i].detect = 1;
    return 0;
}

static int build_torchzip(lmc_segs* s, const lmc_tz_info* in, const uint8_t* ref, size_t ref_size)
{
    lmc_tz_info ri;
    memset(&ri, 0, sizeof(ri));
    int const have_ri = ref && lmc_tz_parse(&ri, ref, ref_size) == 0;
    uint64_t pos = 0;
    int const rc = tz_storages(s, in, 0, have_ri ? &ri : NULL, 0, ref, ref_size, &pos) || tz_finish(s, pos, ref, ref_size);
    lmc_tz_free(&ri);
    return rc ? -1 : 0;
}

/* Back-to-back torch.save archives: torch's distributed checkpoints write a
 * torch.save per tensor into each file, one after another (bench/data/
 * traj-3m's bf16 weights so written are 53, its moments 106). Archive k is
 * coded against the reference's archive k, as one archive is against the
 * reference's; bytes before the first, and archives that do not parse, go
 * as bytes. In generic mode, which found the floats in them, the bf16 and
 * moments deltas (step 600 against 500) coded to 2730226 and 21271481
 * bytes at 1058-1093 and 819-987 MB/s (`lmc -b -T1`); so, to 2706512 and
 * 21106269 at 1384-1413 and 1296-1458. The 747 bytes between two
 * archives' storages join the first's segment only when they are whole
 * values, as between the storages of one archive: absorbing odd ones too
 * (the segment then ends in a part of a value, and small storages after it
 * could not share its piece) gave 2705346 and 21120023 bytes at 1249-1267
 * and 1316-1339 MB/s. Returns 1 when f is not two or more such archives
 * (s unchanged). */
static int build_torchzips(lmc_segs* s, const uint8_t* f, size_t n, const uint8_t* ref, size_t ref_size)
{
    size_t *at = NULL, *rat = NULL;
    long const na = lmc_tz_split(f, n, &at);
    if (na < 2) { free(at); return na < 0 ? -1 : 1; }
    long const nr = ref ? lmc_tz_split(ref, ref_size, &rat) : 0;
    if (nr < 0) { free(at); return -1; }
    uint64_t pos = 0;
    int rc = 0;
    long parsed = 0;
    for (long k = 0; k < na && !rc; k++) {
        lmc_tz_info in, ri;
        if (lmc_tz_parse(&in, f + at[k], at[k + 1] - at[k]) != 0) continue;
        parsed++;
        int const have_ri = k < nr && lmc_tz_parse(&ri, ref + rat[k], rat[k + 1] - rat[k]) == 0;
        rc = tz_storages(s, &in, at[k], have_ri ? &ri : NULL, have_ri ? rat[k] : 0, ref, ref_size, &pos);
        lmc_tz_free(&in);
        if (have_ri) lmc_tz_free(&ri);
    }
    if (!rc && !parsed) { free(at); free(rat); return 1; }   /* archives, but none of torch's: generic mode */
    if (!rc) rc = tz_finish(s, pos, ref, ref_size);
    free(at); free(rat);
    return rc ? -1 : 0;
}

size_t lmc_segs_build(lmc_segs* s, lmc_format fmt, lmc_dtype dtype, const uint8_t* head, size_t avail,
                      uint64_t file_size, const uint8_t* ref, size_t ref_size)
{
    lmc_segs_free(s);
    if ((fmt == LMC_FORMAT_AUTO || fmt == LMC_FORMAT_TORCH_ZIP) && lmc_tz_probe(head, avail)
        && file_size != UINT64_MAX && (uint64_t)avail == file_size) {
        /* one archive, or several one after another: judged from the last
         * one's start, since a run of archives of one layout (a tensor's
         * each) could make the whole file's end records read as the first's */
        size_t const last = lmc_tz_archive_start(head, avail);
        lmc_tz_info info;
        if ((last == 0 || last == SIZE_MAX) && lmc_tz_parse(&info, head, avail) == 0) {
            s->format = LMC_FORMAT_TORCH_ZIP;
            int const rc = build_torchzip(s, &info, ref, ref_size);
            lmc_tz_free(&info);
            if (rc) { lmc_segs_free(s); return LMC_ERR(MEMORY); }
            return 0;
        }
        if (last != SIZE_MAX && last > 0) {
            int const rc = build_torchzips(s, head, avail, ref, ref_size);
            if (rc < 0) { lmc_segs_free(s); return LMC_ERR(MEMORY); }
            if (rc == 0) { s->format = LMC_FORMAT_TORCH_ZIP; return 0; }
        }
    }
    if (fmt == LMC_FORMAT_TORCH_ZIP) fmt = LMC_FORMAT_GENERIC;  /* not understood: coded as bytes */
    if (fmt == LMC_FORMAT_AUTO || fmt == LMC_FORMAT_SAFETENSORS) {
        lmc_st_info info;
        memset(&info, 0, sizeof(info));
        uint64_t total;
        if (lmc_st_probe(head, avail, &total) && total <= avail
            && lmc_st_parse(&info, head, avail, file_size) == 0) {
            s->format = LMC_FORMAT_SAFETENSORS;
            int const rc = build_safetensors(s, &info, head, ref, ref_size);
            lmc_st_free(&info);
            if (rc) { lmc_segs_free(s); return LMC_ERR(MEMORY); }
            return 0;
        }
        fmt = LMC_FORMAT_GENERIC;  /* not a valid container: never refused, coded as bytes */
    }
    unsigned width = 1, dt = LMC_DTYPE_BYTES;
    if (fmt == LMC_FORMAT_RAW) { dt = dtype; width = lmc_dtype_width(dtype); }
    else fmt = LMC_FORMAT_GENERIC;
    s->format = fmt;
    if (push_same_offset(s, 0, UINT64_MAX, width, dt, ref, ref_size)) { lmc_segs_free(s); return LMC_ERR(MEMORY); }
    /* bytes of unknown layout (generic, or raw without a dtype): the chunk
     * encoder looks for runs of floats in them (detect.h) */
    if (dt == LMC_DTYPE_BYTES)
        for (size_t i = 0; i < s->n; i++) s->v[i].detect = 1;
    return 0;
}

void lmc_segs_free(lmc_segs* s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

size_t lmc_segs_find(const lmc_segs* s, uint64_t off, size_t hint)
{
    size_t i = hint < s->n ? hint : 0;
    if (s->v[i].off > off) i = 0;
    while (i + 1 < s->n && s->v[i].off + s->v[i].len <= off) i++;
    return i;
}
