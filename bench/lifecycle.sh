#!/usr/bin/env bash
# A Sandbox's lifecycle through the CLI, step by step, beside the kernel's floors measured
# in the same run (issue 17):
# - CYCLES cycles of: sandbox create, workspace mount, the first exec of 'true', a second
#   exec, unmount, close (of a Sandbox now idle); create-to-first-exec is the first three
#   together. Each step is timed from bash (EPOCHREALTIME), so it includes the CLI's start.
# - close of a Sandbox holding PROCS processes (half setsid + double-forked), KILL_CYCLES
#   times, beside cgroup.kill of the same tree in a bare cgroup (the floor).
# - the anchors: posix_spawn of /bin/true, mkdir of a cgroup + clone3(CLONE_INTO_CGROUP)
#   of /bin/true into it + its wait + rmdir (build/lifecycle-floor, bench/lifecycle_floor.c),
#   the CLI's own start (`layerfs --version`) and /bin/true started by this shell (what the
#   exec rows pay for their process beyond the CLI's), and a process's move from one cgroup
#   to another (MOVES times, 0.1 s apart).
# - create and create-to-first-exec with a pool of POOL Sandboxes made ahead (LAYERFS_POOL),
#   through the CLI and the library.
# - project list_sandboxes with LIST_COUNTS open Sandboxes (LIST_RUNS lists each).
# - the same cycle through the C library from one process (build/lifecycle-lib,
#   bench/lifecycle_lib.c): each step without a CLI process's start, as a long-lived client
#   (an agent, the HTTP API) pays it.
# Medians and p99 (nearest rank) in ms. The runtime is the home's default
# (LAYERFS_RUNTIME overrides it). It reports and never judges: it exits non-zero only when
# something fails or is left. Needs root (cgroups, FUSE).
set -euo pipefail
set -o errtrace

CYCLES=${CYCLES:-100}
KILL_CYCLES=${KILL_CYCLES:-10} # each makes a tree of PROCS processes twice
PROCS=${PROCS:-1000}
LIST_COUNTS=${LIST_COUNTS:-"50 200"}
LIST_RUNS=${LIST_RUNS:-20}
MOVES=${MOVES:-20} # 0.1 s apart each

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs layerfs-daemon lifecycle-floor lifecycle-lib
bench_need_root "cgroups, FUSE"
bench_cgroup_mount
FLOOR_BIN="$BUILD/lifecycle-floor"
LIB_BIN="$BUILD/lifecycle-lib"

bench_work_home lifecycle
FLOOR="$CG_MOUNT/layerfs-lifecycle-floor-$$"

cleanup() {
        local rc=$?
        set +e
        trap - ERR
        bench_remove_sandboxes "$LAYERFS_CGROUP_ROOT" "$FLOOR" || rc=1
        exit "$rc"
}
bench_traps

# stats US...: "median p99" of microsecond samples, in ms with one decimal.
stats() {
        printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
                p = int((99 * NR + 99) / 100); if (p > NR) p = NR
                printf "%.1f %.1f\n", v[int((NR + 1) / 2)] / 1000, v[p] / 1000 }'
}
# us_stats "MEDIAN_US P99_US": the same from lifecycle-floor's line.
us_stats() { awk '{ printf "%.1f %.1f\n", $1 / 1000, $2 / 1000 }' <<<"$1"; }

row() { # row LABEL "MEDIAN P99" [NOTE]
        local m p
        read -r m p <<<"$2"
        printf '%-46s %9s %9s  %s\n' "$1" "$m" "$p" "${3:-}"
}

"$LAYERFS" project init p >/dev/null
runtime=$(LAYERFS_PROJECT=p "$LAYERFS" runtime status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["default"])')
runtime=${LAYERFS_RUNTIME:-$runtime}
echo "layerfs lifecycle: runtime $runtime, kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# The anchors.
mkdir "$FLOOR"
a_spawn=$(us_stats "$("$FLOOR_BIN" spawn "$CYCLES")")
a_clone3=$(us_stats "$("$FLOOR_BIN" clone3 "$CYCLES" "$FLOOR")")
a_move=$(us_stats "$("$FLOOR_BIN" move "$MOVES" "$FLOOR")")
cli=() host=()
for ((i = 0; i < CYCLES; i++)); do
        t0=$(now_us)
        "$LAYERFS" --version >/dev/null
        t1=$(now_us)
        /bin/true
        t2=$(now_us)
        cli+=($((t1 - t0)))
        host+=($((t2 - t1)))
