#!/bin/bash
# Runs inside the fresh Debian 12 root of tests/fresh/fresh_check.sh, as root, in a clean
# checkout at /root/layerfs. Only bash and what a minbase system has may be used before
# ./setup.sh (no procps, no python3). Each step's output goes to /root/fresh-logs/.
set -euo pipefail
SRC=/root/layerfs
export DEBIAN_FRONTEND=noninteractive
LOGS=/root/fresh-logs
mkdir -p "$LOGS"
say() { printf 'fresh-root: %s\n' "$*"; }
fail() {
        say "FAIL: $*" >&2
        exit 1
}
# run NAME COMMAND...: runs it with its output in $LOGS/NAME.log; on failure shows the end.
run() {
        local name=$1 start=$SECONDS
        shift
        if ! "$@" >"$LOGS/$name.log" 2>&1; then
                tail -40 "$LOGS/$name.log" >&2
                fail "$name: '$*' failed (the end of its log is above)"
        fi
        say "$name: ok in $((SECONDS - start)) s"
}
# What should be left of the Sandboxes run here: no process in their cgroup root (every
# daemon and command of theirs ran in it: /proc shows the host's processes too), no
# cgroup below it, no Workspace mounted in this root.
nothing_running() {
        local left
        left=$(cat "$LAYERFS_CGROUP_ROOT/cgroup.procs" 2>/dev/null || true)
        [ -z "$left" ] || fail "$1: processes left in $LAYERFS_CGROUP_ROOT: $left"
        left=$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d 2>/dev/null || true)
        [ -z "$left" ] || fail "$1: cgroups left: $left"
        ! grep -q ' fuse.layerfs ' /proc/mounts || fail "$1: Workspaces left mounted: $(grep ' fuse.layerfs ' /proc/mounts)"
}
cd "$SRC"

# ---- 1. the README's first command, and the demo's result -------------------------------
first=$(sed -n '/^## Two commands/,/^```$/{/^```sh$/,/^```$/p}' README.md | sed -n '2p' | sed 's/ *#.*//')
[ "$first" = "./setup.sh" ] || fail "the README's first command is '$first', this test runs ./setup.sh"
run setup ./setup.sh
demo=$LOGS/setup.log
for line in "hello from a Workspace" "A demo/demo.h" "M stdio.h" "D zlib.h" "demo: ok"; do
        grep -qF "$line" "$demo" || fail "the demo's output lacks '$line' (log: $demo)"
done
# Its command ran as the command identity, in a cgroup leaf of the Sandbox.
grep -qx 501 "$demo" || fail "the demo's command did not run as uid 501"
grep -q "^0::.*/cmd-[0-9]*$" "$demo" || fail "the demo's command did not run in a cgroup leaf of its own"
nothing_running "after the demo"

if [ -n "${LAYERFS_FRESH_FULL:-}" ]; then
        second=$(sed -n '/^## Two commands/,/^```$/{/^```sh$/,/^```$/p}' README.md | sed -n '3p' | sed 's/ *#.*//')
        [ "$second" = "make check" ] || fail "the README's second command is '$second', this test runs make check"
        run make-check make check
        grep -E '^(unit|e2e|adversarial|packaging): ' "$LOGS/make-check.log" || true
fi

# ---- 2. the Debian packages: built here, installed, used, purged ------------------------
run make-deb make deb
debs=(build/deb/layerfs_*.deb build/deb/liblayerfs0_*.deb build/deb/liblayerfs-dev_*.deb)
# The file system as it is before: afterwards only the home may be new.
snapshot() {
        find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /root \
                -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg -o -path /var/log \) -prune \
                -o -print | sort
}
snapshot >"$LOGS/files-before"
cp "${debs[@]}" /tmp/
run install-debs apt-get install -y /tmp/layerfs_*.deb /tmp/liblayerfs0_*.deb /tmp/liblayerfs-dev_*.deb
# Nothing of the build tree may be found from here on.
mv "$SRC/build" "$SRC/build.aside"
[ "$(layerfs --version)" = "layerfs $(make -s --no-print-directory print-version)" ] || fail "layerfs --version: $(layerfs --version)"
[ -x /usr/libexec/layerfs/layerfs-daemon ] || fail "no /usr/libexec/layerfs/layerfs-daemon"
[ -x /usr/libexec/layerfs/layerfs-init ] || fail "no /usr/libexec/layerfs/layerfs-init"
[ -f /usr/share/bash-completion/completions/layerfs ] || fail "no bash completion"
[ -f /lib/systemd/system/layerfs-reclaim.service ] || fail "no layerfs-reclaim.service"
[ -L /etc/systemd/system/multi-user.target.wants/layerfs-reclaim.service ] || fail "layerfs-reclaim.service is not enabled"

