#!/usr/bin/env bash
# Memory that grows with the directories touched, not with the change (issue 18's scale
# item): DIRS directories of PER_DIR files each (default 16 of 2,000; arguments set them)
# are listed with their attributes, forgotten by the kernel, then each gets one change of
# a name (a file made, removed, renamed in place or to another directory, a directory
# made, a second name) or of a file (written, chmod), and is listed again and forgotten
# again. Before, one change of a name made the record of every entry of its directory
# again (load_dir) and they stayed until the unmount (evict_child refused a directory
# whose names were no longer those of its load): the daemon held a record (~460 bytes)
# for every file of every directory touched. Now it keeps those of the names changed and
# what the kernel holds, and lets the records of the others go as before the change. Each
# unchanged file keeps its inode number and attributes (mode, size, times, link count)
# through it all, and status and commit see exactly the changes, before and after the
# kernel forgets. Last, random operations (fsops.py) on a Workspace of a random tree, the
# kernel forgetting at every check, against a plain directory.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=changedmem
DIRS=${1:-16}
PER_DIR=${2:-2000}
FILES=$((DIRS * PER_DIR))
[ "$DIRS" -ge 10 ] || fail "DIRS must be at least 10 (one directory per kind of change), not $DIRS"

SHM=$(mktemp -d /dev/shm/layerfs-changedmem.XXXXXX)
# shellcheck disable=SC2034 # lib.sh's teardown runs it
TEARDOWN_EXTRA="rm -rf '$SHM'"
# Each directory: PER_DIR files, a subdirectory holding one (so that an evicted entry
# of a changed directory can be a directory, whose link count needs it) and a symlink.
python3 - "$SHM/src" "$DIRS" "$PER_DIR" <<'EOF'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "d%02d" % d)
    os.makedirs(os.path.join(p, "sub"))
    with open(os.path.join(p, "sub", "inner"), "w") as fh:
        fh.write("inner %d\n" % d)
    os.symlink("f00000", os.path.join(p, "link"))
    for f in range(per):
        with open(os.path.join(p, "f%05d" % f), "w") as fh:
            fh.write("%d/%d\n" % (d, f))
    os.chmod(os.path.join(p, "f00003"), 0o755)
# 200 files of sizes 1 to 200, most of which go: the names left move down (dir_compact).
os.makedirs(os.path.join(root, "d00", "many"))
for i in range(200):
    with open(os.path.join(root, "d00", "many", "c%03d" % i), "w") as fh:
        fh.write("x" * (i + 1))
EOF
lfs project init changedmem --from "$SHM/src" >/dev/null
rm -rf "$SHM/src"
base=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)

usage() { lfs --json sandbox list_workspaces "$n" | json_get "j[0]['$1']"; }
# attrs: each path below the Workspace with what lstat says of it (number, mode, size,
# times, link count), sorted.
attrs() {
        python3 - "$ws" <<'EOF'
import os, sys
root = sys.argv[1]
out = []
for dirpath, dirs, files in os.walk(root):
    for name in dirs + files:
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        out.append("%s %d %o %d %d %d %d" % (os.path.relpath(p, root), st.st_ino, st.st_mode, st.st_size,
                                             st.st_mtime_ns, st.st_ctime_ns, st.st_nlink))
print("\n".join(sorted(out)))
EOF
}
# evict_to RECORDS: the kernel forgets what no one uses (FORGET for each), until the
# daemon holds at most RECORDS records, 5 times at most (a batch of FORGETs may still be
# on its way when the count is taken: test_scale.sh says more); left is the last count.
evict_to() {
        for _ in 1 2 3 4 5; do
                sync
                echo 2 >/proc/sys/vm/drop_caches
                stat "$ws" >/dev/null
                left=$(usage inodes)
                left_bytes=$(usage metadata_bytes)
                [ "$left" -gt "$1" ] || return 0
        done
}
# What the daemon may keep once the kernel forgot: a few records per directory (the
# directories themselves, the names changed), far below one per file.
KEEP=$((DIRS * 4 + 16))

