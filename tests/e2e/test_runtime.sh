#!/usr/bin/env bash
# The Linux Sandbox runtime against the real kernel: exec in a cgroup per command, exit
# codes and streams, background processes that detach, teardown by close, idle close and
# reclaim, records that lie, and creates that fail half-way. After each part: no
# process, mount, cgroup, directory or record of it is left.
# Everything below runs once per watcher: the contract must not depend on it.
# TEST_WATCHERS names fewer: make check runs each watcher once in the normal build, bpf in
# the default pass and the others in the native one (the Makefile's E2E_WATCHERS,
# NATIVE_WATCHERS); test_watcher.sh runs every watcher's own code in every pass.
if [ -z "${LAYERFS_WATCHER:-}" ]; then
        # A run that skipped (77) makes the whole a skip, once every watcher has run.
        result=0
        for watcher in ${TEST_WATCHERS:-bpf proc cgroup}; do
                echo "-- LAYERFS_WATCHER=$watcher"
                LAYERFS_WATCHER=$watcher bash "$0" || {
                        status=$?
                        [ "$status" -eq 77 ] || exit "$status"
                        result=77
                }
        done
        exit "$result"
fi
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
# A process this test borrows the pid of, ended with the rest.
TEARDOWN_EXTRA='[ -n "${DECOY_PID:-}" ] && kill "$DECOY_PID" 2>/dev/null'

# cgroup_of N: the cgroup Sandbox N's record names.
cgroup_of() { records "SELECT cgroup FROM sandboxes WHERE number=$1"; }

# alive PID...: all of them still run (and are not zombies). Read by bash itself, not by
# a process per pid: close is checked against a thousand pids, and an awk each was two
# thirds of this test's time.
alive() {
        local p stat
        for p in "$@"; do
                # A zombie has ended; a process reaped between two reads too. The state is
                # the field after the command's name, which ends at the line's last ')'.
                stat=
                { read -r stat <"/proc/$p/stat"; } 2>/dev/null || true
                stat=${stat##*) }
                case "${stat%% *}" in "" | Z | X) return 1 ;; esac
        done
}
none_alive() {
        local p
        for p in "$@"; do
                if alive "$p"; then return 1; fi
        done
}

