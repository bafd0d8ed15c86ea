#!/usr/bin/env bash
# The main job end to end, as a person would run it: import a real tree into a Store,
# branch, change, commit, diff, merge, export, verify. Leaves nothing behind.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerfs-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export LAYERFS_HOME="$WORK/home"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
layerfs() { "$BUILD/layerfs" "$@"; }

step layerfs project init demo --from /usr/include
step layerfs project list
step layerfs branch create feature
step layerfs branch export feature "$WORK/feature"
echo "/* demo */" >>"$WORK/feature/stdio.h"
mkdir "$WORK/feature/demo" && echo "int demo;" >"$WORK/feature/demo/demo.h"
rm "$WORK/feature/zlib.h"
step layerfs branch commit feature --from "$WORK/feature" -m "A demo change"
step layerfs branch diff main feature
step layerfs branch merge feature main
step layerfs branch log main --limit 2
step layerfs branch export main "$WORK/main"
step diff -r --no-dereference "$WORK/feature" "$WORK/main"
step layerfs project verify
printf '\ndemo: ok\n'
