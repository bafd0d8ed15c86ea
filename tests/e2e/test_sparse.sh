#!/usr/bin/env bash
# Sparse files: a 5 GiB file (SPARSE_UNIT_MIB below) that is mostly holes is stored and
# exported as holes, not as 5 GiB of zeros, through import, branch commit, a Workspace
# (copy-up and commit) and export; a file of written zeros is stored as holes too.
# Its contents and id are the same as for the zeros they read as. `project verify` after
# each.
source "$(dirname "$0")/lib.sh"
export LAYERFS_PROJECT=sp
# The sparse file is 5 units long, its data at offsets counted in units. A unit is 1 GiB,
# so that offsets pass 4 GiB; SPARSE_UNIT_MIB makes it smaller where the time goes to the
# length, not to the code run (make sanitize: 128, a 640 MiB file, every check the same;
# at 1 GiB the test took 214 s under ASan).
UNIT=$((${SPARSE_UNIT_MIB:-1024} << 20))

# blocks_mib PATH...: the MiB of blocks the paths take.
blocks_mib() { du -s --block-size=1M "$@" | awk '{ s += $1 } END { print s }'; }
# at FILE OFFSET LENGTH: LENGTH bytes of FILE at OFFSET.
at() { dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none; }
# allocated PATH: bytes of blocks one file takes.
allocated() { echo $(($(stat -c '%b * %B' "$1"))); }
# extents PATH: the file's data extents as lseek(SEEK_DATA/SEEK_HOLE) finds them, in 4 KiB
# blocks ("first-end ..."), then "end" or the errno that a seek at the length gives.
extents() {
        python3 - "$1" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, at, out = os.fstat(fd).st_size, 0, []
while True:
    try:
        data = os.lseek(fd, at, os.SEEK_DATA)
    except OSError as e:
        assert e.errno == errno.ENXIO, e
        break
    at = os.lseek(fd, data, os.SEEK_HOLE)
    out.append("%d-%d" % (data // 4096, (at + 4095) // 4096))
try:
    os.lseek(fd, size, os.SEEK_DATA)
    out.append("data-at-end")
except OSError as e:
    out.append(errno.errorcode[e.errno])
print(" ".join(out))
PY
}

mkdir -p "$WORK/src"
truncate -s $((5 * UNIT)) "$WORK/src/disk.img"
printf head | dd of="$WORK/src/disk.img" conv=notrunc status=none
printf middle | dd of="$WORK/src/disk.img" bs=1 seek=$((2 * UNIT + 12345)) conv=notrunc status=none
printf tail | dd of="$WORK/src/disk.img" bs=1 seek=$((5 * UNIT - 4)) conv=notrunc status=none
dd if=/dev/zero of="$WORK/src/zeros.bin" bs=1M count=8 status=none
# Bigger than a pack takes (64 KiB), smaller than 4 MiB: a loose object keeps its holes too.
MID=$((2 << 20))
truncate -s $MID "$WORK/src/mid.img"
printf start | dd of="$WORK/src/mid.img" conv=notrunc status=none
printf end | dd of="$WORK/src/mid.img" bs=1 seek=$((MID - 3)) conv=notrunc status=none
[ "$(allocated "$WORK/src/disk.img")" -lt $((1 << 20)) ] || fail "this file system did not make the file sparse"

lfs project init sp --from "$WORK/src" >/dev/null
objects=$(blocks_mib "$LAYERFS_HOME/projects/sp/objects")
[ "$objects" -lt 64 ] || fail "the Store took $objects MiB for a $((5 * UNIT >> 20)) MiB sparse file and 8 MiB of zeros"
# The loose object of mid.img: the one file of its length below objects/ (packs aside).
mid_object=$(find "$LAYERFS_HOME/projects/sp/objects" -path '*/packs' -prune -o -type f -size ${MID}c -print)
[ -n "$mid_object" ] || fail "no loose object of $MID bytes for mid.img"
[ "$(allocated "$mid_object")" -lt $((1 << 20)) ] ||
        fail "the Store wrote the holes of a $MID-byte file: $(allocated "$mid_object") bytes of blocks"
lfs project verify >/dev/null
ok

lfs branch export main "$WORK/out" >/dev/null
[ "$(allocated "$WORK/out/mid.img")" -lt $((1 << 20)) ] ||
        fail "the export wrote the holes of a $MID-byte file: $(allocated "$WORK/out/mid.img") bytes of blocks"
same_sparse "$WORK/src/mid.img" "$WORK/out/mid.img" || fail "the exported $MID-byte file differs"
assert_eq "$(stat -c %s "$WORK/out/disk.img")" $((5 * UNIT)) "exported length"
[ "$(allocated "$WORK/out/disk.img")" -lt $((1 << 20)) ] ||
        fail "the export wrote $(allocated "$WORK/out/disk.img") bytes of blocks for the sparse file"
[ "$(allocated "$WORK/out/zeros.bin")" -lt $((1 << 20)) ] || fail "the export wrote the zeros out"
same_sparse "$WORK/src/disk.img" "$WORK/out/disk.img" || fail "the exported sparse file differs"
same_sparse "$WORK/src/zeros.bin" "$WORK/out/zeros.bin" || fail "the exported zeros differ"
ok

# A change in the middle of a hole, recorded with branch commit: the new object is sparse.
printf changed | dd of="$WORK/out/disk.img" bs=1 seek=$((3 * UNIT)) conv=notrunc status=none
lfs branch commit main --from "$WORK/out" -m "a change in a hole" >/dev/null
parent=$(lfs --json branch log main | json_get 'j[1]["commit"]')
assert_eq "$(lfs branch diff "$parent" main)" "M disk.img" "the diff"
objects=$(blocks_mib "$LAYERFS_HOME/projects/sp/objects")
[ "$objects" -lt 64 ] || fail "the Store took $objects MiB after the commit"
lfs branch export main "$WORK/out2" >/dev/null
[ "$(allocated "$WORK/out2/disk.img")" -lt $((1 << 20)) ] || fail "the second export is not sparse"
# (The export checked every byte against the object's id; here the bytes that changed.)
assert_eq "$(at "$WORK/out2/disk.img" $((3 * UNIT)) 7)" changed "the change, exported"
lfs project verify >/dev/null
ok

# Through a Workspace: the same bytes; a write there keeps the holes up to the Store.
if [ "$(id -u)" = 0 ]; then
        use_private_sandboxes
        n=$(lfs sandbox create)
        ws=$(lfs workspace mount "$n" main)
        assert_eq "$(stat -c %s "$ws/disk.img")" $((5 * UNIT)) "length in the Workspace"
        for where in "0 4 head" "$((2 * UNIT + 12345)) 6 middle" "$((3 * UNIT)) 7 changed" "$((5 * UNIT - 4)) 4 tail"; do
                set -- $where
                assert_eq "$(at "$ws/disk.img" "$1" "$2")" "$3" "the Workspace reads $3 at $1"
        done
        assert_eq "$(at "$ws/disk.img" $((4 * UNIT)) 8 | od -An -tx1 | tr -d ' ')" 0000000000000000 "a hole reads as zeros"
        # The file still in the Store: its holes show (du, SEEK_DATA/SEEK_HOLE, so that a
        # cp out of the Workspace stays sparse) as the export's own do; on each FUSE loop.
        for transport in libfuse dev; do
                other=$(LAYERFS_FUSE_TRANSPORT=$transport lfs sandbox create)
                ows=$(lfs workspace mount "$other" main)
                [ "$(allocated "$ows/disk.img")" -lt $((1 << 20)) ] ||
                        fail "$transport: the Workspace reports $(allocated "$ows/disk.img") bytes of blocks for the Store's sparse file"
                assert_eq "$(extents "$ows/disk.img")" "$(extents "$WORK/out2/disk.img")" "$transport: the Store file's extents"
                [ "$(extents "$ows/disk.img" | wc -w)" -gt 2 ] || fail "$transport: the extents found no hole: $(extents "$ows/disk.img")"
                assert_eq "$(extents "$ows/zeros.bin")" ENXIO "$transport: 8 MiB of zeros, stored as a hole"
                cp --sparse=auto "$ows/disk.img" "$WORK/copied.img"
                [ "$(allocated "$WORK/copied.img")" -lt $((1 << 20)) ] || fail "$transport: a cp out of the Workspace wrote the holes"
                same_sparse "$WORK/out2/disk.img" "$WORK/copied.img" || fail "$transport: the copy out of the Workspace differs"
                rm -f "$WORK/copied.img"
                lfs workspace unmount "$other" main >/dev/null
                lfs sandbox close "$other" >/dev/null
        done
        lfs workspace exec "$n" main -- sh -c 'printf 0123456789 >small'
        assert_eq "$(extents "$ws/small")" "0-1 ENXIO" "a small file written in the Workspace: one extent"
        # A write copies the file up: the upper file keeps the holes, and so does the commit.
        lfs workspace exec "$n" main -- sh -c "printf workspace | dd of=disk.img bs=1 seek=$((4 * UNIT)) conv=notrunc status=none"
        upper=$(blocks_mib "$(records "SELECT dir FROM sandboxes WHERE number=$n")/upper")
        [ "$upper" -lt 64 ] || fail "the copy-up took $upper MiB"
        [ "$(allocated "$ws/disk.img")" -lt $((1 << 20)) ] || fail "the Workspace's file takes $(allocated "$ws/disk.img") bytes"
        assert_eq "$(extents "$ws/disk.img" | wc -w)" "$(($(extents "$WORK/out2/disk.img" | wc -w) + 1))" \
                "the copied-up file's extents: one more, the write"
        assert_eq "$(at "$ws/disk.img" $((4 * UNIT)) 9)" workspace "the write, read back"
        assert_eq "$(at "$ws/disk.img" $((2 * UNIT + 12345)) 6)" middle "the rest after the copy-up"
        lfs workspace commit "$n" main -m "a write in a Workspace" >/dev/null
        lfs branch export main "$WORK/out3" >/dev/null
        [ "$(allocated "$WORK/out3/disk.img")" -lt $((1 << 20)) ] || fail "the export after the Workspace's commit is not sparse"
        assert_eq "$(at "$WORK/out3/disk.img" $((4 * UNIT)) 9)" workspace "the Workspace's write, exported"
        objects=$(blocks_mib "$LAYERFS_HOME/projects/sp/objects")
        [ "$objects" -lt 64 ] || fail "the Store took $objects MiB after the Workspace's commit"
        lfs project verify >/dev/null
        lfs workspace unmount "$n" main >/dev/null
        lfs sandbox close "$n" >/dev/null
        assert_no_sandbox_left "after close"
fi
finish
