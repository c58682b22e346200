/*
 * lmc.h - the one public header of liblmc, the Language Model Compressor.
 *
 * liblmc losslessly compresses LLM checkpoints, whole or as an XOR delta
 * against a reference checkpoint (the previous one in a training run).
 * The scheme follows arXiv 2505.09810 (LMC): byte grouping by dtype width,
 * then a run-length + canonical Huffman code rebuilt for every 64 KiB block.
 * The frame format is specified in doc/format.md.
 *
 * Conventions (zstd school):
 *  - Functions that return size_t return a size or an error code; test it
 *    with lmc_is_error() and name it with lmc_error_name().
 *  - Contexts are reusable, owned by one thread at a time, and freed with the
 *    matching _free() (which accepts NULL).
 *  - The library never prints and never exits.
 *  - Reference buffers passed to a context are borrowed, not copied: they
 *    must stay valid until the context is reset, re-referenced or freed.
 */
#ifndef LMC_H
#define LMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && (__GNUC__ >= 4)
#  define LMC_API __attribute__((visibility("default")))
#else
#  define LMC_API
#endif

#define LMC_VERSION_MAJOR 0
#define LMC_VERSION_MINOR 1
#define LMC_VERSION_PATCH 0
#define LMC_VERSION_NUMBER (LMC_VERSION_MAJOR * 10000 + LMC_VERSION_MINOR * 100 + LMC_VERSION_PATCH)
#define LMC_VERSION_STRING "0.1.0"

/* Version of the frame format written by this library (doc/format.md). */
#define LMC_FORMAT_VERSION 6   /* this lmc writes 6 and reads 1 to 6 */

/* The most worker threads a context takes (LMC_P_THREADS, LMC_D_THREADS,
 * LMC_STORE_P_THREADS); a caller that defaults to one per core caps there. */
#define LMC_THREADS_MAX 256

LMC_API unsigned lmc_version_number(void);
LMC_API const char* lmc_version_string(void);

/*-**************************************************************
 * Errors
 * Values are stable: they are never renumbered, only appended.
 ****************************************************************/
typedef enum {
    LMC_OK                = 0,
    LMC_ERR_GENERIC       = 1,
    LMC_ERR_PARAM         = 2,  /* invalid argument or parameter value */
    LMC_ERR_MEMORY        = 3,  /* allocation failed */
    LMC_ERR_DST_TOO_SMALL = 4,  /* destination buffer is too small */
    LMC_ERR_STAGE         = 5,  /* call out of sequence */
    LMC_ERR_THREAD        = 6,  /* could not start worker threads */
    LMC_ERR_NOT_LMC       = 10, /* unknown magic number: not an lmc frame */
    LMC_ERR_VERSION       = 11, /* frame written by a newer, unsupported format version */
    LMC_ERR_HEADER        = 12, /* frame header corrupt (checksum or reserved bits) */
    LMC_ERR_TRUNCATED     = 13, /* input ends before the frame does */
    LMC_ERR_CORRUPT       = 14, /* malformed chunk, piece, block or table */
    LMC_ERR_CHECKSUM      = 15, /* a checksum does not match: data corrupted */
    LMC_ERR_TRAILING      = 16, /* bytes after the end of the frame */
    LMC_ERR_LIMIT         = 17, /* a declared size exceeds the format's limits */
    LMC_ERR_REF_REQUIRED  = 20, /* frame is a delta: a reference is needed */
    LMC_ERR_REF_WRONG     = 21, /* given reference differs (size or hash) from the one encoded */
    LMC_ERR_SIZE_MISMATCH = 22, /* content size differs from the declared or pledged one */
    LMC_ERR_CODER         = 23, /* unknown block coder id (written by a newer lmc?) */
    LMC_ERR_NOT_CONTAINER = 24, /* input is not a valid file of the requested container format */
    LMC_ERR_STORE         = 25, /* not a snapshot store, or its manifest is malformed/inconsistent */
    LMC_ERR_IO            = 26, /* a file system operation failed (open, read, write, fsync, rename) */
    LMC_ERR_NOT_FOUND     = 27, /* no such step or file name in the store */
    LMC_ERR_EXISTS        = 28, /* already exists (store at init; step+name at add) or step not after the chain's last */
    LMC_ERR_MAX_CODE      = 120
} lmc_error;

