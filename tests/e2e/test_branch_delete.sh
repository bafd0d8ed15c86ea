#!/usr/bin/env bash
# branch delete against the Workspaces that use the branch: refused Busy (naming each
# Sandbox and its Workspace) while a running Sandbox has it mounted; --force deletes it,
# and that Workspace's next commit says its branch is gone and what to do; main only with
# --force; a dead Sandbox holds nothing; a mount racing a delete never ends mounted on a
# deleted branch. `project verify` after each.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "skip: Workspaces need root"; exit 0; }
use_private_sandboxes
export LAYERFS_PROJECT=bd

mkdir -p "$WORK/base"
echo base >"$WORK/base/file"
lfs project init bd --from "$WORK/base" >/dev/null
for b in feature other dead-b team/x; do lfs branch create "$b" >/dev/null; done
branches() { lfs --json branch list | json_get '" ".join(b["branch"] for b in j)'; }

# main is refused without --force, and the message names the flag; hostile names are
# refused by the name rules before anything is looked at.
expect_refusal InvalidInput "--force" lfs branch delete main
expect_refusal InvalidInput "not valid" lfs branch delete ../../x
expect_refusal InvalidInput "not valid" lfs branch delete --force -- '-x'
expect_refusal NoSuchBranch "ghost" lfs branch delete ghost
assert_eq "$(branches)" "dead-b feature main other team/x" "nothing deleted by refusals"

# Mounted in two Sandboxes: Busy names both, with their Workspaces' paths.
n=$(lfs sandbox create)
m=$(lfs sandbox create)
ws_n=$(lfs workspace mount "$n" feature)
ws_m=$(lfs workspace mount "$m" feature)
ws_team=$(lfs workspace mount "$n" team/x)
set +e
out=$(lfs --json branch delete feature)
status=$?
set -e
assert_eq "$status" 125 "Busy exits 125"
msg=$(echo "$out" | json_get 'j["error"]["code"] + ": " + j["error"]["message"]')
case "$msg" in
"Busy: "*"sandbox $n (at $ws_n)"*"sandbox $m (at $ws_m)"*"--force"*) ok ;;
*) fail "the refusal does not name both Sandboxes and their Workspaces: $msg" ;;
esac
expect_refusal Busy "layerfs workspace unmount $n team/x" lfs branch delete team/x
lfs workspace unmount "$m" feature >/dev/null
expect_refusal Busy "sandbox $n (at $ws_n)" lfs branch delete feature
assert_eq "$(lfs branch delete feature 2>&1 | grep -c "sandbox $m" || true)" 0 "an unmounted Sandbox is not named"
assert_eq "$(branches)" "dead-b feature main other team/x" "nothing deleted while mounted"
# Other branches are deleted as before while those are mounted.
lfs branch delete other >/dev/null
lfs project verify >/dev/null
ok

# --force: deleted; the Workspace keeps its changes, and its commit says what happened
# and what to do.
lfs workspace exec "$n" feature -- sh -c 'echo kept >new-file'
head=$(lfs --json branch log feature --limit 1 | json_get 'j[0]["commit"]')
out=$(lfs --json branch delete feature --force)
assert_eq "$(echo "$out" | json_get 'j["branch"], j["deleted"], j["commit"]')" "('feature', True, '$head')" "--force --json"
assert_eq "$(branches)" "dead-b main team/x" "feature is gone"
set +e
err=$(lfs workspace commit "$n" feature -m "after the delete" 2>&1)
status=$?
set -e
assert_eq "$status" 125 "the commit is refused"
case "$err" in
"NoSuchBranch: branch 'feature' "*"deleted"*"layerfs branch create feature --from ${head:0:12}"*) ok ;;
*) fail "the commit's refusal does not say the branch is gone and how to go on: $err" ;;
esac
assert_eq "$(lfs workspace status "$n" feature)" "A new-file" "the Workspace kept its change"
assert_eq "$(cat "$ws_n/new-file")" kept "its file is still there"
# Doing what the message says works.
lfs branch create feature --from "${head:0:12}" >/dev/null
assert_eq "$(lfs --json workspace commit "$n" feature -m "after the delete" | json_get 'j["merged"]')" False "commit after making it again"
lfs branch export feature "$WORK/feature" >/dev/null
assert_eq "$(cat "$WORK/feature/new-file")" kept "the change is on the branch made again"
lfs project verify >/dev/null
ok

