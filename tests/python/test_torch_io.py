"""lmc.save / lmc.load and the safetensors serializer, for every dtype."""

import ctypes
import glob
import json
import os
import unittest
from unittest import mock

import lmc
from lmc import torch_io
from ._util import TempDirCase, torch, needs_torch, assert_bitwise, raw_bytes, read, REPO

DTYPES = ["bfloat16", "float16", "float32", "float64", "int64", "int32", "int16",
          "int8", "uint8", "bool"]
ST_NAME = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "float64": "F64",
           "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
           "bool": "BOOL"}
INT_OF_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def random_bits(shape, dtype, gen):
    """A tensor of `dtype` with random bit patterns (NaNs, infs, -0.0, subnormals)."""
    dt = getattr(torch, dtype)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    width = torch.empty(0, dtype=dt).element_size()
    it = getattr(torch, INT_OF_WIDTH[width])
    info = torch.iinfo(it)
    bits = torch.randint(info.min, info.max, shape, generator=gen, dtype=it)
    return bits.view(dt)


def all_dtypes_dict(seed=0):
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for name in DTYPES:
        sd[name + ".mat"] = random_bits((7, 5), name, g)
        sd[name + ".vec"] = random_bits((33,), name, g)
        sd[name + ".scalar"] = random_bits((), name, g)            # 0-dim
        sd[name + ".empty"] = random_bits((0, 4), name, g)         # no values
        sd[name + ".cube"] = random_bits((2, 3, 4), name, g)
    sd["special.f32"] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"),
                                      1e-45, -1e-45, 3.4e38])
    sd["special.bf16"] = sd["special.f32"].to(torch.bfloat16)
    return sd


@needs_torch
class TestSerializer(TempDirCase):
    def test_every_dtype_roundtrip(self):
        sd = all_dtypes_dict(1)
        back = lmc.from_safetensors_bytes(lmc.to_safetensors_bytes(sd))
        assert_bitwise(self, sd, back)
        # loaded tensors own their memory and are writable
        back["float32.mat"].add_(1)
        self.assertTrue(back["float32.mat"].is_contiguous())

    def test_layout(self):
        sd = all_dtypes_dict(2)
        buf = bytes(lmc.to_safetensors_bytes(sd))
        n = int.from_bytes(buf[:8], "little")
        self.assertEqual(n % 8, 0)
        text = buf[8:8 + n].decode()
        self.assertEqual(text, text.rstrip() + " " * (len(text) - len(text.rstrip())))
        hdr = json.loads(text)
        self.assertEqual(hdr.pop("__metadata__"), {"format": "pt"})
        keys = list(hdr)
        off = 0
        for k in keys:                      # keys in offset order, contiguous
            b, e = hdr[k]["data_offsets"]
            self.assertEqual(b, off)
            off = e
            self.assertEqual(hdr[k]["dtype"], ST_NAME[k.split(".")[0]] if not k.startswith("special")
                             else {"special.f32": "F32", "special.bf16": "BF16"}[k])
        self.assertEqual(8 + n + off, len(buf))
        # reference writer order: dtype enum descending (8-byte, 4, 2, 1 byte types), then name
        rank = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
                "I32", "U32", "F32", "F64", "I64", "U64"]
        expect = sorted(keys, key=lambda k: (-rank.index(hdr[k]["dtype"]), k))
        self.assertEqual(keys, expect)
        self.assertEqual([hdr[k]["dtype"] for k in keys][:1], ["I64"])
        self.assertEqual(hdr["float32.scalar"]["shape"], [])
        self.assertEqual(hdr["int8.empty"]["shape"], [0, 4])

    def test_metadata(self):
        sd = {"w": torch.ones(3)}
        hdr_of = lambda b: json.loads(bytes(b[8:8 + int.from_bytes(bytes(b[:8]), "little")]))
        self.assertNotIn("__metadata__", hdr_of(lmc.to_safetensors_bytes(sd, metadata={})))
        self.assertEqual(hdr_of(lmc.to_safetensors_bytes(sd, metadata={"a": "b"}))["__metadata__"],
                         {"a": "b"})
        with self.assertRaises(TypeError):
            lmc.to_safetensors_bytes(sd, metadata={"a": 1})

    def test_non_contiguous_and_views(self):
        base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
        sd = {
            "t": base.t(),                              # transposed
            "slice": base[1:5, 2:9:3],                  # strided slice
            "expanded": torch.ones(1, 3).expand(4, 3),  # stride 0
            "offset": base[3],                          # storage offset
            "param": torch.nn.Parameter(torch.randn(4, 4)),   # requires grad
            "neg": torch.randn(5)._neg_view() if hasattr(torch.Tensor, "_neg_view") else torch.randn(5),
        }
        back = lmc.from_safetensors_bytes(lmc.to_safetensors_bytes(sd))
        for k, v in sd.items():
            self.assertTrue(torch.equal(v.detach(), back[k]), k)
            self.assertEqual(raw_bytes(v), raw_bytes(back[k]), k)
            self.assertFalse(back[k].requires_grad)

    def test_rejects(self):
        with self.assertRaises(TypeError):
            lmc.to_safetensors_bytes({"a": [1, 2]})
        with self.assertRaises(TypeError):
            lmc.to_safetensors_bytes({1: torch.ones(1)})
        with self.assertRaises(ValueError):
            lmc.to_safetensors_bytes({"a": torch.ones(2, dtype=torch.complex64)})
        with self.assertRaises(ValueError):
            lmc.to_safetensors_bytes({"__metadata__": torch.ones(1)})
        with self.assertRaises(ValueError):
            lmc.from_safetensors_bytes(b"\x05\0\0\0\0\0\0\0{}")
        good = bytearray(lmc.to_safetensors_bytes({"a": torch.ones(4)}))
        with self.assertRaises(ValueError):
            lmc.from_safetensors_bytes(good[:-1])          # data cut short

    def test_shipped_files_identical(self):
        """Our writer reproduces the training tool's files (reference order) byte for byte."""
        files = sorted(glob.glob(os.path.join(REPO, "data", "trajectory", "step-000300", "*.safetensors")))
        if not files:
            self.skipTest("no sample trajectory")
        for f in files:
            sd = lmc.load_safetensors(f)
            out = self.p(os.path.basename(f))
            lmc.save_safetensors(sd, out)
            self.assertEqual(read(out), read(f), f)


