#!/usr/bin/env bash
# Merges that are not conflicts, from the CLI on a real Store and through a Workspace's
# commit: the executable bit changed on one side and the contents on the other give the
# new contents with the bit (as git does); a path deleted on one side and left alone on
# the other is deleted. `project verify` after each.
source "$(dirname "$0")/lib.sh"
export LAYERFS_PROJECT=m

# mode_and_text DIR PATH: "<octal mode> <contents>" of a file.
mode_and_text() { echo "$(stat -c %a "$1/$2") $(cat "$1/$2")"; }
# expect_tree WHAT RUN TOOL NAMES DIR...: in each DIR, run.sh and tool are RUN and TOOL
# ("<mode> <contents>") and the names there are NAMES (one line, space-separated).
expect_tree() {
        local what=$1 run=$2 tool=$3 names=$4 d
        shift 4
        for d in "$@"; do
                assert_eq "$(mode_and_text "$d" run.sh)" "$run" "$what: $d: run.sh"
                assert_eq "$(mode_and_text "$d" tool)" "$tool" "$what: $d: tool"
                assert_eq "$(cd "$d" && echo $(ls -A))" "$names" "$what: $d: what each side deleted is gone"
        done
}

mkdir -p "$WORK/base/dir/sub"
echo v1 >"$WORK/base/run.sh"
echo t1 >"$WORK/base/tool"
chmod 755 "$WORK/base/tool"
for f in keep gone-ours gone-theirs; do echo "$f" >"$WORK/base/$f.txt"; done
echo a >"$WORK/base/dir/a"
echo b >"$WORK/base/dir/sub/b"
ln -s keep.txt "$WORK/base/link"
lfs project init m --from "$WORK/base" >/dev/null

# Branch "modes": only executable bits, and deletions; "contents": only contents, and
# another deletion.
lfs branch create modes >/dev/null
lfs branch create contents >/dev/null
lfs branch export modes "$WORK/modes" >/dev/null
chmod 755 "$WORK/modes/run.sh"
chmod 644 "$WORK/modes/tool"
rm -r "$WORK/modes/gone-ours.txt" "$WORK/modes/dir" "$WORK/modes/link"
lfs branch commit modes --from "$WORK/modes" -m "modes and deletions" >/dev/null
lfs branch export contents "$WORK/contents" >/dev/null
echo v2 >"$WORK/contents/run.sh"
echo t2 >"$WORK/contents/tool"
rm "$WORK/contents/gone-theirs.txt"
lfs branch commit contents --from "$WORK/contents" -m "contents" >/dev/null
assert_eq "$(lfs branch diff main modes)" "$(printf 'D dir/a\nD dir/sub/b\nD gone-ours.txt\nD link\nM run.sh\nM tool')" "modes' diff"

# Both directions give the same tree.
lfs branch create modes2 --from modes >/dev/null
out=$(lfs --json branch merge contents modes)
assert_eq "$(echo "$out" | json_get 'j["fast_forward"], j["up_to_date"]')" "(False, False)" "a three-way merge"
lfs --json branch merge modes2 contents >/dev/null
lfs branch export modes "$WORK/merged" >/dev/null
lfs branch export contents "$WORK/merged2" >/dev/null
# run.sh has the new contents and the exec bit, tool the new contents without it.
expect_tree "branch merge" "755 v2" "644 t2" "keep.txt run.sh tool" "$WORK/merged" "$WORK/merged2"
assert_eq "$(lfs branch diff modes contents)" "" "both directions merged to one tree"
lfs project verify >/dev/null
ok

# Contents changed differently on both sides still conflict, with the bit or without.
lfs branch create c1 >/dev/null
lfs branch create c2 >/dev/null
lfs branch export c1 "$WORK/c1" >/dev/null
lfs branch export c2 "$WORK/c2" >/dev/null
echo ours >"$WORK/c1/run.sh"
chmod 755 "$WORK/c1/run.sh"
echo theirs >"$WORK/c2/run.sh"
lfs branch commit c1 --from "$WORK/c1" -m c1 >/dev/null
lfs branch commit c2 --from "$WORK/c2" -m c2 >/dev/null
set +e
out=$(lfs --json branch merge c1 c2)
set -e
assert_eq "$(echo "$out" | json_get 'j["error"]["code"], j["error"]["paths"]')" "('Conflict', ['run.sh'])" "contents still conflict"
lfs project verify >/dev/null
ok

