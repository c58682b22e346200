"""Buffer and file compression over liblmc (standard library only)."""

import ctypes
import mmap
import os
import queue
import threading

from . import _lib
from ._lib import lib, check, LmcError

STREAM_IN = 4 << 20     # bytes read from a file per step
STREAM_OUT = 4 << 20    # staging buffer for coded / decoded output
_STUCK_LIMIT = 1000
_EMPTY = b"\0"          # a valid address for empty buffers (size 0)


def _addr_of_bytes(b):
    return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value


# ---------------------------------------------------------------------------
# buffers: an address and a size for C, without copying where possible


class Buf(object):
    """A read-only view of bytes for C: .addr, .size. Close it (or use `with`)
    to release the exports and mappings it holds."""

    def __init__(self, obj=None, _mm=None, _fd=None):
        self._hold = []
        self._mm = _mm
        self._fd = _fd
        self.obj = obj
        if obj is None:
            self.addr, self.size = None, 0
            return
        n = len(obj) if not isinstance(obj, memoryview) else obj.nbytes
        if n == 0:
            self.addr, self.size = _addr_of_bytes(_EMPTY), 0
            self._hold.append(_EMPTY)
        elif isinstance(obj, bytes):
            self.addr, self.size = _addr_of_bytes(obj), n
            self._hold.append(obj)
        else:
            try:
                arr = (ctypes.c_char * n).from_buffer(obj)
            except (TypeError, ValueError, BufferError):
                b = bytes(obj)            # read-only or non-contiguous: copy
                self.addr, self.size = _addr_of_bytes(b), n
                self._hold.append(b)
            else:
                self.addr, self.size = ctypes.addressof(arr), n
                self._hold.append(arr)

    def close(self):
        self._hold = []
        self.obj = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def is_none(self):
        return self.addr is None


def map_file(path):
    """Buf over a whole file, memory-mapped (private copy-on-write mapping)."""
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            os.close(fd)
            return Buf(b"")
        mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    b = Buf(mm, _mm=mm)
    return b


def as_buf(obj):
    """Buf for None, a bytes-like object, or a path (str / os.PathLike: the file's bytes)."""
    if obj is None:
        return Buf(None)
    if isinstance(obj, Buf):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return map_file(obj)
    if isinstance(obj, (bytes, bytearray, memoryview, mmap.mmap)):
        return Buf(obj)
    try:
        memoryview(obj)
    except TypeError:
        raise TypeError("expected bytes-like data or a path, got %s" % type(obj).__name__)
    return Buf(memoryview(obj))


# ---------------------------------------------------------------------------
# contexts


def _format_code(fmt):
    if fmt is None:
        return None
    if isinstance(fmt, int):
        return fmt
    try:
        return _lib.FORMATS[str(fmt).lower()]
    except KeyError:
        raise ValueError("unknown format %r (auto, generic, raw, safetensors, torch)" % (fmt,))


def dtype_code(dt):
    if dt is None:
        return None
    if isinstance(dt, int):
        return dt
    name = str(dt)
    if name.startswith("torch."):
        name = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.half": "f16",
                "torch.float32": "f32", "torch.float": "f32", "torch.float64": "f64",
                "torch.double": "f64", "torch.int8": "i8", "torch.uint8": "u8",
                "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
                "torch.bool": "bool"}.get(name, name)
    code = lib.lmc_dtype_from_name(name.encode())
    if code < 0:
        raise ValueError("unknown dtype %r" % (dt,))
    return code


class _Ctx(object):
    """A library context: freed once, usable as a context manager; keeps its
    borrowed reference alive as long as it lives."""

    def close(self):
        if self.p:
            self._free(self.p)
            self.p = None
        self.ref = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def resolve_threads(threads):
    """Worker threads for a context: None or 0 means every core this process
    may run on (as the CLI's default and its -T0); frames are the same for
    every count."""
    if threads is None or int(threads) == 0:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)
    return int(threads)


