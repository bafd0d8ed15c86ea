#!/usr/bin/env bash
# The build's first step on a machine that lacks packages: without root, make names the
# missing packages and the command that installs them, and stops before any compiler
# runs (not a compiler or linker error). With the packages, a new build directory gets
# pkg-config's flags before anything is compiled. (The whole first run on a bare machine
# is make fresh-check.)
source "$(dirname "$0")/../e2e/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (to run make as another user)"
# The Makefile alone (the checkout may be where nobody can read it, as in /root): the
# packages are checked before any source is looked at.
mkdir -m 755 "$WORK/src"
cp "$ROOT/Makefile" "$WORK/src/"
mkdir "$WORK/b"
chown nobody "$WORK/b"
set +e
out=$(su nobody -s /bin/sh -c "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -C '$WORK/src' BUILD='$WORK/b' \
        BUILD_PACKAGES='pkg-config layerfs-no-such-package' all" 2>&1)
status=$?
set -e
[ "$status" != 0 ] || fail "make without a package succeeded: $out"
grep -q "these Debian packages are missing: layerfs-no-such-package$" <<<"$out" || fail "make did not name the package: $out"
grep -q "apt-get install layerfs-no-such-package" <<<"$out" || fail "make did not say how to install it: $out"
! grep -qE '(^| )(cc|gcc|clang|ld) |undefined reference|No such file or directory.*\.h' <<<"$out" ||
        fail "a compiler ran: $out"
[ -z "$(ls -A "$WORK/b")" ] || fail "make wrote into the build directory: $(ls -A "$WORK/b")"
ok

# With the packages: the flags are there before the first compile.
make -s -C "$ROOT" BUILD="$WORK/b2" "$WORK/b2/userspace-lib/base/hash.o" >"$WORK/b2.log" 2>&1 ||
        fail "make: $(tail -5 "$WORK/b2.log")"
# The library's packages as the Makefile names them (PKGS), so that a new one is checked
# too; all of them give their flags, all but libcrypto (loaded when first needed) their
# libraries.
pkgs=$(sed -n 's/^PKGS := //p' "$ROOT/Makefile")
[ -n "$pkgs" ] || fail "the Makefile names no PKGS"
linked=$(tr ' ' '\n' <<<"$pkgs" | grep -vx libcrypto | xargs)
grep -qx "PKG_CFLAGS := $(pkg-config --cflags $pkgs | sed 's/ *$//')" "$WORK/b2/config.mk" ||
        fail "config.mk: $(cat "$WORK/b2/config.mk")"
grep -qx "PKG_LIBS := $(pkg-config --libs $linked | sed 's/ *$//')" "$WORK/b2/config.mk" ||
        fail "config.mk: $(cat "$WORK/b2/config.mk")"
! grep -q -- "-lcrypto" "$WORK/b2/config.mk" || fail "config.mk links libcrypto: $(cat "$WORK/b2/config.mk")"
ok
finish
