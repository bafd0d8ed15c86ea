#!/usr/bin/env bash
# The attack (issue 12, item 4): a command kept the caller's terminal. Run from a terminal,
#   layerfs workspace exec 1 main -- sh -c 'exec 3<&0; setsid sh -c "... dd of=\$TMPDIR/stolen" 0<&3 &'
# left a process in the background holding the caller's terminal as its stdin: what root
# typed at its prompt afterwards landed in `stolen`. The library passed its stdin, a
# terminal, to the command as it was.
# Now a command never receives the caller's terminal: the library relays a terminal
# through a pipe (closed when the command ends) and the daemon refuses a terminal among
# the fds of a call that did not ask for one; `--tty` gives the command a pseudo-terminal
# of its own as its controlling terminal, the caller's in raw mode meanwhile (restored
# however the exec ends), the window size followed, the exit status unchanged.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
# Named outright: ptyrun.host_pid maps the pids a namespaces Sandbox's commands print.
export LAYERFS_RUNTIME=${LAYERFS_RUNTIME:-$(new_runtime)}

mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null
SB=$(lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
SBDIR="$LAYERFS_HOME/sandboxes/p-$SB"
export LAYERFS SB SBDIR

py() { PYTHONPATH="$(dirname "$0")" python3 - "$@"; }

# ---- 1. the attack: keystrokes typed after the exec returns --------------------------
# keystrokes_attack [--tty]: the background process tells its pid through a fifo before
# it starts to read, and the exec returns only then; what it holds as fds is checked
# while it lives. The shell reads its terminal only when the test says so (a line through
# the fifo GO). With --tty the command's own terminal hangs up when the exec returns.
mkfifo "$WORK/go"
export GO="$WORK/go"
keystrokes_attack() {
        FLAG=${1:-} py <<'EOF' || fail "${1:-} the command kept the caller's terminal (above)"
import os, sys, ptyrun
L, sb, sbdir, flag = os.environ["LAYERFS"], os.environ["SB"], os.environ["SBDIR"], os.environ["FLAG"]
stolen_path = sbdir + "/tmp/stolen" + flag
attack = ('exec 3<&0; rm -f $TMPDIR/f; mkfifo $TMPDIR/f; '
          'setsid sh -c "echo \\$\\$ > \\$TMPDIR/f; exec dd bs=1 count=60 of=\\$TMPDIR/stolen%s 2>/dev/null" 0<&3 & '
          'read pid < $TMPDIR/f; echo "background=$pid"' % flag)
t = ptyrun.Terminal("%s workspace exec %s main %s -- sh -c '%s'; echo exec-returned=$?; "
                    "read go < \"$GO\"; IFS= read -r line; echo \"shell-got:$line\"" % (L, sb, flag, attack))
try:
    bg = ptyrun.host_pid(int(t.expect(rb"background=(\d+)").group(1)))
    t.expect("exec-returned=0")
    held = sorted(fd for fd, target in ptyrun.fd_targets(bg).items() if target == t.name)
    keys = "typed-secret".ljust(59, ".") + "\n"  # dd ends after its 60 bytes
    if held:
        # Show what the attack gets, as the issue saw it.
        t.send(keys)
        ptyrun.wait_gone(bg)
        sys.exit("FAIL: the background process %d holds the caller's terminal %s as fds %s; it took "
                 "the keystrokes typed afterwards: %r" % (bg, t.name, held, open(stolen_path, "rb").read()))
    # Its stdin (a pipe, or its own terminal) ended with the exec: it ends with nothing read.
    if not ptyrun.wait_gone(bg):
        sys.exit("FAIL: the background process %d still waits to read: %s" % (bg, ptyrun.fd_targets(bg)))
    t.send(keys)
    with open(os.environ["GO"], "w") as go:
        go.write("go\n")
    t.expect("shell-got:" + keys.strip() + "\r\n")
    stolen = open(stolen_path, "rb").read()
    if stolen:
        sys.exit("FAIL: keystrokes reached the background process: %r" % stolen)
    assert t.wait() == 0
finally:
    t.close()
EOF
        ok
}
keystrokes_attack

# Its output streams were never the terminal either, nor is anything of a command that
# keeps running: every fd of a background process is checked.
py <<'EOF' || fail "a background process holds the caller's terminal (above)"
import os, sys, ptyrun
L, sb = os.environ["LAYERFS"], os.environ["SB"]
t = ptyrun.Terminal("%s workspace exec %s main -- sh -c 'sleep 1000 & echo background=$!'; "
                    "echo exec-returned=$?" % (L, sb))
try:
    bg = ptyrun.host_pid(int(t.expect(rb"background=(\d+)").group(1)))
    t.expect("exec-returned=0")
    fds = ptyrun.fd_targets(bg)
    if not fds:
        sys.exit("FAIL: the background sleep %d is gone" % bg)
    held = sorted(fd for fd, target in fds.items() if target == t.name or target.startswith("/dev/pts/"))
    if held:
        sys.exit("FAIL: the background process %d holds a terminal as fds %s: %s" % (bg, held, fds))
    os.kill(bg, 9)
    t.wait()
finally:
    t.close()
EOF
ok

# process start passes none of the caller's fds: stdin /dev/null, output to its log.
py <<'EOF' || fail "process start gave a process the caller's terminal (above)"
import os, sys, ptyrun
L, sb = os.environ["LAYERFS"], os.environ["SB"]
t = ptyrun.Terminal("%s process start %s main -- sleep 1000" % (L, sb))
try:
    pid = int(t.expect(rb"(\d+)\r\n").group(1))
    t.wait()
    fds = ptyrun.fd_targets(pid)
    if not fds or any(target.startswith("/dev/pts/") for target in fds.values()):
        sys.exit("FAIL: the started process %d holds %s" % (pid, fds))
    os.kill(pid, 9)
finally:
    t.close()
EOF
ok

# ---- 2. the daemon refuses a terminal it was not asked for -------------------------------
# A client that speaks the protocol itself (not the library) passes its terminal as stdin.
py <<'EOF' || fail "the daemon gave a command a terminal it was not asked for (above)"
import array, json, os, socket, sys, ptyrun
sbdir = os.environ["SBDIR"]
master, slave = os.openpty()
token = open(sbdir + "/token").read().strip()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sbdir + "/control.sock")
req = {"v": 1, "token": token, "call": "workspace.exec", "branch": "main", "env": [],
       "command": ["sh", "-c", "test -t 0 && echo got-a-terminal || echo no-terminal"]}
