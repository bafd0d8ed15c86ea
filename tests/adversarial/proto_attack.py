#!/usr/bin/env python3
"""Malformed input on a Sandbox's control socket (test_protocol.sh): one attack per run.

    proto_attack.py SANDBOX_DIR CASE [ARG]

Prints one line per check, "ok: ..." or "FAIL: ...", and exits 1 if any check failed.
A check passes when the daemon gives a clear error (the code expected, a message naming
the value) or closes the connection, as docs/protocol.md says for that input.
Every request it means to be well formed carries "v" (docs/protocol.md), which the daemon
of before the version field ignores."""
import json
import os
import socket
import sys
import threading

sandbox, case = sys.argv[1], sys.argv[2]
arg = sys.argv[3] if len(sys.argv) > 3 else None
token = open(os.path.join(sandbox, "token")).read().strip()
VERSION = 1
failed = False


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    failed = failed or not cond


def connect():
    s = socket.socket(socket.AF_UNIX)
    # Blocking: with a timeout set, a connect to a full listen backlog fails at once
    # (EAGAIN) instead of waiting its turn.
    s.connect(os.path.join(sandbox, "control.sock"))
    # A daemon that stops answering fails the case instead of hanging the suite (the accept
    # loop once stopped for good behind followers counted as leaving).
    s.settimeout(120)
    return s


def line(s, limit=1 << 22):
    """One line of the daemon (without its newline), or None if it closed first."""
    got = b""
    while not got.endswith(b"\n") and len(got) < limit:
        try:
            k = s.recv(65536)
        except ConnectionResetError:
            return None
        except socket.timeout:
            return "(no answer within 120 s)"
        if not k:
            return None if not got else got.decode(errors="replace")
        got += k
    return got.decode(errors="replace").rstrip("\n")


def request(call, v=VERSION, **args):
    req = {"token": token, "call": call}
    if v is not None:
        req["v"] = v
    req.update(args)
    return (json.dumps(req) + "\n").encode()


def ask(data, fds=()):
    """Sends data (with fds) on a new connection; the answer line or None (closed)."""
    s = connect()
    try:
        if fds:
            s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(
                __import__("array").array("i", fds))))])
        else:
            s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = line(s)
    s.close()
    return answer


def refused(answer, code, text, what):
    """The answer is an error of code whose message has text."""
    try:
        j = json.loads(answer) if answer else None
    except ValueError:
        j = None
    err = j.get("error") if isinstance(j, dict) else None
    good = isinstance(err, dict) and err.get("code") == code and text in str(err.get("message"))
    check(good, "%s: %s (expected %s naming '%s')" % (what, answer, code, text))


def refused_or_closed(answer, code, text, what):
    if answer is None:
        check(True, "%s: connection closed" % what)
    else:
        refused(answer, code, text, what)


def answered_ok(answer, what):
    try:
        good = "ok" in json.loads(answer)
    except (TypeError, ValueError):
        good = False
    check(good, "%s: %s" % (what, answer))


def devnull_fds(n):
    return [os.open("/dev/null", os.O_RDWR) for _ in range(n)]


if case == "truncated":
    # Half a request, then the writing side closed; then half a request and gone.
    s = connect()
    s.sendall(request("sandbox.ping")[:20])
    s.shutdown(socket.SHUT_WR)
    refused_or_closed(line(s), "InvalidInput", "middle of a frame", "half a request, then EOF")
    s.close()
    s = connect()
    s.sendall(b'{"v":1,"token":"' + token.encode()[:10])
    s.close()
    check(True, "half a request, then the connection dropped")
elif case == "huge":
    # 2 MiB with no newline, and 1 MiB + 1 bytes with its newline last.
    for size, what in ((2 << 20, "2 MiB without a newline"), ((1 << 20) + 1, "a 1 MiB + 1 byte frame")):
        s = connect()
        pad = b'{"v":1,"call":"sandbox.ping","pad":"' + b"x" * size
        data = pad[:size - 1] + b"\n" if size == (1 << 20) + 1 else pad[:size]
        done = threading.Event()

        def send_all(sock=s, blob=data):
            try:
                sock.sendall(blob)
            except OSError:
                pass
            done.set()
        threading.Thread(target=send_all, daemon=True).start()
        refused_or_closed(line(s), "InvalidInput", "longer than", what)
        s.close()
        done.wait(60)
    # Exactly 1 MiB with its newline is read (and refused for what it is: no token).
    size = 1 << 20
    head = b'{"v":1,"call":"sandbox.ping","pad":"'
    data = head + b"x" * (size - len(head) - 3) + b'"}\n'
    assert len(data) == size
    refused(ask(data), "PermissionDenied", "token", "a frame of exactly 1 MiB")
