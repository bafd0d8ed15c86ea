#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on) by a command alone:
# hang the Workspace for every command of the Sandbox, and its commit. The command
# (native runtime, where /dev/fuse is 0666 as udev makes it: test_fuse_trap.sh) serves a
# FUSE mount of its own in a user and mount namespace (fuse_stall.py) and writes a
# mapping of a file of that mount, never read, into a Workspace file open for writing
# with passthrough. The write waits for a READ its own server never answers, inside
# ext4's write of the upper file: that file's inode lock stays taken. A write served by
# the daemon would have copied the data in before the daemon saw it, holding nothing of
# ours. What must hold: a commit and the other commands' requests answer meanwhile, and
# while a SEEK_DATA on that file waits for the write (FUSE LSEEK, ws_lseek).
# test_passthrough_write_during_commit.sh holds the same write from the host, on either
# runtime, and then checks the bytes recorded.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=ptstall LAYERFS_RUNTIME=native
if ! why=$(unshare -Ur true 2>&1); then
        skip "this system makes no user namespace, which the command's FUSE server needs ($why)"
fi
fuse_mode=$(stat -c %a /dev/fuse)
# The stalled write's connection is aborted at the end whatever happens (as in
# test_fuse_trap.sh): those whose /dev/fuse a process of this test's cgroups holds.
release_stalls() {
        local pids
        pids=$(find "$CGR" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
        [ -n "$pids" ] || return 0
        # shellcheck disable=SC2046
        abort_fuse_connections $(for p in $pids; do cat /proc/"$p"/fdinfo/* 2>/dev/null; done |
                awk '/^fuse_connection:/ {print $2}' | sort -u) || true
}
TEARDOWN_EXTRA="release_stalls; chmod $fuse_mode /dev/fuse"
chmod 666 /dev/fuse
cp "$(dirname "$0")/fuse_stall.py" "$WORK/fuse_stall.py"
chmod 644 "$WORK/fuse_stall.py"
chmod 755 "$WORK"
mkdir "$WORK/src"
printf '%4096s' '' | tr ' ' o >"$WORK/src/f"
lfs project init ptstall --from "$WORK/src" >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
require_passthrough "$n"
in_main "$n" sh -c 'echo x >>f && mkdir stall' # f: an upper file, passed through when opened
lfs process start "$n" main -- unshare -Urm /usr/bin/python3 "$WORK/fuse_stall.py" stall f ready >/dev/null
wait_created "$ws" ready 60
# The writer waits inside its write (a FUSE request of its own server's).
stalled=""
for _ in $(seq 600); do
        for p in $(find "$CGR" -name cgroup.procs -exec cat {} + 2>/dev/null); do
                grep -q generic_perform_write "/proc/$p/stack" 2>/dev/null && stalled=$p
        done
        [ -n "$stalled" ] && break
        sleep 0.05
done
[ -n "$stalled" ] || fail "the command's write did not stall"
rc=0
timeout 20 "$LAYERFS" workspace commit "$n" main -m during >"$WORK/commit" 2>&1 || rc=$?
# (Not timeout(1): a request the daemon has read is waited for through any signal.)
touch "$ws/new" &
toucher=$!
touch_rc=0
wait_exit "$toucher" 10 || touch_rc=124
[ "$rc" != 124 ] || fail "commit did not answer within 20 s while a command's write into f stalls (a create in the Workspace then: rc $touch_rc)"
[ "$touch_rc" = 0 ] || fail "a create in the Workspace did not answer within 10 s after that commit (rc $touch_rc)"
ok
# A SEEK_DATA on f waits for the write (the kernel holds f's inode lock for both); the
# Workspace does not: another create answers meanwhile.
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.lseek(fd, 0, os.SEEK_DATA)' "$ws/f" 2>/dev/null &
seeker=$!
for _ in $(seq 600); do
        grep -q llseek "/proc/$seeker/stack" 2>/dev/null && break
        sleep 0.05
done
grep -q llseek "/proc/$seeker/stack" || fail "the SEEK_DATA did not wait: $(cat "/proc/$seeker/stack" 2>&1)"
touch "$ws/new2" &
toucher=$!
touch_rc=0
wait_exit "$toucher" 10 || touch_rc=124
[ "$touch_rc" = 0 ] || fail "a create in the Workspace did not answer within 10 s while a SEEK_DATA on f waits (rc $touch_rc)"
ok
timeout 60 "$LAYERFS" sandbox close "$n" --force >/dev/null || fail "close --force did not answer within 60 s"
wait "$seeker" || true # its file went with the close, which ended the writer
assert_no_sandbox_left "close after a stalled write"
finish