r, w = os.pipe()
s.sendmsg([(json.dumps(req) + "\n").encode()],
          [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [slave, w, w]))])
os.close(w)
answer = json.loads(s.makefile().readline())
out = os.read(r, 100)
if "error" not in answer or answer["error"]["code"] != "InvalidInput" or "terminal" not in answer["error"]["message"]:
    sys.exit("FAIL: a terminal passed as stdin: answer %s, the command printed %r" % (answer, out))
print("refused:", answer["error"]["message"])
EOF
ok

# Asking for a terminal does not let a client hand over one (here the controlling
# terminal of a shell, some session's already): with tty the daemon makes the command's
# terminal itself and takes no fds, nor may "tty" be anything but true or false.
py <<'EOF' || fail "the daemon took a terminal that is not the command's own (above)"
import array, json, os, socket, sys, ptyrun
sbdir = os.environ["SBDIR"]
token = open(sbdir + "/token").read().strip()
def call(fds, tty):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sbdir + "/control.sock")
    req = {"v": 1, "token": token, "call": "workspace.exec", "branch": "main", "env": [], "tty": tty,
           "command": ["sh", "-c", "echo took-it > /dev/tty"]}
    s.sendmsg([(json.dumps(req) + "\n").encode()],
              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])
    return json.loads(s.makefile().readline())
