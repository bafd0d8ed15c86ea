#!/usr/bin/env bash
# The main job end to end, as a person would run it: import a real tree into a Store,
# branch, change, commit, diff, merge, export, verify. Leaves nothing behind.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
# The CLI to run: the build's, or LAYERFS (an installed one: tests/fresh).
LAYERFS=${LAYERFS:-$BUILD/layerfs}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerfs-demo.XXXXXX")
# Commands run as the command identity (501:20) in Workspaces below the home: it must
# be able to pass through (mktemp makes 0700).
chmod 711 "$WORK"
sandbox=""
cleanup() {
        [ -n "$sandbox" ] && "$LAYERFS" sandbox close "$sandbox" --force >/dev/null 2>&1
        rm -rf "$WORK"
}
trap cleanup EXIT
export LAYERFS_HOME="$WORK/home"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
layerfs() { "$LAYERFS" "$@"; }

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

# A Sandbox mounts the branch as a read-write Workspace; tools run inside; a commit
# records what they made.
if [ "$(id -u)" = 0 ]; then
        sandbox=$(layerfs sandbox create)
        printf '\n\033[1m$ layerfs sandbox create\033[0m\n%s\n' "$sandbox"
        ws=$(layerfs workspace mount "$sandbox" main)
        printf '\n\033[1m$ layerfs workspace mount %s main\033[0m\n%s\n' "$sandbox" "$ws"
        # Commands run in the Workspace, each in a cgroup of its own, as uid 501.
        step layerfs workspace exec "$sandbox" main -- mkdir hello
        printf '#include <stdio.h>\nint main(void) { puts("hello from a Workspace"); return 0; }\n' |
                layerfs workspace exec "$sandbox" main -- sh -c 'cat > hello/hello.c'
        step layerfs workspace exec "$sandbox" main --cwd hello -- cc -O2 -o hello hello.c
        step layerfs workspace exec "$sandbox" main -- sh -c 'hello/hello; id -u; cat /proc/self/cgroup | tail -1'
        step layerfs process start "$sandbox" main -- sh -c 'cd "$TMPDIR" && exec setsid sleep 600'
        step layerfs process list "$sandbox"
        step layerfs workspace status "$sandbox" main
        step layerfs workspace commit "$sandbox" main -m "Build hello"
        step layerfs workspace unmount "$sandbox" main
        step layerfs sandbox close "$sandbox" # ends the detached sleeper too
        sandbox=""
        step layerfs branch log main --limit 1
fi
printf '\ndemo: ok\n'
