#!/usr/bin/env bash
# The Store against git on the workload of DESIGN.md ("Store"): import 10,000 files of
# 4 KiB, then commit after changing 1,000 of them. Both tools read the same bytes from
# the same disk; each figure is the median of a few trials. It reports and never judges:
# it exits non-zero only when a command fails, never because of a timing.
set -euo pipefail
set -o errtrace # the ERR trap below also fires inside functions

# ---- the workload ----------------------------------------------------------------
DIRS=100           # directories in the tree
FILES_PER_DIR=100  # files in each: 10,000 in all
FILE_SIZE=4096     # bytes per file
CHANGED_PER_DIR=10 # files rewritten in each directory: 1,000 in all
TRIALS=${TRIALS:-3} # odd, so the median is a measurement; 3 puts each tool once in each place

# Figures to beat, measured on the reference machine (DESIGN.md, "Store").
REF_GIT_IMPORT=5.3
REF_GIT_CHANGE=1.4

# ---- where things are -------------------------------------------------------------
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs

# layerfs with io_uring unless a column asks otherwise, git with its stock defaults.
bench_stock_env
# One departure from the defaults: 10,000 loose objects make 'git commit' start
# 'git gc --auto' detached in the background, where it would compete with the next
# measurement (and race the rm of its repository). Turning it off only helps git.
GIT=(git -c gc.auto=0 -c maintenance.auto=false -c init.defaultBranch=main)

# The work dir sits beside the build, on the same disk as the repo, never on a tmpfs
# /tmp: the point is to measure the disk. With BENCH_FS=fresh (the default, as root) it
# is a new ext4 filesystem made for this run (mkfs.ext4's defaults) in a file beside the
# build: on a filesystem that other programs churn, a create's cost depends on what they
# deleted minutes before (ext4 without a journal, as this VM's disk, reads the inode
# block of every inode freed in the last 60 s to 6 min before it reuses one:
# bench/README.md), which swamped both tools' figures. BENCH_FS=build measures beside
# the build as before. Removed however the script ends.
mkdir -p "$BUILD"
TOP=$(mktemp -d "$BUILD/bench.XXXXXX")
WORK=$TOP
cleanup() {
        bench_fresh_fs_remove "$TOP"
        chmod -R u+w "$TOP" 2>/dev/null || true
        rm -rf --one-file-system "$TOP"
}
bench_traps
case ${BENCH_FS:-fresh} in
fresh)
        bench_need_root "BENCH_FS=fresh mounts a filesystem of its own; BENCH_FS=build does not"
        bench_fresh_fs "$TOP"
        FS_NOTE="a new ext4 filesystem (mkfs.ext4's defaults, in a file on the build's disk)"
        WORK="$TOP/fs"
        ;;
build) FS_NOTE="beside the build" ;;
*)
        echo "bench: BENCH_FS must be fresh or build, not '$BENCH_FS'" >&2
        exit 2
        ;;
esac

BASE="$WORK/base"       # the tree as first imported
DELTA="$WORK/delta"     # only the 1,000 new files, laid out as in the tree
CHANGED="$WORK/changed" # base with the delta applied: what layerfs commits

# ---- timing -----------------------------------------------------------------------
# measure CMD...: runs CMD with its stdout discarded and sets ELAPSED_US. The sync first
# flushes what earlier steps left dirty (copies, the other tool's objects), so that
# neither tool pays for the other's writes: layerfs's own syncfs would otherwise flush
# them inside its timing, and git would inherit a busy disk.
ELAPSED_US=0
measure() {
        local start
        sync
        start=$(now_us)
        "$@" >/dev/null
        ELAPSED_US=$(($(now_us) - start))
}

seconds() { awk -v us="$1" 'BEGIN { printf "%.2f", us / 1e6 }'; }


# ---- the inputs -------------------------------------------------------------------
# random_files DIR COUNT: COUNT files of FILE_SIZE random bytes in each of the DIRS
# directories DIR/d00..d99, named f00, f01... One head + split per directory keeps
# generation to a fraction of a second.
random_files() {
        local root=$1 count=$2 d dir
        for ((d = 0; d < DIRS; d++)); do
                printf -v dir '%s/d%02d' "$root" "$d"
                mkdir -p "$dir"
                head -c $((count * FILE_SIZE)) /dev/urandom |
                        split -b "$FILE_SIZE" -a 2 -d - "$dir/f"
        done
}

make_inputs() {
        random_files "$BASE" "$FILES_PER_DIR"
        # The delta reuses the first names of each directory, so applying it rewrites
        # 1,000 existing files in place: same paths, same size, new contents.
        random_files "$DELTA" "$CHANGED_PER_DIR"
        cp -a "$BASE" "$CHANGED"
        apply_delta "$CHANGED"
}

