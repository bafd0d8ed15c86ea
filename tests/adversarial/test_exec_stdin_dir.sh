#!/usr/bin/env bash
# Attack: a command is handed a directory of the caller's as its stdin, and opens what lies
# beneath it (/proc/self/fd/0/..., openat), outside the Sandbox's view: the host's / under
# the namespaces runtime. The library passes the caller's stdin to the daemon as it is.
#  1. The caller's stdin closed: the CLI held the closed number with the first file it
#     opened (an O_PATH of the home's directory, then of /): the command got it as its
#     stdin. Now the CLI holds it with a path descriptor of /dev/null, and the library
#     passes /dev/null for a stdin that cannot be read: the command reads nothing and has
#     no directory.
#  2. A directory given as stdin (`< /`): the daemon refuses it InvalidInput, as it refuses
#     a terminal, before anything runs.
# Both fail on the builds before (the command saw a directory on its fd 0; `< /` ran).
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_PROJECT=p
lfs project init p >/dev/null
sb=$(main_sandbox)

# shellcheck disable=SC2016 # expanded by the command's shell
probe='if [ -d /proc/self/fd/0 ]; then echo "fd 0 is a directory: $(ls /proc/self/fd/0 | head -3 | tr "\n" " ")"; fi; cat; echo ran'
out=$(sh -c '"$0" workspace exec "$1" main -- sh -c "$2" <&-' "$LAYERFS" "$sb" "$probe" 2>&1) ||
        fail "exec with stdin closed failed: $out"
assert_eq "$out" "ran" "a command run with the caller's stdin closed"

expect_refusal InvalidInput "stdin passed is a directory" sh -c '"$0" workspace exec "$1" main -- true </' \
        "$LAYERFS" "$sb"
expect_refusal InvalidInput "stdin passed is a directory" sh -c '"$0" workspace exec "$1" main -- true <"$2"' \
        "$LAYERFS" "$sb" "$WORK"
# Nothing ran: no command's cgroup left, and the Sandbox still serves.
assert_eq "$(in_main "$sb" echo fine)" "fine" "the Sandbox after the refusals"
lfs sandbox close "$sb" >/dev/null
assert_no_sandbox_left "at the end"
finish
