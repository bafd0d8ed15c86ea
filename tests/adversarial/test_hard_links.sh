#!/usr/bin/env bash
# Attack (issue 13, item 6): one file of MIB MiB with LINKS more names (default 16 MiB and
# 200 links; `test_hard_links.sh 64 200` for the issue's size), then a commit. Before:
# the commit read the file once per name (64 MiB with 201 names: 18.4 s against 0.55 s
# with one). Now the Workspace stores each inode's contents once, whatever its number of
# names. Counted in bytes the daemon reads (rchar of /proc/PID/io), not timed.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
# HARD_LINKS_MIB for make sanitize (4: read 201 times or once is still told apart).
MIB=${1:-${HARD_LINKS_MIB:-16}}
LINKS=${2:-200}
export LAYERFS_PROJECT=links

lfs project init links >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
lfs workspace exec "$n" main -- sh -c 'head -c $(($1 << 20)) /dev/urandom >f && i=0 &&
        while [ $i -lt "$2" ]; do i=$((i + 1)); ln f "l$i"; done' sh "$MIB" "$LINKS"
read_bytes() { awk '/^rchar/ {print $2}' "/proc/$pid/io"; }
before=$(read_bytes)
lfs workspace commit "$n" main -m links >/dev/null
read=$(($(read_bytes) - before))
echo "commit of a $MIB MiB file with $((LINKS + 1)) names: the daemon read $((read >> 20)) MiB"
# Hashing it and copying it into the Store is two reads; one per name is LINKS + 1.
[ "$read" -lt $((3 * MIB << 20)) ] || fail "the commit read $read bytes for one $MIB MiB file with $((LINKS + 1)) names"
ok
lfs branch export main "$WORK/out" >/dev/null
assert_eq "$(find "$WORK/out" -type f | wc -l)" "$((LINKS + 1))" "every name committed"
assert_eq "$(sha256sum <"$WORK/out/l$LINKS")" "$(sha256sum <"$ws/f")" "the contents under the last name"
assert_eq "$(lfs workspace status "$n" main)" "" "clean after the commit"
# Committing again reads nothing: the hash is kept until the file changes.
before=$(read_bytes)
lfs workspace commit "$n" main -m again >/dev/null
read=$(($(read_bytes) - before))
[ "$read" -lt $((1 << 20)) ] || fail "a commit with nothing changed read $read bytes"
ok
lfs project verify >/dev/null
finish
