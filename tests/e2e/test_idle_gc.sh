#!/usr/bin/env bash
# The idle close's gc (LAYERFS_GC_AFTER_DELETES) runs beside the daemon's accept loop.
# Each Sandbox here is held inside that gc (fault step gc-transaction: gc.lock held, the
# dead rows deleted in a transaction not committed yet) and the daemon
#  (a) answers a ping while the gc is held, and the ping keeps the Sandbox open past the
#      gc's end: its idle close comes an idle time after the ping, not as the gc ends;
#  (b) closes the Sandbox on SIGTERM while the gc is held (its directory and cgroups go),
#      and once the gc ended leaves nothing, the Store verified;
#  (c) with nothing asked, closes once the gc ended, and not before.
# Before, the gc ran on the accept loop: the ping waited for the whole gc ((a) fails on
# that build: no answer in 30 s) and the SIGTERM was read after it ((b) fails: the
# Sandbox's directory stayed while the gc was held).
# (f) to (h): a `workspace mount` during the idle gc. It pins its base under the gc's lock,
# so it waits for a gc that has begun to change the Store: without the daemon's lock now,
# so that the daemon's other calls are answered meanwhile ((f): on the build before, a
# ping and list_workspaces were answered only once the mount had failed Busy after the
# Store's busy_timeout of 10 s), and a SIGTERM meanwhile tears the Sandbox down with the
# mount undone ((g)); a gc that still plans is stopped by the mount ((h): on the build
# before, the mount waited for the whole gc, which removed what it planned), and so is one
# that the loop starts after a mount came ((i)).
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=ig
P=$LAYERFS_HOME/projects/ig
mkdir -p "$WORK/main"
echo main >"$WORK/main/README"
lfs project init ig --from "$WORK/main" >/dev/null
# A daemon held at the fault step when the test fails: nothing else ends it.
HELD=
TEARDOWN_EXTRA='[ -z "$HELD" ] || kill -9 "$HELD" 2>/dev/null'

verified() {
        lfs project verify >/dev/null || fail "project verify $1"
        ok
}
deleted() { sqlite3 -cmd ".timeout 10000" "$P/store.db" "SELECT coalesce(sum(value), 0) FROM gc_state"; }

# held_sandbox NAME IDLE [STEP]: deletes a branch NAME with data of its own (the next gc has
# rows to delete), makes a Sandbox whose idle time is IDLE seconds and whose idle close runs
# gc after one deletion, and waits for its daemon to be held inside that gc (at STEP,
# gc-transaction by default). Sets N, DAEMON and HELD.
held_sandbox() {
        deleted_branch "$1"
        fault_fifo "$WORK/gc"
        N=$(LAYERFS_IDLE_SECONDS=$2 LAYERFS_GC_AFTER_DELETES=1 LAYERFS_FAULT="${3:-gc-transaction}#1@$WORK/gc" \
                lfs sandbox create)
        DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
        [ -n "$DAEMON" ] || fail "sandbox $N has no daemon pid"
        HELD=$DAEMON
        fault_reached "$DAEMON" "$WORK/gc" 60 >/dev/null || fail "the daemon $DAEMON ended without reaching its idle gc"
        assert_eq "$(deleted)" 1 "deletions counted while the idle gc of sandbox $N is held"
}

# (a) A ping while the gc is held, then the gc let go; the daemon's exit is timed from the
# ping. A close decided as the gc ends, the ping not counted, comes well within the idle
# time; the daemon cannot close before an idle time after the ping (its clock started
# when it read the ping, after the test's t0).
held_sandbox a 3
read -r answer after < <(python3 - "$LAYERFS_HOME/sandboxes/ig-$N" "$WORK/gc" "$DAEMON" <<'PY'
import json, os, select, socket, sys, time
sandbox, fifo, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
token = open(sandbox + "/token").read().strip()
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX)
s.connect(sandbox + "/control.sock")
s.sendall((json.dumps(dict(v=1, token=token, call="sandbox.ping")) + "\n").encode())
s.settimeout(30)
try:
    answer = "answered" if b'"ok"' in s.recv(4096) else "refused"
except OSError as e:
    answer = "no-answer:" + type(e).__name__
s.close()
with open(fifo, "w") as f:  # the gc goes on only now
    f.write("go\n")
