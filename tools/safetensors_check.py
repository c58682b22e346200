#!/usr/bin/python3
"""Validate the layout of safetensors files (standard library only; torch optional).

Usage:
    safetensors_check.py FILE_OR_DIR...          validate (dirs are searched
                                                 recursively for *.safetensors)
    safetensors_check.py --deep FILE...          also load values with torch and
                                                 check they are finite
    safetensors_check.py --diff A B              fraction of elements that are
                                                 bit-identical in A and B (and whose
                                                 upper half of bits is identical)
    safetensors_check.py --strict ...            also require reference tensor
                                                 order and N % 8 == 0

Checks: 8-byte LE header length N fits in the file; header is UTF-8 JSON object
starting with '{'; optional "__metadata__" maps str->str; every tensor has a
known dtype, an integer shape list and data_offsets [b, e]; e - b equals
prod(shape) * dtype size; offsets sorted, contiguous, starting at 0 with no
gaps or overlaps; file length == 8 + N + last end exactly.
Exit status 0 iff all files pass.
"""

import argparse
import json
import os
import struct
import sys

DTYPE_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}


class Bad(Exception):
    pass


def read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise Bad("file shorter than 8 bytes")
        (n,) = struct.unpack("<Q", raw)
        if n == 0 or 8 + n > size:
            raise Bad("header length %d does not fit file of %d bytes" % (n, size))
        hb = f.read(n)
    try:
        text = hb.decode("utf-8")
    except UnicodeDecodeError:
        raise Bad("header is not UTF-8")
    if not text.startswith("{"):
        raise Bad("header does not start with '{'")
    try:
        hdr = json.loads(text, object_pairs_hook=_no_dup)
    except ValueError as e:
        raise Bad("header JSON: %s" % e)
    if not isinstance(hdr, dict):
        raise Bad("header is not a JSON object")
    return n, size, hdr, text


def _no_dup(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def check_file(path, strict=False):
    """Returns (info dict).  Raises Bad on layout errors."""
    n, size, hdr, text = read_header(path)
    meta = hdr.pop("__metadata__", None)
    if meta is not None:
        if not isinstance(meta, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise Bad("__metadata__ must map str -> str")
    tensors = []
    for name, info in hdr.items():
        if not isinstance(info, dict):
            raise Bad("%s: entry is not an object" % name)
        extra = set(info) - {"dtype", "shape", "data_offsets"}
        if extra:
            raise Bad("%s: unexpected keys %s" % (name, sorted(extra)))
        dt = info.get("dtype")
        if dt not in DTYPE_SIZE:
            raise Bad("%s: unknown dtype %r" % (name, dt))
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise Bad("%s: bad shape %r" % (name, shape))
        offs = info.get("data_offsets")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise Bad("%s: bad data_offsets %r" % (name, offs))
        b, e = offs
        if b < 0 or e < b:
            raise Bad("%s: bad data_offsets %r" % (name, offs))
        numel = 1
        for s in shape:
            numel *= s
        if e - b != numel * DTYPE_SIZE[dt]:
            raise Bad("%s: %d bytes but %s%s needs %d" %
                      (name, e - b, dt, shape, numel * DTYPE_SIZE[dt]))
        tensors.append((b, e, name, dt, shape))
    by_off = sorted(tensors)
    pos = 0
    for b, e, name, dt, shape in by_off:
        if b != pos:
            raise Bad("%s: starts at %d, expected %d (gap or overlap)" % (name, b, pos))
        pos = e
    if 8 + n + pos != size:
        raise Bad("file is %d bytes, header+data says %d" % (size, 8 + n + pos))
    warnings = []
    if n % 8:
        warnings.append("header length %d not a multiple of 8" % n)
    if text.rstrip(" ") != text.rstrip():
        warnings.append("header padding is not trailing spaces")
    ref = sorted(tensors, key=lambda t: (-DTYPE_SIZE[t[3]], t[2]))
    if [t[2] for t in ref] != [t[2] for t in by_off]:
        warnings.append("tensor order differs from reference (alignment desc, name)")
    if strict and warnings:
        raise Bad("; ".join(warnings))
    dtypes = {}
    for t in tensors:
        dtypes[t[3]] = dtypes.get(t[3], 0) + 1
    return {"header_len": n, "size": size, "ntensors": len(tensors), "dtypes": dtypes,
            "data_bytes": pos, "metadata": meta, "warnings": warnings,
            "tensors": {t[2]: (t[3], t[4], t[0] + 8 + n, t[1] + 8 + n) for t in tensors}}


# ---------------------------------------------------------------------------
# torch-based extras

_TORCH_DT = None


def _torch_dtypes():
    global _TORCH_DT
    import torch
    if _TORCH_DT is None:
        _TORCH_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                     "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                     "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                     "BOOL": torch.bool}
    return _TORCH_DT


def load_tensors(path, info):
    import torch
    dts = _torch_dtypes()
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, (dt, shape, b, e) in info["tensors"].items():
        if dt not in dts:
            continue
        t = torch.frombuffer(bytearray(blob[b:e]), dtype=torch.uint8) if e > b else \
            torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(dts[dt]).reshape(shape)
    return out


def _int_view(t):
    import torch
    sz = t.element_size()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[sz])


