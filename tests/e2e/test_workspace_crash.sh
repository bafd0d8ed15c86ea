#!/usr/bin/env bash
# SIGKILL a Sandbox's daemon inside a commit of thousands of files while a writer streams
# into its Workspace: the Store always verifies, the Branch head stays at the old commit,
# and closing the dead Sandbox leaves nothing. Each kill lands at a named step of the
# daemon's commit (LAYERFS_FAULT, userspace-lib/base/fault.h: object-write#N, an object
# part-way through; record-start, every object written and none published;
# record-transaction, the head moved in a transaction not committed); the test reports how
# many rounds the kill interrupted, and fails unless every one did.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "Workspaces need root (FUSE mounts, cgroups)"
export LAYERFS_PROJECT=crash
ROUNDS=${CRASH_ROUNDS:-8}
FIFO=$WORK/fault
close_sandboxes() {
        for n in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" 'SELECT number FROM sandboxes' 2>/dev/null); do
                "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1 || true
        done
}
trap 'close_sandboxes; cleanup_work' EXIT

lfs project init crash --from /usr/include/linux >/dev/null
steps=(object-write record-start record-transaction)
interrupted=0
for round in $(seq 1 "$ROUNDS"); do
        step=${steps[$(((round - 1) % ${#steps[@]}))]}
        [ "$step" != object-write ] || step="object-write#$((RANDOM % 1500 + 1))"
        fault_fifo "$FIFO"
        # The daemon takes LAYERFS_FAULT from the create that starts it.
        n=$(LAYERFS_FAULT="$step@$FIFO" lfs sandbox create)
        ws=$(lfs workspace mount "$n" main)
        old=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
        mkdir "$ws/round$round"
        for i in $(seq 1 1500); do echo "$round $i" >"$ws/round$round/f$i"; done
        rm "$ws/netfilter/xt_set.h" 2>/dev/null || true
        dd if=/dev/zero of="$ws/stream" bs=64k count=4000 2>/dev/null &
        writer=$!
        "$LAYERFS" workspace commit "$n" main -m "round $round" >/dev/null 2>&1 &
        if kill_at_step "$FIFO" $!; then
                interrupted=$((interrupted + 1))
        else
                echo "   round $round: the commit ended before the daemon reached $step"
        fi
        wait "$writer" 2>/dev/null || true
        lfs project verify >/dev/null || fail "round $round: the Store after the kill"
        ok
        assert_eq "$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')" "$old" \
                "round $round: the head after a commit killed before its transaction committed"
        expect_error NoSuchSandbox lfs workspace status "$n" main
        lfs sandbox close "$n" --force >/dev/null
        grep -q " $LAYERFS_HOME/" /proc/mounts && fail "round $round: a mount is left"
        ok
done
echo "   $interrupted of $ROUNDS rounds killed the daemon inside its commit"
assert_eq "$interrupted" "$ROUNDS" "rounds whose kill landed inside the commit"
daemons=$(pids_matching "layerfs-daemon .*--home $LAYERFS_HOME")
[ -z "$daemons" ] || fail "a daemon is left: $daemons"
ok
finish
