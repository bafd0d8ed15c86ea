#!/usr/bin/env bash
# What the benchmarks share: where the build is, the refusals before anything starts,
# the traps that make the caller's cleanup run however the script ends, and timing.
# Sourced by bench/*.sh after `set -euo pipefail; set -o errtrace`.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
LAYERFS="$BUILD/layerfs"

# bench_need_built BIN...: each (a name in the build directory) must exist.
bench_need_built() {
        local bin
        for bin in "$@"; do
                [ -x "$BUILD/$bin" ] || {
                        echo "bench: $BUILD/$bin is missing; run 'make' first" >&2
                        exit 1
                }
        done
}

# bench_need_root WHY: refuse to start unless root.
bench_need_root() {
        [ "$(id -u)" = 0 ] || {
                echo "bench: $(basename "$0") needs root ($1)" >&2
                exit 1
        }
}

# bench_traps: the caller's `cleanup` runs on exit, ^C and kill alike; a failing
# command is named.
bench_traps() {
        trap cleanup EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        trap 'echo "bench: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
}

# bench_fresh_fs TOP: a new ext4 filesystem (mkfs.ext4's defaults, in a sparse file
# TOP/fs.img on the build's disk) mounted at TOP/fs, FS_MOUNTED set; the caller's cleanup
# calls bench_fresh_fs_remove TOP. A filesystem of its own, because on one that others
# churn a create costs what they deleted minutes before (bench/README.md).
bench_fresh_fs() {
        truncate -s 16G "$1/fs.img"
        mkfs.ext4 -q -F "$1/fs.img"
        mkdir "$1/fs"
        mount -o loop "$1/fs.img" "$1/fs"
        FS_MOUNTED=1
}

FS_MOUNTED= # never from the environment: cleanup would unmount what it did not mount
# bench_fresh_fs_remove TOP: unmounts what bench_fresh_fs mounted, if it did.
bench_fresh_fs_remove() {
        if [[ -n ${FS_MOUNTED:-} ]]; then
                umount "$1/fs" || umount -l "$1/fs"
        fi
}

# bench_stock_env: layerfs and git as they come, whatever the caller's environment and
# configuration (~/.gitconfig, /etc/gitconfig, a repository from the environment: make may
# run inside a git hook; the caller's home and project must not leak in); sort order and
# decimal points in C.
bench_stock_env() {
        export LC_ALL=C
        unset LAYERFS_NO_URING LAYERFS_HOME LAYERFS_PROJECT
        export LAYERFS_AUTHOR="bench <bench@localhost>"
        unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY
        export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
        export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
        export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
}

# bench_work_home NAME: WORK, a new directory beside the build (never a tmpfs /tmp) that
# the command identity passes through to the Workspaces, with a home of its own in it
# and, as LAYERFS_CGROUP_ROOT, a cgroup root of this run's (bench_cgroup_mount first).
bench_work_home() {
        mkdir -p "$BUILD"
        WORK=$(mktemp -d "$BUILD/$1.XXXXXX")
        chmod 711 "$WORK"
        export LAYERFS_HOME="$WORK/home" LAYERFS_AUTHOR="bench <bench@localhost>"
        export LAYERFS_CGROUP_ROOT="$CG_MOUNT/layerfs-$1-$$"
        unset LAYERFS_PROJECT LAYERFS_SANDBOX
}

# bench_sandbox_traps: bench_traps with a cleanup that removes BENCH_TREE (a tree made
# in memory to import, if set), closes the Sandboxes and removes the cgroup root
# LAYERFS_CGROUP_ROOT and WORK (bench_remove_sandboxes); fails the script when anything
# is left.
bench_sandbox_traps() {
        cleanup() {
                local rc=$?
                set +e
                trap - ERR
                [ -z "${BENCH_TREE:-}" ] || rm -rf "$BENCH_TREE"
                bench_remove_sandboxes "$LAYERFS_CGROUP_ROOT" || rc=1
                exit "$rc"
        }
        bench_traps
}

# bench_workspace_home NAME WHY: the start of a script that mounts Workspaces: layerfs
# and its daemon built, root (for WHY), the stock environment, and a home and cgroup
# root of its own (bench_work_home NAME).
bench_workspace_home() {
        bench_need_built layerfs layerfs-daemon
        bench_need_root "$2"
        bench_stock_env
        bench_cgroup_mount
        bench_work_home "$1"
}

# bench_daemon_pid N: the pid of Sandbox N's daemon.
bench_daemon_pid() { sqlite3 "$LAYERFS_HOME/home.db" "SELECT pid FROM sandboxes WHERE number = $1"; }

# bench_remove_sandboxes CGROUP...: a cleanup's work for the scripts that make Sandboxes:
# closes every Sandbox of $LAYERFS_HOME, ends and removes each cgroup tree given, and
# removes $WORK unless a mount is left below it. Fails (1) when anything is left, saying
# what.
bench_remove_sandboxes() {
        local n cg rc=0
        for n in $(sqlite3 "$LAYERFS_HOME/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do
                "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1
        done
        for cg in "$@"; do
                [ -d "$cg" ] || continue
                echo 1 >"$cg/cgroup.kill"
                sleep 0.3
                find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
                [ -d "$cg" ] && echo "bench: $cg is left" >&2 && rc=1
        done
        if grep -qF "$WORK" /proc/mounts; then
                echo "bench: mounts left under $WORK" >&2
                rc=1
        else
                rm -rf --one-file-system "$WORK"
        fi
        return "$rc"
}

# Microseconds since the epoch, as an integer so bash can subtract.
# bench_cgroup_mount: CG_MOUNT, where cgroup2 is mounted (the unified directory of a
# hybrid layout); exits when there is none.
bench_cgroup_mount() {
        CG_MOUNT=$(findmnt -n -t cgroup2 -o TARGET /sys/fs/cgroup 2>/dev/null || findmnt -n -t cgroup2 -o TARGET | head -1)
        [ -n "$CG_MOUNT" ] || {
                echo "bench: no cgroup2 mount" >&2
                exit 1
        }
}

now_us() { echo "${EPOCHREALTIME/./}"; }

# median N...: the middle value.
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

# ratio A B: A/B with two decimals, "-" when either is missing or B is 0.
ratio() {
        if [ "$1" = - ] || [ "$2" = - ] || [ "$2" = 0 ]; then
                echo -
        else
                awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
        fi
}
