#!/usr/bin/env bash
# Attack: a cgroup root's directory is readable by every local user (0755), and the daemons
# of that root take its flock to load or join the BPF watcher. A user who holds that flock
# (flock(1) on the directory) made every command of a new Sandbox of the root wait for
# ever (the default watcher loads after the create has answered, and a command waits for
# it). Now a command waits at most LAYERFS_WATCHER_LOAD_WAIT_MS from the daemon's start,
# then runs without BPF (the daemon reports what it started), as the log says.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
unset LAYERFS_WATCHER
lfs project init p >/dev/null
mkdir -p "$CGR"
chmod 755 "$CGR"
# The holder: an unprivileged user's flock of the root's directory, for longer than the test.
setpriv --reuid=65534 --regid=65534 --clear-groups flock "$CGR" sleep 120 &
holder=$!
TEARDOWN_EXTRA="kill $holder 2>/dev/null"
for _ in $(seq 50); do
        grep -q "$(stat -c %i "$CGR")" /proc/locks && break
        sleep 0.1
done
grep -q ":$(stat -c %i "$CGR") " /proc/locks || fail "the holder did not take the root's flock"
sb=$(LAYERFS_WATCHER_LOAD_WAIT_MS=1000 lfs sandbox create)
lfs workspace mount "$sb" main >/dev/null
status=0
timeout 60 "$LAYERFS" workspace exec "$sb" main -- sh -c 'exit 4' || status=$?
assert_eq "$status" 4 "a command while another user holds the root's flock"
grep -q "the BPF watcher has not loaded in 1000 ms" "$LAYERFS_HOME/sandboxes/p-$sb/daemon.log" ||
        fail "the daemon's log does not say why it watches without BPF"
timeout 60 "$LAYERFS" sandbox close "$sb" --force >/dev/null || fail "the close waited for the held lock"
kill "$holder"
wait "$holder" 2>/dev/null || true
ok
echo "ok: $(basename "$0") ($CHECKS checks)"
