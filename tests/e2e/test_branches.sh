#!/usr/bin/env bash
# Branches from the CLI: create, commit, log, diff, merge (fast-forward, three-way,
# conflict), export and delete.
source "$(dirname "$0")/lib.sh"
export LAYERFS_PROJECT=web

mkdir -p "$WORK/base/pages"
for i in 1 2 3 4 5; do echo "page $i" >"$WORK/base/pages/p$i.html"; done
echo "style" >"$WORK/base/style.css"
lfs project init web --from "$WORK/base" >/dev/null
main0=$(lfs --json branch log main | json_get 'j[0]["commit"]')

# A branch starts at main; a commit records only what differs.
lfs branch create feature >/dev/null
lfs branch export feature "$WORK/feature" >/dev/null
echo "changed" >"$WORK/feature/pages/p1.html"
echo "new" >"$WORK/feature/pages/new.html"
rm "$WORK/feature/style.css"
out=$(lfs --json branch commit feature --from "$WORK/feature" -m "feature work")
assert_eq "$(echo "$out" | json_get 'j["changed"]')" "True" "commit changed"
feat1=$(echo "$out" | json_get 'j["commit"]')
assert_eq "$(lfs branch diff main feature)" "$(printf 'A pages/new.html\nM pages/p1.html\nD style.css')" "diff main feature"

# Committing the same directory again makes no new commit.
out=$(lfs --json branch commit feature --from "$WORK/feature" -m "again")
assert_eq "$(echo "$out" | json_get 'j["changed"], j["commit"]')" "(False, '$feat1')" "no empty commit"

# Log, newest first, with a limit.
assert_eq "$(lfs --json branch log feature | json_get '[c["message"] for c in j]')" "['feature work', 'Import $WORK/base']" "log"
assert_eq "$(lfs --json branch log feature --limit 1 | json_get 'len(j)')" "1" "log --limit"
expect_error InvalidInput lfs branch log feature --limit 0
expect_error InvalidInput lfs branch log feature --limit x

# A branch can start at a commit given by a unique prefix.
lfs branch create from-commit --from "${main0:0:10}" >/dev/null
assert_eq "$(lfs --json branch list | json_get '[b["commit"] for b in j if b["branch"]=="from-commit"][0]')" "$main0" "create --from prefix"

# Fast-forward: main had no new commits.
out=$(lfs --json branch merge feature main)
assert_eq "$(echo "$out" | json_get 'j["fast_forward"], j["commit"]')" "(True, '$feat1')" "fast-forward merge"
out=$(lfs --json branch merge feature main)
assert_eq "$(echo "$out" | json_get 'j["up_to_date"]')" "True" "merge again is up to date"

# A true three-way merge of changes to different paths.
lfs branch create left >/dev/null
lfs branch create right >/dev/null
lfs branch export left "$WORK/left" >/dev/null
lfs branch export right "$WORK/right" >/dev/null
echo "left" >"$WORK/left/pages/p2.html"
echo "right" >"$WORK/right/pages/p3.html"
mv "$WORK/right/pages/p4.html" "$WORK/right/pages/p4-renamed.html"
lfs branch commit left --from "$WORK/left" -m left >/dev/null
lfs branch commit right --from "$WORK/right" -m right >/dev/null
out=$(lfs --json branch merge right left)
merged=$(echo "$out" | json_get 'j["commit"]')
assert_eq "$(lfs --json branch log left --limit 1 | json_get 'len(j[0]["parents"])')" "2" "merge commit has two parents"
lfs branch export left "$WORK/merged" >/dev/null
assert_eq "$(cat "$WORK/merged/pages/p2.html" "$WORK/merged/pages/p3.html")" "$(printf 'left\nright')" "both sides merged"
[ ! -e "$WORK/merged/pages/p4.html" ] && [ -f "$WORK/merged/pages/p4-renamed.html" ] || fail "rename not merged"
ok

# A conflict lists every path and changes nothing.
lfs branch create c1 --from left >/dev/null
lfs branch create c2 --from left >/dev/null
lfs branch export c1 "$WORK/c1" >/dev/null
lfs branch export c2 "$WORK/c2" >/dev/null
echo one >"$WORK/c1/pages/p1.html"
echo two >"$WORK/c2/pages/p1.html"
echo one >"$WORK/c1/pages/p5.html"
rm "$WORK/c2/pages/p5.html"
echo same >"$WORK/c1/agree.txt"
echo same >"$WORK/c2/agree.txt"
lfs branch commit c1 --from "$WORK/c1" -m c1 >/dev/null
lfs branch commit c2 --from "$WORK/c2" -m c2 >/dev/null
c2_head=$(lfs --json branch log c2 --limit 1 | json_get 'j[0]["commit"]')
set +e
out=$(lfs --json branch merge c1 c2)
status=$?
set -e
assert_eq "$status" "125" "conflict exit status"
assert_eq "$(echo "$out" | json_get 'j["error"]["code"], j["error"]["paths"]')" "('Conflict', ['pages/p1.html', 'pages/p5.html'])" "conflict paths"
assert_eq "$(lfs --json branch log c2 --limit 1 | json_get 'j[0]["commit"]')" "$c2_head" "head unchanged after conflict"
expect_error Conflict lfs branch merge c1 c2

# Refusals.
expect_error InvalidInput lfs branch merge left left
expect_error NoSuchBranch lfs branch merge nope left
expect_error NoSuchBranch lfs branch merge left nope
expect_error InvalidInput lfs branch create left
expect_error InvalidInput lfs branch create 'bad name'
expect_error NoSuchBranch lfs branch create x --from nope
expect_error NoSuchBranch lfs branch diff main nope
expect_error NoSuchBranch lfs branch export nope "$WORK/nope"
[ ! -e "$WORK/nope" ] || fail "failed export made its directory"
ok
expect_error InvalidInput lfs branch commit left --from "$WORK/missing" -m x
expect_error InvalidInput lfs branch commit left --from "$WORK/left"
expect_error NoSuchBranch lfs branch commit nope --from "$WORK/left" -m x

# Delete: the branch goes, its commits stay reachable by id.
lfs branch delete right >/dev/null
expect_error NoSuchBranch lfs branch delete right
lfs branch export "$merged" "$WORK/by-id" >/dev/null
[ -f "$WORK/by-id/pages/p4-renamed.html" ] || fail "export by commit id"
ok
lfs project verify >/dev/null
ok
finish
