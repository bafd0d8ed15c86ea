#!/usr/bin/env bash
# The FUSE Workspace against native ext4, kernel overlayfs, fuse-overlayfs and the FUSE
# floor (build/fuse-floor, an in-memory FUSE server that does no work, served by the
# daemon's own transports: one floor per transport and passthrough) on the
# workload of DESIGN.md ("FUSE Workspace"): 10,000 files of 4 KiB created, stat'ed,
# read and deleted, then 1 GiB written and read sequentially, then 4 KiB read and written
# at random places of it. Then the time to mount a
# Branch of 100,000 files against one of 10, and real tools (git, make) in a Workspace
# against a plain directory. Everything on the same disk, in one run.
# It reports and never judges: it exits non-zero only when a command fails (or when
# something it mounted could not be unmounted), never because of a timing. Needs root
# (mount, /proc/sys/vm/drop_caches, FUSE with allow_other).
# Then Workspace commits: 100,000 new files in one directory against the same number
# in 100 directories, and a 64 MiB file with 200 more names against one name.
# Usage: workspace_fs.sh [workload|mount|tools|commit]... (all four by default). For quick
# looks while developing, BENCH_BIG_MIB=64 shrinks the sequential file (the table
# still says "1 GiB"; `make bench` always runs the full size) and BENCH_COMMIT_FILES=2000
# the commit rows, and BENCH_TARGETS="workspace-dev fuse-floor-dev" runs only the
# workload's targets named (native always runs: the ratios need it).
# The uring targets need FUSE over io_uring: they turn the kernel's switch (the whole
# host's) on and the exit gives it back as it was.
set -euo pipefail
set -o errtrace # the ERR trap below also fires inside functions

# ---- the workload ----------------------------------------------------------------
DIRS=100          # directories for the small-file rows
FILES_PER_DIR=100 # files in each: 10,000 in all
FILE_SIZE=4096    # bytes per file
BIG_MIB=${BENCH_BIG_MIB:-1024} # the sequential file: 1 GiB, written with dd bs=1M
BIG_DIRS=1000     # the large Branch for the mount time: 1,000 directories ...
BIG_PER_DIR=100   # ... of 100 tiny files: 100,000 in all
SMALL_FILES=10    # the small Branch: 10 files
TRIALS=3          # each target runs the workload this many times, interleaved; medians
MOUNT_TRIALS=3    # each mount is timed this many times (unmounted in between); median
C_FILES=20        # the C project: 20 generated .c files and a Makefile, make -j2
C_FUNCS=120       # functions per .c file (sets how long each compile takes)
COMMIT_FILES=${BENCH_COMMIT_FILES:-100000} # the commit rows: new files, in one directory or in 100
COMMIT_SPREAD=100
LINKED_MIB=64     # ... and one file of this size with LINKS more names, or with none
LINKS=200
LINK_TRIALS=5     # those commits take a fraction of a second: more trials, less noise

# Reference figures (DESIGN.md, "FUSE Workspace"), ms: create/stat/read/delete, write/read.
REF_NATIVE="1545/521/624/181, 3284/547"
REF_OVERLAY="2687/496/594/273, 2215/357"
REF_FUSE_OVL="5316/604/903/1290, 4562/502"

# ---- where things are -------------------------------------------------------------
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs layerfs-daemon fuse-floor
bench_need_root "mount, drop_caches, FUSE allow_other"

bench_stock_env
# git: files in a Workspace appear owned by the command identity (501:20), not by root, so
# git's ownership check would refuse the repository; safe.directory=* turns that check off
# (also on ext4, where it costs nothing). gc.auto=0 as in store_vs_git.sh.
GIT=(git -c gc.auto=0 -c maintenance.auto=false -c init.defaultBranch=main -c 'safe.directory=*')

# ---- the work dir and its cleanup --------------------------------------------------
# Beside the build, on the repo's disk (never a tmpfs /tmp). Everything the script
# mounts is recorded, and the EXIT trap unmounts it, closes every Sandbox, checks
# /proc/mounts and only then removes the directory (--one-file-system, so that a
# mount that would not go away is never deleted through).
mkdir -p "$BUILD"
WORK=$(mktemp -d "$BUILD/wsbench.XXXXXX")
# Commands run as the command identity (501:20) in Workspaces below the home: it must
# be able to pass through (mktemp makes 0700).
chmod 711 "$WORK"
export LAYERFS_HOME="$WORK/home"
MOUNTS=()    # overlay and fuse-overlayfs mount points still mounted
SANDBOXES=() # "project number" of Sandboxes still open
WORKSPACES=() # "project number branch" of Workspaces still mounted
URING_SWITCH=/sys/module/fuse/parameters/enable_uring
URING_SWITCH_WAS= # what the switch said before a uring target turned it on

cleanup() {
        local rc=$? entry p n b m left i
        set +e
        trap - ERR
        exec 1>&2 # a signal may land inside 'measure', whose stdout is /dev/null
        for entry in "${WORKSPACES[@]}"; do
                read -r p n b <<<"$entry"
                "$LAYERFS" --project "$p" workspace unmount "$n" "$b" --discard >/dev/null
        done
        for entry in "${SANDBOXES[@]}"; do
                read -r p n <<<"$entry"
                "$LAYERFS" --project "$p" sandbox close "$n" --force >/dev/null
        done
        for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
                m=${MOUNTS[i]}
                umount "$m" 2>/dev/null || fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
        done
        left=$(grep -F -- "$WORK" /proc/mounts)
        if [ -n "$left" ]; then
                echo "bench: STILL MOUNTED under $WORK (left in place):" >&2
                echo "$left" >&2
                rc=1
        else
                echo "cleanup: nothing left mounted under $WORK"
        fi
        left=$(pgrep -a -f -- "$WORK" || true)
        if [ -n "$left" ]; then
                echo "bench: processes left running (layerfs-daemon, fuse-overlayfs):" >&2
                echo "$left" >&2
                rc=1
        fi
        [ -z "$URING_SWITCH_WAS" ] || echo "$URING_SWITCH_WAS" >"$URING_SWITCH"
        chmod -R u+w "$WORK" 2>/dev/null
        rm -rf --one-file-system "$WORK"
        exit "$rc"
}
bench_traps

