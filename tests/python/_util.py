"""Helpers shared by the Python binding tests."""

import ctypes
import os
import shutil
import tempfile
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))

try:
    import torch
    torch.set_num_threads(1)
except ImportError:          # the bytes/file tests still run
    torch = None

needs_torch = unittest.skipIf(torch is None, "torch is not installed (apt-get install python3-torch)")


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lmc-pytest-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def p(self, *names):
        return os.path.join(self.tmp, *names)


def raw_bytes(t):
    """The tensor's values as bytes (row-major, little-endian)."""
    t = t.detach().cpu().resolve_conj().resolve_neg().contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def assert_bitwise(case, a, b, what=""):
    """Same names, dtypes, shapes and bytes (NaN payloads and -0.0 included)."""
    case.assertEqual(sorted(a), sorted(b), what)
    for k in a:
        x, y = a[k], b[k]
        case.assertEqual(x.dtype, y.dtype, "%s %s" % (what, k))
        case.assertEqual(tuple(x.shape), tuple(y.shape), "%s %s" % (what, k))
        case.assertTrue(raw_bytes(x) == raw_bytes(y), "%s %s: values differ" % (what, k))


def read(path):
    with open(path, "rb") as f:
        return f.read()