ended = os.pidfd_open(pid)
print(answer, "%.3f" % (time.monotonic() - t0) if select.select([ended], [], [], 60)[0] else "open")
PY
)
HELD=
assert_eq "$answer" answered "a ping to sandbox $N while its idle gc is held"
[ "$after" != open ] || fail "sandbox $N did not idle-close within 60 s of the ping"
awk -v a="$after" 'BEGIN { exit !(a >= 3) }' ||
        fail "sandbox $N closed $after s after a ping it answered during its idle gc: before its idle time (3 s) from the ping"
ok
assert_eq "$(records)" 0 "records after the idle close that followed the ping"
assert_eq "$(deleted)" 0 "deletions counted after the idle gc of (a)"
verified "after the idle gc that a ping came during"

# (b) SIGTERM while the gc is held: the Sandbox closes then (its directory and cgroups go,
# the gc still held); the daemon waits for its gc, then leaves nothing.
held_sandbox b 1
kill -TERM "$DAEMON"
wait_removed "$LAYERFS_HOME/sandboxes" "ig-$N" 30
assert_eq "$(find "$CGR" -mindepth 1 -type d)" "" "cgroups of sandbox $N closed by SIGTERM, its idle gc held"
fault_release "$WORK/gc"
wait_exit "$DAEMON" 60 || fail "the daemon $DAEMON did not exit once its idle gc ended after its SIGTERM"
HELD=
assert_nothing_left "SIGTERM during the idle gc"
assert_eq "$(deleted)" 0 "deletions counted after the idle gc of (b)"
verified "after a SIGTERM during the idle gc"

# (c) Nothing asked: the Sandbox stays open while the gc is held and closes once it ended.
held_sandbox c 1
[ -S "$LAYERFS_HOME/sandboxes/ig-$N/control.sock" ] || fail "sandbox $N's socket went while its idle gc was held"
assert_eq "$(records "SELECT state FROM sandboxes WHERE number=$N")" running "sandbox $N while its idle gc is held"
fault_release "$WORK/gc"
wait_exit "$DAEMON" 60 || fail "sandbox $N did not idle-close after its gc"
HELD=
assert_nothing_left "idle close after its gc"
assert_eq "$(deleted)" 0 "deletions counted after the idle gc of (c)"
verified "after the idle gc"

# (d) A close while the gc still plans stops it: the closer waits 30 s for the daemon's
# exit, which waits for its gc, and a large Store's gc takes longer (the close failed Busy
# and left its record and cgroups). The gc ends before it changed anything: the deletion
# stays counted for the next gc.
held_sandbox d 1 gc-planned
lfs sandbox close "$N" >"$WORK/close.out" 2>&1 &
closer=$!
# The teardown beside the held gc removes the directory: the close has begun, its stop set.
wait_removed "$LAYERFS_HOME/sandboxes" "ig-$N" 30
fault_release "$WORK/gc"
wait "$closer" || fail "the close of sandbox $N during its idle gc failed: $(cat "$WORK/close.out")"
HELD=
wait_exit "$DAEMON" 60 || fail "the daemon $DAEMON did not exit after its close"
assert_nothing_left "a close while the idle gc planned"
assert_eq "$(deleted)" 1 "deletions counted after an idle gc stopped by a close"
verified "after an idle gc stopped by a close"

# (e) A writer at work (it holds gc.lock shared): the idle gc does not wait for it, and the
# idle close goes ahead (it waited for as long as the writer ran: the Sandbox stayed open,
# and after a SIGTERM its record stayed 'running' with no daemon answering).
mkdir -p "$WORK/e"
echo e >"$WORK/e/file"
fault_fifo "$WORK/writer"
LAYERFS_FAULT="record-start@$WORK/writer" lfs branch commit main --from "$WORK/e" -m e >/dev/null 2>"$WORK/writer.err" &
writer=$!
fault_reached "$writer" "$WORK/writer" 30 >/dev/null || fail "the writer ended before record-start: $(cat "$WORK/writer.err")"
N=$(LAYERFS_IDLE_SECONDS=1 LAYERFS_GC_AFTER_DELETES=1 lfs sandbox create)
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
wait_exit "$DAEMON" 30 || fail "sandbox $N did not idle-close while a writer held the project"
assert_nothing_left "an idle close while a writer was at work"
fault_release "$WORK/writer"
wait "$writer" || fail "the writer failed after the idle close beside it: $(cat "$WORK/writer.err")"
assert_eq "$(deleted)" 1 "deletions counted after an idle gc skipped for a writer"
verified "after an idle gc skipped for a writer"

