#!/usr/bin/env bash
# The exit watcher against the real kernel: with BPF, every process of a Sandbox is
# reported once when it ends, with its exit code, also grandchildren that setsid away, and
# a multithreaded process whose main thread exits first is reported once, when its last
# thread ends; the events agree with the leader's pidfd status; without BPF
# (LAYERFS_WATCHER=cgroup) the commands the daemon started are reported; an idle daemon
# uses no CPU; a BPF watcher that fails to join its root's programs
# (LAYERFS_INJECT_FAILURE=watcher-join) falls back to the cgroup watcher, or fails the
# create with LAYERFS_WATCHER=bpf.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
unset LAYERFS_WATCHER

lfs project init p >/dev/null

# ---- runtime status: probes that a test can reproduce ----------------------------------
lfs --json runtime status >"$WORK/status.json"
assert_eq "$(json_get 'j["watcher"]' <"$WORK/status.json")" bpf "the default watcher here"
assert_eq "$(json_get 'j["kernel"]["kernel:cgroup2"] and j["kernel"]["kernel:cgroup.kill"] and j["kernel"]["kernel:bpf"]' <"$WORK/status.json")" \
        True "cgroup2, cgroup.kill and bpf are here"
assert_eq "$(json_get 'set(m for m in j["missing"] if m in j["kernel"]) == set(k for k, v in j["kernel"].items() if not v)' <"$WORK/status.json")" True \
        "missing lists exactly the absent kernel features (and cgroup controllers)"
assert_eq "$(LAYERFS_WATCHER=cgroup lfs --json runtime status | json_get 'j["watcher"]')" cgroup "LAYERFS_WATCHER"
mkdir -p "$WORK/not-cgroup"
LAYERFS_CGROUP_ROOT="$WORK/not-cgroup/layerfs" lfs --json runtime status >"$WORK/status2.json"
assert_eq "$(json_get '"kernel:cgroup2" in j["missing"] and "kernel:cgroup.kill" in j["missing"]' <"$WORK/status2.json")" True \
        "a cgroup root outside cgroup2 is reported missing"
[ -z "$(ls -A "$WORK/not-cgroup")" ] || fail "runtime status made something outside cgroup2"
ok

# events N: the Sandbox's events, one JSON object per line, into $WORK/events.
events() { lfs sandbox events "$1" >"$WORK/events"; }
# py EXPR: evaluates EXPR with ev = the list of events in $WORK/events.
py() {
        python3 -c 'import json,sys; ev=[json.loads(l) for l in open(sys.argv[1])]; print(eval(sys.argv[2]))' \
                "$WORK/events" "$1"
}

# A process whose main thread exits first; its last thread ends it with 7.
cat >"$WORK/threads.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static void *late(void *arg) {
        (void)arg;
        usleep(500 * 1000);
        exit(7); /* the last thread ends the process with 7 */
}
int main(void) {
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
                pthread_create(&t[i], NULL, late, NULL);
        pthread_exit(NULL); /* the main thread goes first */
}
EOF
cc -O2 -pthread -o "$WORK/threads" "$WORK/threads.c"
chmod 755 "$WORK/threads"

