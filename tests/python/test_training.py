"""A real training run: every step saved with torch.save and lmc.save (delta
against the previous step), everything restored bitwise."""

import os
import shutil
import unittest

import lmc
from ._util import TempDirCase, torch, needs_torch, assert_bitwise, read
from . import _train


@needs_torch
class TestTraining(TempDirCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.flats, cls.losses = _train.trajectory()

    @classmethod
    def tearDownClass(cls):
        pass      # the trajectory dir is shared with other test modules; removed at exit

    def test_trajectory_is_real(self):
        self.assertEqual(len(self.flats), _train.STEPS)
        self.assertTrue(all(l == l for l in self.losses))
        f = self.flats[-1]
        self.assertIn("optim.fc1.weight.exp_avg", f)
        self.assertIn("optim.fc1.weight.exp_avg_sq", f)
        self.assertIn("bf16.fc2.weight", f)
        self.assertFalse(torch.equal(self.flats[0]["model.fc1.weight"], f["model.fc1.weight"]))

    def test_save_every_step_and_restore(self):
        prev = None
        sizes = []
        for k, flat in enumerate(self.flats, 1):
            path = self.p("step-%d.lmc" % k)
            n = lmc.save(flat, path, ref=prev)
            key = lmc.save(flat, self.p("key-%d.lmc" % k))
            sizes.append((n, key))
            prev = flat
        delta_total = sum(n for n, _ in sizes[1:])
        key_total = sum(k for _, k in sizes[1:])
        self.assertLess(delta_total, key_total)
        # restore the chain, each step against the previous restored one
        prev = None
        for k, flat in enumerate(self.flats, 1):
            got = lmc.load(self.p("step-%d.lmc" % k), ref=prev)
            assert_bitwise(self, flat, got, "step %d" % k)
            # and against torch.save's copy of the same state
            ts = torch.load(os.path.join(self.dir, "step-%d.pt" % k))
            self.assertEqual(set(ts["model"]), {n[6:] for n in got if n.startswith("model.")})
            for n, t in ts["model"].items():
                self.assertTrue(torch.equal(t.view(torch.int32), got["model." + n].view(torch.int32)), n)
            for i, st in ts["optim"]["state"].items():
                self.assertTrue(st)
            n_moments = sum(len(st) for st in ts["optim"]["state"].values())
            self.assertEqual(n_moments, sum(1 for n in got if n.startswith("optim.")))
            prev = got
        # a delta restored with the previous step's .lmc keyframe file as reference
        assert_bitwise(self, self.flats[1], lmc.load(self.p("step-2.lmc"), ref=self.p("step-1.lmc")))

    def test_resume_from_restored_state_is_identical(self):
        """Training resumed from lmc-restored state continues bit for bit."""
        lmc.save(self.flats[-2], self.p("a.lmc"))
        lmc.save(self.flats[-1], self.p("b.lmc"), ref=self.p("a.lmc"))
        restored = lmc.load(self.p("b.lmc"), ref=self.p("a.lmc"))
        m1, o1 = _train.make(seed=1)
        m2, o2 = _train.make(seed=2)
        _train.unflatten_into(self.flats[-1], m1, o1)
        _train.unflatten_into(restored, m2, o2)
        step = _train.STEPS + 1
        l1 = _train.train_step(m1, o1, step)
        l2 = _train.train_step(m2, o2, step)
        self.assertEqual(l1, l2)
        assert_bitwise(self, _train.flatten(m1, o1), _train.flatten(m2, o2))

    def test_torch_save_files_through_lmc(self):
        """torch.save archives compress (generic mode) and restore byte-identical,
        as keyframes and as deltas against the previous step's archive."""
        prev = None
        for k in range(1, _train.STEPS + 1):
            src = os.path.join(self.dir, "step-%d.pt" % k)
            dst = self.p("step-%d.pt.lmc" % k)
            lmc.compress_file(src, dst, ref=prev)
            out = lmc.decompress_file(dst, self.p("step-%d.pt" % k), ref=prev)
            self.assertEqual(read(out), read(src))
            prev = src


def tearDownModule():
    if _train.trajectory.cache_info().currsize:
        shutil.rmtree(_train.trajectory()[0], True)
        _train.trajectory.cache_clear()


if __name__ == "__main__":
    unittest.main()
