#!/usr/bin/env python3
"""Frozen tensors: lmc against byte-grouped zstd on deltas where most tensors
did not change (fine-tuning that trains a few layers or adapters and saves
the whole model).

Usage: python3 bench/frozen_deltas.py [TRAJ_DIR] [KEEP] [ITERATIONS]
(run from the repository root after `make` and `make bench`, which builds
build/bench/bgzstd; standard library only).

For each of model_bf16, model_fp32 and optim.safetensors it writes a copy of
step 600 in which every tensor whose name does not contain KEEP (default
"h.3.", the last layer of bench/data/traj-3m) holds its step-500 values,
then prints the share of bytes unchanged, `lmc -b NEW -r STEP500 -T1`
(ratio, MB/s, median of ITERATIONS) and byte-grouped zstd -1 on the XOR
delta (build/bench/bgzstd: ratio, MB/s).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile


def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return raw[:8 + n], json.loads(raw[8:8 + n]), raw[8 + n:]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def main():
    traj = sys.argv[1] if len(sys.argv) > 1 else "bench/data/traj-3m"
    keep = sys.argv[2] if len(sys.argv) > 2 else "h.3."
    iters = sys.argv[3] if len(sys.argv) > 3 else "9"
    for tool in ("./lmc", "build/bench/bgzstd"):
        if not os.access(tool, os.X_OK):
            sys.exit("frozen_deltas.py: %s missing (run make, and make bench once)" % tool)
    print("| file | unchanged | lmc ratio | lmc c / d MB/s | bg-zstd-1 ratio | its c / d |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, width in (("model_bf16", 2), ("model_fp32", 4), ("optim", 4)):
            cur = os.path.join(traj, "step-000600", name + ".safetensors")
            ref = os.path.join(traj, "step-000500", name + ".safetensors")
            head, meta, data = read(cur)
            _, rmeta, rdata = read(ref)
            out = bytearray(data)
            frozen = total = 0
            for k, t in meta.items():
                if k == "__metadata__":
                    continue
                a, b = t["data_offsets"]
                total += b - a
                if keep not in k and k in rmeta:
                    ra, rb = rmeta[k]["data_offsets"]
                    if rb - ra == b - a:
                        out[a:b] = rdata[ra:rb]
                        frozen += b - a
            new = os.path.join(tmp, name + ".safetensors")
            with open(new, "wb") as f:
                f.write(head + bytes(out))
            # the XOR delta the peers get, as tools/xor.py makes it
            xp = os.path.join(tmp, name + ".xor")
            run([sys.executable, "tools/xor.py", new, ref, xp])
            lm = run(["./lmc", "-b", new, "-r", ref, "-T1", "-i", iters])
            ratio = lm.split("(ratio ")[1].split(")")[0]
            c = lm.split("compress ")[1].split(" MB/s")[0]
            d = lm.split("decompress ")[1].split(" MB/s")[0]
            z1 = run(["build/bench/bgzstd", xp, str(width), "1", "1", iters]).split()
            print("| %s | %.1f %% | %s | %s / %s | %.4f | %s / %s |" %
                  (name, 100.0 * frozen / total, ratio, c, d, float(z1[1]) / float(z1[0]), z1[2], z1[3]))


if __name__ == "__main__":
    main()
