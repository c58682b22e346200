#!/usr/bin/env bash
# bench/run.sh - lmc against general-purpose and float-aware compressors, on the
# same inputs in the same run. `make bench` runs it (see bench/Makefile.inc).
#
#   kinds: model_bf16 (bf16 weights), model_fp32 (fp32 weights), optim (fp32 Adam moments)
#   modes: full  = the last step's file
#          delta = the last step vs the previous step (lmc gets -r PREV; peers
#                  that cannot take a reference get the XOR delta, tools/xor.py)
#
# Outputs: bench/results.md, bench/results.csv, bench/ratio_vs_speed.png
# Environment (all optional):
#   BENCH_TRAJ  trajectory folder (default bench/data/traj-3m, generated if absent)
#   BENCH_TMP   scratch folder on a tmpfs (default /dev/shm/lmc-bench.PID)
#   BENCH_OUT   where results go (default bench/)
#   BENCH_NO_DEPS=1  do not call tools/deps.sh
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CMDLINE="bash bench/run.sh${*:+ $*}"
T_START=$(date +%s)
DATE_START=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

TRAJ=${BENCH_TRAJ:-bench/data/traj-3m}
OUTDIR=${BENCH_OUT:-bench}
TMP=${BENCH_TMP:-/dev/shm/lmc-bench.$$}
PY=/usr/bin/python3
KINDS="model_bf16 model_fp32 optim"

log() { printf '[%4ds] %s\n' "$(( $(date +%s) - T_START ))" "$*" >&2; }

# ---- 0. tools ------------------------------------------------------------
if [ -z "${BENCH_NO_DEPS:-}" ]; then
    sh tools/deps.sh zstd lz4 pigz bzip2 pbzip2 xz-utils libblosc-dev libzstd-dev gnuplot-nox time
fi
[ -x ./lmc ] || make lmc
[ -f liblmc.a ] || make liblmc.a
# Others may rebuild ./lmc while this runs: every lmc row uses a copy taken now,
# and floor links a copy of liblmc.a taken at the same moment.
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
cp ./lmc "$TMP/lmc"; cp liblmc.a "$TMP/liblmc.a"
LMC="$TMP/lmc"
LMC_SUM=$(sha256sum ./lmc | cut -c1-16)
LMC_VER=$("$LMC" -V 2>&1 | head -n 1)
GIT_AT_START="$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- lib programs include 2>/dev/null || echo ' + uncommitted changes in lib/programs/include')"
mkdir -p build/bench
gcc -O2 -Wall -Wextra bench/bgzstd.c -lzstd -o build/bench/bgzstd
gcc -O2 -Wall -Wextra bench/blosc_bench.c -lblosc -o build/bench/blosc_bench
gcc -O2 -Iinclude -Ilib/common -Ilib/encode -Ilib/decode -Ilib/container -Ilib \
    bench/floor.c "$TMP/liblmc.a" -ljansson -lpthread -lm -o build/floor
gcc -O2 -Iinclude -Ilib/common -Ilib/encode -Ilib/decode -Ilib/container -Ilib \
    bench/refctx_stages.c "$TMP/liblmc.a" -ljansson -lpthread -lm -o build/bench/refctx_stages

# ---- 1. trajectory ---------------------------------------------------------
GEN_ARGS="--d-model 256 --layers 4 --heads 8 --seq-len 128 --batch 8 --steps 600 --save-from 200 --every 100 --threads 1"
complete() {  # a folder with at least two step-* folders holding all three files
    local n=0 s
    for s in "$1"/step-*; do
        [ -f "$s/model_bf16.safetensors" ] && [ -f "$s/model_fp32.safetensors" ] && [ -f "$s/optim.safetensors" ] && n=$((n + 1))
    done
    [ "$n" -ge 2 ]
}
generating() { pgrep -f "train_tiny_gpt.py --out $TRAJ( |$)" >/dev/null 2>&1; }
if generating; then
    log "a trajectory is being generated into $TRAJ; waiting for it to finish"
    while generating; do sleep 10; done
