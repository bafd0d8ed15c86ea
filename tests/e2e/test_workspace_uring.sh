#!/usr/bin/env bash
# test-runner: alone (it turns the whole host's FUSE io_uring switch, enable_uring, off and on)
# FUSE over io_uring (fuse/fuse_uring.c): which loop a Workspace gets from
# LAYERFS_FUSE_TRANSPORT and LAYERFS_FUSE_URING, the refusals, the fallback to the dev
# loop, the daemon setting the kernel's switch only when told to (and saying so), the
# rings carrying the requests (passthrough still on), and the rings' threads ending with
# the connection: on unmount, on an abort of the connection, and with a killed daemon
# (reclaim leaves nothing, the branch's data intact).
# The switch (/sys/module/fuse/parameters/enable_uring) is the whole host's: the test
# gives it back as it found it, however it ends.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
SWITCH=/sys/module/fuse/parameters/enable_uring
[ -e "$SWITCH" ] || skip "the kernel has no FUSE over io_uring (CONFIG_FUSE_IO_URING, Linux 6.14)"
[ "$("$LAYERFS" --json runtime status | json_get 'j["kernel"]["kernel:io_uring"]')" = True ] ||
        skip "io_uring is off on this host"
WAS=$(cat "$SWITCH")
trap 'teardown_sandboxes; umount -l "$WORK/small" 2>/dev/null || true; cleanup_work; echo "$WAS" >'"$SWITCH" EXIT
set_switch() { echo "$1" >"$SWITCH"; }
export LAYERFS_PROJECT=ur LAYERFS_FUSE_DEBUG=1 LC_ALL=C
unset LAYERFS_FUSE_TRANSPORT LAYERFS_FUSE_URING LAYERFS_FUSE_PASSTHROUGH
mkdir "$WORK/src"
echo base >"$WORK/src/kept"
lfs project init ur --from "$WORK/src" >/dev/null