# apply_delta DIR: overwrite DIR's files with the delta. Plain cp (not -a) gives them a
# new mtime, as an editor would; git then sees them as modified.
apply_delta() {
        cp -r "$DELTA/." "$1/"
}

# ---- the two tools ----------------------------------------------------------------
lfs() { "$LAYERFS" "$@"; }

layerfs_import() { lfs --home "$1" project init bench --from "$BASE"; }
layerfs_import_no_uring() { LAYERFS_NO_URING=1 lfs --home "$1" project init bench --from "$BASE"; }
# The export of the import's commit into a new directory: the other direction of the
# Store's file I/O (objects read, 10,000 files created and written).
layerfs_export() { lfs --home "$1" --project bench branch export main "$2"; }
layerfs_export_no_uring() { LAYERFS_NO_URING=1 lfs --home "$1" --project bench branch export main "$2"; }
layerfs_change() { lfs --home "$1" --project bench branch commit main --from "$CHANGED" -m change; }

# git works in place, so each trial gets its own cp -a of the tree: identical bytes,
# modes and mtimes to what layerfs reads.
git_import() {
        "${GIT[@]}" -C "$1" init -q
        "${GIT[@]}" -C "$1" add -A
        "${GIT[@]}" -C "$1" commit -q -m import
}
git_change() {
        "${GIT[@]}" -C "$1" add -A
        "${GIT[@]}" -C "$1" commit -q -m change
}

# ---- one trial --------------------------------------------------------------------
IMPORT_LFS=() IMPORT_LFS_PLAIN=() IMPORT_GIT=() CHANGE_LFS=() CHANGE_GIT=()
EXPORT_LFS=() EXPORT_LFS_PLAIN=()

# Each trial starts from nothing: a fresh layerfs home and a fresh git repository are
# imported (timed), and that state is what the change commit then builds on (timed).
# The import without io_uring gets a home of its own; it only shows what the batching
# is worth. The running order rotates from trial to trial (layerfs, git, no io_uring;
# then git, no io_uring, layerfs; ...), so that no one always runs first or last.
#
# Earlier trials are left in place until the end (about 200 MB each): deleting 40,000
# files here would make the filesystem discard and journal them during the next
# measurement.
run_trial() {
        local n=$1 dir="$WORK/trial$1"
        local tools=(layerfs git no-uring) order=() i
        for ((i = 0; i < ${#tools[@]}; i++)); do
                order+=("${tools[(i + n - 1) % ${#tools[@]}]}")
        done
        mkdir -p "$dir"
        cp -a "$BASE" "$dir/repo"

        local tool
        for tool in "${order[@]}"; do
                case $tool in
                layerfs)
                        measure layerfs_import "$dir/home"
                        IMPORT_LFS+=("$ELAPSED_US")
                        ;;
                git)
                        measure git_import "$dir/repo"
                        IMPORT_GIT+=("$ELAPSED_US")
                        ;;
                no-uring)
                        measure layerfs_import_no_uring "$dir/home-plain"
                        IMPORT_LFS_PLAIN+=("$ELAPSED_US")
                        ;;
                esac
        done

        # Each home exports its own import (the same tree), in the same rotating order.
        for tool in "${order[@]}"; do
                case $tool in
                layerfs)
                        measure layerfs_export "$dir/home" "$dir/export"
                        EXPORT_LFS+=("$ELAPSED_US")
                        ;;
                no-uring)
                        measure layerfs_export_no_uring "$dir/home-plain" "$dir/export-plain"
                        EXPORT_LFS_PLAIN+=("$ELAPSED_US")
                        ;;
                esac
        done

        apply_delta "$dir/repo"
        for tool in "${order[@]}"; do
                case $tool in
                layerfs)
                        measure layerfs_change "$dir/home"
                        CHANGE_LFS+=("$ELAPSED_US")
                        ;;
                git)
                        measure git_change "$dir/repo"
                        CHANGE_GIT+=("$ELAPSED_US")
                        ;;
                esac
        done

        printf 'trial %d/%d: import layerfs %s s, no io_uring %s s, git %s s; export layerfs %s s, no io_uring %s s; change layerfs %s s, git %s s\n' \
                "$n" "$TRIALS" "$(seconds "${IMPORT_LFS[-1]}")" "$(seconds "${IMPORT_LFS_PLAIN[-1]}")" \
                "$(seconds "${IMPORT_GIT[-1]}")" "$(seconds "${EXPORT_LFS[-1]}")" "$(seconds "${EXPORT_LFS_PLAIN[-1]}")" \
                "$(seconds "${CHANGE_LFS[-1]}")" "$(seconds "${CHANGE_GIT[-1]}")"
}

