"""lmc - lossless compression of LLM checkpoints and of the XOR deltas between them.

A ctypes binding of liblmc (include/lmc.h), standard library only. torch is
imported only by the functions that need it (save, load, ...).

Bytes and files:
    frame = lmc.compress(data, ref=None, threads=None, format=None, dtype=None)
    data  = lmc.decompress(frame, ref=None, threads=None)
    lmc.compress_file(src, dst=None, ref=None, threads=None)      # -> dst (src + ".lmc")
    lmc.decompress_file(src, dst=None, ref=None, threads=None)    # -> dst (src minus ".lmc")
    lmc.frame_info(frame_or_path)                              # -> dict

  `threads` defaults to every core this process may run on (None or 0, as
  the CLI); the frames are the same for every count.

  `ref` is the reference the frame is (or is to be) a delta against: bytes,
  or the path of a file whose bytes are used as they are (as `lmc -r FILE`).
  Decoding a delta against another reference, or without one, raises
  LmcError (id "ref_wrong" / "ref_required") before anything is written.

PyTorch state dicts (through the safetensors layout):
    lmc.save(state_dict, path, ref=None, threads=None, metadata=None)
    state_dict = lmc.load(path, ref=None, threads=None)
    lmc.save_safetensors(state_dict, path) / lmc.load_safetensors(path)

  There `ref` is the previous checkpoint: a state dict, a safetensors file,
  an lmc keyframe (a .lmc file that is not itself a delta), or bytes.

Snapshot stores (a directory of keyframes and delta chains):
    lmc.Store(dir)   - see lmc.store
Errors from the library raise lmc.LmcError (.code, .name, .id).
"""

import ctypes
import os
import stat as _stat

from . import _lib
from ._lib import LmcError, lib, check
from . import _codec
from ._codec import as_buf, CCtx, DCtx, AtomicFile
from . import store
from .store import Store

__all__ = ["LmcError", "compress", "decompress", "compress_file", "decompress_file",
           "frame_info", "hash64", "version", "library_path",
           "save", "load", "save_safetensors", "load_safetensors",
           "to_safetensors_bytes", "from_safetensors_bytes", "Store"]

__version__ = lib.lmc_version_string().decode()
library_path = _lib.path
SUFFIX = ".lmc"


def version():
    """Version string of the loaded liblmc, e.g. "0.1.0"."""
    return lib.lmc_version_string().decode()


def _data_buf(obj, what="data"):
    if isinstance(obj, (str, os.PathLike)):
        raise TypeError("%s must be bytes-like (use compress_file / decompress_file for paths)" % what)
    return as_buf(obj)


def hash64(data):
    """XXH3-64 (seed 0) of `data`: the reference hash a delta frame records
    (a frame's own content_hash, from format 5, hashes its chunks' hashes)."""
    with _data_buf(data) as b:
        return lib.lmc_hash64(b.addr, b.size)


# ---------------------------------------------------------------------------
# bytes


def compress(data, ref=None, threads=None, format=None, dtype=None, chunk_log=None):
    """Compresses `data` (bytes-like) into one lmc frame (bytes).

    ref:     None (a keyframe), bytes-like, or a path: the frame is then an XOR
             delta against that reference.
    threads: worker threads (None or 0: every core this process may run on);
             the output is the same for every value.
    format:  None/"auto" (a safetensors file or a torch.save zip, else
             "generic"), "generic" (bytes; runs of bf16/f16/f32 values in them
             are found and coded as floats), "raw", "safetensors", "torch".
    dtype:   value type of a raw dump ("bf16", "f32", ... or a torch dtype);
             implies format="raw".
    """
    with _data_buf(data) as src, as_buf(ref) as rb, \
            CCtx(threads, format, dtype, chunk_log, rb) as c:
        cap = lib.lmc_compress_bound(src.size)
        out = ctypes.create_string_buffer(max(cap, 1))
        n = check(lib.lmc_compress(c.p, out, cap, src.addr, src.size))
        return ctypes.string_at(out, n)


def decompress(frame, ref=None, threads=None):
    """Decodes one lmc frame (bytes-like) and returns its content (bytes).

    A delta frame needs the reference it was made against (bytes or a path)."""
    with _data_buf(frame, "frame") as src, as_buf(ref) as rb, DCtx(threads, rb) as d:
        h = _codec.frame_header(src)
        if h.content_size_known:
            cs = h.content_size
            out = ctypes.create_string_buffer(max(cs, 1))
            n = check(lib.lmc_decompress(d.p, out, cs, src.addr, src.size))
            return ctypes.string_at(out, n)
        parts = []
        _codec.drive_decompress(d, _codec.buf_reader(src),
                                lambda a, n: parts.append(ctypes.string_at(a, n)))
        return b"".join(parts)


