#!/usr/bin/env bash
# A generated project at a small scale (issue 18's scale item; bench/scale.sh runs the
# same steps at 1,000,000 files beside git): SCALE_FILES files (default 10,000; make check
# runs this under a few seconds' budget, SCALE_FILES=100000 for a bigger look) in
# directories of 100 imported, mounted, listed with find, 1,000 of them changed, then
# status, commit, branch diff, export and gc give exactly what was done, and `project
# verify` passes after each. Then the second and third rounds change directories the
# first commit recorded, in the ways a commit cannot see by looking only where something
# changed since (status and commit look only in touched directories): a file rewritten, made
# executable, truncated, removed; a directory renamed; a file with a second name in
# another directory, written through that name a commit later; the file a merged commit
# brought in, changed again. Each round's status must be
# exactly the branch diff its commit makes, and the export the tree the test keeps beside.
# Before each round, and after the find, the kernel evicts what it holds (drop_caches):
# the daemon lets go of what the Store can give again (list_workspaces' inodes fall to
# what the kernel still holds and the files changed; a directory listed keeps a few
# bytes, not its record), every name keeps its inode number, and status and commit stay
# exact.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=scale
FILES=${SCALE_FILES:-10000}
PER_DIR=100
DIRS=$((FILES / PER_DIR))

# The trees live in memory: making 10,000 files on ext4 here takes longer than the test.
SHM=$(mktemp -d /dev/shm/layerfs-scale.XXXXXX)
# shellcheck disable=SC2034 # lib.sh's teardown runs it
TEARDOWN_EXTRA="rm -rf '$SHM'"
EXPECT=$SHM/expect

python3 - "$EXPECT" "$DIRS" "$PER_DIR" <<'EOF'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "d%05d" % d)
    os.makedirs(p)
    data = os.urandom(64 * per)
    for f in range(per):
        with open(os.path.join(p, "f%02d" % f), "wb") as fh:
            fh.write(data[f * 64:(f + 1) * 64])
EOF
lfs project init scale --from "$EXPECT" >/dev/null
head_of() { lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]'; }
# same_tree DIR WHAT: DIR holds what EXPECT does: names, kinds, contents and link targets
# (diff -r), and executable bits (tree_manifest's pipes and a Python walk each took
# seconds at this size).
same_tree() {
        local out
        out=$(diff -rq --no-dereference "$1" "$EXPECT" 2>&1) || fail "$2: $(head -3 <<<"$out")"
        assert_eq "$(cd "$1" && find . -type f -perm -u+x | sort)" "$(cd "$EXPECT" && find . -type f -perm -u+x | sort)" \
                "$2: executable files"
}
verified() {
        lfs project verify >/dev/null || fail "project verify after $1"
        ok
}
verified import
base=$(head_of)

n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
assert_eq "$(find "$ws" | wc -l)" $((FILES + DIRS + 1)) "find | wc -l in the Workspace"

# The daemon keeps what the kernel holds, not all it ever listed: once the kernel evicts
# what was looked up (drop_caches: FORGET), the records of what the Store can give again
# go, and each name comes back with the inode number it had, readdir's and lstat's.
# numbers ROOT: each path beneath ROOT with its number in its directory's listing and
# lstat's.
numbers() {
        python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
stack = [root]
while stack:
    for e in sorted(os.scandir(stack.pop()), key=lambda e: e.name):
        print(os.path.relpath(e.path, root), e.inode(), os.lstat(e.path).st_ino)
        if e.is_dir(follow_symlinks=False):
            stack.append(e.path)
EOF
}
# usage FIELD: what the daemon keeps of the Workspace's namespace (inodes, metadata_bytes).
usage() { lfs --json sandbox list_workspaces "$n" | json_get "j[0]['$1']"; }
# evict: the kernel drops what no one uses and queues a FORGET for each; it hands queued
# FORGETs out before the next request on /dev/fuse, but as a batch that one of the
# daemon's threads works through while another answers the LOOKUP after it (slowly under
# the sanitizer: the check then saw records that were about to go). So the count is
# taken again after another eviction, a few times at most, until it is what the kernel
# left; a daemon that keeps what it should not fails every time.
evict() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
        stat "$ws/d00001" >/dev/null
}
# evict_to RECORDS BYTES: evicts until the daemon holds at most RECORDS inode records and
# BYTES of namespace, 5 times at most; leaves what it held last in left and left_bytes.
evict_to() {
        for _ in 1 2 3 4 5; do
                evict
                left=$(usage inodes)
                left_bytes=$(usage metadata_bytes)
                [ "$left" -gt "$1" ] || [ "$left_bytes" -gt "$2" ] || return 0
        done
}
# Another test's drop_caches (the whole host's) between the find and the count lets the
# kernel forget what the find looked up: the find again, a few times at most.
for _ in 1 2 3 4 5; do
        numbers "$ws" >"$SHM/numbers"
        listed=$(usage inodes)
        listed_bytes=$(usage metadata_bytes)
        [ "$listed" -le "$FILES" ] || break
done
[ "$listed" -gt "$FILES" ] || fail "the daemon holds $listed inode records after a find over $FILES files"
evict_to $((DIRS + 1)) $((DIRS * 200 + 2000))
# What stays: the records of what the kernel still holds (the directory evict looks up).
[ "$left" -le $((DIRS + 1)) ] ||
        fail "the daemon still holds $left inode records ($left_bytes bytes; $listed and $listed_bytes after the find) once the kernel forgot them"