class CCtx(_Ctx):
    def __init__(self, threads=None, format=None, dtype=None, chunk_log=None, ref=None):
        self.p = lib.lmc_cctx_create()
        if not self.p:
            raise MemoryError("lmc_cctx_create failed")
        try:
            check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_THREADS, resolve_threads(threads)), "threads")
            fmt = _format_code(format)
            dtc = dtype_code(dtype)
            if dtc is not None and fmt is None:
                fmt = _lib.FORMATS["raw"]      # as the CLI: --dtype implies --format=raw
            if fmt is not None:
                check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_FORMAT, fmt), "format")
            if dtc is not None:
                check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_DTYPE, dtc), "dtype")
            if chunk_log is not None:
                check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_CHUNK_LOG, int(chunk_log)), "chunk_log")
            self.ref = ref     # keeps the borrowed reference alive
            self.hash_last = False
            if ref is not None and not ref.is_none:
                check(lib.lmc_cctx_set_ref(self.p, ref.addr, ref.size), "reference")
        except BaseException:
            self.close()
            raise

    def _free(self, p):
        lib.lmc_cctx_free(p)

    def hash_ref_last(self):
        """For a frame written to a file that patch_ref_hash() fixes up at the
        end: the library hashes the reference between its chunk jobs instead
        of before the header (LMC_P_REF_HASH_LAST), and the header carries 0
        until then. No-op without a reference."""
        if self.ref is not None and not self.ref.is_none:
            check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_REF_HASH_LAST, 1), "reference hash")
            self.hash_last = True


class DCtx(_Ctx):
    def __init__(self, threads=None, ref=None):
        self.p = lib.lmc_dctx_create()
        if not self.p:
            raise MemoryError("lmc_dctx_create failed")
        try:
            check(lib.lmc_dctx_set_param(self.p, _lib.LMC_D_THREADS, resolve_threads(threads)), "threads")
            self.ref = ref
            if ref is not None and not ref.is_none:
                check(lib.lmc_dctx_set_ref(self.p, ref.addr, ref.size), "reference")
        except BaseException:
            self.close()
            raise

    def _free(self, p):
        lib.lmc_dctx_free(p)


# ---------------------------------------------------------------------------
# streaming drivers
#
# read() returns (addr, size) of the next input piece, size 0 at the end.
# write(addr, size) consumes output.


class _Staging(object):
    """Output staging for drive_*: take() a buffer's address, give(n) back
    the n bytes coded into it. Plain: one buffer, written at once. With a
    writer thread (write_behind): two buffers, the one just filled written
    while the coder fills the other, so that writing a file no longer waits
    for the coder nor the coder for the writes (both release the GIL). The
    writes stay in order; a write's exception is raised by the next take()
    or by close()."""

    def __init__(self, write, write_behind):
        self.write = write
        self.bufs = [ctypes.create_string_buffer(STREAM_OUT) for _ in range(2 if write_behind else 1)]
        self.cur = 0
        self.thread = None
        if write_behind:
            self.err = None
            self.free = queue.Queue()
            self.todo = queue.Queue()
            self.free.put(1)
            self.thread = threading.Thread(target=self._run, name="lmc-writer", daemon=True)
            self.thread.start()

    def _run(self):
        while True:
            job = self.todo.get()
            if job is None:
                return
            i, n = job
            if self.err is None:
                try:
                    self.write(ctypes.addressof(self.bufs[i]), n)
                except BaseException as e:     # raised on the caller's thread
                    self.err = e
            self.free.put(i)

    def take(self):
        return ctypes.addressof(self.bufs[self.cur])

    def give(self, n):
        if self.thread is None:
            if n:
                self.write(ctypes.addressof(self.bufs[0]), n)
            return
        if n:
            self.todo.put((self.cur, n))
            self.cur = self.free.get()
        if self.err is not None:
            raise self.err

    def close(self, ok=True):
        """Waits for the writes; raises the first write error when ok."""
        if self.thread is not None:
            self.todo.put(None)
            self.thread.join()
            self.thread = None
            if ok and self.err is not None:
                raise self.err


def _drive(steps, ctx, read, write, write_behind):
    staging = _Staging(write, write_behind)
    try:
        steps(ctx, read, staging)
    except BaseException:
        staging.close(ok=False)
        raise
    staging.close()


def drive_compress(cctx, read, write, write_behind=False):
    """write_behind: write on a thread while coding (for files; see _Staging)."""
    _drive(_compress_steps, cctx, read, write, write_behind)


