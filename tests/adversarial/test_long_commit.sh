#!/usr/bin/env bash
# Attack (issue 13, item 8): a sparse file of SIZE (`truncate -s 15T big`, ext4's largest;
# `test_long_commit.sh 1T` for a smaller one) in a Workspace, then a commit, which must
# hash all of it: hours (the Store keeps holes, and hashes them as the zeros they read as
# without reading them, so it is CPU, not reads). Before: the commit held the daemon's lock and the Workspace's
# lock all along, so list_workspaces, status, the other Workspace's calls, every file
# operation in the Workspace and `sandbox close --force` waited behind it. Now the data
# is read without either lock, a second Workspace and this one keep working, `unmount
# --discard` and close --force cancel such a commit, in a hole too. The test waits for a
# commit to open its file (inotify on the upper file), then gives each call 60 s, which it
# needs only when blocked.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
SIZE=${1:-15T}
export LAYERFS_PROJECT=long

lfs project init long >/dev/null
lfs branch create other >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
ws2=$(lfs workspace mount "$n" other)
pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
# Before the code of this fix, close --force itself waits for hours: end the daemon first.
TEARDOWN_EXTRA="grep -qa layerfs-daemon /proc/$pid/cmdline 2>/dev/null && kill -9 $pid"
echo other >"$ws2/file"

# commit_reading BRANCH OUT: makes a SIZE sparse file in the Workspace, starts its commit
# in the background (pid in COMMITTER, output in OUT) and returns once the commit has
# opened it (nothing else opens the upper file meanwhile).
commit_reading() {
        local branch=$1 out=$2 ino upper
        lfs workspace exec "$n" "$branch" -- truncate -s "$SIZE" big
        ino=$(stat -c %i "$LAYERFS_HOME/sandboxes/long-$n/mnt/$branch/big")
        upper="$LAYERFS_HOME/sandboxes/long-$n/upper/$branch/$(printf %02x $((ino & 255)))/$ino"
        [ -f "$upper" ] || fail "no upper file at $upper"
        rm -f "$WORK/events"
        mkfifo "$WORK/events"
        python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x20) < 0:  # IN_OPEN
    sys.exit("inotify: " + os.strerror(ctypes.get_errno()))
print("watching", flush=True)
os.read(fd, 4096)
print("opened", flush=True)' "$upper" >"$WORK/events" &
        exec 3<"$WORK/events"
        read -r -t 60 -u 3 line && [ "$line" = watching ] || fail "the inotify watcher did not start"
        "$LAYERFS" workspace commit "$n" "$branch" -m big >"$out" 2>&1 &
        COMMITTER=$!
        read -r -t 120 -u 3 line && [ "$line" = opened ] || fail "the commit of $branch did not open its file"
        exec 3<&-
        ok
}
commit_reading main "$WORK/commit.out"
committer=$COMMITTER

within() {
        local what=$1
        shift
        timeout 60 "$@" || fail "$what did not answer within 60 s while a commit hashed a $SIZE file"
}
within "list_workspaces" "$LAYERFS" --json sandbox list_workspaces "$n" >"$WORK/list"
assert_eq "$(json_get '[(w["branch"], w["dirty"]) for w in j]' <"$WORK/list")" \
        "[('main', True), ('other', True)]" "list_workspaces during the commit"
within "status of the other Workspace" "$LAYERFS" workspace status "$n" other >"$WORK/status2"
assert_eq "$(cat "$WORK/status2")" "A file" "status of the other Workspace"
within "commit of the other Workspace" "$LAYERFS" workspace commit "$n" other -m other >/dev/null
within "status of the Workspace being committed" "$LAYERFS" workspace status "$n" main >"$WORK/status1"
assert_eq "$(cat "$WORK/status1")" "A big" "status during the commit"
within "a file made in the Workspace being committed" "$LAYERFS" workspace exec "$n" main -- sh -c 'echo x >during'
expect_error Busy "$LAYERFS" workspace commit "$n" main -m twice
kill -0 "$committer" 2>/dev/null || fail "the commit ended: $(cat "$WORK/commit.out")"
ok

# unmount --discard drops the other Workspace's changes: its running commit is cancelled.
commit_reading other "$WORK/commit2.out"
within "unmount --discard" "$LAYERFS" workspace unmount "$n" other --discard >/dev/null
wait "$COMMITTER" && fail "the commit of other succeeded after unmount --discard"
grep -q "^NotMounted: .*cancelled" "$WORK/commit2.out" || fail "the cancelled commit said: $(cat "$WORK/commit2.out")"
ok

within "sandbox close --force" "$LAYERFS" sandbox close "$n" --force >/dev/null
wait "$committer" && fail "the commit of a $SIZE file succeeded"
grep -q "^NoSuchSandbox: .*cancelled" "$WORK/commit.out" || fail "the cancelled commit said: $(cat "$WORK/commit.out")"
[ -z "$(ls -A "$LAYERFS_HOME/sandboxes")" ] || fail "sandbox directories left"
grep -q " $LAYERFS_HOME/" /proc/mounts && fail "a mount is left"
assert_eq "$(lfs branch diff main other)" "A file" "main unchanged, other as committed before"
lfs project verify >/dev/null
ok
finish
