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
# Likewise a listing of the directory once the kernel forgot it: each READDIR chunk made
# every freed record again, and the daemon ended holding one per file. The listing must
# stay whole: each name once, with its d_type (files, directories and symlinks, kept
# without a record by evict_child) and its inode number, as before the pressure.
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

# FILES files, and among them one directory and one symlink per 100 (so a listing's d_type
# has three kinds to get right).
mkdir -p "$WORK/src/big"
python3 - "$WORK/src/big" "$FILES" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%06d" % i), "wb") as fh:
        fh.write(b"%d\n" % i)
for i in range(0, n, 100):
    os.mkdir(os.path.join(d, "d%06d" % i))
    os.symlink("f%06d" % i, os.path.join(d, "l%06d" % i))
EOF
OTHERS=$(((FILES + 99) / 100)) # directories, and as many symlinks
ENTRIES=$((FILES + 2 * OTHERS))
lfs project init storm --from "$WORK/src" >/dev/null
rm -rf "$WORK/src"
N=$(lfs sandbox create)
WS=$(lfs workspace mount "$N" main)
records() { lfs --json sandbox list_workspaces "$N" | json_get "j[0]['inodes']"; }
# python3 listing.py DIR: each entry as readdir(3) gives it (name, d_type, d_ino; no stat,
# which would hide a wrong d_type or number), sorted.
cat >"$WORK/listing.py" <<'EOF'
import ctypes, sys
class dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte), ("d_name", ctypes.c_char * 256)]
libc = ctypes.CDLL(None, use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(dirent)
libc.readdir.argtypes = libc.closedir.argtypes = [ctypes.c_void_p]
d = libc.opendir(sys.argv[1].encode())
if not d:
    sys.exit("opendir %s: errno %d" % (sys.argv[1], ctypes.get_errno()))
out = []
while True:
    ctypes.set_errno(0)
    e = libc.readdir(d)
    if not e:
        if ctypes.get_errno():
            sys.exit("readdir %s: errno %d" % (sys.argv[1], ctypes.get_errno()))
        break
    name = e.contents.d_name.decode()
    if name not in (".", ".."):
        out.append("%s %d %d" % (name, e.contents.d_type, e.contents.d_ino))
libc.closedir(d)
print("\n".join(sorted(out)))
EOF

# Each file's inode number, with nothing limited, then dropped from the kernel's caches.
python3 - "$WS/big" >"$WORK/numbers" <<'EOF'
import os, sys
for n in sorted(os.listdir(sys.argv[1])):
    print(n, os.lstat(os.path.join(sys.argv[1], n)).st_ino)
EOF
[ "$(wc -l <"$WORK/numbers")" = "$ENTRIES" ] || fail "the Workspace lists $(wc -l <"$WORK/numbers") entries, not $ENTRIES"
# The listing with nothing limited: each d_type as made (DT_DIR 4, DT_REG 8, DT_LNK 10),
# each d_ino the name's lstat number.
python3 "$WORK/listing.py" "$WS/big" >"$WORK/listing"
assert_eq "$(awk '{ print substr($1, 1, 1) $2 }' "$WORK/listing" | sort | uniq -c | xargs)" \
        "$OTHERS d4 $FILES f8 $OTHERS l10" "the d_types of the listing"
assert_eq "$(awk '{ print $1, $3 }' "$WORK/listing")" "$(cat "$WORK/numbers")" "the listing's d_ino, each its name's st_ino"
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
        if name[0] == "d":
            continue
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
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$MEMCG" python3 "$WORK/listing.py" "$WS/big" >"$WORK/listing.pressed" ||
        fail "the listing under a $LIMIT limit failed"
cmp -s "$WORK/listing" "$WORK/listing.pressed" ||
        fail "the listing under a $LIMIT limit differs from the one before (name, d_type, d_ino): $(diff "$WORK/listing" "$WORK/listing.pressed" | head -5 | xargs)"
ok
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
