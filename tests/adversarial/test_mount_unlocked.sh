#!/usr/bin/env bash
# A `workspace mount` waits for a gc without the daemon's lock (daemon/mounts.c,
# open_base), its slot marked as being mounted meanwhile. An unmount of that branch
# meanwhile waits for the mount to end, then unmounts it: the cleanup after a mount killed
# while it waited (a client's deadline, ^C) must not leave the Workspace mounted once the
# gc ends. On the build before, the unmount answered NotMounted at once and the Workspace
# was mounted after it, for good: it kept the Sandbox from its idle close, its base pinned
# and its branch's delete refused Busy. A close meanwhile ends the waiting unmount
# NoSuchSandbox. The gc is a `project gc` held inside its transaction (gc-transaction:
# gc.lock held exclusive), so that the mount waits at its Store's part.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
lfs project init mu >/dev/null
export LAYERFS_PROJECT=mu
P=$LAYERFS_HOME/projects/mu
lfs branch create keep >/dev/null
# A gc held at its step when the test fails: nothing else ends it.
GC=
TEARDOWN_EXTRA='[ -z "$GC" ] || kill -9 "$GC" 2>/dev/null'

# held_gc NAME: a `project gc` held inside its transaction (it has a deleted branch NAME's
# data to remove); its pid in GC.
held_gc() {
        deleted_branch "$1"
        fault_fifo "$WORK/gc"
        LAYERFS_FAULT="gc-transaction#1@$WORK/gc" "$LAYERFS" project gc >/dev/null &
        GC=$!
        fault_reached "$GC" "$WORK/gc" 60 >/dev/null || fail "the project gc $GC ended without reaching gc-transaction"
}
gc_release() {
        fault_release "$WORK/gc"
        wait "$GC" || fail "the project gc held at gc-transaction failed"
        GC=
}

# mount_waiting N BRANCH: starts a mount of BRANCH in sandbox N (its pid in MOUNTER, its
# output in $WORK/mount.out) and returns once the daemon has begun it (its mount point is
# made before the mount looks at the Store).
mount_waiting() {
        "$LAYERFS" workspace mount "$1" "$2" >"$WORK/mount.out" 2>&1 & # not lfs: a function, whose failure would trip the ERR trap in the job
        MOUNTER=$!
        wait_created "$LAYERFS_HOME/sandboxes/mu-$1/mnt" "$2" 30
}

# unmount_waiting N BRANCH: starts an unmount of BRANCH in sandbox N (its pid in
# UNMOUNTER, its output in $WORK/unmount.out) and checks it is still waiting 1 s later.
unmount_waiting() {
        "$LAYERFS" workspace unmount "$1" "$2" >"$WORK/unmount.out" 2>&1 &
        UNMOUNTER=$!
        sleep 1
        kill -0 "$UNMOUNTER" 2>/dev/null || {
                wait "$UNMOUNTER" && status=0 || status=$?
                fail "the unmount of $2 did not wait for its mount, which waits for the gc (status $status): $(cat "$WORK/unmount.out")"
        }
        ok
}

# (a) The mount's client killed while it waits, an unmount after it: the unmount waits for
# the mount, then unmounts it; nothing is left mounted or pinned, and the Sandbox
# idle-closes.
N=$(LAYERFS_IDLE_SECONDS=2 lfs sandbox create)
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
held_gc a
mount_waiting "$N" keep
{ kill -9 "$MOUNTER" && wait "$MOUNTER"; } 2>/dev/null || true # bash's "Killed" too
unmount_waiting "$N" keep
gc_release
wait "$UNMOUNTER" || fail "the unmount of keep that waited for its mount failed: $(cat "$WORK/unmount.out")"
left=$(grep -F " $LAYERFS_HOME/sandboxes/mu-$N/mnt/keep " /proc/mounts || true)
assert_eq "$left" "" "the Workspace of keep after its unmount that waited for the mount"
assert_eq "$(ls -A "$P/pins" 2>/dev/null || true)" "" "pins left after the unmount that waited for the mount"
lfs branch delete keep >/dev/null || fail "branch delete keep after its Workspace was unmounted"
ok
wait_exit "$DAEMON" 60 || fail "sandbox $N did not idle-close after its Workspace was unmounted"
assert_nothing_left "(a) an unmount after a mount killed while it waited for a gc"

# (b) A close while the mount and the unmount wait: both end NoSuchSandbox once the gc
# went on, and the close leaves nothing.
lfs branch create keep >/dev/null
N=$(lfs sandbox create)
held_gc b
mount_waiting "$N" keep
unmount_waiting "$N" keep
lfs sandbox close "$N" >/dev/null
gc_release
if wait "$MOUNTER"; then
        fail "the mount into sandbox $N, closed while it waited for the gc, succeeded: $(cat "$WORK/mount.out")"
fi
ok
if wait "$UNMOUNTER"; then
        fail "the unmount in sandbox $N, closed while it waited for the mount, succeeded: $(cat "$WORK/unmount.out")"
fi
grep -q NoSuchSandbox "$WORK/unmount.out" || fail "the unmount in sandbox $N closed meanwhile said: $(cat "$WORK/unmount.out")"
ok
assert_nothing_left "(b) a close while a mount and an unmount of its branch waited"
assert_eq "$(ls -A "$P/pins" 2>/dev/null || true)" "" "pins left by (b)"
lfs project verify >/dev/null || fail "project verify"
finish