done
a_cli=$(stats "${cli[@]}")
a_host=$(stats "${host[@]}")

# The cycles.
create=() mount=() first=() exec=() unmount=() close=() to_first=()
for ((i = 0; i < CYCLES; i++)); do
        t0=$(now_us)
        sb=$("$LAYERFS" sandbox create)
        t1=$(now_us)
        "$LAYERFS" workspace mount "$sb" main >/dev/null
        t2=$(now_us)
        "$LAYERFS" workspace exec "$sb" main -- true
        t3=$(now_us)
        "$LAYERFS" workspace exec "$sb" main -- true
        t4=$(now_us)
        "$LAYERFS" workspace unmount "$sb" main >/dev/null
        t5=$(now_us)
        "$LAYERFS" sandbox close "$sb" >/dev/null
        t6=$(now_us)
        create+=($((t1 - t0)))
        mount+=($((t2 - t1)))
        first+=($((t3 - t2)))
        exec+=($((t4 - t3)))
        unmount+=($((t5 - t4)))
        close+=($((t6 - t5)))
        to_first+=($((t3 - t0)))
done

# The same cycles through the library, one process: "STEP MEDIAN_US P99_US" lines.
lib_lines=$("$LIB_BIN" "$CYCLES")
lib_stats() { awk -v s="$1" '$1 == s { printf "%.1f %.1f\n", $2 / 1000, $3 / 1000 }' <<<"$lib_lines"; }

# With a pool (LAYERFS_POOL=$POOL): the create takes a Sandbox made ahead. Through the CLI
# its detached filler makes the next one; the next cycle starts once it is done (flock on
# the fillers' lock, HOME/pool/fillers.lock, untimed), so each create finds the pool full, as a fleet's does
# when its creates come slower than one fill. Through the library the pool is filled
# before each cycle, untimed.
POOL=${POOL:-2}
pool_filled() { flock "$LAYERFS_HOME/pool/fillers.lock" true; }
pool_create=() pool_to_first=()
for ((i = 0; i < CYCLES; i++)); do
        pool_filled
        t0=$(now_us)
        sb=$(LAYERFS_POOL=$POOL "$LAYERFS" sandbox create)
        t1=$(now_us)
        "$LAYERFS" workspace mount "$sb" main >/dev/null
        "$LAYERFS" workspace exec "$sb" main -- true
        t3=$(now_us)
        "$LAYERFS" workspace unmount "$sb" main >/dev/null
        "$LAYERFS" sandbox close "$sb" >/dev/null
        pool_create+=($((t1 - t0)))
        pool_to_first+=($((t3 - t0)))
done
pool_lib_lines=$(LAYERFS_POOL=$POOL "$LIB_BIN" "$CYCLES")
pool_lib_stats() { awk -v s="$1" '$1 == s { printf "%.1f %.1f\n", $2 / 1000, $3 / 1000 }' <<<"$pool_lib_lines"; }
pool_filled
for sb in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT number FROM sandboxes WHERE state='pooled'"); do
        "$LAYERFS" sandbox close "$sb" >/dev/null
done

