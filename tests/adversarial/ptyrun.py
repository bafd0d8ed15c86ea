# A shell command run on a terminal of its own, for tests that need the caller of
# layerfs to sit at a real terminal (a pty whose slave is the child's controlling
# terminal, as a login shell's is). The test drives it like a person at a keyboard:
# waits for text, types, resizes the window, and reads the terminal's settings.
import errno
import os
import re
import select
import signal
import struct
import termios
import fcntl
import time

BOUND = 120.0  # generous bound for any wait: a failure, never a measurement


class Failure(Exception):
    pass


class Terminal:
    def __init__(self, command, rows=24, cols=80, env=None):
        self.master, self.slave = os.openpty()
        self.name = os.ttyname(self.slave)
        self.resize(rows, cols)
        self.initial = termios.tcgetattr(self.slave)
        self.out = b""
        self.seen = 0  # expect() looks after what it matched last
        self.status = None
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(self.slave, fd)
                os.closerange(3, 65536)
                # A user's terminal: signals as a login shell has them, whatever this test
                # inherited (run under nohup, SIGHUP is ignored, and an ignored signal
                # stays ignored across exec).
                for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, set())
                os.execve("/bin/bash", ["bash", "-c", command], env or os.environ)
            finally:
                os._exit(127)
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)

    def resize(self, rows, cols):
        """The window changes size: the kernel tells the terminal's foreground group."""
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        os.write(self.master, data)

    def settings(self):
        return termios.tcgetattr(self.slave)

    def raw(self):
        lflag = self.settings()[3]
        return not (lflag & termios.ICANON) and not (lflag & termios.ECHO)

    def _read(self, timeout):
        """Reads what the terminal shows; False when nothing came (the shell ended, or
        the timeout passed)."""
        r, _, _ = select.select([self.master, self.pidfd], [], [], timeout)
        if self.master not in r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError as e:
            if e.errno == errno.EIO:
                return False
            raise
        self.out += data
        return True

    def expect(self, pattern):
        """Waits until the terminal shows pattern (a regex on bytes); returns the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + BOUND
        while True:
            m = rx.search(self.out, self.seen)
            if m:
                self.seen = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0 or (not self._read(left) and self.exited()):
                raise Failure("the terminal never showed %r; it shows:\n%s" % (pattern, self.shown()))

    def exited(self):
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is not None

    def wait(self):
        """Waits for the shell to end (reading what it prints); returns its exit code."""
        deadline = time.monotonic() + BOUND
        while not self.exited():
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("the shell did not end; the terminal shows:\n%s" % self.shown())
            self._read(left)
        while self._read(0):
            pass
        return os.waitstatus_to_exitcode(self.status)

    def shown(self):
        return self.out.decode(errors="replace")

    def close(self):
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        os.close(self.master)
        os.close(self.slave)


def wait_gone(pid):
    """Waits (on a pidfd) until a process that is not ours has ended; False at the bound."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        r, _, _ = select.select([fd], [], [], BOUND)
        return bool(r)
    finally:
        os.close(fd)


# No process has this pid (above Linux's PID_MAX_LIMIT): what host_pid gives for one that
# has ended. Never -1 or 0, which kill() would take as "every process" or "the group".
NO_PID = 4 * 1024 * 1024 + 1


def host_pid(pid):
    """The host's pid of a process that a command saw as pid: itself under native; under
    LAYERFS_RUNTIME=namespaces a pid of the Sandbox's own pid namespace (the last field of
    NSpid), looked for among the processes of this test's cgroups. NO_PID if none has it."""
    if os.environ.get("LAYERFS_RUNTIME") != "namespaces":
        return pid
    root = os.path.basename(os.environ.get("LAYERFS_CGROUP_ROOT", "")) + "/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % entry) as f:
                if root not in f.read():
                    continue
            with open("/proc/%s/status" % entry) as f:
                nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")]
        except OSError:
            continue
        if nspid and len(nspid[0]) > 1 and int(nspid[0][-1]) == pid:
            return int(entry)
    return NO_PID


def fd_targets(pid):
    """What each open fd of pid points at, {fd: target}; {} if it has ended."""
    out = {}
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
    except OSError:
        pass
    return out