@needs_torch
class TestSaveLoad(TempDirCase):
    def test_save_load_every_dtype(self):
        sd = all_dtypes_dict(3)
        n = lmc.save(sd, self.p("a.lmc"))
        self.assertEqual(n, os.path.getsize(self.p("a.lmc")))
        info = lmc.frame_info(self.p("a.lmc"))
        self.assertEqual(info["container"], "safetensors")
        self.assertFalse(info["has_ref"])
        assert_bitwise(self, sd, lmc.load(self.p("a.lmc")))
        assert_bitwise(self, sd, lmc.load(self.p("a.lmc"), threads=2))

    def test_empty_state_dict(self):
        lmc.save({}, self.p("e.lmc"))
        self.assertEqual(lmc.load(self.p("e.lmc")), {})

    def test_refs(self):
        g = torch.Generator().manual_seed(4)
        prev = {"w": torch.randn(256, 64, generator=g), "b": torch.randn(64, generator=g).bfloat16(),
                "step": torch.tensor(3)}
        cur = {"w": prev["w"] + 1e-4 * torch.randn(256, 64, generator=g),
               "b": (prev["b"].float() + 1e-3).bfloat16(), "step": torch.tensor(4)}
        lmc.save(prev, self.p("prev.lmc"))
        lmc.save_safetensors(prev, self.p("prev.safetensors"))
        key = lmc.save(cur, self.p("key.lmc"))
        delta = lmc.save(cur, self.p("cur.lmc"), ref=prev)
        self.assertLess(delta, key)
        self.assertTrue(lmc.frame_info(self.p("cur.lmc"))["has_ref"])
        # the reference as a state dict, a safetensors file, an lmc keyframe, or bytes
        for ref in (prev, self.p("prev.safetensors"), self.p("prev.lmc"),
                    bytes(lmc.to_safetensors_bytes(prev))):
            assert_bitwise(self, cur, lmc.load(self.p("cur.lmc"), ref=ref), str(type(ref)))
        # saving against each kind of reference gives the same frame
        frame = read(self.p("cur.lmc"))
        for ref in (self.p("prev.safetensors"), self.p("prev.lmc")):
            lmc.save(cur, self.p("again.lmc"), ref=ref)
            self.assertEqual(read(self.p("again.lmc")), frame)
        # wrong or missing reference
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.load(self.p("cur.lmc"), ref=cur)
        self.assertEqual(cm.exception.id, "ref_wrong")
        self.assertIn("reference", str(cm.exception))
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.load(self.p("cur.lmc"))
        self.assertEqual(cm.exception.id, "ref_required")
        # a delta file cannot be a reference on its own
        with self.assertRaises(lmc.LmcError) as cm:
            lmc.save(cur, self.p("x.lmc"), ref=self.p("cur.lmc"))
        self.assertEqual(cm.exception.id, "ref_required")
        self.assertIn("delta", str(cm.exception))
        self.assertFalse(os.path.exists(self.p("x.lmc")))

    def test_load_plain_safetensors(self):
        sd = all_dtypes_dict(5)
        lmc.save_safetensors(sd, self.p("p.safetensors"))
        assert_bitwise(self, sd, lmc.load(self.p("p.safetensors")))
        assert_bitwise(self, sd, lmc.load_safetensors(self.p("p.safetensors")))

    def test_atomic_on_error(self):
        lmc.save({"a": torch.ones(3)}, self.p("a.lmc"))
        before = read(self.p("a.lmc"))
        with self.assertRaises(TypeError):
            lmc.save({"a": "x"}, self.p("a.lmc"))
        with self.assertRaises(FileNotFoundError):
            lmc.save({"a": torch.ones(3)}, self.p("a.lmc"), ref=self.p("missing.safetensors"))
        self.assertEqual(read(self.p("a.lmc")), before)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["a.lmc"])


