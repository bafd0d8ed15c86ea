#!/usr/bin/env bash
# Attack: a command of one Sandbox goes after another Sandbox of the same home (issue 15).
# Under the native runtime every Sandbox's commands are uid 501 on the host's whole view,
# so a command of Sandbox A read B's TMPDIR and the environment of B's processes
# (secrets), wrote into B's Workspace (which B then committed), killed and
# ptrace-attached B's processes. Under the namespaces runtime (the default of this test;
# LAYERFS_RUNTIME=native runs the same attacks against native, where they succeed) A sees
# neither B's files nor B's processes, and runs as other host ids than B's: each attack
# fails. The Stores are read by neither (projects/ is root's: docs/security.md).
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=${LAYERFS_RUNTIME:-namespaces}

mkdir -p "$WORK/src"
echo "b's own" >"$WORK/src/file.txt"
lfs project init p --from "$WORK/src" >/dev/null
lfs branch create b-branch >/dev/null
A=$(lfs sandbox create)
B=$(lfs sandbox create)
lfs workspace mount "$A" main >/dev/null
WS_B=$(lfs workspace mount "$B" b-branch)
a() { lfs workspace exec "$A" main -- "$@"; }
lfs workspace exec "$B" b-branch -- sh -c 'echo tmp-secret-of-b > $TMPDIR/secret' >/dev/null
B_PID=$(lfs process start "$B" b-branch -- env SECRET=env-secret-of-b sleep 1000)
grep -qz SECRET=env-secret-of-b "/proc/$B_PID/environ" || fail "B's process has not its secret"
ok
TMP_B=$LAYERFS_HOME/sandboxes/p-$B/tmp

# attack WHAT command...: the command, run in A, must fail; every one that succeeds is
# named at the end (so that one run against native shows them all).
SUCCEEDED=""
attack() {
        local what=$1
        shift
        if a "$@" >/dev/null 2>&1; then
                echo "[$LAYERFS_RUNTIME] attack succeeded: a command of sandbox $A could $what" >&2
                SUCCEEDED="$SUCCEEDED; $what"
        else
                ok
        fi
}

attack "read B's TMPDIR" cat "$TMP_B/secret"
attack "read the environment of B's process" sh -c "grep -z SECRET= /proc/$B_PID/environ"
attack "write into B's Workspace" sh -c "echo written-by-a > $WS_B/from-a.txt"
[ -n "$SUCCEEDED" ] || [ ! -e "$WS_B/from-a.txt" ] || fail "B's Workspace holds a file of A's"
attack "ptrace-attach B's process" python3 -c "
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
if libc.ptrace(PTRACE_ATTACH, $B_PID, None, None) != 0:
    sys.exit(1)
libc.ptrace(PTRACE_DETACH, $B_PID, None, None)"
attack "kill B's process" kill -9 "$B_PID"
attack "read the Store" cat "$LAYERFS_HOME/projects/p/store.db"
attack "list the home's Sandboxes" ls "$LAYERFS_HOME/sandboxes"
[ -z "$SUCCEEDED" ] || fail "[$LAYERFS_RUNTIME] attacks that succeeded:${SUCCEEDED#;}"
kill -0 "$B_PID" 2>/dev/null || fail "B's process was killed"
ok
# B's Workspace commits only B's own.
assert_eq "$(lfs workspace status "$B" b-branch)" "" "B's Workspace is unchanged"

lfs workspace unmount "$A" main >/dev/null
lfs sandbox close "$A" >/dev/null
lfs sandbox close "$B" --force >/dev/null
assert_nothing_left "after the attacks"
finish
