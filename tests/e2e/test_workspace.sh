#!/usr/bin/env bash
# Workspaces over FUSE: mount, real tools inside, random operations against a plain
# directory, status, commit, merge with a second Workspace, unmount refusals, close.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "Workspaces need root (FUSE mounts, cgroups)"
export LAYERFS_PROJECT=ws
FSOPS="$ROOT/tests/e2e/fsops.py"
# The manifest of a tree, less what holds inode numbers and absolute paths by design
# (git's index, a venv's config). A manifest that fails, or is empty, fails the test: two
# failed ones would otherwise compare equal.
manifest() {
        local out
        out=$(python3 "$FSOPS" manifest "$1" 2>"$WORK/manifest.err") ||
                fail "the manifest of $1 failed: $(cat "$WORK/manifest.err")"
        [ -n "$out" ] || fail "the manifest of $1 is empty"
        printf '%s\n' "$out" | grep -v -P '\t(.*/)?\.git/index\t|\tvenv(/|\t|$)'
}
# same_manifest TREE EXPECTED WHAT: both manifests are made (or the test fails), and equal.
same_manifest() {
        local got want
        got=$(manifest "$1") || exit 1
        want=$(manifest "$2") || exit 1
        assert_eq "$got" "$want" "$3"
}

sandboxes_cleaned() {
        grep -q " $LAYERFS_HOME/" /proc/mounts && fail "a mount is left: $(grep " $LAYERFS_HOME/" /proc/mounts)"
        local daemons
        daemons=$(pids_matching "layerfs-daemon .*--home $LAYERFS_HOME")
        [ -z "$daemons" ] || fail "a daemon is left: $daemons"
        [ -z "$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null)" ] || fail "sandbox directories left: $(ls "$LAYERFS_HOME/sandboxes")"
        assert_eq "$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" 'SELECT count(*) FROM sandboxes')" 0 "records left"
}
# Close every Sandbox even when the test fails part-way.
close_all() {
        for n in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" 'SELECT number FROM sandboxes' 2>/dev/null); do
                "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1 || true
        done
        cleanup_work
}
trap close_all EXIT

make_sample_tree "$WORK/sample"
rm "$WORK/sample/a-fifo"
lfs project init ws --from "$WORK/sample" >/dev/null
# A FUSE loop that does not exist is refused before anything is made (the number below
# is still the first).
LAYERFS_FUSE_TRANSPORT=bogus expect_error InvalidInput lfs sandbox create
n=$(lfs sandbox create)
assert_eq "$n" 1 "first sandbox number"
ws=$(lfs workspace mount "$n" main)
[ -d "$ws" ] || fail "mount path $ws"
ok

# Reads show the branch as imported.
same_manifest "$ws" "$WORK/sample" "the mounted branch"
expect_error AlreadyMounted lfs workspace mount "$n" main
# Large reads are spliced from the Store's object or the upper file: with the page cache
# dropped they reach the daemon, at offsets that do not fall on pages or on 64 KiB.
slice() { dd if="$1" bs=100003 skip=3 count=7 status=none | sha256sum; }
assert_eq "$(cat "/sys/class/bdi/$(mountpoint -d "$ws")/read_ahead_kb")" 2048 "the mount reads ahead 2 MiB"
echo 3 >/proc/sys/vm/drop_caches
assert_eq "$(slice "$ws/big.bin")" "$(slice "$WORK/sample/big.bin")" "a spliced read of a Store file"
head -c 3000000 /dev/urandom >"$WORK/upper-copy"
cp "$WORK/upper-copy" "$ws/upper-copy"
echo 3 >/proc/sys/vm/drop_caches
assert_eq "$(slice "$ws/upper-copy")" "$(slice "$WORK/upper-copy")" "a spliced read of an upper file"
cmp "$ws/upper-copy" "$WORK/upper-copy" || fail "the upper file read whole"
rm "$ws/upper-copy"
# Names that are not UTF-8 are still names: status quotes them as git does (each byte
# that breaks UTF-8 in octal), --json shows them lossy with the exact bytes in hex. Text
# the requests carry must be UTF-8.
bad="bad$(printf '\377')name"
echo x >"$ws/$bad"
assert_eq "$(lfs workspace status "$n" main)" 'A "bad\377name"' "status of a name that is not UTF-8"
assert_eq "$(lfs --json workspace status "$n" main | json_get '[c.get("path_bytes") for c in j]')" \
        "['626164ff6e616d65']" "status --json keeps its bytes"