echo "namespace after find over $FILES files: $listed records, $listed_bytes bytes; after eviction: $left, $left_bytes"
# A directory listed and forgotten keeps its name in its directory, what its tree entry
# says and its entries' numbers (about 170 bytes), not its record (~520 with its slots):
# 53,156 bytes for 101 records at 10,000 files when each kept its record.
[ "$left_bytes" -le $((DIRS * 200 + 2000)) ] ||
        fail "the namespace takes $left_bytes bytes once the kernel forgot $DIRS directories listed (at most $((DIRS * 200 + 2000)))"
numbers "$ws" >"$SHM/numbers.again"
cmp -s "$SHM/numbers" "$SHM/numbers.again" ||
        fail "inode numbers changed after the kernel forgot them: $(diff "$SHM/numbers" "$SHM/numbers.again" | head -3)"
assert_eq "$(lfs workspace status "$n" main)" "" "status after the kernel forgot what find looked up"
evict
ok

# change ROOT...: rewrites 1,000 files (the same number in each of up to 200 directories
# spread over the tree) with the same new contents in each ROOT, and prints their paths.
change() {
        python3 - "$DIRS" "$@" <<'EOF'
import os, sys
dirs, roots = int(sys.argv[1]), sys.argv[2:]
spread = min(dirs, 200)
paths = ["d%05d/f%02d" % ((i % spread) * (dirs // spread), i // spread) for i in range(1000)]
data = os.urandom(64 * len(paths))
for root in roots:
    for i, p in enumerate(paths):
        with open(os.path.join(root, p), "r+b") as fh:
            fh.write(data[i * 64:(i + 1) * 64])
print("\n".join(paths))
EOF
}

# round NAME: the Workspace's status is the expected change list; the commit's branch
# diff is the same list; main exports as the expected tree; verify passes.
round() {
        local before status diff out=$SHM/export
        before=$(head_of)
        evict # what the kernel held is looked at again from the Store
        status=$(lfs workspace status "$n" main | sort)
        [ -n "$status" ] || fail "$1: status lists nothing"
        lfs workspace commit "$n" main -m "$1" >/dev/null
        diff=$(lfs branch diff "$before" main | sort) # status sorts by path, diff in tree order
        assert_eq "$status" "$diff" "$1: the status before the commit against the commit's branch diff"
        assert_eq "$(lfs workspace status "$n" main)" "" "$1: status after its commit"
        lfs branch export main "$out" >/dev/null
        same_tree "$out" "$1: main exported against the expected tree"
        rm -rf "$out"
        verified "$1"
}

# Round 1: the issue's 1,000 changed files.
paths=$(change "$ws" "$EXPECT")
status=$(lfs workspace status "$n" main)
# shellcheck disable=SC2001 # every line of the list
assert_eq "$status" "$(sed 's/^/M /' <<<"$paths" | sort)" "status after changing 1,000 files"
round "1,000 changed"
# What stays once the kernel forgot: the 1,000 files changed, and the directories.
evict_to $((1000 + DIRS + 1)) $((1 << 40))
[ "$left" -le $((1000 + DIRS + 1)) ] ||
        fail "the daemon holds $left inode records after the commit of 1,000 files and an eviction"
same_tree "$ws" "the Workspace after the commit and an eviction"
assert_eq "$(lfs branch diff "$base" main | wc -l)" 1000 "branch diff from the import"

# Round 2: directories the last commit recorded (untouched since) changed again.
both() { (cd "$ws" && "$@") && (cd "$EXPECT" && "$@"); }
both sh -c 'printf new >d00000/f00'            # rewritten (changed in round 1 too)
both chmod +x d00001/f01                         # only the executable bit
both truncate -s 0 d00002/f02
both rm d00003/f03
both mv d00004 d00004-moved                      # an untouched directory renamed
both ln d00005/f05 d00006/second-name            # a second name in another directory
round "second round"

# Round 3: the file with two names, written through the second one only: both names'
# directories must be looked at, though only one of them saw a name change.
both sh -c 'printf through-the-link >>d00006/second-name'
assert_eq "$(lfs workspace status "$n" main)" "$(printf 'M d00005/f05\nM d00006/second-name')" \
        "status of a file written through its second name"
round "third round"

# Round 4: a commit that merges another Workspace's (the Branch moved meanwhile): the view
# takes the other side's file, the status after it is clean, and a change of that file
# afterwards is seen.
n2=$(lfs sandbox create)
ws2=$(lfs workspace mount "$n2" main)
printf 'from the other side' >"$ws2/d00007/f07"
printf 'from the other side' >"$EXPECT/d00007/f07"
lfs workspace commit "$n2" main -m other >/dev/null
lfs workspace unmount "$n2" main >/dev/null
lfs sandbox close "$n2" >/dev/null
both sh -c 'printf ours >d00008/f08'
assert_eq "$(lfs --json workspace commit "$n" main -m ours | json_get 'j["merged"]')" True "the commit merged"
assert_eq "$(lfs workspace status "$n" main)" "" "status after a merged commit"
both sh -c 'printf again >>d00007/f07'
assert_eq "$(lfs workspace status "$n" main)" "M d00007/f07" "status of the merged-in file changed again"
round "after a merge"

# gc: a deleted branch's unique data goes, main keeps everything.
mkdir -p "$SHM/scratch"
head -c 100000 /dev/urandom >"$SHM/scratch/unique.bin"
lfs branch create scratch >/dev/null
lfs branch commit scratch --from "$SHM/scratch" -m scratch >/dev/null
lfs branch delete scratch >/dev/null
lfs workspace unmount "$n" main >/dev/null
lfs sandbox close "$n" >/dev/null
gc=$(lfs --json project gc)
[ "$(json_get 'j["loose_objects"] + j["packed_blobs"]' <<<"$gc")" -ge 1 ] || fail "gc removed no blob: $gc"
ok
lfs branch export main "$SHM/export" >/dev/null
same_tree "$SHM/export" "main exported after gc"
verified gc
finish