def _compress_steps(cctx, read, staging):
    out = _lib.lmc_outbuf()
    inb = _lib.lmc_inbuf()
    while True:
        addr, n = read()
        end = 1 if n == 0 else 0
        inb.src, inb.size, inb.pos = (addr if n else _addr_of_bytes(_EMPTY)), n, 0
        stuck = 0
        while True:
            before = inb.pos
            out.dst, out.size, out.pos = staging.take(), STREAM_OUT, 0
            r = check(lib.lmc_compress_stream(cctx.p, ctypes.byref(out), ctypes.byref(inb), end))
            if r != 0 and inb.pos == before and out.pos == 0:
                stuck += 1
                if stuck > _STUCK_LIMIT:
                    raise LmcError(1, None, "the compressor makes no progress")
            else:
                stuck = 0
            full = out.pos == out.size
            staging.give(out.pos)
            if (r == 0) if end else (inb.pos == inb.size and not full):
                break
        if end:
            return


def drive_decompress(dctx, read, write, write_behind=False):
    """write_behind: write on a thread while decoding (for files; see _Staging)."""
    _drive(_decompress_steps, dctx, read, write, write_behind)


def _decompress_steps(dctx, read, staging):
    out = _lib.lmc_outbuf()
    inb = _lib.lmc_inbuf()
    done = False
    total_in = 0
    while True:
        addr, n = read()
        eof = n == 0
        if done:
            if eof:
                return
            raise LmcError(_lib.LMC_ERR_TRAILING)
        inb.src, inb.size, inb.pos = (addr if n else _addr_of_bytes(_EMPTY)), n, 0
        stuck = 0
        while True:
            before = inb.pos
            out.dst, out.size, out.pos = staging.take(), STREAM_OUT, 0
            r = check(lib.lmc_decompress_stream(dctx.p, ctypes.byref(out), ctypes.byref(inb)))
            total_in += inb.pos - before
            if r != 0 and inb.pos == before and out.pos == 0 and inb.pos < inb.size:
                stuck += 1
                if stuck > _STUCK_LIMIT:
                    raise LmcError(1, None, "the decompressor makes no progress")
            else:
                stuck = 0
            full = out.pos == out.size
            staging.give(out.pos)
            if r == 0:
                done = True
                if inb.pos < inb.size:
                    raise LmcError(_lib.LMC_ERR_TRAILING)
                break
            if inb.pos == inb.size and not full:
                break
        if eof:
            if done:
                return
            if total_in == 0:
                raise LmcError(_lib.LMC_ERR_NOT_LMC, None, "empty input")
            raise LmcError(_lib.LMC_ERR_TRUNCATED)


def buf_reader(buf):
    """read() for drive_*: the whole buffer at once, then the end."""
    state = [False]

    def read():
        if state[0] or buf.size == 0:
            return (None, 0)
        state[0] = True
        return (buf.addr, buf.size)
    return read


def file_reader(f, read_ahead=False):
    """read() for drive_*: f's bytes in pieces of STREAM_IN; a piece stays
    valid until the next call. read_ahead: a thread reads the next piece
    into a second buffer meanwhile (file reads release the GIL, as the
    coder does); its read error is raised by read(). Call read.close() when
    done (it stops the thread; harmless without one)."""
    bufs = []
    for _ in range(2 if read_ahead else 1):
        staging = bytearray(STREAM_IN)
        arr = (ctypes.c_char * STREAM_IN).from_buffer(staging)
        bufs.append((staging, arr, ctypes.addressof(arr), memoryview(staging)))

    def fill(mv):
        n = 0
        while n < STREAM_IN:       # fill the buffer: short reads are not the end
            k = f.readinto(mv[n:])
            if not k:
                break
            n += k
        return n

    if not read_ahead:
        def read():
            return (bufs[0][2], fill(bufs[0][3]))
        read.close = lambda: None
        read._keep = bufs
        return read

    free, ready = queue.Queue(), queue.Queue()
    state = {"held": None, "stop": False}

    def run():
        i = 0
        while True:
            if free.get() is None or state["stop"]:
                return
            try:
                n = fill(bufs[i][3])
            except BaseException as e:    # raised on the caller's thread
                ready.put(e)
                return
            ready.put((i, n))
            if n == 0:
                return
            i ^= 1

    def read():
        if state["held"] is not None:
            free.put(True)                # the caller is done with that piece
        got = ready.get()
        if isinstance(got, BaseException):
            state["held"] = None
            raise got
        i, n = got
        state["held"] = i
        if n == 0:
            ready.put(got)                # the end, again for a further call
            state["held"] = None
        return (bufs[i][2], n)

    def close():
        state["stop"] = True
        free.put(None)
        t.join()

    free.put(True)
    free.put(True)
    t = threading.Thread(target=run, name="lmc-reader", daemon=True)
    t.start()
    read.close = close
    read._keep = bufs
    return read