# Close of PROCS processes against cgroup.kill of the same tree, in turn.
TREE="i=0; while [ \$i -lt $((PROCS / 2)) ]; do sleep 1000 & setsid sh -c 'sleep 1000 &'; i=\$((i+1)); done"
count_procs() { find "$1" -name cgroup.procs -exec cat {} + | wc -l; }
cgroup_of() { sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT cgroup FROM sandboxes WHERE number=$1"; }
kill_floor=() kill_close=()
for ((i = 0; i < KILL_CYCLES; i++)); do
        kill_floor+=("$("$FLOOR_BIN" kill 1 "$FLOOR" "$PROCS" | cut -d' ' -f1)")
        sb=$("$LAYERFS" sandbox create)
        cgroup=$(cgroup_of "$sb")
        "$LAYERFS" workspace mount "$sb" main >/dev/null
        "$LAYERFS" workspace exec "$sb" main -- sh -c "$TREE" </dev/null >/dev/null 2>&1
        n=$(count_procs "$cgroup")
        [ "$n" -ge "$PROCS" ] || {
                echo "bench: only $n processes in the Sandbox" >&2
                exit 1
        }
        t0=$(now_us)
        "$LAYERFS" sandbox close "$sb" --force >/dev/null
        kill_close+=($(($(now_us) - t0)))
        [ ! -d "$cgroup" ] || {
                echo "bench: the Sandbox's cgroup is left after close" >&2
                exit 1
        }
done
rmdir "$FLOOR"

# Listing: LIST_COUNTS open Sandboxes (each with its daemon), LIST_RUNS lists at each.
list_rows=()
open=()
for count in $LIST_COUNTS; do
        while [ "${#open[@]}" -lt "$count" ]; do open+=("$("$LAYERFS" sandbox create)"); done
        listed=$("$LAYERFS" project list_sandboxes --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
        [ "$listed" = "$count" ] || {
                echo "bench: list_sandboxes listed $listed of $count Sandboxes" >&2
                exit 1
        }
        times=()
        for ((i = 0; i < LIST_RUNS; i++)); do
                t0=$(now_us)
                "$LAYERFS" project list_sandboxes >/dev/null
                times+=($(($(now_us) - t0)))
        done
        list_rows+=("$count|$(stats "${times[@]}")")
done
for sb in "${open[@]}"; do "$LAYERFS" sandbox close "$sb" >/dev/null; done

echo
printf '%-46s %9s %9s\n' "step ($CYCLES cycles; ms)" median p99
row "sandbox create" "$(stats "${create[@]}")"
row "workspace mount" "$(stats "${mount[@]}")"
row "workspace exec -- true, the first" "$(stats "${first[@]}")"
row "workspace exec -- true" "$(stats "${exec[@]}")"
row "workspace unmount" "$(stats "${unmount[@]}")"
row "sandbox close (idle)" "$(stats "${close[@]}")"
row "create to first exec (create+mount+exec)" "$(stats "${to_first[@]}")" "target < 20"
row "sandbox close --force, $PROCS processes" "$(stats "${kill_close[@]}")" "($KILL_CYCLES cycles)"
row "library: create" "$(lib_stats create)"
row "library: mount" "$(lib_stats mount)"
row "library: exec -- true, the first" "$(lib_stats first_exec)"
row "library: exec -- true" "$(lib_stats exec)"
row "library: unmount" "$(lib_stats unmount)"
row "library: close (idle)" "$(lib_stats close)" "target < 10"
row "library: create to first exec" "$(lib_stats create_to_first_exec)" "target < 20"
row "pool $POOL: sandbox create" "$(stats "${pool_create[@]}")" "target < 5"
row "pool $POOL: create to first exec" "$(stats "${pool_to_first[@]}")" "target < 20"
row "pool $POOL, library: create" "$(pool_lib_stats create)" "target < 5"
row "pool $POOL, library: create to first exec" "$(pool_lib_stats create_to_first_exec)" "target < 20"
for r in "${list_rows[@]}"; do
        row "project list_sandboxes, ${r%%|*} open" "${r#*|}" "($LIST_RUNS lists)"
done
echo
printf '%-46s %9s %9s\n' "anchor (same run; ms)" median p99
row "posix_spawn of /bin/true + wait" "$a_spawn"
row "mkdir cgroup + clone3 into it + wait + rmdir" "$a_clone3"
row "a process moved to another cgroup" "$a_move" "($MOVES moves)"
row "cgroup.kill of $PROCS processes + unpopulated" "$(stats "${kill_floor[@]}")" "($KILL_CYCLES cycles)"
row "CLI start (layerfs --version)" "$a_cli"
row "/bin/true from this shell" "$a_host"
echo
ratio_of() { awk -v a="$(cut -d' ' -f1 <<<"$1")" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
cli_plus_spawn=$(awk -v a="$(cut -d' ' -f1 <<<"$a_cli")" -v b="$(cut -d' ' -f1 <<<"$a_spawn")" 'BEGIN { print a + b }')
echo "exec / (CLI start + posix_spawn): $(ratio_of "$(stats "${exec[@]}")" "$cli_plus_spawn") (target <= 2)"
echo "create from the pool / without: $(ratio_of "$(stats "${pool_create[@]}")" "$(stats "${create[@]}" | cut -d' ' -f1)") (CLI), $(ratio_of "$(pool_lib_stats create)" "$(lib_stats create | cut -d' ' -f1)") (library)"
echo "close of $PROCS processes / cgroup.kill floor: $(ratio_of "$(stats "${kill_close[@]}")" \
        "$(stats "${kill_floor[@]}" | cut -d' ' -f1)") (target <= 1.2)"