/* 1 if `code` (a size_t returned by this library) is an error. */
LMC_API unsigned lmc_is_error(size_t code);
/* The lmc_error inside `code`, or LMC_OK if it is not an error. */
LMC_API lmc_error lmc_get_error(size_t code);
/* A short English description of the error inside `code`. Never NULL. */
LMC_API const char* lmc_error_name(size_t code);
/* Stable identifier, e.g. "checksum" for LMC_ERR_CHECKSUM. Never NULL. */
LMC_API const char* lmc_error_id(lmc_error err);

/*-**************************************************************
 * Data types and containers
 ****************************************************************/
typedef enum {          /* values are stored in frames: stable */
    LMC_DTYPE_BYTES = 0, /* unknown / opaque bytes */
    LMC_DTYPE_BF16  = 1,
    LMC_DTYPE_F16   = 2,
    LMC_DTYPE_F32   = 3,
    LMC_DTYPE_F64   = 4,
    LMC_DTYPE_I8    = 5,
    LMC_DTYPE_U8    = 6,
    LMC_DTYPE_I16   = 7,
    LMC_DTYPE_U16   = 8,
    LMC_DTYPE_I32   = 9,
    LMC_DTYPE_U32   = 10,
    LMC_DTYPE_I64   = 11,
    LMC_DTYPE_U64   = 12,
    LMC_DTYPE_BOOL  = 13,
    LMC_DTYPE_F8_E4M3 = 14,
    LMC_DTYPE_F8_E5M2 = 15,
    LMC_DTYPE_COUNT = 16
} lmc_dtype;

/* Width in bytes of one value of `dt` (1 for BYTES and unknown values). */
LMC_API unsigned lmc_dtype_width(lmc_dtype dt);
/* Lower-case name ("bf16", "f32", "bytes", ...). Never NULL. */
LMC_API const char* lmc_dtype_name(lmc_dtype dt);
/* Parses "bf16", "f16", "f32", "f64", "u8", ... (case-insensitive). Returns -1 if unknown. */
LMC_API int lmc_dtype_from_name(const char* name);

typedef enum {           /* values are stored in frames: stable */
    LMC_FORMAT_AUTO        = 0, /* compression parameter only: detect */
    LMC_FORMAT_GENERIC     = 1, /* bytes of unknown layout; runs of bf16/f16/f32 in them are
                                   found and coded as floats (a guess: never a loss) */
    LMC_FORMAT_RAW         = 2, /* a dump of values of one dtype (LMC_P_DTYPE; with
                                   LMC_DTYPE_BYTES, as generic) */
    LMC_FORMAT_SAFETENSORS = 3,
    LMC_FORMAT_TORCH_ZIP   = 4  /* torch.save zip archives (.pt, .bin) */
} lmc_format;

LMC_API const char* lmc_format_name(lmc_format f);

/*-**************************************************************
 * Checksums
 ****************************************************************/
/* XXH3-64 (seed 0) of `size` bytes: the hash frames use for a reference, each
 * chunk's content and (format 5) the list of chunk hashes in the footer. */
LMC_API uint64_t lmc_hash64(const void* data, size_t size);

/* The same hash over data given in pieces (e.g. a file read in windows). */
typedef struct lmc_hash_state_s lmc_hash_state;
LMC_API lmc_hash_state* lmc_hash_create(void);          /* NULL if out of memory */
LMC_API void     lmc_hash_update(lmc_hash_state* h, const void* data, size_t size);
LMC_API uint64_t lmc_hash_digest(const lmc_hash_state* h);
LMC_API void     lmc_hash_free(lmc_hash_state* h);

/*-**************************************************************
 * Compression
 ****************************************************************/
typedef struct lmc_cctx_s lmc_cctx;

LMC_API lmc_cctx* lmc_cctx_create(void);
LMC_API void      lmc_cctx_free(lmc_cctx* cctx);