# ---- a mount during the idle gc -----------------------------------------------------------
# A branch whose data nothing else reaches: the Workspaces of (f) to (h) mount it, and read
# it back once the gc ended.
mkdir -p "$WORK/keep"
head -c 100000 /dev/urandom >"$WORK/keep/data"
keep_sum=$(sha256sum <"$WORK/keep/data" | cut -c1-64)
lfs branch create keep >/dev/null
lfs branch commit keep --from "$WORK/keep" -m keep >/dev/null
lfs project gc >/dev/null # (e)'s deletion: each idle gc below has one to do

# ping_answer N: how sandbox N's daemon answers a ping: answered, refused, or no-answer
# after 30 s.
ping_answer() {
        python3 - "$LAYERFS_HOME/sandboxes/ig-$1" <<'PY'
import json, socket, sys
sandbox = sys.argv[1]
token = open(sandbox + "/token").read().strip()
s = socket.socket(socket.AF_UNIX)
s.connect(sandbox + "/control.sock")
s.sendall((json.dumps(dict(v=1, token=token, call="sandbox.ping")) + "\n").encode())
s.settimeout(30)
try:
    print("answered" if b'"ok"' in s.recv(4096) else "refused")
except OSError as e:
    print("no-answer:" + type(e).__name__)
PY
}

# mount_waiting N BRANCH OUT: starts a mount of BRANCH in sandbox N (its output to OUT, its
# pid in MOUNTER) and returns once the daemon has begun it: its mount point is made before
# the mount looks at the Store.
mount_waiting() {
        "$LAYERFS" workspace mount "$1" "$2" >"$3" 2>&1 & # not lfs: a function, whose failure would trip the ERR trap in the job
        MOUNTER=$!
        wait_created "$LAYERFS_HOME/sandboxes/ig-$1/mnt" "$2" 30
}

# still_waiting PID OUT WHAT: the mount PID has not ended: it waits for the gc.
still_waiting() {
        kill -0 "$1" 2>/dev/null || {
                wait "$1" && status=0 || status=$?
                fail "$3: the mount ended (status $status) while the gc was held: $(cat "$2")"
        }
        ok
}

