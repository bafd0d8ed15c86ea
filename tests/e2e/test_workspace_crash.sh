#!/usr/bin/env bash
# SIGKILL a Sandbox's daemon at random points while a writer streams into its Workspace
# and a commit of thousands of files runs: the Store always verifies, the Branch head
# is the old commit or a whole new one, and closing the dead Sandbox leaves nothing.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "Workspaces need root (FUSE mounts, cgroups)"
export LAYERFS_PROJECT=crash
ROUNDS=${CRASH_ROUNDS:-8}
close_sandboxes() {
        for n in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" 'SELECT number FROM sandboxes' 2>/dev/null); do
                "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1 || true
        done
}
trap 'close_sandboxes; cleanup_work' EXIT

lfs project init crash --from /usr/include/linux >/dev/null
for round in $(seq 1 "$ROUNDS"); do
        n=$(lfs sandbox create)
        ws=$(lfs workspace mount "$n" main)
        old=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
        mkdir "$ws/round$round"
        for i in $(seq 1 1500); do echo "$round $i" >"$ws/round$round/f$i"; done
        rm "$ws/netfilter/xt_set.h" 2>/dev/null || true
        dd if=/dev/zero of="$ws/stream" bs=64k count=16000 2>/dev/null &
        writer=$!
        "$LAYERFS" workspace commit "$n" main -m "round $round" >/dev/null 2>&1 &
        committer=$!
        pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
        sleep "$(printf '0.%03d' $((RANDOM % 400)))"
        kill -9 "$pid"
        wait "$writer" 2>/dev/null || true
        wait "$committer" 2>/dev/null || true
        lfs project verify >/dev/null || fail "round $round: the Store after the kill"
        ok
        head=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"], j[0]["parents"]')
        case "$head" in
        "('$old', "*) ok ;;
        *"['$old']"*)
                lfs branch export main "$WORK/out$round" >/dev/null
                assert_eq "$(ls "$WORK/out$round/round$round" | wc -l)" 1500 "round $round: a whole commit"
                rm -rf "$WORK/out$round"
                ;;
        *) fail "round $round: head after the kill is $head" ;;
        esac
        expect_error NoSuchSandbox lfs workspace status "$n" main
        lfs sandbox close "$n" --force >/dev/null
        grep -q " $LAYERFS_HOME/" /proc/mounts && fail "round $round: a mount is left"
        ok
done
daemons=$(pids_matching "layerfs-daemon .*--home $LAYERFS_HOME")
[ -z "$daemons" ] || fail "a daemon is left: $daemons"
ok
finish
