#!/usr/bin/env bash
# Attack: a command of a namespaces Sandbox connects to a unix socket of the host's, by its
# path. The view holds the host's root read-only, but connect() writes nothing: the
# read-only mount does not stop it, only the socket file's mode does, and the host's
# services put many sockets that anyone may connect to under /run (the journal's, D-Bus's,
# a database's in /run/postgresql). Here the host's socket is /run/layerfs-attack-PID.sock,
# mode 0666: before the fix, a command of every kind of Sandbox got its answer. The fix:
# the view's /run is a tmpfs of the Sandbox's own (with /run/lock and /run/shm, and with
# --network host only, the host's resolver's /run/systemd/resolve read-only). Sockets the
# host keeps elsewhere in its tree stay reachable (docs/security.md says so).
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
SOCK=/run/layerfs-attack-$$.sock
# The resolver's directory, which only --network host gets: a host without systemd-resolved
# has none, and the test makes one (and removes it) so that its bind is checked here too.
RESOLVE=/run/systemd/resolve
MADE_RESOLVE=
if [ ! -e "$RESOLVE" ]; then
        mkdir -p "$RESOLVE"
        MADE_RESOLVE=1
fi
TEARDOWN_EXTRA='kill ${HOST_SERVER:-} 2>/dev/null; rm -f '"$SOCK"'; [ -z "$MADE_RESOLVE" ] || rm -rf "$RESOLVE"'

mkdir -p "$WORK/src"
echo "source" >"$WORK/src/file.txt"
lfs project init p --from "$WORK/src" >/dev/null

# The host's server: listens on SOCK (0666), answers every connection with "host".
exec {host_fd}< <(exec python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"host")
    c.close()' "$SOCK")
HOST_SERVER=$!
read -r -t 60 -u "$host_fd" _ || fail "the host's listener did not start"
PROBE='
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print(s.recv(100).decode())
except OSError as e:
    print("refused:", e)'
# The probe works: the host itself, as the command identity's host ids would, is answered.
assert_eq "$(setpriv --reuid=12345 --regid=12345 --clear-groups /usr/bin/python3 -c "$PROBE" "$SOCK")" host \
        "the host's socket answers anyone on the host"
for net in none private host; do
        sb=$(main_sandbox --network $net)
        out=$(in_main "$sb" python3 -c "$PROBE" "$SOCK" 2>&1)
        [ "$out" != host ] || succeeded "connect to the host's socket $SOCK (--network $net)"
        # What commands keep of /run: a writable /run/lock, /run/shm to /dev/shm.
        assert_eq "$(in_main "$sb" sh -c 'touch /run/lock/mine && readlink /run/shm')" /dev/shm \
                "/run/lock and /run/shm (--network $net)"
        want=absent
        [ $net = host ] && want="present read-only"
        got=$(in_main "$sb" sh -c '[ -d /run/systemd/resolve ] || { echo absent; exit; }
                touch /run/systemd/resolve/x 2>/dev/null && echo present writable || echo present read-only')
        assert_eq "$got" "$want" "the host's resolver directory (--network $net)"
        lfs sandbox close "$sb" >/dev/null
done
no_attack_succeeded
kill "$HOST_SERVER"
rm -f "$SOCK"
[ -z "$MADE_RESOLVE" ] || rm -rf "$RESOLVE"
assert_nothing_left "after the attacks"
finish
