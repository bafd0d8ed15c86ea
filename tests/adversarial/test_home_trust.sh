#!/usr/bin/env bash
# Attack: a home that someone else controls (issue 12, item 6). The README suggested
# /tmp/home; uid 501 pre-created it, root used it, and 501 then swapped 'sandboxes/' for a
# tree of its own with its own token and control socket: root's `workspace exec` sent its
# stdin and fds to 501's listener. A swapped 'mnt' link made root's close unmount a
# tmpfs elsewhere. Nothing checked who owned the home or its parents, and paths inside
# it were followed through symlinks.
# Fixed by: the home is used only as OpenSSH's StrictModes would: it and every parent
# owned by the caller or root and not writable by group or others (a sticky
# world-writable parent such as /tmp only above a home the caller or root owns);
# otherwise PermissionDenied naming the path and the fix. The home is resolved once to
# its real path; 'sandboxes/', a Sandbox's directory and its 'mnt/' are opened beneath
# it without following symlinks, and its token and socket are reached through the
# directory held open.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
TEARDOWN_EXTRA='umount -l "$WORK/elsewhere/x" 2>/dev/null; [ -n "${LISTENER:-}" ] && kill "$LISTENER" 2>/dev/null'
as501() { setpriv --reuid=501 --regid=20 --clear-groups "$@"; }
mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"

# expect_denied PATH command...: PermissionDenied that names PATH.
expect_denied() {
        local path=$1 out status
        shift
        set +e
        out=$("$@" 2>&1 >/dev/null)
        status=$?
        set -e
        [ "$status" = 125 ] || fail "$* exited $status, expected PermissionDenied naming $path; said: $out"
        case "$out" in
        "PermissionDenied: "*"'$path'"*) ok ;;
        *) fail "$* said '$out', expected PermissionDenied naming '$path'" ;;
        esac
}

# ---- 1. a home pre-created by another user below a sticky /tmp-like directory ----------
mkdir -m 1777 "$WORK/tmp"
as501 mkdir "$WORK/tmp/home"
LAYERFS_HOME="$WORK/tmp/home" expect_denied "$WORK/tmp/home" lfs project init p --from "$WORK/src"
assert_eq "$(ls -A "$WORK/tmp/home")" "" "nothing was made in a home owned by another user"
set +e
msg=$(LAYERFS_HOME="$WORK/tmp/home" lfs project list 2>&1)
set -e
case "$msg" in *"owned by uid 501"*chown*) ok ;; *) fail "the refusal does not say who owns it and the fix: $msg" ;; esac

# ---- 2. modes and owners the home and its parents may not have ------------------------
mkdir -p "$WORK/h/home"
for mode in 775 757 777 1777; do
        chmod "$mode" "$WORK/h/home"
        LAYERFS_HOME="$WORK/h/home" expect_denied "$WORK/h/home" lfs project list
done
chmod 755 "$WORK/h/home"
chown 501:20 "$WORK/h/home"
LAYERFS_HOME="$WORK/h/home" expect_denied "$WORK/h/home" lfs project list
chown 0:0 "$WORK/h/home"
chmod 777 "$WORK/h"
LAYERFS_HOME="$WORK/h/home" expect_denied "$WORK/h" lfs project list
# The same parent below a path that does not exist yet: refused before anything is made.
LAYERFS_HOME="$WORK/h/new/home" expect_denied "$WORK/h" lfs project init p
[ ! -e "$WORK/h/new" ] || fail "a refused init made $WORK/h/new"
ok
chmod 755 "$WORK/h"
# A sticky world-writable parent (like /tmp) above a home root owns is fine, as is
# $WORK itself (mktemp below /tmp, 0711).
LAYERFS_HOME="$WORK/tmp/roothome" lfs project init p --from "$WORK/src" >/dev/null
ok

