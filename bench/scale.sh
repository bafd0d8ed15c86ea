#!/usr/bin/env bash
# A project of FILES files (default 1,000,000) in FILES/100 directories of 100, generated,
# taken through a long-lived project's day beside git on the same tree: import, mount,
# `find | wc`, change 1,000 files, `workspace status`, commit, `branch diff`, export, gc,
# verify. Each row gives the wall time and the peak RSS; for status and commit also the
# daemon's (its peak during the call, and how much that is above what it held before).
# A second Workspace, mounted without the `find`, changes and commits the same 1,000
# files on a branch of its own: its daemon's whole peak is what status and commit cost
# when only the changed directories were ever listed.
# Usage: bench/scale.sh [FILES] (a multiple of 100, at least 100,000 for 1,000 changed
# directories; smaller runs change 1,000 files in fewer directories). Needs root (FUSE).
# It reports and never judges: it exits non-zero when a command fails or a count is
# wrong, never because of a timing. Disk: about FILES x 4 KiB x 5 (the tree, git's
# objects, the Store's packs, two exports), all in a mktemp -d beside the build.
set -euo pipefail
set -o errtrace

FILES=${1:-1000000}
PER_DIR=100
FILE_SIZE=${BENCH_FILE_SIZE:-1024}
CHANGED=1000
DIRS=$((FILES / PER_DIR))
if ! [[ "$FILES" =~ ^[1-9][0-9]*$ ]] || [ $((FILES % PER_DIR)) != 0 ]; then
        echo "bench: FILES must be a multiple of $PER_DIR, got '$FILES'" >&2
        exit 1
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs layerfs-daemon
bench_need_root "FUSE Workspaces, cgroups"

bench_stock_env

mkdir -p "$BUILD"
WORK=$(mktemp -d "$BUILD/scale.XXXXXX")
chmod 711 "$WORK"
export LAYERFS_HOME="$WORK/home" LAYERFS_PROJECT=scale
bench_cgroup_mount
export LAYERFS_CGROUP_ROOT="$CG_MOUNT/layerfs-scale-$$"
TREE=$WORK/tree
GITDIR=$WORK/git
# git works on the very tree layerfs imported (its index and objects beside it).
GIT=(git -c gc.auto=0 -c maintenance.auto=false -c init.defaultBranch=main --git-dir="$GITDIR" --work-tree="$TREE")

bench_sandbox_traps

lfs() { "$LAYERFS" "$@"; }

# ---- timing and memory ---------------------------------------------------------------
# measure NAME CMD...: sync (untimed), then CMD with stdout to $WORK/out; the wall time
# (s) and the peak RSS (MiB) of CMD and its children, from GNU time, in SECS and RSS.
SECS=0 RSS=0
measure() {
        sync
        /usr/bin/time -f '%e %M' -o "$WORK/time" "$@" >"$WORK/out"
        read -r SECS RSS <"$WORK/time"
        RSS=$(((RSS + 512) / 1024))
}

ROWS=()
# row OPERATION OURS_S OURS_MIB GIT_S GIT_MIB [NOTE]
# Each row is printed as soon as it is measured (a long run shows its progress) and again
# in the table at the end.
ROW_FORMAT='%-34s %9s %9s %9s %9s %8s  %s'
# shellcheck disable=SC2059 # one format for every row keeps the columns aligned
row() {
        ROWS+=("$(printf "$ROW_FORMAT" "$1" "$2" "$3" "$4" "$5" "$(speedup "$4" "$2")" "${6:-}")")
        echo "${ROWS[-1]}"
}
# shellcheck disable=SC2059
header() { printf "$ROW_FORMAT\n" operation "ours (s)" "ours MiB" "git (s)" "git MiB" "git/ours" "notes"; }
speedup() {
        if [ "$1" = - ] || [ "$2" = - ]; then echo -; else awk -v g="$1" -v o="$2" 'BEGIN { printf "%.1f", g / (o > 0.005 ? o : 0.005) }'; fi
}

# kib_of PID FIELD: a field of its /proc status, in KiB.
kib_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
# measure_daemon N NAME CMD...: measure, and the daemon's own figures in D_BEFORE (its RSS
# before, MiB), D_PEAK (its peak RSS during CMD: the peak is reset first, clear_refs 5).
D_BEFORE=0 D_PEAK=0
measure_daemon() {
        local pid
        pid=$(bench_daemon_pid "$1")
        shift
        sync
        echo 5 >"/proc/$pid/clear_refs"
        D_BEFORE=$((($(kib_of "$pid" VmRSS) + 512) / 1024))
        measure "$@"
        D_PEAK=$((($(kib_of "$pid" VmHWM) + 512) / 1024))
}

