#!/usr/bin/env bash
# Attack: a command of the Sandbox makes --cwd of a later exec start outside its Workspace
# (issue 17). SPEC 3: the command runs in the Workspace "or cwd below it". The daemon
# resolves cwd (realpath, then the prefix of the Workspace), opens it and checks that what
# it opened is on the Workspace's own filesystem; under the namespaces runtime the child
# reaches the directory by path in the Sandbox's mount view and checks it is the one the
# daemon opened (same device and inode).
#  1. Symlinks made in the Workspace that lead out of it (absolute, relative, through a
#     chain, through another Workspace of the Sandbox, in the middle of the path): each
#     refused InvalidInput before anything runs.
#  2. The swap race, at the daemon: cwd is a directory when checked and a symlink to a
#     directory outside when opened. LAYERFS_FAULT=exec-cwd-resolved holds the daemon
#     between the two (userspace-lib/base/fault.h), so the swap lands there every round.
#  3. The swap race, at the child (namespaces runtime): the symlink replaces the directory
#     after the daemon opened it, before the child's chdir by path (exec-cwd-chdir).
# Either way the command must not run outside: refused, or run in the Workspace.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_PROJECT=p
mkdir -p "$WORK/src" "$WORK/outside"
chmod 755 "$WORK/outside"
echo seed >"$WORK/src/seed"
lfs project init p --from "$WORK/src" >/dev/null
lfs branch create other >/dev/null

# escaped: the command ran outside (it leaves a mark where it started).
escaped() { [ -e "$WORK/outside/escaped" ] || [ -e /etc/layerfs-escaped ]; }
cmd='touch escaped 2>/dev/null; pwd -P'

# ---- 1. symlinks that lead out --------------------------------------------------------
SB=$(lfs sandbox create)
WS=$(lfs workspace mount "$SB" main)
OTHER=$(lfs workspace mount "$SB" other)
x() { lfs workspace exec "$SB" main "$@"; }
# Made by the command itself, as an attacker inside would.
x -- sh -c 'mkdir -p inner/deep
        ln -s /etc to-etc
        ln -s ../../../../../../.. to-root-relative
        ln -s to-etc chain-1
        ln -s chain-1 chain-2
        ln -s "$1" to-other-workspace
        ln -s "$TMPDIR" to-tmpdir
        ln -s "$2" to-outside
        ln -s ../.. inner/deep/up-two
        ln -s loop-b loop-a
        ln -s loop-a loop-b' sh "$OTHER" "$WORK/outside"
for cwd in to-etc to-root-relative chain-2 to-other-workspace to-tmpdir to-outside \
        to-etc/ssl inner/deep/up-two/.. loop-a "$WS/to-etc" "$WS/chain-2/ssl" "$WS/inner/../to-outside"; do
        expect_error InvalidInput x --cwd "$cwd" -- sh -c "$cmd"
done
escaped && fail "a command ran outside its Workspace through a symlink"
# A symlink that stays inside is followed.
x -- ln -s inner/deep to-deep
assert_eq "$(x --cwd to-deep -- pwd -P)" "$WS/inner/deep" "--cwd through a symlink inside the Workspace"
lfs workspace unmount "$SB" main --discard >/dev/null
lfs workspace unmount "$SB" other --discard >/dev/null
lfs sandbox close "$SB" >/dev/null

# ---- 2. and 3. the swap between check and use -----------------------------------------
# race STEP TARGET ROUNDS: a Sandbox whose daemon (and its commands' children) wait at
# STEP; each round an exec with --cwd d starts, and once it waits at STEP, d becomes a
# symlink to TARGET, a directory outside (the real one moved aside). Prints how many
# rounds reached STEP.
race() {
        local step=$1 target=$2 rounds=$3 fifo reached=0 round status out
        # In the Sandbox's TMPDIR: the one place of the home that its commands' children
        # (namespaces: in the Sandbox's mount view, as uid 501) reach by the same path. No
        # Sandbox is open: this one is number 1, the smallest free.
        fifo="$LAYERFS_HOME/sandboxes/p-1/tmp/fault"
        SB=$(LAYERFS_FAULT="$step@$fifo" lfs sandbox create)
        [ "$SB" = 1 ] || fail "expected Sandbox 1, got $SB"
        WS=$(lfs workspace mount "$SB" main)
        for round in $(seq 1 "$rounds"); do
                fault_fifo "$fifo"
                rm -rf "$WS/d" "$WS/d.real"
                mkdir "$WS/d"
                lfs workspace exec "$SB" main --cwd d -- sh -c "$cmd" >"$WORK/out" 2>"$WORK/err" &
                local pid=$!
                if fault_reached "$pid" "$fifo" >/dev/null; then
                        reached=$((reached + 1))
                        mv "$WS/d" "$WS/d.real"
                        ln -s "$target" "$WS/d"
                        fault_release "$fifo"
                fi
                status=0
                wait "$pid" || status=$?
                out=$(cat "$WORK/out")
                if [ "$status" -eq 0 ]; then
                        case "$out" in
                        "$WS/d.real" | "$WS/d") ;;
                        *) fail "round $round at $step: the command ran in '$out', outside its Workspace" ;;
                        esac
                else
                        [ "$status" -eq 125 ] || fail "round $round at $step: exec exited $status: $(cat "$WORK/err")"
                fi
                escaped && fail "round $round at $step: a command ran outside its Workspace ($out)"
                ok
        done
        rm -f "$fifo"
        lfs workspace unmount "$SB" main --discard >/dev/null
        lfs sandbox close "$SB" >/dev/null
        echo "$reached"
}
n=$(race exec-cwd-resolved "$WORK/outside" 5)
echo "   the daemon's check and open: $n of 5 rounds swapped in between"
assert_eq "$n" 5 "rounds where the swap landed between the daemon's check and its open"
# /etc: a directory the Sandbox's own mount view has too (the host's, read-only).
n=$(race exec-cwd-chdir /etc 5)
if [ "$(new_runtime)" = namespaces ]; then
        echo "   the child's chdir: $n of 5 rounds swapped in between"
        assert_eq "$n" 5 "rounds where the swap landed between the daemon's open and the child's chdir"
else
        # native: the child starts in the directory the daemon opened (fchdir), by no path.
        assert_eq "$n" 0 "rounds that reached a chdir by path under the native runtime"
fi
assert_nothing_left "the --cwd attacks"
finish
