"""PyTorch state dicts <-> the safetensors layout <-> lmc frames.

Serialization follows the reference safetensors writer byte for byte:
u64 little-endian header length N, N bytes of compact UTF-8 JSON padded with
spaces to a multiple of 8, then the tensors' little-endian row-major bytes
back to back.  Tensors are ordered as the reference writer orders them: by
dtype, in descending order of its dtype enum (which is sorted by alignment:
8-byte types first, then 4, 2, 1), then by name; the JSON lists
"__metadata__" first, then the tensors in that same (offset) order.  With
the default metadata {"format": "pt"} the result is what
safetensors.torch.save_file(sd, f, metadata={"format": "pt"}) writes.

Only torch and the standard library are used (no numpy, no safetensors).
"""

import ctypes
import json
import os
import sys
from collections.abc import Mapping

import torch

from . import _codec, _lib
from ._lib import LmcError, lib, check

# safetensors dtype name -> (bytes per value, rank in the reference writer's
# Dtype enum, torch dtype attribute name)
_ST = {
    "BOOL": (1, 0, "bool"),
    "U8": (1, 1, "uint8"),
    "I8": (1, 2, "int8"),
    "F8_E5M2": (1, 3, "float8_e5m2"),
    "F8_E4M3": (1, 4, "float8_e4m3fn"),
    "I16": (2, 5, "int16"),
    "U16": (2, 6, "uint16"),
    "F16": (2, 7, "float16"),
    "BF16": (2, 8, "bfloat16"),
    "I32": (4, 9, "int32"),
    "U32": (4, 10, "uint32"),
    "F32": (4, 11, "float32"),
    "F64": (8, 12, "float64"),
    "I64": (8, 13, "int64"),
    "U64": (8, 14, "uint64"),
}

TORCH_TO_ST = {}
ST_TO_TORCH = {}
for _name, (_w, _rank, _attr) in _ST.items():
    _dt = getattr(torch, _attr, None)
    if _dt is not None:
        TORCH_TO_ST[_dt] = _name
        ST_TO_TORCH[_name] = _dt

DEFAULT_METADATA = {"format": "pt"}


def _check_host():
    if sys.byteorder != "little":
        raise RuntimeError("lmc: big-endian hosts are not supported")


# ---------------------------------------------------------------------------
# serialization


def _prepare(state_dict):
    if not isinstance(state_dict, Mapping):
        raise TypeError("expected a dict of name -> tensor, got %s" % type(state_dict).__name__)
    items = []
    for name, t in state_dict.items():
        if not isinstance(name, str):
            raise TypeError("tensor names must be str, got %r" % (name,))
        if name == "__metadata__":
            raise ValueError("'__metadata__' is reserved in the safetensors format")
        if not isinstance(t, torch.Tensor):
            raise TypeError("%r: value is %s, not a tensor (flatten nested state such as "
                            "an optimizer's state_dict first)" % (name, type(t).__name__))
        if t.layout != torch.strided:
            raise ValueError("%r: only dense (strided) tensors can be saved, not %s" % (name, t.layout))
        st = TORCH_TO_ST.get(t.dtype)
        if st is None:
            raise ValueError("%r: dtype %s has no safetensors equivalent" % (name, t.dtype))
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        t = t.contiguous()
        items.append((name, st, t))
    items.sort(key=lambda it: (-_ST[it[1]][1], it[0]))
    return items


def _header(items, metadata):
    header = {}
    if metadata is None:
        metadata = DEFAULT_METADATA
    if metadata:
        if not isinstance(metadata, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    off = 0
    sizes = []
    for name, st, t in items:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [off, off + n]}
        sizes.append(n)
        off += n
    hjson = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    return hjson, sizes, off


def serialize(state_dict, metadata=None):
    """The safetensors serialization of `state_dict` (a bytearray)."""
    _check_host()
    items = _prepare(state_dict)
    hjson, sizes, data_len = _header(items, metadata)
    start = 8 + len(hjson)
    buf = bytearray(start + data_len)
    buf[0:8] = len(hjson).to_bytes(8, "little")
    buf[8:start] = hjson
    if data_len:
        arr = (ctypes.c_char * len(buf)).from_buffer(buf)
        base = ctypes.addressof(arr) + start
        off = 0
        for (name, st, t), n in zip(items, sizes):
            if n:
                ctypes.memmove(base + off, t.data_ptr(), n)
            off += n
        del arr
    return buf


