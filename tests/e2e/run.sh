#!/usr/bin/env bash
# Runs every test_*.sh of a folder (default: this one, tests/e2e), or the ones named after
# it; each runs in its own process and home. tests/adversarial uses it too. A runtime
# named in LAYERFS_RUNTIME is every Sandbox's that a test does not pin. A test that exits
# 77, or leaves a part out (tests/e2e/lib.sh skip, skip_part), is counted as skipped with
# its reasons; run as root, a skip that tests/allowed_skips does not list fails the run.
set -uo pipefail
shopt -s nullglob
source "$(dirname "$0")/../skips.sh"
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
skipped=0
failures=()
skips=()
skip_log=$(mktemp "${TMPDIR:-/tmp}/layerfs-skips.XXXXXX")
trap 'rm -f "$skip_log"' EXIT
for t in "${tests[@]}"; do
        name=$(basename "$t")
        echo "== $name"
        start=$(date +%s)
        : >"$skip_log"
        LAYERFS_SKIP_LOG=$skip_log bash "$t"
        status=$?
        if [ "$status" -eq 0 ] && [ ! -s "$skip_log" ]; then
                passed=$((passed + 1))
        elif [ "$status" -eq 0 ] || [ "$status" -eq 77 ]; then
                [ -s "$skip_log" ] || printf '%s\t%s\n' "$name" "(exited 77 and gave no reason)" >"$skip_log"
                allowed=yes
                while IFS=$'\t' read -r _ reason; do
                        if skip_is_allowed "$name" "$reason"; then
                                skips+=("$name: $reason")
                        else
                                allowed=no
                                skips+=("$name: $reason (run as root, and not in tests/allowed_skips)")
                        fi
                done <"$skip_log"
                if [ "$allowed" = yes ]; then
                        skipped=$((skipped + 1))
                else
                        failed=$((failed + 1))
                        failures+=("$name (skipped as root: this machine can run it)")
                fi
        else
                failed=$((failed + 1))
                failures+=("$name")
        fi
        echo "   ($(($(date +%s) - start)) s)"
done
[ "${#skips[@]}" -eq 0 ] || printf 'skipped: %s\n' "${skips[@]}"
[ "$failed" -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "$suite: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
