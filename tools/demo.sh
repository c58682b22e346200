#!/usr/bin/env bash
# The demo: compress the shipped trajectory as a chain of deltas, restore every
# checkpoint, check it byte for byte, and print lmc's ratio beside zstd's and
# bzip2's on the same data. Usage: tools/demo.sh [TRAJECTORY_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
traj=${1:-data/trajectory}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=$(ls -d "$traj"/step-* | sort)

size() { stat -c %s "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

printf '%-44s %10s %7s %7s %7s %7s %7s %7s\n' "file (kind)" "bytes" "lmc" "zstd-3" "zstd-19" "bzip2-9" "xz-6" "ok"
total_in=0; total_lmc=0; total_zstd=0; total_bz=0
prev=""
for s in $steps; do
    for f in "$s"/*.safetensors; do
        name=$(basename "$f")
        out="$work/$(basename "$s")-$name.lmc"
        if [ -z "$prev" ]; then
            kind=full
            ./lmc -q -f "$f" -o "$out"
            ./lmc -q -d -f "$out" -o "$work/restored"
            peer_in="$f"
        else
            kind=delta
            ref="$prev/$name"
            ./lmc -q -f -r "$ref" "$f" -o "$out"
            ./lmc -q -d -f -r "$ref" "$out" -o "$work/restored"
            python3 tools/xor.py "$f" "$ref" "$work/xor"   # what the peers get: the same XOR delta
            peer_in="$work/xor"
        fi
        ok=FAIL; cmp -s "$f" "$work/restored" && ok=ok
        n=$(size "$f")
        zl=$(size "$out")
        z3=$(zstd -q -3 -c "$peer_in" | wc -c)
        z19=$(zstd -q -19 -c "$peer_in" | wc -c)
        bz=$(bzip2 -9 -c "$peer_in" | wc -c)
        xz6=$(xz -6 -c "$peer_in" | wc -c)
        printf '%-44s %10d %7s %7s %7s %7s %7s %7s\n' "$(basename "$s")/$name ($kind)" "$n" \
            "$(ratio "$zl" "$n")" "$(ratio "$z3" "$n")" "$(ratio "$z19" "$n")" "$(ratio "$bz" "$n")" "$(ratio "$xz6" "$n")" "$ok"
        [ "$ok" = ok ] || { echo "demo: $f did not round-trip" >&2; exit 1; }
        total_in=$((total_in + n)); total_lmc=$((total_lmc + zl)); total_zstd=$((total_zstd + z3)); total_bz=$((total_bz + bz))
    done
    prev=$s
done
echo
echo "all checkpoints restored byte-identical."
echo "total: $total_in bytes -> lmc $total_lmc ($(ratio $total_lmc $total_in)), zstd -3 $total_zstd ($(ratio $total_zstd $total_in)), bzip2 -9 $total_bz ($(ratio $total_bz $total_in))"
echo "ratio = compressed / original (lower is better); peers compress the XOR delta file for delta steps."
