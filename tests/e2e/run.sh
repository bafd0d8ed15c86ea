#!/usr/bin/env bash
# Runs every test_*.sh of a folder (default: this one, tests/e2e); each runs in its own
# process and home. tests/adversarial uses it too.
set -uo pipefail
shopt -s nullglob
here=$(cd "${1:-$(dirname "$0")}" && pwd)
suite=$(basename "$here")
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
echo "$suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
