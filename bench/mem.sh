#!/usr/bin/env bash
# bench/mem.sh - peak memory and wall time of the lmc CLI on an input of at
# least 8 GiB (`make bench-mem`). The input is the last step's model_bf16 file
# of the benchmark trajectory repeated until >= 8 GiB; the reference is the
# previous step's file repeated the same number of times. A concatenation is
# not a safetensors file, so the default run exercises generic mode; a second
# variant forces --format=raw --dtype=bf16. For each variant:
#   compress, decompress, compress with -r, decompress with -r
# each under /usr/bin/time -v with -T2; then raw-bf16 with -r again at -T1,
# -T8, -T16 and -T24 (more threads than this box has cores: every thread
# still gets its workspace), and through pipes at -T2, -T16 and -T24; the
# Python binding's compress_file and decompress_file at 2 and 16 threads; then
# the snapshot store with -T2: add the reference (a keyframe), add the input
# (a delta against the cached reference), restore the input (from the cache,
# then without it), verify; the last two again with -T16. Every restore is
# compared with cmp.
# Writes bench/mem_results.md. Needs ~50 GiB free disk in the scratch folder.
# Environment: BENCH_TRAJ (default bench/data/traj-3m), BENCH_MEM_DIR
# (default bench/out/mem, deleted afterwards), BENCH_MEM_GIB (default 8),
# BENCH_OUT (default bench), BENCH_NO_DEPS=1.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
T_START=$(date +%s)
DATE_START=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
CMDLINE="bash bench/mem.sh${*:+ $*}"
TRAJ=${BENCH_TRAJ:-bench/data/traj-3m}
DIR=${BENCH_MEM_DIR:-bench/out/mem}
GIB=${BENCH_MEM_GIB:-8}
OUTDIR=${BENCH_OUT:-bench}
THREADS=2
log() { printf '[%4ds] %s\n' "$(( $(date +%s) - T_START ))" "$*" >&2; }
fail() { echo "bench-mem: $*" >&2; exit 1; }

[ -n "${BENCH_NO_DEPS:-}" ] || sh tools/deps.sh time
[ -x /usr/bin/time ] || fail "/usr/bin/time is missing (package time)"
[ -x ./lmc ] && [ -f ./liblmc.so ] || make lmc liblmc.so

STEPS=$(ls -d "$TRAJ"/step-* 2>/dev/null | sort)
[ "$(echo "$STEPS" | grep -c .)" -ge 2 ] || fail "need a trajectory with two steps in $TRAJ (run bench/run.sh first)"
LAST=$(echo "$STEPS" | tail -n 1)/model_bf16.safetensors
PREV=$(echo "$STEPS" | tail -n 2 | head -n 1)/model_bf16.safetensors
unit=$(stat -c %s "$LAST")
[ "$unit" -eq "$(stat -c %s "$PREV")" ] || fail "$LAST and $PREV differ in size"
target=${BENCH_MEM_BYTES:-$((GIB * 1024 * 1024 * 1024))}
copies=$(( (target + unit - 1) / unit ))
total=$((copies * unit))

mkdir -p "$DIR"
# input + reference + one compressed output + one restore, plus the store's
# two frames and cache (under 2.5 inputs), plus 2 GiB slack
need_kib=$(( (6 * total) / 1024 + 2 * 1024 * 1024 ))
avail_kib=$(df -Pk "$DIR" | awk 'NR == 2 { print $4 }')
log "need ~$((need_kib / 1048576)) GiB free in $DIR, have $((avail_kib / 1048576)) GiB"
[ "$avail_kib" -ge "$need_kib" ] || { rmdir "$DIR" 2>/dev/null || true; fail "not enough free disk in $DIR"; }
trap 'rm -rf "$DIR"' EXIT
# others may rebuild ./lmc meanwhile: use a copy taken now for every row
cp ./lmc "$DIR/lmc"; LMC="$DIR/lmc"
LMC_VER="$("$LMC" -V 2>&1 | head -n 1), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- lib programs include 2>/dev/null || echo ' + uncommitted changes in lib/programs/include'), binary sha256 $(sha256sum "$LMC" | cut -c1-16)..."

IN="$DIR/input.bin"; REF="$DIR/ref.bin"
log "building $IN and $REF: $copies x $unit bytes = $total bytes each"
for ((i = 0; i < copies; i++)); do cat "$LAST"; done > "$IN"
for ((i = 0; i < copies; i++)); do cat "$PREV"; done > "$REF"
sync

