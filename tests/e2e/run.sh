#!/usr/bin/env bash
# Runs every test_*.sh of a folder (default: this one, tests/e2e), or the ones named after
# it; each runs in its own process and home. tests/adversarial uses it too. A runtime
# named in LAYERFS_RUNTIME is every Sandbox's that a test does not pin.
set -uo pipefail
shopt -s nullglob
here=$(cd "${1:-$(dirname "$0")}" && pwd)
suite=$(basename "$here")${LAYERFS_RUNTIME:+ ($LAYERFS_RUNTIME)}
tests=("$here"/test_*.sh)
if [ $# -gt 1 ]; then
        tests=()
        for name in "${@:2}"; do
                [ -f "$here/$name" ] || {
                        echo "run.sh: no test $name in $here" >&2
                        exit 2
                }
                tests+=("$here/$name")
        done
fi
passed=0
failed=0
failures=()
for t in "${tests[@]}"; do
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
