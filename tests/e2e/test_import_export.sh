#!/usr/bin/env bash
# A real tree goes into the Store and comes out the same, with and without io_uring.
source "$(dirname "$0")/lib.sh"

# Every kind of entry, plus a fifo the Store skips.
make_sample_tree "$WORK/sample"
lfs project init sample --from "$WORK/sample" >/dev/null
lfs --project sample branch export main "$WORK/sample-out" >/dev/null
assert_eq "$(tree_manifest "$WORK/sample-out")" "$(tree_manifest "$WORK/sample")" "sample tree round trip"
[ ! -e "$WORK/sample-out/a-fifo" ] || fail "a fifo was recorded"
ok
[ -d "$WORK/sample-out/empty/inner-empty" ] || fail "empty directories were lost"
ok
[ -x "$WORK/sample-out/run.sh" ] && [ ! -x "$WORK/sample-out/README" ] || fail "executable bits wrong"
ok

# A real tree of thousands of files: /usr/include (about 40 MB and more).
src=/usr/include
lfs project init inc --from "$src" >/dev/null
lfs --project inc branch export main "$WORK/inc-out" >/dev/null
diff -r --no-dereference "$src" "$WORK/inc-out" >/dev/null || fail "diff -r found differences after export"
ok
lfs --project inc project verify >/dev/null
ok

# The plain system call path records the same trees as the io_uring path.
tree_uring=$(lfs --project inc --json branch log main | json_get 'j[0]["tree"]')
LAYERFS_NO_URING=1 lfs project init inc-plain --from "$src" >/dev/null
tree_plain=$(lfs --project inc-plain --json branch log main | json_get 'j[0]["tree"]')
assert_eq "$tree_plain" "$tree_uring" "tree id with and without io_uring"
LAYERFS_NO_URING=1 lfs --project inc-plain branch export main "$WORK/inc-plain-out" >/dev/null
diff -r --no-dereference "$src" "$WORK/inc-plain-out" >/dev/null || fail "plain export differs"
ok

# Export into an existing empty directory works; into a non-empty one it is refused.
mkdir "$WORK/empty-target"
lfs --project sample branch export main "$WORK/empty-target" >/dev/null
[ -f "$WORK/empty-target/README" ] || fail "export into an empty directory"
ok
expect_error InvalidInput lfs --project sample branch export main "$WORK/empty-target"
ls -A "$WORK" | grep -q layerfs-export && fail "export left a temporary directory"
ok

# A target that fills up: the export fails naming the file it could not write, and why,
# with and without io_uring, and leaves nothing behind. Files of three pages into a
# tmpfs of 256: one file gets one page, so the ring's write of it is short (a count,
# not an errno) and must still say "No space left on device".
mkdir -p "$WORK/pages" "$WORK/small"
for i in $(seq 100); do head -c 12288 /dev/urandom >"$WORK/pages/f$i"; done
lfs project init pages --from "$WORK/pages" >/dev/null
mount -t tmpfs -o size=1m layerfs-test "$WORK/small"
trap 'umount -l "$WORK/small" 2>/dev/null || true; cleanup_work' EXIT
for plain in 0 1; do
        status=0
        out=$(LAYERFS_NO_URING=$plain lfs --project pages branch export main "$WORK/small/out" 2>&1) || status=$?
        assert_eq "$status" 125 "an export into 1 MiB (NO_URING=$plain): $out"
        file=$(sed -n 's/^Failed: cannot write \([^:]*\): No space left on device$/\1/p' <<<"$out")
        [ -n "$file" ] && [ -e "$WORK/pages/$file" ] || fail "NO_URING=$plain: the error names no file of the tree, or not ENOSPC: $out"
        ok
        assert_eq "$(ls -A "$WORK/small")" "" "a failed export leaves nothing behind (NO_URING=$plain)"
done
umount "$WORK/small"
trap cleanup_work EXIT

# An empty project: main holds an empty commit, and exports to an empty directory.
lfs project init empty >/dev/null
lfs --project empty branch export main "$WORK/empty-out" >/dev/null
assert_eq "$(ls -A "$WORK/empty-out")" "" "export of an empty project"

# JSON results are for scripts.
out=$(lfs --json project init jsontest)
assert_eq "$(echo "$out" | json_get 'j["project"], j["branch"], len(j["commit"])')" "('jsontest', 'main', 64)" "init --json"
assert_eq "$(lfs --json project list | json_get '[p["project"] for p in j]')" \
        "['empty', 'inc', 'inc-plain', 'jsontest', 'pages', 'sample']" "project list --json"
# A tree that holds the home: the home is never recorded (the Store being written).
mkdir -p "$WORK/withhome/src"
echo a >"$WORK/withhome/src/a"
LAYERFS_HOME="$WORK/withhome/home" lfs project init h --from "$WORK/withhome" >/dev/null
LAYERFS_HOME="$WORK/withhome/home" lfs --project h branch export main "$WORK/withhome-out" >/dev/null
assert_eq "$(cd "$WORK/withhome-out" && find . -mindepth 1 | sort | tr '\n' ' ')" "./src ./src/a " "import leaves the home out"
echo b >"$WORK/withhome/src/b"
LAYERFS_HOME="$WORK/withhome/home" lfs --project h branch commit main --from "$WORK/withhome" -m b >/dev/null
first=$(LAYERFS_HOME="$WORK/withhome/home" lfs --project h --json branch log main | json_get 'j[-1]["commit"]')
assert_eq "$(LAYERFS_HOME="$WORK/withhome/home" lfs --project h branch diff "$first" main)" "A src/b" \
        "commit leaves the home out"
finish
