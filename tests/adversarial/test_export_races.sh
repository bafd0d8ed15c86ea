#!/usr/bin/env bash
# Attacks on root's `branch export BRANCH DIR` by another local user who may change DIR's
# parents or open them:
# 1. The export builds its tree in a directory beside DIR (made through the parent it
#    opened at the start), then renamed it to DIR *by name*: the owner of a directory on
#    DIR's path swapped it for a symlink to a directory of root's meanwhile, and root's
#    export landed there (a new directory of the attacker's choosing, e.g. /root/.ssh
#    with the branch's authorized_keys). Fixed by: the rename is made within the parent
#    opened at the start (renameat(parent, tmp, parent, base)).
# 2. A directory's flock is taken by whoever can open it: the export took its parent's
#    (shared, to make its temporary directory; exclusive, to sweep a killed export's), so
#    any user who could read the parent (/tmp, a shared directory) held every export into
#    it for ever with `flock /tmp sleep infinity`. Fixed by: an export's parent is not
#    locked (lfs_leftover_make_shared, lfs_leftovers_remove_shared): each temporary
#    directory's own lock tells a live export's from a dead one's.
# 3. An export that failed removed its temporary directory by name: the owner of DIR's
#    parent had moved it away and put another directory of root's at its name (an earlier
#    export into the same parent: they may rename it there, not change it), then made
#    the export fail (DIR filled), and root emptied and removed that directory. Fixed by:
#    the temporary directory is emptied through the descriptor the export holds, then
#    removed by name, which removes at most an empty directory (lfs_leftover_remove_held).
# The swap lands every round: the export is held at step export-batch (docs/testing.md).
source "$(dirname "$0")/../e2e/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (the export runs as root, DIR's parents are another user's)"
ATTACKER=65534
as_attacker() { setpriv --reuid=$ATTACKER --regid=$ATTACKER --clear-groups "$@"; }
mkdir "$WORK/src"
for i in $(seq 100); do echo "$i" >"$WORK/src/f$i"; done
echo "ssh-ed25519 AAAA attacker" >"$WORK/src/authorized_keys"
lfs project init p --from "$WORK/src" >/dev/null

# 1. DIR's parent swapped for a symlink to root's directory while the export runs.
mkdir -m 755 "$WORK/user" "$WORK/rootonly"
chown "$ATTACKER:$ATTACKER" "$WORK/user"
as_attacker mkdir "$WORK/user/sub"
FIFO=$WORK/step.fifo
fault_fifo "$FIFO"
LAYERFS_FAULT="export-batch#1@$FIFO" timeout 60 "$LAYERFS" branch export main "$WORK/user/sub/out" \
        >/dev/null 2>"$WORK/export.err" &
exporter=$!
fault_reached "$exporter" "$FIFO" >/dev/null || fail "the export ended before the step: $(cat "$WORK/export.err")"
as_attacker sh -c "mv '$WORK/user/sub' '$WORK/user/sub.moved' && ln -s '$WORK/rootonly' '$WORK/user/sub'" ||
        fail "the attacker's swap failed"
fault_release "$FIFO"
status=0
wait "$exporter" || status=$?
[ ! -e "$WORK/rootonly/out" ] || fail "root's export was moved through the swapped parent into $WORK/rootonly/out"
ok
assert_eq "$status" 0 "the exit status of the export whose parent was swapped ($(cat "$WORK/export.err"))"
cmp "$WORK/src/f100" "$WORK/user/sub.moved/out/f100" || fail "the export is not in the parent it opened"
ok

# 2. Another user holds the flock of DIR's parent (readable by all, as /tmp is).
mkdir -m 755 "$WORK/pub"
# One process of the attacker's, which holds the lock until the test ends (cleanup_work
# kills the test's jobs: setpriv itself, not a function's subshell, so that the job is the
# process that holds it) and says when it holds it.
mkfifo "$WORK/held"
setpriv --reuid=$ATTACKER --regid=$ATTACKER --clear-groups python3 -c '
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
signal.pause()' "$WORK/pub" >"$WORK/held" &
read -r held <"$WORK/held"
assert_eq "$held" held "the attacker's lock"
flock -n "$WORK/pub" true && fail "the attacker does not hold the lock: no attack"
ok
status=0
timeout 60 "$LAYERFS" branch export main "$WORK/pub/out" >/dev/null 2>"$WORK/export.err" || status=$?
[ "$status" != 124 ] || fail "the export into a directory another user flocked still waited after 60 s"
assert_eq "$status" 0 "the exit status of the export beside another user's flock ($(cat "$WORK/export.err"))"
cmp "$WORK/src/f1" "$WORK/pub/out/f1" || fail "the export beside another user's flock differs"
ok
# A killed export's directory is still swept there: one of root's, named as an export's,
# its lock free.
mkdir "$WORK/pub/.again.layerfs-export-999999"
lfs branch export main "$WORK/pub/again" >/dev/null
[ ! -e "$WORK/pub/.again.layerfs-export-999999" ] || fail "a dead export's directory was not swept beside the flock"
ok

# 3. A failed export's temporary directory swapped for an earlier export of root's.
mkdir -m 755 "$WORK/user2"
chown "$ATTACKER:$ATTACKER" "$WORK/user2"
lfs branch export main "$WORK/user2/old" >/dev/null
as_attacker rm -f "$WORK/user2/old/f1" 2>/dev/null && fail "the attacker could change root's earlier export: no attack"
ok
fault_fifo "$FIFO"
LAYERFS_FAULT="export-batch#1@$FIFO" timeout 60 "$LAYERFS" branch export main "$WORK/user2/new" \
        >/dev/null 2>"$WORK/export.err" &
exporter=$!
fault_reached "$exporter" "$FIFO" >/dev/null || fail "the export ended before the step: $(cat "$WORK/export.err")"
as_attacker sh -c "cd '$WORK/user2' && tmp=\$(echo .new.layerfs-export-*) && mv \"\$tmp\" moved &&
        mv old \"\$tmp\" && mkdir new && touch new/mine" || fail "the attacker's swap failed"
fault_release "$FIFO"
status=0
wait "$exporter" || status=$?
assert_eq "$status" 125 "the exit status of the export into a DIR filled meanwhile ($(cat "$WORK/export.err"))"
[ -n "$(find "$WORK/user2" -maxdepth 1 -name '.new.layerfs-export-*' -print -quit)" ] ||
        fail "root's earlier export, put at the name of the failed export's directory, was removed"
cmp "$WORK/src/f1" "$WORK/user2"/.new.layerfs-export-*/f1 ||
        fail "root's earlier export, put at the name of the failed export's directory, was emptied"
ok
[ -z "$(ls -A "$WORK/user2/moved")" ] || fail "the failed export's own directory was not emptied"
ok

finish
