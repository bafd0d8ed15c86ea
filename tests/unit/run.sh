#!/usr/bin/env bash
# Runs every cmocka test program given and sums their results into one line. A program
# that hangs is stopped after UNIT_TIMEOUT seconds (600) and counts as failed, saying so.
# cmocka's skipped tests are counted as skipped, never as passed; run as root, a skip that
# tests/allowed_skips does not list (as program:test) counts as failed.
set -uo pipefail
source "$(dirname "$0")/../skips.sh"
UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
passed=0
failed=0
skipped=0
skips=()
for t in "$@"; do
        program=$(basename "$t")
        echo "== $program"
        out=$(timeout -k 10 "$UNIT_TIMEOUT" "$t" 2>&1)
        status=$?
        printf '%s\n' "$out"
        [ "$status" -eq 124 ] && echo "FAIL: $program still ran after $UNIT_TIMEOUT s: stopped"
        p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
        f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0}))
        # A program that crashed or failed without cmocka's summary still counts.
        [ "$status" -ne 0 ] && [ -z "$f" ] && failed=$((failed + 1))
        # Each skipped test once: cmocka names it as it runs, and again in its summary.
        while read -r test; do
                [ -n "$test" ] || continue
                if skip_is_allowed "$program:$test" ""; then
                        skipped=$((skipped + 1))
                        skips+=("$program:$test")
                else
                        failed=$((failed + 1))
                        skips+=("$program:$test (run as root, and not in tests/allowed_skips)")
                fi
        done < <(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([^ ]*\)$/\1/p' | sort -u)
done
[ "${#skips[@]}" -eq 0 ] || printf 'skipped: %s\n' "${skips[@]}"
echo "unit: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