# ---- 3. a home reached through a symlink another user can swap ------------------------
lfs project init p --from "$WORK/src" >/dev/null
as501 ln -s "$LAYERFS_HOME" "$WORK/tmp/link"
real=$(LAYERFS_HOME="$WORK/tmp/link" lfs --json project list_sandboxes >/dev/null && LAYERFS_HOME="$WORK/tmp/link" lfs --json runtime status | json_get 'j["home"]')
assert_eq "$real" "$LAYERFS_HOME" "a home reached through a symlink is used by its real path"
as501 mkdir "$WORK/tmp/mine"
as501 ln -sfn "$WORK/tmp/mine" "$WORK/tmp/link"
LAYERFS_HOME="$WORK/tmp/link" expect_denied "$WORK/tmp/mine" lfs project list

# ---- 4. 'sandboxes/' swapped for another tree (a token and socket that are not ours) ----
SB=$(lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
mv "$LAYERFS_HOME/sandboxes" "$WORK/sandboxes.real"
mkdir -p "$WORK/fake/p-$SB"
echo 0123456789abcdef0123456789abcdef >"$WORK/fake/p-$SB/token"
chown -R 501:20 "$WORK/fake"
# setpriv execs python: $! is the listener itself, which the cleanup can end.
setpriv --reuid=501 --regid=20 --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1] + "/control.sock")
s.listen(8)
while True:
        c, _ = s.accept()
        data = c.recv(65536)
        open(sys.argv[1] + "/stolen", "ab").write(data)
        c.sendall(b"{\"ok\": {\"exit\": 0}}\n")
        c.close()' "$WORK/fake/p-$SB" >/dev/null 2>&1 &
LISTENER=$!
for _ in $(seq 100); do [ -S "$WORK/fake/p-$SB/control.sock" ] && break; sleep 0.05; done
ln -s "$WORK/fake" "$LAYERFS_HOME/sandboxes"
set +e
msg=$(echo secret | lfs workspace exec "$SB" main -- cat 2>&1)
set -e
[ ! -s "$WORK/fake/p-$SB/stolen" ] || fail "exec talked to a listener behind a swapped sandboxes/: $(cat "$WORK/fake/p-$SB/stolen")"
case "$msg" in "PermissionDenied: "*"$LAYERFS_HOME/sandboxes"*) ok ;; *) fail "exec through a swapped sandboxes/ said: $msg" ;; esac
expect_error PermissionDenied lfs sandbox create
lfs runtime reclaim >/dev/null 2>&1 || true
[ -e "$WORK/fake/p-$SB/token" ] || fail "reclaim removed a file behind a swapped sandboxes/"
ok
kill "$LISTENER"
wait "$LISTENER" 2>/dev/null || true
LISTENER=
rm "$LAYERFS_HOME/sandboxes"
mv "$WORK/sandboxes.real" "$LAYERFS_HOME/sandboxes"
lfs sandbox close "$SB" --force >/dev/null

# ---- 5. 'mnt' swapped for a link to another mount ---------------------------------------
mkdir -p "$WORK/elsewhere/x"
mount -t tmpfs -o size=1m elsewhere "$WORK/elsewhere/x"
for how in close reclaim; do
        SB=$(lfs sandbox create)
        dir="$LAYERFS_HOME/sandboxes/p-$SB"
        # (A namespaces Sandbox's mnt is a mount of its own on the host: gone first.)
        umount -l "$dir/mnt" 2>/dev/null || true
        rmdir "$dir/mnt"
        ln -s "$WORK/elsewhere" "$dir/mnt"
        if [ "$how" = close ]; then
                lfs sandbox close "$SB" --force >/dev/null 2>&1 || true
        else
                kill_daemon "$SB"
                lfs runtime reclaim >/dev/null 2>&1 || true
        fi
        mountpoint -q "$WORK/elsewhere/x" || fail "$how through a swapped mnt link unmounted $WORK/elsewhere/x"
        ok
        [ ! -e "$dir" ] || fail "$how left $dir"
        assert_eq "$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT count(*) FROM sandboxes")" 0 "$how removed the record"
done
umount "$WORK/elsewhere/x"
finish
