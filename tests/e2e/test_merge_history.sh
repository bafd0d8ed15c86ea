#!/usr/bin/env bash
# A Workspace commit merged into a Branch that moved on since its base, and `branch merge`
# of a Branch that only moved on, read the commits made since that base, not the whole
# history (issue 18: O(history) work per commit; a project of 2,000 commits took 0.12 s
# a merged commit against 0.06 s for one of 20). The proof is not timed: the history's
# first commits are removed from the Store's table, which a walk of the whole history
# reads (it then fails on the missing commit), and a walk that stops at the base never
# reaches.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=history
mkdir -p "$WORK/src"
echo 0 >"$WORK/src/a"
lfs project init history --from "$WORK/src" >/dev/null
store_sql() { sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/history/store.db" "$@"; }
for i in 1 2 3 4; do
        echo "$i" >"$WORK/src/a"
        lfs branch commit main --from "$WORK/src" -m "c$i" >/dev/null
done
old=$(lfs --json branch log main | json_get 'j[-1]["commit"]') # the import's, the first
second=$(lfs --json branch log main | json_get 'j[-2]["commit"]')
[ -n "$old" ] && [ -n "$second" ] || fail "no commits in the log"

n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
echo other >"$WORK/src/b"
lfs branch commit main --from "$WORK/src" -m moved >/dev/null
echo mine >"$ws/mine"
# The history's first two commits gone: only a walk past the Workspace's base reads them.
store_sql "DELETE FROM commits WHERE hex(id) IN (upper('$old'), upper('$second'))"
assert_eq "$(store_sql "SELECT count(*) FROM commits WHERE hex(id) IN (upper('$old'), upper('$second'))")" 0 \
        "the first commits removed"
out=$(lfs --json workspace commit "$n" main -m mine 2>&1) ||
        fail "a Workspace commit merged into a Branch one commit ahead read the history past its base: $out"
assert_eq "$(json_get 'j["merged"]' <<<"$out")" True "the Workspace commit was merged"
assert_eq "$(cat "$ws/b")" other "the other side's change in the Workspace after the merge"
ok
# branch merge of a Branch that only moved on from main (a fast forward): the walk from
# it stops at main's head.
lfs branch create feature >/dev/null
lfs branch export feature "$WORK/feature" >/dev/null
echo feature >"$WORK/feature/c"
lfs branch commit feature --from "$WORK/feature" -m feature >/dev/null
out=$(lfs --json branch merge feature main 2>&1) ||
        fail "branch merge of a Branch ahead of main read the history past main's head: $out"
assert_eq "$(json_get 'j["fast_forward"]' <<<"$out")" True "feature fast-forwarded into main"
ok
# A Store that lacks the Workspace's base commit (damaged) is said to be so, not taken
# for a deleted Branch (NoSuchBranch "was deleted after it was mounted", before).
lfs workspace unmount "$n" main >/dev/null
ws=$(lfs workspace mount "$n" main)
base=$(lfs --json branch list | json_get '[b["commit"] for b in j if b["branch"] == "main"][0]')
echo more >"$WORK/feature/d"
lfs branch commit main --from "$WORK/feature" -m more >/dev/null
echo again >"$ws/again"
store_sql "DELETE FROM commits WHERE hex(id) = upper('$base')"
expect_refusal Failed "lacks a commit of branch 'main''s history" lfs workspace commit "$n" main -m again
assert_eq "$(cat "$ws/again")" again "the Workspace keeps its change after the refusal"
ok
lfs workspace unmount "$n" main --discard >/dev/null
lfs sandbox close "$n" >/dev/null
# A generation that is not a positive whole number (a damaged row) is read as none and
# replaced by the next fill: kept, the fill pushed the same commit for ever (branch merge
# hung; the review).
lfs project init gens --from "$WORK/src" >/dev/null
gens_sql() { sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/gens/store.db" "$1"; }
i=0
for bad in 0 -3 "'x'"; do
        i=$((i + 1))
        lfs --project gens branch create "x$i" >/dev/null
        mkdir -p "$WORK/gens$i"
        echo "x$i" >"$WORK/gens$i/x"
        lfs --project gens branch commit "x$i" --from "$WORK/gens$i" -m "x$i" >/dev/null
        echo "main$i" >"$WORK/gens$i/x"
        lfs --project gens branch commit main --from "$WORK/gens$i" -m "main$i" >/dev/null
        gens_sql "UPDATE commits SET generation=NULL; UPDATE commits SET generation=$bad WHERE parent1 IS NULL"
        set +e
        timeout 60 "$LAYERFS" --project gens branch merge "x$i" main >/dev/null 2>&1
        status=$?
        set -e
        [ "$status" -ne 124 ] || fail "branch merge hung with a root's generation $bad"
        assert_eq "$(gens_sql "SELECT generation FROM commits WHERE parent1 IS NULL")" 1 \
                "the root's generation after a merge that found it $bad"
        lfs --project gens project verify >/dev/null || fail "project verify after a generation of $bad"
        ok
done
finish
