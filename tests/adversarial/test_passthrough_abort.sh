#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): hang or confuse the
# daemon by aborting its FUSE connection (/sys/fs/fuse/connections/N/abort, what a local
# root or a crashed kernel path does) while a command writes through a passed-through
# file, and through many opens and closes before that (each registers and unregisters a
# backing file: an id or fd missed on the way is a leak the daemon's fd count shows).
# After the abort the writer's passed-through writes go on into the upper file (the
# kernel no longer asks the daemon); what must hold: the daemon answers status, unmount
# --discard and close --force within bounds, leaves no mount, no process and no fd of the
# Workspace behind, and a new mount of the branch reads the last commit intact.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
start_passthrough_sandbox ptabort
kill_commands_at_teardown
in_ws "open('big', 'wb').write(b'k' * (2 << 20))"
lfs workspace commit "$N" main -m big >/dev/null
fds_before=$(daemon_fds)
# 2,000 opens: read-only (passes through: 2 MiB), for writing, both at once, a failing
# open (O_DIRECTORY on a file) and an O_TRUNC of a second file, each closed again.
in_ws "
import os
for i in range(400):
    r = os.open('big', os.O_RDONLY); w = os.open('big', os.O_WRONLY)
    os.pwrite(w, b'k', i); os.close(w); os.close(r)
    os.close(os.open('big', os.O_RDONLY))
    try:
        os.open('big', os.O_RDONLY | os.O_DIRECTORY)
    except NotADirectoryError:
        pass
    with open('small', 'w') as f:
        f.write(str(i))
"
assert_eq "$(lfs workspace status "$N" main | sort | tr '\n' ' ')" "A small " "status after 2,000 opens"
fds_after=$(daemon_fds)
[ "$fds_after" -le $((fds_before + 8)) ] || fail "the daemon's fds grew from $fds_before to $fds_after over 2,000 opens"
ok

# A writer holds big open (passed through) and writes on when told; the connection goes.
mkfifo -m 666 "$WS/ready" "$WS/next"
lfs process start "$N" main -- python3 -c "
import os
fd = os.open('big', os.O_WRONLY)
os.pwrite(fd, b'before', 0)
with open('ready', 'w') as w: w.write('1\n')
r = open('next')
r.read()
try:
    os.pwrite(fd, b'after!', 0)
except OSError:
    pass
" >/dev/null
read -r -t 60 _ <"$WS/ready" || fail "the writer did not start"
conn=$(stat -c %d "$WS")
conn=$((conn & 0xff | (conn >> 12 & ~0xff)))
# The fifo's writer end is opened before the abort: once aborted, the mount is gone for
# opens.
exec 7>"$WS/next"
abort_fuse_connections "$conn" || fail "cannot abort FUSE connection $conn of $WS"
exec 7>&-
timeout 60 "$LAYERFS" workspace status "$N" main >"$WORK/status" 2>&1
rc=$?
[ "$rc" != 124 ] || fail "status did not answer within 60 s after the abort"
echo "status after the abort (rc $rc): $(head -3 "$WORK/status")"
timeout 60 "$LAYERFS" workspace unmount "$N" main --discard >"$WORK/unmount" 2>&1
[ "$?" != 124 ] || fail "unmount --discard did not answer within 60 s after the abort"
grep -q " $WS " /proc/mounts && fail "$WS is still mounted after unmount --discard: $(cat "$WORK/unmount")"
# A new mount reads the last commit, whatever the aborted one's writer did.
lfs workspace mount "$N" main >/dev/null
assert_eq "$(lfs workspace exec "$N" main -- python3 -c "d = open('big', 'rb').read(); print(len(d), set(d) == {ord('k')})")" \
        "2097152 True" "big read in a new mount of main"
assert_eq "$(lfs workspace status "$N" main)" "" "status of the new mount"
timeout 60 "$LAYERFS" sandbox close "$N" --force >/dev/null || fail "close --force did not answer within 60 s"
daemon_gone || fail "the daemon is still there after close --force"
ok
finish
