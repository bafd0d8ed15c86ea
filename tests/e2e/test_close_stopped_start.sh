#!/usr/bin/env bash
# A command's process stopped between its change to the command identity and its execve
# (another process of that identity may SIGSTOP it there; here it waits at the step
# spawn-identity-set) holds the daemon's start of that command. `sandbox close` must end
# it all the same, and return: before, the close waited for that start for ever.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null
# The step comes after the process joined the Sandbox's mount view: the pipe is in the
# Sandbox's tmp, which that view shows at the same path.
fifo="$LAYERFS_HOME/sandboxes/p-1/tmp/stop"
sb=$(LAYERFS_FAULT="spawn-identity-set#1@$fifo" "$LAYERFS" sandbox create)
assert_eq "$sb" 1 "the first Sandbox's number"
fault_fifo "$fifo"
lfs workspace mount "$sb" main >/dev/null
lfs workspace exec "$sb" main -- true >/dev/null 2>"$WORK/exec.err" &
exec_client=$!
line=$(fault_reached "$exec_client" "$fifo" 60) ||
        fail "the exec ended before its process took the command's identity: $(cat "$WORK/exec.err")"
[ -n "$line" ] || fail "no line from the step"
# Its pid there is its pid namespace's: on the host, the one process of a command's leaf.
cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")
child=$(cat "$cg"/cmd-*/cgroup.procs)
[[ "$child" =~ ^[0-9]+$ ]] || fail "the command leaves of $cg hold '$child', not the one held start"
uid=$(awk '/^Uid:/ {print $2}' "/proc/$child/status")
[ -n "$uid" ] && [ "$uid" != 0 ] || fail "the held start has not taken the command's identity (uid '$uid')"
ok
set +e
timeout 60 "$LAYERFS" sandbox close "$sb" --force >/dev/null 2>"$WORK/close.err"
status=$?
set -e
[ "$status" -eq 0 ] || fail "sandbox close with a start held short of its execve exited $status: $(cat "$WORK/close.err")"
ok
wait_exit "$child" 30 || fail "the held start $child outlived the close"
set +e
wait "$exec_client"
exec_status=$?
set -e
[ "$exec_status" -ne 0 ] || fail "the exec whose process was ended before its execve exited 0"
ok
assert_nothing_left "after closing a Sandbox with a start held short of its execve"
finish