fi
if ! complete "$TRAJ"; then
    [ -z "${BENCH_TRAJ:-}" ] || { echo "bench: $TRAJ is not a usable trajectory" >&2; exit 1; }
    log "generating $TRAJ (about 6-8 minutes)"
    rm -rf "$TRAJ.tmp"
    # shellcheck disable=SC2086
    $PY tools/train_tiny_gpt.py --out "$TRAJ.tmp" $GEN_ARGS
    rm -rf "$TRAJ"; mv "$TRAJ.tmp" "$TRAJ"
fi
STEPS=$(for s in "$TRAJ"/step-*; do
            [ -f "$s/model_bf16.safetensors" ] && [ -f "$s/model_fp32.safetensors" ] && [ -f "$s/optim.safetensors" ] && echo "$s"
        done | sort)
LAST=$(echo "$STEPS" | tail -n 1)
PREV=$(echo "$STEPS" | tail -n 2 | head -n 1)
log "inputs: $LAST (new), $PREV (reference)"

# ---- 2. results file ----------------------------------------------------------
CSV="$TMP/results.csv"
echo "kind,mode,tool,threads,in_bytes,out_bytes,ratio,compress_MBps,decompress_MBps,reps_c,reps_d,method" > "$CSV"

# ---- 3. measurement helpers ----------------------------------------------------
# The CLI peers are timed as whole processes reading and writing files in $TMP
# (a tmpfs): wall clock from `date +%s.%N`. One run first; if it took < 1 s,
# 4 more (median of 5); if < 5 s, 2 more (median of 3); else that one run.
# The same rule holds for every tool. Every decompression is checked with cmp.
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
time_reps() {  # time_reps CMD [VERIFY_CMD] -> prints "MEDIAN_SECONDS REPS"
    local cmd=$1 verify=${2:-} t0 t1 first k=1 reps=1 times
    t0=$(now); eval "$cmd"; t1=$(now)
    first=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
    [ -z "$verify" ] || eval "$verify"
    times=$first
    reps=$(awk -v t="$first" 'BEGIN { print (t < 1) ? 5 : (t < 5) ? 3 : 1 }')
    while [ "$k" -lt "$reps" ]; do
        t0=$(now); eval "$cmd"; t1=$(now)
        times="$times $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')"
        [ -z "$verify" ] || eval "$verify"
        k=$((k + 1))
    done
    echo "$(echo "$times" | tr ' ' '\n' | median) $reps"
}
fail() { echo "bench: $*" >&2; exit 1; }

row() {  # row KIND MODE TOOL THREADS IN OUT CMBPS DMBPS REPS_C REPS_D METHOD
    local ratio c=$7 d=$8
    ratio=$(awk -v o="$6" -v i="$5" 'BEGIN { printf "%.4f", o / i }')
    [ -z "$c" ] || c=$(awk -v x="$c" 'BEGIN { printf "%.1f", x }')
    [ -z "$d" ] || d=$(awk -v x="$d" 'BEGIN { printf "%.1f", x }')
    echo "$1,$2,$3,$4,$5,$6,$ratio,$c,$d,$9,${10},${11}" >> "$CSV"
    printf '  %-22s T%-2s ratio %s  c %8s MB/s  d %8s MB/s\n' "$3" "$4" "$ratio" "$7" "$8" >&2
}

cli_peer() {  # cli_peer KIND MODE TOOL THREADS INPUT "COMPRESS (IN->Z)" "DECOMPRESS (Z->D)"
    local kind=$1 mode=$2 tool=$3 th=$4 in=$5 ccmd=$6 dcmd=$7 n z tc td rc rd
    IN=$in; Z="$TMP/z"; D="$TMP/d"
    rm -f "$Z" "$D"
    n=$(stat -c %s "$in")
    read -r tc rc < <(time_reps "$ccmd")
    [ -n "$tc" ] || fail "$tool T$th: compression failed on $IN"
    z=$(stat -c %s "$Z")
    read -r td rd < <(time_reps "$dcmd" 'cmp -s "$IN" "$D" || fail "$tool T$th: round trip FAILED on $IN"')
    [ -n "$td" ] || fail "$tool T$th: decompression failed on $IN"
    row "$kind" "$mode" "$tool" "$th" "$n" "$z" \
        "$(awk -v n="$n" -v t="$tc" 'BEGIN { printf "%.1f", n / t / 1e6 }')" \
        "$(awk -v n="$n" -v t="$td" 'BEGIN { printf "%.1f", n / t / 1e6 }')" \
        "$rc" "$rd" "process, tmpfs files"
    rm -f "$Z" "$D"
}

