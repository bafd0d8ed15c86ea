#!/usr/bin/env python3
"""driver.py - the load suite's driver (tests/load/README.md).

  driver.py SANDBOXES WORKSPACES ROUNDS SEED

Runs SANDBOXES slots at once. Each slot owns a project (load-<slot>) with WORKSPACES
branches and, ROUNDS times, creates a Sandbox, mounts every branch, and runs a random
loop of exec (writes, deletes, chmod, reads checked against the model), process
start / kill, commit, unmount and close. Meanwhile a faulter thread SIGKILLs Sandbox
daemons, commands running in Sandboxes and the driver's own CLI calls at random, and
runs `runtime reclaim`.

Every slot keeps a model of each branch: the files its Workspace holds, and every commit
it attempted with the exact contents it recorded. A commit whose daemon or CLI was
killed is uncertain: it may or may not have landed, and is resolved later from the
branch's head. At the end every project must pass `project verify`, and every branch's
history must be the attempts in order, each landed commit holding exactly its contents
(an uncertain one either whole or absent, never a mix).

A failure is any result that no fault explains: an error in a call while nothing of its
slot was killed, a read or a mount that differs from the model, a history that differs
from the attempts. Prints the counts of operations, faults and failures; exits 1 if any
failure was found. The caller (test_load.sh) checks that nothing is left afterwards.
Python 3 standard library only.
"""

import collections
import hashlib
import json
import os
import random
import re
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

LAYERFS = os.environ["LAYERFS"]
HOME = os.environ["LAYERFS_HOME"]
WORK = os.environ["WORK"]
# Bounds for one call and for retries: generous, they only turn a hang into a failure.
CALL_SECONDS = 300
RETRIES = 30


class Gone(Exception):
    """The slot's Sandbox is gone (its daemon was killed): drop it and go on."""


class Abort(Exception):
    """A failure no fault explains: the slot records it and stops."""


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = collections.Counter()
        self.faults = collections.Counter()
        self.failures = []
        self.verified = 0  # commits whose contents were checked after the run
        self.outcomes = collections.Counter()  # what the faults did to the work they hit

    def outcome(self, name):
        with self.lock:
            self.outcomes[name] += 1

    def op(self, name):
        with self.lock:
            self.ops[name] += 1

    def fault(self, name):
        with self.lock:
            self.faults[name] += 1

    def fail(self, what, trace=()):
        with self.lock:
            self.failures.append(what)
            print("FAILURE: " + what, file=sys.stderr, flush=True)
            if trace:
                print("  its slot's last calls:\n    " + "\n    ".join(trace), file=sys.stderr, flush=True)


STATS = Stats()


def records(sql, args=()):
    """Rows of the home's records (read only); [] before the home has its database."""
    path = os.path.join(HOME, "home.db")
    if not os.path.exists(path):
        return []
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # made, its table not yet
            return []
        raise
    finally:
        db.close()


def start_time(pid):
    """Field 22 of /proc/PID/stat, or None when PID is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def wait_exit(pid):
    """Returns once pid has ended (at most CALL_SECONDS)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], CALL_SECONDS)
    finally:
        os.close(fd)


def digest(data):
    """What the model keeps of a file's content: its SHA-256 (big files stay small)."""
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def manifest(root):
    """{relative path: (digest of its content, executable)} of the regular files below root;
    raises on anything else (the model has files only)."""
    out = {}
    def fail(e):
        raise e

    for dirpath, dirs, files in os.walk(root, onerror=fail):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p) or (name in dirs):
                raise ValueError("unexpected entry %s in %s" % (rel, root))
            with open(p, "rb") as f:
                out[rel] = (digest(f.read()), bool(os.stat(p).st_mode & 0o100))
    return out


class Result:
    def __init__(self, status, out, err):
        self.status, self.out, self.err = status, out, err

    @property
    def code(self):
        """The refusal's code (exit 125: stderr 'CODE: message', or with --json stdout
        {error: {code, message}}), else None."""
        if self.status != 125:
            return None
        if ": " in self.err:
            return self.err.split(": ", 1)[0].strip()
        try:
            return self.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def said(self):
        """What it said when it failed."""
        return (self.err.strip() or self.out.strip())[:300]

    def json(self):
        return json.loads(self.out)


