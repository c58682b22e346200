"""ctypes binding of liblmc: finding the shared library and declaring signatures.

Everything here mirrors include/lmc.h.  The rest of the package uses only
the names defined in this module, never raw symbol lookups.

The library is searched for in this order:
  1. the file named by the environment variable LMC_LIBRARY;
  2. liblmc.so in the repository root, when the package is used from a
     checkout (python/lmc/../../liblmc.so), as left there by `make`;
  3. ctypes.util.find_library("lmc"), then the dynamic loader's default
     search ("liblmc.so"), then PREFIX/lib for the usual prefixes.
"""

import ctypes
import ctypes.util
import os
import sys

__all__ = ["lib", "path", "LmcError", "check", "is_error", "error_code",
           "lmc_inbuf", "lmc_outbuf", "lmc_frame_header", "lmc_frame_stats",
           "FRAME_HEADER_SIZE", "CODER_COUNT", "DTYPE_COUNT"]

c_size_t = ctypes.c_size_t
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_uint64 = ctypes.c_uint64
c_longlong = ctypes.c_longlong

FRAME_HEADER_SIZE = 40     # LMC_FRAME_HEADER_SIZE
CODER_COUNT = 8            # LMC_CODER_COUNT
DTYPE_COUNT = 16           # LMC_DTYPE_COUNT
THREADS_MAX = 256          # LMC_THREADS_MAX


# ---------------------------------------------------------------------------
# structures


class lmc_inbuf(ctypes.Structure):
    _fields_ = [("src", c_void_p), ("size", c_size_t), ("pos", c_size_t)]


class lmc_outbuf(ctypes.Structure):
    _fields_ = [("dst", c_void_p), ("size", c_size_t), ("pos", c_size_t)]


class lmc_frame_header(ctypes.Structure):
    _fields_ = [
        ("version", c_uint),
        ("container", c_int),       # lmc_format
        ("dtype", c_int),           # lmc_dtype
        ("chunk_log", c_uint),
        ("has_ref", c_int),
        ("ref_size", c_uint64),
        ("ref_hash", c_uint64),
        ("content_size_known", c_int),
        ("content_size", c_uint64),
    ]


class lmc_frame_stats(ctypes.Structure):
    _fields_ = [
        ("header", lmc_frame_header),
        ("content_size", c_uint64),
        ("frame_size", c_uint64),
        ("content_hash", c_uint64),
        ("chunks", c_uint64),
        ("pieces", c_uint64),
        ("pieces_xor", c_uint64),
        ("pieces_rotated", c_uint64),
        ("pieces_refmodel", c_uint64),
        ("blocks", c_uint64 * CODER_COUNT),
        ("block_in", c_uint64 * CODER_COUNT),
        ("block_out", c_uint64 * CODER_COUNT),
        ("dtype_in", c_uint64 * DTYPE_COUNT),
        ("dtype_out", c_uint64 * DTYPE_COUNT),
    ]


# ---------------------------------------------------------------------------
# loading


def _candidates():
    env = os.environ.get("LMC_LIBRARY")
    if env:
        # An explicit choice: use it or fail, never silently fall back.
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.normpath(os.path.join(here, os.pardir, os.pardir, "liblmc.so"))]
    if os.path.basename(os.path.dirname(here)) in ("dist-packages", "site-packages"):
        # installed as PREFIX/lib/python3*/{dist,site}-packages/lmc: PREFIX/lib/liblmc.so
        out.append(os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir, "liblmc.so")))
    found = ctypes.util.find_library("lmc")
    if found:
        out.append(found)
    out.append("liblmc.so")
    for prefix in ("/usr/local", "/usr", sys.prefix):
        out.append(os.path.join(prefix, "lib", "liblmc.so"))
    seen = set()
    return [x for x in out if not (x in seen or seen.add(x))], False


def _resolved(name):
    """The file the loader mapped for `name` (found in /proc/self/maps), or name."""
    if os.sep in name:
        return os.path.abspath(name)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()) == name:
                    return parts[5].strip()
    except OSError:
        pass
    return name


