"""lmc.Store: delta chains with keyframes, rm and prune in the middle of a run,
a real training run through the store, and an add killed with SIGKILL."""

import os
import random
import signal
import subprocess
import sys
import time
import unittest
from unittest import mock

import lmc
from lmc import _lib
from ._util import TempDirCase, torch, needs_torch, assert_bitwise, read
from . import _train, _store_child

needs_store = unittest.skipUnless(_lib.HAS_STORE, "liblmc has no snapshot store API")


def walk(n, seed=0):
    """n checkpoint-like state dicts: a random walk of fp32 weights, their
    bf16 copies, an int64 step counter and a bool mask."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 256, generator=g) * 0.02
    m = torch.zeros_like(w)
    out = []
    for k in range(n):
        grad = torch.randn(64, 256, generator=g) * 1e-3
        w = w - 1e-3 * grad.sign()
        m = 0.9 * m + 0.1 * grad
        out.append({"w": w.clone(), "w.bf16": w.bfloat16(), "m": m.clone(),
                    "step": torch.tensor(k), "mask": w > 0})
    return out


@needs_store
@needs_torch
class TestStoreChains(TempDirCase):
    def open(self, **kw):
        kw.setdefault("fsync", False)
        st = lmc.Store(self.p("store"), **kw)
        self.addCleanup(st.close)
        return st

    def test_chain_of_20_keyframe_every_5(self):
        sds = walk(20)
        st = self.open()
        for k, sd in enumerate(sds):
            e = st.add(sd, k, keyframe_every=5)
            self.assertEqual((e["step"], e["name"]), (k, "model.safetensors"))
        ls = st.ls()
        self.assertEqual([e["step"] for e in ls], list(range(20)))
        for e in ls:
            k = e["step"]
            self.assertEqual(e["keyframe"], k % 5 == 0, k)
            self.assertEqual(e["chain_depth"], k % 5, k)
            self.assertEqual(e["parent_step"], None if k % 5 == 0 else k - 1, k)
            ser = bytes(lmc.to_safetensors_bytes(sds[k]))
            self.assertEqual(e["content_size"], len(ser))
            self.assertEqual(e["content_hash"], lmc.hash64(ser))
            self.assertTrue(os.path.exists(self.p("store", e["frame"])))
            if not e["keyframe"]:
                self.assertLess(e["frame_size"], ls[k - k % 5]["frame_size"], k)
        self.assertEqual(st.last_step, 19)
        self.assertTrue(st.verify())
        for k, sd in enumerate(sds):
            # the latest snapshot is copied from the cache; the others decode
            self.assertEqual(st.frames_to_restore(k), 0 if k == 19 else k % 5 + 1)
            assert_bitwise(self, sd, st.restore(k), "step %d" % k)
            out = st.restore_file(k, self.p("r%d.safetensors" % k))
            self.assertEqual(read(out), bytes(lmc.to_safetensors_bytes(sd)), k)
        # a second handle on the same directory sees the same snapshots
        st.close()
        st2 = self.open()
        self.assertEqual(len(st2), 20)
        assert_bitwise(self, sds[13], st2.restore(13))

    def test_rm_and_prune_in_the_middle(self):
        sds = walk(20, seed=1)
        st = self.open()
        for k in range(10):
            st.add(sds[k], k, keyframe_every=5)
        self.assertEqual(st.rm(7), 1)                 # middle of chain 5..9: 8 re-encoded
        self.assertEqual(st.steps(), [0, 1, 2, 3, 4, 5, 6, 8, 9])
        self.assertEqual(st.entry(8)["parent_step"], 6)
        assert_bitwise(self, sds[8], st.restore(8))
        removed = st.prune(3)                         # keeps 6, 8, 9; 6 becomes a keyframe
        self.assertEqual(removed, 6)
        self.assertEqual(st.steps(), [6, 8, 9])
        self.assertTrue(st.entry(6)["keyframe"])
        self.assertTrue(st.verify())
        for k in range(10, 20):                       # the run goes on after the prune
            st.add(sds[k], k, keyframe_every=5)
        self.assertTrue(st.verify())
        self.assertEqual(st.steps(), [6, 8, 9] + list(range(10, 20)))
        for e in st.ls():
            self.assertLessEqual(e["chain_depth"], 4)
            assert_bitwise(self, sds[e["step"]], st.restore(e["step"]), "step %d" % e["step"])
        # files left in frames/ are exactly the listed ones
        listed = {os.path.normpath(e["frame"]) for e in st.ls()}
        on_disk = {os.path.join("frames", f) for f in os.listdir(self.p("store", "frames"))}
        self.assertEqual(on_disk, listed)
        with self.assertRaises(lmc.LmcError) as cm:
            st.restore(7)
        self.assertEqual(cm.exception.id, "not_found")
        with self.assertRaises(lmc.LmcError) as cm:
            st.add(sds[0], 12)
        self.assertEqual(cm.exception.id, "exists")
        with self.assertRaises(lmc.LmcError):
            st.rm(3)

    def test_state_dicts_without_a_copy(self):
        # add writes the state dict to an unnamed file straight from the
        # tensors, and restore reads each tensor from one: neither serializes
        # the checkpoint into memory, and nothing is left in the directory
        from lmc import torch_io
        sds = walk(4, seed=3)
        st = self.open(threads=2)
        before = sorted(os.listdir(self.p("store")))
        orders = [list(lmc.from_safetensors_bytes(lmc.to_safetensors_bytes(sd))) for sd in sds]   # file order
        with mock.patch.object(torch_io, "serialize", side_effect=AssertionError("serialized")), \
                mock.patch.object(torch_io, "deserialize", side_effect=AssertionError("deserialized")):
            for k, sd in enumerate(sds):
                st.add(sd, k, name="m.safetensors")
            for k, sd in enumerate(sds):
                got = st.restore(k, "m.safetensors")
                assert_bitwise(self, sd, got, k)
                self.assertEqual(list(got), orders[k])
        self.assertEqual(sorted(os.listdir(self.p("store"))), before)
        # the same frames as adding the serialized bytes
        st2 = lmc.Store(self.p("store2"), fsync=False, threads=1)
        self.addCleanup(st2.close)
        for k, sd in enumerate(sds):
            st2.add(bytes(lmc.to_safetensors_bytes(sd)), k, name="m.safetensors")
        for a, b in zip(st.ls(), st2.ls()):
            self.assertEqual((a["content_hash"], a["frame_size"]), (b["content_hash"], b["frame_size"]))
        # where /proc/self/fd cannot name the file: serialized in memory, same frames
        st3 = lmc.Store(self.p("store3"), fsync=False, threads=1)
        self.addCleanup(st3.close)
        with mock.patch.object(lmc.Store, "_add_state_dict", return_value=None):
            for k, sd in enumerate(sds):
                st3.add(sd, k, name="m.safetensors")
        for a, b in zip(st3.ls(), st2.ls()):
            self.assertEqual((a["content_hash"], a["frame_size"]), (b["content_hash"], b["frame_size"]))
        assert_bitwise(self, sds[2], st3.restore(2, "m.safetensors"))
        # each restored tensor owns its memory
        got = st.restore(3, "m.safetensors")
        got["w"].zero_()
        assert_bitwise(self, {"m": sds[3]["m"]}, {"m": got["m"]})
        # errors still name the snapshot
        with self.assertRaises(lmc.LmcError) as cm:
            st.restore(9, "m.safetensors")
        self.assertEqual(cm.exception.id, "not_found")

    def test_names_and_auto_steps(self):
        st = self.open()
        a = st.add(b"first", name="a.bin")
        self.assertEqual(a["step"], 0)
        b = st.add(b"second", name="a.bin")
        self.assertEqual(b["step"], 1)
        st.add(b"other", 1, name="b.bin")
        self.assertEqual(st.restore_bytes(1, "b.bin"), b"other")
        self.assertEqual(st.restore_bytes(0), b"first")
        with self.assertRaises(lmc.LmcError):
            st.restore_bytes(1)                       # two files at step 1: name needed
        st.add(b"", 2, name="empty")
        st.add(b"", 3, name="empty")
        self.assertEqual(st.restore_bytes(3, "empty"), b"")
        with self.assertRaises(ValueError):
            st.add(b"x", 5)                           # bytes need a name
        st.close()
        with self.assertRaises(ValueError):
            st.ls()
        with self.assertRaises(lmc.LmcError):
            lmc.Store(self.p("nothing-here"), create=False)


@needs_store
@needs_torch
class TestStoreTraining(TempDirCase):
    def test_training_run_through_store(self):
        tdir, flats, _ = _train.trajectory()
        with lmc.Store(self.p("store"), fsync=False) as st:
            for k, flat in enumerate(flats, 1):
                st.add(flat, k, keyframe_every=4)                                  # a state dict
                st.add(os.path.join(tdir, "step-%d.pt" % k), k, name="train.pt")   # torch.save file
                sf = self.p("optim-%d.safetensors" % k)
                lmc.save_safetensors({n: t for n, t in flat.items() if n.startswith("optim.")}, sf)
                st.add(sf, k, name="optim.safetensors")                            # safetensors file
            self.assertTrue(st.verify())
            self.assertEqual(len(st), 3 * len(flats))
            for k, flat in enumerate(flats, 1):
                assert_bitwise(self, flat, st.restore(k, "model.safetensors"), "step %d" % k)
                out = st.restore_file(k, self.p("t.pt"), name="train.pt")
                self.assertEqual(read(out), read(os.path.join(tdir, "step-%d.pt" % k)))
                out = st.restore_file(k, self.p("o.safetensors"), name="optim.safetensors")
                self.assertEqual(read(out), read(self.p("optim-%d.safetensors" % k)))
                ts = torch.load(self.p("t.pt"))
                for n, t in ts["model"].items():
                    self.assertTrue(torch.equal(t.view(torch.int32), flat["model." + n].view(torch.int32)))


@needs_store
class TestKilledAdd(TempDirCase):
    ROUNDS = 4

    def _child(self, d, first):
        env = dict(os.environ)
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(lmc.__file__)))
        env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
        env["LMC_LIBRARY"] = lmc.library_path
        return subprocess.Popen([sys.executable, os.path.abspath(_store_child.__file__), d, str(first)],
                                stdout=subprocess.PIPE, env=env)

    def test_sigkill_during_add(self):
        d = self.p("store")
        lmc.Store(d).close()
        rnd = random.Random(42)
        first = 0
        reported = -1
        for rnd_i in range(self.ROUNDS):
            child = self._child(d, first)
            try:
                # let it finish a couple of adds, then kill it at a random moment
                for _ in range(2):
                    line = child.stdout.readline()
                    self.assertTrue(line, "child died early")
                    reported = int(line)
                time.sleep(rnd.uniform(0.0, 0.15))
            finally:
                os.kill(child.pid, signal.SIGKILL)
                child.wait()
                # steps the child finished and printed while we slept are still in the pipe
                for line in child.stdout.read().splitlines():
                    reported = int(line)
                child.stdout.close()
            self.assertEqual(child.returncode, -signal.SIGKILL)
            with lmc.Store(d) as st:                  # reopening cleans up after the crash
                steps = st.steps()
                self.assertEqual(steps, list(range(len(steps))), "steps must stay contiguous")
                self.assertGreaterEqual(steps[-1], reported)      # every reported add survived
                self.assertLessEqual(steps[-1], reported + 1)     # at most the one being added
                self.assertTrue(st.verify())
                first = steps[-1] + 1
        with lmc.Store(d) as st:
            for e in st.ls():
                self.assertEqual(st.restore_bytes(e["step"], _store_child.NAME),
                                 _store_child.content(e["step"]), e["step"])
                self.assertLessEqual(e["chain_depth"], _store_child.KEYFRAME_EVERY - 1)
            listed = {os.path.normpath(e["frame"]) for e in st.ls()}
            on_disk = {os.path.join("frames", f) for f in os.listdir(os.path.join(d, "frames"))}
            self.assertEqual(on_disk, listed, "files left behind by the killed adds")
            # and the store takes new snapshots
            st.add(_store_child.content(first), first, name=_store_child.NAME, keyframe_every=4)
            self.assertEqual(st.restore_bytes(first), _store_child.content(first))
            self.assertTrue(st.verify())


def tearDownModule():
    import shutil
    if _train.trajectory.cache_info().currsize:
        shutil.rmtree(_train.trajectory()[0], True)
        _train.trajectory.cache_clear()


if __name__ == "__main__":
    unittest.main()
