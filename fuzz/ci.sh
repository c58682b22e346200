#!/usr/bin/env bash
# fuzz/ci.sh [seconds] - CI fuzzing gate. Installs clang + the libFuzzer
# runtime (Debian 12: libclang-rt-14-dev) if missing, then runs fuzz/run.sh:
# every fuzz/fuzz_*.c target is built with libFuzzer + ASan + UBSan and run
# for `seconds` (default 60) each; crash inputs are copied to
# fuzz/regressions/<target>/ (replayed by the unit tests). Prints a table of
# execs and crashes per target and exits 1 if any target failed to build,
# crashed, or did not report its executions.
# Environment: CLANG, JOBS (passed to fuzz/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
SECS=${1:-60}
sh tools/deps.sh clang libclang-rt-14-dev || { echo "fuzz/ci.sh: could not install clang" >&2; exit 1; }

ntargets=$(ls fuzz/fuzz_*.c | wc -l)
log=build/fuzz/ci-summary.txt
mkdir -p build/fuzz
bash fuzz/run.sh "$SECS" | tee "$log"

echo
printf '%-12s %12s %8s %8s  %s\n' target execs exec/s crashes status
printf '%-12s %12s %8s %8s  %s\n' ------------ ------------ -------- -------- ------
fail=0 seen=0 total_execs=0 total_crashes=0
while read -r line; do
    t=${line%% *}
    case "$line" in
    *"BUILD FAILED"*)
        printf '%-12s %12s %8s %8s  %s\n' "${t%:}" - - - "BUILD FAILED"
        fail=1; seen=$((seen + 1)); continue ;;
    *" execs "*" crashes "*) ;;
    *) continue ;;
    esac
    seen=$((seen + 1))
    execs=$(echo "$line" | sed -n 's/.* execs \([0-9?]*\) .*/\1/p')
    crashes=$(echo "$line" | sed -n 's/.* crashes \([0-9]*\) .*/\1/p')
    rc=$(echo "$line" | sed -n 's/.*(rc \([0-9]*\),.*/\1/p')
    status=ok
    if [ "${crashes:-0}" != 0 ]; then status="CRASH -> fuzz/regressions/$t/"; fail=1
    elif [ "${rc:-1}" != 0 ]; then status="rc $rc (see build/fuzz/log-$t.txt)"; fail=1
    elif ! [ "$execs" -gt 0 ] 2>/dev/null; then status="no execs reported"; fail=1
    fi
    rate=-
    [ "$execs" -gt 0 ] 2>/dev/null && { rate=$((execs / SECS)); total_execs=$((total_execs + execs)); }
    total_crashes=$((total_crashes + ${crashes:-0}))
    printf '%-12s %12s %8s %8s  %s\n' "$t" "$execs" "$rate" "${crashes:-?}" "$status"
done <"$log"
printf '%-12s %12s %8s %8s  %s\n' total "$total_execs" "" "$total_crashes" "$seen/$ntargets targets, ${SECS} s each"
if [ "$seen" -ne "$ntargets" ]; then echo "fuzz/ci.sh: only $seen of $ntargets targets reported" >&2; fail=1; fi
exit $fail