typedef enum {
    LMC_P_FORMAT       = 1, /* lmc_format; default AUTO */
    LMC_P_DTYPE        = 2, /* lmc_dtype for LMC_FORMAT_RAW; default BYTES */
    LMC_P_THREADS      = 3, /* worker threads, 1 to LMC_THREADS_MAX; default 1. Output is identical for every value. */
    LMC_P_CHUNK_LOG    = 4, /* log2 of the nominal chunk size, 20..26; default 20 (1 MiB). Where the
                               content size is known (lmc_compress, or LMC_P_CONTENT_SIZE) and holds 2 to
                               63 such chunks, it is cut into equal chunks of up to twice that size, as
                               many as a multiple of 16, 8, 4 or 2 allows, and the header says
                               chunk_log + 1 (LMC_P_CHUNK_BALANCE) */
    LMC_P_LAYOUT       = 5, /* 0 auto (default; float deltas may use REFCTX), 1 force byte-grouped, 2 force sign-rotated */
    LMC_P_CONTENT_SIZE = 6, /* streaming: pledged total input size, or -1 (default) if unknown */
    LMC_P_CODERS       = 7, /* bit mask of allowed block coders (1<<coder id); default all. Testing aid. */
    LMC_P_REF_HASH_LAST = 8,/* streaming, 0 (default) or 1: a reference set without its hash is hashed
                               between chunk jobs instead of before the header, which then carries 0 as
                               the reference hash; the caller writes the hash (lmc_cctx_last_stats:
                               header.ref_hash) and the header checksum over it when the frame is done */
    LMC_P_CHUNK_BALANCE = 9 /* 1 (default): equal chunks where the size is known (LMC_P_CHUNK_LOG), so
                               that threads get equal shares; 0: chunks of exactly 2^chunk_log bytes
                               (up to a value's bytes) but the last */
} lmc_cparam;

/* Sets a parameter. Takes effect at the next frame. Returns 0 or an error. */
LMC_API size_t lmc_cctx_set_param(lmc_cctx* cctx, lmc_cparam p, long long value);

/* Makes the next frames deltas against `ref`; NULL clears it (a non-NULL
 * pointer with size 0 is an empty reference). The buffer is
 * borrowed. Its hash is computed by the first frame that uses it
 * (lmc_compress hashes it a slice at a time between its chunk jobs, on
 * whichever threads are free; a stream before it writes the frame header),
 * unless lmc_cctx_set_ref_hashed gives a hash the caller already knows
 * (e.g. from a previous frame). */
LMC_API size_t lmc_cctx_set_ref(lmc_cctx* cctx, const void* ref, size_t refSize);
LMC_API size_t lmc_cctx_set_ref_hashed(lmc_cctx* cctx, const void* ref, size_t refSize, uint64_t refHash);

/* Worst-case compressed size of `srcSize` bytes, for any parameters. */
LMC_API size_t lmc_compress_bound(size_t srcSize);

/* Compresses src into one complete frame. Returns the frame size or an error.
 * All of dst[0, dstCapacity) may be written: bytes past the frame's end (and
 * all of dst after an error) hold no meaning. */
LMC_API size_t lmc_compress(lmc_cctx* cctx, void* dst, size_t dstCapacity,
                            const void* src, size_t srcSize);

/*-**************************************************************
 * Streaming
 ****************************************************************/
typedef struct { const void* src; size_t size; size_t pos; } lmc_inbuf;
typedef struct { void* dst; size_t size; size_t pos; } lmc_outbuf;

/* Consumes input and produces output, advancing in->pos and out->pos. Calls
 * block while worker threads code chunks: the whole chunks in the input run
 * as one pipeline, coded in place from the caller's buffer and written
 * straight into its output while it has room. A call codes at most about
 * 16 MiB of input (above 4 threads a chunk per thread up to 10 threads,
 * then 8 + threads / 4 chunks, 8 to 16 MiB; more with chunks over 4 MiB)
 * and may return before the
 * output is full or the input consumed: call again with the rest.
 * Above 2 threads, a new piece of input (in->pos 0) shorter than half of
 * lmc_cstream_in_size, with what is staged, is copied and kept for the next
 * call instead (returns a positive value): pieces that small, a tensor's
 * bytes at a time, would otherwise run a chunk or two a call.
 * Call with end=0 while more input will follow, then with end=1 until it
 * returns 0. Returns 0 when the frame is complete and fully flushed; a
 * positive number while work remains (a hint: bytes waiting to be flushed,
 * or input wanted); or an error. Memory is bounded by the chunk size and the
 * thread count, whatever the input size. A torch.save zip (LMC_FORMAT_AUTO
 * or TORCH_ZIP) is parsed only whole, its directory being at its end: given
 * whole in one buffer, it is parsed in place, any size; given in pieces with
 * the size pledged, up to 32 MiB of it is buffered first (1 GiB before
 * 2026-12-05); a larger one, or one of unknown size, is coded in generic
 * mode (no format change: frames are read as before). After 0 or an error, the next call
 * starts a new frame with the same parameters and reference. Bytes of
 * out->dst past the final out->pos may have been written (a chunk is coded
 * there in place): they hold no meaning. */
