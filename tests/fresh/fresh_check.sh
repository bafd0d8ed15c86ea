#!/usr/bin/env bash
# make fresh-check: the README's first command on a fresh Debian 12 machine, from a clean
# checkout. A minimal Debian 12 root (debootstrap --variant=minbase, made once per machine
# and cached in /var/cache/layerfs/fresh/) is copied for each run; a `git archive` of HEAD
# goes to /root/layerfs in it; the root gets /proc, /sys (with the cgroup mounts), /dev
# (with /dev/fuse) and a tmpfs /run, and is bound onto itself (unshare needs its root to
# be a mount point). Inside (tests/fresh/in_root.sh), as root: ./setup.sh and the demo's
# result, then the Debian packages of `make deb` installed, used (the demo with the
# installed CLI, the README's C example and every_call.c built with pkg-config alone) and
# purged, with nothing left but the home.
#
# Everything it mounts is unmounted and every process it started in the root is ended
# however the run ends; a run that was killed is cleaned up by the next one. It is skipped
# (exit 0) only when the Debian mirror cannot be reached.
#
# Environment: LAYERFS_FRESH_CACHE (default /var/cache/layerfs/fresh), LAYERFS_FRESH_MIRROR
# (default http://deb.debian.org/debian), LAYERFS_FRESH_FULL=1 also runs the README's
# second command (`make check`) in the root, after the first.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${LAYERFS_FRESH_CACHE:-/var/cache/layerfs/fresh}
MIRROR=${LAYERFS_FRESH_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ARCH=$(dpkg --print-architecture)
BASE=$CACHE/$SUITE-minbase-$ARCH
ARCHIVES=$CACHE/archives
RUN=$CACHE/run-$$
R=$RUN/root

say() { printf 'fresh-check: %s\n' "$*"; }
die() {
        say "FAIL: $*" >&2
        exit 1
}
now() { date +%s; }
start=$(now)

if [ -n "${LAYERFS_IN_FRESH_ROOT:-}" ]; then
        say "skipped: this is already a fresh root (make check inside make fresh-check)"
        exit 0
fi
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts, cgroups)"
for tool in debootstrap git chroot unshare findmnt; do
        command -v "$tool" >/dev/null || die "$tool is missing ('make deps' installs what make check needs)"
done

# Skipped only when the mirror cannot be reached (offline machine, no proxy).
probe=$(mktemp)
if ! /usr/lib/apt/apt-helper download-file "$MIRROR/dists/$SUITE/Release" "$probe" >/dev/null 2>&1; then
        rm -f "$probe"
        say "skipped: the Debian mirror $MIRROR cannot be reached (set LAYERFS_FRESH_MIRROR to one that can)"
        exit 0
fi
rm -f "$probe"

CG_MOUNT=$(findmnt -n -t cgroup2 -o TARGET /sys/fs/cgroup 2>/dev/null || findmnt -n -t cgroup2 -o TARGET | head -1)
[ -n "$CG_MOUNT" ] || die "no cgroup2 mount on this host"
# The Sandboxes made in the root get a cgroup root of their own, ended with the run.
CGR=$CG_MOUNT/layerfs-fresh-$$

# ---- cleaning up, now and after a run that was killed ------------------------------------