def fd_writer(fd):
    def write(addr, n):
        view = memoryview((ctypes.c_char * n).from_address(addr)).cast("B")
        while view:
            k = os.write(fd, view)
            view = view[k:]
    return write


# ---------------------------------------------------------------------------
def patch_ref_hash(cctx, fd):
    """After a frame written from offset 0 of the file fd by a context that
    hash_ref_last(): writes the reference's hash (from the frame's
    statistics) into the header, and the header's checksum over it."""
    if not cctx.hash_last:
        return
    st = _lib.lmc_frame_stats()
    check(lib.lmc_cctx_last_stats(cctx.p, ctypes.byref(st)), "frame statistics")
    size = _lib.FRAME_HEADER_SIZE
    h = bytearray(os.pread(fd, size, 0))
    if len(h) != size or int.from_bytes(h[28:36], "little") not in (0, st.header.ref_hash):
        raise LmcError(1, None, "cannot read back the frame header")
    h[28:36] = int(st.header.ref_hash).to_bytes(8, "little")
    hc = lib.lmc_hash64(bytes(h[:36]), 36) & 0xFFFFFFFF
    h[36:40] = hc.to_bytes(4, "little")
    if os.pwrite(fd, bytes(h[28:40]), 28) != 12:
        raise OSError("short write of the frame header")


# atomic output files


class AtomicFile(object):
    """A temporary file next to `path`, renamed onto it by commit()."""

    def __init__(self, path):
        self.path = os.fspath(path)
        d, base = os.path.split(os.path.abspath(self.path))
        self.dir = d
        self.tmp = os.path.join(d, ".%s.tmp-%d-%s" % (base, os.getpid(), os.urandom(4).hex()))
        # read too: patch_ref_hash reads the header back
        self.fd = os.open(self.tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)

    def commit(self):
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = None
        os.replace(self.tmp, self.path)
        try:
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass

    def abort(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            try:
                os.unlink(self.tmp)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            if self.fd is not None:
                self.commit()
        else:
            self.abort()


# ---------------------------------------------------------------------------
# frame inspection


def frame_header(buf):
    h = _lib.lmc_frame_header()
    check(lib.lmc_get_frame_header(ctypes.byref(h), buf.addr, buf.size))
    return h


def header_dict(h):
    return {
        "version": h.version,
        "container": lib.lmc_format_name(h.container).decode(),
        "dtype": lib.lmc_dtype_name(h.dtype).decode(),
        "chunk_log": h.chunk_log,
        "chunk_size": 1 << h.chunk_log,
        "has_ref": bool(h.has_ref),
        "ref_size": h.ref_size if h.has_ref else None,
        "ref_hash": h.ref_hash if h.has_ref else None,
        "content_size_known": bool(h.content_size_known),
        "content_size": h.content_size if h.content_size_known else None,
    }


def is_frame_prefix(head):
    """True if `head` (bytes) starts with a valid lmc frame header."""
    if len(head) < _lib.FRAME_HEADER_SIZE:
        return False
    h = _lib.lmc_frame_header()
    r = lib.lmc_get_frame_header(ctypes.byref(h), head, len(head))
    return not lib.lmc_is_error(r)


def stats_dict(st):
    d = header_dict(st.header)
    coders = {}
    for c in range(_lib.CODER_COUNT):
        if st.blocks[c]:
            coders[lib.lmc_coder_name(c).decode()] = {
                "blocks": st.blocks[c], "in": st.block_in[c], "out": st.block_out[c]}
    dtypes = {}
    for t in range(_lib.DTYPE_COUNT):
        if st.dtype_in[t] or st.dtype_out[t]:
            dtypes[lib.lmc_dtype_name(t).decode()] = {"in": st.dtype_in[t], "out": st.dtype_out[t]}
    d.update({
        "content_size": st.content_size,
        "frame_size": st.frame_size,
        "ratio": (st.frame_size / st.content_size) if st.content_size else None,
        "content_hash": st.content_hash,
        "chunks": st.chunks,
        "pieces": st.pieces,
        "pieces_xor": st.pieces_xor,
        "pieces_rotated": st.pieces_rotated,
        "pieces_refmodel": st.pieces_refmodel,
        "coders": coders,
        "dtypes": dtypes,
    })
    return d
