#!/usr/bin/env bash
# The namespaces runtime against the real kernel (LAYERFS_RUNTIME=namespaces): the record
# names it and the Sandbox's own id range; its commands run as 501:20 inside and as that
# range's ids on the host, in the Sandbox's pid namespace (pid 1 its init, nothing of the
# host's processes in sight), mount view (the host's root read-only, HOME, /tmp and the
# Workspaces writable, nothing of the home but those), net namespace (lo only, up) and
# uts namespace (hostname sandbox-N). Exit codes, streams, background processes and
# commits are as native's. Close leaves no process, mount, namespace, cgroup, directory
# or record.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
# A range of this test's own: a range that a process of the host runs in (another home's
# Sandbox, with the same default range) is skipped, so the default's first ones may be
# taken while this runs.
FIRST=$((2147483648 + ($$ % 4096) * 262144))
export LAYERFS_ID_RANGE=$FIRST:262144

mkdir -p "$WORK/src/sub"
printf 'hello\n' >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

SB=$(lfs sandbox create)
assert_eq "$(records "SELECT platform, runtime FROM sandboxes WHERE number=$SB")" "linux|namespaces" \
        "the record names the platform and the runtime"
BASE=$(records "SELECT id_base FROM sandboxes WHERE number=$SB")
assert_eq "$BASE" "$FIRST" "the first Sandbox takes the first range of LAYERFS_ID_RANGE"
CG=$(records "SELECT cgroup FROM sandboxes WHERE number=$SB")
INIT=$(cat "$CG/init/cgroup.procs")
[ -n "$INIT" ] || fail "no init in $CG/init"
assert_eq "$(stat -c %u:%g "/proc/$INIT")" "$BASE:$BASE" "the init is root of the Sandbox's ids, not the host's root"
# The range's host-wide lock: the init keeps it (fd 4), so no other create of any home
# takes the range while the Sandbox lives.
LOCKS=/run/layerfs/ids
assert_eq "$(readlink "/proc/$INIT/fd/4")" "$LOCKS/$BASE" "the init keeps its range's lock"
! flock -n "$LOCKS/$BASE" true || fail "the lock of sandbox $SB's range is free while it runs"
ok
# Its namespaces, to find them gone after the close.
NS=""
for kind in user pid mnt ipc uts net cgroup; do
        ino=$(readlink "/proc/$INIT/ns/$kind")
        [ "$ino" != "$(readlink "/proc/self/ns/$kind")" ] || fail "the init shares the host's $kind namespace"
        NS="$NS $ino"
done
ok

WS=$(lfs workspace mount "$SB" main)
x() { lfs workspace exec "$SB" main "$@"; }

# ---- identity, pid namespace ----
assert_eq "$(x -- id -u):$(x -- id -g):$(x -- id -G)" "501:20:20" "the command identity inside"
assert_eq "$(x -- sh -c 'touch $TMPDIR/mine; stat -c %u:%g $TMPDIR/mine')" "501:20" "its files, inside"
assert_eq "$(stat -c %u:%g "$LAYERFS_HOME/sandboxes/p-$SB/tmp/mine")" "$((BASE + 501)):$((BASE + 20))" \
        "its files, on the host: the Sandbox's own ids"
assert_eq "$(x -- cat /proc/1/comm)" "layerfs-init" "pid 1 is the Sandbox's init"
# Every process in sight is the init or this command (ps).
seen=$(x -- ps -eo comm= | sort -u | tr '\n' ' ')
assert_eq "$seen" "layerfs-init ps " "ps shows the Sandbox's processes only"
assert_eq "$(x -- readlink /proc/self/ns/pid)" "$(readlink "/proc/$INIT/ns/pid")" \
        "the command is in the init's pid namespace"

# ---- exec as native's ----
assert_eq "$(x -- pwd)" "$WS" "starts in the Workspace, at the path outside"
assert_eq "$(x --cwd sub -- pwd)" "$WS/sub" "--cwd"
assert_eq "$(x -- cat hello.txt)" "hello" "reads its Workspace"
assert_eq "$(x -- stat -c %u:%g hello.txt)" "501:20" "the Workspace's files are the command identity's inside"
set +e
x -- sh -c 'echo out; echo err >&2; exit 7' >"$WORK/out" 2>"$WORK/err"
status=$?
set -e
assert_eq "$status:$(cat "$WORK/out"):$(cat "$WORK/err")" "7:out:err" "streams and exit code"
assert_eq "$(echo piped | x -- cat)" "piped" "stdin"
set +e
x -- sh -c 'kill -9 $$'
status=$?
set -e
assert_eq "$status" 137 "killed by a signal: 128+N"

# ---- the mount view ----
x -- sh -c 'echo new > new.txt' >/dev/null
assert_eq "$(x -- sh -c 'echo t > /tmp/t && cat /tmp/t; echo h > $HOME/h && cat $HOME/h')" "t
h" "/tmp and HOME are writable"
for target in /etc/layerfs-written /usr/layerfs-written /layerfs-written "$WORK/layerfs-written"; do
        if x -- sh -c "echo x > $target" 2>/dev/null; then fail "a command wrote $target"; fi
        ok
done
[ ! -e "$WORK/layerfs-written" ] || fail "the write reached the host"
ok
if x -- test -e "$LAYERFS_HOME/home.db"; then fail "the records are in the Sandbox's view"; fi
ok
if x -- test -e "$LAYERFS_HOME/projects"; then fail "the Stores are in the Sandbox's view"; fi
ok
if x -- test -e "$LAYERFS_HOME/sandboxes/p-$SB/token"; then fail "the Sandbox's token is in its view"; fi
ok
assert_eq "$(x -- ls /dev | tr '\n' ' ')" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " \
        "/dev has the safe nodes only"
