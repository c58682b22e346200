#!/usr/bin/env python3
"""Empirical entropies of the exponents of an optimizer-state safetensors file
(fp32 exp_avg / exp_avg_sq tensors): the measurements behind doc/refctx.md,
"More contexts, measured, not built".

Usage: /usr/bin/python3 bench/exponent_contexts.py OPTIM.safetensors
(Debian's python3 with numpy, e.g. from python3-torch.)

1. The 8-bit exponent stream of all f32 tensors, in file order, per 64 Ki
   block: order 0, and order 1 given the exponent 1 and 4 places back, and
   given the previous exponent in 9 buckets around the block's mode; a code
   table is costed at 1.5 bytes per nonzero count.
2. The exponent of each exp_avg value given the exponent of the exp_avg_sq
   value at the same place (no table cost).
All in bits per value.
"""
import json
import struct
import sys

import numpy as np

BLOCK = 65536


def read_tensors(path, dtype):
    """{name: the tensor's values as integers} of a safetensors file's tensors
    of dtype ("F32": uint32 words, "BF16"/"F16": uint16 words)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != dtype:
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<u4" if dtype == "F32" else "<u2")
    return out


def read_f32(path):
    return read_tensors(path, "F32")


def entropy(counts):
    c = counts[counts > 0].astype(np.float64)
    return float(-(c * np.log2(c / c.sum())).sum())


def table_bits(counts):
    return np.count_nonzero(counts) * 1.5 * 8


def conditional(ctx, sym, nctx):
    """(bits, table bits) of sym coded with one table per context value."""
    joint = np.bincount(ctx * 256 + sym, minlength=nctx * 256).reshape(nctx, 256)
    return sum(entropy(row) for row in joint if row.any()), sum(table_bits(row) for row in joint if row.any())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    t = read_f32(sys.argv[1])
    if not t:
        sys.exit("no F32 tensors")
    e = (np.concatenate(list(t.values())) >> 23 & 0xFF).astype(np.int64)
    n = len(e)
    h0 = tab0 = 0.0
    lag = {1: [0.0, 0.0], 4: [0.0, 0.0]}
    buck = [0.0, 0.0]
    for i in range(0, n, BLOCK):
        x = e[i:i + BLOCK]
        c0 = np.bincount(x, minlength=256)
        h0 += entropy(c0)
        tab0 += table_bits(c0)
        for k, acc in lag.items():
            prev = np.concatenate([np.zeros(k, dtype=np.int64), x[:-k]])
            h, tb = conditional(prev, x, 256)
            acc[0] += h
            acc[1] += tb
        prev = np.concatenate([[0], x[:-1]])
        q = np.clip(prev - int(np.argmax(c0)) + 4, 0, 8)
        h, tb = conditional(q, x, 9)
        buck[0] += h
        buck[1] += tb
    print("exponent stream, %d values, bits per value (+ table):" % n)
    print("  order 0                      %.3f (+%.3f)" % (h0 / n, tab0 / n))
    for k, (h, tb) in lag.items():
        print("  given the exponent %d back    %.3f (+%.3f)" % (k, h / n, tb / n))
    print("  previous, 9 buckets          %.3f (+%.3f)" % (buck[0] / n, buck[1] / n))

    m_all, ctx_all = [], []
    for name, m in t.items():
        if name.endswith(".exp_avg") and name + "_sq" in t:
            m_all.append(m >> 23 & 0xFF)
            ctx_all.append(t[name + "_sq"] >> 23 & 0xFF)
    if m_all:
        m = np.concatenate(m_all).astype(np.int64)
        v = np.concatenate(ctx_all).astype(np.int64)
        h0 = sum(entropy(np.bincount(m[i:i + BLOCK], minlength=256)) for i in range(0, len(m), BLOCK))
        hv, _ = conditional(v, m, 256)
        print("exp_avg exponent, %d values: order 0 %.3f, given exp_avg_sq's exponent %.3f" %
              (len(m), h0 / len(m), hv / len(m)))


if __name__ == "__main__":
    main()