# watcher_checks W: with watcher W (bpf or proc), every process is reported once with its
# exit code, orphans included; a multithreaded process once, at its last thread's end.
# The Sandbox stays open in SB for the checks that follow.
watcher_checks() {
        local W=$1 status=0
        # ---- 1,000 processes with known exit codes, half of them detached -----------------
        SB=$(LAYERFS_WATCHER=$W lfs sandbox create)
        grep -q "watcher $W" "$LAYERFS_HOME/sandboxes/p-$SB/daemon.log" || fail "the $W watcher is not in use"
        ok
        lfs workspace mount "$SB" main >/dev/null
        # Process i exits with i % 200. The even ones are children of the leader; each odd one is
        # started by a subshell that exits at once, then setsids and ends later as an orphan. The
        # leader waits for them all, then exits 250.
        lfs workspace exec "$SB" main -- sh -c '
                i=0
                while [ $i -lt 1000 ]; do
                        if [ $((i % 2)) = 0 ]; then
                                (exit $((i % 200))) &
                        else
                                (setsid sh -c "sleep 0.2; exit $((i % 200))" &)
                        fi
                        i=$((i + 1))
                done
                sleep 1
                exit 250' || status=$?
        assert_eq "${status:-0}" 250 "the leader's exit code (pidfd)"
        sleep 0.5
        events "$SB"
        leader=$(py '[e["pid"] for e in ev if e["event"] == "exit" and e.get("exit") == 250][0]')
        assert_eq "$(py 'sum(1 for e in ev if e["event"] == "exit" and e["pid"] == '"$leader"')')" 1 "the leader reported once"
        assert_eq "$(py 'len([e["pid"] for e in ev if e["event"] == "exit"]) - len(set(e["pid"] for e in ev if e["event"] == "exit"))')" 0 \
                "no exit reported twice"
        # The leader's children: 500 "(exit N)" with the even codes, 500 subshells and its own
        # sleep exiting 0. (Not told apart by comm: the proc tier reads it from /proc, late.)
        assert_eq "$(py 'sorted(__import__("collections").Counter(e["exit"] for e in ev if e["event"] == "exit" and e["ppid"] == '"$leader"').items())[:3]')" \
                "[(0, 506), (2, 5), (4, 5)]" "$W: the children's exit codes"
        assert_eq "$(py 'sum(1 for e in ev if e["event"] == "exit" and e["ppid"] == '"$leader"')')" 1001 \
                "$W: 1,001 children of the leader, once each"
        # The orphans: 500 with the odd codes, each five times, none with the leader as parent.
        assert_eq "$(py 'sorted(set(__import__("collections").Counter(e["exit"] for e in ev if e["event"] == "exit" and e["ppid"] != '"$leader"' and e["pid"] != '"$leader"' and e.get("exit", 0) % 2 == 1).values()))')" \
                "[5]" "$W: each orphan's exit code"
        assert_eq "$(py 'sum(1 for e in ev if e["event"] == "exit" and e["ppid"] != '"$leader"' and e["pid"] != '"$leader"' and e.get("exit", 0) % 2 == 1)')" 500 \
                "$W: 500 orphans that setsid away, once each"
        assert_eq "$(py 'all(e["cgroup"].startswith("cmd-") for e in ev)')" True "every event names its command's leaf"
        # The kernel's exit event can say parent 0 when the parent reaped at once: the watcher
        # names the parent anyway.
        assert_eq "$(py '[e["pid"] for e in ev if e["event"] == "exit" and not e.get("ppid")]')" "[]" \
                "$W: every exit names its parent"

        # ---- a multithreaded process whose main thread exits first -----------------------
        before=$(date +%s.%N)
        # In the Sandbox's TMPDIR: the host's /tmp is not in a namespaces Sandbox's view.
        install -m 755 "$WORK/threads" "$LAYERFS_HOME/sandboxes/p-$SB/tmp/threads"
        lfs process start "$SB" main -- "$LAYERFS_HOME/sandboxes/p-$SB/tmp/threads" >"$WORK/threads.pid"
        tpid=$(cat "$WORK/threads.pid")
        sleep 1
        events "$SB"
        assert_eq "$(py 'sum(1 for e in ev if e["event"] == "exit" and e["pid"] == '"$tpid"')')" 1 "a multithreaded process is reported once"
        assert_eq "$(py '[e["exit"] for e in ev if e["event"] == "exit" and e["pid"] == '"$tpid"'][0]')" 7 "with the last thread's exit code"
        assert_eq "$(py '[e["time"] for e in ev if e["event"] == "exit" and e["pid"] == '"$tpid"'][0] >= '"$before"' + 0.45')" True \
                "when its last thread ended, not its main thread"

        # ---- process list: live detached processes and the last exits -------------------------
        # The command ends once its detached child is sleep (not still the sh before exec).
        lfs workspace exec "$SB" main -- sh -c 'setsid sh -c "exec sleep 1000" >/dev/null 2>&1 </dev/null & p=$!
                for i in $(seq 1000); do [ "$(cat /proc/$p/comm 2>/dev/null)" = sleep ] && break; sleep 0.01; done
                (exit 9)' || true
        lfs --json process list "$SB" >"$WORK/ps.json"
        assert_eq "$(json_get 'sum(1 for p in j if p["state"] == "running" and p["command"] == "sleep 1000")' <"$WORK/ps.json")" 1 \
                "a detached live process is listed"
        assert_eq "$(json_get 'any(p["state"] == "exited" and p["exit"] == 9 for p in j)' <"$WORK/ps.json")" True \
                "an ended grandchild is listed with its exit status"
}

watcher_checks proc
lfs sandbox close "$SB" --force >/dev/null
watcher_checks bpf

# ---- sandbox events --follow streams until the Sandbox closes --------------------------
# The follower is streaming once it has printed the events kept so far (the Sandbox has
# some); the exit 42 comes after, as a new one. Its stream ends with the Sandbox, and so
# does it: exit status 0, like any call that did what was asked.
lfs sandbox events "$SB" --follow >"$WORK/follow" &
follower=$!
for _ in $(seq 300); do
        [ -s "$WORK/follow" ] && break
        kill -0 "$follower" 2>/dev/null || break
        sleep 0.1
