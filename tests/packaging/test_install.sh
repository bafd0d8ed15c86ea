#!/usr/bin/env bash
# make install into a DESTDIR: every file in its place with the library's soname links;
# make uninstall leaves nothing. The man pages document what --help lists (every
# command, its options) and every function of layerfs.h. The README's C example and a
# program calling every public function build with `pkg-config --cflags --libs layerfs`
# alone, against the shared library, and run. Another PREFIX reaches the code (the
# daemon's path), the .pc file and the units.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
DEST=$WORK/root
P=/usr/local
make -s -C "$ROOT" BUILD="$BUILD" install DESTDIR="$DEST" >"$WORK/install.log" 2>&1 ||
        fail "make install: $(tail -5 "$WORK/install.log")"

# ---- the layout ----------------------------------------------------------------------
expected="f 755 $P/bin/layerfs
f 755 $P/libexec/layerfs/layerfs-daemon
f 755 $P/libexec/layerfs/layerfs-init
f 644 $P/lib/liblayerfs.so.0.1.0
l 777 $P/lib/liblayerfs.so.0 -> liblayerfs.so.0.1.0
l 777 $P/lib/liblayerfs.so -> liblayerfs.so.0
f 644 $P/lib/liblayerfs.a
f 644 $P/include/layerfs.h
f 644 $P/lib/pkgconfig/layerfs.pc
f 644 $P/share/man/man1/layerfs.1
f 644 $P/share/man/man8/layerfs-daemon.8
f 644 $P/share/man/man3/liblayerfs.3
f 644 $P/share/bash-completion/completions/layerfs
f 644 $P/lib/systemd/system/layerfs-reclaim.service
f 644 $P/share/layerfs/systemd/layerfs-delegate.conf"
got=$(cd "$DEST" && find . ! -type d -printf '%y %m /%P %l\n' |
        awk '$1 == "l" { print $1, $2, $3, "->", $4; next } { print $1, $2, $3 }')
assert_eq "$(sort <<<"$got")" "$(sort <<<"$expected")" "the installed files"
assert_eq "$(readelf -d "$DEST$P/lib/liblayerfs.so.0.1.0" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')" \
        liblayerfs.so.0 "the soname"
# The library exports exactly the functions of layerfs.h.
api=$(sh "$ROOT/packaging/api-functions.sh" "$ROOT/include/layerfs.h" | sort)
assert_eq "$(nm -D --defined-only "$DEST$P/lib/liblayerfs.so.0" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort)" \
        "$api" "the library's exported functions"
assert_eq "$(grep -E '^(libdir=|includedir=|Libs:|Cflags:)' "$DEST$P/lib/pkgconfig/layerfs.pc")" "libdir=$P/lib
includedir=$P/include
Libs: -L\${libdir} -llayerfs
Cflags: -I\${includedir}" "layerfs.pc"
grep -qx "ExecStart=$P/bin/layerfs runtime reclaim" "$DEST$P/lib/systemd/system/layerfs-reclaim.service" ||
        fail "the unit does not run $P/bin/layerfs"
ok

# ---- the man pages against --help -----------------------------------------------------
export MANPATH=$DEST$P/share/man MANWIDTH=200
LAYERFS_BIN=$DEST$P/bin/layerfs
help_commands=$("$LAYERFS_BIN" --help | sed -n '/^COMMANDS$/,/^$/s/^    \([a-z][a-z]*\) \([a-z_][a-z_]*\).*/\1 \2/p')
[ "$(wc -l <<<"$help_commands")" -ge 25 ] || fail "--help lists only: $help_commands"
man_text=$(man layerfs 2>&1) || fail "man layerfs: $man_text"
# Each command is a subsection of COMMANDS, headed by its usage line.
man_commands=$(sed -n 's/^   layerfs \([a-z][a-z]*\) \([a-z_][a-z_]*\).*/\1 \2/p' <<<"$man_text")
assert_eq "$man_commands" "$help_commands" "the commands of man layerfs and of layerfs --help"
while read -r group method; do
        usage=$("$LAYERFS_BIN" "$group" "$method" --help | head -1)
        [[ $usage == "layerfs $group $method"* ]] || fail "'layerfs $group $method --help' starts with: $usage"
        grep -qxF "   $usage" <<<"$man_text" || fail "man layerfs lacks the usage line '$usage'"
        for option in $(grep -o -- '--[a-z-]*' <<<"$usage" | sort -u); do
                grep -q -- "$option" <<<"$man_text" || fail "man layerfs lacks $option of $group $method"
        done
        ok
done <<<"$help_commands"
for section in NAME SYNOPSIS DESCRIPTION COMMANDS "GLOBAL OPTIONS" ENVIRONMENT FILES "EXIT STATUS" EXAMPLES "SEE ALSO"; do
        grep -qx "$section" <<<"$man_text" || fail "man layerfs has no $section section"
done
for var in $("$LAYERFS_BIN" --help | sed -n '/^ENVIRONMENT$/,/^$/p' | grep -o 'LAYERFS_[A-Z_]*' | sort -u); do
        grep -q "$var" <<<"$man_text" || fail "man layerfs lacks $var"