# (f) The gc held inside its transaction (gc.lock held exclusive, the Store's write lock
# held): two mounts come and wait for it; meanwhile the daemon answers a ping, `project
# list_sandboxes` (its daemons asked with a 2 s deadline) and list_workspaces, and refuses
# a third mount of a branch being mounted, both mounts still waiting. They wait past the Store's
# busy_timeout (LFS_DB_BUSY_MS, 10 s: the mount that read the head under the Store's write
# lock before it took gc.lock failed Busy then), and complete once the gc went on.
held_sandbox f 1
mount_waiting "$N" keep "$WORK/mount-keep.out"
keep_mounter=$MOUNTER
mount_waiting "$N" main "$WORK/mount-main.out"
main_mounter=$MOUNTER
assert_eq "$(ping_answer "$N")" answered "a ping to sandbox $N while mounts wait for its idle gc"
still_waiting "$keep_mounter" "$WORK/mount-keep.out" "after the ping"
answered=$(lfs --json project list_sandboxes | json_get "[s['answered'] for s in j if s['sandbox'] == $N]")
assert_eq "$answered" "[True]" "project list_sandboxes's answer from sandbox $N while mounts wait for its idle gc"
assert_eq "$(lfs --json sandbox list_workspaces "$N")" "[]" "list_workspaces of sandbox $N while mounts wait"
expect_refusal AlreadyMounted "being mounted" lfs workspace mount "$N" keep
still_waiting "$keep_mounter" "$WORK/mount-keep.out" "after list_workspaces and a third mount"
still_waiting "$main_mounter" "$WORK/mount-main.out" "after list_workspaces and a third mount"
sleep 11 # past LFS_DB_BUSY_MS
still_waiting "$keep_mounter" "$WORK/mount-keep.out" "past the Store's busy_timeout"
still_waiting "$main_mounter" "$WORK/mount-main.out" "past the Store's busy_timeout"
fault_release "$WORK/gc"
wait "$keep_mounter" || fail "the mount of keep that waited for the idle gc failed: $(cat "$WORK/mount-keep.out")"
wait "$main_mounter" || fail "the mount of main that waited for the idle gc failed: $(cat "$WORK/mount-main.out")"
mnt=$LAYERFS_HOME/sandboxes/ig-$N/mnt
grep -q " $mnt/keep fuse" /proc/mounts || fail "keep is not mounted at $mnt/keep after its mount succeeded"
ok
got=$(lfs workspace exec "$N" keep -- sha256sum data | cut -c1-64)
assert_eq "$got" "$keep_sum" "the data of keep read in the Workspace mounted during the idle gc"
assert_eq "$(lfs workspace exec "$N" main -- cat file)" e "the file of main ((e) committed it) in the Workspace mounted during the idle gc"
assert_eq "$(deleted)" 0 "deletions counted after the idle gc that mounts waited for"
verified "after an idle gc that mounts waited for"
assert_eq "$(records "SELECT state FROM sandboxes WHERE number=$N")" running "sandbox $N with its Workspaces after its idle gc"
lfs workspace unmount "$N" keep >/dev/null
lfs workspace unmount "$N" main >/dev/null
wait_exit "$DAEMON" 60 || fail "sandbox $N did not idle-close after its Workspaces were unmounted"
HELD=
assert_nothing_left "an idle close after mounts that waited for the idle gc"
assert_eq "$(ls -A "$P/pins" 2>/dev/null || true)" "" "pins left after the Workspaces of (f) were unmounted"

# (g) SIGTERM while a mount waits for the gc: the Sandbox is torn down then (its directory
# and cgroups go, the gc still held), the mount, once the gc went on, fails and undoes
# itself (no FUSE mount, no pin), and the daemon leaves nothing.
held_sandbox g 1
mount_waiting "$N" keep "$WORK/mount-keep.out"
kill -TERM "$DAEMON"
wait_removed "$LAYERFS_HOME/sandboxes" "ig-$N" 30
assert_eq "$(find "$CGR" -mindepth 1 -type d)" "" "cgroups of sandbox $N closed by SIGTERM while a mount waited"
still_waiting "$MOUNTER" "$WORK/mount-keep.out" "after the SIGTERM"
fault_release "$WORK/gc"
if wait "$MOUNTER"; then
        fail "the mount into sandbox $N, closed while it waited for the idle gc, succeeded: $(cat "$WORK/mount-keep.out")"
fi
ok
wait_exit "$DAEMON" 60 || fail "the daemon $DAEMON did not exit once its idle gc ended after its SIGTERM"
HELD=
assert_nothing_left "SIGTERM while a mount waited for the idle gc"
assert_eq "$(ls -A "$P/pins" 2>/dev/null || true)" "" "pins left by a mount undone by a close"
assert_eq "$(deleted)" 0 "deletions counted after the idle gc of (g)"
verified "after a SIGTERM while a mount waited for the idle gc"

# unmount_closes WHAT: once keep is unmounted, sandbox N idle-closes after a gc that
# removes the deletion a gc stopped by WHAT left counted, and leaves nothing.
unmount_closes() {
        lfs workspace unmount "$N" keep >/dev/null
        wait_exit "$DAEMON" 60 || fail "sandbox $N did not idle-close after its Workspace was unmounted ($1)"
        HELD=
        assert_nothing_left "an idle close after $1"
        assert_eq "$(deleted)" 0 "deletions counted after the next idle close's gc ($1)"
        verified "after $1, and the next idle gc"
}

