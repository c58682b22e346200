#!/usr/bin/env bash
# tests/tsan.sh - the threaded tests under ThreadSanitizer. Expects lmc and
# build/tests/test_{stream,errors,regressions,pool} built with -fsanitize=thread
# (`make tsan` does both). Any data race, lock-order inversion or thread leak
# report stops the program with exit code 66, which fails the run.
set -u
cd "$(dirname "$0")/.." || exit 1
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 report_thread_leaks=1 ${TSAN_OPTIONS:-}"
fail=0
for t in build/tests/test_stream build/tests/test_errors build/tests/test_regressions build/tests/test_pool; do
    echo "== $t (TSan)"
    ./$t || { echo "tsan: $t failed (rc $?)"; fail=1; }
done
for t in tests/cli_test.sh tests/store_test.sh; do
    echo "== $t (TSan)"
    bash "$t" ./lmc || { echo "tsan: $t failed"; fail=1; }
done
exit $fail
