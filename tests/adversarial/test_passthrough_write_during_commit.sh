#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): get a write left
# out of status and commit by having it land while a commit runs. A passed-through write
# never reaches the daemon, which sees it only as a move of the upper file's ctime
# (passthrough_refresh). ext4 moves the ctime when a write begins (file_modified), before
# it copies the data in; a commit that looks in between takes the ctime as seen, records
# the data as it was, and when the write then completes nothing moves the ctime again:
# status says clean while the file holds other bytes, and they are never committed.
# The write is held in between deterministically: its source buffer is a mapping, not
# yet read, of a file in a second Sandbox whose daemon is stopped (SIGSTOP), so the
# write waits on that page fault after ext4 moved the ctime. The writer is root on the
# host writing through the mount (any writer with a stalled source does the same: a
# slow NFS file, a FUSE file of the command's own, userfaultfd).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
start_passthrough_sandbox ptrace
# f: 64 KiB of o; n: 64 KiB of n (the source, read in the second Sandbox).
in_ws "open('f', 'wb').write(b'o' * 65536); open('n', 'wb').write(b'n' * 65536)"
lfs workspace commit "$N" main -m base >/dev/null
nb=$(lfs sandbox create)
wsb=$(lfs workspace mount "$nb" main)
[ -f "$wsb/n" ] || fail "the second Sandbox's Workspace has no n at '$wsb'"
dpid_b=$(records "SELECT pid FROM sandboxes WHERE number=$nb")
[ -n "$dpid_b" ] && [ -d "/proc/$dpid_b" ] || fail "the second Sandbox ($nb) has no daemon (pid '$dpid_b')"
TEARDOWN_EXTRA="kill -CONT $dpid_b 2>/dev/null"
mkfifo "$WORK/go" "$WORK/ready"
python3 -c "
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)            # passes through: f is an upper file
src = os.open(sys.argv[2], os.O_RDONLY)
m = mmap.mmap(src, 65536, mmap.MAP_PRIVATE, mmap.PROT_READ)  # not read yet
open(sys.argv[4], 'w').write('mapped\n')
open(sys.argv[3]).read()
os.pwrite(fd, m, 0)                                # faults on m inside the write
" "$WS/f" "$wsb/n" "$WORK/go" "$WORK/ready" 2>"$WORK/writer.err" &
writer=$!
read -r -t 60 _ <"$WORK/ready" || fail "the writer did not map its source"
kill -STOP "$dpid_b" || fail "could not stop the second Sandbox's daemon $dpid_b"
# Every thread of it stopped before the write begins (a thread still running could take
# the write's READ).
for _ in $(seq 600); do
        ! grep -L '^State:.*T' /proc/"$dpid_b"/task/*/status | grep -q . && break
        sleep 0.05
done
! grep -L '^State:.*T' /proc/"$dpid_b"/task/*/status | grep -q . ||
        fail "threads of the second Sandbox's daemon $dpid_b did not stop: $(grep -L '^State:.*T' /proc/"$dpid_b"/task/*/status)"
echo >"$WORK/go"
# The writer waits for the stopped daemon's answer (a FUSE request), inside its write.
for _ in $(seq 600); do
        grep -q request_wait_answer "/proc/$writer/wchan" 2>/dev/null && break
        [ -d "/proc/$writer" ] || break
        grep -q '^State:.*[SD]' "/proc/$writer/status" 2>/dev/null && grep -q fuse "/proc/$writer/stack" 2>/dev/null && break
        sleep 0.05
done
if ! grep -q 'request_wait_answer\|fuse' "/proc/$writer/wchan" "/proc/$writer/stack" 2>/dev/null; then
        if [ ! -d "/proc/$writer" ]; then
                status=0
                wait "$writer" || status=$?
                fail "the writer ended before it waited (status $status, stderr: $(cat "$WORK/writer.err"); the second Sandbox's daemon $dpid_b: $(grep '^State' "/proc/$dpid_b/status" 2>&1))"
        fi
        fail "the writer is not waiting inside its write ($(cat "/proc/$writer/wchan" 2>&1))"
fi
# The commit looks while the write is under way (it has nothing new to record yet), and
# answers: a write the daemon never sees must not hold it (nor the Workspace: its lock).
rc=0
timeout 20 "$LAYERFS" workspace commit "$N" main -m during >"$WORK/commit" 2>&1 || rc=$?
# Then (the commit answered, or its client gave up) a new file in the Workspace.
# (Not timeout(1): a request the daemon has read is waited for through any signal.)
touch "$WS/new" &
toucher=$!
touch_rc=0
wait_exit "$toucher" 10 || touch_rc=124
kill -CONT "$dpid_b"
[ "$rc" != 124 ] || fail "commit did not answer within 20 s while a passed-through write into f waits (a create in the Workspace then: rc $touch_rc)"
[ "$touch_rc" = 0 ] || fail "a create in the Workspace did not answer within 10 s after that commit (rc $touch_rc)"
rm -f "$WS/new"
wait "$writer" || fail "the write failed"
assert_eq "$(head -c 4 "$WS/f")" nnnn "f after the write completed"
assert_eq "$(lfs workspace status "$N" main)" "M f" "status after a write that completed during a commit"
lfs workspace commit "$N" main -m after >/dev/null
rm -rf "$WORK/out"
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(head -c 4 "$WORK/out/f")" nnnn "the committed f"
ok
finish
