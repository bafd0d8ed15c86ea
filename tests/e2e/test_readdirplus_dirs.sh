#!/usr/bin/env bash
# A listing with attributes (READDIRPLUS, as `ls -l` and `find` get it) answers the
# subdirectories it names as lookups too, when their link counts need none of their
# names: the Store keeps each tree's count of subdirectories (tree_subdirs). Before, a
# directory never listed was named without attributes, and the kernel then sent a
# LOOKUP for each (one round trip per subdirectory of every directory `find` walks). A
# Store without the counts (made by an older layerfs) still answers them by a LOOKUP each,
# loading no subdirectory's names. Counted in the requests the daemon logs
# (LAYERFS_FUSE_DEBUG, over our own loop), not timed.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=plus
export LAYERFS_FUSE_TRANSPORT=dev LAYERFS_FUSE_DEBUG=1
DIRS=${PLUS_DIRS:-200}

# top/dNNN (each with one subdirectory and a file), and a file beside them.
python3 - "$WORK/src" "$DIRS" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.makedirs(os.path.join(root, "top", "d%03d" % i, "inner"))
    open(os.path.join(root, "top", "d%03d" % i, "file"), "w").write("x")
open(os.path.join(root, "top", "plain"), "w").write("y")
EOF
lfs project init plus --from "$WORK/src" >/dev/null

# list_top WHAT: `ls -l` of top in a new Sandbox; checks every subdirectory's link count
# (3: itself, its parent's entry, inner) and sets lookups: how many LOOKUPs the daemon
# logged for it.
list_top() {
        local n ws before links
        n=$(lfs sandbox create)
        ws=$(lfs workspace mount "$n" main)
        stat "$ws/top" >/dev/null
        before=$(lfs sandbox log "$n" --lines 1000000 | grep -c "fuse: LOOKUP " || true)
        links=$(ls -l "$ws/top" | awk '$1 ~ /^d/ {print $2}' | sort | uniq -c | tr -s ' ')
        assert_eq "$links" " $DIRS 3" "link counts of the $DIRS subdirectories ($1)"
        assert_eq "$(stat -c %h "$ws/top/d000")" 3 "st_nlink of top/d000 after the listing ($1)"
        lookups=$(($(lfs sandbox log "$n" --lines 1000000 | grep -c "fuse: LOOKUP " || true) - before))
        lfs workspace unmount "$n" main >/dev/null
        lfs sandbox close "$n" >/dev/null
}

list_top "counts stored"
echo "ls -l of $DIRS subdirectories with their counts stored: $lookups LOOKUPs"
[ "$lookups" -lt $((DIRS / 10)) ] ||
        fail "ls -l of $DIRS subdirectories whose counts the Store keeps took $lookups LOOKUPs"
ok

# A Store without the counts: answered by LOOKUPs, the counts still right.
sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/plus/store.db" "DROP TABLE tree_subdirs" ||
        fail "could not drop tree_subdirs"
list_top "no counts stored"
echo "ls -l of $DIRS subdirectories without their counts stored: $lookups LOOKUPs"
[ "$lookups" -ge "$DIRS" ] || fail "without stored counts, ls -l took $lookups LOOKUPs: the listing loaded subdirectories"
ok
finish