# ring_threads N: how many ring threads Sandbox N's daemon has.
ring_threads() {
        local pid
        pid=$(records "SELECT pid FROM sandboxes WHERE number=$1")
        cat /proc/"$pid"/task/*/comm 2>/dev/null | grep -c '^fuse-ring' || true
}
# transport N: the loop list_workspaces says serves Sandbox N's first Workspace.
transport() {
        lfs --json sandbox list_workspaces "$1" | json_get 'j[0]["transport"]'
}

# Refusals, before anything is made, whatever the switch says.
set_switch N
LAYERFS_FUSE_URING=yes expect_error InvalidInput lfs sandbox create
LAYERFS_FUSE_TRANSPORT=libfuse LAYERFS_FUSE_URING=on expect_error InvalidInput lfs sandbox create
LAYERFS_FUSE_TRANSPORT=uring LAYERFS_FUSE_URING=off expect_error InvalidInput lfs sandbox create
# The transport named uring with the switch off: Unsupported, naming the switch and the fixes.
LAYERFS_FUSE_TRANSPORT=uring expect_refusal Unsupported \
        "off on this host ($SWITCH is N); turn it on with 'echo 1 > $SWITCH', or let the daemon do it with LAYERFS_FUSE_URING=on" \
        lfs sandbox create
assert_eq "$(records)" 0 "Sandboxes made by the refusals"
assert_eq "$(LAYERFS_FUSE_URING=auto lfs --json runtime status | json_get 'j["fuse"]["transport"]')" dev \
        "runtime status with auto and the switch off"
ok

# auto with the switch off: the dev loop, said in the log; the switch stays off.
n=$(LAYERFS_FUSE_URING=auto lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
assert_eq "$(cat "$SWITCH")" N "the switch after a mount with auto"
assert_eq "$(transport "$n")" dev "list_workspaces with auto and the switch off"
grep -q "falling back to the dev loop" <<<"$(lfs sandbox log "$n")" || fail "the fallback is not in the log"
grep -q "mounted main at $ws (FUSE loop: dev," <<<"$(lfs sandbox log "$n")" ||
        fail "auto's mount: $(lfs sandbox log "$n" | grep mounted)"
assert_eq "$(in_main "$n" cat kept)" base "a read over the dev loop"
assert_eq "$(ring_threads "$n")" 0 "ring threads left after the fallback"
lfs sandbox close "$n" --force >/dev/null
ok

# on: the daemon turns the switch on, says so, and serves over the rings.
n=$(LAYERFS_FUSE_URING=on lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
assert_eq "$(cat "$SWITCH")" Y "the switch after a mount with on"
grep -q "LAYERFS_FUSE_URING=on: turned FUSE over io_uring on for the whole host" <<<"$(lfs sandbox log "$n")" ||
        fail "the daemon set the switch without saying so"
grep -q "mounted main at $ws (FUSE loop: uring," <<<"$(lfs sandbox log "$n")" ||
        fail "on's mount: $(lfs sandbox log "$n" | grep mounted)"
assert_eq "$(transport "$n")" uring "list_workspaces of a ring mount"
assert_eq "$(LAYERFS_FUSE_URING=auto lfs --json runtime status | json_get 'j["fuse"]["transport"]')" uring \
        "runtime status with auto and the switch on"
cpus=$(($(sed 's/.*[-,]//' /sys/devices/system/cpu/possible) + 1))
assert_eq "$(ring_threads "$n")" "$cpus" "ring threads (one per possible CPU)"
in_main "$n" sh -c 'mkdir -p d/e && echo one >d/e/f && cat kept >>d/e/f && ls -l d/e >/dev/null'
assert_eq "$(in_main "$n" cat d/e/f | tr '\n' ' ')" "one base " "a file written and read over the rings"
log=$(lfs sandbox log "$n")
grep -q "fuse: LOOKUP .* on ring " <<<"$log" || fail "no LOOKUP came over a ring"
grep -q "fuse: MKDIR .* on ring " <<<"$log" || fail "no MKDIR came over a ring"
if grep -q "fuse: \(LOOKUP\|MKDIR\|CREATE\|GETATTR\) .* on /dev/fuse" <<<"$(sed -n '/mounted main/,$p' <<<"$log")"; then
        fail "requests came over /dev/fuse once the rings were up: $(grep 'on /dev/fuse' <<<"$log" | tail -3)"
fi
assert_eq "$(lfs workspace status "$n" main)" "A d/e/f" "status after ring writes"
lfs workspace commit "$n" main -m rings >/dev/null
ok

# Passthrough still goes through the backing-open path: 1 MiB written and read with no
# WRITE or READ on any path.
if grep -q "passthrough: on" <<<"$(lfs sandbox log "$n" | grep mounted)"; then
        before=$(lfs sandbox log "$n" | grep -c "fuse: \(WRITE\|READ\) " || true)
        in_main "$n" dd if=/dev/urandom of=big bs=64K count=16 status=none
        in_main "$n" sha256sum big >"$WORK/big.sum"
        echo 3 >/proc/sys/vm/drop_caches
        assert_eq "$(in_main "$n" sha256sum big)" "$(cat "$WORK/big.sum")" "big read back"
        assert_eq "$(lfs sandbox log "$n" | grep -c "fuse: \(WRITE\|READ\) " || true)" "$before" \
                "WRITE and READ requests for a passed-through file"
        ok
else
        skip_part "the kernel does not pass through: passthrough over the rings not checked"
fi

# Unmount: the rings' threads end with the connection.
lfs workspace unmount "$n" main --discard >/dev/null
assert_eq "$(ring_threads "$n")" 0 "ring threads after the unmount"
# An abort of the connection ends them too; the daemon answers, and a new mount reads
# the last commit.
ws=$(lfs workspace mount "$n" main)
assert_eq "$(ring_threads "$n")" "$cpus" "ring threads of the new mount"
conn=$(stat -c %d "$ws")
conn=$((conn & 0xff | (conn >> 12 & ~0xff)))
# shellcheck disable=SC2016
unshare -m sh -c 'mount -t fusectl fusectl /sys/fs/fuse/connections && echo 1 >/sys/fs/fuse/connections/$1/abort' sh "$conn" ||
        fail "cannot abort FUSE connection $conn of $ws"
timeout 60 "$LAYERFS" workspace unmount "$n" main --discard >/dev/null 2>&1
[ "$?" != 124 ] || fail "unmount --discard did not answer within 60 s after the abort"
assert_eq "$(ring_threads "$n")" 0 "ring threads after the abort"
grep -q " $ws " /proc/mounts && fail "$ws is still mounted after the abort and unmount"
ws=$(lfs workspace mount "$n" main)
assert_eq "$(in_main "$n" cat d/e/f | tr '\n' ' ')" "one base " "the last commit after the abort"
ok

# A killed daemon: its rings go with it, reclaim leaves nothing, and a new Sandbox
# reads the branch intact.
in_main "$n" sh -c 'echo lost >lost'
kill_daemon "$n"
lfs runtime reclaim >/dev/null
grep -q " $ws " /proc/mounts && fail "$ws is still mounted after the daemon's kill and reclaim"
assert_eq "$(records)" 0 "records after reclaim"
n=$(LAYERFS_FUSE_TRANSPORT=uring lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
assert_eq "$(transport "$n")" uring "the transport named uring with the switch on"
assert_eq "$(in_main "$n" cat d/e/f | tr '\n' ' ')" "one base " "the branch after the daemon's kill"
in_main "$n" test ! -e lost || fail "an uncommitted file survived the daemon's kill"
lfs sandbox close "$n" --force >/dev/null
assert_no_sandbox_left "after the last close"
ok

# A disk that fills, over the rings: as on ext4, the space of a file closed and removed
# is free for the next write. The kernel sends the FORGET of its inode on /dev/fuse after
# the rm returned, while the rings serve the next open at once: here that FORGET waits
# at the step ws-forget until the next write-open says (in the log) that it waits for it.
mkdir "$WORK/small"
mount -t tmpfs -o size=48m layerfs-test "$WORK/small"
export LAYERFS_HOME="$WORK/small/home" LAYERFS_PROJECT=full
lfs project init full >/dev/null
fault_fifo "$WORK/forget"
k=$(LAYERFS_FAULT="ws-forget#1@$WORK/forget" LAYERFS_FUSE_TRANSPORT=uring lfs sandbox create)
ws=$(lfs workspace mount "$k" main)
assert_eq "$(transport "$k")" uring "the transport of the full disk's Workspace"
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$k")
fill_disk "$ws/big"
rm "$ws/big"
fault_reached "$daemon" "$WORK/forget" 30 >/dev/null || fail "the daemon $daemon ended before the FORGET of big"
# One process (Python's start is slower than the wait) starts the writer, waits until the
# log names its wait or it ends (without waiting: ENOSPC), then lets the FORGET go on.
python3 -c '
import ctypes, os, select, subprocess, sys
log, fifo, target, text = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init1(os.O_CLOEXEC)
if watch < 0 or libc.inotify_add_watch(watch, log.encode(), 0x2) < 0:  # IN_MODIFY
    sys.exit("inotify on %s: %s" % (log, os.strerror(ctypes.get_errno())))
writer = subprocess.Popen(["sh", "-c", "echo fits >\"$1\"", "sh", target], stderr=subprocess.PIPE)
ended = os.pidfd_open(writer.pid)
while text not in open(log, errors="replace").read():
    ready = select.select([watch, ended], [], [], 60)[0]
    if not ready or ended in ready:
        break
    os.read(watch, 65536)
with open(fifo, "w") as go:
    go.write("go\n")
err = writer.communicate()[1].decode()
sys.exit(0 if writer.returncode == 0 else "the writer: " + err.strip())
' "$LAYERFS_HOME/sandboxes/full-$k/daemon.log" "$WORK/forget" "$ws/after" "for the space of 1 removed file" ||
        fail "no space right after rm, with the FORGET of the removed file late; the log: $(tail -3 "$LAYERFS_HOME/sandboxes/full-$k/daemon.log")"
assert_eq "$(cat "$ws/after")" "fits" "writes work again after space is freed"
grep -q "for the space of 1 removed file" "$LAYERFS_HOME/sandboxes/full-$k/daemon.log" ||
        fail "the write-open did not wait for the FORGET: $(tail -3 "$LAYERFS_HOME/sandboxes/full-$k/daemon.log")"
ok
lfs sandbox close "$k" --force >/dev/null
umount "$WORK/small"
finish
