#!/bin/sh
# mkdeb.sh OUT: builds the Debian packages layerfs, liblayerfs0 and liblayerfs-dev into
# OUT (make deb: build/deb). The code is built as Debian builds it (dpkg-buildflags;
# /usr, the multiarch libdir, /lib/systemd/system) in OUT/obj and installed with make
# install into OUT/stage; each file then goes to its package, stripped, man pages
# compressed, with copyright and changelog; dpkg-shlibdeps computes the Depends on the
# runtime libraries and dpkg-gencontrol the control files.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${1:?usage: mkdeb.sh OUT}
case "$OUT" in /*) ;; *) OUT=$ROOT/$OUT ;; esac
DEB=$ROOT/packaging/deb
MAKE=${MAKE:-make}

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(dpkg-parsechangelog -l "$DEB/changelog" -SVersion)
made=$($MAKE -s --no-print-directory -f Makefile print-version 2>/dev/null || true)
[ "$version" = "$made" ] || {
        echo "mkdeb: packaging/deb/changelog is at $version but the Makefile's VERSION is $made: add a changelog entry" >&2
        exit 1
}
# The files' and archives' times: the changelog's (reproducible builds).
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$DEB/changelog" -STimestamp)
export SOURCE_DATE_EPOCH

# Every hardening flag (bindnow too), as lintian asks.
DEB_BUILD_MAINT_OPTIONS=hardening=+all
export DEB_BUILD_MAINT_OPTIONS

stage=$OUT/stage
# From scratch: make does not rebuild for changed flags.
rm -rf "$OUT/obj" "$stage" "$OUT/src" "$OUT"/pkg-* "$OUT"/*.deb
$MAKE -s BUILD="$OUT/obj" PREFIX=/usr LIBDIR="/usr/lib/$multiarch" SYSTEMDUNITDIR=/lib/systemd/system \
        CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
        LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" DESTDIR="$stage" install

# take PACKAGE PATH...: moves each PATH of the staged install into PACKAGE.
take() {
        pkg=$1
        shift
        for path in "$@"; do
                mkdir -p "$OUT/pkg-$pkg/$(dirname "$path")"
                mv "$stage/$path" "$OUT/pkg-$pkg/$path"
        done
}
lib=usr/lib/$multiarch
take layerfs usr/bin/layerfs usr/libexec/layerfs usr/share/man/man1 usr/share/man/man8 \
        usr/share/bash-completion lib/systemd usr/share/layerfs
take liblayerfs0 "$lib/liblayerfs.so.0" "$lib/liblayerfs.so.$version"
take liblayerfs-dev "$lib/liblayerfs.so" "$lib/liblayerfs.a" "$lib/pkgconfig" usr/include usr/share/man/man3
left=$(find "$stage" ! -type d)
[ -z "$left" ] || {
        echo "mkdeb: installed files that no package takes: $left" >&2
        exit 1
}

# The source skeleton dpkg-shlibdeps and dpkg-gencontrol work in.
mkdir -p "$OUT/src/debian"
cp "$DEB/control" "$DEB/changelog" "$OUT/src/debian/"
for pkg in layerfs liblayerfs0 liblayerfs-dev; do
        dir=$OUT/pkg-$pkg
        find "$dir" -type f \( -name '*.so.*' \) -exec strip --remove-section=.comment --remove-section=.note \
                --strip-unneeded {} +
        find "$dir" -type f -name '*.a' -exec strip --strip-debug --remove-section=.comment --remove-section=.note \
                --enable-deterministic-archives {} +
        find "$dir" -type f -perm -u+x ! -name '*.so*' -exec strip --remove-section=.comment --remove-section=.note {} +
        find "$dir/usr/share/man" -type f -exec gzip -9n {} + 2>/dev/null || true
        doc=$dir/usr/share/doc/$pkg
        mkdir -p "$doc"
        cp "$DEB/copyright" "$doc/copyright"
        gzip -9nc "$DEB/changelog" >"$doc/changelog.gz"
        find "$dir" -type d -exec chmod 755 {} +
        find "$dir" -type f -exec chmod go-w {} +
        mkdir -p "$dir/DEBIAN"
        : >"$OUT/src/debian/$pkg.substvars"
        elves=$(find "$dir" -type f \( -perm -u+x -o -name '*.so.*' \) ! -name '*.a')
        if [ -n "$elves" ]; then
                # shellcheck disable=SC2086
                (cd "$OUT/src" && dpkg-shlibdeps -T"debian/$pkg.substvars" $elves)
        fi
        case $pkg in
        layerfs)
                install -m755 "$DEB/layerfs.postinst" "$dir/DEBIAN/postinst"
                install -m755 "$DEB/layerfs.postrm" "$dir/DEBIAN/postrm"
                ;;
        liblayerfs0)
                echo "liblayerfs 0 liblayerfs0 (>= $version)" >"$dir/DEBIAN/shlibs"
                # The exported symbols, each with the version that brought it.
                (cd "$OUT/src" && dpkg-gensymbols -q -p"$pkg" -P"$dir" -v"$version" -O"$dir/DEBIAN/symbols" -e"$dir/$lib/liblayerfs.so.$version")
                sed -i '1a\\* Build-Depends-Package: liblayerfs-dev' "$dir/DEBIAN/symbols"
                echo "activate-noawait ldconfig" >"$dir/DEBIAN/triggers"
                chmod 644 "$dir/DEBIAN/shlibs" "$dir/DEBIAN/triggers" "$dir/DEBIAN/symbols"
                ;;
        esac
        (cd "$OUT/src" && dpkg-gencontrol -p"$pkg" -P"$dir" -T"debian/$pkg.substvars")
        (cd "$dir" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' md5sum \
                >DEBIAN/md5sums)
        chmod 644 "$dir/DEBIAN/md5sums"
        find "$dir" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
        dpkg-deb --root-owner-group -Zxz --build "$dir" "$OUT/${pkg}_${version}_$arch.deb" >/dev/null
        echo "$OUT/${pkg}_${version}_$arch.deb"
done