# ---- timing -----------------------------------------------------------------------

# measure CMD...: sync (untimed, so that no step pays for the writeback of the one
# before), then run CMD with stdout discarded; ELAPSED_MS is the wall-clock time.
ELAPSED_MS=0
measure() {
        local start
        sync
        start=$(now_us)
        "$@" >/dev/null
        ELAPSED_MS=$((($(now_us) - start + 500) / 1000))
}


# ---- the small-file workload ------------------------------------------------------
# One perl process per step, so that the figures are the filesystem's and not the
# cost of a process per file. Each step also checks what it sees (sizes, counts).
# shellcheck disable=SC2016 # perl code, expanded by perl
SMALL_FILES_PL='
use strict; use warnings;
my ($op, $root, $dirs, $per, $size) = @ARGV;
my $buf = "";
if ($op eq "create") {
        open(my $r, "<", "/dev/urandom") or die "urandom: $!";
        sysread($r, $buf, $size) == $size or die "urandom: short read";
        close $r;
}
for my $d (0 .. $dirs - 1) {
        my $dir = sprintf("%s/d%02d", $root, $d);
        if ($op eq "create") { mkdir $dir or die "mkdir $dir: $!"; }
        for my $f (0 .. $per - 1) {
                my $p = sprintf("%s/f%02d", $dir, $f);
                if ($op eq "create") {
                        open(my $fh, ">", $p) or die "create $p: $!";
                        (syswrite($fh, $buf) // -1) == $size or die "write $p: $!";
                        close $fh or die "close $p: $!";
                } elsif ($op eq "stat") {
                        my @st = lstat($p) or die "stat $p: $!";
                        $st[7] == $size or die "stat $p: size $st[7]";
                } elsif ($op eq "read") {
                        open(my $fh, "<", $p) or die "open $p: $!";
                        my $n = sysread($fh, my $data, $size + 1);
                        defined $n && $n == $size or die "read $p: " . ($n // $!);
                        close $fh;
                } elsif ($op eq "delete") {
                        unlink $p or die "unlink $p: $!";
                }
        }
        if ($op eq "delete") { rmdir $dir or die "rmdir $dir: $!"; }
}
'
small_files() {
        perl -e "$SMALL_FILES_PL" "$1" "$2" "$DIRS" "$FILES_PER_DIR" "$FILE_SIZE"
        [ "$1" != delete ] || freed "$2"
}

# freed DIR: returns once the space of what was removed in DIR is free. A Workspace
# answers an unlink before ext4 has removed the upper file (a reaper thread does it,
# docs/workspace.md) and answers statfs only once the reaper is done; ext4 and the
# overlays answer at once. Without it the Workspace's delete row left ext4's work to the
# rows after it: the cold random reads of the Workspace passed through came out 1.2x
# native in a quiet run (2026-12-07), and equal to native once the removals were waited
# for (bench/README.md).
freed() { stat -f "$1" >/dev/null; }

big_write() { dd if=/dev/zero of="$1/big" bs=1M count="$BIG_MIB" conv=fsync status=none; }
big_read() { dd if="$1/big" of=/dev/null bs=1M status=none; }

# RANDOM_OPS reads (cold cache) or writes (then fsync) of 4 KiB each at 4 KiB-aligned
# offsets of the 1 GiB file, the same offsets for every target (a fixed LCG). One perl
# process, pread/pwrite-like sysseek + sysread/syswrite on one descriptor.
# shellcheck disable=SC2016 # perl code, expanded by perl
RANDOM_IO_PL='
use strict; use warnings; use IO::Handle; use Fcntl qw(SEEK_SET O_RDWR);
my ($op, $path, $count) = @ARGV;
sysopen(my $fh, $path, O_RDWR) or die "open $path: $!";
my $blocks = int((-s $path) / 4096) or die "$path: smaller than 4 KiB";
my $state = 12345;
my $buf = "x" x 4096;
for (1 .. $count) {
        $state = ($state * 1103515245 + 12345) % 2147483648;
        sysseek($fh, ($state % $blocks) * 4096, SEEK_SET) or die "seek $path: $!";
        if ($op eq "read") {
                my $n = sysread($fh, my $data, 4096);
                defined $n && $n == 4096 or die "read $path: " . ($n // $!);
        } else {
                (syswrite($fh, $buf) // -1) == 4096 or die "write $path: $!";
        }
}
$fh->sync or die "fsync $path: $!" if $op eq "write";
close $fh or die "close $path: $!";
'
RANDOM_OPS=10000
random_io() { perl -e "$RANDOM_IO_PL" "$1" "$2/big" "$RANDOM_OPS"; }

# drop_caches: 3 when the kernel lets us, so that the 1 GiB read comes from the disk
# (through each filesystem) and not from the page cache the write filled.
CACHE_NOTE="cold cache (sync + drop_caches before the read)"
drop_caches() {
        sync
        if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
                CACHE_NOTE="warm cache (drop_caches refused: the read may come from the page cache)"
        fi
}

# run_workload NAME DIR: the eight rows on the empty directory DIR. Each result is added
# to R_<row>[NAME], a list of one figure per trial.
declare -A R_create R_stat R_read R_delete R_write R_bigread R_randread R_randwrite
run_workload() {
        local name=$1 dir=$2 row size
        local -A t=()
        [ -z "$(ls -A "$dir")" ] || {
                echo "bench: $dir is not empty" >&2
                return 1
        }
        for row in create stat read delete; do
                measure small_files "$row" "$dir"
                t[$row]=$ELAPSED_MS
        done
        measure big_write "$dir"
        t[write]=$ELAPSED_MS
        size=$(stat -c %s "$dir/big")
        [ "$size" = $((BIG_MIB * 1048576)) ] || {
                echo "bench: $name: the 1 GiB file has $size bytes" >&2
                return 1
        }
        drop_caches
        measure big_read "$dir"
        t[bigread]=$ELAPSED_MS
        drop_caches
        measure random_io read "$dir"
        t[randread]=$ELAPSED_MS
        measure random_io write "$dir"
        t[randwrite]=$ELAPSED_MS
        rm -f "$dir/big"
        freed "$dir" # the next target's rows must not pay for freeing this one's file
        [ -z "$(ls -A "$dir")" ] || {
                echo "bench: $name: $dir is not empty after the workload: $(find "$dir" -mindepth 1 | head -5)" >&2
                return 1
        }
        R_create[$name]+=" ${t[create]}"
        R_stat[$name]+=" ${t[stat]}"
        R_read[$name]+=" ${t[read]}"
        R_delete[$name]+=" ${t[delete]}"
        R_write[$name]+=" ${t[write]}"
        R_bigread[$name]+=" ${t[bigread]}"
        R_randread[$name]+=" ${t[randread]}"
        R_randwrite[$name]+=" ${t[randwrite]}"
        printf '  %-19s create %6s  stat %6s  read %6s  delete %6s  write 1 GiB %6s  read 1 GiB %6s  4 KiB random read %6s  write %6s ms\n' \
                "$name" "${t[create]}" "${t[stat]}" "${t[read]}" "${t[delete]}" "${t[write]}" "${t[bigread]}" \
                "${t[randread]}" "${t[randwrite]}"
}

# ---- the four targets ---------------------------------------------------------------
# target_X TRIAL: a fresh, empty directory of that kind (new dirs, new mount, new
# Sandbox), the workload on it, then torn down. A comparison target that cannot be had
# (no overlay in the kernel, no fuse-overlayfs) is skipped with a note in SKIP.
declare -A SKIP=()

target_native() {
        local d="$WORK/native-$1"
        mkdir -p "$d"
        run_workload native "$d"
        rm -rf "$d"
}

target_overlayfs() {
        local d="$WORK/overlay-$1"
        mkdir -p "$d/lower" "$d/upper" "$d/work" "$d/merged"
        if ! mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged"; then
                SKIP[overlayfs]="mount -t overlay failed"
                return 0
        fi
        MOUNTS+=("$d/merged")
        run_workload overlayfs "$d/merged"
        umount "$d/merged"
        unset 'MOUNTS[-1]'
        rm -rf "$d"
}

# fuse-overlayfs is installed (Debian package fuse-overlayfs) when missing and we can.
have_fuse_overlayfs() {
        command -v fuse-overlayfs >/dev/null && return 0
        command -v apt-get >/dev/null || return 1
        echo "installing fuse-overlayfs (apt-get)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq fuse-overlayfs >/dev/null 2>&1 ||
                { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq fuse-overlayfs >/dev/null 2>&1; } ||
                return 1
        command -v fuse-overlayfs >/dev/null
}

target_fuse-overlayfs() {
        if ! have_fuse_overlayfs; then
                SKIP[fuse-overlayfs]="not installed, and apt-get install fuse-overlayfs failed"
                return 0
        fi
        local d="$WORK/fuse-overlay-$1"
        mkdir -p "$d/lower" "$d/upper" "$d/work" "$d/merged"
        # It warns about mount options it ignores (lazytime); shown only if it fails.
        if ! fuse-overlayfs -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" \
                2>"$WORK/fuse-overlayfs.log"; then
                SKIP[fuse-overlayfs]="the mount failed: $(tr '\n' ' ' <"$WORK/fuse-overlayfs.log")"
                return 0
        fi
        MOUNTS+=("$d/merged")
        run_workload fuse-overlayfs "$d/merged"
        umount "$d/merged"
        unset 'MOUNTS[-1]'
        rm -rf "$d"
}

# uring_switch_on NAME TRANSPORT: for the uring transport, FUSE over io_uring turned on
# (the whole host's switch; the exit gives it back as it was); false, with NAME skipped,
# when the kernel has none.
uring_switch_on() {
        [ "$2" = uring ] && [ -z "$URING_SWITCH_WAS" ] || return 0
        if [ ! -w "$URING_SWITCH" ]; then
                SKIP[$1]="the kernel has no FUSE over io_uring ($URING_SWITCH)"
                return 1
        fi
        URING_SWITCH_WAS=$(cat "$URING_SWITCH")
        echo 1 >"$URING_SWITCH"
}

# passthrough_said TRANSPORT PASSTHROUGH: what a mount's log line says of passthrough:
# on when asked (1) and the kernel offers it to that transport (runtime status).
passthrough_said() {
        [ "$2" = 1 ] && [ "$(LAYERFS_FUSE_TRANSPORT=$1 lfs --json runtime status |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["fuse"]["passthrough"])')" = True ] &&
                echo on || echo off
}

# The FUSE floor: bench/fuse_floor.c answers every request from memory, served by the
# daemon's own transports (fuse/: the same mount setup, read-ahead, INIT and dispatch),
# so its figures are what the kernel's FUSE requests cost by themselves over each, the
# least any server on that transport takes. floor_on NAME TRANSPORT PASSTHROUGH TRIAL:
# the workload on a floor served as the Workspace NAME's counterpart is.
floor_on() {
        local name=$1 transport=$2 want d="$WORK/$1-$4" pid line=""
        uring_switch_on "$name" "$transport" || return 0
        want=$(passthrough_said "$transport" "$3")
        mkdir -p "$d"
        rm -f "$WORK/floor.ready"
        mkfifo "$WORK/floor.ready"
        LAYERFS_FUSE_TRANSPORT=$transport LAYERFS_FUSE_PASSTHROUGH=$3 \
                "$BUILD/fuse-floor" "$d" >"$WORK/floor.ready" 2>"$WORK/$name.log" &
        pid=$!
        # One line once the mount answers; none (EOF) when the floor ends first.
        read -r line <"$WORK/floor.ready" || true
        if [ -z "$line" ]; then
                wait "$pid" || true
                SKIP[$name]="the mount failed: $(tr '\n' ' ' <"$WORK/$name.log")"
                return 0
        fi
        MOUNTS+=("$d")
        [ "$line" = "ready (FUSE loop: $transport, passthrough: $want)" ] || {
                echo "bench: the floor at $d says '$line', not the $transport loop with passthrough $want" >&2
                return 1
        }
        run_workload "$name" "$d"
        umount "$d"
        unset 'MOUNTS[-1]'
        wait "$pid"
        rmdir "$d"
}
target_fuse-floor() { floor_on fuse-floor libfuse 0 "$1"; }
target_fuse-floor-dev() { floor_on fuse-floor-dev dev 0 "$1"; }
target_fuse-floor-dev-pt() { floor_on fuse-floor-dev-pt dev 1 "$1"; }
target_fuse-floor-uring() { floor_on fuse-floor-uring uring 0 "$1"; }
target_fuse-floor-uring-pt() { floor_on fuse-floor-uring-pt uring 1 "$1"; }

# ---- layerfs Sandboxes and Workspaces --------------------------------------------------
lfs() { "$LAYERFS" "$@"; }

# sandbox_open PROJECT: a new Sandbox; its number in SB.
SB=
sandbox_open() {
        SB=$(lfs --project "$1" sandbox create)
        SANDBOXES+=("$1 $SB")
}
sandbox_close() {
        lfs --project "$1" sandbox close "$2" --force >/dev/null
        local e kept=()
        for e in "${SANDBOXES[@]}"; do [ "$e" = "$1 $2" ] || kept+=("$e"); done
        SANDBOXES=("${kept[@]}")
}
# ws_mount PROJECT N BRANCH: mount; its path in WS.
WS=
ws_mount() {
        WS=$(lfs --project "$1" workspace mount "$2" "$3")
        WORKSPACES+=("$1 $2 $3")
}
# ws_unmount PROJECT N BRANCH [--discard]
ws_unmount() {
        lfs --project "$1" workspace unmount "$2" "$3" "${@:4}" >/dev/null
        local e kept=()
        for e in "${WORKSPACES[@]}"; do [ "$e" = "$1 $2 $3" ] || kept+=("$e"); done
        WORKSPACES=("${kept[@]}")
}

# workspace_own NAME TRANSPORT PASSTHROUGH: the same Workspace served by our own FUSE
# loop instead of libfuse's, over /dev/fuse (dev: fuse/fuse_dev.c) or io_uring rings
# (uring: fuse/fuse_uring.c), with passthrough (1: where the kernel has it) or
# without (0).
workspace_own() {
        local name=$1 transport=$2 want
        [ -d "$LAYERFS_HOME/projects/empty" ] || lfs project init empty >/dev/null
        uring_switch_on "$name" "$transport" || return 0
        want=$(passthrough_said "$transport" "$3")
        LAYERFS_FUSE_TRANSPORT=$transport LAYERFS_FUSE_PASSTHROUGH=$3 sandbox_open empty
        ws_mount empty "$SB" main
        grep -q "mounted main at $WS (FUSE loop: $transport, passthrough: $want)" <<<"$(lfs --project empty sandbox log "$SB")" || {
                echo "bench: the Workspace at $WS is not served by the $transport loop with passthrough $want" >&2
                return 1
        }
        run_workload "$name" "$WS"
        ws_unmount empty "$SB" main --discard
        sandbox_close empty "$SB"
}
target_workspace-libfuse() { workspace_own workspace-libfuse libfuse 0; }
target_workspace-dev() { workspace_own workspace-dev dev 0; }
target_workspace-dev-pt() { workspace_own workspace-dev-pt dev 1; }
target_workspace-uring() { workspace_own workspace-uring uring 0; }
target_workspace-uring-pt() { workspace_own workspace-uring-pt uring 1; }

# The second design of issue 16, built far enough to measure it: the kernel's overlayfs
# carries the writes in a native upper directory (ext4, beside the others), over a lower
# that serves the Branch through FUSE. The lower here is a Workspace (our loop, with
# passthrough) that nothing writes to; a lower made for the purpose would be read-only
# with infinite entry and attribute timeouts, so this is that design's cost or more.
# Every new name still costs a LOOKUP in the lower (a negative entry, then cached).
target_workspace-ovl() {
        local d="$WORK/ws-ovl-$1"
        [ -d "$LAYERFS_HOME/projects/empty" ] || lfs project init empty >/dev/null
        LAYERFS_FUSE_TRANSPORT=dev LAYERFS_FUSE_PASSTHROUGH=1 sandbox_open empty
        ws_mount empty "$SB" main
        mkdir -p "$d/upper" "$d/work" "$d/merged"
        if ! mount -t overlay overlay -o "lowerdir=$WS,upperdir=$d/upper,workdir=$d/work" "$d/merged" \
                2>"$WORK/ws-ovl.log"; then
                SKIP[workspace-ovl]="mount -t overlay over a Workspace failed: $(tr '\n' ' ' <"$WORK/ws-ovl.log")"
        else
                MOUNTS+=("$d/merged")
                run_workload workspace-ovl "$d/merged"
                umount "$d/merged"
                unset 'MOUNTS[-1]'
        fi
        ws_unmount empty "$SB" main --discard
        sandbox_close empty "$SB"
        rm -rf "$d"
}

# Every target once per trial; the order rotates so that none always runs first.
TARGETS=(native overlayfs fuse-overlayfs fuse-floor workspace-libfuse workspace-dev workspace-dev-pt workspace-uring
        workspace-uring-pt workspace-ovl fuse-floor-dev fuse-floor-dev-pt fuse-floor-uring fuse-floor-uring-pt)
# Each Workspace of our own loop beside its floor, for the second table.
PAIRS=(workspace-libfuse:fuse-floor workspace-dev:fuse-floor-dev workspace-dev-pt:fuse-floor-dev-pt
        workspace-uring:fuse-floor-uring workspace-uring-pt:fuse-floor-uring-pt)
# wanted TARGET: whether BENCH_TARGETS leaves TARGET in.
wanted() {
        [ -z "${BENCH_TARGETS:-}" ] || [ "$1" = native ] || [[ " $BENCH_TARGETS " == *" $1 "* ]]
}
workload_section() {
        local n i t
        for ((n = 1; n <= TRIALS; n++)); do
                echo "trial $n/$TRIALS:"
                for ((i = 0; i < ${#TARGETS[@]}; i++)); do
                        t=${TARGETS[(i + n - 1) % ${#TARGETS[@]}]}
                        wanted "$t" || continue
                        [ -n "${SKIP[$t]:-}" ] || "target_$t" "$n"
                done
        done
}

# ---- the tables --------------------------------------------------------------------
# The first table's columns; the floors of the other loops are in the second (PAIRS). The
# ratios and targets are the default Workspace's (our loop over /dev/fuse with passthrough,
# DEFAULT_COLUMN) against its floor's (fuse-floor-dev-pt).
MAIN_COLUMNS=(native overlayfs fuse-overlayfs fuse-floor-dev-pt workspace-libfuse workspace-dev workspace-dev-pt
        workspace-uring workspace-uring-pt workspace-ovl)
DEFAULT_COLUMN=6
ROWS=(create stat read delete write bigread randread randwrite)
declare -A ROW_LABEL=([create]="create 10,000" [stat]="stat 10,000" [read]="read 10,000" [delete]="delete 10,000"
        [write]="write 1 GiB (fsync)" [bigread]="read 1 GiB" [randread]="4 KiB random reads"
        [randwrite]="4 KiB random writes")

# med ROW TARGET: the median of TARGET's trials on ROW, or "-".
med() {
        local key="R_$1[$2]"
        # shellcheck disable=SC2086 # the trials, one word each
        if [ -n "${!key:-}" ]; then median ${!key}; else echo -; fi
}

print_table() {
        local fmt='%-22s %8s %10s %15s %11s %10s %9s %12s %11s %14s %9s %12s %10s %13s  %s\n'
        local row label t nat fo fl ws rf rn rl verdict
        echo
        echo "10,000 files of 4 KiB ($DIRS dirs x $FILES_PER_DIR), then one file of $BIG_MIB MiB; ms, median of $TRIALS trials"
        # shellcheck disable=SC2059
        printf "$fmt" "operation (ms)" native overlayfs fuse-overlayfs "fuse floor" "ws (libfuse)" "ws (dev)" "ws (dev+pt)" "ws (uring)" "ws (uring+pt)" "ws-ovl" "ws/fuse-ovl" \
                "ws/native" "floor/native" "targets"
        for row in "${ROWS[@]}"; do
                label=${ROW_LABEL[$row]}
                local vals=()
                for t in "${MAIN_COLUMNS[@]}"; do vals+=("$(med "$row" "$t")"); done
                nat=${vals[0]} fo=${vals[2]} fl=${vals[3]} ws=${vals[DEFAULT_COLUMN]}
                rf=$(ratio "$ws" "$fo")
                rn=$(ratio "$ws" "$nat")
                rl=$(ratio "$fl" "$nat")
                verdict=""
                # The issue's target: at least 2x faster than fuse-overlayfs. Where native
                # ext4 itself or the FUSE floor is not, no FUSE Workspace can be.
                if [ "$rf" != - ]; then
                        verdict=$(awk -v r="$rf" -v n="$(ratio "$nat" "$fo")" -v f="$(ratio "$fl" "$fo")" 'BEGIN {
                                if (r <= 0.5) print "2x fuse-ovl: met"
                                else if (n != "-" && n > 0.5) print "2x fuse-ovl: MISSED (native is not)"
                                else if (f != "-" && f > 0.5) print "2x fuse-ovl: MISSED (under the FUSE floor)"
                                else print "2x fuse-ovl: MISSED" }')
                else
                        verdict="2x fuse-ovl: n/a"
                fi
                case $row in write | bigread | randread | randwrite)
                        # The issue's data target: the best combination with passthrough.
                        local best=- pt_t pt_v
                        for pt_t in workspace-dev-pt workspace-uring-pt; do
                                pt_v=$(med "$row" "$pt_t")
                                [ "$pt_v" != - ] || continue
                                if [ "$best" = - ] || [ "$pt_v" -lt "$best" ]; then best=$pt_v; fi
                        done
                        verdict+=$(awk -v r="$(ratio "$best" "$nat")" 'BEGIN {
                                if (r == "-") print ", native+10% (pt): n/a"
                                else if (r <= 1.1) print ", native+10% (pt): met (" r ")"
                                else print ", native+10% (pt): MISSED (" r ")" }')
                        ;;
                esac
                case $row in create | stat | read | delete)
                        verdict+=$(awk -v r="$rn" -v f="$rl" 'BEGIN {
                                if (r == "-") print ", 2x native: n/a"
                                else if (r <= 2) print ", 2x native: met"
                                else if (f != "-" && f > 2) print ", 2x native: MISSED (under the FUSE floor)"
                                else print ", 2x native: MISSED" }')
                        ;;
                esac
                # shellcheck disable=SC2059
                printf "$fmt" "$label" "${vals[@]}" "$rf" "$rn" "$rl" "$verdict"
        done
        echo
        echo "1 GiB read: $CACHE_NOTE"
        echo "4 KiB random reads, then writes (and fsync): $RANDOM_OPS each at aligned offsets of the 1 GiB file"
        echo "  (the same offsets everywhere); the reads with a $CACHE_NOTE."
        echo "ratios: the default Workspace's time (ws (dev+pt)) / other time; <= 1 means it is at least as fast."
        echo "targets (the issue): every row at least 2x faster than fuse-overlayfs (ws/fuse-ovl <= 0.5;"
        echo "  'native is not': ext4 itself is not 2x faster there, 'under the FUSE floor': the floor is not);"
        echo "  create/stat/read/delete within 2x of native (ws/native <= 2); sequential and random data"
        echo "  within 10% of native with passthrough (the better of ws (dev+pt) and ws (uring+pt))."
        echo "ws (dev+pt): the default Workspace, served by our own FUSE loop over /dev/fuse with passthrough"
        echo "  (upper files' data between the kernel and the file, not through the daemon); ws (dev): the same"
        echo "  without (LAYERFS_FUSE_PASSTHROUGH=0); ws (uring), ws (uring+pt): the same over io_uring rings"
        echo "  (LAYERFS_FUSE_TRANSPORT=uring); ws (libfuse): libfuse's loop (LAYERFS_FUSE_TRANSPORT=libfuse,"
        echo "  the fallback where ours cannot mount)."
        echo "ws-ovl: the overlayfs design measured (issue 16): kernel overlayfs, upper on this disk, over a"
        echo "  Workspace (dev+pt) of the Branch as its FUSE lower (docs/workspace.md, \"Two designs\")."
        echo "fuse floor: an in-memory FUSE server that answers at once (bench/fuse_floor.c), served as the"
        echo "  default Workspace is (dev+pt); floor/native > 2 means no FUSE server of this kind"
        echo "  can meet the 2x-native target on this machine: the kernel's requests alone cost more."
        echo "reference machine (DESIGN.md), create/stat/read/delete, write/read:"
        echo "  native $REF_NATIVE; overlayfs $REF_OVERLAY; fuse-overlayfs $REF_FUSE_OVL"
        local n
        for n in "${!SKIP[@]}"; do echo "note: $n skipped: ${SKIP[$n]}"; done
        print_floor_table
}

# The Workspace beside its floor, transport by transport: the floor is the same mount
# setup, transport, INIT and dispatch serving files from memory, so ws/floor is what the
# Workspace's own work costs on that transport; below 1 the floor is not a floor.
print_floor_table() {
        local fmt='%-22s' row pair t ws fl r not line
        for pair in "${PAIRS[@]}"; do fmt+=' %16s %9s'; done
        fmt+='  %s\n'
        echo
        echo "The Workspace against its FUSE floor per transport (bench/fuse_floor.c served by the same"
        echo "transport, mount setup and dispatch); ms, median of $TRIALS trials, and ws/floor"
        local head=("operation (ms)")
        for pair in "${PAIRS[@]}"; do
                t=${pair%%:*} t=${t#workspace} t=${t#-} t=${t/-pt/+pt}
                head+=("floor (${t:-libfuse})" "ws/floor")
        done
        # shellcheck disable=SC2059
        printf "$fmt" "${head[@]}" "floor below the Workspace"
        for row in "${ROWS[@]}"; do
                line=("${ROW_LABEL[$row]}")
                not=()
                for pair in "${PAIRS[@]}"; do
                        ws=$(med "$row" "${pair%%:*}")
                        fl=$(med "$row" "${pair#*:}")
                        r=$(ratio "$ws" "$fl")
                        line+=("$fl" "$r")
                        if [ "$r" != - ] && awk -v r="$r" 'BEGIN { exit !(r < 1) }'; then not+=("${pair%%:*}"); fi
                done
                # shellcheck disable=SC2059
                printf "$fmt" "${line[@]}" "$([ ${#not[@]} -eq 0 ] && echo yes || echo "NO: ${not[*]}")"
        done
        echo "floor (X): the floor served as the Workspace column X is: libfuse (ws), our loop over"
        echo "  /dev/fuse (dev) or io_uring (uring), +pt with passthrough by the Workspace's rule (writers,"
        echo "  and readers of files of 64 KiB or more); its files live in memory (tmpfs memfds)."
}

# ---- mount time against Branch size ---------------------------------------------------
# shellcheck disable=SC2016 # perl code, expanded by perl
TREE_PL='
use strict; use warnings;
my ($root, $dirs, $per) = @ARGV;
mkdir $root or die "mkdir $root: $!";
for my $d (0 .. $dirs - 1) {
        my $dir = $dirs > 1 ? sprintf("%s/d%04d", $root, $d) : $root;
        if ($dirs > 1) { mkdir $dir or die "mkdir $dir: $!"; }
        for my $f (0 .. $per - 1) {
                open(my $fh, ">", "$dir/f$f") or die "$dir/f$f: $!";
                print $fh "file $d/$f\n";
                close $fh or die "$dir/f$f: $!";
        }
}
'

MOUNT_MS=() # filled per project by time_mounts
time_mounts() {
        local project=$1 i times=()
        sandbox_open "$project"
        for ((i = 0; i < MOUNT_TRIALS; i++)); do
                measure ws_mount "$project" "$SB" main
                times+=("$ELAPSED_MS")
                ws_unmount "$project" "$SB" main
        done
        MOUNT_MS=("${times[@]}")
}

mount_section() {
        local big="$WORK/tree-big" small="$WORK/tree-small" import_big count find_ws find_native
        perl -e "$TREE_PL" "$big" "$BIG_DIRS" "$BIG_PER_DIR"
        perl -e "$TREE_PL" "$small" 1 "$SMALL_FILES"
        measure lfs project init big --from "$big"
        import_big=$ELAPSED_MS
        lfs project init small --from "$small" >/dev/null

        time_mounts small
        local small_ms=("${MOUNT_MS[@]}")
        time_mounts big
        local big_ms=("${MOUNT_MS[@]}")
        local ms_small ms_big
        ms_small=$(median "${small_ms[@]}")
        ms_big=$(median "${big_ms[@]}")

        # One more mount of the big Branch, walked once: the namespace is read lazily, so
        # the first walk is where a Branch's size is paid. Also checks every file is there.
        sandbox_open big
        ws_mount big "$SB" main
        measure find "$WS" -type f
        find_ws=$ELAPSED_MS
        count=$(find "$WS" -type f | wc -l)
        ws_unmount big "$SB" main
        sandbox_close big "$SB"
        measure find "$big" -type f
        find_native=$ELAPSED_MS
        [ "$count" = $((BIG_DIRS * BIG_PER_DIR)) ] || {
                echo "bench: the big Workspace shows $count files, not $((BIG_DIRS * BIG_PER_DIR))" >&2
                return 1
        }

        echo
        echo "Workspace mount time against Branch size (ms; median of $MOUNT_TRIALS, 'workspace mount' wall time)"
        printf '%-34s %10s   %s\n' "Branch" "mount" "trials"
        printf '%-34s %10s   %s\n' "$SMALL_FILES files" "$ms_small" "${small_ms[*]}"
        printf '%-34s %10s   %s\n' "$((BIG_DIRS * BIG_PER_DIR)) files in $BIG_DIRS dirs" "$ms_big" "${big_ms[*]}"
        echo "big/small: $(ratio "$ms_big" "$ms_small") (target: mount time does not grow with the Branch size, so about 1)"
        echo "for scale: import of the 100,000-file tree (project init --from) $import_big ms;" \
                "first 'find -type f' over the mounted Branch $find_ws ms, over the ext4 tree $find_native ms"
}

# ---- real tools: git and make -----------------------------------------------------------
# A tree of real source files (kernel uapi, C++ and multiarch headers: about 2,000 files)
# and a generated C project of C_FILES files.
make_src_tree() {
        local root=$1 d multiarch
        mkdir -p "$root/include"
        multiarch=$(gcc -print-multiarch 2>/dev/null || true)
        for d in linux asm-generic c++ ${multiarch:+"$multiarch"}; do
                [ -d "/usr/include/$d" ] && cp -a "/usr/include/$d" "$root/include/"
        done
        local c="$root/cproj" i j
        mkdir -p "$c"
        printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n' >"$c/common.h"
        for ((i = 0; i < C_FILES; i++)); do
                {
                        echo '#include "common.h"'
                        for ((j = 0; j < C_FUNCS; j++)); do
                                echo "static long f${i}_$j(long x) { long s = x; for (int k = 0; k < $((j % 7 + 3)); k++) s = s * 31 + k * $j; return s ^ (s >> $((j % 13 + 1))); }"
                        done
                        echo "long entry$i(long x) {"
                        for ((j = 0; j < C_FUNCS; j++)); do echo "        x = f${i}_$j(x);"; done
                        echo "        return x;"
                        echo "}"
                } >"$c/f$i.c"
        done
        {
                for ((i = 0; i < C_FILES; i++)); do echo "long entry$i(long x);"; done
                echo 'int main(void) { long x = 1;'
                for ((i = 0; i < C_FILES; i++)); do echo "        x = entry$i(x);"; done
                # shellcheck disable=SC2028 # the \n is C source
                echo '        printf("%ld\n", x); return 0; }'
        } >"$c/main.c"
        sed -i '1i #include "common.h"' "$c/main.c"
        # shellcheck disable=SC2016 # make variables, expanded by make
        printf 'CFLAGS = -O2\nOBJS = $(patsubst %%.c,%%.o,$(wildcard *.c))\nprog: $(OBJS)\n\t$(CC) -o $@ $^\n%%.o: %%.c common.h\n\t$(CC) $(CFLAGS) -c $< -o $@\n' >"$c/Makefile"
}

git_commit_all() {
        "${GIT[@]}" -C "$1" init -q
        "${GIT[@]}" -C "$1" add -A
        "${GIT[@]}" -C "$1" commit -q -m x
}
git_status() { "${GIT[@]}" -C "$1" status "${@:2}"; }
build_c() { make -s -C "$1/cproj" -j2; }

# tools_on NAME DIR: the three timings on a fresh copy DIR of the tree; each is added
# to T_<what>[NAME], one figure per trial. Checks git's status is clean after the
# commit and the built program's output against the other target's.
declare -A T_git T_status T_make
tools_on() {
        local name=$1 dir=$2 out
        measure git_commit_all "$dir"
        T_git[$name]+=" $ELAPSED_MS"
        measure git_status "$dir"
        T_status[$name]+=" $ELAPSED_MS"
        out=$(git_status "$dir" --porcelain)
        [ -z "$out" ] || {
                echo "bench: $name: git status after the commit is not clean:" >&2
                echo "$out" | head -5 >&2
                return 1
        }
        measure build_c "$dir"
        T_make[$name]+=" $ELAPSED_MS"
        "$dir/cproj/prog" >"$WORK/prog.$name"
        printf '  %-10s git init+add+commit %6s  git status %4s  make -j2 %6s ms\n' \
                "$name" "${T_git[$name]##* }" "${T_status[$name]##* }" "${T_make[$name]##* }"
}

# Each trial gets a fresh cp -a of the tree and a fresh Sandbox with the Branch
# mounted; the order alternates. Trees are left in place until the end.
tools_section() {
        local src="$WORK/src" files n order t
        make_src_tree "$src"
        files=$(find "$src" -type f | wc -l)
        lfs project init src --from "$src" >/dev/null

        echo
        echo "real tools, each on a fresh copy of the tree:"
        for ((n = 1; n <= TRIALS; n++)); do
                echo "trial $n/$TRIALS:"
                order=(native workspace)
                ((n % 2)) || order=(workspace native)
                for t in "${order[@]}"; do
                        if [ "$t" = native ]; then
                                cp -a "$src" "$WORK/src-native-$n"
                                tools_on native "$WORK/src-native-$n"
                        else
                                sandbox_open src
                                ws_mount src "$SB" main
                                tools_on workspace "$WS"
                                ws_unmount src "$SB" main --discard
                                sandbox_close src "$SB"
                        fi
                done
                cmp -s "$WORK/prog.native" "$WORK/prog.workspace" || {
                        echo "bench: the program built in the Workspace prints something else than on ext4" >&2
                        return 1
                }
        done

        local g_n g_w s_n s_w m_n m_w
        # shellcheck disable=SC2086 # the trials, one word each
        {
                g_n=$(median ${T_git[native]}) g_w=$(median ${T_git[workspace]})
                s_n=$(median ${T_status[native]}) s_w=$(median ${T_status[workspace]})
                m_n=$(median ${T_make[native]}) m_w=$(median ${T_make[workspace]})
        }
        echo
        echo "Real tools on a tree of $files files ($(du -sh "$src" | cut -f1): kernel uapi, C++ and multiarch headers" \
                "+ a C project of $((C_FILES + 1)) .c files); ms, median of $TRIALS trials"
        local fmt='%-36s %10s %10s %10s\n'
        # shellcheck disable=SC2059
        printf "$fmt" operation ext4 workspace ws/ext4
        # shellcheck disable=SC2059
        printf "$fmt" "git init && add -A && commit" "$g_n" "$g_w" "$(ratio "$g_w" "$g_n")"
        # shellcheck disable=SC2059
        printf "$fmt" "git status (after the commit)" "$s_n" "$s_w" "$(ratio "$s_w" "$s_n")"
        # shellcheck disable=SC2059
        printf "$fmt" "make -j2" "$m_n" "$m_w" "$(ratio "$m_w" "$m_n")"
}

# ---- commits: one big directory, one file with many names ------------------------------
# Each commit is of a fresh project's Workspace (a Store that already held the objects
# would not write them), the files made by one perl process in the Workspace, untimed.
# shellcheck disable=SC2016 # perl code, expanded by perl
COMMIT_PL='
use strict; use warnings;
my ($op, $root, $n, $dirs, $tag) = @ARGV;
if ($op eq "files") {
        for my $d (0 .. $dirs - 1) {
                my $dir = $dirs > 1 ? sprintf("%s/d%03d", $root, $d) : "$root/one";
                mkdir $dir or die "mkdir $dir: $!";
                for my $f (0 .. $n / $dirs - 1) {
                        open(my $fh, ">", "$dir/f$f") or die "$dir/f$f: $!";
                        print $fh "$tag $d/$f\n";
                        close $fh or die "$dir/f$f: $!";
                }
        }
} else { # links: $n more names for $root/big
        for my $i (1 .. $n) { link("$root/big", "$root/link$i") or die "link $i: $!"; }
}
'
declare -A C_MS=()
COMMIT_RUN=0
# commit_once ROW SETUP...: a fresh project and Workspace, SETUP run in it (untimed), then
# the commit timed and added to C_MS[ROW].
commit_once() {
        local row=$1 p
        shift
        COMMIT_RUN=$((COMMIT_RUN + 1))
        p="commit$COMMIT_RUN"
        lfs project init "$p" >/dev/null
        sandbox_open "$p"
        ws_mount "$p" "$SB" main
        "$@" "$WS"
        measure lfs --project "$p" workspace commit "$SB" main -m "$row"
        C_MS[$row]+=" $ELAPSED_MS"
        [ -z "$(lfs --project "$p" workspace status "$SB" main)" ] || {
                echo "bench: $row: the Workspace is not clean after its commit" >&2
                return 1
        }
        ws_unmount "$p" "$SB" main
        sandbox_close "$p" "$SB"
        rm -rf "$LAYERFS_HOME/projects/$p"
}
files_one() { perl -e "$COMMIT_PL" files "$1" "$COMMIT_FILES" 1 "$COMMIT_RUN"; }
files_spread() { perl -e "$COMMIT_PL" files "$1" "$COMMIT_FILES" "$COMMIT_SPREAD" "$COMMIT_RUN"; }
big_file() { head -c $((LINKED_MIB << 20)) /dev/urandom >"$1/big"; }
big_linked() {
        big_file "$1"
        perl -e "$COMMIT_PL" links "$1" "$LINKS"
}

# commit_pair N ROW SETUP ROW2 SETUP2: both commits, the first first when N is odd.
commit_pair() {
        if (($1 % 2)); then
                commit_once "$2" "$3"
                commit_once "$4" "$5"
        else
                commit_once "$4" "$5"
                commit_once "$2" "$3"
        fi
}

commit_section() {
        local n
        echo
        echo "Workspace commits, each of a fresh project (the order alternates):"
        for ((n = 1; n <= TRIALS; n++)); do
                commit_pair "$n" one files_one spread files_spread
                printf '  trial %d/%d: %d files in one dir %6s  in %d dirs %6s ms\n' "$n" "$TRIALS" "$COMMIT_FILES" \
                        "${C_MS[one]##* }" "$COMMIT_SPREAD" "${C_MS[spread]##* }"
        done
        for ((n = 1; n <= LINK_TRIALS; n++)); do
                commit_pair "$n" linked big_linked single big_file
                printf '  trial %d/%d: %d MiB with %d names %6s  with one name %6s ms\n' "$n" "$LINK_TRIALS" \
                        "$LINKED_MIB" "$((LINKS + 1))" "${C_MS[linked]##* }" "${C_MS[single]##* }"
        done
        local one spread linked single r1 r2
        # shellcheck disable=SC2086 # the trials, one word each
        {
                one=$(median ${C_MS[one]}) spread=$(median ${C_MS[spread]})
                linked=$(median ${C_MS[linked]}) single=$(median ${C_MS[single]})
        }
        r1=$(ratio "$one" "$spread")
        r2=$(ratio "$linked" "$single")
        echo
        echo "Workspace commit (ms, median of $TRIALS and $LINK_TRIALS trials; 'workspace commit' wall time)"
        local fmt='%-44s %8s %-34s %8s %7s  %s\n'
        # shellcheck disable=SC2059
        printf "$fmt" commit ms "against" ms ratio target
        # shellcheck disable=SC2059
        printf "$fmt" "$COMMIT_FILES new files in one directory" "$one" "the same in $COMMIT_SPREAD directories" \
                "$spread" "$r1" "$(awk -v r="$r1" 'BEGIN { print (r != "-" && r <= 2 ? "<= 2: met" : "<= 2: MISSED") }')"
        # shellcheck disable=SC2059
        printf "$fmt" "a $LINKED_MIB MiB file with $((LINKS + 1)) names" "$linked" "with one name" "$single" "$r2" \
                "$(awk -v r="$r2" 'BEGIN { print (r != "-" && r <= 1.2 ? "<= 1.2: met" : "<= 1.2: MISSED") }')"
}

# ---- main -------------------------------------------------------------------------------
main() {
        echo "layerfs FUSE Workspace against ext4, overlayfs and fuse-overlayfs, on the same disk"
        echo "work dir: $WORK ($(df --output=fstype "$WORK" | tail -1) on $(df --output=source "$WORK" | tail -1))"
        local fo="not installed"
        have_fuse_overlayfs || true
        command -v fuse-overlayfs >/dev/null && fo=$(fuse-overlayfs --version 2>/dev/null | sed -n 's/^fuse-overlayfs: //p')
        echo "$("$LAYERFS" --version), kernel $(uname -r), $(nproc) CPUs, $(git --version), fuse-overlayfs: $fo"
        echo
        local sections=("$@")
        [ ${#sections[@]} -gt 0 ] || sections=(workload mount tools commit)
        for section in "${sections[@]}"; do
                case "$section" in
                workload)
                        echo "small files and $BIG_MIB MiB, each target on a fresh empty directory:"
                        workload_section && print_table
                        ;;
                mount) mount_section ;;
                tools) tools_section ;;
                commit) commit_section ;;
                *)
                        echo "bench: unknown section '$section' (workload, mount, tools, commit)" >&2
                        return 1
                        ;;
                esac
        done
        echo
}

main "$@"
