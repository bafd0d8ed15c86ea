#!/usr/bin/env bash
# Attack: a command of a namespaces Sandbox with --network host connects to abstract unix
# sockets it was not given. Abstract sockets belong to a net namespace, not to a file that
# permissions guard: with the host's net namespace, the host's (X11's, containerd's shims'
# (CVE-2020-15257), D-Bus's, systemd's) and those of every other host-network Sandbox's
# commands were connectable, whatever the command's ids. A command of a none Sandbox
# (its own net namespace) reaches neither; one of the same Sandbox reaches its own.
# Fails until the command is put in a Landlock domain scoped for abstract sockets
# (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, Linux 6.12) as it is spawned, after it joined
# the Sandbox's namespaces.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
TEARDOWN_EXTRA='kill ${HOST_SERVER:-} 2>/dev/null'

mkdir -p "$WORK/src"
echo "source" >"$WORK/src/file.txt"
lfs project init p --from "$WORK/src" >/dev/null

# SERVE NAME [N]: listens on the abstract socket NAME, answers every connection (the first
# N) with NAME and says "listening" once it does. PROBE NAME: connects, prints the answer.
SERVE='
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(b"\0" + sys.argv[1].encode())
s.listen(8)
print("listening", flush=True)
for _ in iter(int, 1) if len(sys.argv) < 3 else range(int(sys.argv[2])):
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode())
    c.close()'
PROBE='
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(b"\0" + sys.argv[1].encode())
    print(s.recv(100).decode())
except OSError as e:
    print("refused:", e)'
exec {host_fd}< <(exec python3 -c "$SERVE" "layerfs-attack-host-$$")
HOST_SERVER=$!
read -r -t 60 -u "$host_fd" _ || fail "the host's abstract listener did not start"
H1=$(main_sandbox --network host)
H2=$(main_sandbox --network host)
NONE=$(main_sandbox)
exec {h1_fd}< <(in_main "$H1" python3 -c "$SERVE" "layerfs-attack-h1-$$" || true)
read -r -t 60 -u "$h1_fd" _ || fail "sandbox $H1's abstract listener did not start"
probe() { in_main "$1" python3 -c "$PROBE" "$2" 2>&1; }
# A command's processes reach each other's: a command keeps its own abstract sockets.
assert_eq "$(in_main "$H1" sh -c 'python3 -c "$1" "$3" 1 | { read -r _; python3 -c "$2" "$3"; }' \
        sh "$SERVE" "$PROBE" "layerfs-own-$$")" "layerfs-own-$$" "a command reaches its own abstract socket"
for n in "$H2" "$NONE"; do
        out=$(probe "$n" "layerfs-attack-host-$$")
        [ "$out" != "layerfs-attack-host-$$" ] || succeeded "connect to the host's abstract socket (sandbox $n)"
        out=$(probe "$n" "layerfs-attack-h1-$$")
        [ "$out" != "layerfs-attack-h1-$$" ] || succeeded "connect to sandbox $H1's abstract socket (sandbox $n)"
done
ok
kill "$HOST_SERVER"
for n in "$H1" "$H2" "$NONE"; do lfs sandbox close "$n" --force >/dev/null; done
no_attack_succeeded
assert_nothing_left "after the attacks"
finish
