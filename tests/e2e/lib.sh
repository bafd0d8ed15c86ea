# Shared by the end-to-end tests: a private home per test, removed on exit however the
# test ends, and assertions that say what they expected.
# shellcheck shell=bash
set -euo pipefail
set -o errtrace
export LC_ALL=C
# The tests' tools are the Debian packages `make deps` installs: /usr/bin's python3, not a
# version manager's shim that the caller's PATH finds first (pyenv's took 0.7 s of CPU a
# call here, and a test calls python3 dozens of times: test_list.sh 5 s of CPU, 2 without).
export PATH=/usr/bin:$PATH
# A command that fails outside an assertion says where (in the test's file: in lib.sh's
# functions $LINENO is lib.sh's).
trap 'status=$?; [[ $- == *e* ]] && echo "FAIL: $(basename "$0") line $(test_lines): \"$BASH_COMMAND\" exited $status" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
LAYERFS="$BUILD/layerfs"

# Commands get their Sandbox's creator's limits: this shell's. A test's command may hold
# more files open than a login's soft limit (1,024 on many hosts; test_daemon_fds.sh holds
# 1,500), which the hard limit allows.
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true

WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerfs-e2e.XXXXXX")
# Commands run as the command identity (501:20) in Workspaces below the home: it must
# be able to pass through (mktemp makes 0700).
chmod 711 "$WORK"
export LAYERFS_HOME="$WORK/home"
unset LAYERFS_PROJECT
cleanup_work() {
        local pids
        pids=$(jobs -p)
        # A job that ended and was reaped (waited for by pidfd: wait_exit) may still be
        # listed: kill then fails, which must not fail the test that passed.
        [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
        wait 2>/dev/null || true
        chmod -R u+w "$WORK" 2>/dev/null || true
        rm -rf "$WORK"
}
trap cleanup_work EXIT

CHECKS=0
# test_lines: the lines of the test's own file that its caller runs at, innermost first:
# where the test called into lib.sh, and the calls of the test's functions that led there.
test_lines() {
        local i lines=
        for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
                [ "${BASH_SOURCE[i]}" != "$0" ] || lines="${lines:+$lines, called from }${BASH_LINENO[i - 1]}"
        done
        echo "$lines"
}
# fail MESSAGE: ends the test, naming where in the test's file it came from: alike checks
# print alike messages (two 'expect_error Busy' of one Sandbox number in test_runtime.sh).
fail() {
        local lines
        lines=$(test_lines)
        echo "FAIL: $*${lines:+ ($(basename "$0") line $lines)}" >&2
        exit 1
}
ok() {
        CHECKS=$((CHECKS + 1))
}

lfs() {
        "$LAYERFS" "$@"
}

# expect_refusal CODE TEXT command...: the command exits 125 and stderr says
# "CODE: ...TEXT...".
expect_refusal() {
        local code=$1 text=$2 out status
        shift 2
        set +e
        out=$("$@" 2>&1 >/dev/null)
        status=$?
        set -e
        [ "$status" -eq 125 ] || fail "$* exited $status, expected 125 ($code); stderr: $out"
        case "$out" in
        "$code: "*"$text"*) ok ;;
        *) fail "$* said '$out', expected '$code: ...${text:+$text...}'" ;;
        esac
}

# expect_error CODE command...: the command exits 125 and stderr starts with "CODE: ".
expect_error() {
        local code=$1
        shift
        expect_refusal "$code" "" "$@"
}

assert_eq() {
        [ "$1" = "$2" ] || fail "${3:-values differ}: got '$1', expected '$2'"
        ok
}

# pids_matching PATTERN: the pids whose command line matches PATTERN (pgrep -f); nothing
# when none does. pgrep's own failure (127: not installed, 2: a bad pattern) fails the
# test, so that "no daemon is left" comes from a check that ran. Use it in an assignment
# (left=$(pids_matching ...)), where that failure stops the test.
# wait_exit PID [SECONDS]: waits on PID's pidfd until it has exited (a zombie counts),
# at most SECONDS when given; fails if it has not.
wait_exit() {
        python3 -c '
import os, select, sys
try:
    fd = os.pidfd_open(int(sys.argv[1]))
except ProcessLookupError:
    sys.exit(0)
sys.exit(0 if select.select([fd], [], [], float(sys.argv[2]) if len(sys.argv) > 2 else None)[0] else 1)' "$@"
}

