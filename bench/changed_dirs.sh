#!/usr/bin/env bash
# Memory after one change in each of many big directories (issue 18's scale item): DIRS
# directories (20) of PER_DIR files (5,000) each; a Workspace is mounted, every file is
# listed with its attributes (ls -l's walk), one file is made in each directory (a new name each round), the
# kernel forgets what it holds (drop_caches: FORGET for each), then the Workspace's
# status is taken and its commit made, the kernel forgetting again after each. Each row
# gives, at one step, what the daemon holds of the namespace (list_workspaces: inodes,
# metadata_bytes) and its resident memory (VmRSS), and the step's wall time.
# Usage: bench/changed_dirs.sh [DIRS [PER_DIR]]. BENCH_COMPARE=DIR, another build
# directory (an older commit's), runs each round with its layerfs and daemon too,
# alternating with this build's, on the same project; BENCH_RUNS rounds (2).
# Needs root (FUSE). It reports and never judges: it exits non-zero when a command
# fails, never because of a figure.
set -euo pipefail
set -o errtrace

DIRS=${1:-20}
PER_DIR=${2:-5000}
RUNS=${BENCH_RUNS:-2}

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_workspace_home changed "FUSE Workspaces"
BENCH_TREE=""
bench_sandbox_traps

lfs() { "$LAYERFS" "$@"; }
forget() {
        sync
        echo 2 >/proc/sys/vm/drop_caches
        stat "$ws" >/dev/null
}
ROW='%-10s %-4s %-22s %9s %9s %16s %9s\n'
# row STEP START_US: the figures after STEP, which began at START_US.
row() {
        local list inodes bytes rss
        list=$(lfs --json sandbox list_workspaces "$n")
        read -r inodes bytes < <(python3 -c 'import json,sys; w=json.load(sys.stdin)[0]; print(w["inodes"], w["metadata_bytes"])' <<<"$list")
        rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
        # shellcheck disable=SC2059 # one format for every row keeps the columns aligned
        printf "$ROW" "$(basename "$build")" "$run" "$1" \
                "$(awk -v u=$(($(now_us) - $2)) 'BEGIN { printf "%.2f", u / 1e6 }')" "$inodes" "$bytes" "$rss"
}

BENCH_TREE=$(mktemp -d /dev/shm/layerfs-changed.XXXXXX)
python3 - "$BENCH_TREE" "$DIRS" "$PER_DIR" <<'EOF'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "d%03d" % d)
    os.makedirs(p)
    for f in range(per):
        with open(os.path.join(p, "f%06d" % f), "w") as fh:
            fh.write("%d/%d\n" % (d, f))
EOF
lfs project init changed --from "$BENCH_TREE" >/dev/null
rm -rf "$BENCH_TREE"
BENCH_TREE=""
export LAYERFS_PROJECT=changed
BUILDS=("$BUILD")
[ -z "${BENCH_COMPARE:-}" ] || BUILDS=("$BENCH_COMPARE" "$BUILD")
echo "$DIRS directories of $PER_DIR files; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2059
printf "$ROW" build run step "wall (s)" inodes metadata_bytes "RSS (MB)"
for ((run = 1; run <= RUNS; run++)); do
        for build in "${BUILDS[@]}"; do
                LAYERFS=$build/layerfs
                export LAYERFS_DAEMON=$build/layerfs-daemon
                n=$(lfs sandbox create)
                ws=$(lfs workspace mount "$n" main)
                pid=$(bench_daemon_pid "$n")
                start=$(now_us)
                row mounted "$start"
                ls -lR "$ws" >/dev/null
                row "ls -lR" "$start"
                start=$(now_us)
                forget
                row "forgotten" "$start"
                start=$(now_us)
                for ((d = 0; d < DIRS; d++)); do
                        printf 'new\n' >"$ws/$(printf 'd%03d' "$d")/new-$run-$(basename "$build")"
                done
                forget
                row "1 made/dir, forgotten" "$start"
                start=$(now_us)
                [ "$(lfs workspace status "$n" main | wc -l)" = "$DIRS" ] || {
                        echo "bench: status does not list the $DIRS files made" >&2
                        exit 1
                }
                row "status" "$start"
                start=$(now_us)
                lfs workspace commit "$n" main -m "one file per directory" >/dev/null
                forget
                row "commit, forgotten" "$start"
                lfs sandbox close "$n" --force >/dev/null
        done
done
