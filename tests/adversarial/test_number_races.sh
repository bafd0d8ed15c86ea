#!/usr/bin/env bash
# Attack: concurrent callers on a reused Sandbox number (issue 12, item 2). With a dead
# record present, `create & create` printed the same number twice (each create's
# reclaim acted on its own stale copy of the dead record: the slower one killed the
# cgroup and deleted the row the faster one had just claimed, then claimed the number
# again). `close N --force & create` let the old close, after its daemon had deleted
# the row, remove the new Sandbox of the same number: the create failed ("daemon did
# not become ready") or its Sandbox was gone at once.
# Fixed by: every Sandbox instance has an identity of its own (instance, in its record
# and its daemon); a dead record is taken over for removal in one compare-and-swap on
# its owner, and removed, cgroup, directory and row, only by the one that took it; a
# close finishes only what its own instance left; numbers are claimed and released in
# transactions.
# Then rounds of concurrent create, close, kill -9 and reclaim on few numbers; after each
# round, no duplicate number, no lost Sandbox, nothing behind. `bash test_number_races.sh
# ROUNDS` runs more rounds (issue 12 asks for 50; make check runs 12).
source "$(dirname "$0")/../e2e/lib.sh"

ROUNDS=${1:-12}
use_private_sandboxes
export LAYERFS_WATCHER=cgroup # the races are in the records: the cheapest watcher will do
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# kill_daemon N: SIGKILL sandbox N's daemon and wait until it has ended (a process that
# is still exiting is alive: reclaim rightly leaves it alone).
kill_daemon() {
        local pid
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$1")
        kill -9 "$pid"
        for _ in $(seq 1000); do alive "$pid" || return 0; sleep 0.01; done
        fail "daemon $pid of sandbox $1 outlived SIGKILL"
}
mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# consistent WHAT: every record names a live daemon that answers, one per number; no
# daemon, cgroup or directory without its record.
consistent() {
        local what=$1 n pid daemons dirs cgroups want_dirs want_cgroups
        daemons=$(pgrep -f "layerfs-daemon --home $LAYERFS_HOME " | sort -n | tr '\n' ' ' || true)
        local pids=""
        for n in $(records "SELECT number FROM sandboxes ORDER BY number"); do
                pid=$(records "SELECT pid FROM sandboxes WHERE number=$n")
                assert_eq "$(records "SELECT state FROM sandboxes WHERE number=$n")" running "$what: sandbox $n's state"
                alive "$pid" || fail "$what: sandbox $n's daemon $pid is gone but its record stays"
                grep -q -- "--sandbox $n " <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline")" ||
                        fail "$what: sandbox $n's record names pid $pid, which is not its daemon: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
                lfs sandbox list_workspaces "$n" >/dev/null || fail "$what: sandbox $n does not answer"
                pids="$pids$pid"$'\n'
        done
        assert_eq "$daemons" "$(echo -n "$pids" | sort -n | tr '\n' ' ')" "$what: daemons against records"
        dirs=$(ls "$LAYERFS_HOME/sandboxes" 2>/dev/null | sort | tr '\n' ' ')
        want_dirs=$(records "SELECT 'p-' || number FROM sandboxes" | sort | tr '\n' ' ')
        assert_eq "$dirs" "$want_dirs" "$what: Sandbox directories against records"
        cgroups=$(find "$CGR" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort | tr '\n' ' ')
        want_cgroups=$(records "SELECT cgroup FROM sandboxes" | sort | tr '\n' ' ')
        assert_eq "$cgroups" "$want_cgroups" "$what: cgroups against records"
}

# ---- 1. two creates with a dead record present ------------------------------------------
for rep in $(seq 8); do
        SB=$(lfs sandbox create)
        kill_daemon "$SB"
        lfs sandbox create >"$WORK/a" 2>&1 &
        a=$!
        lfs sandbox create >"$WORK/b" 2>&1 &
        b=$!
        wait "$a" || fail "round $rep: a create failed: $(cat "$WORK/a")"
        wait "$b" || fail "round $rep: a create failed: $(cat "$WORK/b")"
        [ "$(cat "$WORK/a")" != "$(cat "$WORK/b")" ] || fail "round $rep: both creates got sandbox $(cat "$WORK/a")"
        ok
        consistent "two creates, round $rep"
        for n in $(cat "$WORK/a" "$WORK/b"); do lfs sandbox close "$n" >/dev/null; done
done
assert_eq "$(records)" 0 "records after the creates"

# ---- 2. a close racing a create of the number it frees --------------------------------
for rep in $(seq 20); do
        SB=$(lfs sandbox create)
        lfs sandbox close "$SB" --force >"$WORK/c" 2>&1 &
        c=$!
        sleep "0.0$((rep % 5))"
        m=$(lfs sandbox create) || fail "round $rep: the create racing a close failed"
        wait "$c" || fail "round $rep: the close failed: $(cat "$WORK/c")"
        lfs workspace mount "$m" main >/dev/null || fail "round $rep: sandbox $m, made as $SB closed, is gone"
        ok
        consistent "close racing create, round $rep"
        lfs sandbox close "$m" --force >/dev/null
done
assert_eq "$(records)" 0 "records after close racing create"

# ---- 3. rounds of create, close, kill -9 and reclaim at once ------------------------------
for round in $(seq "$ROUNDS"); do
        mapfile -t before < <(records "SELECT number FROM sandboxes ORDER BY random()")
        jobs_pids=()
        n_creates=$((${#before[@]} < 3 ? 2 : 1))
        for i in $(seq "$n_creates"); do
                lfs sandbox create >"$WORK/create-$i" 2>&1 &
                jobs_pids+=($!)
        done
        closed="" killed=""
        if [ "${#before[@]}" -ge 1 ]; then
                closed=${before[0]}
                lfs sandbox close "$closed" --force >"$WORK/close" 2>&1 &
                jobs_pids+=($!)
        fi
        if [ "${#before[@]}" -ge 2 ]; then
                killed=${before[1]}
                kill_daemon "$killed" &
                jobs_pids+=($!)
        fi
        lfs runtime reclaim >"$WORK/reclaim" 2>&1 &
        jobs_pids+=($!)
        for j in "${jobs_pids[@]}"; do
                wait "$j" || fail "round $round: a call failed: $(cat "$WORK"/create-* "$WORK/close" "$WORK/reclaim" 2>/dev/null)"
        done
        lfs runtime reclaim >/dev/null # the killed one, if the round's reclaim came first
        made=$(cat "$WORK"/create-*)
        rm -f "$WORK"/create-*
        [ "$(echo "$made" | sort | uniq -d)" = "" ] || fail "round $round: two creates got the same number: $made"
        for n in $made "${before[@]:2}"; do
                [ "$(records "SELECT count(*) FROM sandboxes WHERE number=$n")" = 1 ] ||
                        fail "round $round: sandbox $n is lost (made: $made; before: ${before[*]}; closed $closed, killed $killed)"
        done
        ok
        consistent "round $round (made $(echo $made), closed $closed, killed $killed)"
done
for n in $(records "SELECT number FROM sandboxes"); do lfs sandbox close "$n" --force >/dev/null; done
assert_eq "$(records)" 0 "records at the end"
consistent "the end"
left=$(grep -F "$WORK" /proc/mounts || true)
[ -z "$left" ] || fail "mounts left: $left"
finish