LMC_API size_t lmc_compress_stream(lmc_cctx* cctx, lmc_outbuf* out, lmc_inbuf* in, int end);

/* Input size (bytes) worth feeding per call when the input must be read
 * into a buffer: threads + 2 chunks (one chunk with one thread), one for
 * each job slot, but no more than one call codes (above). Chunks that lie whole in the caller's buffer are coded in
 * place; only one that straddles two calls' buffers is copied. */
LMC_API size_t lmc_cstream_in_size(const lmc_cctx* cctx);

/* Abandons any frame in progress. Parameters and reference are kept. */
LMC_API void lmc_cctx_reset(lmc_cctx* cctx);

/* Statistics of the last frame produced by this context (see lmc_frame_stats). */
typedef struct lmc_frame_stats_s lmc_frame_stats;

/*-**************************************************************
 * Decompression
 ****************************************************************/
typedef struct lmc_dctx_s lmc_dctx;

LMC_API lmc_dctx* lmc_dctx_create(void);
LMC_API void      lmc_dctx_free(lmc_dctx* dctx);

typedef enum {
    LMC_D_THREADS = 1,   /* worker threads, 1 to LMC_THREADS_MAX; default 1 */
    LMC_D_MAX_CHUNK_LOG = 2, /* refuse frames whose chunks exceed 2^value bytes; default 26 */
    LMC_D_REF_CHECK_LAST = 3 /* streaming, 0 (default) or 1: a reference set without its hash is checked
                                for size at the header, and hashed between chunk jobs and checked when
                                the frame ends (LMC_ERR_REF_WRONG then, not 0): output given out before
                                is unverified, and the caller keeps it private until 0 */
} lmc_dparam;
LMC_API size_t lmc_dctx_set_param(lmc_dctx* dctx, lmc_dparam p, long long value);

/* The reference for delta frames (borrowed). Checked against the frame's
 * recorded size and hash before any output is produced: streaming
 * decompression checks both before it decodes; lmc_decompress checks the
 * size first and, for a reference given without its hash, hashes it while
 * the chunks decode (a slice at a time between chunk jobs) and returns
 * LMC_ERR_REF_WRONG instead of the content size if it differs (dst then
 * holds no meaning). The hash, once computed, is kept for later frames. */
LMC_API size_t lmc_dctx_set_ref(lmc_dctx* dctx, const void* ref, size_t refSize);
LMC_API size_t lmc_dctx_set_ref_hashed(lmc_dctx* dctx, const void* ref, size_t refSize, uint64_t refHash);

/* Decompresses one whole frame. Returns the content size or an error. */
LMC_API size_t lmc_decompress(lmc_dctx* dctx, void* dst, size_t dstCapacity,
                              const void* src, size_t srcSize);

/* Streaming decompression. Returns 0 when a whole frame has been decoded,
 * verified and flushed; a positive hint while more input is expected or
 * output is waiting; or an error. Bytes after the frame's end in the same call
 * are an error (LMC_ERR_TRAILING); a call after 0 starts a new frame. If the
 * input ends while the last call returned a positive value, the frame is
 * truncated. Calls block while worker threads decode chunks: those that lie
 * whole in the input and fit the output's room decode in place, straight
 * into the output, as one pipeline (the call may then return before the
 * output is full: call again); others are gathered and decoded in batches,
 * a batch as soon as the rest of the input holds the next chunk whole (so
 * input fed in windows of many chunks has only the chunk across each
 * window's end copied; windows smaller than a chunk gather a job slot's
 * worth per thread, one chunk's payload and content each). The
 * whole-content hash is only known at the end: a caller that must not keep
 * unverified output writes it to a temporary place until 0 is returned. */
LMC_API size_t lmc_decompress_stream(lmc_dctx* dctx, lmc_outbuf* out, lmc_inbuf* in);
LMC_API void   lmc_dctx_reset(lmc_dctx* dctx);

/*-**************************************************************
 * Frame inspection
 ****************************************************************/
