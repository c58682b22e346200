#!/usr/bin/env bash
# fuzz/run.sh [seconds] - build every fuzz/fuzz_*.c target with libFuzzer +
# ASan + UBSan into build/fuzz/, run each for `seconds` (default 60) on a copy
# of its corpus (build/fuzz/corpus-<target>; the repository corpus stays
# small), collect crash inputs into fuzz/regressions/<target>/ and print one
# line per target: name, execs, crashes.
# Environment: CLANG (default clang), JOBS (targets run at once, default 1).
set -u
cd "$(dirname "$0")/.." || exit 1
SECS=${1:-60}
CLANG=${CLANG:-clang}
JOBS=${JOBS:-1}
OUT=build/fuzz
mkdir -p "$OUT"
INC="-Iinclude -Ilib/common -Ilib/encode -Ilib/decode -Ilib/container -Ilib"
LIBSRC=$(ls lib/*/*.c)

targets=()
for src in fuzz/fuzz_*.c; do
    t=$(basename "$src" .c); t=${t#fuzz_}
    echo "build $t" >&2
    if ! $CLANG -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
            $INC "$src" $LIBSRC -ljansson -lpthread -lm -o "$OUT/fuzz_$t" 2>"$OUT/build-$t.log"; then
        echo "$t: BUILD FAILED (see $OUT/build-$t.log)"
        continue
    fi
    targets+=("$t")
done

run_one() {
    local t=$1
    local corpus="$OUT/corpus-$t" art="$OUT/artifacts-$t/"
    rm -rf "$art"; mkdir -p "$corpus" "$art"
    [ -d "fuzz/corpus/$t" ] && cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
    "$OUT/fuzz_$t" -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=1024 -timeout=20 \
        -print_final_stats=1 -artifact_prefix="$art" "$corpus" >"$OUT/log-$t.txt" 2>&1
    local rc=$?
    local crashes=0
    for f in "$art"*; do
        [ -f "$f" ] || continue
        mkdir -p "fuzz/regressions/$t"
        cp "$f" "fuzz/regressions/$t/"
        crashes=$((crashes + 1))
    done
    local execs
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/log-$t.txt" | grep -o '[0-9]*$' | tail -1)
    [ -z "$execs" ] && execs=$(grep -o 'Done [0-9]* runs' "$OUT/log-$t.txt" | grep -o '[0-9]*' | tail -1)
    [ -z "$execs" ] && execs=$(grep -o '^#[0-9]*' "$OUT/log-$t.txt" | tr -d '#' | tail -1)
    printf '%-12s execs %-10s crashes %s (rc %s, log %s)\n' "$t" "${execs:-?}" "$crashes" "$rc" "$OUT/log-$t.txt"
}

running=0
for t in "${targets[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
