#!/usr/bin/env bash
# Idle connections to a Sandbox's control socket (issue 12, item 8). Before: 3,000
# connections that never sent a request made 3,005 threads and 27 GB of address space,
# and each held its thread for as long as the peer kept the socket open.
# Now: the daemon serves at most 128 connections at once. A connection still waiting for
# its request gives its place to a newer one when all are taken (so idle connections
# cannot hold the daemon; at most 16 are leaving at a time), and when every place serves
# a request (a running exec, a follower of events) the one past them is refused with
# Busy, saying why.
# Usage: test_daemon_connections.sh [--big] (the issue's 3,000 idle connections).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
IDLE=400
[ "${1:-}" = --big ] && IDLE=3000
CAP=128
start_sandbox conns
lfs workspace exec "$N" main -- true # an event, so that every follower gets a first line
mkfifo "$WORK/held" "$WORK/release"
# The client is killed, not released: one that has died (the daemon closed under it) never
# opens "release", and a write to it waited for a reader for ever past the test's end.
TEARDOWN_EXTRA='[ -z "${CLIENT:-}" ] || kill "$CLIENT" 2>/dev/null'
# client KIND COUNT: COUNT connections held open until a line comes on "release". idle
# ones send nothing; follow ones ask for sandbox.events --follow and read their first
# line; then one more connection asks for sandbox.ping. Once it has its answer, the
# number held and that answer come as one line on "held": the answer is read when it is
# there. (Written to a file after "held", it was read before the pings were done, under
# load: the idle phase's ok answer, or the file just emptied by open.)
client() {
        python3 - "$LAYERFS_HOME/sandboxes/conns-$N" "$WORK" "$@" <<'PY' &
import json, socket, sys
sandbox, work, kind, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
token = open(sandbox + "/token").read().strip()
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sandbox + "/control.sock")
    return s
def line(s):
    got = b""
    while not got.endswith(b"\n"):
        k = s.recv(1)
        if not k:
            break
        got += k
    return got.decode().strip()
def request(call, **args):
    return (json.dumps(dict(v=1, token=token, call=call, **args)) + "\n").encode()
held = []
for i in range(count):
    s = connect()
    if kind == "follow":
        s.sendall(request("sandbox.events", follow=True))
        first = line(s)
        if '"error"' in first:
            break
    held.append(s)
# Connections of an earlier client may still be waiting to be seen closed: each takes
# one ping's place at most, so ask until the answer is not ok (or for far too long).
for attempt in range(1000):
    extra = connect()
    extra.sendall(request("sandbox.ping"))
    answer = line(extra)
    if kind == "idle" or '"ok"' not in answer:
        break
with open(work + "/held", "w") as f:
    f.write("%d %s\n" % (len(held), answer))
open(work + "/release").read()
PY
        CLIENT=$!
}
# Lets the client go and waits for its end (its pid is not killed again by the teardown).
release_client() {
        echo >"$WORK/release"
        wait "$CLIENT"
        CLIENT=
}
client idle "$IDLE"
read -r held answer <"$WORK/held"
threads=$(daemon_threads)
serving=$(daemon_connection_threads)
echo "$held idle connections open: the daemon has $threads threads, $serving serving connections"
# At most CAP connections served and 16 leaving. (Its other threads, FUSE workers among
# them, come and go with the load: counting all of them failed under a loaded make check.)
[ "$serving" -le $((CAP + 16)) ] || fail "$held idle connections made $serving connection threads ($threads in all)"
[ "$serving" -ge 1 ] || fail "no thread of the daemon is named lfs-connection: the count above cannot fail"
ok
# The daemon still answers: an idle connection gives its place (to the client's ping,
# then to the CLI's call).
case "$answer" in
*'"ok"'*) ok ;;
*) fail "a ping past $IDLE idle connections got: $answer" ;;
esac
assert_eq "$(timeout 120 "$LAYERFS" --json sandbox list_workspaces "$N" | json_get 'len(j)')" 1 \
        "list_workspaces with $IDLE idle connections open"
release_client
# Every place serving a follower: the connection past them is refused, saying why.
client follow "$CAP"
read -r held answer <"$WORK/held"
assert_eq "$held" "$CAP" "followers served"
case "$answer" in
*'"code":"Busy"'*"$CAP"*) ok ;;
*) fail "the connection past $CAP followers got: $answer" ;;
esac
release_client
assert_eq "$(timeout 120 "$LAYERFS" --json sandbox list_workspaces "$N" | json_get 'len(j)')" 1 \
        "list_workspaces once the followers are gone"
finish
