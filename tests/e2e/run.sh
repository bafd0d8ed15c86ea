#!/usr/bin/env bash
# Runs every end-to-end test; each runs in its own process and home.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
passed=0
failed=0
failures=()
for t in "$here"/test_*.sh; do
        name=$(basename "$t")
        echo "== $name"
        start=$(date +%s)
        if bash "$t"; then
                passed=$((passed + 1))
        else
                failed=$((failed + 1))
                failures+=("$name")
        fi
        echo "   ($(($(date +%s) - start)) s)"
done
[ "$failed" -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