def _load():
    names, explicit = _candidates()
    errors = []
    for name in names:
        if os.sep in name and not os.path.exists(name):
            continue
        try:
            return ctypes.CDLL(name), _resolved(name)
        except OSError as e:
            errors.append("%s: %s" % (name, e))
            if explicit:
                break
    if explicit:
        raise ImportError("lmc: cannot load LMC_LIBRARY=%s (%s)"
                          % (names[0], "; ".join(errors) or "no such file"))
    raise ImportError("lmc: cannot find liblmc.so (run `make` in the repository, "
                      "`make install`, or set LMC_LIBRARY); tried: "
                      + ", ".join(names) + ("; " + "; ".join(errors) if errors else ""))


lib, path = _load()


def _sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = ctypes.POINTER

# version, errors, names
_sig("lmc_version_number", c_uint)
_sig("lmc_version_string", c_char_p)
_sig("lmc_is_error", c_uint, c_size_t)
_sig("lmc_get_error", c_int, c_size_t)
_sig("lmc_error_name", c_char_p, c_size_t)
_sig("lmc_error_id", c_char_p, c_int)
_sig("lmc_dtype_width", c_uint, c_int)
_sig("lmc_dtype_name", c_char_p, c_int)
_sig("lmc_dtype_from_name", c_int, c_char_p)
_sig("lmc_format_name", c_char_p, c_int)
_sig("lmc_coder_name", c_char_p, c_uint)
_sig("lmc_hash64", c_uint64, c_void_p, c_size_t)

# compression
_sig("lmc_cctx_create", c_void_p)
_sig("lmc_cctx_free", None, c_void_p)
_sig("lmc_cctx_set_param", c_size_t, c_void_p, c_int, c_longlong)
_sig("lmc_cctx_set_ref", c_size_t, c_void_p, c_void_p, c_size_t)
_sig("lmc_cctx_set_ref_hashed", c_size_t, c_void_p, c_void_p, c_size_t, c_uint64)
_sig("lmc_compress_bound", c_size_t, c_size_t)
_sig("lmc_compress", c_size_t, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t)
_sig("lmc_compress_stream", c_size_t, c_void_p, P(lmc_outbuf), P(lmc_inbuf), c_int)
_sig("lmc_cctx_reset", None, c_void_p)
_sig("lmc_cctx_last_stats", c_size_t, c_void_p, P(lmc_frame_stats))

# decompression
_sig("lmc_dctx_create", c_void_p)
_sig("lmc_dctx_free", None, c_void_p)
_sig("lmc_dctx_set_param", c_size_t, c_void_p, c_int, c_longlong)
_sig("lmc_dctx_set_ref", c_size_t, c_void_p, c_void_p, c_size_t)
_sig("lmc_dctx_set_ref_hashed", c_size_t, c_void_p, c_void_p, c_size_t, c_uint64)
_sig("lmc_decompress", c_size_t, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t)
_sig("lmc_decompress_stream", c_size_t, c_void_p, P(lmc_outbuf), P(lmc_inbuf))
_sig("lmc_dctx_reset", None, c_void_p)

# frame inspection
_sig("lmc_get_frame_header", c_size_t, P(lmc_frame_header), c_void_p, c_size_t)
_sig("lmc_frame_stats_get", c_size_t, P(lmc_frame_stats), c_void_p, c_size_t)

# enum values used by the package (include/lmc.h)
LMC_ERR_PARAM = 2
LMC_ERR_TRUNCATED = 13
LMC_ERR_TRAILING = 16
LMC_ERR_REF_REQUIRED = 20
LMC_ERR_REF_WRONG = 21
LMC_ERR_NOT_LMC = 10

LMC_P_FORMAT = 1
LMC_P_DTYPE = 2
LMC_P_THREADS = 3
LMC_P_CHUNK_LOG = 4
LMC_P_LAYOUT = 5
LMC_P_CONTENT_SIZE = 6
LMC_P_REF_HASH_LAST = 8
LMC_D_THREADS = 1
LMC_D_REF_CHECK_LAST = 3

FORMATS = {"auto": 0, "generic": 1, "raw": 2, "safetensors": 3, "torch": 4}