mkdir -p "$WORK/src/sub"
printf 'hello\n' >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# ---- 1. exec: identity, exit codes, streams, stdin, env, cwd, timeout ----------------
SB=$(lfs sandbox create)
# The daemon runs in its Sandbox's leaf 'daemon' (cloned into it; with LAYERFS_NO_CLONE3=1
# forked and moved there), so that ending the Sandbox's cgroup ends it too.
daemon_in_leaf() {
        local pid
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$1")
        case "$(cat "/proc/$pid/cgroup")" in
        *"/layerfs-test-$$/"????????"-p-$1/daemon") ok ;;
        *) fail "$2: sandbox $1's daemon $pid is not in its leaf: $(cat "/proc/$pid/cgroup")" ;;
        esac
}
daemon_in_leaf "$SB" "clone3"
WS=$(lfs workspace mount "$SB" main)
x() { lfs workspace exec "$SB" main "$@"; }
assert_eq "$(x -- id -u):$(x -- id -g):$(x -- id -G)" "501:20:20" "command identity"
assert_eq "$(x -- sh -c 'echo $HOME $TMPDIR')" "$LAYERFS_HOME/sandboxes/p-$SB/tmp $LAYERFS_HOME/sandboxes/p-$SB/tmp" "HOME and TMPDIR"
assert_eq "$(x -- sh -c 'touch $TMPDIR/t && stat -c %u:%g $TMPDIR/t')" "501:20" "the private tmp is the command's"
assert_eq "$(x -- pwd)" "$WS" "starts in the Workspace"
assert_eq "$(x --cwd sub -- pwd)" "$WS/sub" "--cwd relative"
assert_eq "$(x --cwd "$WS/sub" -- pwd)" "$WS/sub" "--cwd absolute inside"
expect_error InvalidInput x --cwd ../.. -- pwd
expect_error InvalidInput x --cwd /etc -- pwd
expect_error InvalidInput x --cwd nowhere -- pwd
expect_error InvalidInput x --env NOEQUALS -- true
expect_error InvalidInput x --timeout -1 -- true
expect_error NotMounted lfs workspace exec "$SB" other -- true
assert_eq "$(x --env A=1 --env B='two words' -- sh -c 'echo "$A|$B"')" "1|two words" "env"
assert_eq "$(x -- cat hello.txt)" "hello" "reads the Branch"
assert_eq "$(printf 'in put' | x -- cat)" "in put" "stdin"
code() {
        set +e
        x "$@" >/dev/null 2>&1
        echo $?
        set -e
}
assert_eq "$(code -- true)" 0 "exit 0"
assert_eq "$(code -- false)" 1 "exit 1"
assert_eq "$(code -- sh -c 'exit 42')" 42 "exit 42"
assert_eq "$(code -- no-such-command-here)" 127 "not found"
assert_eq "$(code -- ./hello.txt)" 126 "not executable"
assert_eq "$(code -- sh -c 'kill -9 $$')" 137 "SIGKILL"
assert_eq "$(code -- sh -c 'kill -15 $$')" 143 "SIGTERM"
# 3 MiB on each stream at once, byte for byte.
head -c 3145728 /dev/urandom >"$WORK/blob"
cp "$WORK/blob" "$WS/blob"
x -- sh -c 'cat blob; cat blob >&2' >"$WORK/out" 2>"$WORK/err"
cmp "$WORK/blob" "$WORK/out" || fail "3 MiB stdout differs"
cmp "$WORK/blob" "$WORK/err" || fail "3 MiB stderr differs"
ok
x -- cat <"$WORK/blob" >"$WORK/echoed"
cmp "$WORK/blob" "$WORK/echoed" || fail "3 MiB through stdin differs"
ok
# The user's timeout ends the command's whole cgroup: its children too, setsid or not.
# Both children are found on the host while they live (the command says when, on a fifo),
# so that the check after the timeout has both to look at, not none.
mkfifo "$WORK/started"
# (set +e: its exit 124 is the result, not a failure of the test.)
(
        set +e
        x --timeout 5 -- sh -c 'sleep 300 & echo $! > kids; setsid sleep 301 & echo $! >> kids; echo started; wait'
) >"$WORK/started" &
timed=$!
exec 3<"$WORK/started"
read -r started <&3 || true
assert_eq "$started" started "the command that times out started its children"
# shellcheck disable=SC2046
kids=$(host_pids "$SB" $(cat "$WS/kids"))
assert_eq "$(echo "$kids" | wc -w)" 2 "children of the command found alive before its timeout ($kids)"
status=0
wait "$timed" || status=$?
exec 3<&-
assert_eq "$status" 124 "timeout"
# shellcheck disable=SC2086
none_alive $kids || fail "a child of a timed-out command lives on: $kids"
ok
assert_eq "$(x --json -- true | json_get 'j["exit"]')" 0 "--json exit"
# The fallback spawn (fork + cgroup.procs) puts the command in its own leaf too.
lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null
LAYERFS_NO_CLONE3=1 lfs sandbox create >/dev/null
SB=1
daemon_in_leaf "$SB" "LAYERFS_NO_CLONE3=1"
WS=$(lfs workspace mount "$SB" main)
# (In a namespaces Sandbox's cgroup namespace, whose root is the leaf of its init, the
# leaf reads as /../cmd-N.)
case "$(x -- cat /proc/self/cgroup)" in
*"/layerfs-test-$$/"????????"-p-1/cmd-"* | *"0::/../cmd-"*) ok ;;
*) fail "with LAYERFS_NO_CLONE3=1 the command is not in its leaf: $(x -- cat /proc/self/cgroup)" ;;
esac
lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null
assert_nothing_left "exec"

