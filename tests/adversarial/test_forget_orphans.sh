#!/usr/bin/env bash
# Attack: records the kernel let go of whose directory went first. A FORGET frees what the
# Store can give again and unloads untouched directories (let_go); each looks at the
# record's directory, by the number kept in the record. A file with two names keeps the
# directory of its latest: remove that name and that directory, let the kernel forget the
# directory, then the file.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
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
finish