shell = ptyrun.Terminal("echo ready; read x")
try:
    shell.expect("ready")
    r, w = os.pipe()
    for fds, tty in (([shell.slave] * 3, True), ([shell.slave, w, w], True), ([r, w, w], "yes"),
                     ([], False)):
        answer = call(fds, tty)
        if answer.get("error", {}).get("code") != "InvalidInput":
            sys.exit("FAIL: fds %s with tty %r: %s; the shell's terminal shows %r"
                     % (fds, tty, answer, shell.shown()))
        print("refused:", answer["error"]["message"])
    shell.send("x\n")
    shell.wait()
finally:
    shell.close()
EOF
ok

# With tty and no fds the daemon's first frame is the terminal's, its master with it, and
# the window size asked for; the command is on the other side, and its terminal is named.
py <<'EOF' || fail "the terminal the daemon makes (above)"
import json, os, socket, sys
sbdir = os.environ["SBDIR"]
token = open(sbdir + "/token").read().strip()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sbdir + "/control.sock")
req = {"v": 1, "token": token, "call": "workspace.exec", "branch": "main", "env": [], "tty": True,
       "rows": 33, "cols": 77, "command": ["sh", "-c", "stty size; tty"]}
s.sendall((json.dumps(req) + "\n").encode())
data, fds, _, _ = socket.recv_fds(s, 4096, 1)
frame, rest = data.split(b"\n", 1)
if json.loads(frame) != {"v": 1, "terminal": True} or len(fds) != 1:
    sys.exit("FAIL: the first frame is %r with fds %s" % (frame, fds))
out = b""
while True:
    try:
        k = os.read(fds[0], 4096)
    except OSError:  # EIO: nothing holds the command's side any more
        break
    if not k:
        break
    out += k
while b"\n" not in rest:
    rest += s.recv(4096)
answer = json.loads(rest.split(b"\n", 1)[0])
if answer != {"v": 1, "ok": {"exit": 0}} or not out.startswith(b"33 77\r\n/dev/pts/"):
    sys.exit("FAIL: answer %s, the terminal showed %r" % (answer, out))
print("terminal:", out)
EOF
ok

# ---- 3. --tty: a terminal of the command's own --------------------------------------------
py <<'EOF' || fail "--tty (above)"
import os, sys, termios, ptyrun
L, sb = os.environ["LAYERFS"], os.environ["SB"]
script = ('tty; t=$(tty) && test -c "$t" && test "$t" -ef /dev/stdin && echo its-name-is-there; '
          'test -t 0 && test -t 1 && test -t 2 && echo all-three-terminals; '
          'read a b c d e f tty_nr rest < /proc/$$/stat; echo ctty=$tty_nr; echo pid=$$; '
          'stty size; echo ready; read x; stty size; echo typed=$x; exit 7')
t = ptyrun.Terminal("%s workspace exec %s main --tty -- sh -c '%s'; echo status=$?" % (L, sb, script),
                    rows=24, cols=80)
try:
    own = t.expect(rb"(/dev/pts/\d+)\r\n").group(1).decode()
    t.expect("its-name-is-there")
    t.expect("all-three-terminals")
    ctty = int(t.expect(rb"ctty=(\d+)").group(1))
    if ctty == 0:
        sys.exit("FAIL: the command has no controlling terminal")
    # Not the caller's: another inode (under namespaces names and numbers may be the same
    # in another devpts).
    shell = ptyrun.host_pid(int(t.expect(rb"pid=(\d+)").group(1)))
    theirs, ours = os.stat("/proc/%d/fd/0" % shell), os.fstat(t.slave)
    if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino):
        sys.exit("FAIL: the command's terminal %s is the caller's (%s)" % (own, t.name))
    t.expect(r"24 80\r\n")
    t.expect("ready")
    if not t.raw():
        sys.exit("FAIL: the caller's terminal is not in raw mode while the command runs")
    t.resize(40, 100)
    t.send("abc\r")
    t.expect(r"40 100\r\n")
    t.expect(r"typed=abc\r\n")
    t.expect(r"status=7\r\n")
    if t.settings() != t.initial:
        sys.exit("FAIL: the caller's terminal was not restored: %s, was %s" % (t.settings(), t.initial))
    assert t.wait() == 0
