#!/usr/bin/env bash
# The bash completion (packaging/bash-completion/layerfs): groups, methods and options
# as --help gives them, and live values (projects, branches, Sandbox numbers) from the
# CLI's --json output, with the --home and --project of the line being completed.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
# The completion runs `layerfs` as the line names it: the build's, first in PATH.
export PATH="$BUILD:$PATH"
# shellcheck source=/dev/null
source "$ROOT/packaging/bash-completion/layerfs"
grep -q '_layerfs layerfs$' <<<"$(complete -p layerfs)" || fail "no completion registered for layerfs"

# completes WORD... : what _layerfs offers for the last word of the line, sorted, one line.
completes() {
        COMP_WORDS=("$@")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMPREPLY=()
        _layerfs
        printf '%s\n' "${COMPREPLY[@]}" | sort | xargs
}

lfs project init web --from "$ROOT/docs" >/dev/null
lfs --project web branch create feature >/dev/null
lfs --project web branch create fix/typo >/dev/null
lfs project init api >/dev/null
other=$WORK/other
mkdir -m 755 "$other"
lfs --home "$other/home" project init elsewhere >/dev/null

assert_eq "$(completes layerfs "")" "branch process project runtime sandbox workspace" "the groups"
assert_eq "$(completes layerfs br)" "branch" "a group's prefix"
assert_eq "$(completes layerfs branch "")" "commit create delete diff export list log merge" "branch's methods"
assert_eq "$(completes layerfs project l)" "list list_sandboxes" "methods by prefix"
assert_eq "$(completes layerfs --json runtime "")" "reclaim status" "after a global option"
assert_eq "$(completes layerfs --)" "--help --home --json --project --version" "the global options"
assert_eq "$(completes layerfs branch log main --)" "--help --home --json --limit --project" "branch log's options"
assert_eq "$(completes layerfs workspace exec 1 main --)" "--cwd --env --help --home --json --project --timeout --tty" \
        "exec's options"
assert_eq "$(completes layerfs --project "")" "api web" "the home's projects"
assert_eq "$(completes layerfs --home "$other/home" --project "")" "elsewhere" "the projects of --home"
assert_eq "$(completes layerfs --project web branch delete "")" "feature fix/typo main" "branches"
assert_eq "$(completes layerfs --project web branch merge feature "")" "feature fix/typo main" "INTO"
assert_eq "$(completes layerfs --project web branch create new --from f)" "feature fix/typo" "--from of create"
assert_eq "$(completes layerfs --project web branch create "")" "" "a new branch's name"
assert_eq "$(completes layerfs --project web branch log --limit 3 "")" "feature fix/typo main" \
        "after an option's value"
assert_eq "$(completes layerfs sandbox create --platform "")" "docker firecracker lima linux mac podman qemu wsl" \
        "the platforms"
mkdir "$WORK/dirs" "$WORK/dirs/sub1" "$WORK/dirs/sub2"
assert_eq "$(completes layerfs project init x --from "$WORK/dirs/s")" "$WORK/dirs/sub1 $WORK/dirs/sub2" "directories"

# Sandbox numbers, from project list_sandboxes.
n1=$(lfs --project web sandbox create)
n2=$(lfs --project web sandbox create)
assert_eq "$(completes layerfs --project web sandbox close "")" "$n1 $n2" "the Sandbox numbers"
assert_eq "$(completes layerfs --project web workspace mount "$n1" "")" "feature fix/typo main" "mount's BRANCH"
assert_eq "$(completes layerfs workspace exec "$n1" main -- ls "")" "" "nothing after --"
lfs --project web sandbox close "$n1" >/dev/null
lfs --project web sandbox close "$n2" >/dev/null
finish
