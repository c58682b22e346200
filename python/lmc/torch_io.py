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
    return _parse_header_sized(data, len(data))


def _parse_header_sized(data, n_total):
    """parse_header of a file of n_total bytes of which data holds at least
    the length and the header."""
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


def _torch_dtype(name, dt):
    tdt = ST_TO_TORCH.get(dt)
    if tdt is None:
        raise ValueError("%r: dtype %s is not supported by this torch (%s)"
                         % (name, dt, torch.__version__))
    return tdt


def deserialize(data):
    """A dict name -> CPU tensor (owning its memory) from a safetensors buffer,
    in file order."""
    _check_host()
    if isinstance(data, bytes):
        data = bytearray(data)       # torch.frombuffer wants a writable buffer
    meta, entries, _ = parse_header(data)
    out = {}
    for name, dt, shape, b, e in entries:
        tdt = _torch_dtype(name, dt)
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


def _state_reader(items, metadata):
    """read() for _codec.drive_compress: the safetensors serialization of
    the prepared items, as pieces that point into the tensors themselves (the
    header, then each tensor's bytes), so that no copy of the whole
    checkpoint is made. Returns (read, content size)."""
    hjson, sizes, data_len = _header(items, metadata)
    head = len(hjson).to_bytes(8, "little") + hjson
    pieces = [(_codec._addr_of_bytes(head), len(head))]
    pieces += [(t.data_ptr(), n) for (name, st, t), n in zip(items, sizes) if n]
    it = iter(pieces)

    def read():
        return next(it, (None, 0))
    read._keep = (head, items)
    return read, len(head) + data_len


def save(state_dict, path, ref=None, threads=None, metadata=None):
    _check_host()
    items = _prepare(state_dict)
    read, size = _state_reader(items, metadata)
    path = os.fspath(path)
    with resolve_ref(ref, threads) as rb, _codec.CCtx(threads, None, None, None, rb) as c:
        check(lib.lmc_cctx_set_param(c.p, _lib.LMC_P_CONTENT_SIZE, size), "content size")
        written = [0]
        with _codec.AtomicFile(path) as out:
            w = _codec.fd_writer(out.fd)

            def write(a, n):
                written[0] += n
                w(a, n)
            c.hash_ref_last()   # the header's reference hash is written last
            _codec.drive_compress(c, read, write, write_behind=True)
            _codec.patch_ref_hash(c, out.fd)
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


class _RegionDecoder(object):
    """Decodes a frame, read in pieces by read() (as for _codec.drive_*),
    into caller-chosen memory regions in content order: the state dict's
    tensors are filled in place, with no copy of the whole checkpoint, or
    of the whole frame, beside them."""

    def __init__(self, dctx, read):
        self.d = dctx
        self.read = read
        self.inb = _lib.lmc_inbuf()
        self.inb.src, self.inb.size, self.inb.pos = _codec._addr_of_bytes(_codec._EMPTY), 0, 0
        self.out = _lib.lmc_outbuf()
        self.eof = False
        self.ended = False
        self._scratch = ctypes.create_string_buffer(1 << 16)
        self.window = _codec.RefWindow(dctx, dctx.stream_sizes()[1])
        self.made = 0

    def _step(self):
        if self.inb.pos == self.inb.size and not self.eof:
            addr, n = self.read()
            if n:
                self.inb.src, self.inb.size, self.inb.pos = addr, n, 0
            else:
                self.eof = True
        before = (self.inb.pos, self.out.pos)
        r = check(lib.lmc_decompress_stream(self.d.p, ctypes.byref(self.out), ctypes.byref(self.inb)))
        self.made += self.out.pos - before[1]
        self.window.at(self.made)
        if r == 0:
            self.ended = True
        moved = (self.inb.pos, self.out.pos) != before
        if not moved and not self.ended and self.eof and self.inb.pos == self.inb.size:
            raise LmcError(_lib.LMC_ERR_TRUNCATED)
        return moved

    def fill(self, addr, n):
        """Decodes the next n content bytes to addr."""
        self.out.dst, self.out.size, self.out.pos = addr, n, 0
        stuck = 0
        while self.out.pos < n:
            if self.ended:
                raise LmcError(_lib.LMC_ERR_TRUNCATED)
            stuck = 0 if self._step() else stuck + 1
            if stuck > _codec._STUCK_LIMIT:
                raise LmcError(1, None, "the decompressor makes no progress")

    def skip(self, n):
        while n:
            k = min(n, len(self._scratch))
            self.fill(ctypes.addressof(self._scratch), k)
            n -= k

    def finish(self):
        """Reads the rest of the frame (its end and checksums); no content
        and no bytes after the frame may be left."""
        stuck = 0
        while not self.ended:
            self.out.dst, self.out.size, self.out.pos = ctypes.addressof(self._scratch), 1, 0
            stuck = 0 if self._step() else stuck + 1
            if self.out.pos:
                raise ValueError("content continues past its announced size")
            if stuck > _codec._STUCK_LIMIT:
                raise LmcError(1, None, "the decompressor makes no progress")
        if self.inb.pos < self.inb.size or (not self.eof and self.read()[1]):
            raise LmcError(_lib.LMC_ERR_TRAILING)


