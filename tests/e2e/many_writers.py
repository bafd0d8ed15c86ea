#!/usr/bin/env python3
"""Many writers on one project (tests/e2e/test_many_writers.sh runs it).

Writers, one thread each, write files of known contents straight into their mounted
Workspaces and run `layerfs workspace commit`, again and again: one writer per Branch of
its own, and one per Sandbox on the shared Branch, where they touch distinct paths and a
few common ones, so that some commits merge and some conflict. A writer whose commit
conflicts records what the Conflict named, drops its changes (unmount --discard) and
mounts again. A last round makes every shared writer change one common path before any
commits, so that all but one of those commits must conflict, whatever the timing.

Then it checks, from what the writers recorded (SHA-256 of every file written):
- every commit reported successful is in its Branch's history, and nothing else is;
  a Branch of one writer holds exactly its commits, in order;
- each Branch's head holds what the successful commits wrote, the last writer (in the
  Branch's history) of a path winning, and no file that was never committed;
- sampled commits, exported, hold what their commit wrote;
- every Conflict names paths, all of them paths its writer changed that the Branch
  changed since the Workspace's base, and every such path;
- no command's output says SQLITE_BUSY or "database is locked"; every command other than
  a conflicting shared commit succeeded.
Prints one line of figures; exits 1 naming every failure.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--layerfs", required=True)
ap.add_argument("--work", required=True, help="a directory for exports")
ap.add_argument("--sandboxes", type=int, required=True, help="Sandboxes, listed one per line on stdin")
ap.add_argument("--per-sandbox", type=int, required=True, help="Workspaces of own Branches per Sandbox")
ap.add_argument("--rounds", type=int, default=0, help="commits per writer (when no --seconds)")
ap.add_argument("--seconds", type=float, default=0, help="write for this long instead of --rounds")
ap.add_argument("--common", type=int, default=3, help="common paths of the shared Branch")
ap.add_argument("--sample", type=int, default=0, help="commits to export and check (0: all)")
ap.add_argument("--seed", type=int, default=None)
args = ap.parse_args()

LAYERFS = args.layerfs
SHARED = "shared"
# SQLite's own words, and the Store's for SQLITE_BUSY (lfs_db_fail).
BAD_WORDS = ("SQLITE_BUSY", "database is locked", "stayed locked")
seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
failures = []
outputs_seen = [0]
lock = threading.Lock()


def failure(text):
    with lock:
        failures.append(text)


def run(*argv, check=True):
    """A layerfs command: (status, stdout, stderr). Every output is searched for SQLite's
    words; a failure the caller did not expect is recorded."""
    p = subprocess.run([LAYERFS, *argv], capture_output=True, text=True, errors="replace")
    with lock:
        outputs_seen[0] += 1
    for word in BAD_WORDS:
        if word in p.stdout or word in p.stderr:
            failure("'%s' reached a user: layerfs %s: %s%s" % (word, " ".join(argv), p.stdout, p.stderr))
    if check and p.returncode != 0:
        failure("layerfs %s exited %d: %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
    return p.returncode, p.stdout, p.stderr


def head(branch):
    status, out, _ = run("--json", "branch", "log", branch, "--limit", "1")
    return json.loads(out)[0]["commit"] if status == 0 else None


def sha(data):
    return hashlib.sha256(data).hexdigest()


def log(branch):
    _, out, _ = run("--json", "branch", "log", branch)
    return json.loads(out)  # newest first


def export_files(ref, name):
    d = os.path.join(args.work, name)
    shutil.rmtree(d, ignore_errors=True)
    run("branch", "export", ref, d)
    files = {}
    for root, _, names in os.walk(d):
        for n in names:
            full = os.path.join(root, n)
            with open(full, "rb") as f:
                files[os.path.relpath(full, d)] = sha(f.read())
    shutil.rmtree(d)
    return files


class Writer:
    def __init__(self, sandbox, branch, shared, index):
        self.sandbox, self.branch, self.shared, self.index = sandbox, branch, shared, index
        self.rng = random.Random(seed * 1000 + index)
        self.attempts = []  # dicts, in order
        self.iteration = 0
        self.mount()

    def mount(self):
        # The Workspace's base lies between the heads read before and after the mount.
        self.base_lo = head(self.branch)
        _, out, _ = run("workspace", "mount", str(self.sandbox), self.branch)
        self.path = out.strip()
        self.base_hi = head(self.branch)

    def write(self, rel, changes):
        data = ("%s %d %s %s\n" % (self.branch, self.iteration, rel,
                                   self.rng.randbytes(self.rng.randint(16, 1500)).hex())).encode()
        full = os.path.join(self.path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        changes[rel] = sha(data)

    def changes(self):
        """Writes one attempt's files; returns {path: sha256, or None when deleted}."""
        i, changes = self.iteration, {}
        if not self.shared:
            self.write("d%d/f%d.txt" % (i % 3, i), changes)
            self.write("latest.txt", changes)
            if i >= 2 and i % 3 == 0:
                gone = "d%d/f%d.txt" % ((i - 2) % 3, i - 2)
                os.unlink(os.path.join(self.path, gone))
                changes[gone] = None
            return changes
        self.write("w%d/f%d.txt" % (self.sandbox, i), changes)
        self.write("own-%d.txt" % self.sandbox, changes)
        if self.rng.random() < 0.5:
            self.write("common/c%d.txt" % self.rng.randrange(args.common), changes)
        return changes

    def attempt(self, changes=None):
        changes = changes if changes is not None else self.changes()
        before = head(self.branch)
        status, out, err = run("--json", "workspace", "commit", str(self.sandbox), self.branch, "-m",
                               "%s attempt %d" % (self.branch, self.iteration), check=False)
        after = head(self.branch)
        a = {"writer": self.index, "iteration": self.iteration, "changes": changes, "before": before,
             "after": after, "base_lo": self.base_lo, "base_hi": self.base_hi, "status": status}
        self.iteration += 1
        if status == 0:
            j = json.loads(out)
            a.update(result="ok", commit=j["commit"], merged=j["merged"], changed=j["changed"])
            self.base_lo = self.base_hi = j["commit"]
            if not j["changed"]:
                failure("%s: a commit with changes recorded nothing: %s" % (self.branch, out.strip()))
        else:
            try:
                e = json.loads(out or err)["error"]
            except (ValueError, KeyError):
                e = {"code": "?", "message": (out + err).strip()}
            a.update(result=e.get("code"), named=e.get("paths"), message=e.get("message"))
            if self.shared and e.get("code") == "Conflict":
                run("workspace", "unmount", str(self.sandbox), self.branch, "--discard")
                self.mount()
            else:
                failure("%s: workspace commit exited %d: %s" % (self.branch, status, (out + err).strip()))
        self.attempts.append(a)
        return a