RES="$DIR/rows.tsv"; : > "$RES"
measure() {  # measure VARIANT OP OUTPUT_FOR_SIZE CMD... ; appends a row (threads: $THREADS)
    local variant=$1 op=$2 sized=$3 tv="$DIR/time.txt" rss el usr sys z
    shift 3
    log "$variant / $op: $*"
    if ! /usr/bin/time -v -o "$tv" "$@"; then cat "$tv" >&2; fail "$variant / $op failed: $*"; fi
    rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tv")
    el=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$tv" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    usr=$(awk -F': ' '/User time/ { print $2 }' "$tv")
    sys=$(awk -F': ' '/System time/ { print $2 }' "$tv")
    if [ "$sized" = - ]; then z=-; else z=$(stat -c %s "$sized"); fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$op" "$rss" "$el" "$usr" "$sys" "$z" "$THREADS" >> "$RES"
    log "  max RSS $((rss / 1024)) MiB, ${el}s elapsed, output $z bytes"
}
check() {  # check RESTORED
    cmp "$IN" "$1" || fail "round trip FAILED: $1 differs from $IN"
    echo "ok" >&2
    rm -f "$1"
}

for variant in generic raw-bf16; do
    fmt=(); [ "$variant" = raw-bf16 ] && fmt=(--format=raw --dtype=bf16)
    Z="$DIR/input.lmc"; OUT="$DIR/restored.bin"
    measure "$variant" "compress" "$Z" "$LMC" -q -T$THREADS -f "${fmt[@]}" "$IN" -o "$Z"
    measure "$variant" "decompress" "$OUT" "$LMC" -q -d -T$THREADS -f "$Z" -o "$OUT"
    check "$OUT"; rm -f "$Z"
    measure "$variant" "compress -r" "$Z" "$LMC" -q -T$THREADS -f "${fmt[@]}" -r "$REF" "$IN" -o "$Z"
    measure "$variant" "decompress -r" "$OUT" "$LMC" -q -d -T$THREADS -f -r "$REF" "$Z" -o "$OUT"
    check "$OUT"; rm -f "$Z"
done
for THREADS in 1 8 16 24; do
    Z="$DIR/input.lmc"; OUT="$DIR/restored.bin"
    measure raw-bf16 "compress -r" "$Z" "$LMC" -q -T$THREADS -f --format=raw --dtype=bf16 -r "$REF" "$IN" -o "$Z"
    measure raw-bf16 "decompress -r" "$OUT" "$LMC" -q -d -T$THREADS -f -r "$REF" "$Z" -o "$OUT"
    check "$OUT"; rm -f "$Z"
done
# through pipes (cat IN | lmc ... - > OUT): the command reads into its own
# buffers instead of mapping the file; /usr/bin/time reports the largest
# process of the pipeline (lmc)
for THREADS in 2 16 24; do
    Z="$DIR/input.lmc"; OUT="$DIR/restored.bin"
    measure raw-bf16-pipe "compress -r" "$Z" sh -c 'cat "$1" | "$2" -q -c -T"$3" --format=raw --dtype=bf16 -r "$4" - > "$5"' \
        sh "$IN" "$LMC" "$THREADS" "$REF" "$Z"
    measure raw-bf16-pipe "decompress -r" "$OUT" sh -c 'cat "$1" | "$2" -q -d -c -T"$3" -r "$4" - > "$5"' \
        sh "$Z" "$LMC" "$THREADS" "$REF" "$OUT"
    check "$OUT"; rm -f "$Z"
done
# the Python binding's file functions (python/lmc), the reference given as a
# path; the interpreter's own ~14 MiB count in its RSS
cp ./liblmc.so "$DIR/liblmc.so"
PYCODE='import sys; sys.path.insert(0, sys.argv[1]); import lmc
f = lmc.compress_file if sys.argv[2] == "c" else lmc.decompress_file
kw = {"dtype": "bf16"} if sys.argv[2] == "c" else {}
f(sys.argv[3], sys.argv[4], ref=sys.argv[5], threads=int(sys.argv[6]), **kw)'
for THREADS in 2 16; do
    Z="$DIR/input.lmc"; OUT="$DIR/restored.bin"
    measure python "compress_file, ref=path" "$Z" env LMC_LIBRARY="$DIR/liblmc.so" /usr/bin/python3 -c "$PYCODE" \
        python c "$IN" "$Z" "$REF" "$THREADS"
    measure python "decompress_file, ref=path" "$OUT" env LMC_LIBRARY="$DIR/liblmc.so" /usr/bin/python3 -c "$PYCODE" \
        python d "$Z" "$OUT" "$REF" "$THREADS"
    check "$OUT"; rm -f "$Z"