# ---- the tree ------------------------------------------------------------------------
# DIRS directories d00000.. of PER_DIR files f00..f99 of FILE_SIZE random bytes; one
# process writes them all.
generate() {
        python3 - "$TREE" "$DIRS" "$PER_DIR" "$FILE_SIZE" <<'EOF'
import os, sys
root, dirs, per, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for d in range(dirs):
    p = os.path.join(root, "d%05d" % d)
    os.makedirs(p)
    data = os.urandom(size * per)
    for f in range(per):
        with open(os.path.join(p, "f%02d" % f), "wb") as fh:
            fh.write(data[f * size:(f + 1) * size])
EOF
}

# change ROOT: rewrites CHANGED files with new random contents of the same size, one in
# each of CHANGED directories spread over the tree (fewer directories when there are
# fewer), the same paths and bytes (from $WORK/delta) each time. A script of its own, so
# that GNU time can run it.
write_change_script() {
        cat >"$WORK/change.py" <<'EOF'
import os, sys
root, dirs, per, changed, delta = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
data = open(delta, "rb").read()
size = len(data) // changed
step = max(dirs // changed, 1)
for i in range(changed):
    d, f = (i * step) % dirs, (i * step) // dirs
    with open(os.path.join(root, "d%05d" % d, "f%02d" % (f % per)), "r+b") as fh:
        fh.write(data[i * size:(i + 1) * size])
EOF
}
change() { python3 "$WORK/change.py" "$1" "$DIRS" "$PER_DIR" "$CHANGED" "$WORK/delta"; }

expect_count() {
        [ "$2" = "$3" ] || {
                echo "bench: $1 gave $2, expected $3" >&2
                exit 1
        }
}

main() {
        echo "scale: $FILES files of $FILE_SIZE bytes in $DIRS directories; $CHANGED of them changed"
        echo "work dir: $WORK ($(df --output=fstype "$WORK" | tail -1)), $(df -h --output=avail "$WORK" | tail -1 | tr -d ' ') free"
        echo "$("$LAYERFS" --version), $(git --version), kernel $(uname -r), $(nproc) CPUs"
        local t0
        t0=$(now_us)
        generate
        head -c $((CHANGED * FILE_SIZE)) /dev/urandom >"$WORK/delta"
        write_change_script
        echo "generated in $((($(now_us) - t0) / 1000000)) s"
        header

        # import
        measure "$LAYERFS" project init scale --from "$TREE"
        local li=$SECS lim=$RSS
        local base
        base=$(lfs --json branch log main --limit 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["commit"])')
        "${GIT[@]}" init -q
        measure "${GIT[@]}" add -A
        local ga=$SECS gam=$RSS
        measure "${GIT[@]}" commit -q -m import
        row import "$li" "$lim" "$(awk -v a="$ga" -v b="$SECS" 'BEGIN { print a + b }')" "$((gam > RSS ? gam : RSS))" "git add -A + commit"

        # mount, find
        local sb ws
        sb=$(lfs sandbox create)
        measure "$LAYERFS" workspace mount "$sb" main
        ws=$(cat "$WORK/out")
        row mount "$SECS" "$RSS" - - "daemon $(($(kib_of "$(bench_daemon_pid "$sb")" VmRSS) / 1024)) MiB after"
        measure bash -c "find '$ws' | wc -l"
        expect_count "find | wc -l" "$(cat "$WORK/out")" $((FILES + DIRS + 1))
        local after_find
        after_find=$((($(kib_of "$(bench_daemon_pid "$sb")" VmRSS) + 512) / 1024))
        row "find | wc -l" "$SECS" "$RSS" - - "daemon $after_find MiB after (the namespace listed)"
        # The kernel evicts what find looked up (under memory pressure; here drop_caches)
        # and sends FORGET: the daemon lets go of what the Store can give again. The stat
        # after it is a LOOKUP, which the kernel sends after the FORGETs queued before it.
        # The host's dentries of git's tree go too: a find over it (untimed) brings them back.
        measure bash -c "sync; echo 2 >/proc/sys/vm/drop_caches; stat '$ws/d00000' >/dev/null"
        row "drop_caches (FORGET)" "$SECS" "$RSS" - - \
                "daemon $after_find -> $((($(kib_of "$(bench_daemon_pid "$sb")" VmRSS) + 512) / 1024)) MiB (what the kernel still holds)"
        find "$TREE" >/dev/null

        # change 1,000 files, in the Workspace and in git's tree
        measure python3 "$WORK/change.py" "$ws" "$DIRS" "$PER_DIR" "$CHANGED" "$WORK/delta"
        row "change $CHANGED files (python)" "$SECS" "$RSS" - - "in the Workspace"
        change "$TREE"

        # status
        measure_daemon "$sb" "$LAYERFS" workspace status "$sb" main
        expect_count "workspace status" "$(wc -l <"$WORK/out")" "$CHANGED"
        local ls=$SECS lsm=$RSS sd="daemon $D_BEFORE -> peak $D_PEAK MiB"
        measure "${GIT[@]}" status --porcelain
        expect_count "git status" "$(wc -l <"$WORK/out")" "$CHANGED"
        row "status ($CHANGED changed)" "$ls" "$lsm" "$SECS" "$RSS" "$sd"

        # commit
        measure_daemon "$sb" "$LAYERFS" workspace commit "$sb" main -m change
        local lc=$SECS lcm=$RSS cd="daemon $D_BEFORE -> peak $D_PEAK MiB"
        measure "${GIT[@]}" add -A
        ga=$SECS gam=$RSS
        measure "${GIT[@]}" commit -q -m change
        row "commit ($CHANGED changed)" "$lc" "$lcm" "$(awk -v a="$ga" -v b="$SECS" 'BEGIN { print a + b }')" \
                "$((gam > RSS ? gam : RSS))" "$cd; git add -A + commit"
        measure_daemon "$sb" "$LAYERFS" workspace status "$sb" main
        expect_count "workspace status after the commit" "$(wc -l <"$WORK/out")" 0
        row "status (clean, after commit)" "$SECS" "$RSS" - - "daemon $D_BEFORE -> peak $D_PEAK MiB"

        # diff
        measure "$LAYERFS" branch diff "$base" main
        expect_count "branch diff" "$(wc -l <"$WORK/out")" "$CHANGED"
        local ld=$SECS ldm=$RSS
        measure "${GIT[@]}" diff --name-only HEAD~1 HEAD
        expect_count "git diff" "$(wc -l <"$WORK/out")" "$CHANGED"
        row "branch diff" "$ld" "$ldm" "$SECS" "$RSS" "git diff --name-only HEAD~1 HEAD"

        # A second Workspace that never listed the tree: its daemon's whole peak.
        lfs branch create side --from "$base" >/dev/null
        local sb2 ws2
        sb2=$(lfs sandbox create)
        ws2=$(lfs workspace mount "$sb2" side)
        change "$ws2"
        measure_daemon "$sb2" "$LAYERFS" workspace status "$sb2" side
        expect_count "workspace status (no find)" "$(wc -l <"$WORK/out")" "$CHANGED"
        row "status, no find before" "$SECS" "$RSS" - - "daemon $D_BEFORE -> peak $D_PEAK MiB"
        measure_daemon "$sb2" "$LAYERFS" workspace commit "$sb2" side -m change
        row "commit, no find before" "$SECS" "$RSS" - - "daemon $D_BEFORE -> peak $D_PEAK MiB"
        lfs workspace unmount "$sb2" side >/dev/null
        lfs sandbox close "$sb2" >/dev/null
        lfs workspace unmount "$sb" main >/dev/null
        lfs sandbox close "$sb" >/dev/null

        # export
        measure "$LAYERFS" branch export main "$WORK/export"
        local le=$SECS lem=$RSS
        # Into a directory of its own: deleting 1,000,000 files here takes ext4 (mounted
        # with discard) a quarter of an hour, left to the cleanup at the end.
        mkdir "$WORK/export-git"
        measure bash -c "git --git-dir='$GITDIR' archive HEAD | tar -x -C '$WORK/export-git'"
        row export "$le" "$lem" "$SECS" "$RSS" "git archive | tar -x"

        # gc: the side branch goes; what only it held is garbage
        lfs branch delete side >/dev/null
        measure "$LAYERFS" project gc
        local lg=$SECS lgm=$RSS
        measure "${GIT[@]}" gc -q
        row gc "$lg" "$lgm" "$SECS" "$RSS" "git gc"

        measure "$LAYERFS" project verify
        row "project verify" "$SECS" "$RSS" - -

        echo
        header
        printf '%s\n' "${ROWS[@]}"
        echo
        echo "MiB: peak RSS of the command and its children (GNU time); daemon: layerfs-daemon's RSS before the call and its peak during it."
        echo "disk: store $(du -sh "$LAYERFS_HOME/projects/scale" | cut -f1), git $(du -sh "$GITDIR" | cut -f1)"
}

main "$@"