def stop_time():
    return time.monotonic() + args.seconds if args.seconds else None


def loop(w, deadline):
    try:
        n = 0
        while (time.monotonic() < deadline) if deadline else (n < args.rounds):
            w.attempt()
            n += 1
    except Exception as e:  # a writer that dies is a failure, not a hang
        failure("writer of %s (sandbox %d) died: %r" % (w.branch, w.sandbox, e))


sandboxes = [int(line) for line in sys.stdin.read().split()]
assert len(sandboxes) == args.sandboxes, sandboxes
started = time.monotonic()
branches = ["b%d-%d" % (sb, k) for sb in sandboxes for k in range(args.per_sandbox)] + [SHARED]
# What each Branch held before the writers: its commits and its files.
start_commits = {b: {c["commit"] for c in log(b)}
                 for b in branches}
start_files = {b: export_files(b, "start") for b in branches}
writers = []
for s_i, sb in enumerate(sandboxes):
    for k in range(args.per_sandbox):
        writers.append(Writer(sb, "b%d-%d" % (sb, k), False, len(writers)))
    writers.append(Writer(sb, SHARED, True, len(writers)))
shared_writers = [w for w in writers if w.shared]

deadline = stop_time()
threads = [threading.Thread(target=loop, args=(w, deadline)) for w in writers]
for t in threads:
    t.start()
for t in threads:
    t.join()

# The last round: every shared writer changes common/c0 before any commits; the first
# commit to land wins, every other one conflicts on it.
final = {}
for w in shared_writers:
    ch = {}
    w.write("common/c0.txt", ch)
    w.write("w%d/last.txt" % w.sandbox, ch)
    final[w.index] = ch
ts = [threading.Thread(target=lambda w=w: final.__setitem__(w.index, w.attempt(final[w.index])))
      for w in shared_writers]
for t in ts:
    t.start()
for t in ts:
    t.join()
results = sorted(a["result"] for a in final.values())
if results != ["Conflict"] * (len(shared_writers) - 1) + ["ok"]:
    failure("last round on %s: expected one commit and %d Conflicts, got %s" %
            (SHARED, len(shared_writers) - 1, results))
write_seconds = time.monotonic() - started