done
THREADS=2
ST="$DIR/store"; OUT="$DIR/restored.bin"
"$LMC" store init "$ST" -q
measure store "store add, keyframe (the reference)" - "$LMC" store add "$ST" "$REF" --name m --step 0 -q -T$THREADS
measure store "store add, delta (the input)" - "$LMC" store add "$ST" "$IN" --name m --step 1 -q -T$THREADS
measure store "store restore, the latest (copied from the cache)" "$OUT" "$LMC" store restore "$ST" 1 -o "$OUT" -q -T$THREADS
check "$OUT"
rm -f "$ST"/cache/*
measure store "store restore, the latest (no cache: decoded through the keyframe)" "$OUT" "$LMC" store restore "$ST" 1 -o "$OUT" -q -T$THREADS
check "$OUT"
measure store "store verify" - "$LMC" store verify "$ST" -q -T$THREADS
THREADS=16
rm -f "$ST"/cache/*
measure store "store restore, the latest (no cache: decoded through the keyframe)" "$OUT" "$LMC" store restore "$ST" 1 -o "$OUT" -q -T$THREADS
check "$OUT"
measure store "store verify" - "$LMC" store verify "$ST" -q -T$THREADS
rm -rf "$ST"
RUNTIME=$(( $(date +%s) - T_START ))

mkdir -p "$OUTDIR"
{
    echo "# lmc peak memory on a large input"
    echo
    echo "- Date: $DATE_START (whole script: ${RUNTIME} s)"
    echo "- Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM; scratch on $(df -P "$DIR" 2>/dev/null | awk 'NR == 2 { print $1 }' || echo ?)"
    echo "- lmc: $LMC_VER (copy of ./lmc taken at start)"
    echo "- Command: \`$CMDLINE\` (\`make bench-mem\`)"
    echo "- Input: \`$LAST\` repeated $copies times = $total bytes ($(awk -v t="$total" 'BEGIN { printf "%.2f", t / 2^30 }') GiB); reference: \`$PREV\` repeated the same way"
    echo "- Each row: \`/usr/bin/time -v ./lmc -T<threads> -f ...\` (files on disk; freshly written, so partly in the page cache); every restore compared with cmp: all identical"
    echo "- bound = the issue's limit, 64 MiB + threads x 2 x chunk size (1 MiB chunks)"
    echo "- generic = default format detection (a concatenation is not safetensors); raw-bf16 = \`--format=raw --dtype=bf16\` on compression; raw-bf16-pipe = the same through pipes (\`cat FILE | lmc ... - > OUT\`)"
    echo "- python = the Python binding's \`lmc.compress_file\` / \`lmc.decompress_file\` (\`/usr/bin/python3\`, the reference given as a path; the interpreter's own ~14 MiB count in its RSS)"
    echo "- store = \`lmc store\` (doc/store.md): the reference added as a keyframe, the input as a delta against it (from the store's cache), the input restored (the latest snapshot: copied from the cache, then with the cache removed, decoded through the keyframe), everything verified; a store detects the format itself (generic here)"
    echo "- Max RSS counts touched pages of the mmap()ed reference (file-backed, reclaimable) as well as heap"
    echo
    echo "| variant | operation | threads | max RSS (MiB) | bound (MiB) | elapsed (s) | MB/s (of input) | user (s) | sys (s) | output bytes | ratio |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' -v n="$total" '{
        ratio = ($2 ~ /^compress/) ? sprintf("%.4f", $7 / n) : "-"
        printf "| %s | %s | %s | %.0f | %d | %.1f | %.0f | %s | %s | %s | %s |\n", $1, $2, $8, $3 / 1024, 64 + 2 * $8, $4, n / ($4 > 0 ? $4 : 1e-9) / 1e6, $5, $6, $7, ratio }' "$RES"
} > "$OUTDIR/mem_results.md"
cat "$OUTDIR/mem_results.md"
log "wrote $OUTDIR/mem_results.md"
