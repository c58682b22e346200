/* torchzip.c - torch.save archive -> storage spans and dtypes (internal).
 *
 * Why no zip library: the encoder only needs, for a handful of STORED
 * entries, where their bytes start and how long they are. libzip does not
 * expose an entry's data offset at all (it reads through zip_fread), and
 * minizip only through unzOpenCurrentFile + a custom memory I/O layer, with
 * zlib as a new dependency and a history of robustness bugs on hostile
 * archives. The part of the format needed here is small: end of central
 * directory (+ ZIP64 locator and record), central directory entries (+ the
 * ZIP64 extended-information extra field) and local file headers. It is
 * parsed below with every offset and length checked against the buffer, and
 * fuzzed by fuzz/fuzz_torchzip.c.
 *
 * Pickle: data.pkl is walked opcode by opcode with a small stack machine that
 * only models what is needed to read the persistent ids (strings, small
 * integers, globals, tuples, the memo). Nothing is ever executed or
 * unpickled. An opcode outside the pickle protocols 0-5 means "not
 * understood" and the whole archive falls back to generic mode. */
#include <stdlib.h>
#include <string.h>
#include "torchzip.h"
#include "lmc.h"

/*-*** little-endian reads (callers check bounds) ***-*/
static uint16_t r16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t r32(const uint8_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }
static uint64_t r64(const uint8_t* p) { return (uint64_t)r32(p) | ((uint64_t)r32(p + 4) << 32); }

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD    0x06054b50u
#define SIG_EOCD64  0x06064b50u
#define SIG_LOC64   0x07064b50u

int lmc_tz_probe(const void* buf, size_t avail)
{
    return avail >= 4 && r32((const uint8_t*)buf) == SIG_LOCAL;
}

/*-*** dtype names ***-*/
typedef struct { const char* name; uint8_t dtype, width; } dt_name;

static const dt_name k_storage_types[] = {   /* GLOBAL torch <Name>Storage */
    { "DoubleStorage", LMC_DTYPE_F64, 8 },   { "FloatStorage", LMC_DTYPE_F32, 4 },
    { "HalfStorage", LMC_DTYPE_F16, 2 },     { "BFloat16Storage", LMC_DTYPE_BF16, 2 },
    { "LongStorage", LMC_DTYPE_I64, 8 },     { "IntStorage", LMC_DTYPE_I32, 4 },
    { "ShortStorage", LMC_DTYPE_I16, 2 },    { "CharStorage", LMC_DTYPE_I8, 1 },
    { "ByteStorage", LMC_DTYPE_U8, 1 },      { "BoolStorage", LMC_DTYPE_BOOL, 1 },
    { "ComplexFloatStorage", LMC_DTYPE_F32, 4 }, { "ComplexDoubleStorage", LMC_DTYPE_F64, 8 },
    { "ComplexHalfStorage", LMC_DTYPE_F16, 2 },
    { "QInt8Storage", LMC_DTYPE_I8, 1 },     { "QUInt8Storage", LMC_DTYPE_U8, 1 },
    { "QInt32Storage", LMC_DTYPE_I32, 4 },
    { "UInt16Storage", LMC_DTYPE_U16, 2 },   { "UInt32Storage", LMC_DTYPE_U32, 4 },
    { "UInt64Storage", LMC_DTYPE_U64, 8 },
    { "Float8_e4m3fnStorage", LMC_DTYPE_F8_E4M3, 1 }, { "Float8_e5m2Storage", LMC_DTYPE_F8_E5M2, 1 },
};

static const dt_name k_dtypes[] = {          /* GLOBAL torch <dtype> (UntypedStorage + dtype) */
    { "float64", LMC_DTYPE_F64, 8 }, { "double", LMC_DTYPE_F64, 8 },
    { "float32", LMC_DTYPE_F32, 4 }, { "float", LMC_DTYPE_F32, 4 },
    { "float16", LMC_DTYPE_F16, 2 }, { "half", LMC_DTYPE_F16, 2 },
    { "bfloat16", LMC_DTYPE_BF16, 2 },
    { "int64", LMC_DTYPE_I64, 8 },   { "long", LMC_DTYPE_I64, 8 },
    { "int32", LMC_DTYPE_I32, 4 },   { "int", LMC_DTYPE_I32, 4 },
    { "int16", LMC_DTYPE_I16, 2 },   { "short", LMC_DTYPE_I16, 2 },
    { "int8", LMC_DTYPE_I8, 1 },     { "uint8", LMC_DTYPE_U8, 1 },   { "bool", LMC_DTYPE_BOOL, 1 },
    { "uint16", LMC_DTYPE_U16, 2 },  { "uint32", LMC_DTYPE_U32, 4 }, { "uint64", LMC_DTYPE_U64, 8 },
    { "complex64", LMC_DTYPE_F32, 4 }, { "cfloat", LMC_DTYPE_F32, 4 },
    { "complex128", LMC_DTYPE_F64, 8 }, { "cdouble", LMC_DTYPE_F64, 8 },
    { "float8_e4m3fn", LMC_DTYPE_F8_E4M3, 1 }, { "float8_e5m2", LMC_DTYPE_F8_E5M2, 1 },
};

