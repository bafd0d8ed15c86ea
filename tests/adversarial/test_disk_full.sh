#!/usr/bin/env bash
# A command fills the disk past what its user could (issue 13, item 4). Upper files are
# written by root, so before: `fallocate -n -l 1T` returned ENOSPC but kept every block,
# dd wrote into ext4's root reserve (3.08 GB where uid 501 stops at 2.92 GB), and with
# the disk full `exec` and `sandbox close --force` failed ("cannot use home.db: disk I/O
# error"); df in the Workspace showed the host's filesystem.
# Now: a write, copy-up or fallocate that would take the upper filesystem's available
# blocks (f_bavail) below zero is refused with ENOSPC before it happens, so the root
# reserve stays for the home's records; a failed fallocate keeps nothing; home.db keeps
# its WAL and index files (never deleted, so a full disk cannot stop them being opened);
# df in the Workspace shows what its writer can use.
# The home is on a loop-mounted ext4 of 96 MiB, removed however the test ends.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
use_private_sandboxes
DISK="$WORK/disk"
truncate -s 96M "$WORK/disk.img"
mkfs.ext4 -q -F -b 4096 -m 5 "$WORK/disk.img"
mkdir "$DISK"
mount -o loop "$WORK/disk.img" "$DISK"
chmod 711 "$DISK"
export LAYERFS_HOME="$DISK/home"
start_sandbox disk
reserved=$(tune2fs -l "$WORK/disk.img" | awk -F: '/^Reserved block count/ {print $2 + 0}')
free_blocks() { stat -f -c %f "$DISK"; }
avail_blocks() { stat -f -c %a "$DISK"; }

# fallocate past the disk: refused, and nothing kept.
before=$(free_blocks)
set +e
out=$(lfs workspace exec "$N" main -- sh -c ": >big && exec fallocate -n -l 1T big" 2>&1)
status=$?
set -e
[ "$status" -ne 0 ] || fail "fallocate of 1 TiB on a 96 MiB disk succeeded"
case "$out" in *"No space left"*) ok ;; *) fail "fallocate said: $out" ;; esac
after=$(free_blocks)
echo "fallocate -n -l 1T: $out; free blocks $before -> $after"
[ $((before - after)) -lt 64 ] || fail "a failed fallocate kept $((before - after)) blocks"
ok

# dd until the disk is full for uid 501: the root reserve stays.
lfs workspace exec "$N" main -- dd if=/dev/zero of=fill bs=1M status=none 2>"$WORK/dd.err" &&
        fail "dd filled a 96 MiB disk without an error"
grep -q "No space left" "$WORK/dd.err" || fail "dd said: $(cat "$WORK/dd.err")"
echo "after dd: free $(free_blocks) blocks, available $(avail_blocks), reserved $reserved"
[ "$(free_blocks)" -ge $((reserved * 9 / 10)) ] ||
        fail "dd as the command took the root reserve: $(free_blocks) blocks free of $reserved reserved"
ok
# df in the Workspace: what its writer can still use, no reserve counted as free.
read -r ws_free ws_avail < <(stat -f -c '%f %a' "$WS")
assert_eq "$ws_free" "$ws_avail" "free and available blocks in the Workspace"
[ "$ws_avail" -le $(($(avail_blocks) + 16)) ] || fail "df in the Workspace shows $ws_avail blocks available"
ok

# The disk full for root too: records and teardown need no new space. A second
# Sandbox's daemon dies there, and is reclaimed once no other process has home.db open.
n2=$(lfs sandbox create)
dpid2=$(sqlite3 "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n2")
dd if=/dev/zero of="$DISK/ballast" bs=64K status=none 2>/dev/null || true
echo "ballast: free $(free_blocks) blocks"
assert_eq "$(lfs workspace exec "$N" main -- echo still)" still "exec on a full disk"
lfs workspace status "$N" main >/dev/null
lfs sandbox close "$N" --force >/dev/null
daemon_gone || fail "the daemon is still there after close --force on a full disk"
kill -9 "$dpid2"
wait_exit "$dpid2"
lfs runtime reclaim >/dev/null
assert_eq "$(sqlite3 "$LAYERFS_HOME/home.db" 'SELECT count(*) FROM sandboxes')" 0 "records left"
rm -f "$DISK/ballast"
finish
