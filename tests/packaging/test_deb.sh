#!/usr/bin/env bash
# make deb: layerfs, liblayerfs0 and liblayerfs-dev, with Depends on the runtime
# libraries, every installed file in exactly one of them, and no lintian error or
# warning (its output is printed; infos are allowed and shown). tests/fresh installs,
# uses and removes them in a fresh Debian 12 root.
source "$(dirname "$0")/../e2e/lib.sh"

command -v lintian >/dev/null || fail "lintian is missing ('make deps' installs it)"
make -s -C "$ROOT" BUILD="$BUILD" deb >"$WORK/deb.log" 2>&1 || fail "make deb: $(tail -20 "$WORK/deb.log")"
version=$(make -s --no-print-directory -C "$ROOT" print-version)
arch=$(dpkg --print-architecture)
D=$BUILD/deb
for pkg in layerfs liblayerfs0 liblayerfs-dev; do
        [ -f "$D/${pkg}_${version}_$arch.deb" ] || fail "make deb made no $D/${pkg}_${version}_$arch.deb"
done
ok

# lintian, at every level down to pedantic: no error, no warning.
lintian_out=$(lintian --display-level ">=pedantic" --display-experimental "$D"/*_"$version"_"$arch".deb 2>&1 |
        grep -v 'running with root privileges is not recommended' || true)
echo "lintian says:${lintian_out:+$'\n'}${lintian_out:- nothing}"
bad=$(grep -E '^[EW]: ' <<<"$lintian_out" || true)
[ -z "$bad" ] || fail "lintian: $bad"
ok

# The fields, and where each file went.
field() { dpkg-deb -f "$D/${1}_${version}_$arch.deb" "$2"; }
for lib in libc6 libsqlite3-0 liburing2 libssl3 libjansson4 libfuse3-3; do
        [[ "$(field layerfs Depends)" == *"$lib "* ]] || fail "layerfs does not depend on $lib: $(field layerfs Depends)"
done
# The daemon loads its BPF programs in plain bpf(2) (bpf/watcher_load.c): no libbpf.
[[ "$(field layerfs Depends)" != *libbpf* ]] || fail "layerfs depends on libbpf: $(field layerfs Depends)"
[[ "$(field liblayerfs0 Depends)" == "layerfs (= $version), "*libsqlite3-0* ]] ||
        fail "liblayerfs0's Depends: $(field liblayerfs0 Depends)"
assert_eq "$(field liblayerfs-dev Depends)" "liblayerfs0 (= $version)" "liblayerfs-dev's Depends"
files() { dpkg-deb -c "$D/${1}_${version}_$arch.deb" | awk '$1 !~ /^d/ {print $6}' | grep -v '^./usr/share/doc/' | sort | xargs; }
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
assert_eq "$(files layerfs)" "./lib/systemd/system/layerfs-reclaim.service ./usr/bin/layerfs \
./usr/libexec/layerfs/layerfs-daemon ./usr/libexec/layerfs/layerfs-init ./usr/share/bash-completion/completions/layerfs \
./usr/share/layerfs/systemd/layerfs-delegate.conf ./usr/share/man/man1/layerfs.1.gz \
./usr/share/man/man8/layerfs-daemon.8.gz" "layerfs's files"
assert_eq "$(files liblayerfs0)" "./usr/lib/$ma/liblayerfs.so.0 ./usr/lib/$ma/liblayerfs.so.$version" "liblayerfs0's files"
assert_eq "$(files liblayerfs-dev)" "./usr/include/layerfs.h ./usr/lib/$ma/liblayerfs.a ./usr/lib/$ma/liblayerfs.so \
./usr/lib/$ma/pkgconfig/layerfs.pc ./usr/share/man/man3/liblayerfs.3.gz" "liblayerfs-dev's files"
# The installed programs look for the daemon where the package puts it.
dpkg-deb -x "$D/layerfs_${version}_$arch.deb" "$WORK/x"
grep -qx "    /usr/libexec/layerfs/layerfs-daemon" <<<"$("$WORK/x/usr/bin/layerfs" --help)" ||
        fail "the packaged layerfs does not look for /usr/libexec/layerfs/layerfs-daemon"
# The symbols file lists exactly layerfs.h's functions.
assert_eq "$(dpkg-deb -I "$D/liblayerfs0_${version}_$arch.deb" symbols | sed -n 's/^ \(lfs_[a-z0-9_]*\)@Base .*/\1/p' | sort)" \
        "$(sh "$ROOT/packaging/api-functions.sh" "$ROOT/include/layerfs.h" | sort)" "the symbols file"
ok
finish