# ---------------------------------------------------------------------------
# errors


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else ""


class LmcError(Exception):
    """An error reported by liblmc.

    code: the lmc_error number (e.g. 21 for LMC_ERR_REF_WRONG);
    name: liblmc's description (lmc_error_name), e.g. "reference does not
          match the one the frame was encoded against";
    id:   liblmc's stable identifier (lmc_error_id), e.g. "ref_wrong";
    detail: optional context added by the binding (a file name, a hint).
    """

    def __init__(self, code, name=None, detail=None):
        code = int(code)
        if name is None:
            name = _s(lib.lmc_error_name(error_value(code)))
        self.code = code
        self.name = name
        self.id = _s(lib.lmc_error_id(code))
        self.detail = detail
        msg = name if not detail else "%s: %s" % (detail, name)
        super().__init__(msg)

    def __reduce__(self):
        return (self.__class__, (self.code, self.name, self.detail))


def is_error(r):
    return bool(lib.lmc_is_error(r))


def error_code(r):
    return int(lib.lmc_get_error(r))


def check(r, detail=None):
    """Returns r, or raises LmcError if r (a size_t from liblmc) is an error."""
    if lib.lmc_is_error(r):
        raise LmcError(lib.lmc_get_error(r), _s(lib.lmc_error_name(r)), detail)
    return r


def error_value(code):
    """The size_t liblmc returns for error `code` (for names of codes)."""
    return (-int(code)) & ((1 << (8 * ctypes.sizeof(c_size_t))) - 1)


# ---------------------------------------------------------------------------
# snapshot store (optional: a library built before the store lacks it)


class lmc_store_entry(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_int64),
        ("name", c_char_p),
        ("frame", c_char_p),
        ("parent_step", ctypes.c_int64),
        ("keyframe", c_int),
        ("chain_depth", c_uint),
        ("content_size", c_uint64),
        ("content_hash", c_uint64),
        ("frame_size", c_uint64),
        ("ratio", ctypes.c_double),
    ]


LMC_STORE_P_THREADS = 1
LMC_STORE_P_CACHE = 2
LMC_STORE_P_FSYNC = 3
LMC_ERR_EXISTS = 28

HAS_STORE = hasattr(lib, "lmc_store_open")
if HAS_STORE:
    _sig("lmc_store_init", c_size_t, c_char_p)
    _sig("lmc_store_open", c_size_t, P(c_void_p), c_char_p)
    _sig("lmc_store_close", None, c_void_p)
    _sig("lmc_store_set_param", c_size_t, c_void_p, c_int, c_longlong)
    _sig("lmc_store_add_file", c_size_t, c_void_p, c_char_p, ctypes.c_int64, c_uint, c_char_p)
    _sig("lmc_store_add_buffer", c_size_t, c_void_p, c_void_p, c_size_t, ctypes.c_int64, c_uint, c_char_p)
    _sig("lmc_store_last_step", ctypes.c_int64, c_void_p)
    _sig("lmc_store_restore_file", c_size_t, c_void_p, ctypes.c_int64, c_char_p, c_char_p, P(c_uint))
    _sig("lmc_store_restore_buffer", c_size_t, c_void_p, ctypes.c_int64, c_char_p, c_void_p, c_size_t, P(c_uint))
    _sig("lmc_store_count", c_size_t, c_void_p)
    _sig("lmc_store_get", c_size_t, c_void_p, c_size_t, P(lmc_store_entry))
    _sig("lmc_store_verify", c_size_t, c_void_p)
    _sig("lmc_store_rm", c_size_t, c_void_p, ctypes.c_int64)
    _sig("lmc_store_prune", c_size_t, c_void_p, c_size_t)
    _sig("lmc_store_last_error", c_char_p, c_void_p)
HAS_STORE_RESTORE_FD = HAS_STORE and hasattr(lib, "lmc_store_restore_fd")
if HAS_STORE_RESTORE_FD:
    _sig("lmc_store_restore_fd", c_size_t, c_void_p, ctypes.c_int64, c_char_p, c_int, P(c_uint))