# ---- 2. background processes: close, idle close, reclaim -------------------------------
# start_background: a nohup writer, a setsid sleeper and a double-forked daemon; their
# pids in BG.
start_background() {
        x -- sh -c '
                nohup sh -c "while :; do echo x >> w.log; sleep 0.1; done" >/dev/null 2>&1 &
                echo $! > bg
                setsid sleep 1000 >/dev/null 2>&1 &
                echo $! >> bg
                sh -c "sleep 1001 >/dev/null 2>&1 & echo \$! >> bg" &
                sleep 0.3'
        BG=$(host_pids "$SB" $(cat "$WS/bg"))
        [ "$(echo "$BG" | wc -w)" = 3 ] || fail "expected 3 background pids, got: $BG"
        # shellcheck disable=SC2086
        alive $BG || fail "the background processes did not start: $BG"
}

SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
start_background
# shellcheck disable=SC2086
expect_error Busy lfs workspace unmount "$SB" main --discard
# shellcheck disable=SC2086
alive $BG || fail "a refused unmount ended background processes"
lfs sandbox close "$SB" --force >/dev/null
# shellcheck disable=SC2086
none_alive $BG || fail "close left background processes: $BG"
assert_nothing_left "close with background processes"

SB=$(LAYERFS_IDLE_SECONDS=2 lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
x -- sh -c 'cd $TMPDIR && nohup sh -c "while :; do echo x >> w.log; sleep 0.1; done" >/dev/null 2>&1 & echo $! > $TMPDIR/bg; setsid sh -c "cd /; sleep 1000" >/dev/null 2>&1 & echo $! >> $TMPDIR/bg; (sh -c "cd /; sleep 1001 >/dev/null 2>&1 & echo \$! >> $TMPDIR/bg" &); sleep 0.2'
BG=$(host_pids "$SB" $(cat "$LAYERFS_HOME/sandboxes/p-$SB/tmp/bg"))
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
lfs workspace unmount "$SB" main --discard >/dev/null
for _ in $(seq 100); do
        [ "$(records)" = 0 ] && break
        sleep 0.1
done
assert_eq "$(records)" 0 "idle close removed the record"
# The record goes as the daemon's last act: its exit follows.
wait_exit "$DAEMON" 30 || fail "the daemon $DAEMON did not exit after its record went"
# shellcheck disable=SC2086
none_alive $BG || fail "idle close left background processes: $BG"
assert_nothing_left "idle close"
# A call that lands as the idle close begins is answered or refused NoSuchSandbox,
# never left without an answer.
for delay in 0.95 1.0 1.02 1.05 1.1 1.2; do
        SB=$(LAYERFS_IDLE_SECONDS=1 lfs sandbox create)
        DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
        sleep "$delay"
        set +e
        out=$(lfs workspace mount "$SB" main 2>&1)
        rc=$?
        set -e
        case "$rc:$out" in
        0:*) lfs sandbox close "$SB" --force >/dev/null ;;
        "125:NoSuchSandbox: "*) ;;
        *) fail "a mount as the idle close began (after ${delay}s): exit $rc: $out" ;;
        esac
        for _ in $(seq 100); do
                [ "$(records)" = 0 ] && break
                sleep 0.1
        done
        # No pid read: the idle close had removed the record already (its last act).
        [ -z "$DAEMON" ] || wait_exit "$DAEMON" 30 || fail "the daemon $DAEMON did not exit after its record went"
done
ok
assert_nothing_left "calls racing the idle close"

SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
start_background
kill_daemon "$SB"
grep -qF "$WS" /proc/mounts || fail "the dead daemon's mount should still be there before reclaim"
out=$(lfs runtime reclaim)
case "$out" in *"reclaimed sandbox $SB of p"*) ok ;; *) fail "reclaim said: $out" ;; esac
# shellcheck disable=SC2086
none_alive $BG || fail "reclaim left background processes: $BG"
assert_nothing_left "reclaim"