attrs >"$SHM/attrs.before"
listed=$(usage inodes)
evict_to "$KEEP"
echo "namespace: $listed records after lstat of every entry; $left ($left_bytes bytes) once forgotten"
[ "$left" -le "$KEEP" ] || fail "the daemon holds $left records once the kernel forgot $FILES files it listed, unchanged"
ok

# One change in each directory; the rest get a file made. In d00/many, 130 of the 200
# files go: once the removed outnumber the rest, the 70 left move down the directory's
# entries (dir_compact), their records freed: each takes what restores it along.
printf 'new\n' >"$ws/d00/new"
# By name (a glob would list the directory, and the kernel would hold every entry).
python3 -c 'import os, sys; [os.unlink(os.path.join(sys.argv[1], "c%03d" % i)) for i in range(130)]' "$ws/d00/many"
rm "$ws/d01/f00001"
mv "$ws/d02/f00002" "$ws/d02/renamed"
mkdir "$ws/d03/newdir"
mv "$ws/d04/f00004" "$ws/d05/moved"
ln "$ws/d06/f00006" "$ws/d06/second"
printf 'rewritten\n' >"$ws/d07/f00007"
chmod +x "$ws/d08/f00008"
mv "$ws/d09/sub" "$ws/d09/sub2"
expect="A d00/new
D d01/f00001
D d02/f00002
A d02/renamed
A d03/newdir
D d04/f00004
A d05/moved
A d06/second
M d07/f00007
M d08/f00008
D d09/sub/inner
A d09/sub2/inner"
for ((i = 0; i < 130; i++)); do
        expect+=$'\n'"$(printf 'D d00/many/c%03d' "$i")"
done
for ((d = 10; d < DIRS; d++)); do
        dir=$(printf 'd%02d' "$d")
        printf 'new %d\n' "$d" >"$ws/$dir/new"
        expect+=$'\n'"A $dir/new"
done
expect=$(sort <<<"$expect")
changed="d00/many d00/many/c0[0-9][0-9] d00/many/c1[0-2][0-9] d00/new d01/f00001 d02/f00002 d02/renamed d03/newdir d04/f00004 d05/moved d06/f00006 d06/second
d07/f00007 d08/f00008 d09/sub d09/sub/inner d09/sub2 d09/sub2/inner $(for ((d = 10; d < DIRS; d++)); do printf 'd%02d/new ' "$d"; done)"
# unchanged FILE: the lines of FILE (attrs') of files, symlinks and subdirectories the
# changes left alone (a directory's own times and link count change with its names).
unchanged() {
        local re
        re=$(tr ' ' '\n' <<<"$changed" | grep -v '^$' | sed 's/^/^/; s/$/ /' | paste -sd'|')
        grep -Ev "^d[0-9]+ |$re" "$1"
}
assert_eq "$(lfs workspace status "$n" main | sort)" "$expect" "status after one change per directory"
ok

# Listed again with attributes, then forgotten: the daemon lets go of the records of
# every entry left as its tree says, in the changed directories too.
attrs >"$SHM/attrs.changed"
evict_to "$KEEP"
echo "namespace after one change in each of $DIRS directories of $PER_DIR files, listed and forgotten: $left records, $left_bytes bytes"
[ "$left" -le "$KEEP" ] ||
        fail "the daemon holds $left records ($left_bytes bytes of namespace) once the kernel forgot $DIRS directories of $PER_DIR files with one change each: the records of the unchanged entries stayed"
ok
attrs >"$SHM/attrs.after"
cmp -s "$SHM/attrs.changed" "$SHM/attrs.after" ||
        fail "attributes changed once the kernel forgot them: $(diff "$SHM/attrs.changed" "$SHM/attrs.after" | head -4 | xargs)"
assert_eq "$(unchanged "$SHM/attrs.after")" "$(unchanged "$SHM/attrs.before")" \
        "number, mode, size, times and link count of every entry the changes left alone"
