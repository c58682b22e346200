/* error.c - names of error codes, dtypes, formats and coders. */
#include "lmc.h"
#include "error.h"
#include "mem.h"

unsigned lmc_version_number(void) { return LMC_VERSION_NUMBER; }
const char* lmc_version_string(void) { return LMC_VERSION_STRING; }

unsigned lmc_is_error(size_t code) { return LMC_IS_ERR(code); }

lmc_error lmc_get_error(size_t code)
{
    if (!LMC_IS_ERR(code)) return LMC_OK;
    return (lmc_error)(0 - code);
}

static const char* describe(lmc_error e, int id)
{
    switch (e) {
    case LMC_OK:                return id ? "ok" : "no error";
    case LMC_ERR_GENERIC:       return id ? "generic" : "error (unspecified)";
    case LMC_ERR_PARAM:         return id ? "param" : "invalid argument or parameter";
    case LMC_ERR_MEMORY:        return id ? "memory" : "out of memory";
    case LMC_ERR_DST_TOO_SMALL: return id ? "dst_too_small" : "destination buffer is too small";
    case LMC_ERR_STAGE:         return id ? "stage" : "call out of sequence";
    case LMC_ERR_THREAD:        return id ? "thread" : "could not start worker threads";
    case LMC_ERR_NOT_LMC:       return id ? "not_lmc" : "not an lmc frame (unknown magic number)";
    case LMC_ERR_VERSION:       return id ? "version" : "frame format version not supported by this lmc";
    case LMC_ERR_HEADER:        return id ? "header" : "frame header is corrupted";
    case LMC_ERR_TRUNCATED:     return id ? "truncated" : "frame is truncated";
    case LMC_ERR_CORRUPT:       return id ? "corrupt" : "compressed data is corrupted";
    case LMC_ERR_CHECKSUM:      return id ? "checksum" : "checksum mismatch: data is corrupted";
    case LMC_ERR_TRAILING:      return id ? "trailing" : "unexpected data after the end of the frame";
    case LMC_ERR_LIMIT:         return id ? "limit" : "declared size exceeds the format's limits";
    case LMC_ERR_REF_REQUIRED:  return id ? "ref_required" : "frame is a delta: the reference checkpoint is required (-r)";
    case LMC_ERR_REF_WRONG:     return id ? "ref_wrong" : "reference does not match the one the frame was encoded against";
    case LMC_ERR_SIZE_MISMATCH: return id ? "size_mismatch" : "content size differs from the declared size";
    case LMC_ERR_NOT_CONTAINER: return id ? "not_container" : "not a valid file of the requested container format";
    case LMC_ERR_CODER:         return id ? "coder" : "unknown block coder (frame written by a newer lmc?)";
    case LMC_ERR_STORE:         return id ? "store" : "not a snapshot store, or its manifest is malformed";
    case LMC_ERR_IO:            return id ? "io" : "file system error";
    case LMC_ERR_NOT_FOUND:     return id ? "not_found" : "no such step or file in the store";
    case LMC_ERR_EXISTS:        return id ? "exists" : "already exists";
    default: break;
    }
    return id ? "unknown" : "unknown error";
}

const char* lmc_error_name(size_t code) { return describe(lmc_get_error(code), 0); }
const char* lmc_error_id(lmc_error err) { return describe(err, 1); }

static const struct { const char* name; unsigned width; } k_dtypes[LMC_DTYPE_COUNT] = {
    { "bytes", 1 }, { "bf16", 2 }, { "f16", 2 }, { "f32", 4 }, { "f64", 8 },
    { "i8", 1 }, { "u8", 1 }, { "i16", 2 }, { "u16", 2 }, { "i32", 4 }, { "u32", 4 },
    { "i64", 8 }, { "u64", 8 }, { "bool", 1 }, { "f8_e4m3", 1 }, { "f8_e5m2", 1 },
};

unsigned lmc_dtype_width(lmc_dtype dt)
{
    if ((unsigned)dt >= LMC_DTYPE_COUNT) return 1;
    return k_dtypes[dt].width;
}

const char* lmc_dtype_name(lmc_dtype dt)
{
    if ((unsigned)dt >= LMC_DTYPE_COUNT) return "unknown";
    return k_dtypes[dt].name;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

int lmc_dtype_from_name(const char* name)
{
    if (!name) return -1;
    for (int i = 0; i < LMC_DTYPE_COUNT; i++) {
        const char* a = k_dtypes[i].name; const char* b = name;
        while (*a && *b && lower((unsigned char)*b) == *a) { a++; b++; }
        if (!*a && !*b) return i;
    }
    if (lower(name[0]) == 'u' && lower(name[1]) == 'i' && lower(name[2]) == 'n' && lower(name[3]) == 't' && name[4] == '8' && !name[5])
        return LMC_DTYPE_U8;
    return -1;
}

const char* lmc_format_name(lmc_format f)
{
    switch (f) {
    case LMC_FORMAT_AUTO: return "auto";
    case LMC_FORMAT_GENERIC: return "generic";
    case LMC_FORMAT_RAW: return "raw";
    case LMC_FORMAT_SAFETENSORS: return "safetensors";
    case LMC_FORMAT_TORCH_ZIP: return "torch-zip";
    }
    return "unknown";
}

const char* lmc_coder_name(unsigned coder)
{
    switch (coder) {
    case LMC_CODER_RAW: return "raw";
    case LMC_CODER_CONST: return "const";
    case LMC_CODER_HUF: return "huffman";
    case LMC_CODER_RLE_HUF: return "rle+huffman";
    case LMC_CODER_ANS: return "rans";
    case LMC_CODER_REFCTX: return "refctx";
    case LMC_CODER_ANS1: return "rans-o1";
    }
    return "unknown";
}
