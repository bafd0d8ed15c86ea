#!/usr/bin/env bash
# The layer rule holds both ways it is enforced: in a copy of the tree with one include
# planted that goes up a layer (the Store including the Sandbox client's header), the
# check (layers.sh) fails naming it, and the compile of that file with the Makefile's
# include paths fails too. The copy untouched passes both (so neither failure is the
# copy's fault).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
        echo "FAIL: $*" >&2
        exit 1
}

git -C "$root" ls-files -z --cached --others --exclude-standard 2>/dev/null | (cd "$root" && xargs -0 cp --parents -t "$work") ||
        (cd "$root" && tar --exclude=./build --exclude=./build-san -cf - . | tar -xf - -C "$work")
victim=userspace-lib/store/tree.c
object=build/userspace-lib/store/tree.o

bash "$work/tests/lint/layers.sh" "$work" >/dev/null 2>"$work/clean.err" ||
        fail "layers.sh refuses the untouched copy: $(cat "$work/clean.err")"
make -s -C "$work" BUILD=build "$object" >"$work/clean.log" 2>&1 ||
        fail "the untouched copy's $victim does not compile: $(tail -5 "$work/clean.log")"

sed -i '0,/^#include "/s//#include "client.h"\n&/' "$work/$victim"
grep -q '^#include "client.h"' "$work/$victim" || fail "could not plant the include in $victim"
if bash "$work/tests/lint/layers.sh" "$work" >/dev/null 2>"$work/planted.err"; then
        fail "layers.sh passed a Store file including client.h"
fi
grep -q "^$victim:[0-9]*: includes \"client.h\" of userspace-lib/client/, a layer above userspace-lib/store/" \
        "$work/planted.err" || fail "layers.sh did not name the include: $(cat "$work/planted.err")"
rm -f "$work/$object"
if make -s -C "$work" BUILD=build "$object" >"$work/planted.log" 2>&1; then
        fail "$victim compiled with an include of the layer above"
fi
grep -q 'client.h: No such file or directory' "$work/planted.log" ||
        fail "the compile failed, but not for the include: $(tail -5 "$work/planted.log")"
# A header reached through another folder's include path: the client may include
# backends/ but not backends/linux/, whose "linux/teardown.h" -Ibackends would find.
sed -i '0,/^#include "client.h"/s//#include "linux\/teardown.h"\n&/' "$work/userspace-lib/client/sandbox.c"
grep -q '^#include "linux/teardown.h"' "$work/userspace-lib/client/sandbox.c" ||
        fail "could not plant the include in userspace-lib/client/sandbox.c"
if bash "$work/tests/lint/layers.sh" "$work" >/dev/null 2>"$work/planted2.err"; then
        fail "layers.sh passed a client file including linux/teardown.h"
fi
grep -q '^userspace-lib/client/sandbox.c:[0-9]*: includes "linux/teardown.h", which no layer has' \
        "$work/planted2.err" || fail "layers.sh did not name the include: $(cat "$work/planted2.err")"
echo "ok: test_layers.sh (an include going up fails layers.sh and the compile; one through another folder's path fails layers.sh)"