def _load_in_place(head, read, rb, threads, what):
    """The state dict of an lmc frame of safetensors content (head: the
    frame's first bytes; read: the whole frame, from its start), each tensor
    decoded straight into its own memory; None where the frame does not
    allow that (no content size in its header, tensors that overlap), for
    the whole-buffer path."""
    with _codec.Buf(head) as hb:
        h = _codec.frame_header(hb)
    if not h.content_size_known:
        return None
    if h.has_ref and (rb is None or rb.is_none):
        raise LmcError(_lib.LMC_ERR_REF_REQUIRED, None,
                       "%s is a delta frame: give the checkpoint it was made against" % what)
    total = h.content_size
    # the tensors are returned only once the frame and its reference check out
    with _codec.DCtx(threads, rb, check_ref_last=True) as d:
        dec = _RegionDecoder(d, read)
        head = bytearray(min(8, total))
        if head:
            arr = (ctypes.c_char * len(head)).from_buffer(head)
            dec.fill(ctypes.addressof(arr), len(head))
            del arr
        n = int.from_bytes(bytes(head), "little") if len(head) == 8 else 0
        if len(head) < 8 or n < 2 or 8 + n > total:
            _parse_header_sized(head, total)     # raises its error for this header
        hjson = bytearray(n)
        arr = (ctypes.c_char * n).from_buffer(hjson)
        dec.fill(ctypes.addressof(arr), n)
        del arr
        # the bounds are checked against the content size: the tensors'
        # bytes are not needed for that
        meta, entries, start = _parse_header_sized(head + hjson, total)
        end = start
        for name, dt, shape, b, e in entries:
            if b < end:
                return None             # overlapping tensors: the whole-buffer path copies them
            end = e
        pos = start
        out = {}
        for name, dt, shape, b, e in entries:
            tdt = _torch_dtype(name, dt)
            dec.skip(b - pos)
            t = torch.empty(shape, dtype=tdt)
            if e > b:
                dec.fill(t.data_ptr(), e - b)
            out[name] = t
            pos = e
        dec.skip(total - pos)
        dec.finish()
    return out


def load(path, ref=None, threads=None):
    _check_host()
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(_lib.FRAME_HEADER_SIZE)
        if _codec.is_frame_prefix(head):
            with resolve_ref(ref, threads) as rb:
                f.seek(0)
                read = _codec.file_reader(f, read_ahead=True, size=_codec.dstream_sizes(threads)[0])
                try:
                    sd = _load_in_place(head, read, rb, threads, path)
                except LmcError as e:
                    if e.detail is None:
                        e.detail = path
                        e.args = ("%s: %s" % (path, e.name),)
                    raise
                finally:
                    read.close()
            if sd is not None:
                return sd
    return deserialize(load_bytes(path, ref, threads))


def write_safetensors_fd(state_dict, fd, metadata=None):
    """Writes the safetensors serialization of `state_dict` to the open file
    descriptor fd, straight from the tensors' memory (no copy of the whole
    checkpoint). Returns the bytes written."""
    _check_host()
    read, size = _state_reader(_prepare(state_dict), metadata)
    while True:
        addr, n = read()
        if not n:
            return size
        mv = memoryview((ctypes.c_char * n).from_address(addr)).cast("B")
        while mv:
            k = os.write(fd, mv)
            mv = mv[k:]


def read_safetensors_file(f):
    """The state dict of the safetensors content of binary file f (from its
    current position to its end), each tensor read straight into its own
    memory: no copy of the whole file beside them."""
    _check_host()
    start = f.tell()
    total = os.fstat(f.fileno()).st_size - start
    head = f.read(8) if total >= 8 else b""
    n = int.from_bytes(head, "little") if len(head) == 8 else 0
    if len(head) < 8 or n < 2 or 8 + n > total:
        _parse_header_sized(bytearray(head), total)     # raises its error for this header
    meta, entries, data_start = _parse_header_sized(bytearray(head + _read_exact(f, n)), total)
    end = data_start
    for name, dt, shape, b, e in entries:
        if b < end:                     # overlapping tensors: the whole-buffer path copies them
            f.seek(start)
            return deserialize(bytearray(f.read()))
        end = e
    pos = data_start
    out = {}
    for name, dt, shape, b, e in entries:
        tdt = _torch_dtype(name, dt)
        if b > pos:
            f.seek(start + b)
        t = torch.empty(shape, dtype=tdt)
        if e > b:
            _readinto_exact(f, (ctypes.c_char * (e - b)).from_address(t.data_ptr()))
        out[name] = t
        pos = e
    return out


def _read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise ValueError("safetensors: file shorter than its header says")
    return b


def _readinto_exact(f, buf):
    mv = memoryview(buf).cast("B")
    while mv:
        k = f.readinto(mv)
        if not k:
            raise ValueError("safetensors: file shorter than its header says")
        mv = mv[k:]


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
        return read_safetensors_file(f)