# ---------------------------------------------------------------------------
# files (streaming: memory bounded by threads x chunk size, whatever the file size)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def compress_file(src, dst=None, ref=None, threads=None, format=None, dtype=None, chunk_log=None):
    """Compresses the file `src` to `dst` (default: src + ".lmc"), streaming.

    The output is written to a temporary file in dst's directory and renamed
    onto dst only after success. Returns dst."""
    src = os.fspath(src)
    dst = os.fspath(dst) if dst is not None else src + SUFFIX
    if _same_file(src, dst):
        raise ValueError("source and destination are the same file: %s" % dst)
    with as_buf(ref) as rb, CCtx(threads, format, dtype, chunk_log, rb) as c, \
            open(src, "rb", buffering=0) as f:
        st = os.fstat(f.fileno())
        if _stat.S_ISREG(st.st_mode):
            check(lib.lmc_cctx_set_param(c.p, _lib.LMC_P_CONTENT_SIZE, st.st_size), "content size")
        # a zip is parsed in place only where its whole file is at hand
        zip_ok = c.format in (_lib.FORMATS["auto"], _lib.FORMATS["torch"])
        read = _codec.input_reader(f, c.stream_sizes()[0], prefer_read=True, map_zip=zip_ok)
        try:
            with AtomicFile(dst) as out:
                c.hash_ref_last()   # the header's reference hash is written last
                _codec.drive_compress(c, read, _codec.fd_writer(out.fd), write_behind=True)
                _codec.patch_ref_hash(c, out.fd)
        finally:
            read.close()
    return dst


def decompress_file(src, dst=None, ref=None, threads=None):
    """Decodes the lmc file `src` to `dst` (default: src without ".lmc"), streaming.

    The output appears at dst only once the whole frame has been decoded and
    its checksums verified; on any error nothing is left behind. Returns dst."""
    src = os.fspath(src)
    if dst is None:
        if not src.endswith(SUFFIX) or len(src) == len(SUFFIX):
            raise ValueError("%s: no %s suffix; give dst" % (src, SUFFIX))
        dst = src[:-len(SUFFIX)]
    dst = os.fspath(dst)
    if _same_file(src, dst):
        raise ValueError("source and destination are the same file: %s" % dst)
    # the output is a temporary file until the frame and its reference check out
    with as_buf(ref) as rb, DCtx(threads, rb, check_ref_last=True) as d, open(src, "rb", buffering=0) as f:
        read = _codec.input_reader(f, d.stream_sizes()[0])
        try:
            with AtomicFile(dst) as out:
                _codec.drive_decompress(d, read, _codec.fd_writer(out.fd), write_behind=True)
        except LmcError as e:
            if e.detail is None:
                e.detail = src
                e.args = ("%s: %s" % (src, e.name),)
            raise
        finally:
            read.close()
    return dst


def frame_info(frame):
    """Header and statistics of a frame (bytes-like, or the path of a .lmc file),
    without decoding values: sizes, ratio, chunks, pieces, per-coder and
    per-dtype byte counts, reference size and hash. Checks the frame's structure
    and payload checksums (raises LmcError if corrupt)."""
    with as_buf(frame) as b:
        st = _lib.lmc_frame_stats()
        check(lib.lmc_frame_stats_get(ctypes.byref(st), b.addr, b.size))
        return _codec.stats_dict(st)


# ---------------------------------------------------------------------------
# torch (imported on first use)


def save(state_dict, path, ref=None, threads=None, metadata=None):
    """Saves a dict of tensors to `path` as an lmc frame of its safetensors
    serialization; with `ref` (the previous checkpoint: a state dict, a
    safetensors file, an lmc keyframe file, or bytes) as an XOR delta.
    Every dtype of the safetensors format that torch has round-trips bitwise.
    Written atomically. Returns the compressed size in bytes."""
    from . import torch_io
    return torch_io.save(state_dict, path, ref=ref, threads=threads, metadata=metadata)


def load(path, ref=None, threads=None):
    """Loads a dict of CPU tensors saved by `save` (or a plain safetensors file).
    A delta needs the same `ref` it was saved with (same kinds as in save)."""
    from . import torch_io
    return torch_io.load(path, ref=ref, threads=threads)


def save_safetensors(state_dict, path, metadata=None):
    """Writes a plain (uncompressed) safetensors file, atomically."""
    from . import torch_io
    return torch_io.save_safetensors(state_dict, path, metadata=metadata)


def load_safetensors(path):
    """Reads a plain safetensors file into a dict of CPU tensors."""
    from . import torch_io
    return torch_io.load_safetensors(path)


def to_safetensors_bytes(state_dict, metadata=None):
    """The safetensors serialization of a dict of tensors (a bytearray)."""
    from . import torch_io
    return torch_io.serialize(state_dict, metadata)


def from_safetensors_bytes(data):
    """Parses a safetensors serialization into a dict of CPU tensors."""
    from . import torch_io
    return torch_io.deserialize(data)

