#!/usr/bin/env bash
# What a program that uses liblayerfs hands its Sandboxes' daemon without meaning to
# (found in review, issue 14): the daemon is started from the caller's process.
# - Its signal state: with SIGCHLD ignored, the kernel reaps the daemon's commands itself
#   and its waits fail (exec said 126); signals the caller blocked stayed blocked in the
#   daemon. Seen failing before the fix: the daemon's SigBlk was 0000000000004200.
# - Its closed standard fds: the daemon's readiness pipe, /dev/null and log were put on
#   0-3 in an order that overwrote one with another when one of them had taken 0, 1 or 2.
#   In this flow the create's own files take those numbers first, so the pipe did not
#   land there and the case passed before the fix too; it stays as the check that a
#   program with 0, 1 and 2 closed gets a working Sandbox.
# - Its signal handlers without SA_RESTART: a signal during the create's read of the
#   daemon's pid (EINTR) failed the create "could not start layerfs-daemon" (20 of 20
#   creates under a timer signal every 0.2 ms, before the fix).
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=caller
lfs project init caller >/dev/null

# A program of the library's with 0, 1 and 2 closed once its home is open (the CLI opens
# files first, which take those numbers): the create's own fds get them.
# A library built with ASan (make sanitize) loads into python only after its runtime.
preload=$(ldd "$BUILD/liblayerfs.so" | awk '/libasan/ {print $3}')
LAYERFS_DAEMON=$(cd "$BUILD" && pwd)/layerfs-daemon LD_PRELOAD=$preload \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
        python3 - "$BUILD/liblayerfs.so" "$LAYERFS_HOME" "$WORK/n" <<'PY'
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
home, err = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.lfs_home_open(sys.argv[2].encode(), ctypes.byref(home), ctypes.byref(err)) == 0
out = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
os.dup2(out, 100)
for fd in (0, 1, 2, out):
    os.close(fd)
n = ctypes.c_int(0)
r = lib.lfs_sandbox_create(home, b"caller", None, None, ctypes.byref(n), ctypes.byref(err))
os.write(100, (("%d" % n.value) if r == 0 else "failed %d" % r).encode())
PY
n=$(cat "$WORK/n")
case "$n" in
[0-9]*) ok ;;
*) fail "sandbox create from a program with fds 0, 1 and 2 closed: $n" ;;
esac
lfs workspace mount "$n" main >/dev/null
assert_eq "$(lfs workspace exec "$n" main -- echo hello)" hello "an exec in that Sandbox"
lfs sandbox close "$n" --force >/dev/null

# sandbox create from a caller that ignores SIGCHLD and blocks SIGUSR1, SIGTERM.
python3 - "$LAYERFS" "$WORK/n" <<'PY'
import os, signal, subprocess, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
# exec, so that the CLI (and the daemon it starts) inherit this state
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.dup2(out, 1)
os.execv(sys.argv[1], [sys.argv[1], "sandbox", "create"])
PY
n=$(cat "$WORK/n")
[ -n "$n" ] || fail "sandbox create from a caller that ignores SIGCHLD printed no number"
dpid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
# Only what the daemon blocks itself, to read from its signalfd (SIGHUP, SIGINT, SIGTERM:
# they close the Sandbox): not the caller's SIGUSR1.
assert_eq "$(awk '/^SigBlk:/ {print $2}' "/proc/$dpid/status")" 0000000000004003 "the daemon blocks only SIGHUP, SIGINT and SIGTERM"
assert_eq "$(awk '/^SigIgn:/ {print $2}' "/proc/$dpid/status" | python3 -c 'import sys; print(int(sys.stdin.read(), 16) >> 16 & 1)')" 0 \
        "the daemon does not ignore SIGCHLD"
lfs workspace mount "$n" main >/dev/null
rc=0
lfs workspace exec "$n" main -- sh -c 'exit 7' || rc=$?
assert_eq "$rc" 7 "an exec's exit status in a Sandbox made by a caller that ignores SIGCHLD"
lfs sandbox close "$n" --force >/dev/null
ok

# Sandboxes made, mounted and closed from a caller whose signal handler (no SA_RESTART)
# runs every 0.2 ms: its calls see EINTR and must go on.
preload=$(ldd "$BUILD/liblayerfs.so" | awk '/libasan/ {print $3}')
LAYERFS_DAEMON=$(cd "$BUILD" && pwd)/layerfs-daemon LD_PRELOAD=$preload \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
        python3 - "$BUILD/liblayerfs.so" "$LAYERFS_HOME" >"$WORK/interrupted" <<'PY'
import ctypes, signal, sys
class Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("errnum", ctypes.c_int), ("message", ctypes.c_char_p)]
lib = ctypes.CDLL(sys.argv[1])
home, err = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.lfs_home_open(sys.argv[2].encode(), ctypes.byref(home), ctypes.byref(err)) == 0
signal.signal(signal.SIGALRM, lambda *a: None)
signal.siginterrupt(signal.SIGALRM, True)
signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
def call(what, f, *args):
    e = ctypes.c_void_p()
    r = f(*args, ctypes.byref(e))
    if r != 0:
        print("%s failed %d: %s" % (what, r, ctypes.cast(e, ctypes.POINTER(Err)).contents.message.decode()))
    return r == 0
done = 0
for i in range(10):
    n, path = ctypes.c_int(0), ctypes.c_char_p()
    if not call("create", lib.lfs_sandbox_create, home, b"caller", None, None, ctypes.byref(n)):
        continue
    if call("mount", lib.lfs_workspace_mount, home, b"caller", n.value, b"main", ctypes.byref(path)) and \
            call("close", lib.lfs_sandbox_close, home, b"caller", n.value, 1):
        done += 1
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("done %d" % done)
PY
assert_eq "$(cat "$WORK/interrupted")" "done 10" "create, mount and close under a signal storm (EINTR)"
finish