done
[ -s "$WORK/follow" ] || fail "sandbox events --follow printed none of the events kept"
lfs workspace exec "$SB" main -- sh -c 'exit 42' || true
lfs sandbox close "$SB" --force >/dev/null
wait_exit "$follower" 30 || fail "sandbox events --follow did not end when the Sandbox closed"
status=0
wait "$follower" || status=$?
assert_eq "$status" 0 "the exit status of sandbox events --follow once the Sandbox closed"
grep -q '"exit":42' "$WORK/follow" ||
        fail "the follower did not stream the exit 42: $(tail -3 "$WORK/follow")"
ok

# ---- the default watcher loads beside the daemon's first answers -----------------------
# Held at watcher-loading (its programs not loaded): the create has answered, a mount is
# served, and a command waits; let go, the command runs and BPF sees all of it, also the
# grandchild that setsid away (which only BPF reports).
fault_fifo "$WORK/loading"
SB=$(LAYERFS_FAULT="watcher-loading@$WORK/loading" LAYERFS_WATCHER_LOAD_WAIT_MS=600000 timeout 60 "$LAYERFS" sandbox create) ||
        fail "sandbox create waited for the watcher's load"
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
fault_reached "$daemon" "$WORK/loading" 30 >/dev/null || fail "the daemon $daemon did not reach watcher-loading"
timeout 60 "$LAYERFS" workspace mount "$SB" main >/dev/null || fail "a mount waited for the watcher's load"
"$LAYERFS" workspace exec "$SB" main -- sh -c 'echo >$TMPDIR/started; (setsid sh -c "exit 5" &); exit 4' &
execpid=$!
sleep 1 # a command that did not wait would have written its file by now
[ ! -e "$LAYERFS_HOME/sandboxes/p-$SB/tmp/started" ] || fail "a command started before the watcher had loaded"
fault_release "$WORK/loading"
status=0
wait "$execpid" || status=$?
assert_eq "$status" 4 "the command that waited for the watcher"
[ -e "$LAYERFS_HOME/sandboxes/p-$SB/tmp/started" ] || fail "the command did not run"
for _ in $(seq 50); do
        events "$SB"
        [ "$(py 'any(e.get("exit") == 5 for e in ev)')" = True ] && break
        sleep 0.1
done
assert_eq "$(py 'any(e.get("exit") == 5 for e in ev)')" True "the setsid grandchild's exit, seen by BPF"
grep -q "BPF watcher loaded" "$LAYERFS_HOME/sandboxes/p-$SB/daemon.log" || fail "the watcher's load is not in the log"
lfs sandbox close "$SB" >/dev/null
ok

# The wait is a number of milliseconds from 100 to 600,000, refused before anything is made.
expect_refusal InvalidInput LAYERFS_WATCHER_LOAD_WAIT_MS env LAYERFS_WATCHER_LOAD_WAIT_MS=50 "$LAYERFS" sandbox create
expect_refusal InvalidInput LAYERFS_WATCHER_LOAD_WAIT_MS env LAYERFS_WATCHER_LOAD_WAIT_MS=5x "$LAYERFS" sandbox create
# So is the tests' size of a root's map of rings, from 1 to 4,096 (test_watcher_limit.sh).
for v in 12abc -1 0 4097 " 2"; do
        expect_refusal InvalidInput "LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT '$v'" \
                env LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT="$v" "$LAYERFS" sandbox create
done
ok

# A load held past LAYERFS_WATCHER_LOAD_WAIT_MS (a root's lock held by a stopped daemon, or
# by a local user's flock of its directory): the command goes on without BPF (the daemon
# reports what it started), and what loads later is left again, taking no place in the
# root's map.
fault_fifo "$WORK/loading3"
SB=$(LAYERFS_FAULT="watcher-loading@$WORK/loading3" LAYERFS_WATCHER_LOAD_WAIT_MS=1000 "$LAYERFS" sandbox create)
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
log=$LAYERFS_HOME/sandboxes/p-$SB/daemon.log
fault_reached "$daemon" "$WORK/loading3" 30 >/dev/null || fail "the daemon $daemon did not reach watcher-loading"
lfs workspace mount "$SB" main >/dev/null
status=0
timeout 60 "$LAYERFS" workspace exec "$SB" main -- sh -c 'exit 3' || status=$?
assert_eq "$status" 3 "a command after the load's deadline"
grep -q "the BPF watcher has not loaded in 1000 ms" "$log" || fail "the deadline is not in the log: $(cat "$log")"
events "$SB"
assert_eq "$(py '[e.get("exit") for e in ev if e["event"] == "exit"]')" "[3]" "its exit, reported by the daemon"
fault_release "$WORK/loading3"
for _ in $(seq 100); do
        grep -q "left again" "$log" && break
        sleep 0.1