done
grep -q "$P/libexec/layerfs/layerfs-daemon" <<<"$man_text" || fail "man layerfs does not name the daemon's path"
daemon_text=$(man 8 layerfs-daemon 2>&1) || fail "man layerfs-daemon: $daemon_text"
for option in $("$DEST$P/libexec/layerfs/layerfs-daemon" --help | sed -n '/^OPTIONS$/,/^$/p' | grep -o -- '--[a-z]*'); do
        grep -q -- "$option" <<<"$daemon_text" || fail "man layerfs-daemon lacks $option"
done
lib_text=$(man 3 liblayerfs 2>&1) || fail "man liblayerfs: $lib_text"
for f in $api; do
        grep -q "$f(" <<<"$lib_text" || fail "man liblayerfs lacks $f"
done
# groff's warnings (what lintian reports as groff-message).
for page in "$DEST$P"/share/man/man*/*; do
        warnings=$(LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
        [ -z "$warnings" ] || fail "$page: $warnings"
done
ok

# ---- C programs with pkg-config alone, against the shared library ----------------------
pc() { PKG_CONFIG_SYSROOT_DIR=$DEST PKG_CONFIG_LIBDIR=$DEST$P/lib/pkgconfig pkg-config "$@" layerfs; }
assert_eq "$(pc --cflags --libs | xargs)" "-I$DEST$P/include -L$DEST$P/lib -llayerfs" "pkg-config's flags"
awk '/^```c$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$ROOT/README.md" >"$WORK/example.c"
[ -s "$WORK/example.c" ] || fail "no C example in README.md"
# Every function of the header is called by every_call.c.
for f in $api; do
        grep -q "\b$f(" "$ROOT/tests/packaging/every_call.c" || fail "every_call.c does not call $f"
done
ok
for prog in example every_call; do
        src=$WORK/example.c
        [ "$prog" = every_call ] && src=$ROOT/tests/packaging/every_call.c
        # shellcheck disable=SC2046
        (cd "$WORK" && cc -Wall -Wextra -Werror -o "$prog" "$src" $(pc --cflags --libs)) ||
                fail "$prog did not build with pkg-config's flags alone"
        grep -q 'NEEDED.*\[liblayerfs.so.0\]' <<<"$(readelf -d "$WORK/$prog")" || fail "$prog is not linked to liblayerfs.so.0"
        [ -z "$(nm "$WORK/$prog" | awk '$2 == "T" && $3 ~ /^lfs_/')" ] || fail "$prog holds the library's code (static)"
        ok
done
export LD_LIBRARY_PATH=$DEST$P/lib
mkdir -m 755 "$WORK/h"
out=$(LAYERFS_HOME=$WORK/h/example "$WORK/example" "$ROOT/docs" 2>&1) || fail "the README's example: $out"
[[ $out == "branch feature of project web at "* ]] || fail "the README's example said: $out"
ok
# The installed daemon is not where the library was built to look (this is a DESTDIR):
# LAYERFS_DAEMON points at it. tests/fresh runs the same program with no variable.
mkdir "$WORK/every"
out=$(LAYERFS_HOME=$WORK/h/every LAYERFS_DAEMON=$DEST$P/libexec/layerfs/layerfs-daemon \
        "$WORK/every_call" "$ROOT/docs" "$WORK/every" 2>&1) || fail "every_call: $out"
[[ $out == "every_call: ok"* ]] || fail "every_call said: $out"
ok
unset LD_LIBRARY_PATH

# ---- uninstall ------------------------------------------------------------------------
make -s -C "$ROOT" BUILD="$BUILD" uninstall DESTDIR="$DEST" >"$WORK/uninstall.log" 2>&1 ||
        fail "make uninstall: $(tail -5 "$WORK/uninstall.log")"
left=$(find "$DEST" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
ok

# ---- another PREFIX reaches the code, the .pc file and the units -----------------------
make -s -C "$ROOT" BUILD="$WORK/build-opt" PREFIX=/opt/lfs install DESTDIR="$WORK/opt" >"$WORK/opt.log" 2>&1 ||
        fail "make install PREFIX=/opt/lfs: $(tail -5 "$WORK/opt.log")"
grep -qx "    /opt/lfs/libexec/layerfs/layerfs-daemon" <<<"$("$WORK/opt/opt/lfs/bin/layerfs" --help)" ||
        fail "the CLI built with PREFIX=/opt/lfs does not look for /opt/lfs/libexec/layerfs/layerfs-daemon"
grep -qx "libdir=/opt/lfs/lib" "$WORK/opt/opt/lfs/lib/pkgconfig/layerfs.pc" || fail "layerfs.pc for /opt/lfs"
grep -qx "ExecStart=/opt/lfs/bin/layerfs runtime reclaim" "$WORK/opt/opt/lfs/lib/systemd/system/layerfs-reclaim.service" ||
        fail "the unit for /opt/lfs"
ok
finish
