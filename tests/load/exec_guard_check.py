"""Checks driver.py's guard on a Workspace's commands (Slot.exec) without a Sandbox: the
argv of each attempt of one exec is taken from a Slot whose first call is killed by a
fault, then each attempt's `sh -c` runs in a TMPDIR of its own, in the orders a killed
CLI allows. What must hold: an attempt left behind that starts after the retry (or after
a later command) does nothing, and the attempt that answers always runs its command."""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("LAYERFS", "layerfs")
os.environ.setdefault("LAYERFS_HOME", "/nonexistent")
os.environ.setdefault("WORK", "/nonexistent")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver  # noqa: E402


class Branch:
    name = "w0"


def attempts_of(slot, script, *args, failed_first=True):
    """The argv of each call of one exec: a first one killed by a fault (when
    failed_first), then one that succeeds."""
    calls = []

    def call(*argv, stdin=None):
        calls.append(list(argv))
        if failed_first and len(calls) == 1:
            slot.epoch += 1  # the faulter's kill of this call
            return driver.Result(137, "", "")
        return driver.Result(0, "", "")
    slot.call = call
    slot.exec(Branch(), script, *args)
    return calls


def run(tmp, argv):
    """An attempt's command as the daemon would run it: `sh -c SCRIPT NAME ARGS...`."""
    command = argv[argv.index("--") + 1:]
    return subprocess.run(command, env=dict(os.environ, TMPDIR=tmp), cwd=tmp).returncode


failures = []
slot = driver.Slot(1, 1, 1, "guard")
with tempfile.TemporaryDirectory() as tmp:
    # Command 1, killed then retried; command 2 after it. Each appends its name to "log".
    first = attempts_of(slot, 'echo "$1" >>log', "one")
    second = attempts_of(slot, 'echo "$1" >>log', "two", failed_first=False)
    if len(first) != 2 or len(second) != 1:
        failures.append("expected 2 attempts then 1, got %d and %d" % (len(first), len(second)))
    else:
        stale, retry = first
        run(tmp, retry)
        run(tmp, stale)  # the killed CLI's request started its command after the retry
        run(tmp, second[0])
        with open(os.path.join(tmp, "log")) as f:
            log = f.read().split()
        if log != ["one", "two"]:
            failures.append("commands ran as %s, expected ['one', 'two']: an attempt left behind "
                            "ran after its retry" % log)
with tempfile.TemporaryDirectory() as tmp:
    # The stale attempt first, then its retry: both run (idempotent), the retry last.
    stale, retry = attempts_of(slot, 'echo "$1" >>log', "three")
    run(tmp, stale)
    run(tmp, retry)
    with open(os.path.join(tmp, "log")) as f:
        log = f.read().split()
    if log[-1:] != ["three"]:
        failures.append("the retry after its stale attempt did not run: %s" % log)
for f in failures:
    print("FAIL: " + f)
print("exec guard: %s" % ("ok" if not failures else "%d failures" % len(failures)))
sys.exit(1 if failures else 0)