# ---- 3. a thousand processes, half of them detached ------------------------------------
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
x -- sh -c 'i=0; while [ $i -lt 500 ]; do sleep 1000 & setsid sh -c "sleep 1000 &" ; i=$((i+1)); done'
procs=$(cat "$(cgroup_of "$SB")"/cmd-*/cgroup.procs | wc -l)
[ "$procs" -ge 1000 ] || fail "expected 1000 processes in the command's cgroup, found $procs"
ok
pids=$(cat "$(cgroup_of "$SB")"/cmd-*/cgroup.procs)
lfs sandbox close "$SB" --force >/dev/null
# shellcheck disable=SC2086
none_alive $pids || fail "close left some of the 1000 processes: $(for p in $pids; do alive $p && echo "$p $(tr '\0' ' ' </proc/$p/cmdline) $(cat /proc/$p/cgroup | tail -1)"; done | head -5)"
assert_nothing_left "1000 processes"

# ---- 3b. close --force while something outside the Sandbox still uses the mount -------
# A shell of the user's with its cwd in the Workspace, a file held open from outside:
# they are not the Sandbox's to end, but they must not keep close waiting (the FUSE
# connection is aborted; they get ENOTCONN) nor keep the mount.
# Both get the cwd and the open file at their fork, from this shell: they hold the mount
# before the unmount below is asked, however late they run. (A child's own cd or open,
# '(cd "$WS" && exec sleep 1000) &', is not ordered before it: a child that had not run
# yet let the unmount succeed.)
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
cd "$WS"
sleep 1000 &
OUT_CWD=$!
cd "$OLDPWD"
exec 4<"$WS/hello.txt"
sleep 1000 <&4 4<&- &
OUT_FILE=$!
exec 4<&-
TEARDOWN_EXTRA='kill $OUT_CWD $OUT_FILE ${DECOY_PID:-} 2>/dev/null'
expect_error Busy lfs workspace unmount "$SB" main --discard
timeout 60 "$LAYERFS" sandbox close "$SB" --force >/dev/null || fail "close --force with outside users of the mount did not finish"
ok
alive $OUT_CWD $OUT_FILE || fail "close ended processes that are not the Sandbox's"
ok
ls "/proc/$OUT_CWD/cwd/" >/dev/null 2>&1 && fail "the outside process still sees the Workspace through its cwd"
ok
kill $OUT_CWD $OUT_FILE
wait $OUT_CWD $OUT_FILE 2>/dev/null || true
assert_nothing_left "close with outside users"
# A copy of the mount in another mount namespace (unshare -m, a container) keeps the
# FUSE connection after our unmount succeeds: unmount and close must still finish.
# mount_copy: such a process in OUT_NS, once it has its copy (a sleep of 0.3 s does not
# say it has: an unmount before the copy tests nothing).
mount_copy() {
        fault_fifo "$WORK/copied"
        unshare -m --propagation private sh -c 'echo copied >"$1"; exec sleep 1000' sh "$WORK/copied" &
        OUT_NS=$!
        fault_reached "$OUT_NS" "$WORK/copied" >/dev/null || fail "unshare -m ended before it had its copy of the mounts"
}
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
TEARDOWN_EXTRA='kill ${OUT_NS:-} ${DECOY_PID:-} 2>/dev/null'
mount_copy
timeout 60 "$LAYERFS" workspace unmount "$SB" main --discard >/dev/null || fail "unmount with a copy of the mount in another namespace did not finish"
ok
WS=$(lfs workspace mount "$SB" main)
kill $OUT_NS
wait $OUT_NS 2>/dev/null || true
mount_copy
timeout 60 "$LAYERFS" sandbox close "$SB" --force >/dev/null || fail "close with a copy of the mount in another namespace did not finish"
ok
alive $OUT_NS || fail "close ended a process that is not the Sandbox's"
kill $OUT_NS
wait $OUT_NS 2>/dev/null || true
assert_nothing_left "unmount and close with a copy of the mount elsewhere"

