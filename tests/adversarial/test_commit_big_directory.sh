#!/usr/bin/env bash
# Attack (issue 13, item 5): a command makes N new files in one directory (default
# 20,000; `test_commit_big_directory.sh 100000` for more), then commits. Before: the
# commit applied the changes one by one and sorted the directory's tree again after each
# (N sorts of up to N entries: 10,000 files 4 s, 40,000 files 59 s, 300,000 about an
# hour), holding the Workspace's and the daemon's locks all along. Now the commit builds
# each changed directory's tree once, from the namespace: one sort per changed
# directory. The sorts are counted with a uprobe on lfs_tree_sort in the daemon (perf),
# not timed; the times are bench/workspace_fs.sh's.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
# BIG_DIRECTORY_FILES for make sanitize (2000: more than the 4 sorts allowed all the same).
N=${1:-${BIG_DIRECTORY_FILES:-20000}}
export LAYERFS_PROJECT=big
command -v perf >/dev/null || fail "needs perf (Debian package linux-perf; make deps installs it)"
# perf refuses an event whose name exists in any group (a run that was killed leaves
# its probe), so the name is this run's too.
group="lfswalks$$"
event="sort$$"
perf probe -q -x "$BUILD/layerfs-daemon" -a "$group:$event=lfs_tree_sort" ||
        fail "perf cannot place a uprobe on lfs_tree_sort in $BUILD/layerfs-daemon"
TEARDOWN_EXTRA="perf probe -q -d '$group:*'"

lfs project init big >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
lfs workspace exec "$n" main -- python3 -c '
import os, sys
os.mkdir("one")
for i in range(int(sys.argv[1])):
    with open("one/f%06d" % i, "w") as f:
        f.write("%d\n" % i)' "$N"
perf stat -x, -e "$group:$event" -p "$pid" -o "$WORK/sorts" -- "$LAYERFS" workspace commit "$n" main -m "$N files" >/dev/null
sorts=$(awk -F, -v e="$group:$event" '$3 == e {print $1}' "$WORK/sorts")
echo "commit of $N new files in one directory: $sorts tree sorts"
[ -n "$sorts" ] && [ "$sorts" -le 4 ] || fail "the commit sorted trees $sorts times for $N files in one directory (more than once per changed directory)"
ok
assert_eq "$(lfs workspace status "$n" main)" "" "clean after the commit"
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(find "$WORK/out/one" -type f | wc -l)" "$N" "every file committed"
assert_eq "$(cat "$WORK/out/one/f$(printf %06d $((N - 1)))")" "$((N - 1))" "the last file's contents"
lfs project verify >/dev/null
ok
finish