expect_error InvalidInput lfs workspace commit "$n" main -m "$(printf 'm\377')"
expect_error InvalidInput lfs workspace exec "$n" main --cwd "$(printf 'd\377')" -- pwd
expect_error InvalidInput lfs workspace exec "$n" main --env "K=$(printf 'v\377')" -- true
expect_error InvalidInput lfs branch commit main --from "$WORK/sample" -m "$(printf 'x\377')"
rm "$ws/$bad"
assert_eq "$(lfs workspace status "$n" main)" "" "clean again"
grep -q "mounted main at $ws" <<<"$(lfs sandbox log "$n")" || fail "sandbox log shows the mount"
# The loop asked for serves the mount (make e2e runs this test under both): a fallback
# to libfuse must not pass for the /dev/fuse loop.
grep -q "mounted main at $ws (FUSE loop: ${LAYERFS_FUSE_TRANSPORT:-dev}," <<<"$(lfs sandbox log "$n")" ||
        fail "the mount is served by the ${LAYERFS_FUSE_TRANSPORT:-dev} loop: $(lfs sandbox log "$n" | grep mounted)"
ok
assert_eq "$(lfs --json sandbox log "$n" --lines 1 | json_get 'len(j["lines"])')" 1 "sandbox log --lines 1"
expect_error InvalidInput lfs sandbox log "$n" --lines 0
expect_error NoSuchBranch lfs workspace mount "$n" nope
expect_error NoSuchSandbox lfs workspace status 9 main
expect_error NotMounted lfs workspace status "$n" other

# The same tools on a plain directory and in the Workspace give the same files.
run_tools() {
        local d=$1
        (
                cd "$d"
                export GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000 GIT_CONFIG_GLOBAL=/dev/null
                git init -q -b main repo && cd repo
                printf 'hello\n' >a.txt && mkdir -p sub && printf 'x\n' >sub/b.txt
                git -c user.name=t -c user.email=t@t add -A && git -c user.name=t -c user.email=t@t commit -qm one
                printf 'more\n' >>a.txt
                git status --porcelain >../git-status.txt
                cd ..
                tar xf "$WORK/tree.tar"
                mkdir -p prog && printf 'int main(void){return 7;}\n' >prog/main.c
                printf 'prog/main: prog/main.c\n\tcc -O2 -o $@ $<\n' >Makefile
                make -s prog/main
                ./prog/main && status=0 || status=$?
                echo "exit $status" >prog/result.txt
                sqlite3 db.sqlite 'PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1),(2),(3); UPDATE t SET x=x*10;'
                sqlite3 db.sqlite 'SELECT sum(x) FROM t' >db-sum.txt
                rsync -a "$WORK/sample/" rsynced/
                find . -path ./repo/.git -prune -o -print0 | xargs -0 stat -c '%n %s' >/dev/null
                python3 -m venv --without-pip venv && ./venv/bin/python -c 'print(1)' >venv-ok.txt
        )
}
mkdir -p "$WORK/tarsrc"
for i in $(seq 1 300); do mkdir -p "$WORK/tarsrc/d$((i % 17))"; echo "file $i" >"$WORK/tarsrc/d$((i % 17))/f$i"; done
tar cf "$WORK/tree.tar" -C "$WORK/tarsrc" .
cp -a "$WORK/sample" "$WORK/plain"
run_tools "$WORK/plain" >/dev/null
run_tools "$ws" >/dev/null
same_manifest "$ws" "$WORK/plain" "tool results in the Workspace"
assert_eq "$(cat "$ws/git-status.txt")" " M a.txt" "git status inside"
assert_eq "$(cat "$ws/prog/result.txt" "$ws/db-sum.txt" "$ws/venv-ok.txt")" "$(printf 'exit 7\n60\n1')" "tools ran"