elif case == "not-json":
    for data, what in ((b"nonsense\n", "not JSON"), (b'"x"\n', "a string"),
                       (b"\n", "an empty line"), (b"\x00\xff\xfe\n", "binary bytes"),
                       (b'{"v":1,"call":"sandbox.ping","token":"\xff"}\n', "bad UTF-8")):
        refused_or_closed(ask(data), "InvalidInput", "", what)
elif case == "array-frame":
    # Today's daemon looks for the token in the array, and says PermissionDenied.
    refused_or_closed(ask(b"[1,2]\n"), "InvalidInput", "array", "an array")
elif case == "duplicate-keys":
    # Two "call" keys: a reader that takes the first and one that takes the last would
    # run different calls. Refused by the protocol module; today's daemon takes one.
    data = ('{"v":1,"token":"%s","call":"sandbox.ping","call":"sandbox.close"}\n' % token).encode()
    refused_or_closed(ask(data), "InvalidInput", "duplicate", "duplicate \"call\" keys")
elif case in ("wrong-types", "wrong-types-wired"):
    # Arguments of the wrong JSON type: each refused InvalidInput (PermissionDenied for
    # the token). The -wired ones today's daemon reads as absent or false, and acts on
    # that: an unmount without --discard, a close without --force, events without
    # --follow, an exec in the Workspace's root.
    branch = arg or "main"
    if case == "wrong-types":
        cases = [
            (request("workspace.mount", branch=123), "workspace.mount branch=123"),
            (request("workspace.mount", branch=None), "workspace.mount branch=null"),
            (request("workspace.commit", branch=branch, message=5), "workspace.commit message=5"),
            (request("process.kill", pid="1"), "process.kill pid=\"1\""),
            (request("process.kill", pid=1.5), "process.kill pid=1.5"),
            (request("process.kill", pid=1 << 40), "process.kill pid=2^40"),
            (request("process.start", branch=branch, command=[1]), "process.start command=[1]"),
            (request("process.start", branch=branch, command="true"), "process.start command=\"true\""),
            (request("sandbox.ping", token=5), "token=5"),
            (request(5), "call=5"),
        ]
        exec_cases = [
            ({"command": "true"}, "workspace.exec command=\"true\""),
            ({"command": ["true"], "env": {"A": "1"}}, "workspace.exec env={...}"),
            ({"command": ["true"], "timeout": "5"}, "workspace.exec timeout=\"5\""),
            ({"command": ["true"], "tty": "yes"}, "workspace.exec tty=\"yes\""),
        ]
    else:
        cases = [
            (request("workspace.status", branch=[branch]), "workspace.status branch=[...]"),
            (request("sandbox.close", force="yes"), "sandbox.close force=\"yes\""),
            (request("sandbox.events", follow="yes"), "sandbox.events follow=\"yes\""),
            (request("workspace.unmount", branch=branch, discard="yes"), "workspace.unmount discard=\"yes\""),
        ]
        exec_cases = [({"command": ["true"], "cwd": 5}, "workspace.exec cwd=5")]
    for data, what in cases:
        code = "PermissionDenied" if what == "token=5" else "InvalidInput"
        refused(ask(data), code, "", what)
    for args, what in exec_cases:
        fds = devnull_fds(3)
        refused(ask(request("workspace.exec", branch="main", **args), fds), "InvalidInput", "", what)
        for fd in fds:
            os.close(fd)
elif case == "unknown-calls":
    for name in ("sandbox.nope", "", "SANDBOX.PING", "sandbox.ping ", "x" * 5000, "workspace"):
        refused(ask(request(name)), "InvalidInput", "unknown call", "call %.40r" % name)
