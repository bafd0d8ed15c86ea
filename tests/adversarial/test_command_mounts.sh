#!/usr/bin/env bash
# Attack: a mount made by a command outlives its Sandbox (issue 12, item 3). With
# /dev/fuse 0666 (Debian's default where udev runs) a command ran fuse-overlayfs, which
# mounts through the setuid fusermount3, under its $TMPDIR: `sandbox close --force` said
# "closed", the mount and the Sandbox's directory stayed, and every later create of that
# number failed ("File exists").
# Fixed by: commands run with no_new_privs, so setuid helpers gain nothing and the mount
# is refused; and teardown removes every mount below the Sandbox's directory (here a
# tmpfs that root put in the command's TMPDIR stands for what a privileged helper might
# mount), without following links and without crossing into a mount when it removes
# the directory.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
fuse_mode=$(stat -c %a /dev/fuse)
TEARDOWN_EXTRA="chmod $fuse_mode /dev/fuse"
chmod 666 /dev/fuse
mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# fusermount3 needs a user name for the command identity: this host has none for 501.
SB=$(LAYERFS_COMMAND_UID=65534 LAYERFS_COMMAND_GID=65534 lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
x() { lfs workspace exec "$SB" main "$@"; }
tmp="$LAYERFS_HOME/sandboxes/p-$SB/tmp"
# The setuid helper: with no_new_privs it runs as the command identity and cannot mount.
x -- sh -c 'cd $TMPDIR && mkdir -p l u w m && echo low > l/f &&
        fuse-overlayfs -o lowerdir=l,upperdir=u,workdir=w m' >/dev/null 2>&1 || true
left=$(grep -F "$tmp/m " /proc/mounts || true)
[ -z "$left" ] || fail "a command mounted through setuid fusermount3: $left"
case "$(x -- grep NoNewPrivs /proc/self/status)" in *1) ok ;; *) fail "commands run without no_new_privs" ;; esac
# A mount in the command's TMPDIR that the command did not make: root's, in the
# host's mount namespace. Teardown must detach it, not descend into it.
mkdir -p "$tmp/rootmount"
mount -t tmpfs -o size=1m layerfs-test "$tmp/rootmount"
echo "$WORK" >"$tmp/rootmount/precious"
# Links a command leaves in its TMPDIR to what is not the Sandbox's: teardown removes
# the links, never what they point at.
mkdir -p "$WORK/precious/inner"
echo keep >"$WORK/precious/inner/file"
x -- sh -c 'cd $TMPDIR && ln -s '"$WORK"'/precious to-precious && mkdir -p d && ln -s '"$WORK"'/precious/inner d/inner &&
        ln -s /etc etc'
lfs sandbox close "$SB" --force >/dev/null
assert_no_sandbox_left "close after mounts in TMPDIR"
assert_eq "$(cat "$WORK/precious/inner/file")" keep "what a link in TMPDIR pointed at"
assert_eq "$(lfs sandbox create)" "$SB" "the same number again after the close"
assert_eq "$(lfs workspace mount "$SB" main)" "$LAYERFS_HOME/sandboxes/p-$SB/mnt/main" "the new Sandbox mounts"
lfs sandbox close "$SB" --force >/dev/null

# The same with the daemon killed: reclaim removes the mounts.
SB=$(lfs sandbox create)
tmp="$LAYERFS_HOME/sandboxes/p-$SB/tmp"
mkdir -p "$tmp/a/b"
mount -t tmpfs -o size=1m layerfs-test "$tmp/a"
mkdir -p "$tmp/a/b"
mount -t tmpfs -o size=1m layerfs-test "$tmp/a/b"
kill_daemon "$SB"
out=$(lfs runtime reclaim)
case "$out" in *"reclaimed sandbox $SB of p"*) ok ;; *) fail "reclaim said: $out" ;; esac
assert_no_sandbox_left "reclaim after stacked mounts in TMPDIR"
finish