# Status, commit, export: the Commit holds what the tools made.
status=$(lfs workspace status "$n" main)
grep -qx 'A db.sqlite' <<<"$status" || fail "status lists db.sqlite: $status"
ok
expect_error Dirty lfs workspace unmount "$n" main
lfs workspace commit "$n" main -m "tools" >/dev/null
assert_eq "$(lfs workspace status "$n" main)" "" "status after commit"
lfs branch export main "$WORK/exported" >/dev/null
same_manifest "$WORK/exported" "$WORK/plain" "export of the Workspace's commit"

# Random operations, side by side with a plain directory (without what differs by design).
rm -rf "$WORK/plain/venv" "$ws/venv" "$WORK/plain/repo/.git/index" "$ws/repo/.git/index"
python3 "$FSOPS" run --seed 11 --ops "${FSOPS_OPS:-8000}" --check-every 500 "$WORK/plain" "$ws" >"$WORK/fsops.log" 2>&1 || { tail -30 "$WORK/fsops.log" >&2; false; } ||
        fail "random operations diverged (run fsops.py by hand with seed 11)"
ok
lfs workspace commit "$n" main -m "random" >/dev/null
rm -rf "$WORK/exported"
lfs branch export main "$WORK/exported" >/dev/null
same_manifest "$WORK/exported" "$WORK/plain" "export after random operations"

# A second Sandbox mounts the same branch: two views; the later commit merges.
m=$(lfs sandbox create)
assert_eq "$(lfs --json project list | json_get 'j[0]["sandboxes"]')" 2 "project list counts the Sandboxes"
assert_eq "$(lfs --json project list_sandboxes | json_get '[(s["sandbox"], s["platform"], s["image"]) for s in j]')" \
        "[(1, 'linux', None), (2, 'linux', None)]" "project list_sandboxes"
assert_eq "$(lfs --json project list_sandboxes --page-size 1 --page 2 | json_get '[s["sandbox"] for s in j]')" \
        "[2]" "list_sandboxes, page 2 of size 1"
assert_eq "$(lfs --json project list_sandboxes --page-size 1 --page 3)" "[]" "list_sandboxes past the end"
expect_error InvalidInput lfs project list_sandboxes --page-size 0
expect_error InvalidInput lfs project list_sandboxes --page abc
ws2=$(lfs workspace mount "$m" main)
echo one >"$ws/only-in-first"
echo two >"$ws2/only-in-second"
[ ! -e "$ws2/only-in-first" ] || fail "the views are not independent"
ok
lfs workspace commit "$n" main -m first >/dev/null
out=$(lfs --json workspace commit "$m" main -m second)
assert_eq "$(echo "$out" | json_get 'j["merged"]')" "True" "second commit merges"
[ -f "$ws2/only-in-first" ] || fail "the merged commit's files appear in the second Workspace"
ok
assert_eq "$(lfs workspace status "$m" main)" "" "status after a merged commit"
head=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
assert_eq "$(lfs workspace commit "$m" main -m none)" "nothing changed; main stays at $head" "a commit without changes"
assert_eq "$(lfs --json workspace commit "$m" main -m none | json_get '(j["commit"], j["changed"])')" \
        "('$head', False)" "--json of a commit without changes"
# A file the merge replaces lets go of its upper data: ws2 opens only-in-first for
# writing (a copy up) without changing it; the first Sandbox changes it; ws2's merged
# commit takes theirs, and ws2's old upper copy goes once the kernel forgets it.
upper_files() { find "$LAYERFS_HOME/sandboxes/ws-$1/upper/main" -type f | wc -l; }
: >>"$ws2/only-in-first"
before=$(upper_files "$m")
echo changed >>"$ws/only-in-first"
lfs workspace commit "$n" main -m changed >/dev/null
echo three >"$ws2/only-in-second-again"
lfs workspace commit "$m" main -m again >/dev/null
for _ in $(seq 50); do
        [ "$(upper_files "$m")" -le "$before" ] && break
        sleep 0.1
