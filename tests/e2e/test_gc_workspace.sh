#!/usr/bin/env bash
# project gc while Sandboxes are open (issue 18): a mounted Workspace's base stays even
# when its branch was deleted with --force (a Workspace pins every base it has had,
# pins/ in the Store, until it is unmounted), its uncommitted data (the Sandbox's, never
# the Store's) is untouched, Workspace commits racing a gc loop lose nothing, the pin of
# a SIGKILLed daemon is stale and goes, once unmounted and deleted the data goes too, and
# the idle close runs gc after LAYERFS_GC_AFTER_DELETES deletions (never by default).
# `project verify` after each.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=gw
P=$LAYERFS_HOME/projects/gw

loose_path() {
        local h
        h=$(sha256sum "$1" | cut -c1-64)
        echo "$P/objects/${h:0:2}/${h:2}"
}
pins() { find "$P/pins" -type f 2>/dev/null | wc -l; }
verified() {
        lfs project verify >/dev/null || fail "project verify $1"
        ok
}

mkdir -p "$WORK/main" "$WORK/feat"
echo main >"$WORK/main/README"
lfs project init gw --from "$WORK/main" >/dev/null
cp -a "$WORK/main/." "$WORK/feat/"
head -c 300000 /dev/urandom >"$WORK/feat/large.bin"
for k in $(seq 1 20); do echo "feat $k $RANDOM" >"$WORK/feat/small-$k"; done
lfs branch create feat >/dev/null
lfs branch commit feat --from "$WORK/feat" -m feat >/dev/null
large=$(loose_path "$WORK/feat/large.bin")
sum_large=$(sha256sum <"$WORK/feat/large.bin" | cut -c1-64)
sum_small=$(sha256sum <"$WORK/feat/small-7" | cut -c1-64)

# Mounted, with uncommitted data, then its branch deleted with --force and a gc.
n=$(lfs sandbox create)
lfs workspace mount "$n" feat >/dev/null
assert_eq "$(pins)" 1 "pins of one mounted Workspace"
lfs workspace exec "$n" feat -- sh -c 'echo uncommitted >draft.txt'
lfs branch delete feat --force >/dev/null
out=$(lfs --json project gc)
assert_eq "$(json_get '(j["pins"], j["commits"], j["loose_objects"])' <<<"$out")" "(1, 0, 0)" \
        "a gc while the Workspace of the deleted branch is mounted"
[ -f "$large" ] || fail "gc removed the loose object a mounted Workspace's base needs"
ok
got=$(lfs workspace exec "$n" feat -- sha256sum large.bin | cut -c1-64)
assert_eq "$got" "$sum_large" "the Workspace reads its loose file after the gc"
got=$(lfs workspace exec "$n" feat -- sha256sum small-7 | cut -c1-64)
assert_eq "$got" "$sum_small" "the Workspace reads a packed file after the gc"
assert_eq "$(lfs workspace exec "$n" feat -- cat draft.txt)" uncommitted "the uncommitted file after the gc"
verified "after a gc with a Workspace of a deleted branch"
# Made again where the Workspace started, its commit works.
expect_refusal NoSuchBranch "was deleted" lfs workspace commit "$n" feat -m draft
feat_head=$(sqlite3 -cmd ".timeout 10000" "$P/store.db" "SELECT lower(hex(id)) FROM commits WHERE message='feat'")
[ -n "$feat_head" ] || fail "the base commit of the Workspace is gone"
lfs branch create feat --from "$feat_head" >/dev/null
lfs workspace commit "$n" feat -m draft >/dev/null
ok

# Workspace commits race a gc loop; each round's file is recorded.
ROUNDS=${GC_WS_ROUNDS:-6}
start_gc_loop commits-done
for i in $(seq 1 "$ROUNDS"); do
        lfs workspace exec "$n" feat -- sh -c "echo round $i >round-$i; rm -f small-$i" ||
                fail "round $i: exec"
        lfs workspace commit "$n" feat -m "round $i" >/dev/null || fail "round $i: a Workspace commit while gcs ran"
        # A branch deleted every round leaves garbage for the gcs.
        lfs branch create "tmp$i" >/dev/null
        lfs branch commit "tmp$i" --from "$WORK/feat" -m "tmp $i" >/dev/null
        lfs branch delete "tmp$i" >/dev/null
