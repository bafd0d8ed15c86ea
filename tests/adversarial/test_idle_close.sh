#!/usr/bin/env bash
# The idle close counts from the last request that passed its checks, not from the last
# connection. Before: the accept loop restarted the idle time at every connection, and
# again as each ended, token or not, so a peer that connected now and then with no
# request, or a wrong token, kept an idle Sandbox (its daemon, cgroup and records) open
# for as long as it went on. Now such connections are refused as before and the Sandbox
# closes when its idle time is up; a request with the token still keeps it open.
source "$(dirname "$0")/../e2e/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
use_private_sandboxes
lfs project init idle >/dev/null
export LAYERFS_PROJECT=idle

# knock SANDBOX MODE SECONDS: connects every 0.2 s for SECONDS, each time sending MODE's
# request (none: nothing; bad: a ping with a wrong token; good: a ping with the token;
# flood: nothing, without a pause), until the socket is gone; prints "gone" or "open".
knock() {
        python3 - "$LAYERFS_HOME/sandboxes/idle-$1" "$2" "$3" <<'PY'
import json, socket, sys, time
sandbox, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
try:
    token = open(sandbox + "/token").read().strip()
except FileNotFoundError:  # closed before this started (a loaded machine: 1 s is short)
    print("gone")
    sys.exit(0)
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sandbox + "/control.sock")
    except OSError:
        print("gone")
        sys.exit(0)
    if mode in ("bad", "good"):
        t = token if mode == "good" else "0" * len(token)
        s.sendall((json.dumps(dict(v=1, token=t, call="sandbox.ping")) + "\n").encode())
        s.settimeout(10)
        try:
            s.recv(4096)
        except OSError:
            pass
    s.close()
    if mode != "flood":
        time.sleep(0.2)
print("open")
PY
}

for mode in none bad; do
        N=$(LAYERFS_IDLE_SECONDS=2 lfs sandbox create)
        DAEMON=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$N")
        # Thirty times the idle time: the close is due long before.
        assert_eq "$(knock "$N" "$mode" 60)" gone "connections with $mode request do not keep an idle Sandbox open"
        wait_exit "$DAEMON" 30 || fail "the daemon $DAEMON did not exit after its idle close"
        assert_eq "$(records)" 0 "the idle close removed the record ($mode)"
done

# A request with the token is activity: over three idle times of pings the Sandbox stays.
N=$(LAYERFS_IDLE_SECONDS=2 lfs sandbox create)
assert_eq "$(knock "$N" good 6)" open "pings with the token keep the Sandbox open"
lfs sandbox close "$N" --force >/dev/null

# A request that came while the idle close's gc ran, still waiting to be accepted (the
# daemon held after its gc, at idle-gc-done; the ping connects, then lets it go on): it
# is answered, and the idle time starts again. Before, the daemon closed under it; a
# first fix of that went round its loop without accepting it, at 100% CPU, for ever.
fault_fifo "$WORK/gc-done"
N=$(LAYERFS_IDLE_SECONDS=1 LAYERFS_FAULT="idle-gc-done#1@$WORK/gc-done" lfs sandbox create)
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
fault_reached "$DAEMON" "$WORK/gc-done" 60 >/dev/null || fail "the daemon $DAEMON closed without reaching idle-gc-done"
answer=$(python3 - "$LAYERFS_HOME/sandboxes/idle-$N" "$WORK/gc-done" <<'PY'
import json, socket, sys
sandbox, fifo = sys.argv[1], sys.argv[2]
token = open(sandbox + "/token").read().strip()
s = socket.socket(socket.AF_UNIX)
s.connect(sandbox + "/control.sock")  # queued: the daemon is held
with open(fifo, "w") as f:
    f.write("go\n")
s.sendall((json.dumps(dict(v=1, token=token, call="sandbox.ping")) + "\n").encode())
s.settimeout(20)
try:
    print("answered" if b'"ok"' in s.recv(4096) else "refused")
except OSError as e:
    print("no answer: %s" % e)
PY
)
assert_eq "$answer" answered "a ping that waited while the idle close's gc ran"
wait_exit "$DAEMON" 30 || fail "the daemon $DAEMON did not idle-close after the ping it answered"

# Connections that wait to be accepted give the idle time once more, not again and again:
# three floods of connections with no request keep no idle Sandbox open.
N=$(LAYERFS_IDLE_SECONDS=1 lfs sandbox create)
DAEMON=$(records "SELECT pid FROM sandboxes WHERE number=$N")
floods=()
for i in 1 2 3; do
        knock "$N" flood 60 >"$WORK/flood-$i" &
        floods+=($!)
done
wait_exit "$DAEMON" 30 || fail "three floods of connections with no request kept the idle Sandbox $N open for 30 s"
for i in 1 2 3; do
        wait "${floods[i - 1]}"
        assert_eq "$(cat "$WORK/flood-$i")" gone "flood $i, once the Sandbox closed"
done
assert_nothing_left "idle close"
finish
