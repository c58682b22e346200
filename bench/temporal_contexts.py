#!/usr/bin/env python3
"""Does the previous delta predict the next one? Empirical entropies of
REFCTX's tokens for the delta C against R, given what R's own delta against
P (the checkpoint before) was: the measurement behind doc/refctx.md, "The
previous delta as context, measured, not built".

Usage: /usr/bin/python3 bench/temporal_contexts.py P R C BITS
  P, R, C: three consecutive safetensors checkpoints of one run (oldest first);
  BITS: 16 (the BF16 tensors are used) or 32 (the F32 tensors).
(Debian's python3 with numpy, e.g. from python3-torch.)

Per 64 Ki-value block of every tensor of at least 4096 values, t is REFCTX's
difference of C to R (doc/refctx.md: |c| - |r| in the integer view, across
zero continued), its token the sign and bit length of t, and the k - 1 bits
below the leading one raw. Models of the token:
  exp            the reference's exponent byte (what REFCTX codes with)
  exp+prevtok    and the token of R's own delta against P at the same place
  exp+prevsign   and only the sign of that delta
  prevtok only   that token and sign, without the exponent
  pred a=...     t less a times R's delta (a linear extrapolation), given exp
  shrink         t less the block's median relative change of |r| applied to
                 |r| (weight decay's shrink, one number a block, not costed),
                 given exp; uses only R and C
Tables are costed at 12 bits per nonzero count, as a stand-in for REFCTX's
stored tables. Printed: bits per value and the fraction of the input bytes.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exponent_contexts import read_tensors  # noqa: E402

BLOCK = 65536


def read(path, dt):
    return {k: v.astype(np.int64) for k, v in read_tensors(path, dt).items()}


def diff(c, r, bits):
    """REFCTX's t: |c| - |r| in the integer view; across zero, ~|c| - |r|."""
    m = (1 << (bits - 1)) - 1
    cross = ((c ^ r) >> (bits - 1)) & 1
    cm = np.where(cross == 1, ~(c & m), c & m)
    return cm - (r & m)


def token(t):
    mag = np.abs(t)
    k = np.zeros_like(mag)
    nz = mag > 0
    k[nz] = np.floor(np.log2(mag[nz])).astype(np.int64) + 1
    return np.where(k > 0, 2 * k - 1 + (t < 0), 0), k


def magnitudes(v, bits):
    """|value| as float64 of bf16 (bits 16) or f32 words."""
    m = (v & ((1 << (bits - 1)) - 1)).astype(np.uint32)
    return (m if bits == 32 else m << 16).view(np.float32).astype(np.float64)


def shrink_residual(c, r, t, bits):
    """t less the prediction |r| * (1 + g), g the block's median relative
    change of the magnitude over the values that keep their sign."""
    fr, fc = magnitudes(r, bits), magnitudes(c, bits)
    ok = ((((c ^ r) >> (bits - 1)) & 1) == 0) & (fr > 0)
    g = float(np.median((fc[ok] - fr[ok]) / fr[ok])) if ok.any() else 0.0
    words = (fr * (1 + g)).astype(np.float32).view(np.uint32).astype(np.int64)
    if bits == 16:
        words >>= 16
    return t - (words - (r & ((1 << (bits - 1)) - 1)))


def entropy(counts):
    c = counts[counts > 0].astype(np.float64)
    return float(-(c * np.log2(c / c.sum())).sum())


def conditional(ctx, sym, alpha=130):
    """(bits, table bits) of sym coded with one table per context value."""
    joint = np.bincount(ctx * alpha + sym)
    rows = (len(joint) + alpha - 1) // alpha
    joint = np.pad(joint, (0, rows * alpha - len(joint))).reshape(rows, alpha)
    used = [row for row in joint if row.any()]
    return sum(entropy(row) for row in used), sum(np.count_nonzero(row) * 12 for row in used)


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in ("16", "32"):
        sys.exit(__doc__)
    bits = int(sys.argv[4])
    dt = "F32" if bits == 32 else "BF16"
    prev, ref, cur = (read(f, dt) for f in sys.argv[1:4])
    total = {}
    n = 0

    def add(key, b, tb, raw):
        a = total.setdefault(key, [0.0, 0.0, 0.0])
        a[0] += b
        a[1] += tb
        a[2] += raw

    for name, call in cur.items():
        if len(call) < 4096 or name not in ref or name not in prev:
            continue
        for b0 in range(0, len(call), BLOCK):
            c, r, p = call[b0:b0 + BLOCK], ref[name][b0:b0 + BLOCK], prev[name][b0:b0 + BLOCK]
            n += len(c)
            t = diff(c, r, bits)
            tok, k = token(t)
            raw = np.maximum(k - 1, 0).sum()
            ex = (r >> (bits - 9)) & 255
            tp = diff(r, p, bits)
            tokp, kp = token(tp)
            sp = (tp < 0).astype(np.int64) + 2 * (tp > 0)
            add("exp", *conditional(ex, tok), raw)
            add("exp+prevtok", *conditional(ex * 130 + tokp, tok), raw)
            add("exp+prevsign", *conditional(ex * 3 + sp, tok), raw)
            add("prevtok only", *conditional(np.minimum(kp, 40) * 3 + sp, tok), raw)
            for a in (0.25, 0.5, 1.0):
                res = t - np.round(a * tp).astype(np.int64)
                tok2, k2 = token(res)
                add(f"pred a={a}", *conditional(ex, tok2), np.maximum(k2 - 1, 0).sum())
            tok3, k3 = token(shrink_residual(c, r, t, bits))
            add("shrink", *conditional(ex, tok3), np.maximum(k3 - 1, 0).sum())
    if not n:
        sys.exit(f"no {dt} tensors of at least 4096 values in all three files")
    print(f"{n} values; bits per value, and the size as a fraction of the input bytes")
    for key, (b, tb, raw) in total.items():
        print(f"{key:14s} tokens {b / n:.3f} tables {tb / n:.3f} raw {raw / n:.3f}"
              f"  size {(b + tb + raw) / n / bits:.4f} (without tables {(b + raw) / n / bits:.4f})")


if __name__ == "__main__":
    main()
