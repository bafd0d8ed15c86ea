#!/usr/bin/env bash
# Attacks of a hostile command on the namespaces runtime itself (issue 15): what a
# command of a namespaces Sandbox (501:20 inside, id_base+501 on the host, the Sandbox's
# init as pid 1) could reach beyond what it was given, each seen to succeed on the code
# before its fix:
#   1. the kernel keyring of whoever ran `sandbox create`: the daemon, and so every
#      command, kept the creator's session keyring, whose keys a possessor reads (and
#      unlinks, revokes) whatever its uid;
#   2. the disk budget (--disk): the view's /tmp and /dev/shm were tmpfs of half the
#      host's memory each, outside the budget, and so were the logs of `process start`;
#   3. the ids of another home: every home's default LAYERFS_ID_RANGE is the same, so a
#      Sandbox of another home got the same host ids, and a command read that Sandbox's
#      TMPDIR through the host's read-only root.
# Each attack must fail; every one that succeeds is named at the end.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
# The second home must be where the view shows the host's tree (not below /tmp, which is
# the Sandbox's own tmpfs): /var/tmp, sticky like /tmp.
HOME2=$(mktemp -d /var/tmp/layerfs-attack.XXXXXX)
chmod 711 "$HOME2"
CGR2=$CG_MOUNT/layerfs-test-$$-home2
lfs2() { LAYERFS_HOME=$HOME2/home LAYERFS_CGROUP_ROOT=$CGR2 "$LAYERFS" "$@"; }
# The second home's Sandboxes end first (its close, then its cgroup root), then its files.
TEARDOWN_EXTRA='for n in $(sqlite3 "$HOME2/home/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do
        lfs2 sandbox close "$n" --force >/dev/null 2>&1; done
lfs2 runtime reclaim >/dev/null 2>&1
[ -d "$CGR2" ] && { echo 1 >"$CGR2/cgroup.kill"; sleep 0.2; find "$CGR2" -depth -type d -exec rmdir {} +; }
grep -F "$HOME2" /proc/mounts | awk "{print \$2}" | while read -r m; do umount -l "$m"; done
rm -rf "$HOME2"'

mkdir -p "$WORK/src"
echo "source" >"$WORK/src/file.txt"
lfs project init p --from "$WORK/src" >/dev/null

# ---- 1. the creator's kernel keyring ----------------------------------------------------
# `sandbox create` runs from a session keyring holding a secret (as a login session's
# would: Kerberos tickets, fscrypt or ecryptfs keys); the command searches its own
# session keyring for it and reads it.
KEYS='
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_add_key, SYS_keyctl = 248, 250
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_READ, KEYCTL_SEARCH = 1, 11, 10
SESSION = ctypes.c_long(-3)
if sys.argv[1] == "create":
    assert libc.syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, b"layerfs-attack") > 0
    secret = b"secret-of-the-creator"
    assert libc.syscall(SYS_add_key, b"user", b"layerfs-attack-secret", secret, len(secret), SESSION) > 0
    os.execv(sys.argv[2], sys.argv[2:])
key = libc.syscall(SYS_keyctl, KEYCTL_SEARCH, SESSION, b"user", b"layerfs-attack-secret", 0)
if key < 0:
    sys.exit("search: " + os.strerror(ctypes.get_errno()))
buf = ctypes.create_string_buffer(256)
n = libc.syscall(SYS_keyctl, KEYCTL_READ, key, buf, 256)
if n < 0:
    sys.exit("read: " + os.strerror(ctypes.get_errno()))
print(buf.raw[:n].decode())'
# On native: there no seccomp filter stands in for the daemon's keyring of its own.
K=$(LAYERFS_RUNTIME=native python3 -c "$KEYS" create "$LAYERFS" sandbox create)
lfs workspace mount "$K" main >/dev/null
if out=$(lfs workspace exec "$K" main -- python3 -c "$KEYS" read 2>&1); then
        [ "$out" = secret-of-the-creator ] || fail "the key read is '$out'"
        succeeded "read a key of the creator's session keyring ($out)"
else
        # No key to find (a keyring of the daemon's own), or no keyring call at all (the
        # namespaces runtime's seccomp filter).
        case "$out" in
        *"search: Required key not available"* | *"search: Operation not permitted"*) ok ;;
        *) fail "keyring: $out" ;;
        esac
fi

# ---- 2. the disk budget -----------------------------------------------------------------
D=$(lfs sandbox create --disk 8M)
lfs workspace mount "$D" main >/dev/null
for place in /tmp /dev/shm; do
        if lfs workspace exec "$D" main -- sh -c "head -c 32M /dev/zero >$place/big" 2>/dev/null; then
                succeeded "write 32 MiB into $place past a disk budget of 8 MiB"
        else
                ok
        fi
done
# A background process's output goes to its log, which is the Sandbox's too.
LOGGER=$(lfs process start "$D" main -- sh -c 'head -c 32M /dev/zero; echo "exit $?" >$TMPDIR/logger.done')
host_logger=$(host_pids "$D" "$LOGGER")
[ -z "$host_logger" ] || wait_exit "$host_logger" 120 || fail "the writer of the log did not end"
log_size=$(stat -c %s "$LAYERFS_HOME/sandboxes/p-$D/processes/cmd-"*.log | sort -n | tail -1)
if [ "$log_size" -ge $((16 << 20)) ]; then
        succeeded "write a log of $log_size bytes past a disk budget of 8 MiB"
else
        ok
fi

# ---- 3. another home's Sandbox ----------------------------------------------------------
# Both homes keep the default LAYERFS_ID_RANGE. The other home's Sandbox exists first
# and keeps a secret in its TMPDIR.
mkdir -p "$HOME2/src"
echo other >"$HOME2/src/file.txt"
lfs2 project init q --from "$HOME2/src" >/dev/null
O=$(lfs2 sandbox create)
lfs2 workspace mount "$O" main >/dev/null
lfs2 workspace exec "$O" main -- sh -c 'echo secret-of-the-other-home >$TMPDIR/secret'
# Every Sandbox of this home tries, whatever its ids.
base_o=$(sqlite3 "$HOME2/home/home.db" "SELECT id_base FROM sandboxes WHERE number=$O")
for n in $K $D; do
        base=$(records "SELECT id_base FROM sandboxes WHERE number=$n")
        if out=$(lfs workspace exec "$n" main -- cat "$HOME2/home/sandboxes/q-$O/tmp/secret" 2>&1); then
                succeeded "read the TMPDIR of another home's Sandbox ($out; host ids from $base and $base_o)"
        else
                ok
        fi
        [ "$base" != "$base_o" ] || succeeded "run as the host ids of another home's Sandbox (from $base)"
done

no_attack_succeeded

for n in $K $D; do lfs sandbox close "$n" --force >/dev/null; done
lfs2 sandbox close "$O" --force >/dev/null
assert_nothing_left "after the attacks"
finish
