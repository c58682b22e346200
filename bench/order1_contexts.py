#!/usr/bin/env python3
"""Order-1 contexts for float exponents and REFCTX tokens: the measurements
behind ANS1 (doc/refctx.md, "More contexts, measured").

Usage: /usr/bin/python3 bench/order1_contexts.py NEW.safetensors [REF.safetensors]
(Debian's python3 with numpy, e.g. from python3-torch.)

Without REF (a keyframe):
1. For each 2-D `exp_avg_sq` tensor, the empirical entropy of the 8-bit
   exponent in bits a value: order 0, and given the exponent 1 back ("left"),
   4 back ("left4"), one row up ("above"), both left and above, and the
   residual of the planar predictor left + above - above-left.
2. For all F32/BF16 tensors, per 64 Ki-value block: order 0, order 1 with
   the exponent 4 back, and the better of 4 back and one row up, a table
   costed at 10-12 bits a nonzero count, in bits a value.
With REF (a delta): REFCTX's token (sign and bit length of the difference
to the reference value) given the reference's exponent, and given that and
the token to the left or above, with 12 bits a nonzero count for tables.
"""
import json
import struct
import sys

import numpy as np

BLOCK = 65536


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def bits(x):
    """Empirical entropy of x in bits (total), and its number of distinct values."""
    c = np.bincount(x)
    c = c[c > 0]
    return float(-(c * np.log2(c / c.sum())).sum()), len(c)


def cond(ctx, x, width):
    """Bits of x given ctx (total), and the nonzero (ctx, x) cells."""
    j, cells = bits(ctx.astype(np.int64) * width + x)
    h, _ = bits(ctx)
    return j - h, cells


def exponents(t, data):
    a, b = t["data_offsets"]
    if t["dtype"] == "F32":
        return ((np.frombuffer(data[a:b], "<u4") >> 23) & 255).astype(np.int64)
    return ((np.frombuffer(data[a:b], "<u2") >> 7) & 255).astype(np.int64)


def keyframe(header, data):
    print("1. exponent of each 2-D exp_avg_sq tensor, bits a value (no table cost)")
    for name, t in header.items():
        if name == "__metadata__" or not name.endswith("exp_avg_sq") or len(t["shape"]) != 2:
            continue
        rows, cols = t["shape"]
        e = exponents(t, data).reshape(rows, cols)
        m = lambda total, n: total / n
        h0 = m(bits(e.ravel())[0], e.size)
        hl = m(cond(e[:, :-1].ravel(), e[:, 1:].ravel(), 256)[0], rows * (cols - 1))
        hl4 = m(cond(e[:, :-4].ravel(), e[:, 4:].ravel(), 256)[0], rows * (cols - 4))
        ha = m(cond(e[:-1, :].ravel(), e[1:, :].ravel(), 256)[0], (rows - 1) * cols)
        hla = m(cond((e[1:, :-1] * 256 + e[:-1, 1:]).ravel(), e[1:, 1:].ravel(), 256)[0], (rows - 1) * (cols - 1))
        res = e[1:, 1:] - (e[1:, :-1] + e[:-1, 1:] - e[:-1, :-1]) + 512
        hp = m(bits(res.ravel())[0], res.size)
        print(f"  {name:40s} {rows}x{cols}  order0 {h0:.3f}  left {hl:.3f}  left4 {hl4:.3f}  above {ha:.3f}"
              f"  left+above {hla:.3f}  planar {hp:.3f}")
    tot = np.zeros(4)
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] not in ("F32", "BF16"):
            continue
        e = exponents(t, data)
        row = t["shape"][-1] if len(t["shape"]) >= 2 else 0
        for s0 in range(0, len(e), BLOCK):
            blk = e[s0:s0 + BLOCK]
            h, n = bits(blk)
            c0 = h + 12 * n
            c4 = c0
            if len(blk) > 8:
                h, n = cond(blk[:-4], blk[4:], 256)
                c4 = h + 10 * n + bits(blk[:4])[0]
            ca = c0
            if row >= 4 and len(blk) > 2 * row:
                h, n = cond(blk[:-row], blk[row:], 256)
                ca = h + 10 * n + bits(blk[:row])[0]
            tot += [c0, min(c0, c4), min(c0, c4, ca), len(blk)]
    print("2. exponent of every float tensor, per 64 Ki block, tables included, bits a value:")
    print(f"  order 0 {tot[0] / tot[3]:.3f}  order 1 (4 back) {tot[1] / tot[3]:.3f}"
          f"  order 1 (better of 4 back and a row up) {tot[2] / tot[3]:.3f}  ({int(tot[3])} values)")


def delta(header, data, rheader, rdata):
    print("REFCTX tokens of each 2-D F32 tensor, bits a value (+ tables at 12 bits a nonzero count)")
    tot = np.zeros(4)
    n_all = 0
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32" or len(t["shape"]) != 2 or name not in rheader:
            continue
        rows, cols = t["shape"]
        a, b = t["data_offsets"]
        c = np.frombuffer(data[a:b], "<u4").astype(np.int64)
        a, b = rheader[name]["data_offsets"]
        r = np.frombuffer(rdata[a:b], "<u4").astype(np.int64)
        mono = lambda x: np.where(x >> 31, -(x & 0x7FFFFFFF) - 1, x & 0x7FFFFFFF)
        d = mono(c) - mono(r)
        mag = np.abs(d)
        k = np.zeros_like(mag)
        nz = mag > 0
        k[nz] = np.floor(np.log2(mag[nz])).astype(np.int64) + 1
        tok = np.where(nz, 2 * k - 1 + (d < 0), 0)
        ctx = (r >> 23) & 255
        tok2, ctx2 = tok.reshape(rows, cols), ctx.reshape(rows, cols)
        m = rows * cols
        h0, n0 = cond(ctx, tok, 65)
        hl, nl = cond((ctx2[:, 1:] * 65 + tok2[:, :-1]).ravel(), tok2[:, 1:].ravel(), 65)
        ha, na = cond((ctx2[1:, :] * 65 + tok2[:-1, :]).ravel(), tok2[1:, :].ravel(), 65)
        hl *= m / (rows * (cols - 1))
        ha *= m / ((rows - 1) * cols)
        print(f"  {name:40s} {rows}x{cols}  given ctx {h0 / m:.3f} (+{12 * n0 / m:.3f})"
              f"  ctx + left {hl / m:.3f} (+{12 * nl / m:.3f})  ctx + above {ha / m:.3f} (+{12 * na / m:.3f})")
        tot += [h0 + 12 * n0, hl + 12 * nl, ha + 12 * na, min(hl + 12 * nl, ha + 12 * na)]
        n_all += m
    if n_all:
        print(f"  all: given ctx {tot[0] / n_all:.3f}  ctx + left {tot[1] / n_all:.3f}  ctx + above {tot[2] / n_all:.3f}"
              f"  better of the two {tot[3] / n_all:.3f} (tables included)")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    h, d = load(sys.argv[1])
    if len(sys.argv) == 2:
        keyframe(h, d)
    else:
        rh, rd = load(sys.argv[2])
        delta(h, d, rh, rd)


if __name__ == "__main__":
    main()