lmc_bench() {  # lmc_bench KIND MODE NEW [REF] ; in-memory `lmc -b $LMC_FLAGS -T1,2`, rows named $LMC_TOOL
    # one run of both thread counts, alternated, so that they share the box's
    # fast and slow moments; its last line is the two-thread speed-up
    local kind=$1 mode=$2 new=$3 ref=${4:-} th out line n z c d
    if [ -n "$ref" ]; then out=$("$LMC" -b $LMC_FLAGS "$new" -r "$ref" -T1,2 -i $LMC_ITERS) || fail "lmc -b failed on $new -r $ref"
    else out=$("$LMC" -b $LMC_FLAGS "$new" -T1,2 -i $LMC_ITERS) || fail "lmc -b failed on $new"; fi
    echo "$out" | sed 's/^/    /' >&2
    for th in 1 2; do
        line=$(echo "$out" | grep -F "(median of $LMC_ITERS, $th threads)") || fail "lmc -b printed no $th-thread line for $new"
        n=$(echo "$line" | sed -E 's/.*: ([0-9]+) -> ([0-9]+) .*/\1/')
        z=$(echo "$line" | sed -E 's/.*: ([0-9]+) -> ([0-9]+) .*/\2/')
        c=$(echo "$line" | sed -E 's/.*, compress ([0-9.]+) MB\/s.*/\1/')
        d=$(echo "$line" | sed -E 's/.*decompress ([0-9.]+) MB\/s.*/\1/')
        row "$kind" "$mode" "$LMC_TOOL" "$th" "$n" "$z" "$c" "$d" $LMC_ITERS $LMC_ITERS "in memory (lmc -b $LMC_FLAGS -T1,2 -i $LMC_ITERS)"
    done
    line=$(echo "$out" | grep -F "2 threads against 1:") || fail "lmc -b printed no speed-up line for $new"
    SCALING+=("| $kind | $mode | $LMC_TOOL | $(echo "$line" | sed -E 's/.*compress ([0-9.]+x), decompress ([0-9.]+x).*/\1 | \2/') |")
}

# One thread pinned to each of the first two CPUs in turn (taskset): lmc,
# zstd -1 and byte-grouped zstd -1 in memory on the same CPU. On the 2-vCPU
# AMD EPYC VM the two vCPUs differed, and which was the slow one changed
# within the hour: on 2026-12-05 at 10:20 UTC vCPU 1 read memory at 15 GB/s
# against vCPU 0's 28 and decoded a bf16 delta 25-35 % slower (zstd -1
# within 2 % on both); at 10:35 vCPU 1 read at 39 GB/s against 29 and was
# the faster. An unpinned one-thread run lands on either, which moved lmc's
# one-thread speed, and its ratio to the peers, by a third from run to run.
# Rows of markdown in PINNED.
pinned_rows() {  # pinned_rows KIND MODE NEW PEER_IN W [REF]
    local kind=$1 mode=$2 new=$3 peer_in=$4 w=$5 ref=${6:-} cpu out lc ld zc zd gc gd
    command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ] || return 0
    for cpu in 0 1; do
        if [ -n "$ref" ]; then out=$(taskset -c $cpu "$LMC" -b "$new" -r "$ref" -T1 -i $LMC_ITERS) || fail "pinned lmc -b failed on $new"
        else out=$(taskset -c $cpu "$LMC" -b "$new" -T1 -i $LMC_ITERS) || fail "pinned lmc -b failed on $new"; fi
        lc=$(echo "$out" | sed -nE 's/.*, compress ([0-9.]+) MB\/s.*/\1/p')
        ld=$(echo "$out" | sed -nE 's/.*decompress ([0-9.]+) MB\/s.*/\1/p')
        read -r _ _ zc zd < <(taskset -c $cpu build/bench/bgzstd "$peer_in" 1 1 1 5) || fail "pinned zstd-1 failed on $peer_in"
        read -r _ _ gc gd < <(taskset -c $cpu build/bench/bgzstd "$peer_in" "$w" 1 1 5) || fail "pinned bg zstd-1 failed on $peer_in"
        printf '  pinned to CPU %s: lmc c %s d %s, zstd-1 c %s d %s, bg zstd-1 c %s d %s\n' "$cpu" "$lc" "$ld" "$zc" "$zd" "$gc" "$gd" >&2
        PINNED+=("$(awk -v k="$kind" -v m="$mode" -v cpu="$cpu" -v lc="$lc" -v ld="$ld" -v zc="$zc" -v zd="$zd" -v gc="$gc" -v gd="$gd" 'BEGIN {
            printf "| %s | %s | %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2fx / %.2fx | %.2fx / %.2fx |", k, m, cpu, lc, ld, zc, zd, gc, gd, lc / zc, ld / zd, lc / gc, ld / gd }')")
    done
}

