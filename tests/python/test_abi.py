"""The ctypes structures and constants of lmc._lib match include/lmc.h
(compiled with the C compiler when one is available)."""

import ctypes
import os
import shutil
import subprocess
import tempfile
import unittest

import lmc
from lmc import _lib
from ._util import REPO

HEADER = os.path.join(REPO, "include", "lmc.h")

STRUCTS = {
    "lmc_inbuf": (_lib.lmc_inbuf, ["src", "size", "pos"]),
    "lmc_outbuf": (_lib.lmc_outbuf, ["dst", "size", "pos"]),
    "lmc_frame_header": (_lib.lmc_frame_header, [f for f, _ in _lib.lmc_frame_header._fields_]),
    "lmc_frame_stats": (_lib.lmc_frame_stats, [f for f, _ in _lib.lmc_frame_stats._fields_]),
}
if _lib.HAS_STORE:
    STRUCTS["lmc_store_entry"] = (_lib.lmc_store_entry, [f for f, _ in _lib.lmc_store_entry._fields_])

CONSTANTS = ["LMC_FRAME_HEADER_SIZE", "LMC_CODER_COUNT", "LMC_DTYPE_COUNT", "LMC_THREADS_MAX", "LMC_ERR_PARAM",
             "LMC_ERR_NOT_LMC", "LMC_ERR_TRUNCATED", "LMC_ERR_TRAILING", "LMC_ERR_REF_REQUIRED",
             "LMC_ERR_REF_WRONG", "LMC_P_FORMAT", "LMC_P_DTYPE", "LMC_P_THREADS", "LMC_P_CHUNK_LOG",
             "LMC_P_CONTENT_SIZE", "LMC_D_THREADS", "LMC_FORMAT_AUTO", "LMC_FORMAT_GENERIC",
             "LMC_FORMAT_RAW", "LMC_FORMAT_SAFETENSORS", "LMC_FORMAT_TORCH_ZIP"]
if _lib.HAS_STORE:
    CONSTANTS += ["LMC_STORE_P_THREADS", "LMC_STORE_P_CACHE", "LMC_STORE_P_FSYNC", "LMC_ERR_EXISTS"]

PY_VALUES = {
    "LMC_FRAME_HEADER_SIZE": _lib.FRAME_HEADER_SIZE, "LMC_CODER_COUNT": _lib.CODER_COUNT,
    "LMC_DTYPE_COUNT": _lib.DTYPE_COUNT, "LMC_THREADS_MAX": _lib.THREADS_MAX, "LMC_FORMAT_AUTO": _lib.FORMATS["auto"],
    "LMC_FORMAT_GENERIC": _lib.FORMATS["generic"], "LMC_FORMAT_RAW": _lib.FORMATS["raw"],
    "LMC_FORMAT_SAFETENSORS": _lib.FORMATS["safetensors"], "LMC_FORMAT_TORCH_ZIP": _lib.FORMATS["torch"],
}


def _cc():
    for c in (os.environ.get("CC"), "cc", "gcc"):
        if c and shutil.which(c):
            return c
    return None


@unittest.skipUnless(os.path.exists(HEADER) and _cc(), "needs include/lmc.h and a C compiler")
class TestABI(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "lmc.h"', "int main(void) {"]
        for s, (_, fields) in STRUCTS.items():
            lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (s, s))
            for f in fields:
                lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (s, f, s, f))
        for c in CONSTANTS:
            lines.append('printf("const %s %%lld\\n", (long long)(%s));' % (c, c))
        lines.append("return 0; }")
        d = tempfile.mkdtemp(prefix="lmc-abi-")
        try:
            src = os.path.join(d, "abi.c")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            exe = os.path.join(d, "abi")
            subprocess.run([_cc(), "-I", os.path.dirname(HEADER), src, "-o", exe], check=True)
            out = subprocess.run([exe], check=True, stdout=subprocess.PIPE, text=True).stdout
        finally:
            shutil.rmtree(d, True)
        cls.c = {}
        for line in out.splitlines():
            a, b, v = line.split()
            cls.c[(a, b)] = int(v)

    def test_struct_layouts(self):
        for s, (cls, fields) in STRUCTS.items():
            self.assertEqual(ctypes.sizeof(cls), self.c[(s, "sizeof")], s)
            for f in fields:
                self.assertEqual(getattr(cls, f).offset, self.c[(s, f)], "%s.%s" % (s, f))

    def test_constants(self):
        for c in CONSTANTS:
            py = PY_VALUES[c] if c in PY_VALUES else getattr(_lib, c)
            self.assertEqual(py, self.c[("const", c)], c)

    def test_version(self):
        self.assertEqual(lmc.__version__, lmc.version())
        self.assertRegex(lmc.version(), r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
