#!/usr/bin/env bash
# FUSE passthrough on our own loop (LAYERFS_FUSE_TRANSPORT=dev): an upper file's reads
# and writes go from the kernel to the file itself, never through the daemon, and what
# the daemon no longer sees (size, times, data written by write() or through a shared
# mapping after the last close) still reaches stat, status and commit.
# LAYERFS_FUSE_PASSTHROUGH=0 turns it off, and the same writes reach the daemon again.
# The loop's READDIRPLUS is checked here too: it answers ls -l's lookups.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=pt LAYERFS_FUSE_TRANSPORT=dev LAYERFS_FUSE_DEBUG=1 LC_ALL=C
[ "$("$LAYERFS" --json runtime status | json_get 'j["kernel"]["kernel:fuse-passthrough"]')" = True ] ||
        skip "the kernel has no FUSE passthrough (CONFIG_FUSE_PASSTHROUGH, Linux 6.9)"
mkdir "$WORK/src"
echo base >"$WORK/src/kept"
lfs project init pt --from "$WORK/src" >/dev/null

# Bad values are refused before anything is made.
LAYERFS_FUSE_PASSTHROUGH=yes expect_error InvalidInput lfs sandbox create

n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
grep -q "mounted main at $ws (FUSE loop: dev, passthrough: on)" <<<"$(lfs sandbox log "$n")" ||
        fail "the mount does not pass through: $(lfs sandbox log "$n" | grep mounted)"
# Which loop and whether it passes through, as list_workspaces and runtime status say.
assert_eq "$(lfs --json sandbox list_workspaces "$n" | json_get '(j[0]["transport"], j[0]["passthrough"])')" \
        "('dev', True)" "list_workspaces --json of a dev mount"
assert_eq "$(lfs --json runtime status | json_get '(j["fuse"]["transport"], j["fuse"]["passthrough"])')" \
        "('dev', True)" "runtime status's FUSE loop"
grep -qx "fuse        dev, passthrough on" <<<"$(lfs runtime status)" || fail "runtime status: $(lfs runtime status | grep fuse)"
assert_eq "$(LAYERFS_FUSE_PASSTHROUGH=0 lfs --json runtime status | json_get 'j["fuse"]["passthrough"]')" False \
        "runtime status with LAYERFS_FUSE_PASSTHROUGH=0"
assert_eq "$(LAYERFS_FUSE_TRANSPORT=libfuse lfs --json runtime status | json_get 'j["fuse"]')" \
        "{'transport': 'libfuse', 'passthrough': False}" "runtime status with libfuse"
# Unset, the default: our own loop over /dev/fuse, with passthrough.
assert_eq "$(env -u LAYERFS_FUSE_TRANSPORT "$LAYERFS" --json runtime status | json_get 'j["fuse"]')" \
        "{'transport': 'dev', 'passthrough': True}" "runtime status with LAYERFS_FUSE_TRANSPORT unset"
n_default=$(env -u LAYERFS_FUSE_TRANSPORT "$LAYERFS" sandbox create)
ws_default=$(lfs workspace mount "$n_default" main)
grep -q "mounted main at $ws_default (FUSE loop: dev, passthrough: on)" <<<"$(lfs sandbox log "$n_default")" ||
        fail "the default loop: $(lfs sandbox log "$n_default" | grep mounted)"
lfs workspace unmount "$n_default" main --discard >/dev/null
lfs sandbox close "$n_default" >/dev/null
# requests OP: how many OP requests the daemon's loop has served so far, in its log and
# the one it rotated out (past 1 MiB: each window counted here logs far less).
requests() {
        local dir
        dir=$(records "SELECT dir FROM sandboxes WHERE number=$n")
        cat "$dir"/daemon.log.1 "$dir"/daemon.log 2>/dev/null | grep -c "fuse: $1 " || true
}

# 4 MiB written and read back: none of it through the daemon.
writes=$(requests WRITE)
reads=$(requests READ)
in_main "$n" dd if=/dev/urandom of=data bs=64K count=64 status=none
in_main "$n" sha256sum data >"$WORK/data.sum"
assert_eq "$(requests WRITE)" "$writes" "WRITE requests for a file written with passthrough"
echo 3 >/proc/sys/vm/drop_caches
in_main "$n" sha256sum data >"$WORK/data.sum2"
assert_eq "$(requests READ)" "$reads" "READ requests for an upper file read with passthrough"
cmp "$WORK/data.sum" "$WORK/data.sum2" || fail "the file read back differs"
assert_eq "$(stat -c %s "$ws/data")" 4194304 "the size the daemon reports"
assert_eq "$(lfs workspace status "$n" main)" "A data" "status after passthrough writes"
ok

