#!/usr/bin/env bash
# Attack on the Workspace's SEEK_DATA/SEEK_HOLE (ws_lseek) and st_blocks: every answer,
# at negative, inner, end and huge offsets, must be ext4's for the same file written the
# same way (a plain directory beside the Workspace): a file still in the Store (sparse,
# packed, empty, all hole), one copied up, one written with passthrough without a stat
# in between (the kernel lengthens the upper file behind the daemon: its answer was
# ENXIO for data at 0), hard-linked, unlinked while open; and each Store file's st_blocks
# (a file of holes alone showed 1, a 100-byte packed one 1 where ext4 has 8).
# Fixed by: ws_lseek asks an upper file itself, bounding only a Store file by its length;
# lower_blocks counts whole 4 KiB blocks, and -1 (not 0) means "not read yet".
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=seek
MiB=$((1 << 20))
mkdir "$WORK/src"
# Sparse and past the Store's whole-file size (4 MiB), so that its object keeps the holes.
truncate -s $((6 * MiB)) "$WORK/src/sparse"
printf 'a%.0s' $(seq 4096) | dd of="$WORK/src/sparse" conv=notrunc status=none
printf 'b%.0s' $(seq 4096) | dd of="$WORK/src/sparse" bs=4096 seek=768 conv=notrunc status=none
head -c 100 /dev/urandom >"$WORK/src/packed"
: >"$WORK/src/empty"
truncate -s $((5 * MiB)) "$WORK/src/hole"
lfs project init seek --from "$WORK/src" >/dev/null
cp -a --sparse=always "$WORK/src" "$WORK/ext4"
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
require_passthrough "$n"

# seeks ROOT FILE...: for each file, its st_blocks (a file of holes alone took 1: 0 was
# "not read yet"), SEEK_DATA and SEEK_HOLE at offsets around its data
# and its end, asked through one fd; then what the writes below make of new files.
cat >"$WORK/seeks.py" <<'PY'
import errno, os, sys
MiB = 1 << 20
root = sys.argv[1]
def ask(fd, offsets):
    out = []
    for off in offsets:
        for name, whence in (("data", os.SEEK_DATA), ("hole", os.SEEK_HOLE)):
            try:
                out.append("%s@%d=%d" % (name, off, os.lseek(fd, off, whence)))
            except OSError as e:
                out.append("%s@%d=%s" % (name, off, errno.errorcode[e.errno]))
    return " ".join(out)
def around(size):
    return [-1, -(1 << 62), 0, 1, 4095, 4096, 3 * MiB, 3 * MiB + 4096, size - 1, size, size + 1, 1 << 62]
def path(name):
    return os.path.join(root, name)
for name in sys.argv[2:]:
    fd = os.open(path(name), os.O_RDONLY)
    st = os.fstat(fd)
    print(name, "blocks=%d" % st.st_blocks, ask(fd, around(st.st_size)))
    os.close(fd)
# Written (passthrough when the mount offers it) and asked on the same fd at once.
fd = os.open(path("grown"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
print("new", ask(fd, [0]))
os.pwrite(fd, b"x" * 8192, 0)
print("written", ask(fd, [0, 4096, 8191, 8192]))
os.pwrite(fd, b"y" * 4096, 3 * MiB)
print("lengthened", ask(fd, [0, 8192, 3 * MiB - 1, 3 * MiB + 100, 3 * MiB + 4096]))
os.ftruncate(fd, 4096)
print("cut", ask(fd, [0, 4095, 4096, 8192]))
os.link(path("grown"), path("link"))
other = os.open(path("link"), os.O_RDWR)
os.pwrite(other, b"z" * 4096, 2 * MiB)
print("through its link", ask(fd, [4096, 2 * MiB, 2 * MiB + 4096]))
os.unlink(path("grown"))
os.unlink(path("link"))
os.pwrite(fd, b"w" * 4096, 4 * MiB)
print("unlinked", ask(other, [4096, 2 * MiB + 4096, 4 * MiB, 4 * MiB + 4096]))
os.close(fd)
os.close(other)
# A Store file written in the middle: copied up, its holes kept.
fd = os.open(path("sparse"), os.O_RDWR)
os.pwrite(fd, b"c" * 4096, 5 * MiB)
print("copied up", ask(fd, around(os.fstat(fd).st_size) + [5 * MiB, 5 * MiB + 4096]))
os.close(fd)
PY
python3 "$WORK/seeks.py" "$WORK/ext4" sparse packed empty hole >"$WORK/on-ext4"
python3 "$WORK/seeks.py" "$ws" sparse packed empty hole >"$WORK/in-workspace"
while read -r want && read -r got <&3; do
        assert_eq "$got" "$want" "the Workspace's answers for ${want%% *}"
done <"$WORK/on-ext4" 3<"$WORK/in-workspace"
assert_eq "$(wc -l <"$WORK/in-workspace")" "$(wc -l <"$WORK/on-ext4")" "lines of answers"
lfs workspace unmount "$n" main --discard >/dev/null
lfs sandbox close "$n" >/dev/null
assert_no_sandbox_left "after close"
finish
