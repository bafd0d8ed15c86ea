#!/usr/bin/env bash
# A directory's link count (issue 18): 2 + its subdirectories, as ext4 gives it (find
# relies on it), for directories never listed, listed (and forgotten by the kernel since),
# and changed in the Workspace (mkdir, rmdir). The first stat of a directory never listed
# reads no tree: the Store keeps each tree's count of subdirectories beside it (table
# tree_subdirs). Before, it loaded the directory's names to count them: a stat of a
# directory of BIG (default 100,000) files read its 5 MB tree and indexed every name.
# Counted in bytes the daemon reads (rchar of /proc/PID/io) and in what its namespace
# takes (list_workspaces' metadata_bytes), not timed. A Store made before the table
# (dropped here) gives the same counts, from the trees, each read once; a tampered count
# is not used, and gc removes the counts of trees that are gone. The load of a small
# directory reads no big tree beside it in the Store: in table trees' old shape (WITHOUT
# ROWID), SQLite compared a lookup's key with a big tree's whole row when it was a
# divider key of an interior page, and another mount's load of the top directory (3
# entries) after the commit read big's trees, 9.8 MB. A Store of the old shape (made
# here) reads and writes right before, during (a gc killed midway) and after gc converts
# it, and verifies.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=nlink
BIG=${NLINK_BIG_FILES:-100000}

SHM=$(mktemp -d /dev/shm/layerfs-nlink.XXXXXX)
# shellcheck disable=SC2034 # lib.sh's teardown runs it
TEARDOWN_EXTRA="rm -rf '$SHM'"
# big: BIG empty files and 3 subdirectories (s1 with one of its own); small: 2, each
# empty; a file at the top.
python3 - "$SHM/src" "$BIG" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in ("big/s1/inner", "big/s2", "big/s3", "small/a", "small/b"):
    os.makedirs(os.path.join(root, d))
for i in range(n):
    open(os.path.join(root, "big", "f%06d" % i), "wb").close()
open(os.path.join(root, "top"), "wb").close()
EOF
lfs project init nlink --from "$SHM/src" >/dev/null
rm -rf "$SHM/src"

# mount: a new Sandbox with main mounted; sets n, ws and pid (its daemon).
mount_main() {
        n=$(lfs sandbox create)
        ws=$(lfs workspace mount "$n" main)
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$n")
        [ -n "$pid" ] || fail "sandbox $n has no daemon"
}
usage() { lfs --json sandbox list_workspaces "$n" | json_get "j[0]['$1']"; }
read_bytes() { awk '/^rchar/ {print $2}' "/proc/$pid/io"; }
links() { stat -c %h "$ws/$1"; }
# assert_links PATH COUNT WHAT
assert_links() { assert_eq "$(links "$1")" "$2" "st_nlink of $1 ($3)"; }
evict() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
}

mount_main
tree_bytes=$((BIG * 49))
# The first stat of big: its count from the Store, not its tree. The top directory's
# names are loaded first (the lookup of big needs them): a read of any tree may read a
# big one beside it in the Store's database (SQLite compares the whole row of a divider
# key of a WITHOUT ROWID table), which is not what is counted here.
stat "$ws/top" >/dev/null
before=$(read_bytes)
before_meta=$(usage metadata_bytes)
nlink=$(links big)
read=$(($(read_bytes) - before))
meta=$(($(usage metadata_bytes) - before_meta))
echo "first stat of a directory of $BIG files: the daemon read $read bytes, its namespace grew by $meta bytes"
assert_eq "$nlink" 5 "st_nlink of big, never listed (2 + s1, s2, s3)"
[ "$read" -lt $((tree_bytes / 8)) ] ||
        fail "the first stat of big read $read bytes (its tree: about $tree_bytes): it read the tree"
[ "$meta" -lt $((BIG * 8)) ] ||
        fail "the first stat of big grew the namespace by $meta bytes: it loaded $BIG names"