static int eq(const uint8_t* p, size_t n, const char* s)
{
    size_t const k = strlen(s);
    return n == k && memcmp(p, s, k) == 0;
}

static const dt_name* lookup(const dt_name* t, size_t nt, const uint8_t* p, size_t n)
{
    for (size_t i = 0; i < nt; i++) if (eq(p, n, t[i].name)) return &t[i];
    return NULL;
}

/*-*** pickle walker ***-*/
/* V_UNSET: memo slot never put. V_STORAGE: what BINPERSID loaded. V_INTS: a
 * tuple of integers (a tensor's size or stride). V_TARGS: a tuple that starts
 * with a storage (a tensor's rebuild arguments); V_TENSOR: what REDUCE made
 * of one. */
enum { V_UNSET, V_OTHER, V_MARK, V_STR, V_INT, V_GLOBAL, V_PERSID, V_STORAGE, V_INTS, V_TARGS, V_TENSOR };

typedef struct {           /* a stack or memo value; strings point into the pickle */
    uint8_t  kind, dtype, width;
    uint32_t ao, al;       /* V_STR: text; V_GLOBAL: module; V_PERSID: storage key; V_INTS: ao items */
    uint32_t bo, bl;       /* V_GLOBAL: name; V_INTS: bo the item before the last (UINT32_MAX: other) */
    int64_t  i;            /* V_INT; V_INTS: the last item; V_STORAGE, V_TARGS, V_TENSOR: the pkey index, -1 none */
} pv;

/* key -> dtype, from the pickle, the row length of the tensors built on the
 * storage (ROW_NONE none seen yet, ROW_MIXED views that disagree) and the
 * dict key a tensor on it was stored under (nl 0: none, NAME_MIXED: several) */
typedef struct { const uint8_t* k; size_t kl; uint8_t dtype, width; uint32_t row; uint32_t no, nl; } pkey;
#define NAME_MIXED UINT32_MAX
#define ROW_NONE  0u
#define ROW_MIXED UINT32_MAX

/* Hard limits that bound the walker's memory (~32 bytes per value) whatever
 * the input; real torch pickles stay far below (a few values per tensor). */
#define TZ_MAX_STACK  ((size_t)1 << 20)
#define TZ_MAX_MEMO   ((size_t)1 << 22)
#define TZ_MAX_KEYS   ((size_t)1 << 22)

typedef struct {
    const uint8_t* p;
    size_t n;
    pv* st; size_t sn, scap;
    pv* memo; size_t mcap, mlimit, mcount;   /* mcount: slots put (len(memo)) */
    pkey* keys; size_t kn, kcap;
} walker;

static int grow(void** v, size_t* cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void* const q = realloc(*v, nc * elem);
    if (!q) return -1;
    *v = q; *cap = nc;
    return 0;
}

static int push_v(walker* w, pv v)
{
    if (w->sn >= TZ_MAX_STACK) return -1;
    if (grow((void**)&w->st, &w->scap, w->sn + 1, sizeof(pv))) return -1;
    w->st[w->sn++] = v;
    return 0;
}

static int push_kind(walker* w, int kind)
{
    pv v; memset(&v, 0, sizeof(v)); v.kind = (uint8_t)kind;
    return push_v(w, v);
}

/* Pops k values; a MARK among them is an underflow, as in Python's unpickler. */
static int pop_n(walker* w, size_t k)
{
    if (w->sn < k) return -1;
    for (size_t i = 0; i < k; i++) if (w->st[w->sn - 1 - i].kind == V_MARK) return -1;
    w->sn -= k;
    return 0;
}

/* Index of the topmost MARK, or -1. */
static long find_mark(const walker* w)
{
    for (size_t i = w->sn; i-- > 0;) if (w->st[i].kind == V_MARK) return (long)i;
    return -1;
}

/* Pops back to the topmost MARK (included), then pushes `kind` when >= 0. */
static int pop_mark(walker* w, int kind)
{
    long const m = find_mark(w);
    if (m < 0) return -1;
    w->sn = (size_t)m;
    return kind >= 0 ? push_kind(w, kind) : 0;
}

static const uint8_t* S(const walker* w, uint32_t off) { return w->p + off; }

static int is_global(const walker* w, const pv* v, const char* module)
{
    return v->kind == V_GLOBAL && eq(S(w, v->ao), v->al, module);
}

/* The arguments of torch._utils._rebuild_tensor_v2: (storage, offset, size,
 * stride, ...). A contiguous tensor of two or more dimensions gives its
 * storage a row length (its last dimension), for the ANS1 coder's context one
 * row up; views that disagree leave the storage without one. torch writes a
 * storage's persistent id again for each tensor on it, so those views meet
 * as duplicate keys after the walk (lmc_tz_parse); a pickle that reuses the
 * loaded storage from the memo meets them here. Only a hint: a wrong row
 * costs ratio, never correctness. */
static void note_row(walker* w, const pv* it, size_t k)
{
    if (k < 4 || it[0].kind != V_STORAGE || it[0].i < 0 || (size_t)it[0].i >= w->kn || it[1].kind != V_INT
        || it[2].kind != V_INTS || it[3].kind != V_INTS || it[2].ao != it[3].ao || it[2].ao < 2)
        return;
    int64_t const last = it[2].i;
    if (it[3].i != 1 || (int64_t)it[3].bo != last || last < 2 || last > 65535) return;   /* not row-major */
    pkey* const p = &w->keys[it[0].i];
    p->row = p->row == ROW_NONE || p->row == (uint32_t)last ? (uint32_t)last : ROW_MIXED;
}

