# Shared by the attacks on a Sandbox's daemon (test_daemon_*.sh): one project, one
# Sandbox with main mounted, and what the daemon holds (RSS, fds, threads) read from
# /proc. Sourced after tests/e2e/lib.sh.
# shellcheck shell=bash

# start_sandbox PROJECT: a project with one file, Sandbox N mounted at WS, daemon DPID.
start_sandbox() {
        use_private_sandboxes
        export LAYERFS_PROJECT=$1
        mkdir -p "$WORK/src"
        echo seed >"$WORK/src/seed"
        lfs project init "$1" --from "$WORK/src" >/dev/null
        N=$(lfs sandbox create)
        WS=$(lfs workspace mount "$N" main)
        DPID=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" \
                "SELECT pid FROM sandboxes WHERE project='$1' AND number=$N")
        [ -d "/proc/$DPID" ] || fail "no daemon for sandbox $N (pid '$DPID')"
}

# In KiB, as /proc shows it.
daemon_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }
daemon_threads() { awk '/^Threads:/ {print $2}' "/proc/$DPID/status"; }
# The threads that serve a control connection (the daemon names them).
daemon_connection_threads() { cat /proc/"$DPID"/task/*/comm 2>/dev/null | grep -c '^lfs-connection$' || true; }
daemon_fds() { ls "/proc/$DPID/fd" | wc -l; }

# Runs python code inside the Workspace as the command identity; prints its output.
in_ws() { lfs workspace exec "$N" main -- python3 -c "$1"; }

# Every FORGET the kernel owes the daemon is sent once the inodes are evicted: drop the
# dentry and inode caches, then one more request so that the queue is served.
settle_forgets() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
        stat "$WS" >/dev/null
        lfs workspace status "$N" main >/dev/null
}

# The daemon has exited (a zombie until init reaps it counts as gone).
daemon_gone() { [ ! -d "/proc/$DPID" ] || grep -q '^State:.*Z' "/proc/$DPID/status" 2>/dev/null; }

# A failed assertion about the daemon's RSS. Built with ASan (make sanitize), the daemon
# keeps freed memory in ASan's quarantine and its RSS says nothing about our frees: the
# figure is printed, not asserted.
rss_fail() {
        # (Not `ldd | grep -q`: grep -q leaves at the first match, ldd dies of SIGPIPE
        # writing the rest, and under pipefail the test failed under ASan now and then.)
        if [[ "$(ldd "$BUILD/layerfs-daemon" 2>/dev/null)" == *libasan* ]]; then
                echo "not asserted under ASan: $*"
        else
                fail "$*"
        fi
}
