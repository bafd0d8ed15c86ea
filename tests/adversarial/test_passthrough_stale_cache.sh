#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): make a reader see
# data that is no longer the file's. Opens served by the daemon keep the kernel's page
# cache across opens (FOPEN_KEEP_CACHE: nobody else changes the data); a passed-through
# write goes to the upper file and not through that cache. A small file (under 64 KiB)
# opened read-only is served by the daemon, so: read it (cached), rewrite it in place
# with the same size through a passed-through write-open, read it again. The kernel drops
# a file's cached pages when its size changes, not when only its data does. What a
# reader, status and commit see must be the bytes written, as on a disk.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
start_passthrough_sandbox ptcache

# An upper file (written here) and a Store file (committed, then copied up by the write).
in_main "$N" sh -c 'printf AAAAAAAA >upper && printf CCCCCCCC >stored'
lfs workspace commit "$N" main -m base >/dev/null
in_main "$N" sh -c 'printf aaaaaaaa >upper'
for f in upper stored; do
        before=$(in_main "$N" cat "$f") # served by the daemon, now in the page cache
        # Same size, other bytes, through a write-open (no O_TRUNC: the size never moves).
        in_main "$N" python3 -c "
import os
fd = os.open('$f', os.O_WRONLY)
os.pwrite(fd, b'BBBBBBBB', 0)
os.close(fd)"
        assert_eq "$(in_main "$N" cat "$f")" BBBBBBBB "$f read by a command after a same-size rewrite (was $before)"
        assert_eq "$(cat "$WS/$f")" BBBBBBBB "$f read through the mount after a same-size rewrite"
        # Through a mapping (the page cache again).
        assert_eq "$(in_main "$N" python3 -c "
import mmap
with open('$f', 'rb') as fh:
    print(mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)[:].decode())")" BBBBBBBB "$f mapped after a same-size rewrite"
done
assert_eq "$(lfs workspace status "$N" main | sort | tr '\n' ' ')" "M stored M upper " "status after the rewrites"
lfs workspace commit "$N" main -m rewritten >/dev/null
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(cat "$WORK/out/upper" "$WORK/out/stored")" BBBBBBBBBBBBBBBB "the committed files"
ok
lfs sandbox close "$N" --force >/dev/null
finish