elif case == "version":
    # A newer version, one as a string, and none at all: refused Unsupported before the
    # token is looked at, naming both versions.
    for v, what in ((VERSION + 1, "v=%d" % (VERSION + 1)), ("1", 'v="1"'), (None, "no v")):
        refused(ask(request("sandbox.ping", v=v)), "Unsupported", "different builds", what)
    answer = ask(request("sandbox.ping"))
    try:
        v = json.loads(answer).get("v")
    except (TypeError, ValueError):
        v = None
    check(v == VERSION, "the answer to a ping carries \"v\": %d: %s" % (VERSION, answer))
elif case == "unexpected-fds":
    # fds with calls that take none, and more than exec takes: closed, and said so.
    fds = devnull_fds(5)
    refused(ask(request("sandbox.ping"), fds[:2]), "InvalidInput", "fds", "sandbox.ping with 2 fds")
    refused(ask(request("process.list"), fds[:1]), "InvalidInput", "fds", "process.list with 1 fd")
    refused(ask(request("workspace.exec", branch=arg or "main", command=["true"]), fds[:5]),
            "InvalidInput", "fds", "workspace.exec with 5 fds")
    refused(ask(request("workspace.exec", branch=arg or "main", command=["true"]), fds[:2]),
            "InvalidInput", "", "workspace.exec with 2 fds")
    # None at all is only for a terminal the daemon makes (tty); with tty, none may come.
    refused(ask(request("workspace.exec", branch=arg or "main", command=["true"])),
            "InvalidInput", "stdin, stdout and stderr", "workspace.exec with no fds")
    refused(ask(request("workspace.exec", branch=arg or "main", command=["true"], tty=True), fds[:3]),
            "InvalidInput", "pass no fds", "workspace.exec with tty and 3 fds")
    for fd in fds:
        os.close(fd)
elif case == "fd-flood":
    # Many requests each with fds the call does not take: none may stay in the daemon.
    fds = devnull_fds(3)
    for _ in range(int(arg or 50)):
        ask(request("sandbox.ping"), fds)
    for fd in fds:
        os.close(fd)
    check(True, "sent %s pings with 3 fds each" % (arg or 50))
elif case == "connections":
    # 200 connections at once, each following the Sandbox's events (a call that holds its
    # connection): at most CAP are served, every other one is refused Busy or closed.
    # CAP is 128 + 16: a connection told to give its place (it had sent nothing yet) is
    # still served if its whole request came meanwhile (docs/protocol.md).
    count, cap = 200, int(arg or 144)
    socks, results = [], {"served": 0, "busy": 0, "closed": 0, "other": []}
    lock = threading.Lock()

    def follow(i):
        s = connect()
        socks.append(s)
        s.sendall(request("sandbox.events", follow=True))
        first = line(s)
        with lock:
            if first is None:
                results["closed"] += 1
            elif '"Busy"' in first:
                results["busy"] += 1
            elif '"event"' in first:
                results["served"] += 1
            else:
                results["other"].append(first)
    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    print("served %d, Busy %d, closed %d, other %d" % (results["served"], results["busy"], results["closed"],
                                                     len(results["other"])))
    check(not results["other"], "every connection served, refused Busy or closed: %s" % results["other"][:3])
    check(results["served"] <= cap, "at most %d served at once (%d)" % (cap, results["served"]))
    check(results["busy"] + results["closed"] >= count - cap,
          "the %d past the cap refused Busy or closed (%d)" % (count - cap, results["busy"] + results["closed"]))
    # While they are held, a ping is refused Busy rather than hanging (served, if a
    # follower was told to give its place before its request came and left one free).
    answer = ask(request("sandbox.ping"))
    if results["served"] >= 128:
        refused(answer, "Busy", "", "a ping while %d followers are held" % results["served"])
    else:
        answered_ok(answer, "a ping while %d followers are held" % results["served"])
    for s in socks:
        s.close()
    # 200 pings at once: each answered ok or refused Busy.
    answers = []

    def ping():
        a = ask(request("sandbox.ping"))
        with lock:
            answers.append(a)
    threads = [threading.Thread(target=ping, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    bad = [a for a in answers if a is None or ('"ok"' not in a and '"Busy"' not in a)]
    check(len(answers) == count and not bad, "200 pings at once answered ok or Busy: %s" % bad[:3])
else:
    print("FAIL: unknown case " + case)
    sys.exit(2)
sys.exit(1 if failed else 0)
