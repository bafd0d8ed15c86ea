#!/usr/bin/env bash
# sandbox close (issue 17): the daemon ends every process of the Sandbox but its own (it
# stays in its cgroup leaf: stepping out waits for an RCU grace period), unmounts, removes
# the directory and exits; its closer then removes the cgroups and the record. Checked: a
# close of a Sandbox with a Workspace and processes, a detached one among them, leaves
# nothing; a closer killed while the daemon tears down, its record handed over already (the
# daemon held at the step close-handed-over), leaves the record to the next reclaim, which
# ends the daemon with the rest; a closer killed after the daemon's exit, before it removed
# the rest, leaves the empty cgroup and the record, which the next reclaim removes, leaving
# nothing.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null

sb=$(main_sandbox)
lfs process start "$sb" main -- sleep 1000 >/dev/null
in_main "$sb" sh -c 'setsid sh -c "sleep 1000 &" </dev/null >/dev/null 2>&1'
cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
others=$(find "$cg" -name cgroup.procs -not -path "$cg/daemon/*" -exec cat {} + | wc -l)
[ "$others" -ge 2 ] || fail "only $others processes besides the daemon in $cg before the close"
ok
lfs sandbox close "$sb" --force >/dev/null
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs 30 s after its close returned"
assert_nothing_left "after the close of a Sandbox with a Workspace and processes"
ok

# The closer killed while the daemon tears down (held once the record is the closer's).
fault_fifo "$WORK/handed"
sb=$(LAYERFS_FAULT="close-handed-over@$WORK/handed" "$LAYERFS" sandbox create)
lfs workspace mount "$sb" main >/dev/null
lfs process start "$sb" main -- sleep 1000 >/dev/null
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
"$LAYERFS" sandbox close "$sb" --force >/dev/null 2>&1 &
closer=$!
fault_reached "$daemon" "$WORK/handed" 30 >/dev/null || fail "the daemon $daemon ended without handing its record over"
assert_eq "$(records "SELECT pid || ' ' || state FROM sandboxes WHERE number=$sb")" "$closer removing" \
        "the record while the daemon tears down"
kill -9 "$closer"
wait "$closer" 2>/dev/null || true
lfs runtime reclaim >/dev/null
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs after the reclaim of a killed closer's record"
assert_nothing_left "after the reclaim of what a closer killed during the teardown left"
ok

# The closer killed between the daemon's exit and its own removal of the rest.
sb=$(main_sandbox)
cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
fault_fifo "$WORK/close"
LAYERFS_FAULT="close-daemon-gone@$WORK/close" "$LAYERFS" sandbox close "$sb" --force >/dev/null 2>&1 &
kill_at_step "$WORK/close" $! || fail "the close ended without reaching close-daemon-gone"
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs at close-daemon-gone"
[ -d "$cg" ] || fail "the Sandbox's cgroup was gone at close-daemon-gone: the daemon removed it, not its closer"
assert_eq "$(grep populated "$cg/cgroup.events")" "populated 0" "the cgroup the daemon left"
assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number=$sb")" 1 "the record a killed closer left"
[ ! -e "$LAYERFS_HOME/sandboxes/p-$sb" ] || fail "the daemon left its directory"
lfs runtime reclaim >/dev/null
assert_nothing_left "after the reclaim of what a killed closer left"
ok
finish