/* Builds a tuple from the `k` items on top of the stack: a persistent id
 * ('storage', type, key, location, numel) becomes V_PERSID, integers V_INTS,
 * anything else V_OTHER. */
static int make_tuple(walker* w, size_t k)
{
    pv t; memset(&t, 0, sizeof(t)); t.kind = V_OTHER;
    if (k == 0) return push_v(w, t);     /* () */
    const pv* const it = w->st + (w->sn - k);
    size_t ints = 0;
    for (size_t j = 0; j < k; j++) {
        if (it[j].kind == V_MARK) return -1;
        ints += it[j].kind == V_INT;
    }
    if (ints == k) {
        t.kind = V_INTS;
        t.ao = k < UINT32_MAX ? (uint32_t)k : UINT32_MAX;
        t.i = it[k - 1].i;
        t.bo = k >= 2 && it[k - 2].i >= 0 && it[k - 2].i < UINT32_MAX ? (uint32_t)it[k - 2].i : UINT32_MAX;
    }
    note_row(w, it, k);
    if (k >= 4 && it[0].kind == V_STORAGE) { t.kind = V_TARGS; t.i = it[0].i; }
    if (k >= 3 && it[0].kind == V_STR && eq(S(w, it[0].ao), it[0].al, "storage")
        && it[1].kind == V_GLOBAL && it[2].kind == V_STR) {
        t.kind = V_PERSID; t.ao = it[2].ao; t.al = it[2].al;
        const dt_name* d = NULL;
        if (is_global(w, &it[1], "torch") || is_global(w, &it[1], "torch.storage"))
            d = lookup(k_storage_types, sizeof(k_storage_types) / sizeof(k_storage_types[0]), S(w, it[1].bo), it[1].bl);
        for (size_t j = 3; !d && j < k; j++)   /* UntypedStorage with a dtype argument */
            if (is_global(w, &it[j], "torch"))
                d = lookup(k_dtypes, sizeof(k_dtypes) / sizeof(k_dtypes[0]), S(w, it[j].bo), it[j].bl);
        if (d) { t.dtype = d->dtype; t.width = d->width; }
        else { t.dtype = LMC_DTYPE_BYTES; t.width = 0; }   /* unknown element type */
    }
    w->sn -= k;
    return push_v(w, t);
}

static int tuple_mark(walker* w)
{
    long const m = find_mark(w);
    if (m < 0) return -1;
    size_t const k = w->sn - (size_t)m - 1;
    if (make_tuple(w, k)) return -1;
    /* the tuple now sits above the items' old place: move it onto the MARK */
    w->st[m] = w->st[w->sn - 1];
    w->sn = (size_t)m + 1;
    return 0;
}

/* Records the storage id v; *idx: its pkey index, -1 for a storage of
 * unknown type. */
static int record_persid(walker* w, const pv* v, int64_t* idx)
{
    *idx = -1;
    if (v->kind != V_PERSID) return -1;     /* not a torch storage id: not understood */
    if (!v->width) return 0;                /* storage of an unknown type: coded as bytes */
    if (w->kn >= TZ_MAX_KEYS) return -1;
    if (grow((void**)&w->keys, &w->kcap, w->kn + 1, sizeof(pkey))) return -1;
    pkey* const k = &w->keys[w->kn];
    k->k = w->p + v->ao; k->kl = v->al; k->dtype = v->dtype; k->width = v->width; k->row = ROW_NONE;
    k->no = 0; k->nl = 0;
    *idx = (int64_t)w->kn++;
    return 0;
}

/* A dict item key -> value: a tensor stored under a string names its storage
 * (for reports only; a storage under two names keeps none). */
static void note_name(walker* w, const pv* key, const pv* value)
{
    if (key->kind != V_STR || value->kind != V_TENSOR || value->i < 0 || (size_t)value->i >= w->kn || !key->al) return;
    pkey* const p = &w->keys[value->i];
    if (p->nl == 0) { p->no = key->ao; p->nl = key->al; return; }
    if (p->nl != NAME_MIXED && (p->nl != key->al || memcmp(w->p + p->no, w->p + key->ao, key->al) != 0)) p->nl = NAME_MIXED;
}

/* The items above the topmost MARK, as key, value pairs. */
static void note_names_after_mark(walker* w)
{
    long const m = find_mark(w);
    if (m < 0) return;
    for (size_t j = (size_t)m + 1; j + 1 < w->sn; j += 2) note_name(w, &w->st[j], &w->st[j + 1]);
}

static int memo_put(walker* w, uint64_t idx)
{
    /* Python's picklers number the memo 0, 1, 2, ...: a gap is not understood */
    if (w->sn == 0 || idx >= w->mlimit || idx > w->mcount) return -1;
    if (idx >= w->mcap) {
        size_t const old = w->mcap;
        if (grow((void**)&w->memo, &w->mcap, (size_t)idx + 1, sizeof(pv))) return -1;
        memset(w->memo + old, 0, (w->mcap - old) * sizeof(pv));  /* V_UNSET */
    }
    if (w->st[w->sn - 1].kind == V_MARK) return -1;
    if (w->memo[idx].kind == V_UNSET) w->mcount++;
    w->memo[idx] = w->st[w->sn - 1];
    return 0;
}