# (h) A mount while the gc still plans stops it (it loses only its plan): the mount goes
# on at once, the deletion stays counted, and the idle close after the unmount runs the gc
# again (the fault step holds only the first).
held_sandbox h 1 gc-planned
mount_waiting "$N" keep "$WORK/mount-keep.out"
fault_release "$WORK/gc"
wait "$MOUNTER" || fail "the mount during the planning idle gc failed: $(cat "$WORK/mount-keep.out")"
got=$(lfs workspace exec "$N" keep -- sha256sum data | cut -c1-64)
assert_eq "$got" "$keep_sum" "the data of keep read in the Workspace mounted during the idle gc's plan"
assert_eq "$(deleted)" 1 "deletions counted after an idle gc stopped by a mount"
unmount_closes "a mount stopped the idle gc"
# (i) A mount that comes once the accept loop has found the Sandbox idle, before its gc
# starts (fault step idle-gc-start: d->lock let go between), stops that gc as one that
# comes while it plans does ((h)): a mount at work on the Store then would wait for the
# whole gc once the gc took gc.lock first. The mount's connection is accepted before the
# loop is held there (a held loop accepts none), its request sent once it is held. On the
# build before, the gc ran to its end beside the Workspace mounted (the deletion no longer
# counted).
# wait_logged FILE REGEX: waits (inotify, at most 60 s) until FILE has a line matching REGEX.
wait_logged() {
        python3 -c '
import ctypes, os, re, select, sys
path, pattern = sys.argv[1], re.compile(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0 or libc.inotify_add_watch(fd, path.encode(), 0x2) < 0:  # IN_MODIFY
    sys.exit("inotify on %s: %s" % (path, os.strerror(ctypes.get_errno())))
while not pattern.search(open(path).read()):
    if not select.select([fd], [], [], 60)[0]:
        sys.exit("no line matching %r in %s within 60 s" % (sys.argv[2], path))
    os.read(fd, 65536)
' "$@" || fail "waiting for '$2' in $1"
}
deleted_branch i
fault_fifo "$WORK/gc"
fault_fifo "$WORK/go"
N=$(LAYERFS_IDLE_SECONDS=3 LAYERFS_GC_AFTER_DELETES=1 LAYERFS_FAULT="idle-gc-start#1@$WORK/gc" lfs sandbox create)
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
HELD=$DAEMON
python3 - "$LAYERFS_HOME/sandboxes/ig-$N" "$WORK/go" "$WORK/accepted-i" >"$WORK/mount-i.out" <<'PY' &
import json, socket, sys
sandbox, go, accepted = sys.argv[1], sys.argv[2], sys.argv[3]
token = open(sandbox + "/token").read().strip()
def connect():
    c = socket.socket(socket.AF_UNIX)
    c.connect(sandbox + "/control.sock")
    return c
s = connect()
# A ping answered on a later connection: the loop accepted s before it (in their order),
# and its idle time starts again from the ping, the step an idle time later.
p = connect()
p.sendall((json.dumps(dict(v=1, token=token, call="sandbox.ping")) + "\n").encode())
p.recv(4096)
open(accepted, "w").close()
open(go).read()  # the accept loop is held at idle-gc-start: the request goes now
s.sendall((json.dumps(dict(v=1, token=token, call="workspace.mount", branch="keep")) + "\n").encode())
print(s.recv(65536).decode())
PY
MOUNTER=$!
fault_reached "$DAEMON" "$WORK/gc" 60 >/dev/null || fail "the daemon $DAEMON ended without reaching idle-gc-start"
[ -e "$WORK/accepted-i" ] ||
        fail "sandbox $N's accept loop reached idle-gc-start before it accepted the mount's connection (its idle time, 3 s, was up before python3 connected)"
echo go >"$WORK/go"
wait "$MOUNTER" || fail "the mount sent while the accept loop was held failed"
grep -q '"ok"' "$WORK/mount-i.out" || fail "the mount of keep sent as sandbox $N's idle gc was to start: $(cat "$WORK/mount-i.out")"
ok
fault_release "$WORK/gc"
wait_logged "$LAYERFS_HOME/sandboxes/ig-$N/daemon.log" "project gc(: removed| at the idle close)"
assert_eq "$(deleted)" 1 "deletions counted after an idle gc that a mount came before"
grep -q "project gc at the idle close stopped" "$LAYERFS_HOME/sandboxes/ig-$N/daemon.log" ||
        fail "the idle gc a mount came before did not stop: $(grep "project gc" "$LAYERFS_HOME/sandboxes/ig-$N/daemon.log")"
ok
unmount_closes "a mount stopped the idle gc before it started"
finish
