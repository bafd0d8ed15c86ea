#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): write through a
# passed-through open into something outside the Workspace's upper files. The kernel
# opens a backing file again for each passed-through open, with that open's flags and
# the registering thread's credentials, so a Store object registered for a reader would
# be opened for writing by a later write-open of the same inode and the write would
# change the Store (the objects other branches and Sandboxes read). The daemon registers
# upper files only. Tried here, each against the Store staying as committed (project
# verify, and a second Sandbox reading the committed bytes): a large Store file held open
# for reading while another process opens it for writing and writes (and maps it
# shared), the same through a hard link made in the Workspace, a write-open of a file
# whose data another branch shares (same blob), and a fifo made in the Workspace (never
# registered: not a regular file).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
mkdir "$WORK/src"
head -c $((2 << 20)) /dev/urandom >"$WORK/src/big"
cp "$WORK/src/big" "$WORK/src/same" # one blob, two names
sum=$(sha256sum <"$WORK/src/big")
start_passthrough_sandbox ptstore
lfs branch create other >/dev/null 2>&1 || lfs branch create other main >/dev/null

# A reader holds big (a Store file) while a writer writes it, and a shared mapping.
in_main "$N" python3 -c "
import mmap, os
r = os.open('big', os.O_RDONLY)
os.read(r, 4096)
w = os.open('big', os.O_RDWR)
os.pwrite(w, b'written', 0)
m = mmap.mmap(w, 0, mmap.MAP_SHARED)
m[100:107] = b'mapped!'
m.flush(); m.close(); os.close(w)
assert os.pread(r, 7, 0) == b'written', os.pread(r, 7, 0)
os.close(r)"
# Through a hard link made in the Workspace to the other Store file with the same blob.
in_main "$N" sh -c 'ln same linked && exec 3<same && printf linked >>linked && exec 3<&-'
# A fifo: opened for both ends, data goes through, nothing registered.
in_main "$N" sh -c 'mkfifo pipe && { echo through >pipe & } && read -r got <pipe && test "$got" = through' ||
        fail "a fifo in the Workspace does not carry data"
assert_eq "$(lfs workspace status "$N" main | LC_ALL=C sort | tr '\n' ' ')" "A linked M big M same " \
        "status after the writes"
assert_eq "$(head -c 7 "$WS/big")" written "big as written"
# The Store is as committed: verified, and read so by a second Sandbox on main and other.
lfs project verify >"$WORK/verify" 2>&1 || fail "project verify after the writes: $(cat "$WORK/verify")"
n2=$(lfs sandbox create)
lfs workspace mount "$n2" main >/dev/null
lfs workspace mount "$n2" other >/dev/null
assert_eq "$(lfs workspace exec "$n2" main -- sha256sum big same | cut -c1-64 | sort -u)" \
        "$(cut -c1-64 <<<"$sum")" "big and same on main as committed"
assert_eq "$(lfs workspace exec "$n2" other -- sha256sum big | cut -c1-64)" "$(cut -c1-64 <<<"$sum")" \
        "big on other as committed"
ok
lfs sandbox close "$N" --force >/dev/null
lfs sandbox close "$n2" --force >/dev/null
finish
