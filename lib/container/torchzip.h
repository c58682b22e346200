/*
 * torchzip.h - map a torch.save archive to its storages (internal).
 *
 * Since PyTorch 1.6, torch.save writes an uncompressed (STORED) zip, often
 * ZIP64, holding `<prefix>/data.pkl` (the pickled object, storages replaced by
 * persistent ids), `<prefix>/data/<key>` (one raw native-endian element array
 * per storage), `<prefix>/version` and, since 2.1, `<prefix>/byteorder`.
 *
 * The parser learns where each storage's bytes lie from the zip central
 * directory and each storage's element type from an opcode-level walk of
 * data.pkl (the persistent id tuple ('storage', torch.XxxStorage, key,
 * location, numel)). It never unpickles. The encoder keeps every byte
 * verbatim; only the byte-group width of each storage comes from here, so a
 * wrong guess costs ratio, never correctness. Every input is hostile: an
 * archive or pickle that is not understood is reported as "not torch" and the
 * encoder falls back to generic mode.
 */
#ifndef LMC_TORCHZIP_H
#define LMC_TORCHZIP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t       off, len;   /* absolute file offset and size of the storage bytes */
    const uint8_t* key;        /* the storage key (zip name after "<prefix>/data/"), */
    size_t         key_len;    /*   pointing into the parsed buffer: not NUL-terminated */
    uint8_t        dtype;      /* lmc_dtype code */
    uint8_t        width;      /* bytes per value used for grouping: 1, 2, 4 or 8 */
    uint32_t       row;        /* values per row of the tensors on it (2..65535), 0 unknown */
    const uint8_t* name;       /* the dict key the tensor on it was stored under, */
    size_t         name_len;   /*   in data.pkl (NULL: none, or several) */
} lmc_tz_storage;

typedef struct { const uint8_t* key; size_t key_len; size_t index; } lmc_tz_keyref;

typedef struct {
    size_t          count;
    lmc_tz_storage* v;         /* sorted by off, non-overlapping */
    lmc_tz_keyref*  by_key;    /* v's keys sorted (for lmc_tz_find) */
} lmc_tz_info;

/* 1 if the first `avail` bytes can start a zip archive (local file header signature). */
int lmc_tz_probe(const void* buf, size_t avail);

/* Parses the whole archive `file` of `size` bytes. Returns 0 and fills *out
 * (free it with lmc_tz_free; it points into `file`) when the zip directory and
 * data.pkl were understood; -1 if not (out is left empty). Storages whose
 * dtype is unknown, that are not STORED or whose size is not a multiple of
 * their width are left out (their bytes are then coded as plain bytes).
 * Allocates; never reads outside [file, file + size). */
int lmc_tz_parse(lmc_tz_info* out, const uint8_t* file, size_t size);

void lmc_tz_free(lmc_tz_info* info);

/* Where the zip archive that ends `file` at `end` starts, found from its
 * end records (its directory's offsets count from its own start): another
 * archive may precede it (torch's distributed checkpoints write a
 * torch.save per tensor, one after another). SIZE_MAX when the end records
 * are not there or do not place a local header. Never reads outside
 * [file, file + end). */
size_t lmc_tz_archive_start(const uint8_t* file, size_t end);

/* The starts of the archives that end `file` at `size`, one after another,
 * found back to front (lmc_tz_archive_start); the first may follow other
 * bytes. Returns how many (0: none), or -1 if out of memory; *at then holds
 * that many + 1 offsets, the archives' starts and `size` (free it). */
long lmc_tz_split(const uint8_t* file, size_t size, size_t** at);

/* Index in info->v of the storage with key `key` (length key_len), or -1. */
long lmc_tz_find(const lmc_tz_info* info, const uint8_t* key, size_t key_len);

#endif