ok
assert_links small 4 "never listed"
assert_links big/s1 3 "never listed, below one never listed"
assert_links big/s2 2 "empty"
assert_eq "$(stat -c %h "$ws/top")" 1 "st_nlink of a file"
ok

# Listed, then forgotten by the kernel (the listed table keeps the count).
ls "$ws/small" "$ws/big/s1" >/dev/null
assert_links small 4 "listed"
assert_links big/s1 3 "listed"
evict
assert_links small 4 "listed, then evicted"
assert_links big/s1 3 "listed, then evicted"
assert_links big 5 "stat'ed only, then evicted"
ok

# Changed: subdirectories made and removed in directories stat'ed but never listed, and in
# one listed.
mkdir "$ws/big/new"
assert_links big 6 "after mkdir big/new"
rmdir "$ws/big/s2"
assert_links big 5 "after rmdir big/s2"
rmdir "$ws/big/s1/inner"
assert_links big/s1 2 "after rmdir big/s1/inner"
mkdir "$ws/small/c" "$ws/small/d"
rmdir "$ws/small/a"
assert_links small 5 "after mkdir small/c small/d, rmdir small/a"
touch "$ws/small/file"
assert_links small 5 "after a file made in it"
evict
assert_links big 5 "changed, then evicted"
assert_links small 5 "changed, then evicted"
ok

# Committed: the Workspace's commit stores its trees' counts; another Workspace of main
# stats them without reading them, and verify checks them.
lfs workspace commit "$n" main -m dirs >/dev/null
assert_links big 5 "after the commit"
lfs project verify >/dev/null || fail "project verify after the commit"
first=$n
mount_main
# check_top_load WHAT [ASSERT]: what another mount's load of the top directory's few names
# reads; with ASSERT, no big tree.
check_top_load() {
        local before read
        before=$(read_bytes)
        stat "$ws/top" >/dev/null
        read=$(($(read_bytes) - before))
        echo "another mount's load of the top directory (3 to 5 names) $1: the daemon read $read bytes"
        [ -z "${2:-}" ] || [ "$read" -lt $((tree_bytes / 8)) ] ||
                fail "the load of the top directory $1 read $read bytes: it read big's tree (about $tree_bytes)"
}
check_top_load "after the commit of big" assert
before=$(read_bytes)
assert_links big 5 "committed, in another Workspace"
read=$(($(read_bytes) - before))
[ "$read" -lt $((tree_bytes / 8)) ] || fail "the first stat of big, committed, read $read bytes: it read the tree"
assert_links small 5 "committed, in another Workspace"
assert_links big/s1 2 "committed, in another Workspace"
ok
# Another writer's commit adds subdirectories under names this mount never looked up; this Workspace's commit merges it: the parents' link counts follow at once
# (the kernel kept them for an hour: the daemon told it only of the names).
assert_links small 5 "before another writer's commit"
assert_links big/s3 2 "before another writer's commit"
lfs branch export main "$SHM/other" >/dev/null
mkdir "$SHM/other/small/from-other" "$SHM/other/big/s3/deeper"
lfs branch commit main --from "$SHM/other" -m other >/dev/null
rm -rf "$SHM/other"
echo mine >"$ws/mine"
lfs workspace commit "$n" main -m mine >/dev/null
assert_links small 6 "after a merge that added small/from-other"
assert_links big/s3 3 "after a merge that added big/s3/deeper"
ok
lfs workspace unmount "$n" main >/dev/null
lfs workspace unmount "$first" main >/dev/null