# A forced delete of main.
out=$(lfs --json branch delete main --force)
assert_eq "$(echo "$out" | json_get 'j["deleted"]')" True "main with --force"
lfs project verify >/dev/null
ok

# A Sandbox whose daemon died holds nothing.
k=$(lfs sandbox create)
lfs workspace mount "$k" dead-b >/dev/null
expect_refusal Busy "sandbox $k" lfs branch delete dead-b
kill_daemon "$k"
lfs branch delete dead-b >/dev/null
lfs runtime reclaim >/dev/null
lfs project verify >/dev/null
ok

# The race, made to happen: a delete holds the Store's write lock (here a process of the
# test does, as the delete does from its look for mount points to its end) while a mount
# starts. The mount makes its mount point, then waits for the lock to read the head;
# once the branch's row is gone and the lock let go, it finds no branch and leaves
# nothing. (A mount that read the head without the lock would have mounted a branch the
# delete then removed.)
lfs branch create held --from team/x >/dev/null
coproc LOCK { python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("DELETE FROM branches WHERE name = ?", ("held",))
db.execute("COMMIT")
print("deleted", flush=True)
' "$LAYERFS_HOME/projects/bd/store.db"; }
read -r line <&"${LOCK[0]}"
assert_eq "$line" locked "the test holds the Store's write lock"
(
        rc=0
        lfs workspace mount "$n" held >"$WORK/mount.out" 2>&1 || rc=$?
        echo "$rc" >"$WORK/mount.rc"
) &
mpid=$!
sbdir=$(records "SELECT dir FROM sandboxes WHERE number=$n")
wait_created "$sbdir/mnt" held
kill -0 "$mpid" 2>/dev/null || fail "the mount ended while the Store was locked: $(cat "$WORK/mount.out")"
grep -qF "$sbdir/mnt/held " /proc/mounts && fail "mounted while the Store was locked"
echo go >&"${LOCK[1]}"
read -r line <&"${LOCK[0]}"
assert_eq "$line" deleted "the row went while the mount waited"
wait "$mpid"
assert_eq "$(cat "$WORK/mount.rc")" 125 "the mount is refused"
grep -q "^NoSuchBranch: .*'held'" "$WORK/mount.out" || fail "the mount said: $(cat "$WORK/mount.out")"
[ ! -e "$sbdir/mnt/held" ] || fail "the refused mount left its mount point"
assert_eq "$(lfs sandbox list_workspaces "$n" | grep -c held || true)" 0 "no Workspace of the deleted branch"
lfs project verify >/dev/null
ok

# A mount racing a delete: never both succeed (a Workspace on a deleted branch), and the
# loser says why. Both orders are seen over the rounds as the scheduler has it; the
# invariant holds in each.
mounted=0 deleted=0
for i in $(seq 1 20); do
        lfs branch create "race$i" --from team/x >/dev/null
        (
                rc=0
                lfs workspace mount "$n" "race$i" >"$WORK/mount.out" 2>&1 || rc=$?
                echo "$rc" >"$WORK/mount.rc"
        ) &
        mpid=$!
        set +e
        lfs branch delete "race$i" >"$WORK/delete.out" 2>&1
        drc=$?
        set -e
        wait "$mpid"
        mrc=$(cat "$WORK/mount.rc")
        if [ "$mrc" = 0 ]; then
                [ "$drc" = 125 ] && grep -q "^Busy: " "$WORK/delete.out" ||
                        fail "round $i: mounted and deleted: $(cat "$WORK/delete.out")"
                assert_eq "$(branches | tr ' ' '\n' | grep -cx "race$i")" 1 "round $i: the branch stayed"
                lfs workspace unmount "$n" "race$i" >/dev/null
                lfs branch delete "race$i" >/dev/null
                mounted=$((mounted + 1))
        else
                [ "$drc" = 0 ] || fail "round $i: neither worked: $(cat "$WORK/mount.out" "$WORK/delete.out")"
                grep -q "^NoSuchBranch: " "$WORK/mount.out" || fail "round $i: the mount said $(cat "$WORK/mount.out")"
                deleted=$((deleted + 1))
        fi
done
echo "race: mount first $mounted, delete first $deleted"
lfs project verify >/dev/null
ok

lfs workspace unmount "$n" feature >/dev/null
lfs workspace unmount "$n" team/x >/dev/null
lfs sandbox close "$n" >/dev/null
lfs sandbox close "$m" >/dev/null
assert_no_sandbox_left "after close"
finish
