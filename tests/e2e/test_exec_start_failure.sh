#!/usr/bin/env bash
# A command that cannot be started: the error names the step of the start that failed
# (cgroup/cgroup.h, lfs_spawn_stage), with the value and what to do, in `workspace exec`,
# in `process start` and in the daemon's log, so that a working directory the command
# cannot enter is told apart from a program that is missing or namespaces that are gone.
# The daemon's checks before the start refuse what they can judge (a --cwd outside the
# Workspace, or not there: InvalidInput, test_runtime.sh); these failures reach the start
# itself and stay Failed (docs/runtime.md, Exec):
#  1. namespaces: --cwd removed between the daemon's open and the child's chdir by path in
#     the Sandbox's mount view (the step exec-cwd-chdir): the working directory, ENOENT.
#  2. the command's cgroup removed between its mkdir and the clone into it (the step
#     spawn-leaf-made): the clone, ENOENT, both runtimes.
#  3. --cwd a directory of the Workspace that the command identity (uid 501) cannot enter
#     (mode 000, its own): the working directory, EACCES, both runtimes.
#  4. namespaces: the Sandbox's init killed from the host: its namespaces, ESRCH.
# On main's code each said only "cannot start 'pwd' in sandbox N: No such file or
# directory" (or "Permission denied", "No such process"), the step unnamed.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
export LAYERFS_PROJECT=p
mkdir -p "$WORK/src"
echo seed >"$WORK/src/seed"
lfs project init p --from "$WORK/src" >/dev/null
runtime=$(new_runtime)

cgroup_of() { records "SELECT cgroup FROM sandboxes WHERE number=$1"; }
# logged SB TEXT: sandbox SB's daemon log has a line with TEXT.
logged() {
        lfs sandbox log "$1" | grep -qF "$2" || fail "sandbox $1's log has no '$2': $(lfs sandbox log "$1" | tail -3)"
        ok
}
# exec_held STEP FIFO SB ACTION CWD: an exec of pwd in SB with --cwd CWD, held at STEP
# (LAYERFS_FAULT of SB's create); ACTION runs there, then the exec goes on. Its stderr in
# $WORK/err; fails unless it exited 125.
exec_held() {
        local step=$1 fifo=$2 sb=$3 action=$4 cwd=$5 pid status=0
        fault_fifo "$fifo"
        lfs workspace exec "$sb" main --cwd "$cwd" -- pwd >"$WORK/out" 2>"$WORK/err" &
        pid=$!
        fault_reached "$pid" "$fifo" >/dev/null || fail "the exec ended before $step: $(cat "$WORK/err")"
        eval "$action"
        fault_release "$fifo"
        wait "$pid" || status=$?
        rm -f "$fifo"
        assert_eq "$status" 125 "exit status of an exec held at $step ($action); stderr: $(cat "$WORK/err")"
}
# said TEXT: the held exec's stderr is TEXT and more.
said() {
        case "$(cat "$WORK/err")" in
        "$1"*) ok ;;
        *) fail "expected '$1...', got: $(cat "$WORK/err")" ;;
        esac
}

# ---- 1. --cwd removed before the child's chdir (namespaces) ----------------------------
if [ "$runtime" = namespaces ]; then
        # In the Sandbox's TMPDIR, which the child reaches by the same path in its view, as
        # uid 501. No Sandbox is open: this one is number 1, the smallest free.
        fifo="$LAYERFS_HOME/sandboxes/p-1/tmp/fault"
        SB=$(LAYERFS_FAULT="exec-cwd-chdir@$fifo" main_sandbox)
        [ "$SB" = 1 ] || fail "expected Sandbox 1, got $SB"
        WS="$LAYERFS_HOME/sandboxes/p-$SB/mnt/main"
        mkdir "$WS/gone"
        exec_held exec-cwd-chdir "$fifo" "$SB" 'rmdir "$WS/gone"' gone
        said "Failed: cannot start 'pwd' in sandbox $SB: cannot enter the working directory of the command, '$WS/gone': No such file or directory; give --cwd a directory inside the Workspace"
        logged "$SB" "cannot start 'pwd': cannot enter the working directory of the command, '$WS/gone'"
        lfs workspace unmount "$SB" main --discard >/dev/null
        lfs sandbox close "$SB" >/dev/null
