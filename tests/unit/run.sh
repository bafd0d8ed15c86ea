#!/usr/bin/env bash
# Runs every cmocka test program given and sums their results into one line. A program
# that hangs is stopped after UNIT_TIMEOUT seconds (600) and counts as failed, saying so.
set -uo pipefail
UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
passed=0
failed=0
for t in "$@"; do
        echo "== $(basename "$t")"
        out=$(timeout -k 10 "$UNIT_TIMEOUT" "$t" 2>&1)
        status=$?
        printf '%s\n' "$out"
        [ "$status" -eq 124 ] && echo "FAIL: $(basename "$t") still ran after $UNIT_TIMEOUT s: stopped"
        p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
        f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0}))
        # A program that crashed or failed without cmocka's summary still counts.
        [ "$status" -ne 0 ] && [ -z "$f" ] && failed=$((failed + 1))
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
