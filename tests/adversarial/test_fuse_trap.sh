#!/usr/bin/env bash
# Attack: a command serves a FUSE mount in a user and mount namespace of its own
# (unshare -Urm, /dev/fuse 0666 as udev makes it) and never answers (issue 12, item 3).
# A process blocked on that mount after its request was read sleeps uninterruptibly
# through cgroup.kill, and since it holds the connection's descriptor itself nothing
# ends it: close took 20 s, exited 125 saying "its record stays so that reclaim can try
# again" while the record was already gone, and the cgroup, the process and the
# directory stayed; reclaim found nothing.
# The same trap in a command that times out (--timeout) left its process in the
# command's leaf.
# Fixed by: processes still there a second after cgroup.kill are released from the
# FUSE connections of the Sandbox's own: those whose /dev/fuse they hold (fdinfo names
# the connection) and those mounted in their own mount namespaces, aborted through
# /sys/fs/fuse/connections/N/abort; a record is deleted only after its teardown
# finished.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
# The trap needs a user namespace. Where not even root can make one (a chroot, as in make
# fresh-check's root: the kernel refuses CLONE_NEWUSER to a chrooted process; or user
# namespaces switched off), no command can set this trap: the attack is not possible.
if ! why=$(unshare -Ur true 2>&1); then
        skip "this system makes no user namespace, which the trap needs ($why)"
fi
# A namespaces Sandbox's /dev has no fuse node, in its own user namespaces or not: its
# commands cannot serve FUSE at all, so the trap cannot be set.
if [ "$(new_runtime)" = namespaces ]; then
        lfs project init trap --from "$(mktemp -d "$WORK/src.XXXXXX")" >/dev/null
        SB=$(lfs sandbox create)
        lfs workspace mount "$SB" main >/dev/null
        if lfs workspace exec "$SB" main -- sh -c 'exec 3<>/dev/fuse' 2>/dev/null; then
                fail "a namespaces Sandbox's command opened /dev/fuse"
        fi
        ok
        if lfs workspace exec "$SB" main -- unshare -Urm sh -c 'exec 3<>/dev/fuse' 2>/dev/null; then
                fail "a namespaces Sandbox's command opened /dev/fuse in a user namespace of its own"
        fi
        ok
        lfs workspace unmount "$SB" main >/dev/null
        lfs sandbox close "$SB" >/dev/null
        assert_nothing_left "the namespaces Sandbox"
        finish
        exit 0
fi
fuse_mode=$(stat -c %a /dev/fuse)
# If the trap outlives the test (the code before the fix), abort its connection so
# that nothing stays in D state: only connections whose /dev/fuse a process left in this
# test's cgroups holds (fdinfo names the connection).
release_traps() {
        local pids conns
        pids=$(find "$CGR" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
        [ -n "$pids" ] || return 0
        conns=$(for p in $pids; do cat /proc/"$p"/fdinfo/* 2>/dev/null; done | awk '/^fuse_connection:/ {print $2}' | sort -u)
        [ -n "$conns" ] || return 0
        # shellcheck disable=SC2016,SC2086
        unshare -m sh -c 'mount -t fusectl fusectl /sys/fs/fuse/connections &&
                for c in "$@"; do echo 1 > /sys/fs/fuse/connections/$c/abort; done' sh $conns || true
}
TEARDOWN_EXTRA="chmod $fuse_mode /dev/fuse; release_traps"
chmod 666 /dev/fuse
cp "$(dirname "$0")/fuse_trap.py" "$WORK/fuse_trap.py"
chmod 644 "$WORK/fuse_trap.py"
mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# set_trap SB: the trap runs in the Sandbox; returns once a process is stuck on it.
set_trap() {
        lfs workspace exec "$1" main -- sh -c '
                mkdir -p $TMPDIR/m
                unshare -Urm /usr/bin/python3 '"$WORK"'/fuse_trap.py $TMPDIR/m $TMPDIR/ready >$TMPDIR/trap.log 2>&1 &
                for i in $(seq 600); do [ -e $TMPDIR/ready ] && exit 0; sleep 0.05; done
                cat $TMPDIR/trap.log; exit 1' || fail "the trap was not set: exit $?"
        ok
}

# The trap in a command that times out: its leaf is ended like the Sandbox's cgroup.
SB=$(lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
set +e
lfs workspace exec "$SB" main --timeout 3 -- sh -c '
        mkdir -p $TMPDIR/m
        exec unshare -Urm /usr/bin/python3 '"$WORK"'/fuse_trap.py $TMPDIR/m $TMPDIR/ready' >/dev/null 2>&1
status=$?
set -e
assert_eq "$status" 124 "a command with a FUSE trap that times out"
left=$(find "$CGR" -path '*/cmd-*' -name cgroup.procs -exec cat {} + 2>/dev/null)
[ -z "$left" ] || fail "processes of the timed-out command stay: $left"
ok
lfs sandbox close "$SB" --force >/dev/null
assert_no_sandbox_left "close after a timed-out FUSE trap"

for how in close reclaim; do
        SB=$(lfs sandbox create)
        lfs workspace mount "$SB" main >/dev/null
        set_trap "$SB"
        if [ "$how" = close ]; then
                set +e
                out=$(lfs sandbox close "$SB" --force 2>&1)
                status=$?
                set -e
                assert_eq "$status:$out" "0:closed sandbox $SB" "close of a Sandbox with a FUSE trap"
        else
                kill_daemon "$SB"
                out=$(lfs runtime reclaim 2>&1)
                case "$out" in "reclaimed sandbox $SB of p"*) ok ;; *) fail "reclaim of a Sandbox with a FUSE trap said: $out" ;; esac
        fi
        assert_no_sandbox_left "$how with a FUSE trap"
done
finish