done
touch "$WORK/commits-done"
gc_loop_end
echo "   $ROUNDS Workspace commits against $GC_LOOP_COUNT gcs"
verified "after Workspace commits raced gcs"
lfs branch export feat "$WORK/out" >/dev/null
for i in $(seq 1 "$ROUNDS"); do
        assert_eq "$(cat "$WORK/out/round-$i")" "round $i" "round $i's file on feat"
        [ ! -e "$WORK/out/small-$i" ] || fail "small-$i deleted in round $i is still on feat"
done
cmp "$WORK/out/large.bin" "$WORK/feat/large.bin" || fail "large.bin on feat after the race"
assert_eq "$(cat "$WORK/out/draft.txt")" uncommitted "the draft on feat"

# Unmounted: the pin goes; deleted: so does the data.
lfs workspace unmount "$n" feat >/dev/null
assert_eq "$(pins)" 0 "pins after the unmount"
lfs branch delete feat >/dev/null
lfs project gc >/dev/null
[ ! -e "$large" ] || fail "the loose object of a deleted, unmounted branch is still on disk"
ok
verified "after the last gc"

# A SIGKILLed daemon's pin is stale: gc removes it and keeps nothing for it.
lfs branch create feat2 >/dev/null
lfs branch commit feat2 --from "$WORK/feat" -m feat2 >/dev/null
lfs workspace mount "$n" feat2 >/dev/null
assert_eq "$(pins)" 1 "pins of the mounted feat2"
kill_daemon "$n"
lfs branch delete feat2 >/dev/null
out=$(lfs --json project gc)
assert_eq "$(json_get '(j["pins"], j["stale_pins"], j["loose_objects"])' <<<"$out")" "(0, 1, 1)" \
        "a gc after the daemon holding a pin was killed"
assert_eq "$(pins)" 0 "pins after that gc"
lfs runtime reclaim >/dev/null
verified "after the stale pin went"

# The idle close runs gc after LAYERFS_GC_AFTER_DELETES branch deletions since the last
# gc; never by default. Refused at create when it is not a number from 1 to 1000000.
expect_refusal InvalidInput LAYERFS_GC_AFTER_DELETES env LAYERFS_GC_AFTER_DELETES=0 "$LAYERFS" sandbox create
expect_refusal InvalidInput LAYERFS_GC_AFTER_DELETES env LAYERFS_GC_AFTER_DELETES=2x "$LAYERFS" sandbox create
deleted() { sqlite3 -cmd ".timeout 10000" "$P/store.db" "SELECT coalesce(sum(value), 0) FROM gc_state"; }
for b in i1 i2; do
        mkdir -p "$WORK/$b"
        head -c 200000 /dev/urandom >"$WORK/$b/large.bin"
        lfs branch create "$b" >/dev/null
        lfs branch commit "$b" --from "$WORK/$b" -m "$b" >/dev/null
        lfs branch delete "$b" >/dev/null
done
assert_eq "$(deleted)" 2 "branches deleted since the last gc"
# idle_sandbox [ENV...]: a Sandbox made with ENV that closes itself at once, waited for.
idle_sandbox() {
        local m pid
        m=$(env LAYERFS_IDLE_SECONDS=0.2 "$@" "$LAYERFS" sandbox create)
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$m")
        # Already closed under a loaded machine: its record goes last, after the gc.
        if [ -z "$pid" ]; then
                assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number=$m")" 0 \
                        "records of sandbox $m, which has no daemon pid"
                return
        fi
        wait_exit "$pid" 60 || fail "sandbox $m did not close itself when idle"
}
idle_sandbox
idle_sandbox LAYERFS_GC_AFTER_DELETES=3
for b in i1 i2; do
        [ -f "$(loose_path "$WORK/$b/large.bin")" ] || fail "an idle close without 3 deletions removed $b's data"
done
ok
idle_sandbox LAYERFS_GC_AFTER_DELETES=2
for b in i1 i2; do
        [ ! -e "$(loose_path "$WORK/$b/large.bin")" ] || fail "the idle close after 2 deletions left $b's data"
done
ok
assert_eq "$(deleted)" 0 "branches deleted since the gc of the idle close"
verified "after the idle close's gc"
finish
