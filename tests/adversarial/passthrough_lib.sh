# Shared by the attacks on FUSE passthrough (test_passthrough_*.sh): each runs on the
# daemon's own loop with passthrough asked: the dev loop, or its rings when
# LAYERFS_FUSE_TRANSPORT=uring says so. Sourced after tests/e2e/lib.sh.
# shellcheck shell=bash
source "$(dirname "${BASH_SOURCE[0]}")/daemon_lib.sh"
[ "${LAYERFS_FUSE_TRANSPORT:-}" = uring ] || export LAYERFS_FUSE_TRANSPORT=dev
export LAYERFS_FUSE_PASSTHROUGH=1
[ "$("$LAYERFS" --json runtime status | json_get 'j["kernel"]["kernel:fuse-passthrough"]')" = True ] ||
        skip "the kernel has no FUSE passthrough (CONFIG_FUSE_PASSTHROUGH, Linux 6.9)"

# require_passthrough N: skips unless Sandbox N's Workspace passes data through.
require_passthrough() {
        grep -q "passthrough: on" <<<"$(lfs sandbox log "$1")" || skip "the mount does not pass through"
}

# start_passthrough_sandbox PROJECT: start_sandbox (daemon_lib.sh: Sandbox N, Workspace
# WS, daemon DPID), skipped unless its Workspace passes data through.
start_passthrough_sandbox() {
        start_sandbox "$1"
        require_passthrough "$N"
}

# kill_commands_at_teardown: the teardown kills what the test's commands left running
# (a writer or mapper held in the middle of its work) before it unmounts.
kill_commands_at_teardown() {
        # shellcheck disable=SC2016
        TEARDOWN_EXTRA='for leaf in "$CGR"/*/cmd-*; do echo 1 >"$leaf/cgroup.kill"; done 2>/dev/null'
}

# abort_fuse_connections N...: aborts FUSE connections N... (/sys/fs/fuse/connections,
# through a fusectl mounted in a mount namespace of its own: none is on this host).
abort_fuse_connections() {
        [ "$#" -gt 0 ] || return 0
        # shellcheck disable=SC2016
        unshare -m sh -c 'mount -t fusectl fusectl /sys/fs/fuse/connections &&
                for c in "$@"; do echo 1 >/sys/fs/fuse/connections/$c/abort; done' sh "$@"
}
