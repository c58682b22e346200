#!/usr/bin/env python3
"""Sparse bf16 deltas, as late in training: lmc against byte-grouped zstd.

Usage: /usr/bin/python3 bench/sparse_deltas.py [TRAJ_DIR] [ITERATIONS]
(Debian's python3 with torch; run from the repository root after `make` and
`make bench`, which builds build/bench/bgzstd.)

Late in training, or with a small learning rate, most bf16 weights do not
change from one save to the next: the update is below half a unit in the last
place. The bench trajectory is dense (4 % of bf16 values unchanged between
steps 500 and 600), so this script makes sparser deltas from its fp32 master
weights w500 and w600: reference = bf16(w600), new = bf16(w600 + f * (w600 -
w500)) for a few factors f (a step of f times the last 100 steps' update),
all float tensors of model_fp32.safetensors concatenated, written raw.
For each it prints the fraction of values unchanged, then `lmc -b --dtype bf16
NEW -r REF -T1` (ratio, MB/s, median of ITERATIONS) and byte-grouped zstd -1
and -19 on the XOR delta (build/bench/bgzstd: ratio, MB/s).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

FACTORS = (0.3, 0.05, 0.01, 0.002, 0.0003)


def floats(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = []
    for name, t in head.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        s, e = t["data_offsets"]
        out.append(torch.frombuffer(bytearray(data[s:e]), dtype=torch.float32))
    return torch.cat(out)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def main():
    traj = sys.argv[1] if len(sys.argv) > 1 else "bench/data/traj-3m"
    iters = sys.argv[2] if len(sys.argv) > 2 else "7"
    for tool in ("./lmc", "build/bench/bgzstd"):
        if not os.access(tool, os.X_OK):
            sys.exit("sparse_deltas.py: %s missing (run make, and make bench once)" % tool)
    w5 = floats(os.path.join(traj, "step-000500", "model_fp32.safetensors"))
    w6 = floats(os.path.join(traj, "step-000600", "model_fp32.safetensors"))
    ref = w6.bfloat16().view(torch.int16)
    with tempfile.TemporaryDirectory() as tmp:
        rp, npth, xp = (os.path.join(tmp, n) for n in ("ref.raw", "new.raw", "xor.raw"))
        ref.numpy().tofile(rp)
        print("%d bf16 values (%s, fp32 master weights of steps 500 and 600)" % (ref.numel(), traj))
        print("| f | unchanged | lmc ratio | lmc c / d MB/s | bg-zstd-1 ratio | its c / d | bg-zstd-19 ratio | its d |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for f in FACTORS:
            new = (w6 + f * (w6 - w5)).bfloat16().view(torch.int16)
            new.numpy().tofile(npth)
            (new ^ ref).numpy().tofile(xp)
            same = (new == ref).float().mean().item()
            # "...: N -> M (ratio R), compress C MB/s, decompress D MB/s (median ...)"
            lm = run(["./lmc", "-b", "--dtype", "bf16", npth, "-r", rp, "-T1", "-i", iters])
            ratio = lm.split("(ratio ")[1].split(")")[0]
            c = lm.split("compress ")[1].split(" MB/s")[0]
            d = lm.split("decompress ")[1].split(" MB/s")[0]
            z1 = run(["build/bench/bgzstd", xp, "2", "1", "1", iters]).split()
            z19 = run(["build/bench/bgzstd", xp, "2", "1", "19", "1"]).split()
            n = float(z1[0])
            print("| %g | %.1f %% | %s | %s / %s | %.4f | %s / %s | %.4f | %s |" %
                  (f, 100 * same, ratio, c, d, float(z1[1]) / n, z1[2], z1[3], float(z19[1]) / n, z19[3]))


if __name__ == "__main__":
    main()