#define LMC_FRAME_HEADER_SIZE 40

typedef struct {
    unsigned   version;
    lmc_format container;
    lmc_dtype  dtype;            /* for LMC_FORMAT_RAW */
    unsigned   chunk_log;
    int        has_ref;
    uint64_t   ref_size;
    uint64_t   ref_hash;
    int        content_size_known;
    uint64_t   content_size;
} lmc_frame_header;

/* Parses the frame header at the start of src. Returns LMC_FRAME_HEADER_SIZE or an error. */
LMC_API size_t lmc_get_frame_header(lmc_frame_header* h, const void* src, size_t srcSize);

/* Block coder ids (stored in every block header: stable). */
typedef enum {
    LMC_CODER_RAW     = 0,
    LMC_CODER_CONST   = 1,
    LMC_CODER_HUF     = 2,
    LMC_CODER_RLE_HUF = 3,
    LMC_CODER_ANS     = 4,  /* order-0 rANS, 4 interleaved states */
    LMC_CODER_REFCTX  = 5,  /* deltas: value differences, rANS conditioned on the reference's exponent */
    LMC_CODER_ANS1    = 7,  /* order-1 rANS: tables chosen by the byte 4 back (format 3) */
    LMC_CODER_COUNT   = 8   /* room for future coders in statistics arrays */
} lmc_coder;
LMC_API const char* lmc_coder_name(unsigned coder);

struct lmc_frame_stats_s {
    lmc_frame_header header;
    uint64_t content_size;
    uint64_t frame_size;
    uint64_t content_hash;           /* the footer's: format 5, XXH3-64 of the chunks' XXH3-64s (doc/format.md,
                                        "Footer"); formats 1-4, lmc_hash64 of the content */
    uint64_t chunks;
    uint64_t pieces;
    uint64_t pieces_xor;             /* pieces coded as a delta against the reference */
    uint64_t pieces_rotated;         /* pieces using the sign-rotated (exponent-aligned) layout */
    uint64_t pieces_refmodel;        /* pieces in the reference-modelled layout (REFCTX or per-block byte groups) */
    uint64_t blocks[LMC_CODER_COUNT];     /* block count per coder */
    uint64_t block_in[LMC_CODER_COUNT];   /* stream bytes covered, per coder */
    uint64_t block_out[LMC_CODER_COUNT];  /* coded bytes (headers included), per coder */
    uint64_t dtype_in[LMC_DTYPE_COUNT];   /* content bytes per dtype */
    uint64_t dtype_out[LMC_DTYPE_COUNT];  /* coded bytes per dtype */
};

/* Walks a whole frame without decoding values: checks structure and the
 * compressed-payload checksums, and fills `st`. Returns the frame size or an error. */
LMC_API size_t lmc_frame_stats_get(lmc_frame_stats* st, const void* src, size_t srcSize);

/* Statistics of the last frame completed by `cctx`. Returns 0 or LMC_ERR_STAGE. */
LMC_API size_t lmc_cctx_last_stats(const lmc_cctx* cctx, lmc_frame_stats* st);

/*-**************************************************************
 * Containers: where the tensors of a checkpoint file lie
 ****************************************************************/
typedef struct {
    const char* name;      /* NUL-terminated, owned by the map */
    size_t      name_len;
    lmc_dtype   dtype;     /* LMC_DTYPE_BYTES for dtypes without a code */
    unsigned    width;     /* bytes per value used for grouping */
    unsigned    ndim;
    const uint64_t* shape;
    uint64_t    offset;    /* absolute file offset of the first byte */
    uint64_t    size;      /* bytes */
    const char* label;     /* for reports: safetensors, the name; torch.save, the dict key the
                            * tensor was stored under (NULL: none found, or several) */
    size_t      label_len;
} lmc_tensor_info;

typedef struct lmc_tensor_map_s lmc_tensor_map;

/* Bytes of the file's start needed to parse it as safetensors: 8 + header
 * length, or 0 if `head` (its first `avail` bytes, avail >= 8) cannot start a
 * safetensors file. */
LMC_API uint64_t lmc_safetensors_prefix(const void* head, size_t avail);

/* Parses a safetensors header from the first `avail` bytes of a file of
 * `file_size` bytes (UINT64_MAX if unknown). Returns 0 and *map, or
 * LMC_ERR_NOT_CONTAINER if it is not a valid safetensors file, LMC_ERR_MEMORY. */
