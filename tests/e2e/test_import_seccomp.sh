#!/usr/bin/env bash
# Commands where a seccomp filter refuses openat2 EPERM (a container runtime's profile
# older than the call: Docker's default one answered calls it did not list EPERM until
# it answered them ENOSYS).
# The home's directories, and each directory and file of an imported tree, are opened
# beneath their parent with openat2 (docs/security.md, "Trees of another user");
# lfs_open_beneath fell back to a walk of one component at a time only on ENOSYS, so
# every command failed ("cannot open HOME/projects: Operation not permitted"), and so
# did every import. Now EPERM takes the same walk (no symlink, no ".."): the import
# records what it records without the filter, and a directory swapped for a symlink is
# still refused. io_uring is left out (LAYERFS_NO_URING=1), as where such a profile runs
# it refuses io_uring_setup too: the plain calls are the ones filtered.
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/tree/sub/deeper"
echo top >"$WORK/tree/top"
echo sub >"$WORK/tree/sub/file"
head -c $((200 << 10)) /dev/urandom >"$WORK/tree/sub/deeper/large" # read alone, not batched
ln -s ../top "$WORK/tree/sub/link"

# seccomp_eperm CALL_NR command...: runs the command with CALL_NR answered EPERM.
seccomp_eperm() {
        python3 - "$@" <<'EOF'
import ctypes, os, struct, sys

nr = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
# seccomp_data.nr at offset 0: that call EPERM (SECCOMP_RET_ERRNO | 1), every other allowed.
prog = [(0x20, 0, 0, 0), (0x15, 0, 1, nr), (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]
code = b"".join(struct.pack("HBBI", *i) for i in prog)
buf = ctypes.create_string_buffer(code)
fprog = struct.pack("HxxxxxxP", len(prog), ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) != 0:
    sys.exit("cannot install the seccomp filter: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[2], sys.argv[2:])
EOF
}
OPENAT2=437 # the same number on every architecture (the generic table's)

# The filter holds: openat2 is refused EPERM under it.
out=$(seccomp_eperm $OPENAT2 python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(0, 0, 0)
r = libc.syscall(437, -100, b".", ctypes.byref(how), 24)
print(os.strerror(ctypes.get_errno()) if r < 0 else "opened")')
assert_eq "$out" "$(python3 -c 'import os, errno; print(os.strerror(errno.EPERM))')" "openat2 under the filter"
ok

lfs project init plain --from "$WORK/tree" >/dev/null
status=0
LAYERFS_NO_URING=1 seccomp_eperm $OPENAT2 "$LAYERFS" project init filtered --from "$WORK/tree" \
        >/dev/null 2>"$WORK/init.err" || status=$?
assert_eq "$status" 0 "the exit status of the import with openat2 refused EPERM ($(cat "$WORK/init.err"))"
ok
tree_of() { lfs --project "$1" branch log main --limit 1 --json | json_get 'j[0]["tree"]'; }
assert_eq "$(tree_of filtered)" "$(tree_of plain)" "the tree recorded with openat2 refused"
ok

# Still beneath the tree under the filter: a listed directory swapped for a symlink to a
# private directory between its listing and its files' reads (held at step object-write,
# as tests/adversarial/test_import_swaps.sh does) is refused, not followed.
mkdir -m 700 "$WORK/private"
head -c 631 /dev/urandom >"$WORK/private/secret"
mkdir -p "$WORK/tree2/a"
head -c 631 /dev/zero >"$WORK/tree2/a/secret"
ln -s "target-$RANDOM" "$WORK/tree2/a/zlink"
FIFO=$WORK/step.fifo
fault_fifo "$FIFO"
LAYERFS_NO_URING=1 LAYERFS_FAULT="object-write#1@$FIFO" seccomp_eperm $OPENAT2 \
        "$LAYERFS" project init swapped --from "$WORK/tree2" >/dev/null 2>"$WORK/swap.err" &
importer=$!
fault_reached "$importer" "$FIFO" >/dev/null || fail "the import ended before the step: $(cat "$WORK/swap.err")"
mv "$WORK/tree2/a" "$WORK/tree2/a.real"
ln -s "$WORK/private" "$WORK/tree2/a"
fault_release "$FIFO"
status=0
wait "$importer" || status=$?
assert_eq "$status" 125 "the exit status of the swapped import under the filter ($(cat "$WORK/swap.err"))"
case "$(cat "$WORK/swap.err")" in
"InvalidInput: "*"changed or vanished while it was being read"*) ok ;;
*) fail "the swapped import under the filter said '$(cat "$WORK/swap.err")', expected InvalidInput" ;;
esac

finish
