#!/usr/bin/env bash
# The Linux runtime's exec, watcher and namespaces costs against their baselines, in one
# run (the close of a Sandbox of 1,000 processes against cgroup.kill is lifecycle.sh's):
# - exec: 'workspace exec -- true' (CLI start, socket, cgroup leaf, clone3, wait, rmdir)
#   against the same command started by a shell on the host.
# - the watcher: 'sandbox create' with LAYERFS_WATCHER=bpf against =cgroup (median of 10),
#   the BPF program's load time, and the latency from a process's exit in the kernel to
#   its event in the daemon (median and p99 of 500 exits).
# - a disk budget: 'sandbox create --disk 64M' against create without (cgroup watcher).
# - the namespaces runtime against native: 'sandbox create' (CREATE_PAIRS pairs: the
#   median of each and of the pairs' differences), 'workspace exec -- true' (EXEC_PAIRS
#   in each, in turn: the median of each), and create with
#   '--network private' against the default network. Every other row is native's
#   (LAYERFS_RUNTIME=native), so that they stay comparable with earlier runs.
# It reports and never judges: it exits non-zero only when something fails or is left.
# Needs root (cgroups, FUSE).
set -euo pipefail
set -o errtrace

EXECS=50
CREATE_PAIRS=30 # namespaces and native creates, in pairs
EXEC_PAIRS=200  # execs in a Sandbox of each runtime, in turn

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs layerfs-daemon
bench_need_root "cgroups, FUSE"
bench_cgroup_mount

bench_work_home bench
export LAYERFS_RUNTIME=native

bench_sandbox_traps

"$LAYERFS" project init p >/dev/null
echo "layerfs runtime: exec, watchers and namespaces, kernel $(uname -r), $(nproc) CPUs, cgroup2 at $CG_MOUNT"
echo
# exec: the CLI end to end, against the same command from a host shell.
sb=$("$LAYERFS" sandbox create)
"$LAYERFS" workspace mount "$sb" main >/dev/null
start=$(now_us)
for ((i = 0; i < EXECS; i++)); do "$LAYERFS" workspace exec "$sb" main -- true; done
exec_us=$((($(now_us) - start) / EXECS))
start=$(now_us)
for ((i = 0; i < EXECS; i++)); do /bin/true; done
host_us=$((($(now_us) - start) / EXECS))
"$LAYERFS" workspace unmount "$sb" main >/dev/null
"$LAYERFS" sandbox close "$sb" >/dev/null

# Sandbox create with each watcher (the BPF load is part of it), and the BPF program's
# own load time as the daemon logs it.
create_ms() {
        local w=$1 times=() i start sb
        shift
        for ((i = 0; i < 10; i++)); do
                start=$(now_us)
                sb=$(LAYERFS_WATCHER=$w "$LAYERFS" sandbox create "$@")
                times+=($((($(now_us) - start) / 1000)))
                [ "$w" = bpf ] && sed -n 's/.*BPF watcher loaded in \([0-9.]*\) ms.*/\1/p' \
                        "$LAYERFS_HOME/sandboxes/p-$sb/daemon.log" >>"$WORK/bpf-load"
                "$LAYERFS" sandbox close "$sb" >/dev/null
        done
        median "${times[@]}"
}
create_bpf=$(create_ms bpf)
create_proc=$(create_ms proc)
create_cgroup=$(create_ms cgroup)
# A disk budget is a tmpfs and two bind mounts that the daemon makes at start.
create_disk=$(create_ms cgroup --disk 64M)
# The namespaces runtime beside native: creates in pairs, each pair in the other order than
# the last (so that neither always comes first after a close), both seeing the same load;
# the medians of each, and the median of the pairs' differences, which load that drifts
# over the run cancels out of.
create_runtimes() {
        local i start sb rt order ms ns=() native=() diffs=()
        for ((i = 0; i < CREATE_PAIRS; i++)); do
                order="native namespaces"
                ((i % 2)) && order="namespaces native"
                for rt in $order; do
                        start=$(now_us)
                        sb=$(LAYERFS_RUNTIME=$rt "$LAYERFS" sandbox create "$@")
                        ms=$((($(now_us) - start) / 1000))
                        if [ "$rt" = native ]; then native+=("$ms"); else ns+=("$ms"); fi
                        "$LAYERFS" sandbox close "$sb" >/dev/null
                done
                diffs+=($((ns[i] - native[i])))
        done
        echo "$(median "${ns[@]}") $(median "${native[@]}") $(median "${diffs[@]}")"
}
read -r create_ns create_native create_gap < <(create_runtimes)
read -r create_private create_none < <(
        for ((i = 0; i < 10; i++)); do
                for net in private none; do
                        start=$(now_us)
                        sb=$(LAYERFS_RUNTIME=namespaces "$LAYERFS" sandbox create --network $net)
                        echo "$net $((($(now_us) - start) / 1000))"
                        "$LAYERFS" sandbox close "$sb" >/dev/null
                done
        done | awk '{ v[$1] = v[$1] " " $2 } END { print v["private"] "|" v["none"] }' |
                { IFS='|' read -r a b; echo "$(median $a) $(median $b)"; })
