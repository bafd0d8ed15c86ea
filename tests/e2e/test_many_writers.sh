#!/usr/bin/env bash
# Many writers on one project: Workspaces in several Sandboxes commit at once, each to a
# Branch of its own and, one per Sandbox, to one shared Branch, touching distinct and
# common paths (tests/e2e/many_writers.py drives them and checks). No commit reported
# successful is lost, each Branch holds what was written, no SQLITE_BUSY or "database is
# locked" reaches a user (nor a daemon's log), every Conflict names exactly the paths both
# sides changed, `project verify` passes, and nothing is left.
#
# Default (make check): 2 Sandboxes with 2 own Branches each plus the shared one, 8
# commits per writer. The issue's size: --sandboxes 4 --per-sandbox 4 --minutes 3 (16
# Workspaces on 16 Branches and 4 on the shared one, writing for 3 minutes).
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=mw

sandboxes=2 per_sandbox=2 rounds=8 seconds=0 sample=0
while [ $# -gt 0 ]; do
        case "$1" in
        --sandboxes) sandboxes=$2 ;;
        --per-sandbox) per_sandbox=$2 ;;
        --rounds) rounds=$2 ;;
        --minutes) seconds=$(($2 * 60)) sample=300 ;;
        *) fail "usage: $0 [--sandboxes N] [--per-sandbox N] [--rounds N | --minutes M]" ;;
        esac
        shift 2
done

mkdir -p "$WORK/base/common"
for k in 0 1 2; do echo "common $k" >"$WORK/base/common/c$k.txt"; done
echo readme >"$WORK/base/README"
lfs project init mw --from "$WORK/base" >/dev/null
numbers=()
for _ in $(seq "$sandboxes"); do
        n=$(lfs sandbox create)
        numbers+=("$n")
        for k in $(seq 0 $((per_sandbox - 1))); do lfs branch create "b$n-$k" >/dev/null; done
done
lfs branch create shared >/dev/null
ok

# The race at a named step, whatever the timing: a Workspace's commit has read the head
# and paused before moving it (record-start, the first time in its daemon) when another
# commit moves the Branch. It merges with that commit; it used to fail "Busy: branch
# 'shared' moved while this operation ran; try again".
fault_fifo "$WORK/race"
racer=$(LAYERFS_FAULT="record-start#1@$WORK/race" lfs sandbox create)
echo mine >"$(lfs workspace mount "$racer" shared)/race-mine.txt"
lfs --json workspace commit "$racer" shared -m "paused" >"$WORK/race.out" 2>&1 &
pid=$!
fault_reached "$pid" "$WORK/race" >/dev/null || fail "the commit ended before record-start: $(cat "$WORK/race.out")"
lfs branch export shared "$WORK/theirs" >/dev/null
echo theirs >"$WORK/theirs/race-theirs.txt"
lfs branch commit shared --from "$WORK/theirs" -m "meanwhile" >/dev/null
fault_release "$WORK/race"
wait "$pid" || fail "the paused commit failed: $(cat "$WORK/race.out")"
assert_eq "$(json_get 'j["merged"], j["changed"]' <"$WORK/race.out")" "(True, True)" "the paused commit merged"
lfs branch export shared "$WORK/race-merged" >/dev/null
assert_eq "$(cat "$WORK/race-merged/race-mine.txt" "$WORK/race-merged/race-theirs.txt")" "$(printf 'mine\ntheirs')" \
        "both commits' files on the Branch"
lfs workspace unmount "$racer" shared >/dev/null
lfs sandbox close "$racer" >/dev/null

mkdir "$WORK/exports"
start=$(date +%s)
printf '%s\n' "${numbers[@]}" | python3 "$(dirname "$0")/many_writers.py" --layerfs "$LAYERFS" \
        --work "$WORK/exports" --sandboxes "$sandboxes" --per-sandbox "$per_sandbox" \
        --rounds "$rounds" --seconds "$seconds" --sample "$sample" ||
        fail "many writers (the lines above say what failed)"
echo "wall seconds: $(($(date +%s) - start))"
ok

# No daemon met a locked database either (its log is the Sandbox's, gone after close).
for n in "${numbers[@]}"; do
        log=$(lfs sandbox log "$n" --lines 100000)
        case "$log" in
        *SQLITE_BUSY* | *"database is locked"* | *"stayed locked"*)
                fail "sandbox $n's daemon log: $(grep -E 'SQLITE_BUSY|database is locked|stayed locked' <<<"$log" | head -5)"
                ;;
        esac
        ok
done

lfs project verify >/dev/null
ok
for n in "${numbers[@]}"; do lfs sandbox close "$n" --force >/dev/null; done
assert_nothing_left "after closing the writers' Sandboxes"
finish