def parse_header(data):
    """(metadata dict or None, [(name, dtype, shape, begin, end)], data start)
    for a safetensors buffer; begin/end absolute. Validates bounds."""
    n_total = len(data)
    if n_total < 8:
        raise ValueError("not a safetensors file: shorter than 8 bytes")
    n = int.from_bytes(bytes(data[0:8]), "little")
    if n < 2 or 8 + n > n_total:
        raise ValueError("not a safetensors file: header length %d does not fit %d bytes" % (n, n_total))
    try:
        hdr = json.loads(bytes(data[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("not a safetensors file: bad header JSON (%s)" % e)
    if not isinstance(hdr, dict):
        raise ValueError("not a safetensors file: header is not a JSON object")
    meta = hdr.pop("__metadata__", None)
    start = 8 + n
    out = []
    for name, info in hdr.items():
        try:
            dt = info["dtype"]
            shape = [int(x) for x in info["shape"]]
            b, e = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("%r: malformed safetensors header entry" % name)
        if dt not in _ST:
            raise ValueError("%r: unknown safetensors dtype %r" % (name, dt))
        numel = 1
        for s in shape:
            if s < 0:
                raise ValueError("%r: negative dimension" % name)
            numel *= s
        if not (0 <= b <= e) or start + e > n_total or e - b != numel * _ST[dt][0]:
            raise ValueError("%r: data_offsets [%d, %d] do not match its shape and dtype "
                             "or the file size" % (name, b, e))
        out.append((name, dt, shape, start + b, start + e))
    out.sort(key=lambda x: x[3])
    return meta, out, start


def deserialize(data):
    """A dict name -> CPU tensor (owning its memory) from a safetensors buffer,
    in file order."""
    _check_host()
    if isinstance(data, bytes):
        data = bytearray(data)       # torch.frombuffer wants a writable buffer
    meta, entries, _ = parse_header(data)
    out = {}
    for name, dt, shape, b, e in entries:
        tdt = ST_TO_TORCH.get(dt)
        if tdt is None:
            raise ValueError("%r: dtype %s is not supported by this torch (%s)"
                             % (name, dt, torch.__version__))
        numel = (e - b) // _ST[dt][0]
        if numel == 0:
            t = torch.empty(shape, dtype=tdt)
        else:
            t = torch.frombuffer(data, dtype=tdt, count=numel, offset=b).reshape(shape).clone()
        out[name] = t
    return out


# ---------------------------------------------------------------------------
# references


def _decode_whole(buf, threads, ref=None, what="file"):
    """Decodes an lmc frame held in Buf `buf` into a bytearray."""
    with _codec.DCtx(threads, ref) as d:
        h = _codec.frame_header(buf)
        if h.has_ref and (ref is None or ref.is_none):
            raise LmcError(_lib.LMC_ERR_REF_REQUIRED, None,
                           "%s is a delta frame: give the checkpoint it was made against" % what)
        if h.content_size_known:
            out = bytearray(h.content_size)
            if h.content_size == 0:
                dst = _codec._addr_of_bytes(_codec._EMPTY)
                check(lib.lmc_decompress(d.p, dst, 0, buf.addr, buf.size), what)
                return out
            arr = (ctypes.c_char * len(out)).from_buffer(out)
            try:
                n = check(lib.lmc_decompress(d.p, ctypes.addressof(arr), len(out),
                                             buf.addr, buf.size), what)
            finally:
                del arr
            if n != len(out):
                raise LmcError(22, None, what)
            return out
        out = bytearray()
        _codec.drive_decompress(d, _codec.buf_reader(buf),
                                lambda a, n: out.extend(ctypes.string_at(a, n)))
        return out


def _is_lmc_file(path):
    with open(path, "rb") as f:
        head = f.read(_lib.FRAME_HEADER_SIZE)
    return _codec.is_frame_prefix(head)


def resolve_ref(ref, threads=None):
    """A Buf holding the reference content for save/load:
    None; a state dict (serialized with the default metadata); bytes-like;
    a path of a safetensors (or any) file, used as is; or a path of an lmc
    keyframe, decoded (an lmc delta file cannot serve as a reference alone)."""
    if ref is None:
        return _codec.Buf(None)
    if isinstance(ref, Mapping):
        return _codec.Buf(serialize(ref))
    if isinstance(ref, (str, os.PathLike)):
        p = os.fspath(ref)
        if _is_lmc_file(p):
            with _codec.map_file(p) as fb:
                return _codec.Buf(_decode_whole(fb, threads, what="reference %s" % p))
        return _codec.map_file(p)
    return _codec.as_buf(ref)


# ---------------------------------------------------------------------------
# public entry points


def save(state_dict, path, ref=None, threads=None, metadata=None):
    data = serialize(state_dict, metadata)
    path = os.fspath(path)
    with resolve_ref(ref, threads) as rb, _codec.Buf(data) as src, \
            _codec.CCtx(threads, None, None, None, rb) as c:
        check(lib.lmc_cctx_set_param(c.p, _lib.LMC_P_CONTENT_SIZE, src.size), "content size")
        written = [0]
        with _codec.AtomicFile(path) as out:
            w = _codec.fd_writer(out.fd)

            def write(a, n):
                written[0] += n
                w(a, n)
            _codec.drive_compress(c, _codec.buf_reader(src), write)
    return written[0]


def load_bytes(path, ref=None, threads=None):
    """The decoded content (bytearray) of an lmc file, or the bytes of any other file."""
    path = os.fspath(path)
    with _codec.map_file(path) as fb:
        if not _codec.is_frame_prefix(ctypes.string_at(fb.addr, min(fb.size, _lib.FRAME_HEADER_SIZE))):
            return bytearray(ctypes.string_at(fb.addr, fb.size)) if fb.size else bytearray()
        with resolve_ref(ref, threads) as rb:
            try:
                return _decode_whole(fb, threads, rb, what=path)
            except LmcError as e:
                if e.detail is None:
                    e.detail = path
                    e.args = ("%s: %s" % (path, e.name),)
                raise


def load(path, ref=None, threads=None):
    return deserialize(load_bytes(path, ref, threads))


def save_safetensors(state_dict, path, metadata=None):
    data = serialize(state_dict, metadata)
    with _codec.AtomicFile(path) as out:
        mv = memoryview(data)
        while mv:
            k = os.write(out.fd, mv)
            mv = mv[k:]
    return len(data)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    return deserialize(data)