done
assert_eq "$(upper_files "$m")" "$before" "the replaced file's upper copy is gone (one added, one freed)"
assert_eq "$(tail -1 "$ws2/only-in-first")" "changed" "the merged file reads as theirs"
# Both change one file differently: Conflict, nothing changes, the Workspace keeps it.
echo mine >"$ws/README"
lfs workspace commit "$n" main -m readme >/dev/null
echo theirs >"$ws2/README"
head=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
expect_error Conflict lfs workspace commit "$m" main -m clash
assert_eq "$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')" "$head" "head after a conflict"
assert_eq "$(cat "$ws2/README")" "theirs" "the Workspace keeps its change"
# The same for a name that is not UTF-8: still Conflict, the message quotes it.
clash="clash$(printf '\377')"
echo mine >"$ws/$clash"
echo theirs >"$ws2/$clash"
lfs workspace commit "$n" main -m clash >/dev/null
expect_error Conflict lfs workspace commit "$m" main -m clash
assert_eq "$(lfs --json workspace commit "$m" main -m clash 2>/dev/null | json_get 'j["error"]["code"]')" Conflict \
        "--json Conflict on a name that is not UTF-8"

# Busy while a process is inside; --discard drops changes.
(cd "$ws2" && exec sleep 30) &
busy=$!
sleep 0.3
expect_error Busy lfs workspace unmount "$m" main --discard
kill $busy
wait $busy 2>/dev/null || true
lfs workspace unmount "$m" main --discard >/dev/null
assert_eq "$(lfs --json sandbox list_workspaces "$m")" "[]" "workspaces after unmount"
echo change >"$ws/dirty"
expect_error Dirty lfs sandbox close "$n"
lfs sandbox close "$n" --force >/dev/null

# A branch deleted and made again from an older commit while mounted: the next commit
# merges against the real common ancestor and keeps what the Workspace committed before.
old_head=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
lfs branch create fz >/dev/null
wfz=$(lfs workspace mount "$m" fz)
echo keep >"$wfz/keep.txt"
lfs workspace commit "$m" fz -m keep >/dev/null
echo more >"$wfz/more.txt"
lfs branch delete fz --force >/dev/null # mounted: refused Busy without --force
lfs branch create fz --from "$old_head" >/dev/null
lfs workspace commit "$m" fz -m more >/dev/null
lfs workspace unmount "$m" fz >/dev/null
lfs branch export fz "$WORK/fz-out" >/dev/null
assert_eq "$(cat "$WORK/fz-out/keep.txt" "$WORK/fz-out/more.txt" 2>&1)" "keep
more" "a recreated branch keeps the Workspace's earlier commit"

# The longest branch names, all slashes ('a/a/.../a', each '/' three bytes in the mount
# directory's name): two that differ only at the end mount side by side and commit.
long1=$(printf 'a/%.0s' $(seq 99))a
long2=$(printf 'a/%.0s' $(seq 99))b
lfs branch create "$long1" >/dev/null
lfs branch create "$long2" >/dev/null
w1=$(lfs workspace mount "$m" "$long1")
w2=$(lfs workspace mount "$m" "$long2")
[ "$w1" != "$w2" ] || fail "two long branches share a mount point"
echo one >"$w1/long.txt"
echo two >"$w2/long.txt"
lfs workspace commit "$m" "$long1" -m long >/dev/null
lfs workspace commit "$m" "$long2" -m long >/dev/null
lfs workspace unmount "$m" "$long1" >/dev/null
lfs workspace unmount "$m" "$long2" >/dev/null
lfs branch export "$long2" "$WORK/long-out" >/dev/null
assert_eq "$(cat "$WORK/long-out/long.txt")" two "a 199-byte branch name mounts and commits"

# Sixteen Workspaces in one Sandbox; the 17th is LimitReached.
for i in $(seq 1 17); do lfs branch create "b$i" >/dev/null; done
for i in $(seq 1 16); do lfs workspace mount "$m" "b$i" >/dev/null; done
expect_error LimitReached lfs workspace mount "$m" b17
assert_eq "$(lfs --json sandbox list_workspaces "$m" | json_get 'len(j)')" 16 "sixteen Workspaces"
lfs sandbox close "$m" >/dev/null
sandboxes_cleaned
finish
