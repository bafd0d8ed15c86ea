# Shared by the test runners (tests/e2e/run.sh, tests/unit/run.sh): a skip is counted as a
# skip, never as a pass, and a skip while running as root must be one that
# tests/allowed_skips lists with its reason; any other fails the run.
# shellcheck shell=bash

ALLOWED_SKIPS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/allowed_skips"

# skip_is_allowed TEST REASON: true unless running as root and no line of
# tests/allowed_skips names TEST with text that REASON contains.
skip_is_allowed() {
        local name=$1 reason=$2 test text
        [ "$(id -u)" = 0 ] || return 0
        while IFS=$'\t' read -r test text; do
                case "$test" in '' | '#'*) continue ;; esac
                [ "$test" = "$name" ] && [[ "$reason" == *"$text"* ]] && return 0
        done <"$ALLOWED_SKIPS"
        return 1
}
