#!/usr/bin/env bash
# The attack (issue 12, item 8, but the connection cap): numbers were parsed loosely.
# LAYERFS_IDLE_SECONDS=inf|nan|1e30 made the daemon close at once (create failed "No such
# process"); a pid of 4294967297 in a process.kill call was cut to 1, so that pid + 2^32
# killed a process of the Sandbox the call did not name; LAYERFS_COMMAND_UID=4294967296
# (or -1) was cut to 0 and ran every command as root; '--limit " -5"' was taken as
# 18446744073709551611, '--timeout inf' dropped the timeout, '501x' became 501.
# Now every LAYERFS_* number and every numeric call argument is parsed strictly (decimal
# digits, finite, in range, whole where whole) by one parser, in the CLI, the library and
# the daemon; a refusal is InvalidInput naming the value and the accepted range, before
# anything is made.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes


# refused WHAT TEXT command...: InvalidInput (exit 125) whose message holds TEXT.
refused() {
        shift
        expect_refusal InvalidInput "$@"
}

mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# ---- 1. LAYERFS_IDLE_SECONDS: refused at create, before anything is made ----------------
for v in inf -inf nan 1e30 0 -1 abc '' ' 5' 0x10 5s 121; do
        [ -z "$v" ] && continue # unset and empty mean the default
        refused "LAYERFS_IDLE_SECONDS=$v" "LAYERFS_IDLE_SECONDS '$v'" env LAYERFS_IDLE_SECONDS="$v" "$LAYERFS" sandbox create
        assert_eq "$(records)" 0 "LAYERFS_IDLE_SECONDS=$v: no record"
done
[ -z "$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null)" ] || fail "a refused create left a directory"
[ -z "$(find "$CGR" -mindepth 1 -type d 2>/dev/null)" ] || fail "a refused create left a cgroup"
refused "the range is named" "from 0.001 to 120" env LAYERFS_IDLE_SECONDS=inf "$LAYERFS" sandbox create
# A daemon started by hand parses it the same way: it refuses to start.
mkdir -p "$WORK/hand"
set +e
LAYERFS_IDLE_SECONDS=1e30 "$BUILD/layerfs-daemon" --home "$LAYERFS_HOME" --project p --sandbox 5 \
        --dir "$WORK/hand" --cgroup "$CGR/none" --instance 0123456789abcdef0123456789abcdef 2>"$WORK/hand.err"
code=$?
set -e
[ "$code" -ne 0 ] && grep -q "LAYERFS_IDLE_SECONDS '1e30'" "$WORK/hand.err" ||
        fail "the daemon took LAYERFS_IDLE_SECONDS=1e30 (exit $code): $(cat "$WORK/hand.err")"
ok
# Good values still work: a fraction of a second closes an idle Sandbox by itself.
SB=$(LAYERFS_IDLE_SECONDS=0.5 lfs sandbox create)
pid=$(sqlite3 "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$SB")
PYTHONPATH="$(dirname "$0")" python3 -c 'import ptyrun,sys; sys.exit(0 if ptyrun.wait_gone(int(sys.argv[1])) else 1)' "$pid" ||
        fail "LAYERFS_IDLE_SECONDS=0.5: the idle Sandbox stayed"
ok

# ---- 2. LAYERFS_COMMAND_UID/_GID: never cut to root ----------------------------------
for v in 4294967296 -1 4294967295 0 501x ' 501' 1e3; do
        refused "LAYERFS_COMMAND_UID=$v" "LAYERFS_COMMAND_UID '$v'" env LAYERFS_COMMAND_UID="$v" "$LAYERFS" sandbox create
        refused "LAYERFS_COMMAND_GID=$v" "LAYERFS_COMMAND_GID '$v'" env LAYERFS_COMMAND_GID="$v" "$LAYERFS" sandbox create
done
assert_eq "$(records)" 0 "refused identities: no record"
SB=$(LAYERFS_COMMAND_UID=502 LAYERFS_COMMAND_GID=21 lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
assert_eq "$(lfs workspace exec "$SB" main -- id -u):$(lfs workspace exec "$SB" main -- id -g)" "502:21" "a good identity"
lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null

# ---- 3. a pid past 32 bits in a call is refused, not cut ---------------------------------
SB=$(lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
victim=$(lfs process start "$SB" main -- sleep 1000)
export SBDIR="$LAYERFS_HOME/sandboxes/p-$SB"
call() {
        python3 - "$@" <<'EOF'
import json, os, socket, sys
d = os.environ["SBDIR"]
s = socket.socket(socket.AF_UNIX)
s.connect(d + "/control.sock")
req = json.loads(sys.argv[1])
req["v"] = 1  # the protocol's version (docs/protocol.md)
req["token"] = open(d + "/token").read().strip()
s.sendall((json.dumps(req) + "\n").encode())
print(s.makefile().readline().strip())
EOF
}
for pid in $((victim + 4294967296)) 4294967297 -1 0 "1.5" '"5"' 1e3; do
        answer=$(call "{\"call\": \"process.kill\", \"pid\": $pid}")
        case "$answer" in
        *'"InvalidInput"'*) ok ;;
        *) fail "process.kill of pid $pid: $answer" ;;
        esac
        kill -0 "$victim" 2>/dev/null || fail "process.kill of pid $pid ended process $victim: $answer"
done
case "$(call "{\"call\": \"process.kill\", \"pid\": $((victim + 4294967296))}")" in
*"$((victim + 4294967296))"*"1 to 2147483647"*) ok ;;
*) fail "the refusal does not name the pid and the range" ;;
esac
# The exec timeout too: a number of seconds from 0 to 1000000000.
for t in -1 1e300 '"5"' true; do
        answer=$(call "{\"call\": \"workspace.exec\", \"branch\": \"main\", \"command\": [\"true\"], \"timeout\": $t}")
        case "$answer" in
        *'"InvalidInput"'*) ok ;;
        *) fail "workspace.exec with timeout $t: $answer" ;;
        esac
done
lfs process kill "$SB" "$victim" >/dev/null

# ---- 4. the CLI: every numeric argument --------------------------------------------
x() { lfs workspace exec "$SB" main "$@"; }
for t in inf nan -inf 1e400 -1 0x10 ' 5' 5s '' 1e10; do
        refused "--timeout '$t'" "--timeout '$t'" x --timeout "$t" -- true
done
refused "--timeout range" "from 0 to 1000000000" x --timeout inf -- true
assert_eq "$(x --timeout 1e2 -- echo fine)" fine "--timeout 1e2"
for v in ' -5' -5 0 '+5' 5x '' 18446744073709551616 ' 5'; do
        refused "--limit '$v'" "--limit '$v'" lfs branch log main --limit "$v"
        refused "--lines '$v'" "--lines '$v'" lfs sandbox log "$SB" --lines "$v"
        refused "--page-size '$v'" "--page-size '$v'" lfs project list_sandboxes --page-size "$v"
        refused "--page '$v'" "--page '$v'" lfs project list_sandboxes --page "$v"
        refused "sandbox '$v'" "'$v'" lfs sandbox list_workspaces "$v"
        refused "pid '$v'" "'$v'" lfs process kill "$SB" "$v"
done
refused "pid range" "1 to 2147483647" lfs process kill "$SB" 4294967297
refused "sandbox range" "1 to 1000000" lfs sandbox close 1000001
assert_eq "$(lfs branch log main --limit 1 --json | json_get 'len(j)')" 1 "--limit 1"

lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null
finish
