#!/bin/bash
# device16.sh: the 16-thread measurement, for a lent machine with 16 cores and a GPU.
#
# The 2-core box cannot say how lmc scales to the paper's 16 cores, and the
# bench trajectory (6.6 MB bf16) is too small to keep 16 threads busy. So this
# trains a ~150M-parameter model of the same family (tools/train_tiny_gpt.py)
# on the GPU, and runs `lmc -b` on its checkpoints at 1, 2, 4, 8 and 16
# threads, beside byte-grouped zstd -1 at 1 and 16 threads on the same XOR
# delta. Binaries come prebuilt in BIN (default .dev), since the lent machine
# has no jansson or zstd headers: lmc linked statically, bgzstd beside the
# libzstd.so.1 it was linked with (Debian's static libzstd has no threads).
# Built here, after `make` (.dev ignored through .git/info/exclude, named in
# the device tool's carry):
#   mkdir -p .dev && gcc -O2 -static -Iinclude programs/*.c liblmc.a \
#       -ljansson -lpthread -lm -o .dev/lmc
#   gcc -O2 bench/bgzstd.c -lzstd -o .dev/bgzstd
#   cp -L /usr/lib/x86_64-linux-gnu/libzstd.so.1 .dev/
#
# Usage: OUT=dir bash bench/device16.sh     (log in $OUT/log.txt)
# A/B: OTHER=path/to/another/lmc runs it beside BIN/lmc, alternated, twice
# per file, at THREADS (default 1,2,4,8,16); PEERS=0 skips the zstd and
# keyframe rows. CLI=1 also times the lmc command file to file (-T1 and
# -T16, with the reference, both ways) with its peak RSS.
set -u
BIN=${BIN:-.dev}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/device16}
STEPS=${STEPS:-400}
DEVICE=${DEVICE:-cuda}
D_MODEL=${D_MODEL:-1024}
LAYERS=${LAYERS:-12}
PY=${PY:-python3}
THREADS=${THREADS:-1,2,4,8,16}
OTHER=${OTHER:-}
PEERS=${PEERS:-1}
TRAIN_THREADS=${TRAIN_THREADS:-4}
CLI=${CLI:-0}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

echo "== machine"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L2|L3)' 
grep -o -w -E 'avx512f|avx512bw|avx512vbmi|avx512vbmi2|avx2|bmi2' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
nproc; free -g | head -2

T=/tmp/traj150m
echo "== training ($DEVICE)"
rm -rf $T
start=$(date +%s)
"$PY" tools/train_tiny_gpt.py --out $T --device "$DEVICE" --d-model "$D_MODEL" --layers "$LAYERS" \
    --heads 16 --seq-len 256 --batch 16 --steps "$STEPS" --save-from $((STEPS - 200)) \
    --every 100 --threads "$TRAIN_THREADS" --log-every 100 ||
  { echo "training failed"; exit 1; }
echo "training took $(( $(date +%s) - start )) s"
NEW=$T/step-$(printf %06d "$STEPS"); REF=$T/step-$(printf %06d $((STEPS - 100)))
ls -la "$NEW"

for f in model_bf16 model_fp32 optim; do
    N=$NEW/$f.safetensors; R=$REF/$f.safetensors
    w=4; [ $f = model_bf16 ] && w=2
    echo "== $f delta ($(date +%T))"
    if [ -n "$OTHER" ]; then
        for rep in 1 2; do
            for b in "$OTHER" "$BIN/lmc"; do echo "-- $b"; "$b" -b -T"$THREADS" -i 5 -r "$R" "$N"; done
        done
    else
        "$BIN/lmc" -b -T"$THREADS" -i 5 -r "$R" "$N"
    fi
    if [ "$CLI" = 1 ]; then
        for t in 1 16 1 16; do
            for dir in c d; do
                if [ $dir = c ]; then set -- "$BIN/lmc" -q -f -T$t -r "$R" "$N" -o /tmp/cli.lmc
                else set -- "$BIN/lmc" -q -f -d -T$t -r "$R" /tmp/cli.lmc -o /tmp/cli.out; fi
                echo "cli $f -T$t $dir: $("$PY" -c 'import resource, subprocess, sys, time
t = time.time(); rc = subprocess.run(sys.argv[2:]).returncode; t = time.time() - t
print("%.3f s, %.0f MB/s, peak RSS %.1f MiB, rc %d" % (t, int(sys.argv[1]) / t / 1e6,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, rc))' "$(stat -c %s "$N")" "$@")"
            done
            cmp -s "$N" /tmp/cli.out || echo "cli $f -T$t: ROUND TRIP FAILED"
        done
    fi
    [ "$PEERS" = 1 ] || continue
    "$PY" tools/xor.py "$N" "$R" /tmp/x.bin
    echo "byte-grouped+zstd-1 1T:  $("$BIN/bgzstd" /tmp/x.bin $w 1 1 5)"
    echo "byte-grouped+zstd-1 16T: $("$BIN/bgzstd" /tmp/x.bin $w 16 1 5)"
    echo "== $f keyframe"
    "$BIN/lmc" -b -T1,16 -i 5 "$N"
done
echo "== done"