class Branch:
    def __init__(self, name):
        self.name = name
        self.content = {}  # what the branch's head holds, as far as the slot knows
        self.ws = None  # what the mounted Workspace holds, or None when not mounted
        self.path = None
        self.head = None  # the last commit known to be the head
        self.attempts = []  # [content, commit id or None while uncertain, landed]
        self.uncertain = None  # the attempt whose commit may or may not have landed


class Slot:
    def __init__(self, index, workspaces, rounds, seed):
        self.index = index
        self.project = "load-%d" % index
        self.rounds = rounds
        self.rng = random.Random("%s-%d" % (seed, index))
        self.branches = [Branch("w%d" % j) for j in range(workspaces)]
        self.number = None
        self.instance = None  # its record's (the owner a record names changes: a reclaim takes it)
        # The faulter's side: epoch counts the faults that touched this slot; dead holds the
        # (number, instance) of each Sandbox of the project whose daemon it killed, once that
        # daemon has exited. Both under lock, which the faulter holds from its kill until it landed.
        self.lock = threading.Lock()
        self.epoch = 0
        self.dead = set()
        self.client = None  # pidfd of the CLI call running now
        self.committing = False  # a commit call runs: the faulter aims daemon kills there
        self.serial = 0
        self.stopped = False
        self.trace = collections.deque(maxlen=60)  # the last calls, shown with a failure
        self.commands = 0  # attempts of commands in this slot's Workspaces, in order (exec)

    # ---- calls --------------------------------------------------------------------
    def call(self, *args, stdin=None):
        """One CLI call (with --project); the faulter may SIGKILL it."""
        cmd = [LAYERFS, "--project", self.project] + list(args)
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        fd = os.pidfd_open(p.pid)
        with self.lock:
            self.client = fd
        try:
            out, err = p.communicate(timeout=CALL_SECONDS)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise Abort("%s did not end within %d s" % (" ".join(args), CALL_SECONDS))
        finally:
            with self.lock:
                self.client = None
            os.close(fd)
        with self.lock:
            self.trace.append("%.3f %s -> %d %s %s" % (time.monotonic(), " ".join(args)[:120], p.returncode,
                                                    (err.strip() or (out.strip() if p.returncode else ""))[:200], "(epoch %d)" % self.epoch))
        return Result(p.returncode, out, err)

    def faults_since(self, epoch):
        """Whether a fault touched this slot since epoch; waits for a kill under way to land."""
        with self.lock:
            if self.number is not None and (self.number, self.instance) in self.dead:
                raise Gone()
            return self.epoch != epoch

    def now(self):
        """The slot's fault epoch now."""
        with self.lock:
            return self.epoch

    def op(self, name, *args, ok_after_fault=(), since=None):
        """Runs a call until it succeeds. A failure that a fault of this slot explains is
        retried (the operations are idempotent), and a refusal in ok_after_fault is its
        success after a fault since the call began (or since the epoch since: a killed
        call, or a killed process, had landed already); a failure that no fault explains
        is one; a killed daemon ends the Sandbox (Gone). args may be one function that
        gives each attempt's arguments."""
        first = self.now() if since is None else since
        fixed = args
        attempt = args[0] if len(args) == 1 and callable(args[0]) else lambda: fixed
        for _ in range(RETRIES):
            with self.lock:
                epoch = self.epoch
            args = attempt()
            r = self.call(*args)
            if r.status == 0 or (r.code in ok_after_fault and self.faults_since(first)):
                STATS.op(name)
                return r
            if not self.faults_since(epoch):
                raise Abort("%s: '%s' exited %d with no fault: %s" %
                            (self.project, " ".join(args), r.status, r.said))
        raise Abort("%s: '%s' failed %d times: %s" % (self.project, " ".join(args), RETRIES,
                                                       r.said))

    def quiet_check(self, what, good):
        if not good:
            raise Abort("%s: %s" % (self.project, what))

    # ---- the loop -----------------------------------------------------------------
    def setup(self):
        """The project and its branches, before any fault."""
        try:
            self.op("init", "project", "init", self.project)
            for b in self.branches:
                self.op("branch", "branch", "create", b.name)
                b.head = b.base = self.head(b)
        except Abort as e:
            STATS.fail(str(e))
            self.stopped = True

    def run(self):
        if self.stopped:
            return
        try:
            for rnd in range(self.rounds):
                try:
                    self.one_round(rnd)
                except Gone:
                    self.drop_sandbox()
        except Abort as e:
            STATS.fail(str(e), self.trace)
            self.stopped = True
        except Exception as e:  # a bug of the driver is a failure too
            STATS.fail("%s: driver error %r" % (self.project, e), self.trace)
            self.stopped = True
        finally:
            self.sweep()

    def head(self, b):
        r = self.op("log", "--json", "branch", "log", b.name, "--limit", "1")
        return r.json()[0]["commit"]

    def one_round(self, rnd):
        self.number = None
        epoch = self.now()
        r = self.op("create", "sandbox", "create")
        number = int(r.out.strip())
        row = records("SELECT instance FROM sandboxes WHERE project=? AND number=?", (self.project, number))
        self.number, self.instance = number, (row[0][0] if row else None)
        if not row:
            if not self.faults_since(epoch):
                raise Abort("%s: sandbox %d has no record right after its create" % (self.project, number))
            raise Gone()  # its daemon was killed and reclaimed already
        n = str(self.number)
        for b in self.branches:
            self.mount(b)
        for _ in range(self.rng.randint(6, 12)):
            b = self.rng.choice(self.branches)
            if b.ws is None:
                self.mount(b)
                continue
            self.rng.choice([self.write, self.write, self.delete, self.chmod, self.read,
                             self.start, self.start_kill, self.commit])(b)
        for b in self.branches:
            if b.ws is None:
                continue
            end = self.rng.choice(["commit", "commit", "discard", "keep"])
            if end == "commit":
                self.commit(b)
            if end != "keep":
                self.kill_processes()
                self.op("unmount", "workspace", "unmount", n, b.name,
                        *(["--discard"] if end == "discard" else []), ok_after_fault=("NotMounted",))
                b.ws = None
        force = any(b.ws is not None for b in self.branches)
        self.close(force)

    def mount(self, b):
        n = str(self.number)
        r = self.op("mount", "--json", "workspace", "mount", n, b.name, ok_after_fault=("AlreadyMounted",))
        if r.code == "AlreadyMounted":  # a mount whose CLI was killed had landed
            ws = self.op("list", "--json", "sandbox", "list_workspaces", n).json()
            path = [w["path"] for w in ws if w["branch"] == b.name][0]
        else:
            path = r.json()["path"]
        b.path = path
        if b.uncertain is not None:
            self.resolve(b)
        try:
            seen = manifest(path)
        except OSError as e:
            self.faults_since(-1)  # the daemon may have died meanwhile (Gone)
            raise Abort("%s: reading the mount of %s: %s (%s)" % (self.project, b.name, e, self.describe(path)))
        if seen != b.content:
            raise Abort("the mount of %s at %s shows %r, expected its head %r (%s)" %
                        (b.name, path, seen, b.content, self.describe(path)))
        b.ws = dict(b.content)

    def describe(self, path):
        """What the host sees at a Workspace's path: its mounts, its records, its daemons."""
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] + " " + line.split(" - ")[1].split()[0] for line in f
                      if os.path.dirname(os.path.dirname(path)) in line]
        rows = records("SELECT number, state, pid, instance FROM sandboxes WHERE project=?", (self.project,))
        alive = ["%d %s" % (r[2], "alive" if start_time(r[2]) is not None else "gone") for r in rows if r[2]]
        log = self.call("sandbox", "log", str(self.number), "--lines", "15")
        return "mounts %s; records %s; daemons %s; its log: %s" % (mounts, rows, alive, log.out.strip() or log.said)

    def resolve(self, b):
        """A commit killed with its daemon either landed whole or not at all: the head says which."""
        head = self.head(b)
        att = b.uncertain
        b.uncertain = None
        if head == b.head:
            att[2] = False
            STATS.outcome("commit killed with its daemon: absent")
            return
        STATS.outcome("commit killed with its daemon: landed")
        att[1], att[2] = head, True
        b.head, b.content = head, dict(att[0])

    def token(self):
        self.serial += 1
        return "%s-%d-%d" % (self.project, self.serial, self.rng.randrange(1 << 30))

    def exec(self, b, script, *args):
        """A command in b's Workspace. A command outlives a killed CLI (docs/protocol.md), a
        killed shell leaves its pipeline running, and a request whose CLI was killed may
        still start its command after the retry: an attempt left behind would race the
        next ones (its mv took the retry's .tmp). So every command of the Workspace takes
        its lock in the Sandbox's private tmp ($0 names it; the processes of an attempt
        hold it until the last has exited), and an attempt that finds a later command ran
        already does nothing. The commands are idempotent, so a retry runs again. Each
        attempt has a number of its own, the retry's above its first attempt's: with one
        number for both, an attempt that started after its retry ran again, racing the
        commit or unmount that came next (exec_guard_check.py)."""
        def attempt():
            self.commands += 1
            guard = ('exec 9>"$TMPDIR/lock-$0" && flock 9 && '
                     'if [ "$(cat "$TMPDIR/ran-$0" 2>/dev/null || echo 0)" -gt %d ]; then exit 0; fi && '
                     'echo %d >"$TMPDIR/ran-$0" && ' % (self.commands, self.commands))
            return ("workspace", "exec", str(self.number), b.name, "--", "sh", "-c", guard + script,
                    b.name) + args
        return self.op("exec", attempt)

    def write(self, b, name=None):
        """A small file, or (one time in five) 1-3 MiB, so that commits take a while: kills
        land inside them more often."""
        name = name or "f%d" % self.rng.randrange(12)
        text = self.token()
        if self.rng.randrange(5):
            script, args = 'printf %s "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"', (name, text)
            content = text
        else:
            size = self.rng.randint(1, 3) << 20
            script, args = 'yes "$2" | head -c "$3" >"$1.tmp" && mv -f "$1.tmp" "$1"', (name, text, str(size))
            content = ((text + "\n") * (size // (len(text) + 1) + 1))[:size]
        # A fault during the write may spoil it though it exits 0 (its `yes` killed, `head`
        # writes what it got and the pipeline's status is head's): then it is made again.
        for _ in range(RETRIES):
            epoch = self.now()
            self.exec(b, script, *args)
            if not self.faults_since(epoch):
                break
        else:
            raise Abort("%s: every write of %s met a fault" % (self.project, name))
        b.ws[name] = (digest(content), False)  # a new file (umask 022) in its place

    def delete(self, b):
        if not b.ws:
            return self.write(b)
        name = self.rng.choice(sorted(b.ws))
        self.exec(b, 'rm -f "$1"', name)
        del b.ws[name]

    def chmod(self, b):
        if not b.ws:
            return self.write(b)
        name = self.rng.choice(sorted(b.ws))
        text, x = b.ws[name]
        self.exec(b, 'chmod "$2" "$1"', name, "755" if not x else "644")
        b.ws[name] = (text, not x)

    def read(self, b):
        """The Workspace read through a command: every file of the model, nothing else. A
        fault during the read (its sha256sum killed, the loop going on) spoils what it
        printed though it exits 0: such a read is made again, and not judged if every
        attempt met one."""
        for _ in range(RETRIES):
            epoch = self.now()
            r = self.exec(b, 'for f in *; do [ -e "$f" ] || continue; if [ -x "$f" ]; then x=x; else x=-; fi; '
                             'printf "%s %s %s\\n" "$f" "$x" "$(sha256sum <"$f" | cut -d" " -f1)"; done')
            if not self.faults_since(epoch):
                break
        else:
            return
        seen = {}
        for line in r.out.splitlines():
            name, x, text = line.split(" ", 2)
            seen[name] = (text, x == "x")
        self.quiet_check("a command reads %s as %r, expected %r" % (b.name, seen, b.ws), seen == b.ws)

    def start(self, b):
        self.op("process", "process", "start", str(self.number), b.name, "--", "sleep", "600")

    def start_kill(self, b):
        epoch = self.now()  # the faulter may kill the process as soon as it runs
        r = self.op("process", "--json", "process", "start", str(self.number), b.name, "--", "sleep", "600")
        self.op("kill", "process", "kill", str(self.number), str(r.json()["pid"]),
                ok_after_fault=("InvalidInput",), since=epoch)

    def kill_processes(self):
        """Ends what runs in the Sandbox (background processes hold Workspaces)."""
        n = str(self.number)
        epoch = self.now()
        for p in self.op("list", "--json", "process", "list", n).json():
            if p["state"] == "running":
                self.op("kill", "process", "kill", n, str(p["pid"]), ok_after_fault=("InvalidInput",),
                        since=epoch)

    def commit(self, b):
        """Commits what the Workspace holds, with a mark of its own so that no two attempts
        record the same contents."""
        self.write(b, "mark")
        n = str(self.number)
        att = [dict(b.ws), None, None]
        b.attempts.append(att)
        msg = "commit %s" % self.token()
        with self.lock:
            first = self.epoch
        deadline = time.monotonic() + CALL_SECONDS
        while True:
            with self.lock:
                epoch = self.epoch
            try:
                self.committing = True
                try:
                    r = self.call("--json", "workspace", "commit", n, b.name, "-m", msg)
                finally:
                    self.committing = False
                if r.status != 0 and r.code != "Busy" and not self.faults_since(epoch):
                    raise Abort("%s: commit of %s exited %d with no fault: %s" %
                                (self.project, b.name, r.status, r.said))
            except Gone:
                b.uncertain = att  # resolved from the head at the next mount
                raise
            if r.status == 0:
                break
            STATS.outcome("commit call killed or Busy, then retried")
            # The CLI was killed (or the commit of a killed one still runs: Busy): the daemon
            # goes on with it; the next commit waits for it and says where the head is.
            if time.monotonic() > deadline:
                raise Abort("%s: commit of %s still Busy after %d s" % (self.project, b.name, CALL_SECONDS))
        STATS.op("commit")
        j = r.json()
        if j["merged"]:
            raise Abort("%s: commit of %s merged, but nothing else writes it" % (self.project, b.name))
        with self.lock:
            killed = self.epoch != first
        if not j["changed"] and not killed:
            raise Abort("%s: commit of %s recorded nothing, but its Workspace holds %r over %r" %
                        (self.project, b.name, b.ws, b.content))
        att[1], att[2] = j["commit"], True
        b.head, b.content = j["commit"], dict(b.ws)

    def close(self, force):
        n = str(self.number)
        self.op("close", "sandbox", "close", n, *(["--force"] if force else []), ok_after_fault=("NoSuchSandbox",))
        for b in self.branches:
            b.ws = None
        self.number = None

    def drop_sandbox(self):
        """After its daemon was killed: the Workspaces are lost; close what is left of it."""
        STATS.outcome("Sandbox lost with its daemon, closed after")
        n = self.number
        for b in self.branches:
            b.ws = None
        self.number = None
        if n is not None:
            self.close_dead(n)

    def close_dead(self, n):
        """Closes Sandbox n, which the faulter's reclaim may be removing meanwhile: Busy
        names the process removing it, and once that has ended the Sandbox is gone
        (NoSuchSandbox) or left for this close."""
        for _ in range(RETRIES):
            epoch = self.now()
            r = self.call("sandbox", "close", str(n), "--force")
            if r.status == 0:
                STATS.op("close")
                return
            remover = re.search(r"being removed by process (\d+)", r.err)
            if r.code == "Busy" and remover:
                wait_exit(int(remover.group(1)))
                continue
            if r.code == "NoSuchSandbox" and not records(
                    "SELECT number FROM sandboxes WHERE project=? AND number=?", (self.project, n)):
                STATS.op("close")  # removed by a reclaim
                return
            if not self.faults_since(epoch):
                raise Abort("%s: 'sandbox close %d --force' exited %d with no fault: %s" %
                            (self.project, n, r.status, r.said))
        raise Abort("%s: 'sandbox close %d --force' failed %d times: %s" % (self.project, n, RETRIES,
                                                                        r.said))

    def sweep(self):
        """Closes whatever Sandbox of this slot's project is left (a create whose CLI was killed
        leaves one the slot never learnt the number of)."""
        self.number = None
        for (number,) in records("SELECT number FROM sandboxes WHERE project=?", (self.project,)):
            try:
                self.close_dead(number)
            except (Abort, Gone) as e:
                STATS.fail("%s: sweep of sandbox %d: %s" % (self.project, number, e))

    # ---- the checks after the run ---------------------------------------------------
    def verify(self):
        r = self.call("project", "verify")
        if r.status != 0:
            STATS.fail("%s: project verify exited %d: %s" % (self.project, r.status, r.said))
        for b in self.branches:
            if b.uncertain is not None:
                self.resolve(b)
            self.verify_history(b)

    def verify_history(self, b):
        r = self.call("--json", "branch", "log", b.name)
        if r.status != 0:
            return STATS.fail("%s: branch log %s: %s" % (self.project, b.name, r.said))
        log = [c["commit"] for c in reversed(r.json())]
        if not log or log[0] != b.base:
            return STATS.fail("%s: %s's history does not start at its base: %s" % (self.project, b.name, log))
        trees = {}
        i = 0
        for c in log[1:]:
            content = self.export(c, trees)
            # Skipped: attempts that did not land (an uncertain one is resolved by now).
            while i < len(b.attempts) and b.attempts[i][2] is False:
                i += 1
            if i == len(b.attempts):
                return STATS.fail("%s: commit %s on %s holds %r, which no attempt wrote (in order)" %
                                  (self.project, c[:12], b.name, content))
            att = b.attempts[i]
            if att[0] != content or (att[1] is not None and att[1] != c):
                return STATS.fail("%s: commit %s on %s holds %r; the commit %s recorded %r" %
                                  (self.project, c[:12], b.name, content, att[1], att[0]))
            att[2] = "seen"
            i += 1
        missing = [a[1] for a in b.attempts if a[2] is True]
        if missing:
            STATS.fail("%s: commits on %s that were made but are not in its history: %s" %
                       (self.project, b.name, missing))
        if log[-1] != b.head:
            STATS.fail("%s: %s's head is %s, expected %s" % (self.project, b.name, log[-1], b.head))
        with STATS.lock:
            STATS.verified += len(log) - 1

    def export(self, commit, trees):
        with tempfile.TemporaryDirectory(dir=WORK) as d:
            out = os.path.join(d, "x")
            r = self.call("branch", "export", commit, out)
            if r.status != 0:
                raise Abort("%s: export of %s: %s" % (self.project, commit, r.said))
            return manifest(out)


class Faulter(threading.Thread):
    """SIGKILLs daemons, commands and CLI calls of the slots at random, and reclaims."""

    def __init__(self, slots, seed):
        super().__init__(daemon=True)
        self.slots = {s.project: s for s in slots}
        self.rng = random.Random("faulter-%s" % seed)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(self.rng.uniform(0.05, 0.5)):
            kind = self.rng.choices(["daemon", "command", "client", "reclaim"], [2, 3, 3, 1])[0]
            try:
                getattr(self, kind)()
            except Exception as e:
                STATS.fail("faulter (%s): %r" % (kind, e))

    def pick(self, committing=False):
        rows = records("SELECT project, number, pid, start_time, cgroup, instance FROM sandboxes "
                       "WHERE state = 'running'")
        rows = [r for r in rows if r[0] in self.slots]
        busy = [r for r in rows if self.slots[r[0]].committing and self.slots[r[0]].number == r[1]]
        rows = busy if committing and busy else rows
        return self.rng.choice(rows) if rows else None

    def daemon(self):
        """A random daemon; most often one whose slot is committing, so that kills land
        inside commits."""
        row = self.pick(self.rng.randrange(3) > 0)
        if not row:
            return
        project, number, pid, started, _, instance = row
        slot = self.slots[project]
        with slot.lock:  # the slot learns of it only once it has landed
            if self.kill(pid, lambda: start_time(pid) == started, wait=True):
                slot.epoch += 1
                slot.dead.add((number, instance))
                STATS.fault("daemon")

    def command(self):
        row = self.pick()
        if not row or not row[4]:
            return
        project, _, _, _, cg, _ = row
        try:
            leaves = [e for e in os.listdir(cg) if e.startswith("cmd-")]
        except OSError:
            return
        pids = []
        for leaf in leaves:
            try:
                with open(os.path.join(cg, leaf, "cgroup.procs")) as f:
                    pids += [(int(p), leaf) for p in f.read().split()]
            except OSError:
                pass
        if not pids:
            return
        pid, leaf = self.rng.choice(pids)
        slot = self.slots[project]

        def still_there():
            try:
                with open("/proc/%d/cgroup" % pid) as f:
                    return f.read().rstrip().endswith("/" + leaf)
            except OSError:
                return False

        with slot.lock:
            if self.kill(pid, still_there):
                slot.epoch += 1
                STATS.fault("command")

    def client(self):
        slot = self.rng.choice(list(self.slots.values()))
        with slot.lock:
            if slot.client is None:
                return
            try:
                signal.pidfd_send_signal(slot.client, signal.SIGKILL)
            except ProcessLookupError:
                return
            slot.epoch += 1
            STATS.fault("client")

    def reclaim(self):
        r = subprocess.run([LAYERFS, "runtime", "reclaim"], capture_output=True, text=True,
                           timeout=CALL_SECONDS)
        STATS.fault("reclaim")
        if r.returncode != 0:
            STATS.fail("runtime reclaim exited %d: %s" % (r.returncode, r.stderr.strip()))

    @staticmethod
    def kill(pid, check, wait=False):
        """SIGKILLs pid through a pidfd, if check() still holds once the pidfd is open (so a
        reused pid is never signalled); with wait, returns once it has exited."""
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return False
        try:
            if not check():
                return False
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            if wait and not select.select([fd], [], [], CALL_SECONDS)[0]:
                STATS.fail("pid %d outlived SIGKILL for %d s" % (pid, CALL_SECONDS))
            return True
        except ProcessLookupError:
            return False
        finally:
            os.close(fd)


def main():
    sandboxes, workspaces, rounds = (int(a) for a in sys.argv[1:4])
    seed = sys.argv[4]
    began = time.monotonic()
    slots = [Slot(i, workspaces, rounds, seed) for i in range(1, sandboxes + 1)]
    setups = [threading.Thread(target=s.setup) for s in slots]
    for t in setups:
        t.start()
    for t in setups:
        t.join()
    faulter = Faulter(slots, seed)
    threads = [threading.Thread(target=s.run) for s in slots]
    faulter.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    faulter.stop.set()
    faulter.join()
    loaded = time.monotonic() - began
    r = subprocess.run([LAYERFS, "runtime", "reclaim"], capture_output=True, text=True)
    if r.returncode != 0:
        STATS.fail("the last runtime reclaim exited %d: %s" % (r.returncode, r.stderr.strip()))
    for s in slots:
        try:
            s.verify()
        except Exception as e:
            STATS.fail("%s: verify: %r" % (s.project, e))
    ops = sum(v for k, v in STATS.ops.items())
    print("load: %d Sandboxes x %d Workspaces x %d rounds, seed %s" % (sandboxes, workspaces, rounds, seed))
    print("load: %d operations (%s)" % (ops, ", ".join("%s %d" % kv for kv in sorted(STATS.ops.items()))))
    print("load: %d faults injected (%s)" % (sum(STATS.faults.values()),
                                              ", ".join("%s %d" % kv for kv in sorted(STATS.faults.items()))))
    print("load: %s" % ", ".join("%s %d" % kv for kv in sorted(STATS.outcomes.items())))
    print("load: %d commits checked after the run, contents exported" % STATS.verified)
    kills = sum(v for k, v in STATS.faults.items() if k != "reclaim")
    if not kills:
        STATS.fail("the faulter killed nothing: the run tested no fault (make it longer: LOAD_ROUNDS)")
    print("load: %d failures; load %.1f s, with the checks %.1f s" %
          (len(STATS.failures), loaded, time.monotonic() - began))
    for f in STATS.failures:
        print("  failure: " + f)
    sys.exit(1 if STATS.failures else 0)


if __name__ == "__main__":
    main()