# ---- checks ------------------------------------------------------------------------------


commits = conflicts = merged = 0
checked_commits = []
for branch in sorted({w.branch for w in writers}):
    mine = [a for w in writers if w.branch == branch for a in w.attempts]
    ok = [a for a in mine if a["result"] == "ok"]
    commits += len(ok)
    merged += sum(1 for a in ok if a["merged"])
    history = log(branch)
    ids = [c["commit"] for c in history]
    initial = start_commits[branch]
    listed = set(ids)
    for a in ok:
        if a["commit"] not in listed:
            failure("%s: commit %s (writer %d, attempt %d) reported successful is not in its history"
                    % (branch, a["commit"], a["writer"], a["iteration"]))
    # What the writers' commits made, by the commit a Workspace recorded: every commit
    # that is not a merge's is one attempt's; merges name two parents.
    by_commit = {a["commit"]: a for a in ok}
    if branch != SHARED:
        want = [a["commit"] for a in reversed(ok)]
        got = [c for c in ids if c not in initial]
        if got != want:
            failure("%s: history %s, the writer committed %s (newest first)" % (branch, got, want))
    else:
        # A merge commit's second parent is the Workspace's own commit; the reported
        # commit is the merge. Every other non-initial commit must be a reported one or
        # the Workspace side of a reported merge.
        sides = {c["parents"][1] for c in history if c["commit"] in by_commit and len(c["parents"]) == 2}
        for c in history:
            if c["commit"] not in initial and c["commit"] not in by_commit and c["commit"] not in sides:
                failure("%s: commit %s in the history was reported by no writer" % (branch, c["commit"]))
    # The head: apply every successful attempt's changes in history order (oldest first).
    model = dict(start_files[branch])
    order = {c: i for i, c in enumerate(reversed(ids))}
    for a in sorted(ok, key=lambda a: order.get(a["commit"], -1)):
        for p, h in a["changes"].items():
            if h is None:
                model.pop(p, None)
            else:
                model[p] = h
    got = export_files(branch, "head")
    if got != model:
        missing = sorted(set(model) - set(got))
        extra = sorted(set(got) - set(model))
        differ = sorted(p for p in set(got) & set(model) if got[p] != model[p])
        failure("%s: the head differs from what was committed: missing %s, not committed %s, "
                "other contents %s" % (branch, missing[:10], extra[:10], differ[:10]))
    checked_commits.extend((branch, a) for a in ok)
    # Conflicts: paths named = paths this attempt changed that the Branch changed since
    # the Workspace's base (between what it changed by the head before the commit and by
    # the head after it, as the base lies between two heads too).
    for a in mine:
        if a["result"] != "Conflict":
            continue
        conflicts += 1
        named = a.get("named") or []
        if not named:
            failure("%s: a Conflict named no path: %s" % (branch, a.get("message")))
            continue

        def changed(frm, to):
            if not frm or not to or frm == to:
                return set()
            _, out, _ = run("branch", "diff", frm, to)
            return {line[2:] for line in out.splitlines()}
        mine_paths = set(a["changes"])
        least = mine_paths & changed(a["base_hi"], a["before"])
        most = mine_paths & changed(a["base_lo"], a["after"])
        if not least <= set(named) <= most:
            failure("%s: Conflict of writer %d attempt %d named %s; it must name all of %s and only "
                    "paths among %s (%s)" % (branch, a["writer"], a["iteration"], sorted(named),
                                             sorted(least), sorted(most), a.get("message")))
        if not all(p in (a.get("message") or "") for p in named):
            failure("%s: the Conflict's message does not say its paths %s: %s"
                    % (branch, named, a.get("message")))

# Sampled commits, exported: each holds what its attempt wrote.
rng = random.Random(seed)
sample = checked_commits if not args.sample or args.sample >= len(checked_commits) else \
    rng.sample(checked_commits, args.sample)
for branch, a in sample:
    got = export_files(a["commit"], "commit")
    for p, h in a["changes"].items():
        if got.get(p) != h:
            failure("%s: commit %s (writer %d attempt %d): %s holds %s, was written as %s"
                    % (branch, a["commit"][:12], a["writer"], a["iteration"], p, got.get(p), h))

print("writers=%d commits=%d merged=%d conflicts=%d commits_exported=%d commands=%d failures=%d "
      "write_seconds=%.1f seed=%d" % (len(writers), commits, merged, conflicts, len(sample),
                                     outputs_seen[0], len(failures), write_seconds, seed))
for f in failures[:50]:
    print("FAIL: " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
