#!/usr/bin/env bash
# Runs every test_*.sh of a folder (default: this one, tests/e2e), or the ones named after
# it; each runs in its own process and home. tests/adversarial uses it too. A runtime
# named in LAYERFS_RUNTIME is every Sandbox's that a test does not pin. A test that exits
# 77, or leaves a part out (tests/e2e/lib.sh skip, skip_part), is counted as skipped with
# its reasons; run as root, a skip that tests/allowed_skips does not list fails the run.
# TEST_JOBS=N runs up to N tests at once, each test's output printed whole when it ends; a
# test whose file has the line "# test-runner: alone (WHY)" (it looks at or changes
# something of the whole host's, such as its list of links) runs with no other.
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
jobs=${TEST_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
        echo "run.sh: TEST_JOBS='$jobs' is not a number of tests to run at once (1 or more)" >&2
        exit 2
}
results=$(mktemp -d "${TMPDIR:-/tmp}/layerfs-run.XXXXXX")
trap 'rm -rf "$results"' EXIT

# record NAME STATUS SECONDS: counts a finished test as passed, skipped or failed.
record() {
        local name=$1 status=$2 seconds=$3 skip_log=$results/$1.skips allowed reason
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
        echo "   ($seconds s)"
}

# With one job a test's output goes straight through; with more, to a file printed whole
# when the test ends, so that two tests' lines never mix.
declare -A running=() # pid -> test name
declare -A started=() # test name -> start time
start_test() {
        local t=$1 name
        name=$(basename "$t")
        : >"$results/$name.skips"
        started[$name]=$(date +%s)
        if [ "$jobs" -eq 1 ]; then
                echo "== $name"
                LAYERFS_SKIP_LOG=$results/$name.skips bash "$t"
                record "$name" $? $(($(date +%s) - started[$name]))
                return
        fi
        LAYERFS_SKIP_LOG=$results/$name.skips bash "$t" >"$results/$name.out" 2>&1 </dev/null &
        running[$!]=$name
}
# reap_one: waits for one running test, prints its output and counts it.
reap_one() {
        local pid status name
        wait -n -p pid "${!running[@]}"
        status=$?
        name=${running[$pid]}
        unset "running[$pid]"
        echo "== $name"
        cat "$results/$name.out"
        record "$name" "$status" $(($(date +%s) - started[$name]))
}
for t in "${tests[@]}"; do
        if grep -q '^# test-runner: alone' "$t"; then
                while [ "${#running[@]}" -gt 0 ]; do reap_one; done
                jobs_was=$jobs jobs=1
                start_test "$t"
                jobs=$jobs_was
                continue
        fi
        while [ "${#running[@]}" -ge "$jobs" ]; do reap_one; done
        start_test "$t"
done
while [ "${#running[@]}" -gt 0 ]; do reap_one; done
[ "${#skips[@]}" -eq 0 ] || printf 'skipped: %s\n' "${skips[@]}"
[ "$failed" -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "$suite: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