done
grep -q "the BPF watcher loaded after the Sandbox had given up on it; left again" "$log" ||
        fail "a watcher loaded after the deadline was kept: $(cat "$log")"
lfs sandbox close "$SB" --force >/dev/null
ok

# Closed while its watcher still loads (held there for ever): neither the close nor a
# command waiting for the watcher waits for the load; the daemon's exit ends it.
fault_fifo "$WORK/loading2"
SB=$(LAYERFS_FAULT="watcher-loading@$WORK/loading2" "$LAYERFS" sandbox create)
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
fault_reached "$daemon" "$WORK/loading2" 30 >/dev/null || fail "the daemon $daemon did not reach watcher-loading"
lfs workspace mount "$SB" main >/dev/null
"$LAYERFS" workspace exec "$SB" main -- true 2>/dev/null &
execpid=$!
timeout 60 "$LAYERFS" sandbox close "$SB" --force >/dev/null || fail "the close waited for a watcher still loading"
wait_exit "$daemon" 30 || fail "the daemon $daemon still runs after its close"
status=0
timeout 30 tail --pid="$execpid" -f /dev/null || fail "a command waiting for the watcher outlived the close"
wait "$execpid" || status=$?
[ "$status" != 0 ] || fail "a command waiting for the watcher ran after the close"
[ -z "$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d)" ] || fail "cgroups left"
ok

# ---- without BPF: the daemon reports what it started ----------------------------------
SB=$(LAYERFS_WATCHER=cgroup lfs sandbox create)
grep -q "watcher cgroup" "$LAYERFS_HOME/sandboxes/p-$SB/daemon.log" || fail "LAYERFS_WATCHER=cgroup was not used"
ok
lfs workspace mount "$SB" main >/dev/null
lfs workspace exec "$SB" main -- sh -c 'exit 3' || true
p=$(lfs process start "$SB" main -- sh -c 'kill -TERM $$')
sleep 0.3
events "$SB"
assert_eq "$(py '[e.get("exit") for e in ev if e["event"] == "exit" and e["comm"] == "sh" and e.get("exit") is not None]')" "[3]" "exec's exit without BPF"
assert_eq "$(py '[e.get("signal") for e in ev if e["event"] == "exit" and e["pid"] == '"$p"']')" "[15]" "a started process's signal without BPF"
assert_eq "$(py 'sum(1 for e in ev if e["event"] == "start")')" 2 "the two starts"

# ---- an idle daemon uses no CPU --------------------------------------------------------
lfs workspace unmount "$SB" main >/dev/null
daemon=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$SB")
SB2=$(LAYERFS_WATCHER=bpf lfs sandbox create)
daemon2=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$SB2")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
a=$(ticks "$daemon") b=$(ticks "$daemon2")
sleep 10 # no timer of the daemon's fires while it is idle, so any span shows it
assert_eq "$(($(ticks "$daemon") - a))" 0 "CPU ticks of an idle daemon (cgroup watcher) over 10 s"
assert_eq "$(($(ticks "$daemon2") - b))" 0 "CPU ticks of an idle daemon (BPF watcher) over 10 s"
lfs sandbox close "$SB" >/dev/null
lfs sandbox close "$SB2" >/dev/null
[ -z "$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d)" ] || fail "cgroups left"
ok

# ---- BPF that fails to join: the cgroup watcher takes over; a forced one fails ----------
SB=$(LAYERFS_INJECT_FAILURE=watcher-join lfs sandbox create)
log=$LAYERFS_HOME/sandboxes/p-$SB/daemon.log
events "$SB" # answered once the watcher, loaded after the create's answer, has given up
grep -q "the BPF watcher did not load (Operation not permitted); watching with cgroup.events and pidfds" "$log" &&
        ! grep -q "BPF watcher loaded" "$log" || fail "no fallback to the cgroup watcher: $(cat "$log")"
ok
lfs workspace mount "$SB" main >/dev/null
lfs workspace exec "$SB" main -- sh -c 'exit 5' || true
events "$SB"
assert_eq "$(py '[e.get("exit") for e in ev if e["event"] == "exit" and e["comm"] == "sh" and e.get("exit") is not None]')" "[5]" \
        "exec's exit once BPF failed to join"
lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null
LAYERFS_WATCHER=bpf LAYERFS_INJECT_FAILURE=watcher-join expect_refusal Failed "the BPF watcher did not load (Operation not permitted)" \
        "$LAYERFS" sandbox create
[ -z "$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d)" ] || fail "cgroups left"
assert_eq "$(records)" 0 "records left"
ok
echo "ok: $(basename "$0") ($CHECKS checks)"