# wait_entry created|removed DIR NAME SECONDS: waits (inotify, at most SECONDS) until
# DIR/NAME exists, or is gone; fails if that does not come.
wait_entry() {
        python3 -c '
import ctypes, os, select, sys
created, d, name, bound = sys.argv[1] == "created", sys.argv[2], sys.argv[3], float(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
mask = 0x100 | 0x80 if created else 0x200 | 0x40  # IN_CREATE | IN_MOVED_TO, IN_DELETE | IN_MOVED_FROM
if fd < 0 or libc.inotify_add_watch(fd, d.encode(), mask) < 0:
    sys.exit("inotify on %s: %s" % (d, os.strerror(ctypes.get_errno())))
while os.path.lexists(os.path.join(d, name)) != created:
    if not select.select([fd], [], [], bound)[0]:
        sys.exit("%s was not %s in %s within %g s" % (name, sys.argv[1], d, bound))
    os.read(fd, 65536)
' "$@" || fail "waiting for $2/$3 to be $1"
}
# wait_created DIR NAME [SECONDS]: waits (default 60 s) until DIR/NAME exists.
wait_created() { wait_entry created "$1" "$2" "${3:-60}"; }
# wait_removed DIR NAME [SECONDS]: waits (default 60 s) until DIR/NAME is gone.
wait_removed() { wait_entry removed "$1" "$2" "${3:-60}"; }

pids_matching() {
        local status=0
        pgrep -f -- "$1" || status=$?
        [ "$status" -le 1 ] || fail "pgrep -f '$1' exited $status: is procps installed? ('make deps' installs it)"
}

# same_sparse A B: whether files A and B read alike, reading only where either has data
# (a hole reads as zeros): cmp of two 5 GiB sparse files reads 10 GiB and took 49 s here.
same_sparse() {
        python3 -c '
import os, sys
def extents(fd, size):
    out, off = [], 0
    while off < size:
        try:
            data = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        hole = os.lseek(fd, data, os.SEEK_HOLE)
        out.append((data, hole))
        off = hole
    return out
a, b = (os.open(p, os.O_RDONLY) for p in sys.argv[1:3])
size = os.fstat(a).st_size
if os.fstat(b).st_size != size:
    sys.exit("%s: %d bytes, %s: %d" % (sys.argv[1], size, sys.argv[2], os.fstat(b).st_size))
for start, end in sorted(extents(a, size) + extents(b, size)):
    off = start
    while off < end:
        n = min(end - off, 1 << 20)
        if os.pread(a, n, off) != os.pread(b, n, off):
            sys.exit("%s and %s differ within bytes %d to %d" % (sys.argv[1], sys.argv[2], off, off + n))
        off += n
' "$1" "$2"
}

# json_get 'expression on j' < json: prints a field with python3.
json_get() {
        python3 -c 'import json,sys; j=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}

# A small tree with every kind of entry the Store records, plus ones it skips.
make_sample_tree() {
        local d=$1
        mkdir -p "$d/src/lib" "$d/empty/inner-empty" "$d/docs"
        printf 'int main(void) { return 0; }\n' >"$d/src/main.c"
        printf 'lib\n' >"$d/src/lib/util.c"
        printf '#!/bin/sh\necho hi\n' >"$d/run.sh"
        chmod 755 "$d/run.sh"
        printf 'readme\n' >"$d/README"
        : >"$d/docs/empty-file"
        printf 'name with spaces\n' >"$d/docs/a file with spaces.txt"
        printf 'utf8\n' >"$d/docs/ünïcødé.txt"
        ln -s ../README "$d/docs/link-to-readme"
        ln -s /nonexistent/target "$d/dangling"
        head -c 5000000 /dev/urandom >"$d/big.bin"
        mkfifo "$d/a-fifo"
}

# The tree as the Store should record it: content, kind, executable bit and link targets.
tree_manifest() {
        (cd "$1" && find . -mindepth 1 ! -type p ! -type s -printf '%y %p %l\n' | sort &&
                find . -type f -perm -u+x -printf 'x %p\n' | sort &&
                find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

# ---- skips -------------------------------------------------------------------------------
# A skip is never a pass. skip REASON ends the test with status 77 (the runners count it as
# skipped); skip_part REASON leaves one part out and goes on, and finish then ends with 77
# too. Each reason is printed ("skip: REASON") and, under a runner, added to the file it
# names in LAYERFS_SKIP_LOG, which it checks against tests/allowed_skips when run as root.
SKIP_STATUS=77
SKIPPED_PARTS=0
note_skip() {
        echo "skip: $1"
        [ -z "${LAYERFS_SKIP_LOG:-}" ] || printf '%s\t%s\n' "$(basename "$0")" "$1" >>"$LAYERFS_SKIP_LOG"
}
skip() {
        note_skip "$1"
        exit "$SKIP_STATUS"
}
skip_part() {
        note_skip "$1"
        SKIPPED_PARTS=$((SKIPPED_PARTS + 1))
}

finish() {
        if [ "$SKIPPED_PARTS" -gt 0 ]; then
                echo "skipped in part: $(basename "$0") ($CHECKS checks, $SKIPPED_PARTS parts skipped)"
                exit "$SKIP_STATUS"
        fi
        echo "ok: $(basename "$0") ($CHECKS checks)"
}

# ---- faults at a named step (userspace-lib/base/fault.h) ----------------------------------
# fill_disk FILE: writes FILE until its filesystem is full; fails unless the writer got
# ENOSPC ("No space left on device"), as it would on ext4.
fill_disk() {
        local out status=0
        out=$(dd if=/dev/zero of="$1" bs=1M count=100 2>&1) || status=$?
        [ "$status" -ne 0 ] && grep -q "No space left on device" <<<"$out" ||
                fail "a full disk: dd of $1 said '$out' ($status)"
}
# fault_fifo PATH: makes the named pipe of LAYERFS_FAULT=STEP@PATH, which any user may
# open (a command's child reaches some steps as the command identity).
fault_fifo() {
        rm -f "$1"
        mkfifo -m 666 "$1"
}
# fault_reached PID FIFO [SECONDS]: waits until a process reaches the step (prints "STEP
# PID": who to kill) or PID ends first (exits 1); fails after SECONDS (120).
fault_reached() {
        python3 -c '
import os, select, sys
pid, fifo = int(sys.argv[1]), sys.argv[2]
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 120
fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
try:
    ended = os.pidfd_open(pid)
except ProcessLookupError:
    sys.exit(1)
ready = select.select([fd, ended], [], [], seconds)[0]
if fd in ready:
    line = os.read(fd, 256).decode()
    if line.endswith("\n"):
        print(line, end="")
        sys.exit(0)
if ended in ready:
    sys.exit(1)
sys.exit(2)' "$@" || {
                local status=$?
                [ "$status" -eq 1 ] || fail "no step of $2 reached and $1 still runs after ${3:-120} s"
                return 1
        }
}
# fault_release FIFO: the process waiting at the step goes on.
fault_release() {
        timeout 120 sh -c 'echo go >"$1"' sh "$1" || fail "the process at the step of $1 did not wait for the go-ahead"
}

# kill_at_step FIFO PID: once a process reaches the step that LAYERFS_FAULT=STEP@FIFO
# names while PID (which started the operation) runs, SIGKILLs the process that reached
# it (PID itself, or a daemon working for it), then waits for PID. Exits 0 when the kill
# landed at the step, 1 when PID ended without reaching it.
kill_at_step() {
        local fifo=$1 pid=$2 line status=0
        line=$(fault_reached "$pid" "$fifo") || status=1
        [ "$status" -ne 0 ] || kill -9 "${line##* }"
        wait "$pid" 2>/dev/null || true
        return "$status"
}

# deleted_branch NAME: makes a branch NAME with 100 kB of data of its own, then deletes it:
# the next gc has rows and objects to remove (test_idle_gc.sh, test_mount_unlocked.sh).
deleted_branch() {
        mkdir -p "$WORK/$1"
        head -c 100000 /dev/urandom >"$WORK/$1/data"
        "$LAYERFS" branch create "$1" >/dev/null
        "$LAYERFS" branch commit "$1" --from "$WORK/$1" -m "$1" >/dev/null
        "$LAYERFS" branch delete "$1" >/dev/null
}

# ---- gc racing other work (test_gc_race.sh, test_gc_workspace.sh) ------------------------
# start_gc_loop DONE: runs project gc in the background until $WORK/DONE exists, and
# returns once its first gc ended (so that the work started after it overlaps at least
# one more). gc_loop_end: waits for it, fails if a gc failed; GC_LOOP_COUNT: how many ran.
start_gc_loop() {
        (
                n=0
                while [ ! -e "$WORK/$1" ]; do
                        "$LAYERFS" project gc >/dev/null || exit 1
                        n=$((n + 1))
                        [ "$n" != 1 ] || touch "$WORK/first-gc"
                done
                echo "$n" >"$WORK/gcs"
        ) &
        GC_LOOP_PID=$!
        wait_created "$WORK" first-gc
}
gc_loop_end() {
        wait "$GC_LOOP_PID" || fail "a gc failed while other work ran"
        ok
        GC_LOOP_COUNT=$(cat "$WORK/gcs")
}

# ---- attacks -----------------------------------------------------------------------------
# succeeded WHAT: an attack worked ("a command could WHAT"); the test goes on, so that one
# run names every attack that works, and no_attack_succeeded fails naming them all.
SUCCEEDED=""
succeeded() {
        echo "attack succeeded: a command could $1" >&2
        SUCCEEDED="$SUCCEEDED; $1"
}
no_attack_succeeded() {
        [ -z "$SUCCEEDED" ] || fail "attacks that succeeded:${SUCCEEDED#;}"
        ok
}

# ---- tests that make Sandboxes ----------------------------------------------------------
# use_private_sandboxes: needs root; gives the test a cgroup root of its own
# (LAYERFS_CGROUP_ROOT, also in CGR and CG_MOUNT) so that "nothing left" can be checked
# exactly, and tears every Sandbox, cgroup and mount of the test down on exit, however it
# ends. A test with more to end sets TEARDOWN_EXTRA to a command run first.
use_private_sandboxes() {
        [ "$(id -u)" = 0 ] || skip "needs root (cgroups, FUSE)"
        CG_MOUNT=$(findmnt -n -t cgroup2 -o TARGET /sys/fs/cgroup 2>/dev/null ||
                findmnt -n -t cgroup2 -o TARGET | head -1)
        [ -n "$CG_MOUNT" ] || fail "no cgroup2 mount on this host"
        export LAYERFS_CGROUP_ROOT="$CG_MOUNT/layerfs-test-$$"
        CGR=$LAYERFS_CGROUP_ROOT
        export LAYERFS_AUTHOR="test <test@localhost>"
        trap 'teardown_sandboxes; cleanup_work' EXIT
}

# main_sandbox [OPTIONS]: a new Sandbox (sandbox create OPTIONS) with the branch main
# mounted; its number. in_main N COMMAND...: COMMAND in Sandbox N's Workspace of main.
main_sandbox() {
        local n
        n=$("$LAYERFS" sandbox create "$@")
        "$LAYERFS" workspace mount "$n" main >/dev/null
        echo "$n"
}
in_main() {
        local n=$1
        shift
        "$LAYERFS" workspace exec "$n" main -- "$@"
}

# The runtime a new linux Sandbox gets here: LAYERFS_RUNTIME's, else the default runtime
# status names (namespaces where this host can make them, else native).
new_runtime() {
        "$LAYERFS" --json runtime status | json_get 'j["default"]'
}

# kill_daemon N: SIGKILLs sandbox N's daemon and returns once it is gone: a daemon still
# on its way out is alive to reclaim, which leaves its Sandbox alone (tests that reclaimed
# at once failed under a loaded make check and under the sanitizer).
kill_daemon() {
        local pid
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$1")
        [ -n "$pid" ] || fail "sandbox $1 has no daemon to kill"
        kill -9 "$pid"
        wait_exit "$pid" 30 || fail "sandbox $1's daemon $pid outlived SIGKILL for 30 s"
}

# records [SQL]: SQL's answer from the home's records; with none, how many Sandboxes
# there are (0 before the home has its database).
records() {
        if [ ! -e "$LAYERFS_HOME/home.db" ]; then
                [ -z "${1:-}" ] && echo 0
                return 0
        fi
        # An error is never an answer: it fails the test (in a $(...), the empty answer fails
        # the caller's comparison, and the message says why).
        local out
        out=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "${1:-SELECT count(*) FROM sandboxes}" 2>&1) ||
                fail "the home's records could not be read (${1:-SELECT count(*) FROM sandboxes}): $out"
        [ -z "$out" ] || printf '%s\n' "$out"
}

# host_pids N PID...: the host's pids of the processes that a command of Sandbox N saw as
# PID... (\$\$, \$!): under the namespaces runtime those are pids of the Sandbox's own pid
# namespace, found through NSpid; under native they are the host's already. A PID that no
# process of the Sandbox has now is left out (it has ended).
host_pids() {
        local sb=$1 cg init ns p k want f
        shift
        if [ "$(records "SELECT runtime FROM sandboxes WHERE number=$sb")" != namespaces ]; then
                echo "$@"
                return 0
        fi
        cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")
        init=$(cat "$cg/init/cgroup.procs")
        ns=$(readlink "/proc/$init/ns/pid")
        # Only the Sandbox's own processes (its cgroup tree), not every process of the
        # host: on a busy host a walk of /proc with a readlink each took longer than the
        # timeouts of the tests that call this.
        for p in $(find "$cg" -name cgroup.procs -exec cat {} + | sed 's|^|/proc/|'); do
                [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
                # bash's own read, not a process per pid: the caller may race a timeout.
                k=
                { while read -r -a f; do
                        [ "${f[0]:-}" != NSpid: ] || k=${f[-1]}
                done <"$p/status"; } 2>/dev/null || true
                for want in "$@"; do
                        if [ "$k" = "$want" ]; then echo "${p#/proc/}"; fi
                done
        done
}

# Nothing of any Sandbox is left: no process in our cgroups, no cgroup below the root,
# no mount, no Sandbox directory, no record.
assert_nothing_left() {
        local what=$1 left
        if [ -d "$CGR" ]; then
                left=$(find "$CGR" -mindepth 1 -type d)
                [ -z "$left" ] || fail "$what: cgroups left: $left"
                left=$(cat "$CGR/cgroup.procs")
                [ -z "$left" ] || fail "$what: processes left in the root: $left"
        fi
        left=$(grep -F "$WORK" /proc/mounts || true)
        [ -z "$left" ] || fail "$what: mounts left: $left"
        left=$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null || true)
        [ -z "$left" ] || fail "$what: sandbox directories left: $left"
        assert_eq "$(records)" 0 "$what: records left"
        left=$(pids_matching "layerfs-daemon --home $LAYERFS_HOME")
        [ -z "$left" ] || fail "$what: daemons left: $left"
}

teardown_sandboxes() {
        local n
        [ -n "${TEARDOWN_EXTRA:-}" ] && { eval "$TEARDOWN_EXTRA" || true; }
        for n in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do
                "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1 || true
        done
        "$LAYERFS" runtime reclaim >/dev/null 2>&1 || true
        if [ -d "$CGR" ]; then
                echo 1 >"$CGR/cgroup.kill" 2>/dev/null || true
                # The kill is asynchronous: on a loaded machine 0.2 s was not always enough
                # for the subtree to empty, and its cgroups were left behind (an adversarial
                # run under load 6 left one). Wait for the kernel's word, at most 10 s.
                local i
                for i in $(seq 100); do
                        grep -qx 'populated 0' "$CGR/cgroup.events" 2>/dev/null && break
                        sleep 0.1
                done
                find "$CGR" -depth -type d -exec rmdir {} + 2>/dev/null || true
        fi
        { grep -F "$WORK" /proc/mounts || true; } | awk '{print $2}' | while read -r m; do umount -l "$m" 2>/dev/null || true; done # gone meanwhile: not a failure
        return 0
}

# assert_no_sandbox_left WHAT: nothing of any Sandbox of the test is left: no cgroup below
# its cgroup root, no mount below $WORK, no Sandbox directory, no record.
assert_no_sandbox_left() {
        local left
        left=$(find "$CGR" -mindepth 1 -type d 2>/dev/null)
        [ -z "$left" ] || fail "$1: cgroups left: $left"
        left=$(grep -F "$WORK" /proc/mounts || true)
        [ -z "$left" ] || fail "$1: mounts left: $left"
        left=$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null || true)
        [ -z "$left" ] || fail "$1: sandbox directories left: $left"
        if [ -e "$LAYERFS_HOME/home.db" ]; then
                left=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT count(*) FROM sandboxes")
                [ "$left" = 0 ] || fail "$1: $left records left"
        fi
        ok
}
