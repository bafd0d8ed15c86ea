#!/usr/bin/env bash
# test-runner: alone (it sets the host's fs.suid_dumpable to 1, which makes every execute-only program dumpable: test_spawn_caps.sh beside it saw one read)
# Attack: a command that is root in its Sandbox's user namespace (LAYERFS_COMMAND_UID=0,
# refused since: the command uid is 1 or more) takes the daemon's fds from the child that starts the next command. That child is a
# copy (fork, or clone3 without CLONE_VM: LAYERFS_NO_CLONE3=1, kernels that refuse a
# child sharing memory) or a sharer (lfs_clone3_shared) of the daemon's memory, holding
# every fd of the daemon until its execve; between its setns into the Sandbox's user
# namespace and its setresuid to the command identity its credentials belong to that
# namespace, where the command's root has CAP_SYS_PTRACE, so pidfd_getfd, ptrace and
# process_vm_writev pass the kernel's check unless the memory is not dumpable.
# spawn_steal.c watches ns_last_pid and tries pidfd_getfd on fds 3-11 of each new
# process. Before: with LAYERFS_NO_CLONE3=1 it got the daemon's fds (the store, the
# control socket, host directories) within a few dozen commands.
# Fixed by: child_run makes the memory not dumpable first, on every path (it was only
# shared_spawn_main's), before it joins any namespace.
# Argument: seconds per attempt (default 5).
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes

seconds=${1:-5}
# fs.suid_dumpable=1 (a host's choice, for debugging): the kernel makes a process that
# changes its identity dumpable again, so the child's setresuid undid its PR_SET_DUMPABLE.
dumpable=$(cat /proc/sys/fs/suid_dumpable)
TEARDOWN_EXTRA="echo $dumpable >/proc/sys/fs/suid_dumpable"
echo 1 >/proc/sys/fs/suid_dumpable
cc -O2 -Wall -Wextra -Werror -o "$WORK/spawn_steal" "$(dirname "$0")/spawn_steal.c"
mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# attempt LABEL [VAR=VALUE...]: the attacker runs while commands start, in a Sandbox
# whose daemon has the given environment.
attempt() {
        local label=$1 sb attacker n=0
        shift
        sb=$(env "$@" "$LAYERFS" sandbox create)
        lfs workspace mount "$sb" main >/dev/null
        install -m 0755 "$WORK/spawn_steal" "$LAYERFS_HOME/sandboxes/p-$sb/tmp/spawn_steal"
        lfs workspace exec "$sb" main -- sh -c '$TMPDIR/spawn_steal '"$seconds" >"$WORK/$label.out" 2>&1 &
        attacker=$!
        # Commands start until the attacker is done (it ends at its first theft).
        while kill -0 "$attacker" 2>/dev/null; do
                lfs workspace exec "$sb" main -- true
                n=$((n + 1))
        done
        wait "$attacker" || true
        # What the daemon holds (its log, records, sockets, host directories): none of it
        # may be in the attacker's hands.
        local daemon fd target stolen=""
        daemon=$(records "SELECT pid FROM sandboxes WHERE number=$sb")
        for fd in /proc/"$daemon"/fd/*; do
                target=$(readlink "$fd") || continue
                case "$target" in /dev/null | /dev/pts/* | pipe:* | anon_inode:*) continue ;; esac
                if grep -qxF -- "$target" <(awk '$1 == "got" { $1 = $2 = $3 = ""; sub(/^ +/, ""); print }' "$WORK/$label.out"); then
                        stolen="$stolen $target"
                fi
        done
        lfs workspace unmount "$sb" main >/dev/null
        lfs sandbox close "$sb" --force >/dev/null
        echo "$label: $n commands started; $(tail -1 "$WORK/$label.out"); fds taken: $(grep -c '^got' "$WORK/$label.out" || true)"
        grep -q '^watched' "$WORK/$label.out" || fail "$label: the attacker did not run: $(cat "$WORK/$label.out")"
        if [ -n "$stolen" ]; then
                echo "FAIL: $label: a command took the daemon's fds from the child starting a command:$stolen" >&2
                failed="$failed $label"
        else
                ok
        fi
}
failed=""
attempt fork LAYERFS_NO_CLONE3=1
attempt native-fork LAYERFS_RUNTIME=native LAYERFS_NO_CLONE3=1
attempt native-shared LAYERFS_RUNTIME=native
attempt shared
assert_no_sandbox_left "after the attacks"
[ -z "$failed" ] || fail "the daemon's fds were taken in:$failed"
finish