static int memo_get(walker* w, uint64_t idx)
{
    if (idx >= w->mcap || w->memo[idx].kind == V_UNSET) return -1;   /* never put */
    return push_v(w, w->memo[idx]);
}

/* Reads a '\n'-terminated argument at *pos; returns its length or -1. */
static long line(const walker* w, size_t* pos, uint32_t* off)
{
    const uint8_t* const q = (const uint8_t*)memchr(w->p + *pos, '\n', w->n - *pos);
    if (!q) return -1;
    size_t const len = (size_t)(q - (w->p + *pos));
    *off = (uint32_t)*pos;
    *pos += len + 1;
    return (long)len;
}

static int decimal(const walker* w, uint32_t off, long len, uint64_t* v)
{
    if (len <= 0 || len > 18) return -1;
    uint64_t x = 0;
    for (long i = 0; i < len; i++) {
        uint8_t const c = w->p[off + i];
        if (c < '0' || c > '9') return -1;
        x = x * 10 + (c - '0');
    }
    *v = x;
    return 0;
}

/* Takes `k` bytes of argument at *pos. */
static const uint8_t* take(const walker* w, size_t* pos, uint64_t k)
{
    if (k > w->n - *pos) return NULL;
    const uint8_t* const a = w->p + *pos;
    *pos += (size_t)k;
    return a;
}

static int push_str(walker* w, size_t* pos, uint64_t len, int kind)
{
    size_t const at = *pos;
    if (!take(w, pos, len)) return -1;
    pv v; memset(&v, 0, sizeof(v));
    v.kind = (uint8_t)kind; v.ao = (uint32_t)at; v.al = (uint32_t)len;
    return push_v(w, v);
}

static int push_int(walker* w, int64_t x)
{
    pv v; memset(&v, 0, sizeof(v)); v.kind = V_INT; v.i = x;
    return push_v(w, v);
}

