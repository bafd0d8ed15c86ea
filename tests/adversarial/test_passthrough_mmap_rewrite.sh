#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): get a write through
# a live shared mapping left out of status and commit. With passthrough the mapping is
# the upper file's own (the kernel maps the backing file), so its pages never reach the
# daemon; the daemon sees such writes only as a move of the upper file's ctime, which the
# kernel makes on a page's first write fault after it was clean. A page written again
# while still dirty faults no more (and nothing cleans the upper file's pages between:
# the status before a commit syncs the FUSE mount, not the upper filesystem). Here a
# running process writes 1s over its mapped file, status hashes it (a content the Store
# has, as file ones), the process writes 2s over the same pages, and a commit must record
# the 2s, as test_shared_mmap.sh asks of the daemon's own loop. The daemon took the file
# as unchanged since its hash, recorded the 1s, and status then said clean.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
start_passthrough_sandbox ptmmap
kill_commands_at_teardown
# mapped: 64 KiB of zeros; ones: 64 KiB of byte 1, so that the Store has that content.
in_ws "open('mapped', 'wb').write(bytes(64 << 10)); open('ones', 'wb').write(b'\x01' * (64 << 10))
open('unmapped', 'wb').write(bytes(64 << 10)); open('threes', 'wb').write(b'\x03' * (64 << 10))"
lfs workspace commit "$N" main -m base >/dev/null
mkfifo -m 666 "$WS/ready" "$WS/next"
# Round r writes byte r over the whole mapping, says so and waits, the mapping live.
lfs process start "$N" main -- python3 -c "
import mmap
f = open('mapped', 'r+b')
m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED)
for r in (1, 2):
    m[:] = bytes([r]) * len(m)
    with open('ready', 'w') as w:
        w.write('%d\n' % r)
    open('next').read()
" >/dev/null
read -r -t 60 said <"$WS/ready" || fail "the process did not say it wrote round 1"
# The daemon hashes mapped now (the bytes of ones: a content the Store has).
assert_eq "$(lfs workspace status "$N" main)" "M mapped" "status after round 1's write through the mapping"
echo >"$WS/next"
read -r -t 60 said <"$WS/ready" || fail "the process did not say it wrote round 2"
assert_eq "$said" 2 "round"
lfs workspace commit "$N" main -m "round 2" >/dev/null
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(od -An -v -tu1 "$WORK/out/mapped" | tr -s ' \n' '\n' | sort -u | tr -d '\n')" 2 \
        "the bytes the commit recorded for mapped (the process wrote 2s over its 1s)"
assert_eq "$(lfs workspace exec "$N" main -- od -An -tu1 -N1 mapped | tr -d ' ')" 2 "the first byte of mapped as read now"
echo >"$WS/next"
ok

# The same with the file closed once mapped (its last RELEASE comes while the mapping
# lives, the kernel mapping the upper file itself): writes 3s, then 4s over them.
lfs process start "$N" main -- python3 -c "
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open('unmapped', os.O_RDWR)
p = libc.mmap(None, 64 << 10, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
os.close(fd)
for r in (3, 4):
    ctypes.memset(p, r, 64 << 10)
    with open('ready', 'w') as w:
        w.write('%d\\n' % r)
    open('next').read()
" >/dev/null
read -r -t 60 said <"$WS/ready" || fail "the process did not say it wrote round 3"
assert_eq "$(lfs workspace status "$N" main)" "M unmapped" "status after round 3's write through a mapping of a closed file"
echo >"$WS/next"
read -r -t 60 said <"$WS/ready" || fail "the process did not say it wrote round 4"
assert_eq "$said" 4 "round"
lfs workspace commit "$N" main -m "round 4" >/dev/null
rm -rf "$WORK/out"
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(od -An -v -tu1 "$WORK/out/unmapped" | tr -s ' \n' '\n' | sort -u | tr -d '\n')" 4 \
        "the bytes the commit recorded for unmapped (written 4s over its 3s after its close)"
echo >"$WS/next"
ok
finish