c_peer() {  # c_peer KIND MODE TOOL THREADS BIN ARGS... ; prints "IN OUT C D"
    local kind=$1 mode=$2 tool=$3 th=$4 out rc=0
    shift 4
    out=$("$@") || rc=$?
    if [ "$rc" -eq 2 ]; then log "$tool: $th threads not supported by this libzstd; row skipped"; return 0; fi
    [ "$rc" -eq 0 ] || fail "$tool T$th failed ($*)"
    set -- $out
    row "$kind" "$mode" "$tool" "$th" "$1" "$2" "$3" "$4" 5 5 "in memory, 1 warm-up + median of 5"
}

# ---- 4. run ----------------------------------------------------------------
declare -A INFO STAGES
SCALING=()
PINNED=()
LMC_ITERS=9   # lmc -b iterations (medians of 9; the two thread counts alternate)
# An untimed lmc -b first: in the runs of 2026-12-05 the first rows measured
# (the bf16 keyframe's) were the only ones whose two-thread speed-ups fell to
# 0.93-1.39x, in both runs, while a run between them gave 1.86-2.07x.
log "warm-up (lmc -b, not recorded)"
"$LMC" -b "$LAST/$(echo $KINDS | cut -d' ' -f1).safetensors" -T1,2 -i 5 > /dev/null || fail "lmc -b warm-up failed"
for kind in $KINDS; do
    new="$TMP/$kind.new"; old="$TMP/$kind.old"; xor="$TMP/$kind.xor"
    cp "$LAST/$kind.safetensors" "$new"; cp "$PREV/$kind.safetensors" "$old"
    $PY tools/xor.py "$new" "$old" "$xor"
    w=4; [ "$kind" = model_bf16 ] && w=2
    INFO[$kind]="$(stat -c %s "$new")"
    for mode in full delta; do
        if [ "$mode" = full ]; then peer_in=$new; ref=""; else peer_in=$xor; ref=$old; fi
        log "$kind / $mode ($(stat -c %s "$new") bytes)"
        # lmc, in memory, then once through the CLI with a round-trip check (-T2)
        LMC_FLAGS="" LMC_TOOL="lmc" lmc_bench "$kind" "$mode" "$new" $ref
        pinned_rows "$kind" "$mode" "$new" "$peer_in" "$w" $ref
        if [ -n "$ref" ]; then
            # the paper's LMC coding of deltas (XOR + byte groups), the baseline REFCTX must beat
            LMC_FLAGS="--no-refctx" LMC_TOOL="lmc --no-refctx" lmc_bench "$kind" "$mode" "$new" $ref
            # REFCTX coder alone, per stage (no framing, checksums or threads)
            st=$(build/bench/refctx_stages "$new" "$ref" 7) || fail "refctx_stages failed on $new"
            echo "$st" | sed 's/^/    /' >&2
            STAGES[$kind]=$(echo "$st" | tail -n +2 | tr -s ' ' | tr '\n' ';' | sed 's/;$//')
        fi
        if [ -n "$ref" ]; then
            cli_peer "$kind" "$mode" "lmc (CLI)" 1 "$new" '"$LMC" -q -f -T1 -r "$old" "$IN" -o "$Z"' '"$LMC" -q -f -d -T1 -r "$old" "$Z" -o "$D"'
            cli_peer "$kind" "$mode" "lmc (CLI)" 2 "$new" '"$LMC" -q -f -T2 -r "$old" "$IN" -o "$Z"' '"$LMC" -q -f -d -T2 -r "$old" "$Z" -o "$D"'
        else
            cli_peer "$kind" "$mode" "lmc (CLI)" 1 "$new" '"$LMC" -q -f -T1 "$IN" -o "$Z"' '"$LMC" -q -f -d -T1 "$Z" -o "$D"'
            cli_peer "$kind" "$mode" "lmc (CLI)" 2 "$new" '"$LMC" -q -f -T2 "$IN" -o "$Z"' '"$LMC" -q -f -d -T2 "$Z" -o "$D"'
        fi
        # order-0 entropy floor of lmc's byte grouping (reference row, no speed)
        fl=$(build/floor "$new" $ref) || fail "floor failed on $new"
        echo "    $fl" >&2
        fb=$(echo "$fl" | sed -E 's/.* bytes, floor ([0-9]+) .*/\1/')
        row "$kind" "$mode" "order-0 floor" - "$(stat -c %s "$new")" "$fb" "" "" 0 0 "bench/floor.c: sum of per-64KiB-block order-0 entropy of lmc's byte groups"
        for th in 1 2; do c_peer "$kind" "$mode" "byte-grouped+zstd-1" "$th" build/bench/bgzstd "$peer_in" "$w" "$th" 1 5; done
        # the strongest byte-grouped zstd (ratio peer; about 2 MB/s, so one thread and one timed run)
        c_peer "$kind" "$mode" "byte-grouped+zstd-19" 1 build/bench/bgzstd "$peer_in" "$w" 1 19 1
        # zstd -1 on the whole file (no grouping) in memory, with libzstd: the
        # `zstd -1` CLI rows' coder without process start and file I/O, which
        # on some VMs cost more than the coding of these files
        for th in 1 2; do c_peer "$kind" "$mode" "zstd-1 (in memory)" "$th" build/bench/bgzstd "$peer_in" 1 "$th" 1 5; done
        for lv in 1 5; do for th in 1 2; do
            c_peer "$kind" "$mode" "blosc zstd-$lv shuffle" "$th" build/bench/blosc_bench "$peer_in" "$w" "$th" "$lv" 5 zstd
        done; done
        for lv in 1 3 19; do for th in 1 2; do
            cli_peer "$kind" "$mode" "zstd -$lv" "$th" "$peer_in" "zstd -q -$lv -T$th -c \"\$IN\" > \"\$Z\"" 'zstd -q -d -c "$Z" > "$D"'
        done; done
        cli_peer "$kind" "$mode" "lz4 -1" 1 "$peer_in" 'lz4 -q -1 -c "$IN" > "$Z"' 'lz4 -q -d -c "$Z" > "$D"'
        for th in 1 2; do
            cli_peer "$kind" "$mode" "pigz -6" "$th" "$peer_in" "pigz -6 -p$th -c \"\$IN\" > \"\$Z\"" "pigz -d -p$th -c \"\$Z\" > \"\$D\""
        done
        cli_peer "$kind" "$mode" "bzip2 -9" 1 "$peer_in" 'bzip2 -9 -c "$IN" > "$Z"' 'bzip2 -d -c "$Z" > "$D"'
        cli_peer "$kind" "$mode" "pbzip2 -9" 2 "$peer_in" 'pbzip2 -9 -p2 -c "$IN" > "$Z"' 'pbzip2 -d -p2 -c "$Z" > "$D"'
        for th in 1 2; do
            cli_peer "$kind" "$mode" "xz -6" "$th" "$peer_in" "xz -6 -T$th -c \"\$IN\" > \"\$Z\"" "xz -d -T$th -c \"\$Z\" > \"\$D\""
        done
    done
    rm -f "$new" "$old" "$xor"
