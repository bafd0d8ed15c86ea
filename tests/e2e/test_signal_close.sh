#!/usr/bin/env bash
# SIGTERM, SIGINT and SIGHUP to a Sandbox's daemon (kill PID, systemctl stop) close the
# Sandbox as `sandbox close` does (docs/runtime.md, "Teardown"): checked, a SIGTERM to a
# daemon holding detached processes, a mounted Workspace, an exec waiting for its command
# and a follower of its events leaves no process, mount, cgroup, directory or record; its
# log names the signal and its sender; a second signal during the close (paused at the
# step close-begun) changes nothing; the exec and the follower end instead of hanging. The
# same, more cheaply, for SIGINT and SIGHUP. A dirty Workspace keeps the Sandbox open, as
# it makes `sandbox close` refuse without --force, and the log says why.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null

# sandbox_with_work [ENV...]: a Sandbox (made with ENV) with main mounted, a background
# process and a process that left its session; its number.
sandbox_with_work() {
        local sb
        sb=$(env "$@" "$LAYERFS" sandbox create)
        lfs workspace mount "$sb" main >/dev/null
        lfs process start "$sb" main -- sleep 1000 >/dev/null
        in_main "$sb" sh -c 'setsid sh -c "sleep 1000 &" </dev/null >/dev/null 2>&1'
        echo "$sb"
}

# The SIGTERM, paused once the close has begun.
fault_fifo "$WORK/close"
sb=$(sandbox_with_work LAYERFS_FAULT="close-begun@$WORK/close")
cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
others=$(find "$cg" -name cgroup.procs -not -path "$cg/daemon/*" -exec cat {} + | wc -l)
[ "$others" -ge 2 ] || fail "only $others processes besides the daemon in $cg before the signal"
ok
# Clients waiting on calls: an exec whose command never ends, a follower of events.
in_main "$sb" sleep 1000 >/dev/null 2>"$WORK/exec.err" &
exec_client=$!
# The follower is attached once it has printed the events so far (the exits of the
# commands above): a call that came after the close began would be refused NoSuchSandbox.
mkfifo "$WORK/events"
lfs sandbox events "$sb" --follow >"$WORK/events" 2>"$WORK/events.err" &
follower=$!
exec 7<"$WORK/events"
read -r -t 60 _ <&7 || fail "the follower of events printed nothing (stderr: $(cat "$WORK/events.err"))"
wait_created "$cg" cmd-3 # the exec's leaf: its command runs
kill -TERM "$daemon"
fault_reached "$daemon" "$WORK/close" 30 >/dev/null || fail "the daemon $daemon ended before its close began"
lfs sandbox log "$sb" >"$WORK/log"
grep -q "closing sandbox $sb (SIGTERM from pid $$, uid 0)" "$WORK/log" ||
        fail "the log does not name SIGTERM and its sender $$ as the close began: $(tail -3 "$WORK/log")"
ok
# A second signal of each kind during the close: blocked, it neither ends the daemon nor
# starts another close.
kill -TERM "$daemon"
kill -INT "$daemon"
kill -HUP "$daemon"
[ -d "/proc/$daemon" ] || fail "a second signal during the close ended the daemon"
ok
fault_release "$WORK/close"
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs 30 s after its close went on"
set +e
wait "$exec_client"
exec_status=$?
cat <&7 >/dev/null
exec 7<&-
wait "$follower"
follower_status=$?
set -e
# The exec's command was ended by the close: 128 + SIGKILL, as under sandbox close.
assert_eq "$exec_status" 137 "the exec whose Sandbox closed under it (stderr: $(cat "$WORK/exec.err"))"
assert_eq "$follower_status" 0 "the follower of events when the Sandbox closed (stderr: $(cat "$WORK/events.err"))"
assert_nothing_left "after SIGTERM to a daemon with a Workspace, processes and waiting clients"
expect_refusal NoSuchSandbox "no sandbox $sb" lfs workspace exec "$sb" main -- true

# SIGINT and SIGHUP, each the same close.
for sig in INT HUP; do
        sb=$(sandbox_with_work)
        daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
        kill -"$sig" "$daemon"
        wait_exit "$daemon" 30 || fail "the daemon $daemon still runs 30 s after SIG$sig"
        assert_nothing_left "after SIG$sig to a daemon with a Workspace and processes"
done

# A dirty Workspace: the signal is refused as sandbox close without --force is; the log
# says so, and the uncommitted file is still there.
sb=$(sandbox_with_work)
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
in_main "$sb" sh -c 'echo unsaved >kept.txt'
kill -TERM "$daemon"
# The accept loop reads a pending signal before it takes a connection made after it: this
# exec is answered after the SIGTERM was handled.
assert_eq "$(in_main "$sb" cat kept.txt)" unsaved "the uncommitted file after the refused SIGTERM"
grep -q "SIGTERM from pid $$, uid 0: sandbox $sb stays open: Dirty: the Workspace of 'main'" \
        "$LAYERFS_HOME/sandboxes/p-$sb/daemon.log" || fail "the log does not name the refused SIGTERM, its sender and the Workspace"
ok
lfs sandbox close "$sb" --force >/dev/null
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs 30 s after its close"
assert_nothing_left "after the close --force that followed a refused SIGTERM"
finish
