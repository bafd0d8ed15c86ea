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
# request (none: nothing; bad: a ping with a wrong token; good: a ping with the token),
# until the socket is gone; prints "gone" or "open".
knock() {
        python3 - "$LAYERFS_HOME/sandboxes/idle-$1" "$2" "$3" <<'PY'
import json, socket, sys, time
sandbox, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
token = open(sandbox + "/token").read().strip()
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sandbox + "/control.sock")
    except OSError:
        print("gone")
        sys.exit(0)
    if mode != "none":
        t = token if mode == "good" else "0" * len(token)
        s.sendall((json.dumps(dict(v=1, token=t, call="sandbox.ping")) + "\n").encode())
        s.settimeout(10)
        try:
            s.recv(4096)
        except OSError:
            pass
    s.close()
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
assert_nothing_left "idle close"
finish