LMC_API size_t lmc_tensor_map_safetensors(lmc_tensor_map** map, const void* head, size_t avail, uint64_t file_size);
/* Parses a whole torch.save archive (the zip torch.save writes since PyTorch
 * 1.6) held in file[0..size): one entry per storage whose element type the
 * pickle names, in file order, called "data/<key>" after its zip entry (and
 * labelled with the dict key its tensor was stored under, where one is), with
 * ndim 1 and shape { values } (a storage may hold several tensors: their
 * shapes are not kept). Several archives one after another (torch's
 * distributed checkpoints write a torch.save per tensor) are read as the
 * encoder reads them: archive k's storages are "a<k>/data/<key>", offsets
 * from the file's start; archives that do not parse have no entries. The
 * map owns copies of what it returns. Returns 0 and *map,
 * LMC_ERR_NOT_CONTAINER if it is not such an archive, or none of several
 * parses (or its pickle is not understood), LMC_ERR_MEMORY. */
LMC_API size_t lmc_tensor_map_torch(lmc_tensor_map** map, const void* file, size_t size);
LMC_API size_t lmc_tensor_map_count(const lmc_tensor_map* map);
/* Tensors in file order (by offset); NULL if i is out of range. */
LMC_API const lmc_tensor_info* lmc_tensor_map_get(const lmc_tensor_map* map, size_t i);
/* Index of the tensor called `name`, or -1. */
LMC_API long lmc_tensor_map_find(const lmc_tensor_map* map, const char* name, size_t name_len);
/* Bytes before the first tensor (safetensors: 8 + header length). */
LMC_API uint64_t lmc_tensor_map_header_size(const lmc_tensor_map* map);
LMC_API void lmc_tensor_map_free(lmc_tensor_map* map);

/*-**************************************************************
 * Snapshot store (doc/store.md)
 *
 * A directory holding many snapshots of checkpoint files as lmc frames:
 *   DIR/manifest.json   the index (replaced atomically: temp, fsync, rename)
 *   DIR/frames/         one frame file per snapshot, never rewritten in place
 *   DIR/cache/          latest content of each chain (speeds up add; optional)
 * Each file name (e.g. "model.safetensors", "shard/model-00001-of-00004.safetensors")
 * is its own chain: a snapshot is a keyframe (no reference) or a delta against
 * the previous snapshot of the same name. With keyframe_every K, restoring any
 * snapshot decodes at most K frames. A crash at any moment leaves a store that
 * verifies and restores every snapshot it held before.
 * Functions returning size_t return 0 (or a size, as documented) or an error
 * code (lmc_is_error). A handle is used by one thread at a time; processes
 * changing the same store are serialised by a lock file (DIR/lock).
 ****************************************************************/
typedef struct lmc_store_s lmc_store;

#define LMC_STORE_KEYFRAME_EVERY_DEFAULT 10

/* Creates an empty store in `dir` (created if absent; it may exist empty).
 * LMC_ERR_EXISTS if `dir` already holds a store. */
LMC_API size_t lmc_store_init(const char* dir);

/* Opens the store in `dir`: reads and validates the manifest, and removes
 * files left by an interrupted operation. *s is NULL on error. */
LMC_API size_t lmc_store_open(lmc_store** s, const char* dir);
LMC_API void   lmc_store_close(lmc_store* s);   /* accepts NULL */

typedef enum {
    LMC_STORE_P_THREADS = 1, /* worker threads for coding, 1 to LMC_THREADS_MAX; default 1. Frames are identical
                                for every value. */
    LMC_STORE_P_CACHE   = 2, /* 1 (default): keep the latest content of each chain in DIR/cache so that
                                adding a delta does not decode its parent chain; 0: no cache */
    LMC_STORE_P_FSYNC   = 3  /* 1 (default): fsync frames, manifest and directories; 0: skip (tests only) */
} lmc_store_param;
LMC_API size_t lmc_store_set_param(lmc_store* s, lmc_store_param p, long long value);

