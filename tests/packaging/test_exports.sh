#!/usr/bin/env bash
# liblayerfs.so exports exactly what layerfs.h declares: every defined dynamic symbol
# (functions and data alike) is one of the header's functions, and each of them is
# there. The library is compiled with -fvisibility=hidden and the header marks its
# declarations LFS_PUBLIC; internal functions (xmalloc, rm_rf_at, lfs_rpc...) are in
# liblayerfs.a, for the CLI, the daemon and the unit tests, and nowhere in the .so.
source "$(dirname "$0")/../e2e/lib.sh"

so=$BUILD/liblayerfs.so
[ -f "$so" ] || fail "no $so: run make first"
api=$(sh "$ROOT/packaging/api-functions.sh" "$ROOT/include/layerfs.h" | sort)
[ "$(wc -l <<<"$api")" -ge 40 ] || fail "api-functions.sh found only $(wc -l <<<"$api") functions in layerfs.h"
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort)
extra=$(comm -13 <(echo "$api") <(echo "$exported"))
missing=$(comm -23 <(echo "$api") <(echo "$exported"))
[ -z "$extra" ] || fail "liblayerfs.so exports what layerfs.h does not declare: $(echo $extra)"
[ -z "$missing" ] || fail "liblayerfs.so does not export what layerfs.h declares: $(echo $missing)"
ok # liblayerfs.so exports the $(wc -l <<<"$api") functions of layerfs.h and nothing else
# The internal functions are there, in the static archive, and hidden from the .so.
archive=$(nm --defined-only "$BUILD/liblayerfs.a" 2>/dev/null | awk '$2 == "T" {print $3}')
for f in xmalloc rm_rf_at lfs_rpc lfs_store_project_list lfs_probe_kernel; do
        grep -qx "$f" <<<"$archive" || fail "liblayerfs.a has no $f"
        ! grep -qx "$f" <<<"$exported" || fail "liblayerfs.so exports the internal $f"
done
ok # internal functions are in liblayerfs.a only
finish
