#!/usr/bin/env bash
# bench/ratios.sh - compressed size of one checkpoint delta, lmc against the
# peers, ratios only (no timing: any machine, any load). For your own
# checkpoints:
#     bash bench/ratios.sh NEW REF [WIDTH]
# NEW is coded by lmc with -r REF (and with --no-refctx, the paper's coding);
# every peer compresses the XOR delta of NEW and REF (tools/xor.py). WIDTH is
# the value width in bytes for the byte-grouped peers; by default the width
# of the dtype that holds most of NEW's bytes (from `lmc -l -v`).
# QUICK=1 leaves out the slow peers (zstd -19, byte-grouped zstd -19, xz -6, bzip2 -9).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
NEW=$1 REF=$2 W=${3:-}
for f in "$NEW" "$REF"; do [ -f "$f" ] || { echo "ratios.sh: $f: not a file" >&2; exit 1; }; done
[ "$(stat -c %s "$NEW")" = "$(stat -c %s "$REF")" ] || { echo "ratios.sh: NEW and REF differ in size (the XOR delta needs equal sizes)" >&2; exit 1; }
[ -x ./lmc ] || make -s lmc
mkdir -p build/bench
[ build/bench/bgzstd -nt bench/bgzstd.c ] || gcc -O2 -Wall -Wextra bench/bgzstd.c -lzstd -o build/bench/bgzstd
[ build/bench/blosc_bench -nt bench/blosc_bench.c ] || gcc -O2 -Wall -Wextra bench/blosc_bench.c -lblosc -o build/bench/blosc_bench
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

size=$(stat -c %s "$NEW")
./lmc -q -f -r "$REF" "$NEW" -o "$T/a.lmc"
./lmc -q -f -d -r "$REF" "$T/a.lmc" -o "$T/a.out"
cmp -s "$T/a.out" "$NEW" || { echo "ratios.sh: lmc round trip differs" >&2; exit 1; }
if [ -z "$W" ]; then
    # the dtype table of `lmc -l -v`: "  bf16   BYTES_IN   BYTES_OUT   RATIO"
    dt=$(./lmc -l -v "$T/a.lmc" | awk '/^ +dtype +bytes in/ { on = 1; next } /^ +coder/ { on = 0 }
         on && NF == 4 && $2 > best { best = $2; d = $1 } END { print d }')
    case "$dt" in
        f64|i64|u64) W=8 ;; f32|i32|u32) W=4 ;; bf16|f16|i16|u16) W=2 ;; *) W=1 ;;
    esac
fi
./lmc -q -f --no-refctx -r "$REF" "$NEW" -o "$T/b.lmc"
/usr/bin/python3 tools/xor.py "$NEW" "$REF" "$T/x"

rows=()
add() { rows+=("$1|$2"); }
add "lmc -r REF" "$(stat -c %s "$T/a.lmc")"
add "lmc --no-refctx -r REF (the paper's LMC)" "$(stat -c %s "$T/b.lmc")"
add "byte-grouped (w=$W) + zstd -1" "$(build/bench/bgzstd "$T/x" "$W" 1 1 1 | awk '{ print $2 }')"
add "blosc shuffle (w=$W) + zstd -5" "$(build/bench/blosc_bench "$T/x" "$W" 1 5 1 zstd | awk '{ print $2 }')"
add "zstd -3" "$(zstd -q -3 -c "$T/x" | wc -c)"
if [ "${QUICK:-0}" != 1 ]; then
    add "byte-grouped (w=$W) + zstd -19" "$(build/bench/bgzstd "$T/x" "$W" 1 19 1 | awk '{ print $2 }')"
    add "zstd -19" "$(zstd -q -19 -T0 -c "$T/x" | wc -c)"
    add "xz -6" "$(xz -6 -T0 -c "$T/x" | wc -c)"
    add "bzip2 -9" "$(bzip2 -9 -c "$T/x" | wc -c)"
fi

echo "NEW = $NEW ($size bytes), REF = $REF; peers compress the XOR delta"
echo
echo "| coder | bytes | ratio |"
echo "|---|---:|---:|"
best_peer=
for r in "${rows[@]}"; do
    name=${r%%|*} b=${r##*|}
    printf '| %s | %s | %.4f |\n' "$name" "$b" "$(echo "$b / $size" | bc -l)"
    case "$name" in lmc*) ;; *) if [ -z "$best_peer" ] || [ "$b" -lt "${best_peer##*|}" ]; then best_peer=$r; fi ;; esac
done
a=$(stat -c %s "$T/a.lmc")
echo
printf 'lmc is %.1f %% smaller than the best peer (%s)\n' "$(echo "(1 - $a / ${best_peer##*|}) * 100" | bc -l)" "${best_peer%%|*}"
