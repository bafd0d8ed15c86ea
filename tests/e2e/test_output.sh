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

# Into a pipe whose reader is gone: EPIPE, not SIGPIPE's end before the close.
for i in 1 2; do
        out=$(sh -c '"$0" sandbox create 2>"$1" | (exec 0<&-; sleep 0.2)' "$LAYERFS" "$WORK/pipe.err"; cat "$WORK/pipe.err")
        case "$out" in
        "Failed: cannot write the output to standard output: Broken pipe"*"was closed again") ok ;;
        *) fail "a create into a pipe with no reader said '$out'" ;;
        esac
done
assert_no_sandbox_left "after creates whose reader was gone"

# Other commands that make something say so when their report is lost.
expect_lost_output "Bad file descriptor; give it a file or pipe that takes it; branch 'b2' was created all the same" \
        sh -c '"$0" branch create b2 >&-' "$LAYERFS"
lfs branch list | grep -q '^[0-9a-f]* b2$' || fail "branch b2 was not created"
ok

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
# An exec's status is its command's even when its report is lost (--json), and it says so.
set +e
err=$(sh -c '"$0" --json workspace exec "$1" main -- sh -c "exit 5" >&-' "$LAYERFS" "$sb" 2>&1)
status=$?
set -e
assert_eq "$status" 5 "the status of an exec whose --json report was lost"
case "$err" in
*"the command ran and exited 5 all the same"*) ok ;;
*) fail "an exec whose report was lost said '$err'" ;;
esac
assert_eq "$(tree_manifest "$WORK/out2")" "$(tree_manifest "$WORK/tree")" "an export after a run with closed streams"
assert_eq "$(in_main "$sb" echo fine)" "fine" "the Sandbox after a command run with closed streams"
lfs sandbox close "$sb" >/dev/null
assert_no_sandbox_left "at the end"
finish
