#!/usr/bin/env bash
# A directory another Workspace removed, taken into the view by a merged commit, leaves
# nothing behind in the daemon (issue 18): before, the view freed only its name, and its
# record, the names below it, the records of what the kernel had looked up there and
# the listed table's slots of its subdirectories (24 bytes each, 48 with the table's
# room) stayed until the unmount. Here p/big holds SUBDIRS directories listed by a find
# and forgotten by the kernel (drop_caches), and a file below it stays open through the
# merge: the file still reads, nothing can be made in the directory (held open too), and
# once they are closed and the kernel forgets them, what the daemon keeps of the
# namespace (list_workspaces' metadata_bytes) is what our side changed, less than half
# of what the subdirectories' slots took.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=rmmerge
SUBDIRS=400

mkdir -p "$WORK/src/p/keep" "$WORK/src/q"
python3 - "$WORK/src/p/big" "$SUBDIRS" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.makedirs(os.path.join(root, "s%03d" % i))
    with open(os.path.join(root, "s%03d" % i, "f"), "w") as fh:
        fh.write("file %d\n" % i)
EOF
echo keep >"$WORK/src/p/keep/x"
echo y >"$WORK/src/q/y"
lfs project init rmmerge --from "$WORK/src" >/dev/null
rm -rf "$WORK/src"

n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
bytes() { lfs --json sandbox list_workspaces "$n" | json_get "j[0]['metadata_bytes']"; }
# evict: the kernel drops what no one uses and sends FORGET for each; the LOOKUP after
# returns once the daemon has had them (it serves queued FORGETs first).
evict() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
        stat "$ws/q" >/dev/null
}

assert_eq "$(find "$ws/p/big" -type f | wc -l)" "$SUBDIRS" "find over p/big"
exec 3<"$ws/p/big/s007/f" 4<"$ws/p/big"
evict
before=$(bytes)

# The other side removes p/big; ours changes q/y: our commit merges.
n2=$(lfs sandbox create)
ws2=$(lfs workspace mount "$n2" main)
rm -r "$ws2/p/big"
lfs workspace commit "$n2" main -m "big removed" >/dev/null
lfs workspace unmount "$n2" main >/dev/null
lfs sandbox close "$n2" >/dev/null
echo ours >"$ws/q/y"
assert_eq "$(lfs --json workspace commit "$n" main -m ours | json_get 'j["merged"]')" True "the commit merged"
assert_eq "$(cd "$ws/p" && echo *)" "keep" "p after the merge"
[ ! -e "$ws/p/big" ] || fail "p/big is still in the view after the merge removed it"
assert_eq "$(cat <&3)" "file 7" "the file open under p/big through the merge"
# The removed directory, still open: nothing can be made in it (as after an rmdir), where
# a file made there before was in no directory a status or a commit could reach.
if sh -c 'echo x >/proc/self/fd/4/new' 2>/dev/null; then
        fail "a file was made in p/big through an open fd after the merge removed p/big"
fi
# Nor can anything be renamed into it, nor the open file (nameless now) linked back into
# the view: each would leave or bring a file where status and commit do not look.
mkdir "$ws/q/sub"
python3 - "$ws" <<'EOF'
import errno, os, sys
ws = sys.argv[1]
for what, call in (
    ("a rename of q/y into the removed p/big", lambda: os.rename(ws + "/q/y", "/proc/self/fd/4/y")),
    ("a rename of q/sub into the removed p/big", lambda: os.rename(ws + "/q/sub", "/proc/self/fd/4/sub")),
):
    try:
        call()
    except OSError as e:
        if e.errno != errno.ENOENT:
            sys.exit("%s failed with %s, not ENOENT" % (what, errno.errorcode[e.errno]))
    else:
        sys.exit("%s succeeded after the merge removed p/big" % what)
EOF
if out=$(ln -L /proc/self/fd/3 "$ws/q/relinked" 2>&1); then
        fail "the open file under the removed p/big was linked back into the view as q/relinked"
fi
case $out in
*"No such file or directory"*) ;;
*) fail "the link of the open file under the removed p/big failed otherwise than ENOENT: $out" ;;
esac
rmdir "$ws/q/sub"
exec 3<&- 4<&-
assert_eq "$(lfs workspace status "$n" main)" "" "status after the merged commit"
ok

evict
after=$(bytes)
echo "metadata bytes: $before before the merge, $after after it and an eviction"
# What stays is what ours changed (q/y's record, those of p and q, touched now): about
# 2,500 bytes, where the subdirectories' slots alone took SUBDIRS * 48 (22,203 bytes in
# all before the fix).
[ "$after" -le $((SUBDIRS * 48 / 2)) ] ||
        fail "the namespace takes $after bytes after the merge removed p/big and an eviction ($before before): the removed directory left what it held"
ok
finish
