"""Buffer and file compression over liblmc (standard library only)."""

import ctypes
import mmap
import os
import queue
import stat
import threading

from . import _lib
from ._lib import lib, check, LmcError

STREAM_IN = 4 << 20     # least bytes read from a file per step (see stream_sizes)
STREAM_OUT = 4 << 20    # least staging for coded / decoded output (see stream_sizes)
STREAM_MAX = 16 << 20   # most staging a context's thread count asks for
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
    may run on (as the CLI's default and its -T0), at most the library's
    THREADS_MAX; frames are the same for every count."""
    if threads is None or int(threads) == 0:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        return max(1, min(n, _lib.THREADS_MAX))
    return int(threads)


class CCtx(_Ctx):
    def __init__(self, threads=None, format=None, dtype=None, chunk_log=None, ref=None):
        self.p = lib.lmc_cctx_create()
        if not self.p:
            raise MemoryError("lmc_cctx_create failed")
        try:
            self.threads = resolve_threads(threads)
            check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_THREADS, self.threads), "threads")
            fmt = _format_code(format)
            dtc = dtype_code(dtype)
            if dtc is not None and fmt is None:
                fmt = _lib.FORMATS["raw"]      # as the CLI: --dtype implies --format=raw
            self.format = _lib.FORMATS["auto"] if fmt is None else fmt
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

    def stream_sizes(self):
        """(input, output) bytes worth passing per streaming call. A call
        codes one run of chunks, at most as many as the threads (above 10,
        fewer: lmc_cstream_in_size), and only as many as the output's room
        holds at their worst case: with 4 MiB buffers a call coded about 2
        chunks, whatever the thread count (128 MiB of t19m's optimizer
        moments against the step before, 16 threads: 2.0 MiB of input a
        call). The output takes the worst case of a whole input, at least
        4 MiB (8 MiB buffers made saving a state dict of 2 MiB tensors about
        a tenth slower at 2 threads: their pages' first touches)."""
        n_in = max(STREAM_IN, int(lib.lmc_cstream_in_size(self.p)))
        n_out = max(STREAM_OUT, int(lib.lmc_compress_bound(n_in)))
        return n_in, n_out

    def hash_ref_last(self):
        """For a frame written to a file that patch_ref_hash() fixes up at the
        end: the library hashes the reference between its chunk jobs instead
        of before the header (LMC_P_REF_HASH_LAST), and the header carries 0
        until then. No-op without a reference."""
        if self.ref is not None and not self.ref.is_none:
            check(lib.lmc_cctx_set_param(self.p, _lib.LMC_P_REF_HASH_LAST, 1), "reference hash")
            self.hash_last = True


class DCtx(_Ctx):
    def __init__(self, threads=None, ref=None, check_ref_last=False):
        """check_ref_last: a streaming frame's reference is hashed between
        chunk jobs and checked when the frame ends (LMC_D_REF_CHECK_LAST),
        not all of it before the first chunk: for callers that keep what
        they decode private until the end (a temporary file, tensors not
        yet returned), so that a mapped reference's pages can be dropped
        behind the decoder (RefWindow) instead of all coming in first."""
        self.p = lib.lmc_dctx_create()
        if not self.p:
            raise MemoryError("lmc_dctx_create failed")
        try:
            self.threads = resolve_threads(threads)
            check(lib.lmc_dctx_set_param(self.p, _lib.LMC_D_THREADS, self.threads), "threads")
            if check_ref_last:
                check(lib.lmc_dctx_set_param(self.p, _lib.LMC_D_REF_CHECK_LAST, 1), "reference check")
            self.ref = ref
            if ref is not None and not ref.is_none:
                check(lib.lmc_dctx_set_ref(self.p, ref.addr, ref.size), "reference")
        except BaseException:
            self.close()
            raise

    def _free(self, p):
        lib.lmc_dctx_free(p)

    def stream_sizes(self):
        return dstream_sizes(self.threads)


def dstream_sizes(threads):
    """(input, output) bytes worth passing per streaming call to a
    decompression context of `threads` (None: every core). Chunks decode
    in parallel straight into the output as far as its room goes, so it
    takes two chunks (1 MiB each) per thread, a chunk and a half above 4
    threads (the command's sizes and memory bound), 4 to 16 MiB. The input
    is read in windows of at least 8 MiB: the library decodes the chunks
    that lie whole in a window in place and copies only the one across its
    end."""
    t = resolve_threads(threads)
    n_out = (3 * t) << 19 if t > 4 else t << 21
    n_out = min(max(n_out, STREAM_OUT), STREAM_MAX)
    return max(8 << 20, n_out), n_out


# ---------------------------------------------------------------------------
# streaming drivers
#
# read() returns (addr, size) of the next input piece, size 0 at the end.
# write(addr, size) consumes output.


class RefWindow(object):
    """Keeps a mapped reference's pages in this process's memory only near
    where the coder reads it, as the command does (ref_release in
    programs/lmc.c): after each streaming call, the pages below the content
    position (less a margin, for a safetensors header of another length)
    and those past the next call's input are dropped. They stay in the page
    cache and come back when touched. Without this a 213 MB reference given
    as a path stayed whole in the RSS of compress_file and decompress_file.
    A reference that is not a mapped file (bytes, a state dict) is left
    alone."""

    MARGIN = 256 << 10
    STEP = 4 << 20

    def __init__(self, ctx, ahead):
        ref = getattr(ctx, "ref", None)
        self.mm = ref._mm if ref is not None and ref.size >= 2 * self.STEP else None
        self.size = ref.size if self.mm is not None else 0
        self.ahead = ahead
        self.last = None

    def at(self, pos):
        if self.mm is None or (self.last is not None and self.last <= pos < self.last + self.STEP):
            return
        page = mmap.PAGESIZE
        lo = max(0, pos - self.MARGIN) // page * page
        hi = (pos + self.ahead + self.MARGIN + page - 1) // page * page
        if lo:
            self.mm.madvise(mmap.MADV_DONTNEED, 0, min(lo, self.size))
        if hi < self.size:
            self.mm.madvise(mmap.MADV_DONTNEED, hi, self.size - hi)
        self.last = pos


class _Staging(object):
    """Output staging for drive_*: take() a buffer's address, give(n) back
    the n bytes coded into it. Plain: one buffer, written at once. With a
    writer thread (write_behind): two buffers, the one just filled written
    while the coder fills the other, so that writing a file no longer waits
    for the coder nor the coder for the writes (both release the GIL). The
    writes stay in order; a write's exception is raised by the next take()
    or by close(). The buffers are anonymous mappings, whose pages come in
    only where output is written: ctypes.create_string_buffer zeroes all
    of its bytes first, and a buffer sized for a run's worst case (16 MiB
    from 5 threads) stayed whole in memory, though compressed runs fill a
    fraction of it (compress_file of a 151 MB fp32 delta at 6 threads:
    79.3 MiB peak, over the 76 MiB bound)."""

    def __init__(self, write, write_behind, size=STREAM_OUT):
        self.write = write
        self.size = size
        self.bufs = []
        for _ in range(2 if write_behind else 1):
            mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)   # MAP_SHARED (the default) is shmem
            self.bufs.append(Buf(mm, _mm=mm))
        self.cur = 0
        self.thread = None
        self.err = None
        if write_behind:
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
                    self.write(self.bufs[i].addr, n)
                except BaseException as e:     # raised on the caller's thread
                    self.err = e
            self.free.put(i)

    def take(self):
        return self.bufs[self.cur].addr

    def give(self, n):
        if self.thread is None:
            if n:
                self.write(self.bufs[0].addr, n)
            return
        if n:
            self.todo.put((self.cur, n))
            self.cur = self.free.get()
        if self.err is not None:
            raise self.err

    def close(self, ok=True):
        """Waits for the writes, then unmaps the buffers; raises the first
        write error when ok."""
        if self.thread is not None:
            self.todo.put(None)
            self.thread.join()
            self.thread = None
        for b in self.bufs:
            b.close()
        self.bufs = []
        if ok and self.err is not None:
            raise self.err


def _drive(steps, ctx, read, write, write_behind):
    staging = _Staging(write, write_behind, ctx.stream_sizes()[1])
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
    window = RefWindow(cctx, cctx.stream_sizes()[0])
    release = getattr(read, "release", None)
    taken = 0
    while True:
        addr, n = read()
        end = 1 if n == 0 else 0
        inb.src, inb.size, inb.pos = (addr if n else _addr_of_bytes(_EMPTY)), n, 0
        stuck = 0
        while True:
            before = inb.pos
            out.dst, out.size, out.pos = staging.take(), staging.size, 0
            r = check(lib.lmc_compress_stream(cctx.p, ctypes.byref(out), ctypes.byref(inb), end))
            taken += inb.pos - before
            window.at(taken)
            if release is not None:
                release(inb.pos)
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
    window = RefWindow(dctx, staging.size)
    release = getattr(read, "release", None)
    made = 0
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
            out.dst, out.size, out.pos = staging.take(), staging.size, 0
            r = check(lib.lmc_decompress_stream(dctx.p, ctypes.byref(out), ctypes.byref(inb)))
            total_in += inb.pos - before
            made += out.pos
            window.at(made)
            if release is not None:
                release(inb.pos)
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


def mapped_reader(buf):
    """read() for drive_*: a mapped file (map_file) whole, as buf_reader,
    the library coding its chunks in place; read.release(pos) drops the
    pages before pos from this process's memory (they stay in the page
    cache), so that memory stays bounded by what a call codes, as with the
    command's mapped input, and no input buffers are needed."""
    read = buf_reader(buf)
    mm = buf._mm
    state = [0]

    def release(pos):
        upto = pos // mmap.PAGESIZE * mmap.PAGESIZE
        if mm is not None and upto > state[0]:
            mm.madvise(mmap.MADV_DONTNEED, state[0], upto - state[0])
            state[0] = upto
    read.release = release
    read.close = lambda: None
    return read


READ_MAX = 8 << 20


def _is_zip(f):
    """Whether the regular file f starts as a zip (a torch.save archive).
    Its layout is in the directory at its end: the library parses it in
    place from a mapping, where pieces read would make it stage the whole
    file first (a 231 MB archive peaked at 475 MiB, 2026-12-05)."""
    try:
        return os.pread(f.fileno(), 4, 0) == b"PK\x03\x04"
    except OSError:
        return False


def input_reader(f, size, prefer_read=False, map_zip=False):
    """read() for drive_* over the open file f: a regular file mapped
    (mapped_reader), anything else (a pipe, a device, a file that cannot
    be mapped) read in pieces of `size` with read-ahead (file_reader).
    prefer_read: a regular file of READ_MAX or more is read too while
    `size` is at most READ_MAX (up to 8 threads), as the command does: the
    coder's first touches of mapped pages cost more than read()'s copies
    (compress_file of an 8.6 GB bf16 delta at 2 threads: 12.4-13.2 s
    mapped, 10.0-10.5 read), and two buffers of `size` are little at those
    thread counts; above them the mapping keeps memory within the bound.
    map_zip: a zip (a torch.save archive, coded as one) is mapped anyway.
    Call read.close() when done."""
    st = os.fstat(f.fileno())
    if prefer_read and size <= READ_MAX and st.st_size >= READ_MAX \
            and not (map_zip and _is_zip(f)):
        return file_reader(f, read_ahead=True, size=size)
    if stat.S_ISREG(st.st_mode) and st.st_size > 0:
        try:
            mm = mmap.mmap(f.fileno(), st.st_size, flags=mmap.MAP_PRIVATE,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError):
            mm = None
        if mm is not None:
            b = Buf(mm, _mm=mm)
            read = mapped_reader(b)
            read.close = b.close
            read._keep = b
            return read
    return file_reader(f, read_ahead=True, size=size)


def file_reader(f, read_ahead=False, size=STREAM_IN):
    """read() for drive_*: f's bytes in pieces of `size` (a context's
    stream_sizes()[0]); a piece stays valid until the next call. read_ahead: a thread reads the next piece
    into a second buffer meanwhile (file reads release the GIL, as the
    coder does); its read error is raised by read(). Call read.close() when
    done (it stops the thread; harmless without one)."""
    bufs = []
    for _ in range(2 if read_ahead else 1):
        staging = bytearray(size)
        arr = (ctypes.c_char * size).from_buffer(staging)
        bufs.append((staging, arr, ctypes.addressof(arr), memoryview(staging)))

    def fill(mv):
        n = 0
        while n < size:            # fill the buffer: short reads are not the end
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