# A Store made before tree_subdirs, with table trees of the old shape: the counts come
# from the trees; gc converts the table, in steps.
store_sql() { sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/nlink/store.db" "$@"; }
store_sql "BEGIN; DROP TABLE tree_subdirs; ALTER TABLE trees RENAME TO trees_new;
        CREATE TABLE trees(id BLOB PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
        INSERT INTO trees SELECT id, data FROM trees_new; DROP TABLE trees_new; COMMIT" ||
        fail "could not make the Store's tables the old ones"
# shape: the Store's table trees, old, split or rowid; and the schema's version.
shape() {
        store_sql "SELECT CASE WHEN (SELECT count(*) FROM sqlite_master WHERE name='trees_old') THEN 'split'
                WHEN (SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE name='trees') THEN 'old'
                ELSE 'rowid' END || ' ' || (SELECT user_version FROM pragma_user_version)"
}
mount_main
check_top_load "in a Store of the old shape"
# A gc killed inside its second step (the first, the split, committed); the mount above
# goes on reading and writing, the next mount too.
fault_fifo "$WORK/fault"
LAYERFS_FAULT="store-trees-step#2@$WORK/fault" lfs project gc >/dev/null 2>&1 &
kill_at_step "$WORK/fault" $! || fail "gc ended without reaching step store-trees-step#2"
assert_eq "$(shape)" "split 2" "table trees after a gc killed midway"
assert_links big 5 "in a Store split by a gc killed midway"
assert_links small 6 "in a Store split by a gc killed midway"
echo split >"$ws/split"
lfs workspace commit "$n" main -m "while split" >/dev/null
lfs project verify >/dev/null || fail "project verify of a Store split by a gc killed midway"
old_mount=$n old_ws=$ws
mount_main
check_top_load "in a Store split by a gc killed midway"
assert_eq "$(cat "$ws/split")" split "a file committed while split, in another mount"
lfs workspace unmount "$n" main >/dev/null
n=$old_mount ws=$old_ws
lfs project gc >/dev/null
assert_eq "$(shape)" "rowid 1" "table trees after gc"
assert_links big/s3 3 "in the mount made before gc converted the Store"
lfs workspace unmount "$n" main >/dev/null
mount_main
check_top_load "in a Store gc converted" assert
assert_links big 5 "in a Store made before tree_subdirs"
assert_links small 6 "in a Store made before tree_subdirs"
assert_links big/s1 2 "in a Store made before tree_subdirs"
assert_eq "$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/nlink/store.db" \
        "SELECT count(*) FROM sqlite_master WHERE name='tree_subdirs'")" 1 "tree_subdirs made again on open"
lfs project verify >/dev/null || fail "project verify of a Store made before tree_subdirs"
# Without its row, big's count came from its names, which also numbered it: the listed
# table keeps it past a FORGET. (A count kept with the record alone went with it, and
# every stat after a FORGET read the tree again: 14.7 MB over three.)
evict
stat "$ws/top" >/dev/null
before=$(read_bytes)
assert_links big 5 "in a Store made before tree_subdirs, after an eviction"
read=$(($(read_bytes) - before))
[ "$read" -lt $((tree_bytes / 8)) ] ||
        fail "a stat of big after an eviction read $read bytes: its count went with its record"
ok
lfs workspace unmount "$n" main >/dev/null

# Rows no directory can have (tampered with): not used, and verify names the tree; gc
# removes the rows of trees that are gone (an older layerfs's gc left them).
big_trees="FROM trees WHERE length(data) > $((tree_bytes / 2))" # before and after the commit
[ "$(store_sql "SELECT count(*) $big_trees")" -gt 0 ] || fail "big's tree is not in the Store"
store_sql "INSERT OR REPLACE INTO tree_subdirs SELECT id, 4294967294 $big_trees"
mount_main
assert_links big 5 "with a count past 2^32 - 3 stored"
lfs workspace unmount "$n" main >/dev/null
expect_refusal Failed "no directory can have" lfs project verify
store_sql "DELETE FROM tree_subdirs WHERE id IN (SELECT id $big_trees)"
store_sql "INSERT INTO tree_subdirs VALUES(zeroblob(32), 7)"
lfs project gc >/dev/null
assert_eq "$(store_sql "SELECT count(*) FROM tree_subdirs WHERE id NOT IN (SELECT id FROM trees)")" 0 \
        "rows of trees that are gone, after gc"
out=$(lfs project verify 2>&1 >/dev/null) || fail "project verify after gc: $out"
ok
finish
