"""lmc bytes and file API: round trips, references, errors, frame_info."""

import ctypes
import os
import random
import struct
import subprocess
import sys
import threading
import time
import unittest

import lmc
from lmc import _codec
from ._util import TempDirCase, read, REPO, needs_torch, torch


def _rand(n, seed):
    return random.Random(seed).randbytes(n)


def _frame_content_hash(frame, content):
    """The footer's content hash of a format-5 frame, from the format's rule
    (doc/format.md, "Footer"): H64 of the chunks' H64s, 8 little-endian bytes
    each, chunk sizes from the seek table."""
    n = struct.unpack_from("<Q", frame, len(frame) - 32)[0]
    hs, off = b"", 0
    for i in range(n):
        size = struct.unpack_from("<I", frame, len(frame) - 32 - 12 * (n - i) + 4)[0]
        hs += struct.pack("<Q", lmc.hash64(content[off:off + size]))
        off += size
    return lmc.hash64(hs)


def _floats(n, seed, eps=0.0):
    """f32 values like weights; with eps, a slightly moved copy of seed's values."""
    r = random.Random(seed)
    vals = [r.gauss(0, 0.02) for _ in range(n)]
    if eps:
        r2 = random.Random(seed + 1000)
        vals = [v + r2.gauss(0, eps) for v in vals]
    return struct.pack("<%df" % n, *vals)