# ---- 3c. an exec racing an unmount runs in the Workspace or is refused ---------------
# Never in the empty directory the unmount leaves behind, never with a stray error.
SB=$(lfs sandbox create)
for i in $(seq 15); do
        WS=$(lfs workspace mount "$SB" main)
        (
                set +e
                lfs workspace exec "$SB" main -- sh -c 'echo important >result.txt' >"$WORK/race.out" 2>&1
                echo $? >"$WORK/race.rc"
        ) &
        race=$!
        lfs workspace unmount "$SB" main --discard >/dev/null 2>&1 || true
        wait $race
        rc=$(cat "$WORK/race.rc")
        case "$rc:$(cat "$WORK/race.out")" in
        0: | "125:NotMounted: "*) ;;
        *) fail "exec racing unmount (round $i): exit $rc: $(cat "$WORK/race.out")" ;;
        esac
        grep -q " $WS " /proc/mounts && lfs workspace unmount "$SB" main --discard >/dev/null
        [ ! -e "$WS/result.txt" ] || fail "exec racing unmount wrote under the mount point"
done
ok
# Once started, an exec holds the mount only through what its command holds: one that
# left the Workspace does not keep it Busy.
# The command says when it has left (a sleep of 1 s does not say it has), and ends only
# after the unmount: on fifos in its TMPDIR, which every runtime's view shows.
WS=$(lfs workspace mount "$SB" main)
tmp="$LAYERFS_HOME/sandboxes/p-$SB/tmp"
fault_fifo "$tmp/left"
fault_fifo "$tmp/unmounted"
lfs workspace exec "$SB" main -- sh -c 'cd /; echo left >"$TMPDIR/left"; read -r go <"$TMPDIR/unmounted"' &
away=$!
fault_reached "$away" "$tmp/left" >/dev/null || fail "the exec that leaves the Workspace ended before it left"
lfs workspace unmount "$SB" main >/dev/null || fail "an exec whose command left the Workspace kept it busy"
ok
fault_release "$tmp/unmounted"
wait $away
lfs sandbox close "$SB" --force >/dev/null
assert_nothing_left "exec racing unmount"

# ---- 4. the daemon SIGKILLed: refused, reclaimed by list_sandboxes, data intact -------
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
x -- sh -c 'echo committed > kept.txt'
lfs workspace commit "$SB" main -m "keep this" >/dev/null
x -- sh -c 'echo lost > uncommitted.txt'
kill_daemon "$SB"
for _ in $(seq 50); do
        set +e
        msg=$(lfs workspace status "$SB" main 2>&1 >/dev/null)
        set -e
        case "$msg" in NoSuchSandbox:*) break ;; esac
        sleep 0.1
done
expect_error NoSuchSandbox lfs workspace status "$SB" main
expect_error NoSuchSandbox x -- true
case "$msg" in *"runtime reclaim"*) ok ;; *) fail "the refusal does not name the reclaim: $msg" ;; esac
lfs project list_sandboxes >/dev/null
assert_nothing_left "list_sandboxes reclaims"
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
assert_eq "$(x -- cat kept.txt)" "committed" "committed data after the kill"
[ ! -e "$WS/uncommitted.txt" ] || fail "an uncommitted file came back"
lfs project verify >/dev/null
lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null
assert_nothing_left "after the kill"

# ---- 5. a record that points elsewhere is refused; nothing there is touched -----------
SB=$(lfs sandbox create)
mkdir -p "$WORK/srv/data"
echo precious >"$WORK/srv/data/file"
real_dir="$LAYERFS_HOME/sandboxes/p-$SB"
real_cgroup=$(cgroup_of "$SB")
for bad in "$WORK/srv/data" "$WORK/old-home/sandboxes/p-$SB" "$LAYERFS_HOME/sandboxes/p-99" \
        "sandboxes/p-$SB" "$LAYERFS_HOME/sandboxes/p-$SB/../../../srv/data"; do
        records "UPDATE sandboxes SET dir='$bad' WHERE number=$SB"
        expect_error InvalidInput lfs workspace mount "$SB" main
        expect_error InvalidInput lfs sandbox close "$SB" --force
        lfs runtime reclaim >/dev/null
        assert_eq "$(records)" 1 "a refused record stays"
        assert_eq "$(cat "$WORK/srv/data/file")" precious "nothing at $bad was touched"
