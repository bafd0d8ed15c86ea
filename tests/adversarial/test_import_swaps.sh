#!/usr/bin/env bash
# Attack: another local user owns the tree that root imports (`project init --from`,
# `branch commit --from`) and changes it while the import runs. The walk lists each
# directory (opened beneath the tree, no symlink followed, its inode checked), then reads
# the files it listed by their path below the tree. Between the two the owner swapped a
# listed directory for a symlink to a directory only root may read: the read followed it
# (O_NOFOLLOW guards the last component only) and the Store recorded root's secret under
# the owner's name, for anyone the branch is exported or mounted for to read. A listed
# file swapped for a fifo made the import wait for a writer for ever.
# Fixed by: every file of a tree is opened with openat2(RESOLVE_BENEATH |
# RESOLVE_NO_SYMLINKS) (io_uring's OPENAT2 in the batches), O_NONBLOCK and O_NOCTTY, a
# large one checked to be a regular file once open: the swap is refused InvalidInput
# ("changed or vanished while it was being read"), nothing recorded.
# The swaps land every round: the import is held at step object-write, which the walk
# reaches on a symlink's target inside the directory it has just listed, before any of
# that directory's files is read (docs/testing.md).
source "$(dirname "$0")/../e2e/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (the import runs as root, the tree is another user's)"
ATTACKER=65534
as_attacker() { setpriv --reuid=$ATTACKER --regid=$ATTACKER --clear-groups "$@"; }

# Root's secrets, which the tree's owner may not read: one small file (read in a batch),
# one larger than a pack takes (read alone).
mkdir -m 700 "$WORK/private"
head -c 631 /dev/urandom >"$WORK/private/secret"
head -c $((200 << 10)) /dev/urandom >"$WORK/private/big"
chmod 600 "$WORK/private/secret" "$WORK/private/big"
as_attacker test -r "$WORK/private/secret" && fail "the attacker can read the secret: no attack"
ok

FIFO=$WORK/step.fifo
lfs project init base >/dev/null

# make_tree DIR FILE: the attacker's tree: a/FILE the size of root's, and a symlink after
# it in a/ whose new target makes the walk write an object (the step).
make_tree() {
        rm -rf "$1"
        mkdir -p "$1/a"
        head -c "$(stat -c %s "$WORK/private/$2")" /dev/zero >"$1/a/$2"
        ln -s "target-$RANDOM-$RANDOM" "$1/a/zlink"
        for i in 1 2 3; do echo "$i" >"$1/f$i"; done
        chown -R "$ATTACKER:$ATTACKER" "$1"
}

# leaked PROJECT BRANCH FILE: does the branch hold root's file? (exported and compared)
leaked() {
        local out=$WORK/out-$1-$2
        rm -rf "$out"
        lfs --project "$1" branch export "$2" "$out" >/dev/null 2>&1 || return 1
        [ -f "$out/a/$3" ] && [ ! -L "$out/a" ] && cmp -s "$out/a/$3" "$WORK/private/$3"
}

# import_swapped WHAT FILE SWAP -- layerfs args...: runs the import held at the step,
# where the attacker runs SWAP in the tree, then expects InvalidInput and nothing of root's
# recorded.
import_swapped() {
        local what=$1 file=$2 swap=$3 status=0 err=$WORK/import.err
        shift 4
        fault_fifo "$FIFO"
        LAYERFS_FAULT="object-write#1@$FIFO" timeout 60 "$LAYERFS" "$@" >/dev/null 2>"$err" &
        local importer=$!
        fault_reached "$importer" "$FIFO" >/dev/null || fail "$what: the import ended before the step: $(cat "$err")"
        as_attacker sh -c "cd '$WORK/tree' && $swap" || fail "$what: the attacker's swap failed"
        fault_release "$FIFO"
        wait "$importer" || status=$?
        [ "$status" != 124 ] || fail "$what: the import still waited after 60 s (for a writer of the fifo?)"
        [ "$status" = 125 ] || fail "$what: the import exited $status, expected 125 (refused); stderr: $(cat "$err")"
        case "$(cat "$err")" in
        "InvalidInput: "*"changed or vanished while it was being read"*) ok ;;
        *) fail "$what: the import said '$(cat "$err")', expected InvalidInput" ;;
        esac
}

SWAP_DIR="mv a a.real && ln -s '$WORK/private' a"
for pass in uring plain; do
        export LAYERFS_NO_URING=$([ $pass = plain ] && echo 1 || echo 0)
        for file in secret big; do
                make_tree "$WORK/tree" "$file"
                import_swapped "init, $file, $pass: a/ swapped for a symlink" "$file" "$SWAP_DIR" -- \
                        project init "stolen-$file-$pass" --from "$WORK/tree"
                if lfs project list | grep -q "stolen-$file-$pass"; then
                        leaked "stolen-$file-$pass" main "$file" && fail "init, $file, $pass: root's $file was recorded"
                        fail "init, $file, $pass: a project was made"
                fi
                ok
        done
done
unset LAYERFS_NO_URING

# The same through branch commit: the head stays.
head_before=$(lfs --project base branch log main --limit 1 --json | json_get 'j[0]["commit"]')
make_tree "$WORK/tree" secret
import_swapped "commit: a/ swapped for a symlink" secret "$SWAP_DIR" -- \
        --project base branch commit main --from "$WORK/tree" -m stolen
assert_eq "$(lfs --project base branch log main --limit 1 --json | json_get 'j[0]["commit"]')" "$head_before" \
        "the head after a refused commit"
if leaked base main secret; then fail "commit: root's secret was recorded"; fi
ok

# A listed file swapped for a fifo (no writer): refused, not waiting for ever.
for file in secret big; do
        make_tree "$WORK/tree" "$file"
        as_attacker mkfifo "$WORK/tree/p"
        import_swapped "init, $file swapped for a fifo" "$file" "mv p a/$file" -- \
                project init "fifo-$file" --from "$WORK/tree"
done
# ... and for a directory, and a unix socket: refused the same way.
make_tree "$WORK/tree" secret
import_swapped "init, secret swapped for a directory" secret "rm a/secret && mkdir a/secret" -- \
        project init dir-secret --from "$WORK/tree"
make_tree "$WORK/tree" secret
import_swapped "init, secret swapped for a socket" secret \
        "rm a/secret && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"a/secret\")'" -- \
        project init socket-secret --from "$WORK/tree"
no_projects=$(lfs project list --json | python3 -c 'import json,sys; print(" ".join(p["project"] for p in json.load(sys.stdin)))')
assert_eq "$no_projects" "base" "the projects after every refused import"

finish