if x -- test -e /dev/sda -o -e /dev/fuse -o -e /dev/kmsg; then fail "a host device is in the view"; fi
ok
# A Workspace mounted after the Sandbox was made appears inside too.
lfs branch create second >/dev/null
WS2=$(lfs workspace mount "$SB" second)
assert_eq "$(lfs workspace exec "$SB" second -- cat hello.txt)" "hello" "a later Workspace, inside"
lfs workspace unmount "$SB" second >/dev/null
if x -- test -e "$WS2/hello.txt"; then fail "an unmounted Workspace is still seen inside"; fi
ok

# ---- net, uts ----
assert_eq "$(x -- ls /sys/class/net)" "lo" "only lo"
assert_eq "$(x -- sh -c 'ip -o link show lo | grep -c "[<,]UP[,>]"')" "1" "lo is up"
assert_eq "$(x -- hostname)" "sandbox-$SB" "the hostname"
assert_eq "$(hostname)" "$(cat /proc/sys/kernel/hostname)" "the host's hostname is unchanged"

# ---- commit: as native's ----
C=$(lfs --json workspace commit "$SB" main -m "from namespaces" | json_get 'j["commit"]')
[ -n "$C" ] || fail "no commit"
lfs branch export main "$WORK/out-tree" >/dev/null
assert_eq "$(cat "$WORK/out-tree/new.txt")" "new" "the commit holds the command's file"

# ---- background processes, teardown ----
PID=$(lfs process start "$SB" main -- setsid sh -c 'sleep 1000 & sleep 1000')
lfs process list "$SB" | grep -q "sleep 1000" || fail "process list does not show the background process"
ok
lfs sandbox close "$SB" >/dev/null
assert_nothing_left "after close"
wait_exit "$INIT" 10 || fail "the init still runs after the close"
ok
flock -n "$LOCKS/$BASE" true || fail "the lock of sandbox $SB's range is held after its close"
ok
for ino in $NS; do
        left=$(find /proc/[0-9]*/ns -lname "$ino" 2>/dev/null | head -3 || true)
        [ -z "$left" ] || fail "namespace $ino is still held: $left"
        ok
done
[ -z "${PID:-}" ] || ! kill -0 "$PID" 2>/dev/null || fail "background process $PID survived the close"
ok

# ---- ranges: one per Sandbox, free again after the close, refusals ----
A=$(lfs sandbox create)
B=$(lfs sandbox create)
assert_eq "$(records "SELECT id_base FROM sandboxes ORDER BY number" | tr '\n' ' ')" \
        "$FIRST $((FIRST + 65536)) " "two Sandboxes, two ranges, the first one free again"
expect_refusal LimitReached "LAYERFS_ID_RANGE $FIRST:131072" \
        env LAYERFS_ID_RANGE=$FIRST:131072 "$LAYERFS" sandbox create
expect_refusal InvalidInput "LAYERFS_ID_RANGE='5:10'" env LAYERFS_ID_RANGE=5:10 "$LAYERFS" sandbox create
expect_refusal InvalidInput "LAYERFS_RUNTIME='bogus'" env LAYERFS_RUNTIME=bogus "$LAYERFS" sandbox create
# A daemon with no layerfs-init beside it (a copy, or a half-made install): refused naming
# the init's path, with nothing made (the check comes before the view and the daemon).
mkdir "$WORK/lone"
printf '#!/bin/sh\nexec %s/layerfs-daemon "$@"\n' "$BUILD" >"$WORK/lone/layerfs-daemon"
chmod 755 "$WORK/lone/layerfs-daemon"
expect_refusal Failed "$WORK/lone/layerfs-init, beside the daemon" \
        env LAYERFS_DAEMON="$WORK/lone/layerfs-daemon" "$LAYERFS" sandbox create
assert_eq "$(records "SELECT count(*) FROM sandboxes")" 2 "no record of the refused create"
lfs sandbox close "$A" >/dev/null
lfs sandbox close "$B" >/dev/null
# A range whose lock another holds (another home's create, at the same instant) is skipped.
exec {lock_fd}>"$LOCKS/$FIRST"
flock -n "$lock_fd" || fail "cannot take the lock of $FIRST"
C=$(lfs sandbox create)
assert_eq "$(records "SELECT id_base FROM sandboxes WHERE number=$C")" "$((FIRST + 65536))" \
        "a range whose lock another holds is skipped"
lfs sandbox close "$C" >/dev/null
exec {lock_fd}>&-
# A host process with ids in a range holds it, even when it is not dumpable (as hardened
# programs make themselves, and as /proc/<pid>/status then shows root as its owner): create
# takes the next range. It says it is ready on a fifo once it is not dumpable any more.
mkfifo -m 666 "$WORK/held"
setpriv --reuid="$FIRST" --regid="$FIRST" --clear-groups /usr/bin/python3 -c '
import ctypes, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
open(sys.argv[1], "w").write("ready\n")
time.sleep(1000)' "$WORK/held" &
HOLDER=$!
read -r -t 60 _ <>"$WORK/held" || fail "the holder did not start"
assert_eq "$(stat -c %u "/proc/$HOLDER/status")" 0 "the holder is not dumpable"
C=$(lfs sandbox create)
assert_eq "$(records "SELECT id_base FROM sandboxes WHERE number=$C")" "$((FIRST + 65536))" \
        "a range a host process runs in is skipped"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
lfs sandbox close "$C" >/dev/null
assert_nothing_left "after the refusals"
# The locks of this test's own ranges (LAYERFS_ID_RANGE above): nothing holds them now.
rm -f "$LOCKS/$FIRST" "$LOCKS/$((FIRST + 65536))" "$LOCKS/$((FIRST + 131072))"
finish
