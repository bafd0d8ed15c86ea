#!/usr/bin/env bash
# The CLI's answer is its output: one that cannot be written (a full disk, a closed
# stdout) is a failure (exit 125, "Failed: cannot write the output..."), never a success
# with nothing printed; a Sandbox whose number could not be written is closed again, so
# nothing of it is left; a closed standard stream never lends its number to a file the
# CLI opens. Each of the exit checks fails on the build before (exit 0, output lost).
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null
export LAYERFS_PROJECT=p

# expect_lost_output TEXT command...: exit 125, and stderr names the output and TEXT.
expect_lost_output() {
        local text=$1
        shift
        expect_refusal Failed "cannot write the output to standard output: $text" "$@"
}

expect_lost_output "No space left on device" sh -c '"$0" --version >/dev/full' "$LAYERFS"
expect_lost_output "No space left on device" sh -c '"$0" project list >/dev/full' "$LAYERFS"
expect_lost_output "No space left on device" sh -c '"$0" --json branch list >/dev/full' "$LAYERFS"
expect_lost_output "Bad file descriptor" sh -c '"$0" branch list >&-' "$LAYERFS"

# A create whose number is lost closes its Sandbox again.
out=$(sh -c '"$0" sandbox create >/dev/full' "$LAYERFS" 2>&1) && fail "a create into /dev/full succeeded: $out"
case "$out" in
"Failed: cannot write the output to standard output: No space left on device"*"was closed again") ok ;;
*) fail "a create into /dev/full said '$out'" ;;
esac
assert_no_sandbox_left "after a create whose number could not be written"
expect_lost_output "Bad file descriptor" sh -c '"$0" sandbox create >&-' "$LAYERFS"
assert_no_sandbox_left "after a create with stdout closed"

# What was asked is still done when only its report is lost: the export is whole.
make_sample_tree "$WORK/tree"
lfs project init q --from "$WORK/tree" >/dev/null
expect_lost_output "Bad file descriptor" sh -c '"$0" --project q branch export main "$1" >&-' "$LAYERFS" \
        "$WORK/out"
assert_eq "$(tree_manifest "$WORK/out")" "$(tree_manifest "$WORK/tree")" "an export with stdout closed"

# With stdin, stdout and stderr closed, a command's streams are not files the CLI opened:
# it reads nothing and its output goes nowhere (the files the CLI writes stay whole).
sb=$(main_sandbox)
sh -c '"$0" workspace exec "$1" main -- sh -c "cat; echo out; echo err >&2" <&- >&- 2>&-' "$LAYERFS" "$sb" ||
        true
lfs --project q branch export main "$WORK/out2" >/dev/null
assert_eq "$(tree_manifest "$WORK/out2")" "$(tree_manifest "$WORK/tree")" "an export after a run with closed streams"
assert_eq "$(in_main "$sb" echo fine)" "fine" "the Sandbox after a command run with closed streams"
lfs sandbox close "$sb" >/dev/null
assert_no_sandbox_left "at the end"
finish
