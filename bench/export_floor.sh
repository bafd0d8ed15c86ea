#!/usr/bin/env bash
# The export of bench/store_vs_git.sh (10,000 files of 4 KiB in 100 directories) beside
# its kernel floor (build/export-floor: the same creates and writes with nothing of the
# Store), each with io_uring and with plain system calls, alternating run by run on a new
# ext4 filesystem. It shows how much of the export the kernel's create is, and what the
# ring can win on that create at most: the ceiling of the export's io_uring ratio.
# Usage: bench/export_floor.sh [WAY...] (export-floor's ways; the Store's shape and plain
# by default). It reports and never judges.
set -euo pipefail
set -o errtrace

TRIALS=${TRIALS:-7}
DIRS=100 FILES_PER_DIR=100 FILE_SIZE=4096

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs export-floor
bench_need_root "it mounts a filesystem of its own"
bench_stock_env
FLOOR="$BUILD/export-floor"
# The Store's shape (uring_io.c): batches of 64 chains, two in flight, io-wq workers
# capped at the CPU count, files in the tree's order.
WAYS=("$@")
[[ ${#WAYS[@]} -gt 0 ]] || WAYS=(plain "ring:64:2:$(nproc):d")

mkdir -p "$BUILD"
TOP=$(mktemp -d "$BUILD/export-floor.XXXXXX")
cleanup() {
        bench_fresh_fs_remove "$TOP"
        rm -rf --one-file-system "$TOP"
}
bench_traps
# As store_vs_git.sh: a new filesystem, so that no other program's deletes weigh on the
# creates. Nothing is deleted until the end.
bench_fresh_fs "$TOP"
WORK="$TOP/fs"

for ((d = 0; d < DIRS; d++)); do
        printf -v dir '%s/base/d%02d' "$WORK" "$d"
        mkdir -p "$dir"
        head -c $((FILES_PER_DIR * FILE_SIZE)) /dev/urandom | split -b "$FILE_SIZE" -a 2 -d - "$dir/f"
done
"$LAYERFS" --home "$WORK/home" project init bench --from "$WORK/base" >/dev/null

# run NAME CMD...: times CMD (wall, and CPU and context switches of the process and its
# threads, io-wq workers included) after a sync, appending "wall_us cpu_us switches" to
# $WORK/NAME.
# (time's own wall clock counts only hundredths.)
run() {
        local name=$1 out start end
        shift
        sync
        start=$EPOCHREALTIME
        out=$(/usr/bin/time -f '%U %S %c %w' "$@" 2>&1 >/dev/null | tail -1)
        end=$EPOCHREALTIME
        awk -v o="$out" -v s="$start" -v e="$end" \
                'BEGIN { split(o, f, " "); printf "%d %d %d\n", (e - s) * 1e6, (f[1] + f[2]) * 1e6, f[3] + f[4] }' \
                >>"$WORK/$name"
}

names=(export-ring export-plain)
# OLD_LAYERFS=path: another build's export beside this one's (the same import, the same runs).
[[ -z ${OLD_LAYERFS:-} ]] || names+=(old-export-ring old-export-plain)
for way in "${WAYS[@]}"; do names+=("floor-$way"); done
echo "export and its floor: $DIRS x $FILES_PER_DIR files of $FILE_SIZE bytes, $TRIALS trials in rotating order"
echo "$("$LAYERFS" --version), kernel $(uname -r), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((n = 1; n <= TRIALS; n++)); do
        for ((i = 0; i < ${#names[@]}; i++)); do
                name=${names[(i + n - 1) % ${#names[@]}]}
                case $name in
                export-ring) run "$name" "$LAYERFS" --home "$WORK/home" --project bench branch export main "$WORK/x$n-ring" ;;
                export-plain) LAYERFS_NO_URING=1 run "$name" "$LAYERFS" --home "$WORK/home" --project bench branch export main "$WORK/x$n-plain" ;;
                old-export-ring) run "$name" "$OLD_LAYERFS" --home "$WORK/home" --project bench branch export main "$WORK/o$n-ring" ;;
                old-export-plain) LAYERFS_NO_URING=1 run "$name" "$OLD_LAYERFS" --home "$WORK/home" --project bench branch export main "$WORK/o$n-plain" ;;
                floor-*) run "$name" "$FLOOR" "$WORK/f$n-${name#floor-}" "${name#floor-}" "$DIRS" "$FILES_PER_DIR" "$FILE_SIZE" ;;
                esac
        done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# median FILE COLUMN
median() { cut -d' ' -f"$2" "$1" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-22s %10s %10s %14s  %s\n' run "wall (s)" "CPU (s)" "ctx switches" "each trial's wall (ms)"
for name in "${names[@]}"; do
        awk -v n="$name" -v w="$(median "$WORK/$name" 1)" -v c="$(median "$WORK/$name" 2)" -v s="$(median "$WORK/$name" 3)" \
                -v all="$(awk '{ printf "%s%d", (NR > 1 ? " " : ""), $1 / 1000 }' "$WORK/$name")" \
                'BEGIN { printf "%-22s %10.3f %10.3f %14d  %s\n", n, w / 1e6, c / 1e6, s, all }'
done
ratio() { awk -v a="$(median "$WORK/$1" 1)" -v b="$(median "$WORK/$2" 1)" 'BEGIN { printf "%.2f", a / b }'; }
echo "export: plain / io_uring = $(ratio export-plain export-ring)x (medians of wall time)"
[[ -z ${OLD_LAYERFS:-} ]] || echo "old export: plain / io_uring = $(ratio old-export-plain old-export-ring)x"
if [[ ${#WAYS[@]} -ge 2 ]]; then
        for way in "${WAYS[@]:1}"; do
                echo "floor: ${WAYS[0]} / $way = $(ratio "floor-${WAYS[0]}" "floor-$way")x"
        done
fi