done
records "UPDATE sandboxes SET cgroup='$CG_MOUNT' WHERE number=$SB"
expect_error InvalidInput lfs sandbox close "$SB" --force
# A cgroup not tagged by this home (<root>/<project>-<n> is every home's) is refused too.
records "UPDATE sandboxes SET dir='$real_dir', cgroup='$CGR/p-$SB' WHERE number=$SB"
expect_error InvalidInput lfs sandbox list_workspaces "$SB"
records "UPDATE sandboxes SET cgroup='$real_cgroup' WHERE number=$SB"
lfs sandbox close "$SB" >/dev/null
assert_nothing_left "records pointing elsewhere"

# ---- 5b. two homes with the same project and numbers do not share cgroups --------------
# The cgroup root is one per host, so a Sandbox's cgroup is tagged by its home: closing
# sandbox 1 of project p in one home must not end sandbox 1 of project p in another.
HOME2="$WORK/home2"
h2() { LAYERFS_HOME=$HOME2 lfs "$@"; }
h2 project init p --from "$WORK/src" >/dev/null
SB=$(lfs sandbox create)
SB2=$(h2 sandbox create)
assert_eq "$SB:$SB2" "1:1" "both homes number their first Sandbox 1"
[ "$(cgroup_of "$SB")" != "$(LAYERFS_HOME=$HOME2 records "SELECT cgroup FROM sandboxes WHERE number=1")" ] ||
        fail "two homes share the cgroup $(cgroup_of "$SB")"
ok
WS=$(lfs workspace mount "$SB" main)
WS2=$(h2 workspace mount "$SB2" main)
h2 process start "$SB2" main -- sleep 1000 >/dev/null
other=$(cat "$(LAYERFS_HOME=$HOME2 records "SELECT cgroup FROM sandboxes WHERE number=1")"/cmd-*/cgroup.procs)
[ -n "$other" ] || fail "the other home's sleeper is not in its cgroup"
lfs sandbox close "$SB" --force >/dev/null
# shellcheck disable=SC2086
alive $other || fail "closing sandbox 1 of one home ended sandbox 1 of another"
ok
assert_eq "$(h2 workspace exec "$SB2" main -- cat "$WS2/hello.txt" 2>&1)" hello "the other home's Sandbox still works"
h2 sandbox close "$SB2" --force >/dev/null
# shellcheck disable=SC2086
none_alive $other || fail "the other home's close left its sleeper"
ok
assert_nothing_left "two homes"

# ---- 6. a record whose pid is now someone else's is dead; that process is untouched ----
sleep 1000 &
DECOY_PID=$!
decoy_start=$(awk '{print $22}' "/proc/$DECOY_PID/stat")
sleep 0.05 # start times are in clock ticks: the daemon's must differ from the decoy's
SB=$(lfs sandbox create)
[ "$(records "SELECT start_time FROM sandboxes WHERE number=$SB")" != "$decoy_start" ] ||
        fail "the decoy and the daemon started in the same clock tick"
records "UPDATE sandboxes SET pid=$DECOY_PID WHERE number=$SB" # start time stays the daemon's
expect_error NoSuchSandbox lfs workspace mount "$SB" main
lfs runtime reclaim >/dev/null
alive "$DECOY_PID" || fail "a process with the record's pid (other start time) was signalled"
assert_nothing_left "pid reused, other start time"
SB=$(lfs sandbox create)
records "UPDATE sandboxes SET pid=$DECOY_PID, start_time=$decoy_start, boot_id='00000000-0000-0000-0000-000000000000' WHERE number=$SB"
expect_error NoSuchSandbox lfs workspace mount "$SB" main
lfs sandbox close "$SB" --force >/dev/null
alive "$DECOY_PID" || fail "a process with the record's pid and start time (other boot) was signalled"
assert_nothing_left "pid reused, other boot"
kill "$DECOY_PID"
DECOY_PID=

