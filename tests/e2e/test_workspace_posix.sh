#!/usr/bin/env bash
# A Workspace behaves like a local disk (posix_checks.py), shows Store files as the
# command identity's, and a killed daemon leaves a Store that is whole and a mount that
# the next call detaches.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "Workspaces need root (FUSE mounts, cgroups)"
export LAYERFS_PROJECT=px
# Each by its project: the second part's Sandbox is of project full, not the default one.
close_sandboxes() {
        local row
        for row in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT project || '/' || number FROM sandboxes" 2>/dev/null); do
                "$LAYERFS" --project "${row%/*}" sandbox close "${row#*/}" --force >/dev/null 2>&1 || true
        done
}
trap 'close_sandboxes; cleanup_work' EXIT

make_sample_tree "$WORK/sample"
rm "$WORK/sample/a-fifo"
lfs project init px --from "$WORK/sample" >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)

# Store files appear as the command identity's (SPEC 3), with the recorded modes: to the
# commands (a namespaces Sandbox's commands are 501:20 inside, their own host ids outside).
assert_eq "$(lfs workspace exec "$n" main -- stat -c '%u:%g %a' README run.sh src)" \
        "$(printf '501:20 644\n501:20 755\n501:20 755')" "owners and modes"

mkdir "$ws/posix"
python3 "$ROOT/tests/e2e/posix_checks.py" --workspace "$ws/posix" >"$WORK/posix.log" || {
        cat "$WORK/posix.log" >&2
        fail "POSIX checks in a Workspace"
}
ok
rm -rf "$ws/posix"
assert_eq "$(lfs workspace status "$n" main)" "" "status after removing everything the checks made"

# Data still in the kernel's page cache (a shared mmap never synced, by a process that
# has exited) is in the commit: the daemon has the kernel write it back first.
python3 - "$ws/mapped" <<'PY'
import mmap, os, sys
with open(sys.argv[1], "wb") as f:
    f.write(b"\0" * 8192)
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 8192)
m[0:5] = b"dirty"
os._exit(0)
PY
lfs workspace commit "$n" main -m mapped >/dev/null
lfs branch export main "$WORK/mapped-out" >/dev/null
assert_eq "$(head -c 5 "$WORK/mapped-out/mapped")" "dirty" "an unsynced shared mmap write in the commit"

# A mount point that is in the way (a file where the Workspace would go) is a clear
# error, and the Sandbox stays usable.
touch "$LAYERFS_HOME/sandboxes/px-$n/mnt/blocked"
lfs branch create blocked >/dev/null
expect_error Failed lfs workspace mount "$n" blocked
assert_eq "$(lfs --json sandbox list_workspaces "$n" | json_get 'len(j)')" 1 "the failed mount left no Workspace"
rm "$LAYERFS_HOME/sandboxes/px-$n/mnt/blocked"

# Kill the daemon in the middle of a commit of many files: the Store stays whole and
# the head is the old or the new commit.
for i in $(seq 1 2000); do echo "$i" >"$ws/f$i"; done
old=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
pid=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number=$n")
passes=$(lfs --json sandbox list_workspaces "$n" | json_get 'j[0]["passthrough"]')
# ... and while a writer streams into the Workspace.
dd if=/dev/zero of="$ws/stream" bs=64k count=200000 2>/dev/null &
writer=$!
sleep 0.2
("$LAYERFS" workspace commit "$n" main -m big >/dev/null 2>&1 &)
sleep 0.05
kill -9 "$pid"
if [ "$passes" = True ]; then
        # With passthrough the kernel writes the writer's open file itself, and the
        # daemon's death does not reach it (docs/workspace.md): it is stopped here.
        kill "$writer" 2>/dev/null || true
        wait "$writer" || true
else
        set +e
        wait "$writer"
        writer_status=$?
        set -e
        [ "$writer_status" -ne 0 ] || fail "the writer did not notice its Workspace's daemon died"
fi
ok
sleep 0.2
lfs project verify >/dev/null || fail "the Store after a daemon was killed during a commit"
ok
head=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"], j[0]["parents"]')
case "$head" in "('$old', "*) ok ;; *"['$old']"*) ok ;; *) fail "head after the kill: $head" ;; esac

# The dead daemon's mount answers ENOTCONN; calls say NoSuchSandbox; close cleans up.
set +e
out=$(ls "$ws" 2>&1)
set -e
grep -q "Transport endpoint is not connected" <<<"$out" || fail "the dead mount said '$out'"
ok
expect_error NoSuchSandbox lfs workspace status "$n" main
lfs sandbox close "$n" --force >/dev/null
grep -q " $LAYERFS_HOME/" /proc/mounts && fail "a mount is left after closing a dead Sandbox"
ok
[ ! -e "$LAYERFS_HOME/sandboxes/px-$n" ] || fail "the dead Sandbox's directory is left"
ok
m=$(lfs sandbox create)
assert_eq "$m" 1 "the number is free again"
ws=$(lfs workspace mount "$m" main)
[ -f "$ws/README" ] || fail "a new mount of the branch works"
ok
# A record that points anywhere but where this home puts Sandboxes is refused and
# nothing there is touched.
mkdir -p "$WORK/precious" && echo keep >"$WORK/precious/file"
for bad in "$WORK/precious" "sandboxes/px-$m" "$LAYERFS_HOME/sandboxes/px-$m/.." "$LAYERFS_HOME/sandboxes/px-9"; do
        sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "UPDATE sandboxes SET dir='$bad' WHERE number=$m"
        expect_error InvalidInput lfs sandbox close "$m" --force
        expect_error InvalidInput lfs workspace status "$m" main
done
assert_eq "$(cat "$WORK/precious/file")" "keep" "a record pointing elsewhere touched nothing"
sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "UPDATE sandboxes SET dir='$LAYERFS_HOME/sandboxes/px-$m' WHERE number=$m"

# O_TRUNC of a Store file, then a disk that fills: ENOSPC reaches the writer as ENOSPC.
printf 'short\n' >"$ws/README"
assert_eq "$(cat "$ws/README")" "short" "O_TRUNC of a file from the Store"
lfs sandbox close "$m" --force >/dev/null
mkdir "$WORK/small"
mount -t tmpfs -o size=48m layerfs-test "$WORK/small"
trap 'close_sandboxes; umount -l "$WORK/small" 2>/dev/null || true; cleanup_work' EXIT
export LAYERFS_HOME="$WORK/small/home"
lfs project init full >/dev/null
k=$(lfs --project full sandbox create)
ws=$(lfs --project full workspace mount "$k" main)
fill_disk "$ws/big"
ok
rm "$ws/big"
echo fits >"$ws/after"
assert_eq "$(cat "$ws/after")" "fits" "writes work again after space is freed"
lfs --project full sandbox close "$k" --force >/dev/null
umount "$WORK/small"
finish