/* Runs the pickle; 0 when STOP was reached with everything understood. */
static int walk(walker* w)
{
    size_t pos = 0;
    while (pos < w->n) {
        uint8_t const op = w->p[pos++];
        const uint8_t* a;
        uint32_t lo, lo2;
        long ll, ll2;
        uint64_t u;
        int rc = 0;
        switch (op) {
        case '.': return 0;                                   /* STOP */
        case 0x80: rc = take(w, &pos, 1) ? 0 : -1; break;     /* PROTO */
        case 0x95: rc = take(w, &pos, 8) ? 0 : -1; break;     /* FRAME: only a hint */
        case '(': rc = push_kind(w, V_MARK); break;           /* MARK */
        case '0': rc = pop_n(w, 1); break;                    /* POP */
        case '1': rc = pop_mark(w, -1); break;                /* POP_MARK */
        case '2':                                             /* DUP */
            rc = w->sn && w->st[w->sn - 1].kind != V_MARK ? push_v(w, w->st[w->sn - 1]) : -1; break;
        case 'N': case 0x88: case 0x89: case '}': case ']': case 0x8f:
        case 0x97:                                            /* NONE TRUE FALSE {} [] set() NEXT_BUFFER */
            rc = push_kind(w, V_OTHER); break;
        case 0x98: break;                                     /* READONLY_BUFFER */
        case ')': rc = make_tuple(w, 0); break;               /* EMPTY_TUPLE */
        case 0x85: case 0x86: case 0x87:                      /* TUPLE1..3 */
            rc = w->sn >= (size_t)(op - 0x84) ? make_tuple(w, (size_t)(op - 0x84)) : -1; break;
        case 't': rc = tuple_mark(w); break;                  /* TUPLE */
        case 'K': rc = (a = take(w, &pos, 1)) ? push_int(w, a[0]) : -1; break;
        case 'M': rc = (a = take(w, &pos, 2)) ? push_int(w, r16(a)) : -1; break;
        case 'J': rc = (a = take(w, &pos, 4)) ? push_int(w, (int32_t)r32(a)) : -1; break;
        case 0x8a: case 0x8b: {                               /* LONG1, LONG4 */
            if (!(a = take(w, &pos, op == 0x8a ? 1 : 4))) return -1;
            u = op == 0x8a ? a[0] : r32(a);
            if (!(a = take(w, &pos, u))) return -1;
            if (u == 0 || u > 8) { rc = push_kind(w, V_OTHER); break; }
            uint64_t x = 0;
            for (uint64_t i = 0; i < u; i++) x |= (uint64_t)a[i] << (8 * i);
            if (u < 8 && (a[u - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * u);  /* sign-extend */
            rc = push_int(w, (int64_t)x);
            break;
        }
        case 'G': rc = take(w, &pos, 8) ? push_kind(w, V_OTHER) : -1; break;  /* BINFLOAT */
        case 'X': case 'T': case 'B':                         /* BINUNICODE BINSTRING BINBYTES */
            if (!(a = take(w, &pos, 4))) return -1;
            rc = push_str(w, &pos, r32(a), op == 'B' ? V_OTHER : V_STR); break;
        case 0x8c: case 'U': case 'C':                        /* SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES */
            if (!(a = take(w, &pos, 1))) return -1;
            rc = push_str(w, &pos, a[0], op == 'C' ? V_OTHER : V_STR); break;
        case 0x8d: case 0x8e: case 0x96:                      /* BINUNICODE8 BINBYTES8 BYTEARRAY8 */
            if (!(a = take(w, &pos, 8))) return -1;
            rc = push_str(w, &pos, r64(a), op == 0x8d ? V_STR : V_OTHER); break;
        case 'I': case 'L': case 'F': case 'S': case 'V':     /* text-mode INT LONG FLOAT STRING UNICODE */
            if (line(w, &pos, &lo) < 0) return -1;
            rc = push_kind(w, V_OTHER); break;
        case 'c': case 'i': {                                 /* GLOBAL, INST */
            if ((ll = line(w, &pos, &lo)) < 0 || (ll2 = line(w, &pos, &lo2)) < 0) return -1;
            if (op == 'i') { rc = pop_mark(w, V_OTHER); break; }
            pv v; memset(&v, 0, sizeof(v));
            v.kind = V_GLOBAL; v.ao = lo; v.al = (uint32_t)ll; v.bo = lo2; v.bl = (uint32_t)ll2;
            rc = push_v(w, v);
            break;
        }
        case 0x93: {                                          /* STACK_GLOBAL */
            if (w->sn < 2 || w->st[w->sn - 1].kind == V_MARK || w->st[w->sn - 2].kind == V_MARK) return -1;
            pv* const m = &w->st[w->sn - 2];
            pv const nm = w->st[w->sn - 1];
            w->sn--;
            if (m->kind == V_STR && nm.kind == V_STR) {
                m->kind = V_GLOBAL; m->bo = nm.ao; m->bl = nm.al;
            } else {
                m->kind = V_OTHER;
            }
            break;
        }
        case 'Q': {                                           /* BINPERSID */
            if (w->sn < 1 || w->st[w->sn - 1].kind == V_MARK) return -1;
            int64_t idx;
            if (record_persid(w, &w->st[w->sn - 1], &idx)) return -1;
            w->st[w->sn - 1].kind = V_STORAGE;
            w->st[w->sn - 1].i = idx;
            break;
        }
        case 'P': return -1;                                  /* text PERSID: torch never writes it */
        case 'R': case 0x81: {                                /* REDUCE, NEWOBJ */
            /* REDUCE of a tensor's rebuild arguments: a tensor on that storage */
            int64_t const idx = op == 'R' && w->sn >= 2 && w->st[w->sn - 1].kind == V_TARGS ? w->st[w->sn - 1].i : -2;
            rc = pop_n(w, 2);
            if (!rc && idx == -2) rc = push_kind(w, V_OTHER);
            else if (!rc) { rc = push_kind(w, V_TENSOR); if (!rc) w->st[w->sn - 1].i = idx; }
            break;
        }
        case 0x92: rc = pop_n(w, 3) ? -1 : push_kind(w, V_OTHER); break;  /* NEWOBJ_EX */
        case 'b': case 'a':                                   /* BUILD, APPEND */
            rc = w->sn >= 2 && w->st[w->sn - 2].kind != V_MARK ? pop_n(w, 1) : -1; break;
        case 's':                                             /* SETITEM */
            if (w->sn >= 3 && w->st[w->sn - 3].kind != V_MARK) note_name(w, &w->st[w->sn - 2], &w->st[w->sn - 1]);
            rc = w->sn >= 3 && w->st[w->sn - 3].kind != V_MARK ? pop_n(w, 2) : -1; break;
        case 'u': case 'e': case 0x90:                        /* SETITEMS APPENDS ADDITEMS */
            if (op == 'u') note_names_after_mark(w);
            rc = pop_mark(w, -1);                             /* they update the item below the mark */
            if (!rc && (w->sn == 0 || w->st[w->sn - 1].kind == V_MARK)) rc = -1;
            break;
        case 'd': case 'l': case 'o': case 0x91:              /* DICT LIST OBJ FROZENSET */
            if (op == 'd') note_names_after_mark(w);
            rc = pop_mark(w, V_OTHER); break;
        case 'q': rc = (a = take(w, &pos, 1)) ? memo_put(w, a[0]) : -1; break;      /* BINPUT */
        case 'r': rc = (a = take(w, &pos, 4)) ? memo_put(w, r32(a)) : -1; break;    /* LONG_BINPUT */
        case 0x94: rc = memo_put(w, w->mcount); break;       /* MEMOIZE: memo[len(memo)] */
        case 'h': rc = (a = take(w, &pos, 1)) ? memo_get(w, a[0]) : -1; break;      /* BINGET */
        case 'j': rc = (a = take(w, &pos, 4)) ? memo_get(w, r32(a)) : -1; break;    /* LONG_BINGET */
        case 'p': case 'g':                                   /* text PUT, GET */
            if ((ll = line(w, &pos, &lo)) < 0 || decimal(w, lo, ll, &u)) return -1;
            rc = op == 'p' ? memo_put(w, u) : memo_get(w, u); break;
        case 0x82: rc = take(w, &pos, 1) ? push_kind(w, V_OTHER) : -1; break;   /* EXT1 */
        case 0x83: rc = take(w, &pos, 2) ? push_kind(w, V_OTHER) : -1; break;   /* EXT2 */
        case 0x84: rc = take(w, &pos, 4) ? push_kind(w, V_OTHER) : -1; break;   /* EXT4 */
        default: return -1;                                   /* unknown opcode */
        }
        if (rc) return -1;
    }
    return -1;   /* no STOP */
}

/*-*** zip directory ***-*/
typedef struct {
    const uint8_t* name; size_t name_len;
    uint64_t lho;              /* local header offset */
    uint64_t size;             /* uncompressed size */
    uint64_t csize;            /* compressed size */
    uint16_t method, flags;
} zent;

typedef struct { zent* v; size_t n, cap; } zdir;

/* Finds the end of central directory record: it must end the file exactly
 * (comment included), as torch writes it. */
static int find_eocd(const uint8_t* f, size_t n, size_t* at)
{
    if (n < 22) return -1;
    size_t const lowest = n - 22 > 65535 ? n - 22 - 65535 : 0;
    for (size_t i = n - 22;; i--) {
        if (r32(f + i) == SIG_EOCD && (uint64_t)i + 22 + r16(f + i + 20) == n) { *at = i; return 0; }
        if (i == lowest) return -1;
    }
}

/* Reads the central directory into *d. */
static int read_dir(zdir* d, const uint8_t* f, size_t n)
{
    size_t e;
    if (find_eocd(f, n, &e)) return -1;
    uint64_t entries = r16(f + e + 10), cd_size = r32(f + e + 12), cd_off = r32(f + e + 16);
    int const disks_ok = r16(f + e + 4) == 0 && r16(f + e + 6) == 0;
    if (e >= 20 && r32(f + e - 20) == SIG_LOC64) {
        uint64_t const z = r64(f + e - 20 + 8);
        if (r32(f + e - 20 + 4) != 0 || r32(f + e - 20 + 16) > 1) return -1;   /* multi-disk */
        if (z > e - 20 || e - 20 - z < 56 || r32(f + z) != SIG_EOCD64) return -1;
        if (r32(f + z + 16) != 0 || r32(f + z + 20) != 0) return -1;
        entries = r64(f + z + 32); cd_size = r64(f + z + 40); cd_off = r64(f + z + 48);
        if (cd_off > z || cd_size > z - cd_off) return -1;
    } else {
        if (!disks_ok || cd_off > e || cd_size > e - cd_off) return -1;
    }
    if (entries > cd_size / 46) return -1;
    const uint8_t* p = f + cd_off;
    const uint8_t* const end = p + cd_size;
    for (uint64_t k = 0; k < entries; k++) {
        if ((size_t)(end - p) < 46 || r32(p) != SIG_CENTRAL) return -1;
        size_t const nl = r16(p + 28), xl = r16(p + 30), cl = r16(p + 32);
        if ((size_t)(end - p) - 46 < nl + xl + cl) return -1;
        zent z;
        z.name = p + 46; z.name_len = nl;
        z.flags = r16(p + 8); z.method = r16(p + 10);
        z.csize = r32(p + 20); z.size = r32(p + 24); z.lho = r32(p + 42);
        int need_size = z.size == 0xFFFFFFFFu, need_csize = z.csize == 0xFFFFFFFFu;
        int need_lho = z.lho == 0xFFFFFFFFu, need_disk = r16(p + 34) == 0xFFFFu;
        if (!need_disk && r16(p + 34) != 0) return -1;
        const uint8_t* x = p + 46 + nl;
        const uint8_t* const xe = x + xl;
        while (xe - x >= 4) {                         /* extra fields: tag, size, data */
            uint16_t const tag = r16(x), sz = r16(x + 2);
            if ((size_t)(xe - x) - 4 < sz) return -1;
            if (tag == 0x0001) {                      /* ZIP64 extended information */
                const uint8_t* q = x + 4;
                const uint8_t* const qe = q + sz;
                if (need_size) { if (qe - q < 8) return -1; z.size = r64(q); q += 8; need_size = 0; }
                if (need_csize) { if (qe - q < 8) return -1; z.csize = r64(q); q += 8; need_csize = 0; }
                if (need_lho) { if (qe - q < 8) return -1; z.lho = r64(q); q += 8; need_lho = 0; }
                if (need_disk) { if (qe - q < 4) return -1; if (r32(q) != 0) return -1; need_disk = 0; }
            }
            x += 4 + sz;
        }
        if (need_size || need_csize || need_lho || need_disk) return -1;
        if (grow((void**)&d->v, &d->cap, d->n + 1, sizeof(zent))) return -1;
        d->v[d->n++] = z;
        p += 46 + nl + xl + cl;
    }
    return 0;
}

/* Where entry z's bytes lie: checks its local header and that it is a STORED,
 * unencrypted entry whose bytes lie inside the file. */
static int entry_data(const zent* z, const uint8_t* f, size_t n, uint64_t* off)
{
    if (z->method != 0 || (z->flags & 1) || z->csize != z->size) return -1;
    if (z->lho > n || n - z->lho < 30 || r32(f + z->lho) != SIG_LOCAL) return -1;
    const uint8_t* const h = f + z->lho;
    uint64_t const nl = r16(h + 26), xl = r16(h + 28);
    if (nl != z->name_len || r16(h + 8) != 0) return -1;
    uint64_t const d = z->lho + 30 + nl + xl;
    if (d > n || memcmp(h + 30, z->name, nl) != 0) return -1;
    if (z->size > n - d) return -1;
    *off = d;
    return 0;
}

static int name_is(const zent* z, const uint8_t* prefix, size_t pl, const char* rest)
{
    size_t const rl = strlen(rest);
    return z->name_len == pl + rl && memcmp(z->name, prefix, pl) == 0 && memcmp(z->name + pl, rest, rl) == 0;
}

static int cmp_bytes(const uint8_t* a, size_t al, const uint8_t* b, size_t bl)
{
    int const c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

/* comparators carry pointers to the bytes they compare: qsort has no context
 * argument, and globals would race between contexts on different threads */
static int cmp_pkey(const void* x, const void* y)
{
    const pkey* const a = (const pkey*)x; const pkey* const b = (const pkey*)y;
    return cmp_bytes(a->k, a->kl, b->k, b->kl);
}

static int cmp_off(const void* x, const void* y)
{
    const lmc_tz_storage* const a = (const lmc_tz_storage*)x; const lmc_tz_storage* const b = (const lmc_tz_storage*)y;
    return a->off < b->off ? -1 : a->off > b->off;
}

static int cmp_keyref(const void* x, const void* y)
{
    const lmc_tz_keyref* const a = (const lmc_tz_keyref*)x; const lmc_tz_keyref* const b = (const lmc_tz_keyref*)y;
    return cmp_bytes(a->key, a->key_len, b->key, b->key_len);
}

/* Binary search in the sorted key list; -1 when absent. */
static long find_pkey(const walker* w, const uint8_t* k, size_t kl)
{
    size_t lo = 0, hi = w->kn;
    while (lo < hi) {
        size_t const mid = lo + (hi - lo) / 2;
        int const c = cmp_bytes(w->keys[mid].k, w->keys[mid].kl, k, kl);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

int lmc_tz_parse(lmc_tz_info* out, const uint8_t* f, size_t n)
{
    memset(out, 0, sizeof(*out));
    if (!f || !lmc_tz_probe(f, n)) return -1;
    zdir d; memset(&d, 0, sizeof(d));
    walker w; memset(&w, 0, sizeof(w));
    int rc = -1;
    if (read_dir(&d, f, n)) goto out;

    /* data.pkl: "<prefix>/data.pkl" (one '/', as torch writes) or "data.pkl" */
    const zent* pkl = NULL;
    for (size_t i = 0; i < d.n; i++) {
        const zent* const z = &d.v[i];
        static const char k_pkl[] = "data.pkl";
        size_t const kl = sizeof(k_pkl) - 1;
        if (z->name_len < kl || memcmp(z->name + z->name_len - kl, k_pkl, kl) != 0) continue;
        size_t const pl = z->name_len - kl;
        if (pl && (z->name[pl - 1] != '/' || memchr(z->name, '/', pl - 1))) continue;
        if (pkl) goto out;                       /* two candidates: ambiguous */
        pkl = z;
    }
    if (!pkl) goto out;
    const uint8_t* const prefix = pkl->name;
    size_t const pl = pkl->name_len - 8;
    uint64_t pkl_off;
    if (entry_data(pkl, f, n, &pkl_off) || pkl->size >= 0xFFFFFFFFu) goto out;

    /* the element arrays are native-endian: decline big-endian archives */
    for (size_t i = 0; i < d.n; i++) {
        uint64_t o;
        if (!name_is(&d.v[i], prefix, pl, "byteorder")) continue;
        if (entry_data(&d.v[i], f, n, &o)) goto out;
        if (!(d.v[i].size == 6 && memcmp(f + o, "little", 6) == 0)) goto out;
    }

    w.p = f + pkl_off; w.n = (size_t)pkl->size;
    w.mlimit = TZ_MAX_MEMO;
    if (walk(&w)) goto out;
    if (w.kn) qsort(w.keys, w.kn, sizeof(pkey), cmp_pkey);
    for (size_t i = 1; i < w.kn; i++) {          /* one storage listed twice: same type? */
        if (cmp_pkey(&w.keys[i - 1], &w.keys[i]) != 0) continue;
        if (w.keys[i - 1].width != w.keys[i].width) goto out;
        if (w.keys[i - 1].row != w.keys[i].row) w.keys[i - 1].row = w.keys[i].row = ROW_MIXED;
        pkey* const a = &w.keys[i - 1];
        pkey* const b = &w.keys[i];
        if (a->nl == 0) { a->no = b->no; a->nl = b->nl; }   /* one name among them: keep it */
        else if (b->nl == 0) { b->no = a->no; b->nl = a->nl; }
        else if (a->nl == NAME_MIXED || b->nl == NAME_MIXED || a->nl != b->nl || memcmp(w.p + a->no, w.p + b->no, a->nl))
            a->nl = b->nl = NAME_MIXED;
    }

    /* storages: "<prefix>/data/<key>" entries whose key the pickle typed */
    size_t cap = 0;
    for (size_t i = 0; i < d.n; i++) {
        const zent* const z = &d.v[i];
        if (z->name_len <= pl + 5 || memcmp(z->name, prefix, pl) != 0 || memcmp(z->name + pl, "data/", 5) != 0)
            continue;
        const uint8_t* const key = z->name + pl + 5;
        size_t const kl = z->name_len - pl - 5;
        long const j = find_pkey(&w, key, kl);
        uint64_t o;
        if (j < 0 || entry_data(z, f, n, &o)) continue;   /* untyped or not STORED: plain bytes */
        if (z->size == 0 || z->size % w.keys[j].width) continue;
        if (grow((void**)&out->v, &cap, out->count + 1, sizeof(lmc_tz_storage))) goto out;
        lmc_tz_storage* const s = &out->v[out->count++];
        s->off = o; s->len = z->size; s->key = key; s->key_len = kl;
        s->dtype = w.keys[j].dtype; s->width = w.keys[j].width;
        s->row = w.keys[j].row == ROW_MIXED ? 0 : w.keys[j].row;
        s->name = w.keys[j].nl && w.keys[j].nl != NAME_MIXED ? w.p + w.keys[j].no : NULL;
        s->name_len = s->name ? w.keys[j].nl : 0;
    }
    if (out->count) qsort(out->v, out->count, sizeof(lmc_tz_storage), cmp_off);
    for (size_t i = 1; i < out->count; i++)      /* overlapping entries: hostile, decline */
        if (out->v[i - 1].off + out->v[i - 1].len > out->v[i].off) goto out;
    out->by_key = (lmc_tz_keyref*)malloc((out->count ? out->count : 1) * sizeof(lmc_tz_keyref));
    if (!out->by_key) goto out;
    for (size_t i = 0; i < out->count; i++) {
        out->by_key[i].key = out->v[i].key; out->by_key[i].key_len = out->v[i].key_len; out->by_key[i].index = i;
    }
    if (out->count) qsort(out->by_key, out->count, sizeof(lmc_tz_keyref), cmp_keyref);
    for (size_t i = 1; i < out->count; i++)      /* duplicate names: ambiguous, decline */
        if (cmp_keyref(&out->by_key[i - 1], &out->by_key[i]) == 0) goto out;
    rc = 0;
out:
    free(d.v); free(w.st); free(w.memo); free(w.keys);
    if (rc) lmc_tz_free(out);
    return rc;
}

size_t lmc_tz_archive_start(const uint8_t* f, size_t end)
{
    size_t e;
    if (!f || find_eocd(f, end, &e)) return SIZE_MAX;
    uint64_t start;
    if (e >= 20 + 56 && r32(f + e - 20) == SIG_LOC64) {
        /* the zip64 end record (56 bytes, as torch writes it) just before
         * its locator, which holds its offset from the archive's start */
        size_t const z = e - 20 - 56;
        uint64_t const rel = r64(f + e - 20 + 8);
        if (r32(f + z) != SIG_EOCD64 || r64(f + z + 4) != 44 || rel > z) return SIZE_MAX;
        start = z - rel;
        if (r64(f + z + 48) + r64(f + z + 40) != rel) return SIZE_MAX;   /* directory, then this record */
    } else {
        uint64_t const cd_size = r32(f + e + 12), cd_off = r32(f + e + 16);
        if (cd_size > e || cd_off > e - cd_size) return SIZE_MAX;
        start = e - cd_size - cd_off;
    }
    if (end - start < 4 || r32(f + start) != SIG_LOCAL) return SIZE_MAX;
    return (size_t)start;
}

long lmc_tz_split(const uint8_t* f, size_t n, size_t** at)
{
    size_t cap = 16, k = 0;
    size_t* v = (size_t*)malloc(cap * sizeof(*v));
    if (!v) return -1;
    v[k++] = n;
    for (size_t e = n; e > 0;) {
        size_t const a = lmc_tz_archive_start(f, e);
        if (a == SIZE_MAX) break;
        if (k == cap) {
            size_t* const w = (size_t*)realloc(v, (cap *= 2) * sizeof(*v));
            if (!w) { free(v); return -1; }
            v = w;
        }
        v[k++] = a;
        e = a;
    }
    for (size_t i = 0; i < k / 2; i++) { size_t const t = v[i]; v[i] = v[k - 1 - i]; v[k - 1 - i] = t; }
    *at = v;
    return (long)k - 1;
}


void lmc_tz_free(lmc_tz_info* info)
{
    free(info->v);
    free(info->by_key);
    memset(info, 0, sizeof(*info));
}

long lmc_tz_find(const lmc_tz_info* info, const uint8_t* key, size_t key_len)
{
    size_t lo = 0, hi = info->count;
    while (lo < hi) {
        size_t const mid = lo + (hi - lo) / 2;
        const lmc_tz_keyref* const s = &info->by_key[mid];
        int const c = cmp_bytes(s->key, s->key_len, key, key_len);
        if (c == 0) return (long)s->index;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}