def deep_check(path, info):
    import torch
    bad = []
    for name, t in load_tensors(path, info).items():
        if t.is_floating_point() and t.numel() and not torch.isfinite(t.float()).all():
            bad.append(name)
    if bad:
        raise Bad("non-finite values in %s" % ", ".join(bad[:5]))


def diff(a, b):
    import torch
    ia, ib = check_file(a), check_file(b)
    ta, tb = load_tensors(a, ia), load_tensors(b, ib)
    tot = same = hsame = 0
    rows = []
    for name in sorted(set(ta) & set(tb)):
        x, y = ta[name], tb[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            rows.append((name, None, x.numel()))
            continue
        xi, yi = _int_view(x), _int_view(y)
        s = int((xi == yi).sum())
        # "high half": top 8 bits of a 2-byte value, top 16 bits of a 4-byte
        # one (sign + exponent + leading mantissa bits)
        sh = x.element_size() * 4
        h = int(((xi >> sh) == (yi >> sh)).sum()) if sh else s
        rows.append((name, s, x.numel()))
        tot += x.numel()
        same += s
        hsame += h
    return rows, same, tot, sorted(set(ta) ^ set(tb)), hsame


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--deep", action="store_true", help="check values are finite (needs torch)")
    ap.add_argument("--strict", action="store_true", help="treat warnings as errors")
    ap.add_argument("--diff", action="store_true", help="compare exactly two files (needs torch)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    if args.diff:
        if len(args.paths) != 2:
            ap.error("--diff takes exactly two files")
        rows, same, tot, only, hsame = diff(*args.paths)
        if args.verbose:
            for name, s, n in rows:
                print("  %-40s %s" % (name, "shape/dtype differ" if s is None
                                      else "%.4f identical (%d/%d)" % (s / n if n else 1, s, n)))
        if only:
            print("  names only in one file: %s" % ", ".join(only[:10]))
        print("%s -> %s: %.4f of %d elements bit-identical, %.4f high-half identical" %
              (args.paths[0], args.paths[1], same / tot if tot else 1.0, tot,
               hsame / tot if tot else 1.0))
        return 0

    files = []
    for p in args.paths:
        if os.path.isdir(p):
            for dp, dn, fn in os.walk(p):
                dn.sort()
                files += [os.path.join(dp, f) for f in sorted(fn) if f.endswith(".safetensors")]
        else:
            files.append(p)
    nbad = 0
    for f in files:
        try:
            info = check_file(f, args.strict)
            if args.deep:
                deep_check(f, info)
        except (Bad, OSError) as e:
            nbad += 1
            print("FAIL %s: %s" % (f, e))
            continue
        print("OK   %s: %d tensors %s, header %d, data %d, file %d%s" %
              (f, info["ntensors"], ",".join("%s:%d" % kv for kv in sorted(info["dtypes"].items())),
               info["header_len"], info["data_bytes"], info["size"],
               "" if not info["warnings"] else "  WARN: " + "; ".join(info["warnings"])))
    print("%d file(s), %d failed" % (len(files), nbad))
    return 1 if nbad or not files else 0


if __name__ == "__main__":
    sys.exit(main())
