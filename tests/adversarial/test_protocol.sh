#!/usr/bin/env bash
# Malformed input on a Sandbox's control socket (issue 14): truncated frames, huge
# frames, what is not a JSON object, wrong JSON types for the arguments of the calls,
# unknown calls, another protocol version, fds where none are expected, and 200
# connections at once. Every one gets a clear error (the code of SPEC 6, a message naming
# what was wrong) or a closed connection, and after each the daemon is still up and the
# Sandbox usable: an exec in its Workspace answers. The attacks are proto_attack.py's,
# one case per run, each on the daemon's socket with the Sandbox's token.
#
# Before the daemon and the library spoke through proto/ (issue 14, phase 2) these failed:
# the version field ("v" missing, newer, not a number) was not checked, an array for a
# frame was PermissionDenied, of duplicate keys the last "call" won, fds a call does not
# take were closed without a word, arguments of the wrong type were read as absent or
# false and acted on (an unmount without --discard, a close without --force, an exec in
# the Workspace's root), and followers of events that went away kept their places until
# the next event (the Sandbox answered Busy to everything until then).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
HERE=$(cd "$(dirname "$0")" && pwd)
start_sandbox proto
SB="$LAYERFS_HOME/sandboxes/proto-$N"
# A second Workspace for the calls that could change one (an unmount read as not
# --discard), and main dirty, so that a close read as not --force is refused Dirty
# rather than closing the Sandbox under the test.
lfs branch create scratch >/dev/null
lfs workspace mount "$N" scratch >/dev/null
echo dirty >"$WS/dirty"
# Waits (bounded) until at most $1 threads of the daemon serve connections: a
# connection's thread ends on its own once its peer is gone and it notices.
wait_connections_at_most() {
        for _ in $(seq 1200); do
                [ "$(daemon_connection_threads)" -le "$1" ] && return 0
                sleep 0.05
        done
        fail "the daemon still has $(daemon_connection_threads) connection threads, expected at most $1"
}

# The daemon is up, the same process, and runs a command in its Workspace.
still_usable() {
        daemon_gone && fail "the daemon (pid $DPID) is gone after $1"
        local out
        out=$(timeout 120 "$LAYERFS" workspace exec "$N" main -- echo alive) ||
                fail "an exec after $1 failed: $out"
        assert_eq "$out" alive "an exec after $1"
}

# attack CASE [ARG]: one case of proto_attack.py; each of its checks must pass.
attack() {
        echo "== $1"
        python3 "$HERE/proto_attack.py" "$SB" "$@" || fail "case $1: the daemon's answers above marked FAIL"
        ok
        still_usable "$1"
}

attack truncated
attack huge
attack not-json
attack unknown-calls
attack wrong-types scratch
# No fd of those sent where none are taken stays in the daemon.
fds_before=$(daemon_fds)
attack fd-flood 100
fds_after=$(daemon_fds)
echo "daemon fds: $fds_before before 100 pings with 3 fds each, $fds_after after"
[ "$fds_after" -le $((fds_before + 2)) ] || fail "the daemon kept fds: $fds_before -> $fds_after"
ok
# 200 connections following events, then gone: their places come free without an event
# to wake them (no process of the Sandbox starts or ends meanwhile).
serving=$(daemon_connection_threads)
echo "== connections"
python3 "$HERE/proto_attack.py" "$SB" connections || fail "case connections: see FAIL above"
ok
wait_connections_at_most "$serving"
still_usable connections
attack version
attack array-frame
attack duplicate-keys
attack unexpected-fds
attack wrong-types-wired scratch
# The Workspaces are as they were: scratch still mounted, main's change still there.
assert_eq "$(lfs --json sandbox list_workspaces "$N" | json_get 'sorted(w["branch"] for w in j)')" \
        "['main', 'scratch']" "Workspaces after the attacks"
assert_eq "$(cat "$WS/dirty")" dirty "main's uncommitted change"

# A close answered in another protocol version by a daemon that stays: that refusal is
# the answer (Unsupported, naming both versions), not Busy after the 30 s wait for a
# daemon that is closing (before). The daemon is stopped and its socket is answered by a
# stand-in of version 2 meanwhile; then both are put back.
TEARDOWN_EXTRA='kill -CONT "$DPID" 2>/dev/null'
kill -STOP "$DPID"
mv "$SB/control.sock" "$SB/control.sock.real"
python3 - "$SB/control.sock" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
c, _ = s.accept()
c.makefile().readline()
c.sendall(b'{"v":2,"ok":{}}\n')
c.close()
PY
stand_in=$!
for _ in $(seq 200); do [ -S "$SB/control.sock" ] && break; sleep 0.05; done
expect_error Unsupported timeout 120 "$LAYERFS" sandbox close "$N" --force
wait "$stand_in"
rm -f "$SB/control.sock"
mv "$SB/control.sock.real" "$SB/control.sock"
kill -CONT "$DPID"
still_usable other-version-close
finish