# The demo with the installed CLI (and so the installed daemon), from outside the tree.
cp tests/e2e/demo.sh /tmp/demo.sh
run installed-demo env LAYERFS=/usr/bin/layerfs bash /tmp/demo.sh
grep -qF "hello from a Workspace" "$LOGS/installed-demo.log" || fail "the installed demo's Workspace command did not run"
nothing_running "after the installed demo"

# The README's C example and every_call.c, built with pkg-config alone; the home is the
# default one (/var/lib/layerfs), which stays after the purge.
mkdir /tmp/progs
awk '/^```c$/ { inside = 1; next } inside && /^```$/ { exit } inside' README.md >/tmp/progs/example.c
cp tests/packaging/every_call.c /tmp/progs/
cd /tmp/progs
for prog in example every_call; do
        # shellcheck disable=SC2046
        run "build-$prog" cc -Wall -Wextra -Werror -o "$prog" "$prog.c" $(pkg-config --cflags --libs layerfs)
        readelf -d "$prog" | grep -q 'NEEDED.*\[liblayerfs.so.0\]' || fail "$prog is not linked to liblayerfs.so.0"
done
run example ./example "$SRC/docs"
grep -q "^branch feature of project web at " "$LOGS/example.log" || fail "the example said: $(cat "$LOGS/example.log")"
# No LAYERFS_DAEMON: the library finds the daemon where the package put it.
mkdir /tmp/progs/every
run every-call env -u LAYERFS_DAEMON ./every_call "$SRC/docs" /tmp/progs/every
grep -q "^every_call: ok" "$LOGS/every-call.log" || fail "every_call said: $(cat "$LOGS/every-call.log")"
nothing_running "after every_call"
[ -d /var/lib/layerfs/projects/web ] && [ -d /var/lib/layerfs/projects/every ] || fail "the default home has not both projects"
cd "$SRC"

# ---- 3. removal: nothing left but the home ------------------------------------------------
run purge apt-get purge -y layerfs liblayerfs0 liblayerfs-dev
left=$(dpkg-query -W -f='${Package} ${Status}\n' 'layerfs*' 'liblayerfs*' 2>/dev/null | grep -v 'not-installed' || true)
[ -z "$left" ] || fail "packages left: $left"
snapshot >"$LOGS/files-after"
gone=$(comm -23 "$LOGS/files-before" "$LOGS/files-after")
[ -z "$gone" ] || fail "files that were there before the install are gone: $gone"
new=$(comm -13 "$LOGS/files-before" "$LOGS/files-after" | grep -v '^/var/lib/layerfs\(/\|$\)' || true)
[ -z "$new" ] || fail "left after the purge, besides the home /var/lib/layerfs: $new"
say "after the purge only the home is left: $(find /var/lib/layerfs | wc -l) entries in /var/lib/layerfs"

# ---- 4. make install into /usr/local, used, make uninstall -------------------------------
# The build of step 1 (PREFIX /usr/local): the library finds the daemon in
# /usr/local/libexec/layerfs and ld.so finds the library after ldconfig, with no variable.
mv "$SRC/build.aside" "$SRC/build"
find / -xdev -path /proc -prune -o ! -type d -print | sort >"$LOGS/local-before"
run make-install make install
run build-every_call-local sh -c 'cd /tmp/progs && cc -Wall -Wextra -Werror -o every_local every_call.c $(pkg-config --cflags --libs layerfs)'
readelf -d /tmp/progs/every_local | grep -q 'NEEDED.*\[liblayerfs.so.0\]' || fail "every_local is not linked to liblayerfs.so.0"
mkdir -m 755 /var/lib/layerfs-local /tmp/progs/every-local
run every-call-local env -u LAYERFS_DAEMON LAYERFS_HOME=/var/lib/layerfs-local/home \
        /tmp/progs/every_local "$SRC/docs" /tmp/progs/every-local
nothing_running "after every_call with make install's library"
run make-uninstall make uninstall
find / -xdev -path /proc -prune -o ! -type d -print | sort >"$LOGS/local-after"
new=$(comm -13 "$LOGS/local-before" "$LOGS/local-after" |
        grep -v '^/var/lib/layerfs-local/\|^/root/\|^/tmp/\|^/var/cache/\|^/var/log/' || true)
[ -z "$new" ] || fail "left by make install + make uninstall: $new"
say ok