# ---- io_uring: was it used? ---------------------------------------------------------
# layerfs falls back to plain system calls without a word when the kernel refuses
# io_uring (sysctl, seccomp, old kernel), and then both layerfs columns measure the
# same code. Best evidence: strace shows the ring and its file table being set up.
# Without strace, ask the kernel for the same two things lfs_io_new asks for.
uring_status() {
        local log="$WORK/uring.strace"
        if command -v strace >/dev/null &&
                strace -f -qq -o "$log" -e trace=io_uring_setup,io_uring_register \
                        "$LAYERFS" --home "$WORK/uring-probe" project init probe --from "$DELTA" \
                        >/dev/null 2>&1; then
                if grep -q 'io_uring_register(.*) = 0' "$log"; then
                        echo "used (strace saw layerfs set up its ring and file table)"
                else
                        echo "NOT used: layerfs fell back to plain system calls (strace saw no working ring)"
                fi
                return
        fi
        # io_uring_setup is 425 and io_uring_register 427 on every architecture; 13 is
        # IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE (flags = 1).
        if perl -e 'my $p = "\0" x 120; my $fd = syscall(425, 8, $p); exit 1 if $fd < 0;
                    my $r = pack("LLQQQ", 64, 1, 0, 0, 0); exit(syscall(427, $fd, 13, $r, 32) < 0 ? 1 : 0);'; then
                echo "used (the kernel grants io_uring and sparse file tables; no strace to watch layerfs itself)"
        else
                echo "NOT used: the kernel refuses io_uring, so layerfs runs plain system calls"
        fi
}

# ---- the report -------------------------------------------------------------------
print_header() {
        echo "layerfs Store vs git: $DIRS x $FILES_PER_DIR files of $FILE_SIZE bytes," \
                "then $((DIRS * CHANGED_PER_DIR)) of them changed; median of $TRIALS trials"
        echo "work dir: $WORK ($(df --output=fstype "$WORK" | tail -1) on $(df --output=source "$WORK" | tail -1): $FS_NOTE)"
        echo "$("$LAYERFS" --version), $(git --version), kernel $(uname -r), $(nproc) CPUs"
        echo
}

print_table() {
        local il ip ig el ep cl cg
        il=$(median "${IMPORT_LFS[@]}")
        el=$(median "${EXPORT_LFS[@]}")
        ep=$(median "${EXPORT_LFS_PLAIN[@]}")
        ip=$(median "${IMPORT_LFS_PLAIN[@]}")
        ig=$(median "${IMPORT_GIT[@]}")
        cl=$(median "${CHANGE_LFS[@]}")
        cg=$(median "${CHANGE_GIT[@]}")

        local fmt='%-26s %12s %10s %24s %12s\n'
        echo
        # shellcheck disable=SC2059 # one format for every row keeps the columns aligned
        printf "$fmt" operation "layerfs (s)" "git (s)" "layerfs (no io_uring) (s)" git/layerfs
        # shellcheck disable=SC2059
        printf "$fmt" "import 10,000 files" "$(seconds "$il")" "$(seconds "$ig")" "$(seconds "$ip")" "$(ratio "$ig" "$il")"
        # shellcheck disable=SC2059
        printf "$fmt" "export 10,000 files" "$(seconds "$el")" "-" "$(seconds "$ep")" "-"
        # shellcheck disable=SC2059
        printf "$fmt" "commit 1,000 changed" "$(seconds "$cl")" "$(seconds "$cg")" "-" "$(ratio "$cg" "$cl")"
        echo
        echo "git/layerfs > 1 means layerfs is faster."
        echo "target: faster than git on both (git took $REF_GIT_IMPORT s and $REF_GIT_CHANGE s on the reference machine)"
        echo "io_uring batching on import: $(ratio "$ip" "$il")x, on export: $(ratio "$ep" "$el")x" \
                "(no io_uring / io_uring; > 1 means io_uring helps; target 1.3)"
        echo "io_uring: $(uring_status)"
}

# The last trial's homes hold both commits (and the plain-syscall import): the Store
# must still be sound after the run. A failure here fails the script.
print_verify() {
        echo
        echo "layerfs project verify (io_uring home):"
        lfs --home "$WORK/trial$TRIALS/home" --project bench project verify
        echo "layerfs project verify (no io_uring home):"
        LAYERFS_NO_URING=1 lfs --home "$WORK/trial$TRIALS/home-plain" --project bench project verify
}

main() {
        print_header
        make_inputs
        local n
        for ((n = 1; n <= TRIALS; n++)); do
                run_trial "$n"
        done
        print_table
        print_verify
}

main "$@"
