#!/usr/bin/env bash
# Attack: lookups in a big directory under memory pressure. A command in a small memory
# cgroup stats and reads every file of a directory of FILES files (default 20,000; an
# argument sets it), round after round: the kernel reclaims the command's dentries and
# inodes as it goes and sends FORGET for each, and the daemon frees their records
# (evict_child) and makes each again at the next LOOKUP of its name. Before the fix, a
# LOOKUP after such a FORGET made again the record of every entry of the directory
# (restore_evicted) and the next FORGET swept them out again: each pair cost O(FILES), the
# rounds O(FILES²) (150,000 files, 3 rounds in 40 MiB: 21.4 s and 7.2 s of the daemon's
# CPU, against 5.2 s and 0.88 s with no limit; bench/evict_storm.sh), and the daemon ended
# holding a record for every file. Now a LOOKUP makes its own record alone: after the
# rounds the daemon holds about what the kernel holds (timings are never asserted; the
# records left are), and each file keeps its inode number and its content throughout.
# Likewise a listing (`ls -f`) of the directory once the kernel forgot it: each READDIR
# chunk made every freed record again, and the daemon ended holding one per file.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
FILES=${1:-20000}
LIMIT=20M
export LAYERFS_PROJECT=storm

# The command's memory cgroup: cgroup v2's where it offers the memory controller, else
# the v1 memory hierarchy's (a hybrid host, as here).
if grep -qw memory "$CG_MOUNT/cgroup.controllers" 2>/dev/null; then
        echo +memory >"$CG_MOUNT/cgroup.subtree_control"
        MEMCG=$CG_MOUNT/layerfs-storm-$$
        MEM_MAX=memory.max
else
        MEMCG=$(findmnt -n -t cgroup -O memory -o TARGET | head -1)
        [ -n "$MEMCG" ] || skip "no memory controller, in cgroup v2 or v1"
        MEMCG=$MEMCG/layerfs-storm-$$
        MEM_MAX=memory.limit_in_bytes
fi
# shellcheck disable=SC2034 # lib.sh's teardown runs it (the command has ended by then)
TEARDOWN_EXTRA="[ ! -d '$MEMCG' ] || rmdir '$MEMCG'"
mkdir "$MEMCG"
echo "$LIMIT" >"$MEMCG/$MEM_MAX"

mkdir -p "$WORK/src/big"
python3 - "$WORK/src/big" "$FILES" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%06d" % i), "wb") as fh:
        fh.write(b"%d\n" % i)
EOF
lfs project init storm --from "$WORK/src" >/dev/null
rm -rf "$WORK/src"
N=$(lfs sandbox create)
WS=$(lfs workspace mount "$N" main)
records() { lfs --json sandbox list_workspaces "$N" | json_get "j[0]['inodes']"; }

# Each file's inode number, with nothing limited, then dropped from the kernel's caches.
python3 - "$WS/big" >"$WORK/numbers" <<'EOF'
import os, sys
for n in sorted(os.listdir(sys.argv[1])):
    print(n, os.lstat(os.path.join(sys.argv[1], n)).st_ino)
EOF
[ "$(wc -l <"$WORK/numbers")" = "$FILES" ] || fail "the Workspace lists $(wc -l <"$WORK/numbers") files, not $FILES"
sync
echo 2 >/proc/sys/vm/drop_caches
stat "$WS" >/dev/null

# Three rounds in the cgroup: lstat and read each file; what differs is printed.
out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$MEMCG" python3 - "$WS/big" "$WORK/numbers" <<'EOF'
import os, sys
d = sys.argv[1]
numbers = [l.split() for l in open(sys.argv[2])]
for r in range(3):
    for name, ino in numbers:
        p = os.path.join(d, name)
        st = os.lstat(p)
        if st.st_ino != int(ino):
            print("round %d: %s has inode %d, had %s" % (r, name, st.st_ino, ino))
        with open(p, "rb") as f:
            data = f.read()
        if data != b"%d\n" % int(name[1:]):
            print("round %d: %s holds %r" % (r, name, data[:20]))
EOF
) || fail "the rounds under a $LIMIT memory limit failed"
assert_eq "$(head -5 <<<"$out")" "" "inode numbers and contents through evictions under memory pressure"

# The kernel reclaimed under the limit, so the daemon freed records as it went, and made
# again only those looked up: it holds about what the kernel does, not every file.
left=$(records)
echo "records after the rounds: $left of $FILES files"
[ "$left" -lt $((FILES / 2)) ] ||
        fail "the daemon holds $left records after lookups of $FILES files under a $LIMIT limit: a lookup after an eviction made again more than its own"
ok

# A listing of the directory once the kernel forgot its entries, in the cgroup: each chunk
# makes again only the records its entries need (READDIRPLUS's answers, none for plain
# READDIR). Before, each chunk made again the record of every entry evict_child had freed
# (restore_evicted): the whole directory per chunk (quadratic under pressure, where
# FORGETs come between the chunks), and a record for every file after a plain listing.
sync
echo 2 >/proc/sys/vm/drop_caches
stat "$WS" >/dev/null
listed=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$MEMCG" ls -f "$WS/big" | wc -l)
assert_eq "$listed" $((FILES + 2)) "ls -f of the directory under a $LIMIT limit"
left=$(records)
echo "records after a listing of the forgotten directory: $left of $FILES files"
[ "$left" -lt $((FILES / 2)) ] ||
        fail "the daemon holds $left records after a listing of $FILES files the kernel had forgotten: a listing made again every record"
ok

# And the same numbers once the kernel forgot all of them, outside the cgroup.
python3 - "$WS/big" >"$WORK/numbers.after" <<'EOF'
import os, sys
for n in sorted(os.listdir(sys.argv[1])):
    print(n, os.lstat(os.path.join(sys.argv[1], n)).st_ino)
EOF
cmp -s "$WORK/numbers" "$WORK/numbers.after" ||
        fail "inode numbers changed: $(diff "$WORK/numbers" "$WORK/numbers.after" | head -3)"
assert_eq "$(lfs workspace status "$N" main)" "" "status after the rounds"
ok
finish
