#!/usr/bin/env bash
# A command makes the kernel send SIGHUP to its daemon. SIGHUP closes a Sandbox (the
# daemon reads it through a signalfd), and the kernel sends SIGHUP and SIGCONT, with no
# permission check, to every member of a process group that becomes orphaned while one
# of its members is stopped (POSIX job control; kernel/exit.c, kill_orphaned_pgrp). A
# command started without a terminal was in its daemon's session and process group: it
# forks a child (in that group), moves itself to a group of its own, lets the child stop,
# and exits; the group, daemon included, is orphaned with a stopped member. Commands now
# start in a session of their own (cgroup/spawn.c). Checked under both runtimes: the
# daemon lives, its log names no signal, and calls still work.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=hup
lfs project init hup >/dev/null

for runtime in native namespaces; do
        n=$(LAYERFS_RUNTIME=$runtime main_sandbox)
        daemon=$(records "SELECT pid FROM sandboxes WHERE number=$n")
        log=$LAYERFS_HOME/sandboxes/hup-$n/daemon.log
        in_main "$n" /usr/bin/python3 -c '
import os, signal
link = os.fork()
if link == 0:
    stopped = os.fork()
    if stopped == 0:
        os.kill(os.getpid(), signal.SIGSTOP)  # stays in the group it was born in
        os._exit(0)
    os.waitpid(stopped, os.WUNTRACED)
    os.setpgid(0, 0)  # the parent in another group of the session: the group is not orphaned
    os._exit(0)  # now it is, with a stopped member
os.waitpid(link, 0)
' >/dev/null 2>&1 || true
        # The kernel's SIGHUP, if any, came as the link exited: a close it starts has logged
        # it by the time an exec is answered, or the daemon has gone.
        if wait_exit "$daemon" 2; then
                succeeded "close its Sandbox ($runtime) by orphaning a process group with a stopped member"
                continue
        fi
        ! grep -q "from pid" "$log" || succeeded "close its Sandbox by a signal ($runtime): $(grep "from pid" "$log")"
        assert_eq "$(in_main "$n" echo alive)" alive "an exec after the command orphaned its process group ($runtime)"
        lfs sandbox close "$n" --force >/dev/null
done
no_attack_succeeded
assert_nothing_left "after the Sandboxes whose commands orphaned their process group"
finish