/* Adds a snapshot of file `path` (or of `size` bytes at `src`) as step `step`
 * (step < 0: the store's last step + 1, or 0 if empty) under `name` (NULL:
 * the basename of path; required for add_buffer). It is a delta against the
 * previous snapshot of `name` unless that chain would then need more than
 * `keyframe_every` decodes (0: LMC_STORE_KEYFRAME_EVERY_DEFAULT; 1: always
 * keyframes). `step` must be greater than every step already held for
 * `name` (else LMC_ERR_EXISTS). Returns the size of the stored frame. */
LMC_API size_t lmc_store_add_file(lmc_store* s, const char* path, int64_t step,
                                  unsigned keyframe_every, const char* name);
LMC_API size_t lmc_store_add_buffer(lmc_store* s, const void* src, size_t size, int64_t step,
                                    unsigned keyframe_every, const char* name);

/* Last step held by the store, or -1 if it is empty. */
LMC_API int64_t lmc_store_last_step(const lmc_store* s);

/* Restores snapshot (step, name) (name NULL: the only file of that step) to
 * `out_path` (written to a temporary file, renamed after every hash checked)
 * or into dst. Returns the content size. restore_buffer with dst NULL returns
 * the size needed; LMC_ERR_DST_TOO_SMALL if dstCapacity is smaller.
 * If `frames_decoded` is not NULL it receives the number of frames decoded:
 * 0 when the snapshot is the latest of its name and the cache holds it (then
 * it is copied from there, its hash checked; lmc_store_verify checks frames). */
LMC_API size_t lmc_store_restore_file(lmc_store* s, int64_t step, const char* name,
                                      const char* out_path, unsigned* frames_decoded);
LMC_API size_t lmc_store_restore_buffer(lmc_store* s, int64_t step, const char* name,
                                        void* dst, size_t dstCapacity, unsigned* frames_decoded);
/* The same into `fd`, an open regular file (read and write): the content
 * from offset 0, the file sized to it; the file offset is not used. For a
 * caller that wants the content in no named file (e.g. one opened with
 * O_TMPFILE) and out of its heap. On error the file's content is undefined. */
LMC_API size_t lmc_store_restore_fd(lmc_store* s, int64_t step, const char* name,
                                    int fd, unsigned* frames_decoded);

/* One snapshot, as listed by lmc_store_get. Strings are owned by the store and
 * valid until the next call that changes it (add, rm, prune) or close. */
typedef struct {
    int64_t     step;
    const char* name;          /* key of the file within the snapshot */
    const char* frame;         /* frame file, relative to DIR */
    int64_t     parent_step;   /* step of the reference snapshot (same name), or -1 for a keyframe */
    int         keyframe;      /* 1 if the frame has no reference */
    unsigned    chain_depth;   /* deltas between this snapshot and its keyframe: restore decodes depth+1 frames */
    uint64_t    content_size;  /* bytes of the file */
    uint64_t    content_hash;  /* lmc_hash64 of the file (XXH3-64) */
    uint64_t    frame_size;    /* bytes stored */
    double      ratio;         /* content_size / frame_size */
} lmc_store_entry;

/* Snapshots held, ordered by (step, name). */
LMC_API size_t lmc_store_count(const lmc_store* s);
/* Fills *e with snapshot i (0 <= i < count). Returns 0 or LMC_ERR_PARAM. */
LMC_API size_t lmc_store_get(const lmc_store* s, size_t i, lmc_store_entry* e);

/* Decodes every frame and checks every hash, chain links (each delta's
 * reference hash is its parent's content hash) and sizes. Returns 0 or the
 * first error; lmc_store_last_error() then says which snapshot and why. */
LMC_API size_t lmc_store_verify(lmc_store* s);

/* Removes every file of `step` (LMC_ERR_NOT_FOUND if none). The snapshot that
 * referenced a removed one is re-encoded first (against the removed one's
 * parent, or as a keyframe), so every remaining snapshot still restores.
 * Returns the number of snapshots removed. */
LMC_API size_t lmc_store_rm(lmc_store* s, int64_t step);
/* Keeps the last `keep_last` (>= 1) steps and removes older ones, re-encoding
 * the first kept delta of each chain as a keyframe. Returns the number of
 * snapshots removed. */
LMC_API size_t lmc_store_prune(lmc_store* s, size_t keep_last);

/* A message describing the last error of this handle (which file, which
 * snapshot, errno text), or "" if none. Never NULL. */
LMC_API const char* lmc_store_last_error(const lmc_store* s);

#ifdef __cplusplus
}
#endif
#endif /* LMC_H */