def _st_bytes(entries, data, pad_to=None):
    """A safetensors buffer with a hand-made header: entries maps name ->
    (dtype, shape, [begin, end]); data is the data section as is."""
    hdr = {"__metadata__": {"format": "pt"}}
    for name, (dt, shape, offs) in entries.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": offs}
    hjson = json.dumps(hdr, separators=(",", ":")).encode()
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    return len(hjson).to_bytes(8, "little") + hjson + data


def _unsized_frame(data):
    """An lmc frame of data whose header does not give the content size."""
    from lmc import _codec
    parts = []
    with _codec.Buf(data) as src, _codec.CCtx(1, None, None, None, _codec.Buf(None)) as c:
        _codec.drive_compress(c, _codec.buf_reader(src),
                              lambda a, n: parts.append(ctypes.string_at(a, n)))
    return b"".join(parts)


def _unusual_layouts():
    """safetensors files with a gap between tensors, bytes after the last one,
    two tensors sharing bytes, and an empty tensor."""
    vals = torch.arange(64, dtype=torch.float32)
    data = ctypes.string_at(vals.data_ptr(), 256)
    return {
        "gap": _st_bytes({"a": ("F32", [8], [0, 32]), "b": ("F32", [4], [48, 64])}, data[:64]),
        "tail": _st_bytes({"a": ("F32", [8], [0, 32])}, data[:40]),
        "shared": _st_bytes({"a": ("F32", [8], [0, 32]), "b": ("F32", [4], [16, 32])}, data[:32]),
        "empty": _st_bytes({"a": ("F32", [0], [0, 0]), "b": ("F32", [2], [0, 8])}, data[:8]),
    }