# No rename detection (docs/architecture.md): a rename is a deletion and an addition, so
# a rename against a change of the old path is a conflict on the old path.
lfs branch create r1 >/dev/null
lfs branch create r2 >/dev/null
lfs branch export r1 "$WORK/r1" >/dev/null
lfs branch export r2 "$WORK/r2" >/dev/null
mv "$WORK/r1/keep.txt" "$WORK/r1/renamed.txt"
echo changed >"$WORK/r2/keep.txt"
lfs branch commit r1 --from "$WORK/r1" -m rename >/dev/null
lfs branch commit r2 --from "$WORK/r2" -m change >/dev/null
assert_eq "$(lfs branch diff main r1)" "$(printf 'D keep.txt\nA renamed.txt')" "a rename in the diff"
set +e
out=$(lfs --json branch merge r1 r2)
set -e
assert_eq "$(echo "$out" | json_get 'j["error"]["code"], j["error"]["paths"]')" "('Conflict', ['keep.txt'])" "rename against change"
lfs project verify >/dev/null
ok

# Through a Workspace: its commit merges into a Branch that moved meanwhile, and its
# view takes the other side's changes.
[ "$(id -u)" = 0 ] || { echo "skip: Workspaces need root"; finish; exit 0; }
use_private_sandboxes
lfs branch create ws >/dev/null
n=$(lfs sandbox create)
path=$(lfs workspace mount "$n" ws)
lfs workspace exec "$n" ws -- sh -c 'chmod +x run.sh && chmod -x tool && rm gone-ours.txt'
lfs branch export ws "$WORK/ws-moved" >/dev/null
echo v2 >"$WORK/ws-moved/run.sh"
echo t2 >"$WORK/ws-moved/tool"
rm -r "$WORK/ws-moved/gone-theirs.txt" "$WORK/ws-moved/dir"
lfs branch commit ws --from "$WORK/ws-moved" -m "moved meanwhile" >/dev/null
out=$(lfs --json workspace commit "$n" ws -m "exec bits")
assert_eq "$(echo "$out" | json_get 'j["merged"]')" True "the Workspace's commit merged"
lfs branch export ws "$WORK/ws-merged" >/dev/null
expect_tree "Workspace commit" "755 v2" "644 t2" "keep.txt link run.sh tool" "$WORK/ws-merged" "$path"
assert_eq "$(lfs workspace status "$n" ws)" "" "the view is clean against the merge"
lfs project verify >/dev/null
ok

# The other way round: the Workspace changes contents and deletes, the Branch flips bits.
lfs workspace exec "$n" ws -- sh -c 'echo v3 >run.sh && echo t3 >tool && rm link'
lfs branch export ws "$WORK/ws-moved2" >/dev/null
chmod 644 "$WORK/ws-moved2/run.sh"
chmod 755 "$WORK/ws-moved2/tool"
rm "$WORK/ws-moved2/keep.txt"
lfs branch commit ws --from "$WORK/ws-moved2" -m "bits meanwhile" >/dev/null
assert_eq "$(lfs --json workspace commit "$n" ws -m contents | json_get 'j["merged"]')" True "merged again"
lfs branch export ws "$WORK/ws-merged2" >/dev/null
expect_tree "second Workspace commit" "644 v3" "755 t3" "run.sh tool" "$WORK/ws-merged2" "$path"
assert_eq "$(lfs workspace status "$n" ws)" "" "clean after the second merge"
lfs workspace unmount "$n" ws >/dev/null
lfs sandbox close "$n" >/dev/null
assert_no_sandbox_left "after close"
lfs project verify >/dev/null
ok
finish