# A file's registration with the kernel (BACKING_OPEN) is kept from its first open passed
# through until the kernel forgets the inode: later opens reuse it, a small file's read
# included (it passes through too, no READ), and the kernel's FORGET lets it go.
# settle_forgets: the kernel drops what no one uses and sends FORGET for each; it serves
# queued FORGETs before the next request, so a LOOKUP after them returns once the daemon
# has had them.
settle_forgets() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
        stat "$ws/data" >/dev/null
        lfs workspace status "$n" main >/dev/null
}
# kept: registrations made and not let go, as the daemon's log says.
kept() { echo $(($(requests BACKING_OPEN) - $(requests BACKING_CLOSE))); }
[ "$(requests BACKING_OPEN)" -gt 0 ] || fail "no BACKING_OPEN in the daemon's log"
# Another test's drop_caches (the whole host's) inside a window lets the kernel forget
# the file, and its registration goes with it (a BACKING_CLOSE): the window again, five
# times at most.
for _ in 1 2 3 4 5; do
        opens=$(requests BACKING_OPEN)
        closes=$(requests BACKING_CLOSE)
        for _ in 1 2 3; do in_main "$n" sha256sum data; done >/dev/null
        [ "$(requests BACKING_CLOSE)" != "$closes" ] || break
done
assert_eq "$(requests BACKING_OPEN)" "$opens" "BACKING_OPEN requests for three more opens of a registered file"
in_main "$n" sh -c 'printf small >small'
for _ in 1 2 3 4 5; do
        opens=$(requests BACKING_OPEN)
        closes=$(requests BACKING_CLOSE)
        reads=$(requests READ)
        assert_eq "$(in_main "$n" cat small)" small "a small file written with passthrough"
        assert_eq "$(in_main "$n" cat small)" small "the same small file again"
        [ "$(requests BACKING_CLOSE)" != "$closes" ] || break
done
assert_eq "$(requests BACKING_OPEN)/$(requests READ)" "$opens/$reads" \
        "BACKING_OPEN/READ requests for reads of a small file with its registration kept"
[ "$(kept)" -gt 0 ] || fail "no registration kept after the last close"
settle_forgets
assert_eq "$(kept)" 0 "registrations kept once the kernel forgot every file"
ok
# What is written after a truncate through the Workspace (our ftruncate of the upper
# file, not the kernel's) and after a copy-up is read back, registration kept or new.
in_main "$n" sh -c 'printf 0123456789 >small && cat small >/dev/null'
truncate -s 4 "$ws/small"
in_main "$n" sh -c 'printf abc >>small'
assert_eq "$(in_main "$n" cat small)" 0123abc "a file appended after a truncate by the daemon"
settle_forgets
assert_eq "$(in_main "$n" cat small)" 0123abc "the same once the kernel forgot it"
assert_eq "$(in_main "$n" sh -c 'printf X >>small; cat small; truncate -s 2 small; cat small')" \
        "0123abcX01" "appends and truncates of a file kept registered"
in_main "$n" rm small
ok

# A file of the Store's opened for writing is copied up first, then written directly;
# its later appends still change what status and commit see.
in_main "$n" sh -c 'echo more >>kept'
assert_eq "$(lfs workspace status "$n" main | sort | tr '\n' ' ')" "A data M kept " "status after an append"
lfs workspace commit "$n" main -m one >/dev/null
in_main "$n" sh -c 'echo again >>kept'
assert_eq "$(lfs workspace status "$n" main)" "M kept" "status after an append past a commit"
assert_eq "$(cat "$ws/kept")" "$(printf 'base\nmore\nagain')" "the appended file"
# Through a shared mapping after the last close: same size, other bytes; ctime moved.
in_main "$n" python3 -c '
import mmap, os
fd = os.open("kept", os.O_RDWR)
m = mmap.mmap(fd, 0)
os.close(fd)
m[0:4] = b"BASE"
m.flush()
m.close()
'
assert_eq "$(head -1 "$ws/kept")" BASE "the mapped write"
assert_eq "$(lfs workspace status "$n" main)" "M kept" "status after a write through a mapping"
lfs workspace commit "$n" main -m two >/dev/null
assert_eq "$(lfs workspace status "$n" main)" "" "clean after the commit"
# What was committed is what was written: a new Sandbox reads it from the Store.
n2=$(main_sandbox)
assert_eq "$(in_main "$n2" cat kept)" "$(printf 'BASE\nmore\nagain')" "the committed file"
# An open for writing copies the file up and passes through, and writes nothing: its
# times stay the Store's (the upper file is newer).
stored=$(in_main "$n2" stat -c %Y kept)
in_main "$n2" touch -d '2001-02-03 04:05:06' kept
in_main "$n2" sh -c 'exec 3>>kept'
echo 2 >/proc/sys/vm/drop_caches
assert_eq "$(in_main "$n2" stat -c %Y kept)" "$(date -d '2001-02-03 04:05:06' +%s)" \
        "mtime after an open for writing that wrote nothing"
