#!/usr/bin/env bash
# Attack: a local user who is not root drives a Sandbox's daemon, which runs as root and
# starts commands (issue 17). docs/protocol.md: the control socket is root's (0600, in a
# 0711 directory of root's) and every request carries the token (0600, root's).
#  1. As nobody and as the command identity (501): the socket cannot be connected to, the
#     token cannot be read, and the CLI pointed at the home does nothing but refuse
#     PermissionDenied (it said NoSuchProject, "home H has no project 'p'", and Failed for
#     project list: the projects are the owner's alone, which is not their absence).
#  2. The socket made reachable (a loosened mode, as a careless root or a passed fd
#     would): a request without the token, with a wrong one, and with the right one is
#     refused PermissionDenied, and nothing runs. Before the fix, the right token was
#     enough: the daemon checked no peer, and a non-root process with the token and a
#     way to the socket started commands as the Sandbox's (ping answered its pid,
#     process.start ran). Fixed by: the daemon refuses every peer whose uid
#     (SO_PEERCRED) is not 0, before reading the token.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_PROJECT=p
mkdir -p "$WORK/src"
echo seed >"$WORK/src/seed"
lfs project init p --from "$WORK/src" >/dev/null
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
dir=$LAYERFS_HOME/sandboxes/p-$SB
token=$(cat "$dir/token")
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as501() { setpriv --reuid=501 --regid=20 --clear-groups "$@"; }

# request [WHO] TOKEN CALL ARGS_JSON: WHO (a function above; root if none) sends one
# request to the socket; prints the answer's error code, "ok", or "connect: <errno name>"
# when the connection itself failed. TOKEN "-": none.
cat >"$WORK/request.py" <<'EOF_PY'
import errno, json, socket, sys
sock, token, call, args = sys.argv[1:5]
req = {"v": 1, "call": call, **json.loads(args)}
if token != "-":
    req["token"] = token
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
except OSError as e:
    print("connect: " + errno.errorcode[e.errno])
    sys.exit(0)
s.settimeout(120)
s.sendall((json.dumps(req) + "\n").encode())
answer = b""
while not answer.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
a = json.loads(answer) if answer else {}
print(a["error"]["code"] if "error" in a else "ok" if "ok" in a else "closed")
EOF_PY
chmod 644 "$WORK/request.py"
request() {
        local who=()
        case "$1" in nobody | as501) who=("$1") && shift ;; esac
        "${who[@]}" /usr/bin/python3 "$WORK/request.py" "$dir/control.sock" "$@"
}
start_args='{"branch": "main", "command": ["sh", "-c", "echo ran > ran"]}'

# ---- 1. the socket and token as they are ----------------------------------------------
for who in nobody as501; do
        assert_eq "$(request $who "$token" sandbox.ping '{}')" "connect: EACCES" \
                "$who connects to the control socket"
        if $who cat "$dir/token" >/dev/null 2>&1; then fail "$who read the token"; fi
        ok
        # The CLI, pointed at the home, refuses PermissionDenied and does nothing.
        for call in "project list" "project list_sandboxes" "sandbox list_workspaces $SB" \
                "workspace exec $SB main -- sh -c 'echo ran > ran'" "sandbox close $SB --force"; do
                eval "expect_error PermissionDenied $who env LAYERFS_HOME=$LAYERFS_HOME LAYERFS_PROJECT=p $LAYERFS $call"
        done
done
[ -e "$WS/ran" ] && fail "a non-root user ran a command in the Sandbox"
assert_eq "$(lfs --json sandbox list | json_get 'len(j)')" 1 "the Sandbox is still open"

# ---- 2. the socket made reachable -----------------------------------------------------
chmod 666 "$dir/control.sock"
for who in nobody as501; do
        assert_eq "$(request $who - sandbox.ping '{}')" PermissionDenied \
                "$who's request without the token"
        assert_eq "$(request $who 0123456789abcdef0123456789abcdef sandbox.ping '{}')" \
                PermissionDenied "$who's request with a wrong token"
        assert_eq "$(request $who "$token" sandbox.ping '{}')" PermissionDenied \
                "$who's request with the Sandbox's token"
        assert_eq "$(request $who "$token" process.start "$start_args")" \
                PermissionDenied "$who's process.start with the Sandbox's token"
done
[ -e "$WS/ran" ] && fail "a non-root user with the token ran a command in the Sandbox"
ok
# Root, with the token, is served as before.
assert_eq "$(request "$token" sandbox.ping '{}')" ok "root's request with the token"
chmod 600 "$dir/control.sock"

lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null
assert_nothing_left "the non-root attacks"
finish
