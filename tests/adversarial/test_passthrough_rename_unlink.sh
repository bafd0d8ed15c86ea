#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): lose or misreport
# data by moving a file under a passed-through writer. A command holds f open for
# writing (passed through), renames it, truncates it through another process, writes on,
# and status and commit must record the renamed file with the bytes written; then it
# unlinks the name while still writing, and the data must go with the name (nothing
# committed under any name) and its upper file be removed once the last open (and the
# mapping, which holds the kernel's own open of the upper file) is gone.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
start_passthrough_sandbox ptmove
upper=$(records "SELECT dir FROM sandboxes WHERE number=$N")/upper/main
uppers() { find "$upper" -type f | wc -l; }
before=$(uppers)
in_ws "
import os, subprocess
fd = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b'a' * 10000)
os.rename('f', 'g')
os.write(fd, b'b' * 100)
subprocess.run(['truncate', '-s', '5000', 'g'], check=True)
os.pwrite(fd, b'tail', 6000)       # a hole from 5000 to 6000
os.close(fd)"
assert_eq "$(lfs workspace status "$N" main)" "A g" "status after rename, truncate and writes while open"
lfs workspace commit "$N" main -m g >/dev/null
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(stat -c %s "$WORK/out/g")" 6004 "size of the committed g"
assert_eq "$(python3 -c "d = open('$WORK/out/g', 'rb').read(); print(d[:5000] == b'a' * 5000, d[5000:6000] == bytes(1000), d[6000:])")" \
        "True True b'tail'" "contents of the committed g"
# Unlinked while open for writing and mapped: the writes go nowhere recorded.
in_ws "
import mmap, os
fd = os.open('g', os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED)
os.unlink('g')
os.write(fd, b'gone' * 1000)
m[0:4] = b'gone'
os.close(fd)
m.close()"
assert_eq "$(lfs workspace status "$N" main)" "D g" "status after unlinking g while open"
# The upper files of unlinked names go once closed and forgotten by the kernel (the
# reaper; a statfs waits for it, as df after rm does).
lfs workspace commit "$N" main -m "no g" >/dev/null
settle_forgets
stat -f "$WS" >/dev/null
[ "$(uppers)" -le "$before" ] || fail "upper files left after the unlinked file was closed: $(uppers), $before before"
ok
finish