else
        echo "   not here: the child's chdir by path (the namespaces runtime's; this is $runtime)"
fi

# ---- 2. the command's cgroup removed before the clone into it --------------------------
fifo=$WORK/fault
SB=$(LAYERFS_FAULT="spawn-leaf-made#1@$fifo" main_sandbox)
leaf="$(cgroup_of "$SB")/cmd-1"
exec_held spawn-leaf-made "$fifo" "$SB" 'rmdir "$leaf"' .
said "Failed: cannot start 'pwd' in sandbox $SB: cannot clone the command's process into its cgroup, $leaf: No such file or directory"
logged "$SB" "cannot start 'pwd': cannot clone the command's process into its cgroup, $leaf"
# The next start (its own leaf, not held) runs.
assert_eq "$(lfs workspace exec "$SB" main -- echo ran)" ran "an exec after the failed start"
lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null

# ---- 3. a --cwd the command identity cannot enter ---------------------------------------
# Both runtimes. Under namespaces the child's setns gives it every capability in the
# Sandbox's user namespace, which its setresuid kept (no id that namespace counts as root
# changed), so it entered such a directory, until it cleared them all with its identity
# (cgroup/spawn.c; tests/adversarial/test_spawn_caps.sh has the rest of that window).
SB=$(main_sandbox)
WS="$LAYERFS_HOME/sandboxes/p-$SB/mnt/main"
x() { lfs workspace exec "$SB" main "$@"; }
# Made by the command identity itself: the daemon's checks, as root, pass it.
x -- sh -c 'mkdir locked && chmod 000 locked'
want="cannot enter the working directory of the command, '$WS/locked': Permission denied; give --cwd a directory inside the Workspace that the command identity (uid 501) can enter"
expect_refusal Failed "cannot start 'pwd' in sandbox $SB: $want" x --cwd locked -- pwd
expect_refusal Failed "cannot start 'sleep' in sandbox $SB: $want" \
        lfs process start "$SB" main --cwd locked -- sleep 1
logged "$SB" "cannot start 'sleep': $want"
# Nothing of the failed starts stays: no leaf, no process.
assert_eq "$(find "$(cgroup_of "$SB")" -mindepth 1 -maxdepth 1 -name 'cmd-*' -type d | wc -l)" 0 \
        "command leaves left by failed starts"
# The same directory once the command identity may enter it: the command runs.
x -- chmod 700 locked
assert_eq "$(x --cwd locked -- pwd)" "$WS/locked" "--cwd once the command identity can enter it"
lfs workspace unmount "$SB" main --discard >/dev/null
lfs sandbox close "$SB" >/dev/null

# ---- 4. the Sandbox's init killed from the host (namespaces) -----------------------------
if [ "$runtime" = namespaces ]; then
        SB=$(main_sandbox)
        init=$(cat "$(cgroup_of "$SB")/init/cgroup.procs")
        kill -9 "$init"
        wait_exit "$init" 30 || fail "the init did not end on SIGKILL"
        expect_refusal Failed "cannot start 'true' in sandbox $SB: cannot join the namespaces the command runs in, those of sandbox $SB's init: the init has ended (No such process), and the Sandbox's namespaces with it; close the Sandbox ('layerfs sandbox close $SB') and create another" \
                lfs workspace exec "$SB" main -- true
        logged "$SB" "cannot start 'true': cannot join the namespaces the command runs in"
        # What the message says to do.
        lfs sandbox close "$SB" >/dev/null
else
        echo "   not here: joining a Sandbox's namespaces (the namespaces runtime's; this is $runtime)"
fi
assert_nothing_left "failed starts"
finish