@needs_torch
class TestInPlace(TempDirCase):
    """save() feeds the coder from the tensors' own memory and load() decodes
    into each tensor's memory: neither holds a copy of the whole checkpoint."""

    def test_save_does_not_serialize(self):
        sd = all_dtypes_dict(7)
        want = lmc.compress(bytes(lmc.to_safetensors_bytes(sd)))
        prev = all_dtypes_dict(8)
        want_delta = lmc.compress(bytes(lmc.to_safetensors_bytes(sd)), ref=bytes(lmc.to_safetensors_bytes(prev)))
        lmc.save_safetensors(prev, self.p("prev.safetensors"))
        with mock.patch.object(torch_io, "serialize", side_effect=AssertionError("serialized")):
            lmc.save(sd, self.p("a.lmc"), threads=1)
            lmc.save(sd, self.p("b.lmc"), threads=2)
            lmc.save(sd, self.p("d.lmc"), ref=self.p("prev.safetensors"))
        self.assertEqual(read(self.p("a.lmc")), want)
        self.assertEqual(read(self.p("b.lmc")), want)
        self.assertEqual(read(self.p("d.lmc")), want_delta)

    def test_load_does_not_deserialize(self):
        sd = all_dtypes_dict(9)
        prev = all_dtypes_dict(10)
        lmc.save(sd, self.p("a.lmc"))
        lmc.save(sd, self.p("d.lmc"), ref=prev)
        order = list(lmc.from_safetensors_bytes(lmc.to_safetensors_bytes(sd)))   # file order
        with mock.patch.object(torch_io, "deserialize", side_effect=AssertionError("deserialized")):
            assert_bitwise(self, sd, lmc.load(self.p("a.lmc")))
            assert_bitwise(self, sd, lmc.load(self.p("a.lmc"), threads=2))
            assert_bitwise(self, sd, lmc.load(self.p("d.lmc"), ref=prev, threads=2))
            self.assertEqual(list(lmc.load(self.p("a.lmc"))), order)

    def test_load_damaged(self):
        g = torch.Generator().manual_seed(11)
        sd = {"w": torch.randn(1000, 900, generator=g), "b": torch.randn(900, generator=g).bfloat16()}
        lmc.save(sd, self.p("a.lmc"), threads=1)
        frame = read(self.p("a.lmc"))
        self.assertGreater(len(frame), 2 << 20)     # several chunks
        cases = {"cut after the frame header": frame[:50], "cut in the tensor header": frame[:200],
                 "cut in a chunk": frame[:len(frame) // 2], "cut before the end": frame[:-5],
                 "trailing bytes": frame + b"\0" * 9}
        want = {"trailing bytes": "trailing"}
        for what, data in cases.items():
            with open(self.p("bad.lmc"), "wb") as f:
                f.write(data)
            with self.assertRaises(lmc.LmcError, msg=what) as cm:
                lmc.load(self.p("bad.lmc"))
            self.assertEqual(cm.exception.id, want.get(what, "truncated"), what)
            self.assertIn("bad.lmc", str(cm.exception))
        # a changed byte in a chunk's payload, and in the frame's last bytes
        for at in (len(frame) // 2, len(frame) - 20):
            bad = bytearray(frame)
            bad[at] ^= 0x40
            with open(self.p("bad.lmc"), "wb") as f:
                f.write(bad)
            with self.assertRaises(lmc.LmcError, msg=at) as cm:
                lmc.load(self.p("bad.lmc"))
            self.assertEqual(cm.exception.id, "checksum", at)
        # a frame whose content is not safetensors
        with open(self.p("text.lmc"), "wb") as f:
            f.write(lmc.compress(b"hello, world\n" * 5000))
        with self.assertRaises(ValueError) as cm:
            lmc.load(self.p("text.lmc"))
        self.assertIn("not a safetensors file", str(cm.exception))

    def test_load_unusual_layouts(self):
        # gaps between tensors and bytes after the last one are skipped;
        # tensors that share bytes, and frames without a content size, take
        # the whole-buffer path: every result equals from_safetensors_bytes
        layouts = _unusual_layouts()
        for what, st in layouts.items():
            want = lmc.from_safetensors_bytes(st)
            for kind, frame in (("sized", lmc.compress(st)), ("unsized", _unsized_frame(st))):
                with open(self.p("x.lmc"), "wb") as f:
                    f.write(frame)
                got = lmc.load(self.p("x.lmc"))
                self.assertEqual(list(got), list(want), (what, kind))
                assert_bitwise(self, want, got, "%s %s" % (what, kind))
        for what in ("gap", "tail", "empty"):
            want = lmc.from_safetensors_bytes(layouts[what])
            with open(self.p("x.lmc"), "wb") as f:
                f.write(lmc.compress(layouts[what]))
            with mock.patch.object(torch_io, "deserialize", side_effect=AssertionError("deserialized")):
                assert_bitwise(self, want, lmc.load(self.p("x.lmc")), what)

    def test_load_safetensors_in_place(self):
        # a plain safetensors file is read tensor by tensor into each
        # tensor's memory; unusual layouts give what from_safetensors_bytes gives
        layouts = _unusual_layouts()
        layouts["all dtypes"] = bytes(lmc.to_safetensors_bytes(all_dtypes_dict(12)))
        for what, st in layouts.items():
            with open(self.p("x.safetensors"), "wb") as f:
                f.write(st)
            want = lmc.from_safetensors_bytes(st)
            got = lmc.load_safetensors(self.p("x.safetensors"))
            self.assertEqual(list(got), list(want), what)
            assert_bitwise(self, want, got, what)
            if what != "shared":
                with mock.patch.object(torch_io, "deserialize", side_effect=AssertionError("deserialized")):
                    assert_bitwise(self, want, lmc.load_safetensors(self.p("x.safetensors")), what)
        # cut short, or a header that does not fit: the parser's errors
        full = layouts["all dtypes"]
        for cut in (4, 12, len(full) - 1):
            with open(self.p("x.safetensors"), "wb") as f:
                f.write(full[:cut])
            with self.assertRaises(ValueError, msg=cut):
                lmc.load_safetensors(self.p("x.safetensors"))


if __name__ == "__main__":
    unittest.main()