assert_eq "$(grep -c "^d0[0-9]/sub " "$SHM/attrs.after" | xargs)" 9 "the subdirectories each changed directory keeps"
assert_eq "$(awk '$1 == "d03" { print $7 }' "$SHM/attrs.after")" 4 "d03's link count with its new subdirectory"
assert_eq "$(awk '$1 == "d09/sub2" { print $7 }' "$SHM/attrs.after")" 2 "the renamed directory's link count"
assert_eq "$(cat "$ws/d06/second" "$ws/d05/moved" "$ws/d07/f00007" "$ws/d11/f01999" "$ws/d11/link")" \
        "$(printf '6/6\n4/4\nrewritten\n11/1999\n11/0')" "contents after the kernel forgot"
evict_to "$KEEP"
assert_eq "$(lfs workspace status "$n" main | sort)" "$expect" "status once the kernel forgot"
ok

# The commit records exactly the changes, and after it (and another eviction) there is
# nothing left to report, and still nothing kept of what did not change.
lfs workspace commit "$n" main -m "one change per directory" >/dev/null
assert_eq "$(lfs branch diff "$base" main | sort)" "$expect" "the commit's branch diff"
evict_to "$KEEP"
[ "$left" -le "$KEEP" ] || fail "the daemon holds $left records after the commit once the kernel forgot"
assert_eq "$(lfs workspace status "$n" main)" "" "status after the commit"
attrs >"$SHM/attrs.committed"
assert_eq "$(unchanged "$SHM/attrs.committed")" "$(unchanged "$SHM/attrs.before")" \
        "attributes of the unchanged entries after the commit"
evict_to "$KEEP"
assert_eq "$(lfs workspace status "$n" main)" "" "status after the commit, listed and forgotten"
lfs project verify >/dev/null || fail "project verify after the commit"
ok

# Random operations against a plain directory with the kernel forgetting at every check
# (fsops.py --forget-at-checks), on a Workspace whose entries all come from its tree:
# renames, links, removals, chmods and writes meet entries whose records went, in
# directories already changed. Then status is exactly what the commit records, and the
# commit exactly the plain directory. The start: a random tree, as the Store keeps it.
FSOPS="$ROOT/tests/e2e/fsops.py"
manifest() { python3 "$FSOPS" manifest "$1"; }
python3 "$FSOPS" run --seed 5 --ops 800 --check-every 800 "$SHM/gen-a" "$SHM/gen-b" >/dev/null
export LAYERFS_PROJECT=changedrand
lfs project init changedrand --from "$SHM/gen-a" >/dev/null
rm -rf "$SHM/gen-a" "$SHM/gen-b"
lfs branch export main "$SHM/plain" >/dev/null
rbase=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
r=$(lfs sandbox create)
rws=$(lfs workspace mount "$r" main)
chmod "$(stat -c %a "$rws")" "$SHM/plain"
python3 "$FSOPS" run --seed 17 --ops "${FSOPS_OPS:-3000}" --check-every 250 --forget-at-checks "$SHM/plain" "$rws" \
        >"$WORK/fsops.log" 2>&1 || { tail -30 "$WORK/fsops.log" >&2; false; } ||
        fail "random operations with the kernel forgetting at each check diverged (fsops.py run --seed 17)"
sync
echo 2 >/proc/sys/vm/drop_caches
status=$(lfs workspace status "$r" main | sort)
lfs workspace commit "$r" main -m random >/dev/null
assert_eq "$status" "$(lfs branch diff "$rbase" main | sort)" "the status after random operations, against its commit's branch diff"
lfs branch export main "$SHM/exported" >/dev/null
if ! got=$(manifest "$SHM/exported") || ! want=$(manifest "$SHM/plain") || [ -z "$want" ]; then
        fail "no manifest of the export or of the plain directory"
fi
assert_eq "$got" "$want" "the commit after random operations, against the plain directory"
sync
echo 2 >/proc/sys/vm/drop_caches
assert_eq "$(lfs workspace status "$r" main)" "" "status after the random operations' commit"
ok
finish
