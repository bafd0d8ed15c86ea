#!/usr/bin/env bash
# Attack (issue 13, item 1): a command makes a chain of DEPTH directories in its Workspace
# (`mkdir a; cd a` DEPTH times; default 40,000, `test_deep_tree.sh 100000` for the issue's
# size), then anyone asks for its status. Before: the change walk recursed once per
# level, built every level's whole path (memory grew with the depth squared) and the
# root daemon died of a stack overflow, taking the uncommitted changes of every
# Workspace of the Sandbox with it; commit, unmount, list_workspaces and close ran the
# same walk. Now the walk keeps its own stack and one path buffer, and a path longer than
# the Store records (4,095 bytes, PATH_MAX less its NUL) is refused by name: the daemon
# lives, the other Workspace keeps its changes, and a chain just inside the limit
# commits, exports and imports again.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
# DEEP_TREE_DEPTH for make sanitize (10000: the same walks; the normal build's 40,000
# proves them past any stack, and past the peak RSS that paths of every level would take).
DEPTH=${1:-${DEEP_TREE_DEPTH:-40000}}
export LAYERFS_PROJECT=deep

lfs project init deep >/dev/null
lfs branch create other >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
ws2=$(lfs workspace mount "$n" other)
echo kept >"$ws2/uncommitted"
pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
head_before=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')

# The attack, as the command identity inside the Workspace.
chain='import os, sys
for _ in range(int(sys.argv[1])):
    os.mkdir(sys.argv[2]); os.chdir(sys.argv[2])
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write("bottom\n")'
lfs workspace exec "$n" main -- python3 -c "$chain" "$DEPTH" a >/dev/null

out=$(lfs workspace status "$n" main 2>&1) && fail "status of a $DEPTH-level chain answered: ${out:0:200}"
kill -0 "$pid" 2>/dev/null || fail "the daemon died on status of a $DEPTH-level chain: $out"
case "$out" in
"InvalidInput: "*"at most 4,095 bytes"*) ok ;;
*) fail "status of a $DEPTH-level chain said '${out:0:300}'" ;;
esac
expect_error InvalidInput lfs workspace commit "$n" main -m deep
assert_eq "$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')" "$head_before" "nothing committed"
assert_eq "$(lfs --json sandbox list_workspaces "$n" | json_get '[(w["branch"], w["dirty"]) for w in j]')" \
        "[('main', True), ('other', True)]" "list_workspaces answers (a refused path is a change)"
expect_error Dirty lfs workspace unmount "$n" main
assert_eq "$(lfs workspace status "$n" other)" "A uncommitted" "the other Workspace kept its changes"
kill -0 "$pid" 2>/dev/null || fail "the daemon died"
rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
echo "daemon peak RSS after a $DEPTH-level chain (status, commit, list, unmount): $((rss / 1024)) MiB"
# Linear in the tree: well under what the paths of every level would take (depth squared).
[ "$rss" -lt $((1024 * 1024)) ] || fail "the daemon's peak RSS is $rss KiB"
ok

# The chain goes with the Workspace, and one just inside the limit is recorded: 2,047
# directories "a" and a file "f" make a path of exactly 4,095 bytes.
lfs workspace unmount "$n" main --discard >/dev/null
ws=$(lfs workspace mount "$n" main)
assert_eq "$(lfs workspace status "$n" main)" "" "clean after unmount --discard and a new mount"
lfs workspace exec "$n" main -- python3 -c "$chain" 2047 a f
deepest="$(printf 'a/%.0s' $(seq 2047))f"
assert_eq "$(lfs workspace status "$n" main)" "A $deepest" "status of a 4,095-byte path"
lfs workspace exec "$n" main -- python3 -c "$chain" 2047 b gg
expect_error InvalidInput lfs workspace status "$n" main # b/.../b/gg: one byte too long
lfs workspace exec "$n" main -- rm -rf b
lfs workspace commit "$n" main -m "a deep chain" >/dev/null
assert_eq "$(lfs workspace status "$n" main)" "" "clean after the commit"
lfs branch export main "$WORK/export" >/dev/null
assert_eq "$(cd "$WORK/export" && cat "$deepest")" "bottom" "the export holds the deepest file"
# Import walks the same depth: a directory fd per level is more than the CLI may open.
lfs project init deep2 --from "$WORK/export" >/dev/null
lfs --project deep2 branch export main "$WORK/export2" >/dev/null
assert_eq "$(cd "$WORK/export2" && cat "$deepest")" "bottom" "the import of a deep directory"
lfs project verify >/dev/null
lfs --project deep2 project verify >/dev/null
ok

lfs sandbox close "$n" --force >/dev/null
grep -q " $LAYERFS_HOME/" /proc/mounts && fail "a mount is left"
[ -z "$(ls -A "$LAYERFS_HOME/sandboxes")" ] || fail "sandbox directories left"
ok
finish