done
T_END=$(date +%s)
RUNTIME=$((T_END - T_START))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
log "measurements done in ${RUNTIME}s; writing results"

# ---- 5. results ----------------------------------------------------------------
mkdir -p "$OUTDIR"
cp "$CSV" "$OUTDIR/results.csv"
ver() { "$@" 2>&1 | head -n 1 | sed -E 's/^\*+ //; s/, by .*//; s/ \*+$//' | tr -s ' ' | cut -c1-90; }
{
    echo "# lmc benchmark"
    echo
    echo "- Date: $DATE_START (measurements took ${RUNTIME} s)"
    echo "- Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)"
    echo "- Load average (1/5/15 min): $LOAD_START at start, $LOAD_END at end (shared, noisy box: speeds are indicative)"
    echo "- lmc: $LMC_VER, commit $GIT_AT_START at start; binary sha256 $LMC_SUM... (a copy taken at start served every lmc row$(cmp -s ./lmc "$LMC" || echo '; ./lmc was rebuilt by someone else during the run'))"
    echo "- Peers: $(ver zstd -V); $(ver lz4 -V); $(ver pigz -V); bzip2 $(dpkg-query -W -f='${Version}' bzip2); pbzip2 $(dpkg-query -W -f='${Version}' pbzip2); $(ver xz -V); c-blosc $(dpkg-query -W -f='${Version}' libblosc1); libzstd $(dpkg-query -W -f='${Version}' libzstd1)"
    echo "- Command: \`$CMDLINE\` (from the repository root; \`make bench\` runs the same)"
    echo "- Trajectory: \`$TRAJ\` ($(ls -d "$TRAJ"/step-* | wc -l) saves); new = \`$LAST\`, reference = \`$PREV\`"
    echo
    echo "| input | bytes |"
    echo "|---|---:|"
    for kind in $KINDS; do
        echo "| \`$LAST/$kind.safetensors\` | $(stat -c %s "$LAST/$kind.safetensors") |"
        echo "| \`$PREV/$kind.safetensors\` (reference) | $(stat -c %s "$PREV/$kind.safetensors") |"
    done
    echo
    echo "Method. *full* = the new file alone; *delta* = the new file given the reference:"
    echo "lmc takes \`-r REF\`, every other tool compresses the XOR delta (\`tools/xor.py NEW REF\`, same size)."
    echo "ratio = compressed bytes / original bytes (lower is better); MB/s = original bytes / median seconds / 1e6, both directions."
    echo "\`lmc\` rows: \`./lmc -b FILE [-r REF] -T1,2 -i $LMC_ITERS\` (in memory, median of $LMC_ITERS, after one untimed \`lmc -b\` of the first file; each iteration compresses with 1 then 2 threads, then decompresses with 1 then 2,"
    echo "so both counts share the box's fast and slow moments; lmc checks the round trip and that both counts give the same bytes)."
    echo "\`lmc (CLI)\` rows and all command-line peers: whole process timed with \`date +%s.%N\`, input and output files on tmpfs (/dev/shm),"
    echo "so process start and file I/O are included; 5 runs if the first took < 1 s, 3 if < 5 s, else 1; median; every decompression checked with cmp."
    echo "blosc and byte-grouped+zstd rows: small C programs (bench/blosc_bench.c, bench/bgzstd.c), in memory, 1 warm-up + median of 5, round trip checked."
    echo "zstd-1 (in memory): bench/bgzstd.c with one stream (no grouping), the whole file \`ZSTD_compress2\` level 1, as byte-grouped+zstd-1 otherwise."
    echo "blosc: c-blosc 1 \`blosc_compress_ctx\`, typesize = dtype width (2 bf16, 4 fp32), BLOSC_SHUFFLE, compressor zstd, automatic blocksize, whole file as one buffer."
    echo "byte-grouped+zstd-1 (and -19): whole file (header included) split into 2 (bf16) or 4 (fp32) byte streams, each \`ZSTD_compress2\` level 1 (19: one thread, one timed run after the warm-up);"
    echo "T2 = \`ZSTD_c_nbWorkers=2\` for compression; zstd decompression is single-threaded, so its T2 decompression is 1 thread."
    echo "zstd \`-T2\` at level 19 and \`xz -T2\` only split input into jobs/blocks larger than some of these files; \`lz4\` 1.9.4 and \`bzip2\` have no threads."
    echo "order-0 floor: \`bench/floor.c\` (entropy of lmc's byte groups per 64 KiB block, no RLE/framing) - a reference, not a tool."
    echo "\`lmc --no-refctx\` rows: the same with the paper's LMC coding of deltas (XOR, byte groups, per-block entropy codes), no REFCTX blocks."
    echo
    echo "## Deltas: lmc against the best other coder"
    echo
    echo "Best of every other row of the same delta (\`lmc --no-refctx\`, byte-grouped zstd, blosc, zstd -1/-3/-19, lz4, pigz, bzip2 -9, xz -6); lmc and lmc --no-refctx at 1 thread."
    echo "ZipNN is not in Debian and cannot be installed here (no PyPI): not measured."
    echo
    echo "| input | lmc ratio | lmc --no-refctx ratio | best other (incl. --no-refctx) | its ratio | lmc smaller by | best peer (not lmc) | its ratio | lmc smaller by |"
    echo "|---|---:|---:|---|---:|---:|---|---:|---:|"
    for kind in $KINDS; do
        awk -F, -v k="$kind" 'NR > 1 && $1 == k && $2 == "delta" {
            if ($3 == "lmc" && $4 == 1) l = $7
            if ($3 == "lmc --no-refctx" && $4 == 1) p = $7
            if ($3 != "lmc" && $3 != "lmc (CLI)" && $3 != "order-0 floor" && (b == "" || $7 + 0 < b + 0)) { b = $7; bt = $3 }
            if ($3 !~ /^lmc/ && $3 != "order-0 floor" && (e == "" || $7 + 0 < e + 0)) { e = $7; et = $3 }
        } END { printf "| %s delta | %s | %s | %s | %s | %.1f %% | %s | %s | %.1f %% |\n", k, l, p, bt, b, 100 * (1 - l / b), et, e, 100 * (1 - l / e) }' "$CSV"
    done
    echo
    echo "## lmc: two threads against one (the same \`lmc -b -T1,2\` runs as the rows below: ratio of medians of alternated runs)"
    echo
    echo "| input | mode | tool | compress | decompress |"
    echo "|---|---|---|---:|---:|"
    for l in "${SCALING[@]}"; do echo "$l"; done
    echo
    if [ ${#PINNED[@]} -gt 0 ]; then
        echo "## One thread pinned to each CPU (taskset -c 0, then 1)"
        echo
        echo "\`taskset -c CPU ./lmc -b FILE [-r REF] -T1 -i $LMC_ITERS\` and, on the same CPU just after, zstd -1 and byte-grouped zstd -1 in memory (bench/bgzstd.c, median of 5)."
        echo "Unpinned, a one-thread run lands on either CPU; on the VMs this was written on the two differed (see bench/run.sh, pinned_rows). MB/s compress / decompress."
        echo
        echo "| input | mode | CPU | lmc | zstd-1 in memory | byte-grouped zstd-1 | lmc / zstd-1 | lmc / byte-grouped zstd-1 |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|"
        for l in "${PINNED[@]}"; do echo "$l"; done
        echo
    fi
    echo "## REFCTX coder stages (bench/refctx_stages.c: float tensors only, one thread, in memory, median of 7)"
    echo
    for kind in $KINDS; do echo "- $kind delta: ${STAGES[$kind]}"; done
    echo
    for kind in $KINDS; do for mode in full delta; do
        echo "## $kind, $mode ($( [ "$mode" = full ] && echo "$(basename "$LAST")" || echo "$(basename "$LAST") vs $(basename "$PREV")"), $(stat -c %s "$LAST/$kind.safetensors") bytes)"
        echo
        echo "| tool | threads | ratio | compress MB/s | decompress MB/s | compressed bytes |"
        echo "|---|---:|---:|---:|---:|---:|"
        awk -F, -v k="$kind" -v m="$mode" 'NR > 1 && $1 == k && $2 == m {
            printf "| %s | %s | %s | %s | %s | %s |\n", $3, $4, $7, ($8 == "" ? "-" : $8), ($9 == "" ? "-" : $9), $6 }' "$CSV"
        echo
    done; done
} > "$OUTDIR/results.md"

# ---- 6. plot ---------------------------------------------------------------
bash bench/plot.sh "$OUTDIR/results.csv" "$OUTDIR/ratio_vs_speed.png" "$(basename "$LAST"), $(nproc) cores" || log "plot failed"
log "wrote $OUTDIR/results.md, $OUTDIR/results.csv, $OUTDIR/ratio_vs_speed.png (total $(( $(date +%s) - T_START )) s)"