# ---- 7. process start, list, kill ------------------------------------------------------
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
sleep 1000 &
DECOY_PID=$!
p1=$(lfs process start "$SB" main -- sh -c 'echo to-the-log; setsid sleep 1000 >/dev/null 2>&1 & exec sleep 999')
p2=$(lfs process start "$SB" main --env CODE=7 -- sh -c 'exit $CODE')
for _ in $(seq 50); do
        lfs --json process list "$SB" >"$WORK/ps.json"
        [ "$(json_get 'len([p for p in j if p["state"] == "exited"])' <"$WORK/ps.json")" = 1 ] && break
        sleep 0.1
done
assert_eq "$(json_get '[p["exit"] for p in j if p["pid"] == '"$p2"'][0]' <"$WORK/ps.json")" 7 "exit status of a started process"
assert_eq "$(json_get 'len([p for p in j if p["state"] == "running"])' <"$WORK/ps.json")" 2 "two processes of the first start live (one detached)"
assert_eq "$(json_get '[p["command"] for p in j if p["pid"] == '"$p1"'][0]' <"$WORK/ps.json")" "sleep 999" "command line"
detached=$(json_get '[p["pid"] for p in j if p["state"] == "running" and p["pid"] != '"$p1"'][0]' <"$WORK/ps.json")
grep -q to-the-log "$LAYERFS_HOME/sandboxes/p-$SB/processes/cmd-"*.log || fail "the started process's output is not in its log"
ok
expect_error InvalidInput lfs process kill "$SB" "$DECOY_PID"
expect_error InvalidInput lfs process kill "$SB" 1
alive "$DECOY_PID" || fail "process kill signalled a process outside the Sandbox"
lfs process kill "$SB" "$p1" >/dev/null
for _ in $(seq 50); do
        none_alive "$p1" && break
        sleep 0.1
done
none_alive "$p1" || fail "process kill did not end $p1"
alive "$detached" || fail "process kill of one process ended another"
expect_error Busy lfs workspace unmount "$SB" main # the detached sleeper's cwd is in it
lfs sandbox close "$SB" >/dev/null
none_alive "$detached" || fail "close left a started process's child"
alive "$DECOY_PID" || fail "close signalled a process outside the Sandbox"
kill "$DECOY_PID"
DECOY_PID=
assert_nothing_left "process start"

# ---- 8. refusals before anything is made; failures after the daemon started -----------
LAYERFS_SANDBOX=bogus expect_error InvalidInput lfs sandbox create
LAYERFS_RUNTIME=bogus expect_error InvalidInput lfs sandbox create
expect_error Unsupported setpriv --reuid=65534 --regid=65534 --clear-groups "$LAYERFS" sandbox create
chmod 700 "$WORK"
set +e
msg=$(lfs sandbox create 2>&1)
set -e
chmod 711 "$WORK"
case "$msg" in "PermissionDenied: "*"$WORK "*) ok ;; *) fail "an untraversable home said: $msg" ;; esac
assert_nothing_left "refusals"
for failure in record daemon-no-socket; do
        LAYERFS_INJECT_FAILURE=$failure expect_error Failed lfs sandbox create
        assert_nothing_left "create failing at $failure"
        left=$(pids_matching "layerfs-daemon --home $LAYERFS_HOME")
        [ -z "$left" ] || fail "$failure: a daemon is left: $left"
        assert_eq "$(lfs sandbox create)" 1 "$failure: the number is free again"
        lfs sandbox close 1 >/dev/null
done
# The daemon's last words are in the message, on its one line (a newline in a message is
# printed escaped: it showed as a literal \n).
set +e
msg=$(LAYERFS_INJECT_FAILURE=daemon-no-socket lfs sandbox create 2>&1)
set -e
case "$msg" in
*"the daemon's log ended with: '"*"daemon-no-socket: not listening'") ;;
*) fail "the daemon's log is not at the end of the message: $msg" ;;
esac
case "$msg" in *'\n'*) fail "the log's lines printed with a literal \\n: $msg" ;; esac
assert_nothing_left "a failed create's message"
assert_nothing_left "the end"
echo "ok: $(basename "$0") ($CHECKS checks)"