# exec of 'true' in a Sandbox of each runtime, one exec in each in turn, so that both see
# the same load: the median of each.
exec_pairs() {
        local rt start us sb_native sb_ns native=() ns=()
        sb_native=$(LAYERFS_RUNTIME=native "$LAYERFS" sandbox create)
        sb_ns=$(LAYERFS_RUNTIME=namespaces "$LAYERFS" sandbox create)
        for sb in "$sb_native" "$sb_ns"; do
                "$LAYERFS" workspace mount "$sb" main >/dev/null
                "$LAYERFS" workspace exec "$sb" main -- true
        done
        for ((i = 0; i < EXEC_PAIRS; i++)); do
                for rt in native namespaces; do
                        sb=$sb_native
                        [ "$rt" = namespaces ] && sb=$sb_ns
                        start=$(now_us)
                        "$LAYERFS" workspace exec "$sb" main -- true
                        us=$(($(now_us) - start))
                        if [ "$rt" = native ]; then native+=("$us"); else ns+=("$us"); fi
                done
        done
        for sb in "$sb_native" "$sb_ns"; do
                "$LAYERFS" workspace unmount "$sb" main >/dev/null
                "$LAYERFS" sandbox close "$sb" >/dev/null
        done
        echo "$(median "${ns[@]}") $(median "${native[@]}")"
}
read -r exec_ns exec_native < <(exec_pairs)
bpf_load=$(sort -n "$WORK/bpf-load" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

# Event latency: from a process's exit in the kernel to its event in the daemon.
sb=$(LAYERFS_WATCHER=bpf "$LAYERFS" sandbox create)
"$LAYERFS" workspace mount "$sb" main >/dev/null
"$LAYERFS" workspace exec "$sb" main -- sh -c 'i=0; while [ $i -lt 500 ]; do (exit 1) & i=$((i+1)); sleep 0.002; done; wait'
"$LAYERFS" sandbox events "$sb" >"$WORK/events"
read -r lat_n lat_med lat_p99 < <(python3 -c '
import json, sys
lat = sorted((e["received"] - e["time"]) * 1e6 for e in map(json.loads, open(sys.argv[1])) if e["event"] == "exit")
print(len(lat), round(lat[len(lat) // 2]), round(lat[min(len(lat) - 1, int(len(lat) * 0.99))]))' "$WORK/events")
"$LAYERFS" workspace unmount "$sb" main >/dev/null
"$LAYERFS" sandbox close "$sb" >/dev/null

echo
printf '%-52s %10s %10s %8s\n' "operation" "layerfs" "baseline" "ratio"
# row LABEL A B UNIT [FORMAT]: one line of the table, with A/B as the ratio.
row() {
        printf '%-52s %8s %s %8s %s %8s\n' "$1" "$2" "$4" "$3" "$4" \
                "$(awk -v a="$2" -v b="$3" -v f="${5:-%.2f}" 'BEGIN { printf f, b ? a / b : 0 }')"
}
row "exec of 'true' (workspace exec vs fork+exec)" "$exec_us" "$host_us" us %.1f
row "sandbox create, BPF watcher vs cgroup watcher" "$create_bpf" "$create_cgroup" ms
row "sandbox create, proc connector vs cgroup watcher" "$create_proc" "$create_cgroup" ms
row "sandbox create --disk 64M vs without (cgroup watcher)" "$create_disk" "$create_cgroup" ms
row "sandbox create, namespaces vs native" "$create_ns" "$create_native" ms
printf '%-52s %8s ms\n' "  the gap: median of $CREATE_PAIRS pairs' differences" "$create_gap"
row "exec of 'true', namespaces vs native" "$exec_ns" "$exec_native" us
row "sandbox create --network private vs none (namespaces)" "$create_private" "$create_none" ms
printf '%-52s %8s ms\n' "  the BPF program's load (median of 10)" "$bpf_load"
printf '%-52s %8s us %8s us (p99)\n' "exit-to-event latency, BPF ($lat_n exits): median" "$lat_med" "$lat_p99"
echo
echo "exec: mean of $EXECS; namespaces vs native: $CREATE_PAIRS pairs of creates, $EXEC_PAIRS execs"
echo "in each, in turn; medians. Targets of the namespaces rows: create within 5 ms of native,"
echo "exec within 10%. The close of 1,000 processes against cgroup.kill is lifecycle.sh's."
