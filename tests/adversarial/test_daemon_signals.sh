#!/usr/bin/env bash
# A command signals its own daemon: SIGTERM, SIGINT and SIGHUP close a Sandbox (its
# daemon reads them through a signalfd, docs/runtime.md "Teardown"), so a command that
# could send them could close its Sandbox, or another's, without the token. It cannot:
# under native the daemon is root's and the command the command identity's (kill is
# EPERM); under namespaces the daemon is not in the Sandbox's pid namespace at all (its
# pid names nothing there, or another process of the Sandbox). Checked under both: each
# signal by the daemon's pid, by its pidfd where the command can open one, and to every
# process it may signal (kill -1, namespaces only: under native that would reach every
# process of the command identity on the host); the daemon lives, its log names no signal,
# and calls still work.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=sig
lfs project init sig >/dev/null

for runtime in native namespaces; do
        n=$(LAYERFS_RUNTIME=$runtime main_sandbox)
        daemon=$(records "SELECT pid FROM sandboxes WHERE number=$n")
        broadcast=""
        [ "$runtime" = native ] || broadcast='kill -s TERM -1 2>/dev/null && echo "sent TERM to -1";'
        out=$(in_main "$n" sh -c "
                for s in TERM INT HUP; do
                        kill -s \$s $daemon 2>/dev/null && echo \"sent \$s to $daemon\"
                done
                /usr/bin/python3 -c '
import os, signal, sys
try:
    fd = os.pidfd_open($daemon)
except OSError:
    sys.exit(0)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    try:
        signal.pidfd_send_signal(fd, s)
        print(\"sent\", s.name, \"through a pidfd\")
    except OSError:
        pass
'
                $broadcast
                true" 2>&1 || true)
        case "$out" in *sent*) succeeded "signal its daemon ($runtime): $out" ;; esac
        [ -d "/proc/$daemon" ] || succeeded "end its daemon ($runtime)"
        ! grep -q "from pid" "$LAYERFS_HOME/sandboxes/sig-$n/daemon.log" ||
                succeeded "close its Sandbox by a signal ($runtime): $(grep "from pid" "$LAYERFS_HOME/sandboxes/sig-$n/daemon.log")"
        assert_eq "$(in_main "$n" echo alive)" alive "an exec after the command's signals ($runtime)"
        lfs sandbox close "$n" --force >/dev/null
done
no_attack_succeeded
assert_nothing_left "after the Sandboxes whose commands tried to signal their daemon"
finish