[ "$stored" != "$(date -d '2001-02-03 04:05:06' +%s)" ] || fail "the Store's mtime is the one set"
assert_eq "$(in_main "$n2" sha256sum data)" "$(cat "$WORK/data.sum")" "the committed 4 MiB"
lfs sandbox close "$n2" >/dev/null
ok

# READDIRPLUS: a listing brings each entry's attributes, so `ls -l` after the kernel
# forgot the names sends no LOOKUP; what it shows is what stat shows one by one.
in_main "$n" sh -c 'mkdir many && cd many && for i in $(seq 1 50); do echo "$i" >"f$i"; done && mkdir sub'
echo 2 >/proc/sys/vm/drop_caches
stat "$ws/many" >/dev/null # its own LOOKUP
lookups=$(requests LOOKUP)
plus=$(requests READDIRPLUS)
listing=$(ls -ln --time-style=+%s "$ws/many")
assert_eq "$(requests LOOKUP)" "$lookups" "LOOKUP requests for ls -l after READDIRPLUS"
[ "$(requests READDIRPLUS)" -gt "$plus" ] || fail "ls -l sent no READDIRPLUS"
echo 2 >/proc/sys/vm/drop_caches
for f in "$ws"/many/*; do stat -c '%A %h %u %g %s %Y %n' "$f"; done >"$WORK/stats"
assert_eq "$(awk 'NR > 1 {print $1, $2, $3, $4, $5, $6, $7}' <<<"$listing")" \
        "$(awk '{n = $7; sub(".*/", "", n); print $1, $2, $3, $4, $5, $6, n}' "$WORK/stats")" \
        "ls -l through READDIRPLUS against stat"
# The lookups it counted are given back (FORGET): the files are still all there after the
# kernel forgot them twice, and removing them leaves a clean Workspace.
echo 2 >/proc/sys/vm/drop_caches
assert_eq "$(in_main "$n" sh -c 'cat many/f* | wc -l')" 50 "the files after the kernel forgot them"
in_main "$n" rm -r many
ok

# Times: a write moves mtime, utimes after it stays.
in_main "$n" touch -d '2001-02-03 04:05:06' data
assert_eq "$(stat -c %Y "$ws/data")" "$(date -d '2001-02-03 04:05:06' +%s)" "utimes after passthrough writes"
in_main "$n" sh -c 'echo x >>data'
[ "$(stat -c %Y "$ws/data")" -gt "$(date -d '2001-02-03 04:05:06' +%s)" ] || fail "an append did not move mtime"
assert_eq "$(stat -c %s "$ws/data")" 4194306 "the size after an append"
ok
lfs sandbox close "$n" --force >/dev/null

# Off: the same writes go through the daemon again.
n=$(LAYERFS_FUSE_PASSTHROUGH=0 lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
grep -q "mounted main at $ws (FUSE loop: dev, passthrough: off)" <<<"$(lfs sandbox log "$n")" ||
        fail "LAYERFS_FUSE_PASSTHROUGH=0 still passes through: $(lfs sandbox log "$n" | grep mounted)"
in_main "$n" dd if=/dev/zero of=data bs=64K count=4 status=none
[ "$(requests WRITE)" -gt 0 ] || fail "no WRITE request with passthrough off"
assert_eq "$(lfs --json sandbox list_workspaces "$n" | json_get '(j[0]["transport"], j[0]["passthrough"])')" \
        "('dev', False)" "list_workspaces --json with passthrough off"
lfs sandbox close "$n" --force >/dev/null
ok
finish
