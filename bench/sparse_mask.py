#!/usr/bin/env python3
"""Would a skip mask pay on sparse bf16 deltas? Empirical entropies, no tables.

Usage: /usr/bin/python3 bench/sparse_mask.py [TRAJ_DIR]
(Debian's python3 with torch and numpy; TRAJ_DIR defaults to
bench/data/traj-3m, which `make bench` generates.)

A value block whose values mostly equal their reference could be decoded
faster if it said up front which values changed (a bitmap) and coded tokens
only for those. This measures what that costs in size against REFCTX, which
codes "unchanged" as token 0 in the context of the reference's exponent.
The deltas are those of bench/sparse_deltas.py (reference bf16(w600), new
bf16(w600 + f (w600 - w500)), all float tensors), plus the real step
600/500 delta (f = 1). Per 64 Ki-value block, bits a value:
  refctx:      H(token | exponent context), summed over contexts;
  mask(H2):    the block's bitmap at its order-0 entropy m H2(p0), plus
               H(token | context, token != 0) for the changed values;
  mask(bytes): the same with the bitmap's bytes at their order-0 entropy
               (what an ordinary lmc block of the bitmap could reach);
raw low bits (the same in both) are printed apart, and the last column is
(mask(bytes) + raw) / (refctx + raw).
"""
import math
import sys

import numpy as np
import torch

from sparse_deltas import floats   # bench/ is on the path: this script's folder


def entropy_bits(counts):
    counts = counts[counts > 0].astype(np.float64)
    return float((counts * np.log2(counts.sum() / counts)).sum())


def bf16_bits(x):
    return x.bfloat16().view(torch.int16).numpy().astype(np.int64) & 0xFFFF


def tokens(new, ref):
    """REFCTX's token of each value (doc/format.md, layout 2) and its raw bit count."""
    cross = ((new ^ ref) >> 15) & 1
    cm = new & 0x7FFF
    t = np.where(cross == 1, -cm - 1, cm) - (ref & 0x7FFF)
    mag = np.abs(t)
    k = np.zeros_like(mag)
    nz = mag > 0
    k[nz] = np.floor(np.log2(mag[nz])).astype(np.int64) + 1
    return np.where(k > 0, 2 * k - 1 + (t < 0), 0), np.maximum(k - 1, 0)


def main():
    traj = sys.argv[1] if len(sys.argv) > 1 else "bench/data/traj-3m"
    w5 = floats(traj + "/step-000500/model_fp32.safetensors")
    w6 = floats(traj + "/step-000600/model_fp32.safetensors")
    print("f        unchanged  refctx  mask(H2)  mask(bytes)  raw     mask/refctx")
    for f in (1.0, 0.3, 0.05, 0.01, 0.002, 0.0003):
        if f == 1.0:
            new, ref = bf16_bits(w6), bf16_bits(w5)
        else:
            new, ref = bf16_bits(w6 + f * (w6 - w5)), bf16_bits(w6)
        tok, rawn = tokens(new, ref)
        ctx = (ref >> 7) & 255
        rc = h2 = hb = 0.0
        for b in range(0, len(tok), 65536):
            tk, cx = tok[b:b + 65536], ctx[b:b + 65536]
            cnt = np.bincount(cx * 33 + tk, minlength=256 * 33).reshape(256, 33)
            rc += sum(entropy_bits(cnt[c]) for c in range(256) if cnt[c].any())
            cnz = cnt.copy()
            cnz[:, 0] = 0
            changed = sum(entropy_bits(cnz[c]) for c in range(256) if cnz[c].any())
            z = tk == 0
            p0 = z.mean()
            h2 += changed + (len(tk) * -(p0 * math.log2(p0) + (1 - p0) * math.log2(1 - p0)) if 0 < p0 < 1 else 0)
            mask = np.packbits((~z).astype(np.uint8), bitorder="little")
            hb += changed + entropy_bits(np.bincount(mask, minlength=256))
        n, raw = len(tok), float(rawn.sum())
        print("%-8g %8.4f  %7.4f  %8.4f  %11.4f  %6.4f  %10.4f" % (
            f, (tok == 0).mean(), rc / n, h2 / n, hb / n, raw / n, (hb + raw) / (rc + raw)))


if __name__ == "__main__":
    main()
