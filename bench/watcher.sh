#!/usr/bin/env bash
# What the BPF watcher costs every process of the host: fork + exit + wait of a child that
# exits at once (build/lifecycle-floor fork), timed from this script, outside any Sandbox,
# with 0, 10 and 50 Sandboxes open (LAYERFS_WATCHER=bpf, native runtime). Each of ROUNDS
# rounds opens Sandboxes up to each count in turn and times FORKS forks at each (their
# median), then closes them; the table gives the median over the rounds. Beside it, what
# the kernel counted (BPF_ENABLE_STATS, on only while the forks run): the BPF programs
# that the Sandboxes' daemons hold (their fds' prog_id) and the sum of their mean run
# times, i.e. what they add to every process start and end on the host. On a busy
# machine the wall time of a fork moves by more than that; the kernel's count does not.
# BEFORE_BUILD=DIR measures that build's Sandboxes too, in each round before this one's, in
# a home of its own, so that two builds compare within one run.
# It reports and never judges: it exits non-zero only when something fails or is left.
# Needs root (cgroups, BPF).
set -euo pipefail
set -o errtrace

FORKS=${FORKS:-2000}
ROUNDS=${ROUNDS:-3}
COUNTS=${COUNTS:-"0 10 50"}

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs layerfs-daemon lifecycle-floor
bench_need_root "cgroups, BPF"
bench_cgroup_mount
FLOOR_BIN="$BUILD/lifecycle-floor"

bench_work_home watcher
export LAYERFS_RUNTIME=native
BUILDS=("$LAYERFS")
HOMES=("$LAYERFS_HOME")
if [ -n "${BEFORE_BUILD:-}" ]; then
        BEFORE_BUILD=$(cd "$BEFORE_BUILD" && pwd)
        [ -x "$BEFORE_BUILD/layerfs" ] && [ -x "$BEFORE_BUILD/layerfs-daemon" ] || {
                echo "bench: $BEFORE_BUILD has no layerfs and layerfs-daemon" >&2
                exit 1
        }
        BUILDS=("$BEFORE_BUILD/layerfs" "$LAYERFS")
        HOMES=("$WORK/home-before" "$LAYERFS_HOME")
fi

# close_all LAYERFS HOME: closes every Sandbox of HOME with that build.
close_all() {
        local n
        for n in $(sqlite3 "$2/home.db" "SELECT number FROM sandboxes" 2>/dev/null || true); do
                LAYERFS_HOME=$2 "$1" sandbox close "$n" --force >/dev/null 2>&1
        done
}
cleanup() {
        local rc=$? i
        set +e
        trap - ERR
        for ((i = 0; i < ${#BUILDS[@]} - 1; i++)); do close_all "${BUILDS[i]}" "${HOMES[i]}"; done
        bench_remove_sandboxes "$LAYERFS_CGROUP_ROOT" || rc=1
        exit "$rc"
}
bench_traps

for i in "${!BUILDS[@]}"; do LAYERFS_HOME=${HOMES[i]} "${BUILDS[i]}" project init p >/dev/null; done
echo "the BPF watcher's cost to the host's forks, kernel $(uname -r), $(nproc) CPUs"

# daemon_progs HOME: the ids of the BPF programs that HOME's daemons hold (a program's fd
# or a link's says prog_id in its fdinfo).
daemon_progs() {
        local pid
        for pid in $(sqlite3 "$1/home.db" "SELECT pid FROM sandboxes" 2>/dev/null || true); do
                cat /proc/"$pid"/fdinfo/* 2>/dev/null || true
        done | awk '$1 == "prog_id:" { print $2 }' | sort -un | xargs
}

# forks_with_open LAYERFS HOME: for each count, Sandboxes of that build opened up to it,
# then "COUNT MEDIAN_US BPF_NS PROGRAMS"; the Sandboxes are closed at the end.
forks_with_open() {
        local bin=$1 home=$2 open=0 count sb progs
        for count in $COUNTS; do
                for (( ; open < count; open++)); do
                        sb=$(LAYERFS_HOME=$home LAYERFS_WATCHER=bpf "$bin" sandbox create)
                        grep -q "watcher bpf" "$home/sandboxes/p-$sb/daemon.log" || {
                                echo "bench: Sandbox $sb has no BPF watcher" >&2
                                exit 1
                        }
                done
                progs=$(daemon_progs "$home")
                # shellcheck disable=SC2086 # one id per word
                echo "$count $("$FLOOR_BIN" fork "$FORKS" $progs | awk '{ print $1, ($3 == "" ? 0 : $3) }') $(echo $progs | wc -w)"
        done
        close_all "$bin" "$home"
}

for ((round = 0; round < ROUNDS; round++)); do
        for i in "${!BUILDS[@]}"; do
                forks_with_open "${BUILDS[i]}" "${HOMES[i]}" | sed "s/^/$i /"
        done
done >"$WORK/forks"

echo
printf '%-28s %10s %20s %9s %12s\n' "build, open Sandboxes" "fork" "(each round)" "programs" "BPF per fork"
# column B C N: the values of column N (3 the fork, 4 the BPF time) of build B at count C.
column() { awk -v b="$1" -v c="$2" -v n="$3" '$1 == b && $2 == c { print $n }' "$WORK/forks" | xargs; }
for i in "${!BUILDS[@]}"; do
        name=${BUILDS[i]%/layerfs}
        for count in $COUNTS; do
                read -r -a times <<<"$(column "$i" "$count" 3)"
                read -r -a bpf <<<"$(column "$i" "$count" 4)"
                read -r -a progs <<<"$(column "$i" "$count" 5)"
                printf '%-28s %7s us %20s %9s %9s ns\n' "${name##*/}, $count" "$(median "${times[@]}")" \
                        "$(IFS=/; echo "${times[*]}")" "$(median "${progs[@]}")" "$(median "${bpf[@]}")"
        done
done
echo
echo "fork: fork + exit + wait of a child that exits at once, median of $FORKS per point, then"
echo "the median of $ROUNDS rounds. programs: the BPF programs the open Sandboxes' daemons hold;"
echo "BPF per fork: the sum of their mean run times as the kernel counted them (with its own"
echo "count's cost in). On a shared machine the fork figures are rough: compare within a run."
