#!/usr/bin/env bash
# A Sandbox taken from the pool (LAYERFS_POOL, docs/runtime.md) runs its commands under
# what the create that made it had. Attacks found by a review of the pool's first
# version: a caller under a seccomp filter got a Sandbox pooled under none (its commands
# escaped the filter), and so did one under another I/O priority or CPU policy; a pool
# filled with LD_PRELOAD set handed its daemons (the library preloaded) to creates without
# it. Now a caller under a seccomp filter neither takes nor fills a pool, scheduling is in
# the key, and a daemon keeps only the environment it reads, which the key hashes.
source "$(dirname "$0")/../e2e/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
use_private_sandboxes
lfs project init p >/dev/null

pooled() { records "SELECT number FROM sandboxes WHERE state='pooled' ORDER BY number"; }
fill_done() { flock "$LAYERFS_HOME/pool/fillers.lock" true; } # every fill under way has ended
# not_from_pool WHAT COMMAND...: the create COMMAND runs takes none of the Sandboxes pooled
# before it; prints its number.
not_from_pool() {
        local what=$1 before n
        shift
        before=" $(pooled | tr '\n' ' ') "
        n=$("$@") || fail "$what failed"
        case "$before" in *" $n "*) fail "$what took pooled Sandbox $n, made for another create" ;; esac
        ok
        fill_done
        echo "$n"
}

# A pool for plain creates.
LAYERFS_POOL=2 "$LAYERFS" sandbox create >/dev/null
fill_done
[ "$(pooled | wc -l)" = 2 ] || fail "no pool of 2 after a plain create with LAYERFS_POOL=2"
ok

# Confined or scheduled otherwise: a caller under a seccomp filter (one that allows
# everything: a filter cannot be compared, so none is served) neither takes nor fills;
# one under another I/O priority or CPU policy does not take the default pool's.
seccomp_allow() { # seccomp_allow COMMAND...: COMMAND under a seccomp filter that allows every call
        python3 -c '
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
insn = struct.pack("HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF_RET|BPF_K SECCOMP_RET_ALLOW
buf = ctypes.create_string_buffer(insn)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(1, ctypes.addressof(buf))
if libc.prctl(38, 1, 0, 0, 0) or libc.syscall(317, 1, 0, ctypes.byref(prog)):  # NO_NEW_PRIVS; seccomp(SET_MODE_FILTER)
    sys.exit("seccomp: %s" % os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
before=" $(pooled | tr '\n' ' ') "
not_from_pool "a create under a seccomp filter" env LAYERFS_POOL=2 bash -c "$(declare -f seccomp_allow); seccomp_allow \"\$@\"" sh "$LAYERFS" sandbox create >/dev/null
assert_eq " $(pooled | tr '\n' ' ') " "$before" "pooled Sandboxes after a create under a seccomp filter"
not_from_pool "a create under ionice -c3" env LAYERFS_POOL=1 ionice -c3 "$LAYERFS" sandbox create >/dev/null
not_from_pool "a create under chrt -b 0" env LAYERFS_POOL=1 chrt -b 0 "$LAYERFS" sandbox create >/dev/null

# A pool filled with LD_PRELOAD set serves no create without it, and a daemon has nothing
# of its creator's environment that it does not read. (Alone: the pools above closed.)
for n in $(records "SELECT number FROM sandboxes"); do lfs sandbox close "$n" --force >/dev/null; done
preload=$(find /usr/lib /lib -name 'libz.so.1' -print -quit 2>/dev/null)
[ -n "$preload" ] || fail "no libz.so.1 to preload (zlib is installed with the build's packages)"
# Under the sanitizers ASan's runtime must come first (ldd's output taken whole: pipefail).
asan=$(ldd "$LAYERFS")
asan=$(awk '/libasan/ { print $3 }' <<<"$asan")
preload="${asan:+$asan }$preload"
not_from_pool "a create with LD_PRELOAD" env LD_PRELOAD="$preload" UNREAD_BY_LAYERFS=1 LAYERFS_POOL=1 "$LAYERFS" sandbox create >/dev/null
n=$(not_from_pool "a create without LD_PRELOAD, beside a pool made with it" env LAYERFS_POOL=1 "$LAYERFS" sandbox create)
d=$(records "SELECT pid FROM sandboxes WHERE number=$n")
! tr '\0' '\n' <"/proc/$d/environ" | grep -q '^LD_PRELOAD=' || fail "the daemon of a create without LD_PRELOAD has it"
ok
for d in $(records "SELECT pid FROM sandboxes"); do
        ! tr '\0' '\n' <"/proc/$d/environ" | grep -q '^UNREAD_BY_LAYERFS=' ||
                fail "daemon $d has its creator's UNREAD_BY_LAYERFS"
done
ok

for n in $(records "SELECT number FROM sandboxes"); do lfs sandbox close "$n" --force >/dev/null; done
assert_nothing_left "after the pool's attacks"
finish
