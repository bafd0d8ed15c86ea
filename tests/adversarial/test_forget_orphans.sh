#!/usr/bin/env bash
# Attack: records the kernel let go of whose directory went first. A FORGET frees what the
# Store can give again and unloads untouched directories (let_go); each looks at the
# record's directory, by the number kept in the record. A file with two names keeps the
# directory of its latest: remove that name and that directory, let the kernel forget the
# directory, then the file.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
# The project's tree (start_sandbox adds the file seed).
mkdir -p "$WORK/src/t/u/v" "$WORK/src/r/s"
echo 1 >"$WORK/src/t/u/v/f"
echo 2 >"$WORK/src/r/s/g"
echo 3 >"$WORK/src/r/h"
start_sandbox orphans

in_ws 'import os
os.mkdir("a"); os.mkdir("b")
open("a/f", "w").write("x")
os.link("a/f", "b/g")
os.unlink("b/g")
os.rmdir("b")'
# The file held open: the kernel forgets b (its dentry is gone) but not a/f.
exec 7<"$WS/a/f"
settle_forgets
exec 7<&-
settle_forgets
daemon_gone && fail "the daemon died of a FORGET of a file whose latest directory was removed"
assert_eq "$(cat "$WS/a/f")" x "a/f after its other directory went"
ok

# Inode numbers stay what they were when the kernel forgets and the daemon unloads: a
# directory that is a command's cwd, one renamed, one with an open handle, and their
# files, each looked at before and after the kernel let go of them.
numbers() { (cd "$WS" && find . -printf '%i %p\n' | sort -k2); }
in_ws 'import os; os.rename("r", "r2"); os.rename("r2/s", "t/s2")'
before=$(numbers)
lfs workspace exec "$N" main -- sh -c 'cd t/u/v && exec sleep 30' &
holder=$!
held=""
for _ in $(seq 200); do
        for p in $(pgrep -x sleep); do
                [ "$(readlink "/proc/$p/cwd")" = "$WS/t/u/v" ] && held=$p
        done
        [ -n "$held" ] && break
        sleep 0.05
done
[ -n "$held" ] || fail "the command holding t/u/v as its cwd did not start"
exec 8<"$WS/t"
settle_forgets
assert_eq "$(numbers)" "$before" "inode numbers after a drop of the kernel's caches"
exec 8<&-
kill "$holder"
wait "$holder" 2>/dev/null || true
settle_forgets
assert_eq "$(numbers)" "$before" "inode numbers once nothing held them"
daemon_gone && fail "the daemon died"
ok
finish