finally:
    t.close()
EOF
ok

# ^C typed at the caller's terminal is the command's interrupt (its terminal's line
# discipline signals its foreground group), and stty inside changes its terminal only.
# The program says ready once SIGINT would end it (a shell that forks a child after it
# caught ^C waits for that child).
cat >"$SBDIR/tmp/interrupted.py" <<'EOF'
import signal, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
print("ready", flush=True)
time.sleep(1000)
EOF
py <<'EOF' || fail "--tty: ^C and stty (above)"
import os, sys, ptyrun
L, sb = os.environ["LAYERFS"], os.environ["SB"]
t = ptyrun.Terminal("%s workspace exec %s main --tty -- sh -c 'stty -echo; stty -a | grep -ow -- -echo; "
                    "exec python3 $TMPDIR/interrupted.py'; echo status=$?" % (L, sb))
try:
    t.expect(r"-echo\r\n")
    t.expect("ready")
    t.send("\x03")
    t.expect(r"status=130\r\n")
    if t.settings() != t.initial:
        sys.exit("FAIL: the caller's terminal was changed: %s, was %s" % (t.settings(), t.initial))
    assert t.wait() == 0
finally:
    t.close()
EOF
ok

# The terminal is restored however the exec ends: the command killed, its timeout, the
# client itself killed by a signal.
py <<'EOF' || fail "--tty restoring the caller's terminal (above)"
import os, signal, sys, ptyrun
L, sb = os.environ["LAYERFS"], os.environ["SB"]
for how, script, want in (("killed", "kill -9 $$", 137), ("timeout", "echo ready; sleep 1000", 124)):
    extra = "--timeout 2" if how == "timeout" else ""
    t = ptyrun.Terminal("%s workspace exec %s main --tty %s -- sh -c '%s'; echo status=$?" % (L, sb, extra, script))
    try:
        t.expect(r"status=%d\r\n" % want)
        if t.settings() != t.initial:
            sys.exit("FAIL: %s: the caller's terminal was left changed" % how)
        t.wait()
    finally:
        t.close()
# The client ended by SIGTERM (or SIGHUP) while the command runs: the terminal it changed
# is put back before it dies.
for sig in (signal.SIGTERM, signal.SIGHUP):
    t = ptyrun.Terminal("exec %s workspace exec %s main --tty -- sh -c 'echo ready; sleep 1000'" % (L, sb))
    try:
        t.expect("ready")
        if not t.raw():
            sys.exit("FAIL: not in raw mode while the command runs")
        os.kill(t.pid, sig)
        code = t.wait()
        if code != -sig:
            sys.exit("FAIL: the client ended with %d, not by signal %d" % (code, sig))
        if t.settings() != t.initial:
            sys.exit("FAIL: the client killed by signal %d left the terminal changed" % sig)
    finally:
        t.close()
EOF
ok

# Keystrokes after a --tty exec do not reach what it left behind either.
keystrokes_attack --tty

# Without a terminal anywhere, --tty still gives the command one, and the exec's streams
# keep working (input from a pipe, output to a file).
printf 'piped\n' | lfs workspace exec "$SB" main --tty -- sh -c 'test -t 0 && read x && echo "tty:$x"; exit 3' >"$WORK/out" || code=$?
assert_eq "${code:-0}" 3 "--tty without a terminal: exit status"
grep -q 'tty:piped' "$WORK/out" || fail "--tty without a terminal: $(cat -A "$WORK/out")"
ok

lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" --force >/dev/null
finish