# The mount points at or below DIR, deepest first.
mounts_below() {
        awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# clean_run DIR CGROUP: ends every process whose root is in DIR/root and every process in
# CGROUP, unmounts everything below DIR, removes CGROUP and DIR.
clean_run() {
        local dir=$1 cgroup=$2 p root round m left
        for round in 1 2 3 4 5; do
                left=""
                for p in /proc/[0-9]*; do
                        root=$(readlink "$p/root" 2>/dev/null) || continue
                        if [ "$root" = "$dir/root" ] || [[ $root == "$dir/root/"* ]]; then
                                kill -9 "${p#/proc/}" 2>/dev/null && left="$left ${p#/proc/}"
                        fi
                done
                [ -z "$left" ] && break
                wait_gone $left
        done
        if [ -d "$cgroup" ]; then
                echo 1 >"$cgroup/cgroup.kill" 2>/dev/null || true
                for round in $(seq 100); do
                        grep -q '^populated 0' "$cgroup/cgroup.events" 2>/dev/null && break
                        sleep 0.1
                done
                find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
                [ ! -d "$cgroup" ] || say "warning: could not remove the cgroup $cgroup" >&2
        fi
        for m in $(mounts_below "$dir"); do
                umount -l "$m" 2>/dev/null || true
        done
        left=$(mounts_below "$dir")
        # Never remove a tree that still has /sys or /dev of the host mounted in it.
        [ -z "$left" ] || die "still mounted below $dir, left in place: $left"
        rm -rf --one-file-system "$dir"
}

# wait_gone PID...: until those processes are gone (their /proc entries), at most 10 s.
wait_gone() {
        local p i
        for p in "$@"; do
                for i in $(seq 100); do
                        [ -e "/proc/$p" ] || break
                        sleep 0.1
                done
        done
}

mkdir -p "$CACHE" "$ARCHIVES"
exec 9>"$CACHE/lock"
# Runs of killed fresh-checks (their pid is gone, or now another program's).
for old in "$CACHE"/run-*; do
        [ -d "$old" ] || continue
        pid=${old##*/run-}
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q fresh_check.sh; then
                continue
        fi
        say "cleaning up after an earlier run that was killed: $old"
        clean_run "$old" "$CG_MOUNT/layerfs-fresh-$pid"
done

cleanup() {
        local status=$?
        trap - EXIT INT TERM
        if [ -d "$RUN" ]; then
                if [ -d "$R/root/fresh-logs" ]; then
                        rm -rf "$CACHE/last-run"
                        cp -a "$R/root/fresh-logs" "$CACHE/last-run"
                        [ "$status" = 0 ] || say "the logs of this run: $CACHE/last-run/"
                fi
                # What the root downloaded serves the next runs.
                if [ -d "$R/var/cache/apt/archives" ]; then
                        flock 9
                        cp -l -n "$R"/var/cache/apt/archives/*.deb "$ARCHIVES/" 2>/dev/null || true
                        flock -u 9
                fi
                clean_run "$RUN" "$CGR"
        fi
        say "$([ "$status" = 0 ] && echo ok || echo failed) in $(($(now) - start)) s"
        exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the cached minimal root ---------------------------------------------------------
flock 9
# Package files this machine already has serve debootstrap and the roots (hard links).
cp -l -n /var/cache/apt/archives/*.deb "$ARCHIVES/" 2>/dev/null || true
if [ ! -e "$BASE/.complete" ]; then
        say "making the cached Debian 12 minbase root $BASE (only the first run on a machine does)"
        t=$(now)
        rm -rf --one-file-system "$BASE.tmp"
        debootstrap --variant=minbase --arch="$ARCH" --cache-dir="$ARCHIVES" "$SUITE" "$BASE.tmp" "$MIRROR" \
                >"$CACHE/debootstrap.log" 2>&1 || {
                tail -20 "$CACHE/debootstrap.log" >&2
                die "debootstrap failed (log: $CACHE/debootstrap.log)"
        }
        # The sources of a Debian 12 installation: with its updates and security updates.
        cat >"$BASE.tmp/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
        # No package starts a service of the host from inside the root.
        printf '#!/bin/sh\nexit 101\n' >"$BASE.tmp/usr/sbin/policy-rc.d"
        chmod 755 "$BASE.tmp/usr/sbin/policy-rc.d"
        touch "$BASE.tmp/.complete"
        mv "$BASE.tmp" "$BASE"
        say "debootstrap took $(($(now) - t)) s"
fi
flock -u 9

# ---- this run's root -------------------------------------------------------------------
t=$(now)
mkdir -p "$RUN"
cp -a "$BASE" "$R"
rm "$R/.complete"
cp -l -n "$ARCHIVES"/*.deb "$R/var/cache/apt/archives/" 2>/dev/null || true
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
mkdir "$R/root/layerfs"
head=$(git -C "$ROOT" rev-parse --short HEAD)
git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$R/root/layerfs"
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] ||
        say "note: the checkout has uncommitted changes; this run tests HEAD ($head) only"
mount --bind "$R" "$R"
mount --make-private "$R"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --make-rslave "$R/sys"
mount --rbind /dev "$R/dev"
mount --make-rslave "$R/dev"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
say "root ready in $(($(now) - t)) s: $R with HEAD $head"

# ---- inside ------------------------------------------------------------------------------
in_root() {
        env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
                TERM=dumb LAYERFS_CGROUP_ROOT="$CGR" LAYERFS_IN_FRESH_ROOT=1 LAYERFS_FRESH_FULL="${LAYERFS_FRESH_FULL:-}" \
                chroot "$R" "$@"
}
in_root /bin/bash /root/layerfs/tests/fresh/in_root.sh
