#!/usr/bin/env bash
# Lookups in a big directory under memory pressure (issues 16/18): FILES files in one
# directory, a command that lists it once and then `lstat`s every file ROUNDS times (3),
# run in a memory cgroup of LIMIT (40M) and again with no limit. Under the limit the
# kernel reclaims the command's dentries and inodes as it goes and sends FORGET for each;
# the daemon frees their records (evict_child) and makes each again on the next LOOKUP
# of its name. Each row gives the command's wall time, the daemon's CPU time during it
# (user: its own code; system: mostly the FUSE round trips, which a loaded machine
# inflates), the requests it read (its read calls, /proc/PID/io), and what it holds of
# the namespace afterwards (list_workspaces: inodes, metadata_bytes). A second command
# (the rows "list") walks the directory ROUNDS times with os.scandir and lstats each entry
# as it comes, as `ls -l`'s walk of a tree or a build's scan does: each chunk of the
# listing (READDIR or READDIRPLUS) comes after the FORGETs the lstats of the last chunk
# brought. The rows "rlstat" lstat the names in descending order (the kernel forgets
# them in the same order).
# Usage: bench/evict_storm.sh [FILES...] (default 50000 100000 150000: the growth from
# one size to the next is the shape). BENCH_MEMORY sets LIMIT, BENCH_ROUNDS the rounds,
# BENCH_COMMANDS the commands (default "lstat list");
# BENCH_COMPARE=DIR, another build directory (an older commit's), runs each row with its
# layerfs and daemon too, alternating with this build's, on the same project.
# Needs root (FUSE) and a memory controller, cgroup v2's or v1's. It reports and never
# judges: it exits non-zero when a command fails, never because of a timing.
set -euo pipefail
set -o errtrace

SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(50000 100000 150000)
LIMIT=${BENCH_MEMORY:-40M}
ROUNDS=${BENCH_ROUNDS:-3}

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_workspace_home evict "FUSE Workspaces, cgroups"

# The command's memory cgroup: beside the Sandboxes' in cgroup v2 when the memory
# controller is offered there, else in the v1 memory hierarchy (a hybrid host).
if grep -qw memory "$CG_MOUNT/cgroup.controllers" 2>/dev/null; then
        MEMCG=$CG_MOUNT/layerfs-evict-mem-$$
        MEM_MAX=memory.max NO_LIMIT=max
        echo +memory >"$CG_MOUNT/cgroup.subtree_control"
else
        MEMCG_ROOT=$(findmnt -n -t cgroup -O memory -o TARGET | head -1)
        [ -n "$MEMCG_ROOT" ] || {
                echo "bench: no memory controller (cgroup v2 or v1)" >&2
                exit 1
        }
        MEMCG=$MEMCG_ROOT/layerfs-evict-mem-$$
        MEM_MAX=memory.limit_in_bytes NO_LIMIT=-1
fi
tree=""
cleanup() {
        local rc=$?
        set +e
        trap - ERR
        [ -z "$tree" ] || rm -rf "$tree"
        # The command ended before this runs; the cgroup is empty.
        [ -d "$MEMCG" ] && rmdir "$MEMCG"
        bench_remove_sandboxes "$LAYERFS_CGROUP_ROOT" || rc=1
        exit "$rc"
}
bench_traps
mkdir "$MEMCG"

lfs() { "$LAYERFS" "$@"; }
# cpu_ticks PID: its user and system time, in clock ticks; read_calls PID: its reads.
cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
read_calls() { awk '$1 == "syscr:" { print $2 }' "/proc/$1/io"; }
# seconds TICKS: in seconds, two decimals.
seconds() { awk -v t="$1" -v k="$TICK" 'BEGIN { printf "%.2f", t / k }'; }
TICK=$(getconf CLK_TCK)

# storm DIR LIMITED COMMAND: the command (lstat, rlstat or list), in MEMCG with its limit set
# (LIMITED=1) or lifted.
storm() {
        if [ "$2" = 1 ]; then echo "$LIMIT" >"$MEMCG/$MEM_MAX"; else echo "$NO_LIMIT" >"$MEMCG/$MEM_MAX"; fi
        sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$MEMCG" python3 - "$1" "$ROUNDS" "$3" <<'EOF'
import os, sys
d, rounds, command = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if command == "list":
    for _ in range(rounds):
        for e in os.scandir(d):
            e.stat(follow_symlinks=False)
    sys.exit(0)
names = sorted(os.listdir(d), reverse=command == "rlstat")
for _ in range(rounds):
    for n in names:
        os.lstat(os.path.join(d, n))
EOF
}

BUILDS=("$BUILD")
[ -z "${BENCH_COMPARE:-}" ] || BUILDS=("$BENCH_COMPARE" "$BUILD")
read -r -a COMMANDS <<<"${BENCH_COMMANDS:-lstat list}"
ROW='%-8s %-6s %-8s %-10s %9s %9s %9s %9s %9s %16s\n'
# shellcheck disable=SC2059 # one format for every row keeps the columns aligned
printf "$ROW" files command memory build "wall (s)" "user (s)" "sys (s)" requests inodes metadata_bytes
for files in "${SIZES[@]}"; do
        # The tree in memory: ext4 here takes longer to make and remove it than the rounds.
        tree=$(mktemp -d /dev/shm/layerfs-evict.XXXXXX)
        mkdir "$tree/big"
        python3 - "$tree/big" "$files" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "f%07d" % i), "wb") as fh:
        fh.write(b"%d\n" % i)
EOF
        lfs project init "p$files" --from "$tree" >/dev/null
        rm -rf "$tree"
        tree=""
        export LAYERFS_PROJECT=p$files
        for command in "${COMMANDS[@]}"; do for limited in 1 0; do for build in "${BUILDS[@]}"; do
                LAYERFS=$build/layerfs
                export LAYERFS_DAEMON=$build/layerfs-daemon
                n=$(lfs sandbox create)
                ws=$(lfs workspace mount "$n" main)
                pid=$(bench_daemon_pid "$n")
                sync
                echo 2 >/proc/sys/vm/drop_caches
                read -r user0 sys0 < <(cpu_ticks "$pid")
                reads0=$(read_calls "$pid")
                start=$(now_us)
                storm "$ws/big" "$limited" "$command"
                end=$(now_us)
                read -r user1 sys1 < <(cpu_ticks "$pid")
                reads1=$(read_calls "$pid")
                list=$(lfs --json sandbox list_workspaces "$n") || {
                        echo "bench: list_workspaces failed: $list" >&2
                        exit 1
                }
                read -r inodes bytes < <(python3 -c 'import json,sys; w=json.load(sys.stdin)[0]; print(w["inodes"], w["metadata_bytes"])' <<<"$list")
                # shellcheck disable=SC2059
                printf "$ROW" "$files" "$command" "$([ "$limited" = 1 ] && echo "$LIMIT" || echo none)" "$(basename "$build")" \
                        "$(awk -v u=$((end - start)) 'BEGIN { printf "%.2f", u / 1e6 }')" \
                        "$(seconds $((user1 - user0)))" "$(seconds $((sys1 - sys0)))" $((reads1 - reads0)) "$inodes" "$bytes"
                lfs sandbox close "$n" --force >/dev/null
        done; done; done
done
