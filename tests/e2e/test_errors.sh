#!/usr/bin/env bash
# Bad input gets a clear error from SPEC 6, exit 125, and nothing half written.
source "$(dirname "$0")/lib.sh"

no_projects_made() {
        local left
        left=$(ls -A "$LAYERFS_HOME/projects" 2>/dev/null || true)
        assert_eq "$left" "${1:-}" "projects directory after a refusal"
}

# Bad project names, missing or wrong --from.
for name in Bad -x .x "a b" "$(printf 'a%.0s' {1..64})" ""; do
        expect_error InvalidInput lfs project init "$name"
done
expect_error InvalidInput lfs project init ok --from "$WORK/missing"
touch "$WORK/a-file"
expect_error InvalidInput lfs project init ok --from "$WORK/a-file"
no_projects_made ""

# No project yet, then the wrong one.
expect_error NoSuchProject lfs branch list
lfs project init one >/dev/null
expect_error InvalidInput lfs project init one
expect_error NoSuchProject lfs --project two branch list
lfs project init two >/dev/null
expect_error InvalidInput lfs branch list # two projects: say which
LAYERFS_PROJECT=two lfs branch list >/dev/null
ok

# A file that changes while it is imported: refused, and no project is left. The file
# grows at a named step (userspace-lib/base/fault.h): listed at its size, opened, not read.
mkdir -p "$WORK/growing"
for i in $(seq 1 200); do echo "$i" >"$WORK/growing/f$i"; done
head -c $((1 << 20)) /dev/urandom >"$WORK/growing/log"
fault_fifo "$WORK/grow.step"
LAYERFS_FAULT="blob-large-opened@$WORK/grow.step" lfs project init grow --from "$WORK/growing" \
        >/dev/null 2>"$WORK/grow.err" &
importer=$!
fault_reached "$importer" "$WORK/grow.step" >/dev/null || fail "the import ended before it read the growing file"
echo more >>"$WORK/growing/log"
fault_release "$WORK/grow.step"
status=0
wait "$importer" || status=$?
assert_eq "$status" 125 "the exit status of an import whose file grew while it was read"
case "$(cat "$WORK/grow.err")" in
"InvalidInput: "*"changed or vanished while it was being read"*) ok ;;
*) fail "an import whose file grew said '$(cat "$WORK/grow.err")', expected InvalidInput" ;;
esac
no_projects_made "$(printf 'one\ntwo')"

# Input that cannot be read: PermissionDenied naming it, and nothing made. Root reads
# anything through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: run as root, the CLI runs
# without them (gone from its bounding set, so from what it gains at exec), as a root
# service confined by systemd's CapabilityBoundingSet= would.
unprivileged() {
        if [ "$(id -u)" = 0 ]; then
                setpriv --bounding-set=-dac_override,-dac_read_search "$@"
        else
                "$@"
        fi
}
mkdir -p "$WORK/secret/open" "$WORK/secret-dir/closed"
echo x >"$WORK/secret/f"
echo y >"$WORK/secret/open/g"
echo z >"$WORK/secret-dir/closed/h"
chmod 000 "$WORK/secret/f" "$WORK/secret-dir/closed"
expect_refusal PermissionDenied "cannot read f: Permission denied; nothing was recorded (in '$WORK/secret')" \
        unprivileged "$LAYERFS" project init secret --from "$WORK/secret"
expect_refusal PermissionDenied "cannot read $WORK/secret-dir/closed: Permission denied" \
        unprivileged "$LAYERFS" project init secret --from "$WORK/secret-dir"
no_projects_made "$(printf 'one\ntwo')"
# A commit from a tree with one unreadable file: refused, the branch does not move.
head_before=$(LAYERFS_PROJECT=two lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
expect_refusal PermissionDenied "cannot read f: Permission denied; nothing was recorded (in '$WORK/secret')" \
        unprivileged env LAYERFS_PROJECT=two "$LAYERFS" branch commit main \
        --from "$WORK/secret" -m unreadable
assert_eq "$(LAYERFS_PROJECT=two lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')" "$head_before" \
        "the head after a refused commit"
chmod 700 "$WORK/secret/f" "$WORK/secret-dir/closed"

# A Store that is not a Store.
lfs project init broken >/dev/null
head -c 8192 /dev/urandom >"$LAYERFS_HOME/projects/broken/store.db"
rm -f "$LAYERFS_HOME/projects/broken/store.db-wal" "$LAYERFS_HOME/projects/broken/store.db-shm"
expect_error InvalidInput lfs --project broken branch list
sqlite3 "$WORK/other.db" 'CREATE TABLE t(x); INSERT INTO t VALUES(1);'
cp "$WORK/other.db" "$LAYERFS_HOME/projects/broken/store.db"
expect_error InvalidInput lfs --project broken branch list
rm "$LAYERFS_HOME/projects/broken/store.db"
expect_error InvalidInput lfs --project broken branch list
expect_error InvalidInput lfs project list

# Usage errors are InvalidInput too; unbuilt calls are Unsupported.
expect_error InvalidInput lfs
expect_error InvalidInput lfs nonsense list
expect_error InvalidInput lfs --project one branch
expect_error InvalidInput lfs --project one branch frobnicate
expect_error InvalidInput lfs --project one branch create
expect_error InvalidInput lfs --project one branch create a b
expect_error InvalidInput lfs --project one branch list --bogus
expect_error InvalidInput lfs --project one branch create x --from
expect_error NoSuchSandbox lfs --project one process list 1
expect_error InvalidInput lfs --project one process kill 1 not-a-pid
expect_error InvalidInput lfs --project one workspace exec 1 main

# --json errors go to stdout as an object.
set +e
out=$(lfs --json --project one branch delete nope)
status=$?
set -e
assert_eq "$status" 125 "json error exit status"
assert_eq "$(echo "$out" | json_get 'j["error"]["code"]')" "NoSuchBranch" "json error code"

# Help is there for every level. (Read whole: grep -q would stop reading early, and
# the writer's SIGPIPE would fail the pipeline.)
grep -q '^SYNOPSIS' <<<"$(lfs --help)" || fail "layerfs --help"
ok
grep -q 'three-way' <<<"$(lfs branch merge --help)" || fail "branch merge --help"
ok
grep -q -- '--timeout SECONDS' <<<"$(lfs workspace exec --help)" || fail "workspace exec --help"
ok
# A command given nothing after its fixed arguments: the count it needs, not a limit.
expect_error InvalidInput lfs process start 1 main
grep -q "takes at least 3 arguments, not 2" <<<"$(lfs process start 1 main 2>&1)" || fail "process start without a command"
ok
finish
