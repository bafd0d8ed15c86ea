#!/usr/bin/env bash
# The attack: a program linked with liblayerfs, run by root from a directory another
# user can write (here: a copy of the CLI with no layerfs-daemon beside it, as any C
# program using the installed library is), creates a Sandbox. Before the fix the library
# looked for the daemon in LAYERFS_DAEMON, then beside /proc/self/exe, and else called
# execl("layerfs-daemon"), which execve resolves against the current directory: the
# attacker's ./layerfs-daemon ran as root, inside the Sandbox's cgroup. (An installed
# CLI or C program could not create a Sandbox at all for the same reason.)
# The fix: the build records where `make install` puts the daemon (LAYERFS_LIBEXECDIR);
# the library tries LAYERFS_DAEMON (which must be absolute), beside the program (the
# build tree), then that path, and refuses with Failed naming them when none exists,
# before anything is made.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
unset LAYERFS_DAEMON
mkdir -p "$WORK/bin" "$WORK/attacker"
cp "$LAYERFS" "$WORK/bin/layerfs"
chmod 1777 "$WORK/attacker"
cat >"$WORK/attacker/layerfs-daemon" <<EOF
#!/bin/sh
id -u >"$WORK/planted-ran"
EOF
chmod 755 "$WORK/attacker/layerfs-daemon"
lfs project init p >/dev/null

set +e
out=$(cd "$WORK/attacker" && "$WORK/bin/layerfs" sandbox create 2>&1)
status=$?
set -e
[ ! -e "$WORK/planted-ran" ] || fail "the layerfs-daemon planted in the current directory ran as uid $(cat "$WORK/planted-ran")"
ok
installed=$(strings "$WORK/bin/layerfs" | grep -m1 '/layerfs-daemon$' || true)
if [ -n "$installed" ] && [ -x "$installed" ]; then
        # An installed daemon is there: the copy uses it, never the planted one.
        [ "$status" = 0 ] || fail "with $installed installed, create exited $status: $out"
        lfs sandbox close "$out" >/dev/null
        ok
else
        [ "$status" = 125 ] || fail "create exited $status, expected a refusal (125): $out"
        case "$out" in
        "Failed: "*"layerfs-daemon"*LAYERFS_DAEMON*) ok ;;
        *) fail "create said '$out', expected Failed naming where it looked and LAYERFS_DAEMON" ;;
        esac
        # A refused create leaves nothing (SPEC 4).
        # (The refusal comes before the records' table is even made.)
        assert_eq "$(sqlite3 "$LAYERFS_HOME/home.db" 'SELECT count(*) FROM sandboxes' 2>/dev/null || echo 0)" 0 "records left"
        [ -z "$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null)" ] || fail "a sandbox directory was left"
        [ -z "$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d 2>/dev/null)" ] || fail "a cgroup was left"
        ok
fi

# A relative LAYERFS_DAEMON would be looked up the same way: refused before anything is made.
set +e
out=$(cd "$WORK/attacker" && LAYERFS_DAEMON=layerfs-daemon "$WORK/bin/layerfs" sandbox create 2>&1)
status=$?
set -e
[ ! -e "$WORK/planted-ran" ] || fail "LAYERFS_DAEMON=layerfs-daemon ran the planted daemon"
case "$status $out" in "125 InvalidInput: LAYERFS_DAEMON='layerfs-daemon' is not an absolute path"*) ok ;;
*) fail "LAYERFS_DAEMON=layerfs-daemon: exited $status: $out" ;; esac

# The daemon beside the program (the build tree, the tests) and LAYERFS_DAEMON still work.
n=$(cd "$WORK/attacker" && lfs sandbox create)
lfs sandbox close "$n" >/dev/null
n=$(cd "$WORK/attacker" && LAYERFS_DAEMON="$BUILD/layerfs-daemon" "$WORK/bin/layerfs" sandbox create)
lfs sandbox close "$n" >/dev/null
[ ! -e "$WORK/planted-ran" ] || fail "the planted layerfs-daemon ran"
ok
finish