class TestBytes(unittest.TestCase):
    def test_roundtrip_sizes(self):
        for data in (b"", b"\0", b"x", _rand(1000, 1), bytes(300000), _rand(3 << 20, 2)):
            frame = lmc.compress(data)
            self.assertIsInstance(frame, bytes)
            self.assertEqual(lmc.decompress(frame), data, len(data))

    def test_bytes_like_inputs(self):
        data = _rand(50000, 3)
        for obj in (bytearray(data), memoryview(data), memoryview(bytearray(data))):
            frame = lmc.compress(obj)
            self.assertEqual(lmc.decompress(bytearray(frame)), data)
            self.assertEqual(lmc.decompress(memoryview(frame)), data)
        with self.assertRaises(TypeError):
            lmc.compress("not bytes")

    def test_threads_same_output(self):
        data = _floats(900000, 4)          # 3.6 MB: two chunks
        f1 = lmc.compress(data, threads=1)
        f2 = lmc.compress(data, threads=2)
        self.assertEqual(f1, f2)
        self.assertEqual(lmc.decompress(f1, threads=2), data)

    def test_default_threads_all_cores(self):
        """No `threads` (or 0) gives the contexts every core this process may
        run on, as the CLI does; the frames do not change."""
        from unittest import mock
        from lmc import _codec, _lib
        cores = len(os.sched_getaffinity(0))
        self.assertEqual(_codec.resolve_threads(None), cores)
        self.assertEqual(_codec.resolve_threads(0), cores)
        self.assertEqual(_codec.resolve_threads(3), 3)
        seen = []
        real_c, real_d = _codec.lib.lmc_cctx_set_param, _codec.lib.lmc_dctx_set_param

        def spy_c(p, param, value):
            if param == _lib.LMC_P_THREADS:
                seen.append(("c", value))
            return real_c(p, param, value)

        def spy_d(p, param, value):
            if param == _lib.LMC_D_THREADS:
                seen.append(("d", value))
            return real_d(p, param, value)
        data = _floats(900000, 4)
        with mock.patch.object(_codec.lib, "lmc_cctx_set_param", spy_c), \
                mock.patch.object(_codec.lib, "lmc_dctx_set_param", spy_d):
            frame = lmc.compress(data)
            self.assertEqual(lmc.decompress(frame), data)
        self.assertEqual(seen, [("c", cores), ("d", cores)])
        self.assertEqual(frame, lmc.compress(data, threads=1))
        with self.assertRaises(lmc.LmcError):
            lmc.compress(data, threads=-1)
        with self.assertRaises(lmc.LmcError):
            lmc.compress(data, threads=_lib.THREADS_MAX + 1)
        # more cores than a context takes: the default is the most it takes
        # (one per core was refused, and every call failed)
        with mock.patch.object(_codec.os, "sched_getaffinity", lambda pid: set(range(300))):
            self.assertEqual(_codec.resolve_threads(None), _lib.THREADS_MAX)
            self.assertEqual(lmc.decompress(lmc.compress(data)), data)

    def test_raw_dtype(self):
        data = _floats(20000, 5)
        frame = lmc.compress(data, dtype="f32")
        info = lmc.frame_info(frame)
        self.assertEqual(info["container"], "raw")
        self.assertEqual(info["dtype"], "f32")
        self.assertEqual(lmc.decompress(frame), data)
        self.assertLess(len(frame), len(data))
        self.assertEqual(lmc.decompress(lmc.compress(data, format="generic")), data)
        with self.assertRaises(ValueError):
            lmc.compress(data, dtype="f33")

    def test_delta_with_ref(self):
        ref = _floats(50000, 6)
        cur = _floats(50000, 6, eps=1e-6)
        key = lmc.compress(cur, dtype="f32")
        delta = lmc.compress(cur, ref=ref, dtype="f32")
        self.assertLess(len(delta), len(key))
        self.assertEqual(lmc.decompress(delta, ref=ref), cur)
        self.assertEqual(lmc.decompress(delta, ref=bytearray(ref)), cur)
        info = lmc.frame_info(delta)
        self.assertTrue(info["has_ref"])
        self.assertEqual(info["ref_size"], len(ref))
        self.assertEqual(info["ref_hash"], lmc.hash64(ref))
        self.assertEqual(info["content_hash"], _frame_content_hash(delta, cur))
        self.assertFalse(lmc.frame_info(key)["has_ref"])

    def test_empty_ref_is_a_ref(self):
        data = _rand(1000, 7)
        frame = lmc.compress(data, ref=b"")
        self.assertTrue(lmc.frame_info(frame)["has_ref"])
        self.assertEqual(lmc.decompress(frame, ref=b""), data)
        with self.assertRaises(lmc.LmcError):
            lmc.decompress(frame)

    def test_wrong_ref(self):
        ref = _rand(10000, 8)
        data = _rand(10000, 9)
        frame = lmc.compress(data, ref=ref)
        bad = bytearray(ref)
        bad[0] ^= 1
        for wrong in (bytes(bad), ref[:-1], b""):
            with self.assertRaises(lmc.LmcError) as cm:
                lmc.decompress(frame, ref=wrong)
            e = cm.exception
            self.assertEqual(e.code, 21)
            self.assertEqual(e.id, "ref_wrong")
            self.assertIn("reference", e.name)
            self.assertIn("reference", str(e))
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress(frame)
        self.assertEqual(cm.exception.id, "ref_required")
        self.assertIn("reference", cm.exception.name)

    def test_corrupt_inputs(self):
        data = _rand(100000, 10)
        frame = lmc.compress(data)
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress(b"hello, world, this is not an lmc frame at all!!")
        self.assertEqual(cm.exception.id, "not_lmc")
        for cut in (1, 10, len(frame) // 2, len(frame) - 1):
            with self.assertRaises(lmc.LmcError):
                lmc.decompress(frame[:cut])
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress(frame + b"\0")
        self.assertEqual(cm.exception.id, "trailing")
        flipped = bytearray(frame)
        flipped[len(frame) // 2] ^= 0x40
        with self.assertRaises(lmc.LmcError):
            lmc.decompress(bytes(flipped))
        with self.assertRaises(lmc.LmcError):
            lmc.frame_info(bytes(flipped))

    def test_error_object(self):
        e = lmc.LmcError(21)
        self.assertEqual(e.code, 21)
        self.assertEqual(e.id, "ref_wrong")
        self.assertIn("reference", e.name)
        import pickle
        e2 = pickle.loads(pickle.dumps(lmc.LmcError(15, None, "x.lmc")))
        self.assertEqual((e2.code, e2.detail), (15, "x.lmc"))

    def test_frame_info_of_safetensors(self):
        path = os.path.join(REPO, "data", "trajectory", "step-000300", "model_bf16.safetensors")
        if not os.path.exists(path):
            self.skipTest("no sample trajectory")
        data = read(path)
        info = lmc.frame_info(lmc.compress(data))
        self.assertEqual(info["container"], "safetensors")
        self.assertEqual(info["content_size"], len(data))
        self.assertIn("bf16", info["dtypes"])
        self.assertGreater(info["chunks"], 0)


class TestWriteBehind(unittest.TestCase):
    """The file paths (lmc.save, compress_file, decompress_file) write on a
    thread while the coder runs: the writes must come in order, the same
    bytes as writing in line, and a write's exception must reach the caller
    with no write after it."""

    def _compress(self, data, write, write_behind):
        with _codec.Buf(data) as b, _codec.CCtx(1) as c:
            _codec.drive_compress(c, _codec.buf_reader(b), write, write_behind=write_behind)

    def _collect(self, parts, threads):
        def write(addr, n):
            threads.add(threading.current_thread().name)
            parts.append(ctypes.string_at(addr, n))
        return write

    def test_same_bytes_in_order(self):
        data = _rand(13 << 20, 9)          # incompressible: 4 staging buffers of output
        inline, behind, names = [], [], set()
        self._compress(data, self._collect(inline, set()), False)
        self._compress(data, self._collect(behind, names), True)
        self.assertGreaterEqual(len(behind), 4)
        self.assertEqual(b"".join(behind), b"".join(inline))
        self.assertEqual(names, {"lmc-writer"})
        out, names = [], set()
        frame = b"".join(behind)
        with _codec.Buf(frame) as fb, _codec.DCtx(1) as d:
            _codec.drive_decompress(d, _codec.buf_reader(fb), self._collect(out, names), write_behind=True)
        self.assertEqual(b"".join(out), data)
        self.assertEqual(names, {"lmc-writer"})

    def test_write_error_reaches_the_caller(self):
        data = _rand(13 << 20, 10)
        for fail_at in (1, 2, 4):
            calls = [0]

            def write(addr, n):
                calls[0] += 1
                if calls[0] == fail_at:
                    raise OSError(28, "No space left on device")
            with self.assertRaises(OSError) as cm:
                self._compress(data, write, True)
            self.assertEqual(cm.exception.errno, 28)
            self.assertEqual(calls[0], fail_at)

    def test_coder_error_stops_the_writer(self):
        frame = bytearray(lmc.compress(_rand(13 << 20, 11), threads=1))
        frame[len(frame) // 2] ^= 1
        before = threading.active_count()
        with self.assertRaises(lmc.LmcError):
            with _codec.Buf(bytes(frame)) as fb, _codec.DCtx(1) as d:
                _codec.drive_decompress(d, _codec.buf_reader(fb), lambda a, n: None, write_behind=True)
        self.assertEqual(threading.active_count(), before)

    def test_staging_holds_only_what_is_written(self):
        """Output staging is sized for a run's worst case (up to 16 MiB, both
        buffers with a writer thread): its pages come in only where output is
        written, so that well-compressed output does not hold it all (it was
        zeroed whole, and compress_file at 6 threads went over the memory
        bound)."""
        def rss_kib():
            with open("/proc/self/status") as f:
                return int([l.split()[1] for l in f if l.startswith("VmRSS:")][0])
        for behind in (False, True):
            before = rss_kib()
            st = _codec._Staging(lambda a, n: None, behind, 64 << 20)
            try:
                self.assertLess(rss_kib() - before, 4096)
                ctypes.memset(st.take(), 1, 1 << 20)   # a MiB of output
                self.assertLess(rss_kib() - before, 4096 + 1024)
                self.assertGreater(rss_kib() - before, 512)
            finally:
                st.close()


class _CallLog(object):
    """Stands in for _codec's lib: records the input taken and output given
    by each streaming call, passes everything else through."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def _logged(self, fn, out, inb, *rest):
        i0, o0 = inb._obj.pos, out._obj.pos
        r = fn(out, inb, *rest)
        self.calls.append((inb._obj.pos - i0, out._obj.pos - o0))
        return r

    def lmc_compress_stream(self, c, out, inb, end):
        return self._logged(lambda o, i: self.real.lmc_compress_stream(c, o, i, end), out, inb)

    def lmc_decompress_stream(self, d, out, inb):
        return self._logged(lambda o, i: self.real.lmc_decompress_stream(d, o, i), out, inb)


class TestStreamRuns(TempDirCase):
    """compress_file and decompress_file with 8 threads hand each call
    enough input and output room for a chunk per thread. With the 4 MiB
    buffers they had until 2026-12-04 a call coded at most 4 chunks (about
    2 on optimizer moments), so threads past the fourth had nothing to do."""

    def _run(self, fn, *args, **kw):
        log = _CallLog(_codec.lib)
        _codec.lib = log
        try:
            fn(*args, **kw)
        finally:
            _codec.lib = log.real
        return log.calls

    def test_a_call_codes_a_chunk_per_thread(self):
        n = 4 << 20                       # 16 MiB of f32: 16 chunks of 1 MiB
        ref = _floats(n, 7)
        new = _floats(n, 7, eps=1e-4)
        src, rpath, out, back = self.p("new.f32"), self.p("ref.f32"), self.p("new.lmc"), self.p("back")
        with open(src, "wb") as f:
            f.write(new)
        with open(rpath, "wb") as f:
            f.write(ref)
        for t in (1, 8):
            calls = self._run(lmc.compress_file, src, out, ref=rpath, threads=t, dtype="f32")
            most_in = max(i for i, o in calls)
            calls = self._run(lmc.decompress_file, out, back, ref=rpath, threads=t)
            most_out = max(o for i, o in calls)
            self.assertEqual(read(back), new)
            if t == 8:
                self.assertGreaterEqual(most_in, 8 << 20, "input coded by one compression call")
                self.assertGreaterEqual(most_out, 8 << 20, "content decoded by one decompression call")
            self.assertLessEqual(most_in, 16 << 20)
        # a wrong reference given as a path: decompress_file checks it as
        # the frame ends (its pages are dropped behind the decoder meanwhile)
        # and leaves nothing behind; one byte near its end differs
        bad = bytearray(ref)
        bad[-3] ^= 1
        with open(self.p("bad.f32"), "wb") as f:
            f.write(bad)
        before = sorted(os.listdir(self.tmp))
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress_file(out, self.p("never"), ref=self.p("bad.f32"), threads=2)
        self.assertEqual(cm.exception.id, "ref_wrong")
        self.assertEqual(sorted(os.listdir(self.tmp)), before)

    def test_from_a_pipe(self):
        """A source that cannot be mapped (a FIFO) is read in pieces instead."""
        data = _floats(1 << 20, 9)          # 4 MiB: pieces of 4 MiB at 2 threads, and the end
        fifo = self.p("in.fifo")
        os.mkfifo(fifo)

        def feed():
            with open(fifo, "wb") as f:
                f.write(data)
        t = threading.Thread(target=feed)
        t.start()
        out = lmc.compress_file(fifo, self.p("p.lmc"), threads=2, dtype="f32")
        t.join()
        self.assertEqual(lmc.decompress(read(out)), data)

    def test_sizes_follow_threads(self):
        for t in (1, 2, 4, 8, 16, 64):
            with _codec.CCtx(t) as c:
                i, o = c.stream_sizes()
                self.assertGreaterEqual(i, min(t, 12) << 20)
                self.assertGreaterEqual(o, lmc._codec.lib.lmc_compress_bound(i))
                self.assertLessEqual(i, (16 << 20) + 4096)
            i, o = _codec.dstream_sizes(t)
            self.assertGreaterEqual(o, min(t, 10) << 20)
            self.assertLessEqual(o, 16 << 20)
            self.assertGreaterEqual(i, o)


class TestReadAhead(TempDirCase):
    """file_reader(read_ahead=True), as lmc.load, compress_file and
    decompress_file use it: the pieces of the file in order, each intact
    until the next read() although a thread reads on meanwhile; a read
    error raised by read(); close() ends the thread."""

    def test_pieces_in_order_and_intact(self):
        data = _rand(3 * _codec.STREAM_IN + 12345, 12)
        path = self.p("f")
        with open(path, "wb") as f:
            f.write(data)
        before = threading.active_count()
        with open(path, "rb", buffering=0) as f:
            read = _codec.file_reader(f, read_ahead=True)
            got, pos = [], 0
            while True:
                addr, n = read()
                if n == 0:
                    break
                time.sleep(0.02)          # the thread may fill the other buffer meanwhile
                self.assertEqual(ctypes.string_at(addr, n), data[pos:pos + n])
                got.append(n)
                pos += n
            self.assertEqual(read()[1], 0)            # the end stays the end
            read.close()
        self.assertEqual(pos, len(data))
        self.assertEqual(got, [_codec.STREAM_IN] * 3 + [12345])
        self.assertEqual(threading.active_count(), before)

    def test_read_error_and_early_close(self):
        class Failing(object):
            def __init__(self):
                self.calls = 0

            def readinto(self, mv):
                self.calls += 1
                if self.calls == 3:
                    raise OSError(5, "Input/output error")
                mv[:10] = b"0123456789"
                return 10
        read = _codec.file_reader(Failing(), read_ahead=True)
        with self.assertRaises(OSError) as cm:
            for _ in range(5):
                read()
        self.assertEqual(cm.exception.errno, 5)
        read.close()
        # a reader closed before the end (a decoding error) stops too
        before = threading.active_count()
        with open(__file__, "rb") as f:
            read = _codec.file_reader(f, read_ahead=True)
            read()
            read.close()
        self.assertEqual(threading.active_count(), before)


class TestZipInPlace(TempDirCase):
    """compress_file maps a torch.save zip however large: read in pieces,
    the library would stage the whole file to find its directory (at the
    end), and peak memory grew with the file (475 MiB for a 231 MB archive
    against a reference, 2026-12-05). Measured in a child process, the
    bound issue 3 sets the command: 64 MiB + threads x 2 chunks."""

    @needs_torch
    def test_large_zip_stays_in_bounded_memory(self):
        g = torch.Generator().manual_seed(5)
        ref = {"w%d" % i: torch.randn(10 << 18, generator=g) for i in range(8)}   # 80 MiB of f32
        new = {k: v + 1e-3 * torch.randn(v.shape, generator=g) for k, v in ref.items()}
        src, rpath, out, back = self.p("new.pt"), self.p("ref.pt"), self.p("new.lmc"), self.p("back.pt")
        torch.save(ref, rpath)
        torch.save(new, src)
        # VmHWM, not ru_maxrss: a child's ru_maxrss keeps the high-water mark
        # of the process it was forked from, this one with torch loaded
        child = ("import sys, lmc\n"
                 "lmc.compress_file(sys.argv[1], sys.argv[2], ref=sys.argv[3], threads=2)\n"
                 "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        kib = int(subprocess.run([sys.executable, "-c", child, src, out, rpath], check=True, env=env,
                                 stdout=subprocess.PIPE, text=True).stdout)
        self.assertLessEqual(kib, (64 + 2 * 2) * 1024, "peak memory of compress_file, KiB")
        self.assertIn("torch", lmc.frame_info(read(out))["container"])
        lmc.decompress_file(out, back, ref=rpath, threads=2)
        self.assertEqual(read(back), read(src))


class TestFiles(TempDirCase):
    def test_file_roundtrip(self):
        for i, data in enumerate((b"", b"1", _rand(100, 11), _floats(2500000, 12))):   # last: 10 MB, several reads
            src = self.p("f%d.bin" % i)
            with open(src, "wb") as f:
                f.write(data)
            dst = lmc.compress_file(src, threads=2)
            self.assertEqual(dst, src + ".lmc")
            frame = read(dst)
            self.assertEqual(lmc.decompress(frame), data)
            self.assertEqual(lmc.frame_info(dst)["content_size"], len(data))
            os.unlink(src)
            self.assertEqual(lmc.decompress_file(dst), src)
            self.assertEqual(read(src), data)
            # the streamed frame equals the buffer-to-buffer one
            self.assertEqual(frame, lmc.compress(data))

    def test_file_delta_and_wrong_ref(self):
        ref, cur = _floats(300000, 13), _floats(300000, 13, eps=1e-7)
        rp, cp = self.p("ref.bin"), self.p("cur.bin")
        with open(rp, "wb") as f:
            f.write(ref)
        with open(cp, "wb") as f:
            f.write(cur)
        out = lmc.compress_file(cp, self.p("cur.delta"), ref=rp, dtype="f32")
        self.assertLess(os.path.getsize(out), len(cur) // 2)
        back = lmc.decompress_file(out, self.p("back.bin"), ref=ref)
        self.assertEqual(read(back), cur)
        # the library hashed the reference between its chunk jobs and the
        # header got the hash last: the frame is the buffer-to-buffer one
        self.assertEqual(lmc.frame_info(out)["ref_hash"], lmc.hash64(ref))
        self.assertEqual(read(out), lmc.compress(cur, ref=ref, dtype="f32"))
        before = sorted(os.listdir(self.tmp))
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress_file(out, self.p("never.bin"), ref=cur)
        self.assertIn("reference", str(cm.exception))
        with self.assertRaises(lmc.LmcError):
            lmc.decompress_file(out, self.p("never.bin"))
        # nothing left behind: no output, no temporary file
        self.assertEqual(sorted(os.listdir(self.tmp)), before)

    def test_truncated_file_leaves_nothing(self):
        src = self.p("d.bin")
        with open(src, "wb") as f:
            f.write(_rand(200000, 14))
        frame = read(lmc.compress_file(src))
        with open(self.p("t.lmc"), "wb") as f:
            f.write(frame[:-7])
        before = sorted(os.listdir(self.tmp))
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress_file(self.p("t.lmc"))
        self.assertEqual(cm.exception.id, "truncated")
        self.assertEqual(sorted(os.listdir(self.tmp)), before)
        with open(self.p("x.lmc"), "wb") as f:
            f.write(frame + b"junk")
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.decompress_file(self.p("x.lmc"))
        self.assertEqual(cm.exception.id, "trailing")
        with self.assertRaises(ValueError):
            lmc.decompress_file(src)            # no .lmc suffix and no dst

    def test_overwrite_and_same_file(self):
        src = self.p("a.bin")
        with open(src, "wb") as f:
            f.write(b"abc" * 1000)
        with open(src + ".lmc", "wb") as f:
            f.write(b"old")
        lmc.compress_file(src)
        self.assertEqual(lmc.decompress(read(src + ".lmc")), b"abc" * 1000)
        with self.assertRaises(ValueError):
            lmc.compress_file(src, src)


if __name__ == "__main__":
    unittest.main()
