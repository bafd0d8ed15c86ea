#!/usr/bin/env bash
# Attack: the command identity (uid 501, which every Sandbox's commands share) and other
# local users read what is not theirs (issue 12, item 5). home.db, the Stores (store.db,
# packs, objects) and the Sandbox directories were world-readable: a command in any
# Sandbox could read every project's history and content, list every Sandbox's
# Workspaces and read the daemons' logs; another local user could read the Workspaces.
# Fixed by: projects/ and home.db are the owner's alone (0700, 0600), sandboxes/ and
# each Sandbox's directory and mnt/ can be passed through (0711) but not listed, the
# daemon's log, token, socket, upper and process logs are root's (0600/0700), TMPDIR is
# the command identity's (0700), and a Workspace's root is the command identity's, 0700.
# What the native runtime cannot separate between Sandboxes that share uid 501 is in
# docs/security.md; the namespaces runtime (issue 15) closes it.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
as501() { setpriv --reuid=501 --regid=20 --clear-groups "$@"; }
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# cannot WHO WHAT command...: the command fails for WHO.
cannot() {
        local who=$1 what=$2
        shift 2
        if "$who" "$@" >/dev/null 2>&1; then fail "$who could $what: $*"; fi
        ok
}

mkdir -p "$WORK/src"
echo "top secret history" >"$WORK/src/secret.txt"
head -c 100000 /dev/urandom >"$WORK/src/big.bin"
lfs project init p --from "$WORK/src" >/dev/null
chmod 755 "$LAYERFS_HOME/projects" # as a home made before: the create closes it
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
lfs workspace exec "$SB" main -- sh -c 'echo mine > $TMPDIR/private.txt' >/dev/null
H=$LAYERFS_HOME
dir=$H/sandboxes/p-$SB
pack=$(find "$H/projects/p/objects/packs" -name '*.pack' | head -1)
loose=$(find "$H/projects/p/objects" -path '*/packs' -prune -o -type f -print | head -1)
[ -n "$pack" ] && [ -n "$loose" ] || fail "expected a pack and a loose object in the Store"

for who in as501 nobody; do
        cannot $who "read home.db" cat "$H/home.db"
        cannot $who "read store.db" cat "$H/projects/p/store.db"
        cannot $who "read a pack" cat "$pack"
        cannot $who "read a loose object" cat "$loose"
        cannot $who "list the projects" ls "$H/projects"
        cannot $who "list the Sandboxes" ls "$H/sandboxes"
        cannot $who "list a Sandbox's directory" ls "$dir"
        cannot $who "list a Sandbox's Workspaces" ls "$dir/mnt"
        cannot $who "read the daemon's log" cat "$dir/daemon.log"
        cannot $who "read the token" cat "$dir/token"
        cannot $who "list the upper directories" ls "$dir/upper"
done
# Other local users reach neither the Workspace nor the TMPDIR.
cannot nobody "read the Workspace" cat "$WS/secret.txt"
cannot nobody "list the Workspace" ls "$WS"
cannot nobody "read the TMPDIR" cat "$dir/tmp/private.txt"
# From inside a Sandbox, too.
x() { lfs workspace exec "$SB" main -- "$@"; }
for f in "$H/home.db" "$H/projects/p/store.db" "$pack" "$dir/daemon.log" "$dir/token"; do
        if x cat "$f" >/dev/null 2>&1; then fail "a command read $f"; fi
        ok
done
if x ls "$H/projects" >/dev/null 2>&1; then fail "a command listed the projects"; fi
ok
# What the command identity needs still works: its Workspace, its TMPDIR, its HOME.
assert_eq "$(x cat secret.txt)" "top secret history" "the command reads its Workspace"
assert_eq "$(x sh -c 'cat $TMPDIR/private.txt; echo new > $HOME/n; cat $HOME/n')" "mine
new" "the command uses its TMPDIR and HOME"
# Files made by root in the home are the owner's alone whatever root's umask.
modes=$(stat -c '%a %n' "$H" "$H/home.db" "$H/projects" "$H/sandboxes" "$dir" "$dir/mnt" "$dir/tmp" | sed "s|$H|H|")
assert_eq "$modes" "711 H
600 H/home.db
700 H/projects
711 H/sandboxes
711 H/sandboxes/p-1
711 H/sandboxes/p-1/mnt
700 H/sandboxes/p-1/tmp" "modes in the home"
lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null
finish
