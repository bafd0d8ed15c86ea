#!/usr/bin/env bash
# The Sandboxes of one cgroup root are bounded by the BPF watcher's map of rings
# (bpf/README.md): a root's map holds WATCH_MAX_SANDBOXES (4,096) rings, and the create of
# one Sandbox more with LAYERFS_WATCHER=bpf is LimitReached, naming the bound and what to
# do, with nothing of it left (no cgroup, directory, record or ring). By default the
# watcher loads after the create has answered (bpf/README.md), so that Sandbox is made and
# watched with cgroup.events and pidfds, its daemon's log saying why, and takes no ring.
# The 4,097th is too many to make here:
# LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT gives a root's map a smaller size, through the same
# path (the map's max_entries, the kernel's E2BIG, the daemon's readiness byte). The
# production bound is checked on a root made without it.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
unset LAYERFS_WATCHER
CGR2="$CGR-2"
TEARDOWN_EXTRA='for n in $(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do
                LAYERFS_CGROUP_ROOT=$CGR2 "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1; done
        [ ! -d "$CGR2" ] || { echo 1 >"$CGR2/cgroup.kill"; sleep 0.2; find "$CGR2" -depth -type d -exec rmdir {} +; }'

lfs project init p >/dev/null
# map_of [ROOT]: the id of the map of rings that the root's xattr names.
map_of() {
        python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "trusted.layerfs.watcher.1").decode().split()[2])' "${1:-$CGR}"
}
max_entries() { bpftool -j map show id "$(map_of "$@")" | json_get 'j["max_entries"]'; }
ring_count() { bpftool -j map dump id "$(map_of)" | json_get 'len(j)'; }
sandbox_dirs() { find "$CGR" -mindepth 1 -maxdepth 1 -type d | wc -l; }

# ---- the production bound ----------------------------------------------------------------
A=$(LAYERFS_CGROUP_ROOT=$CGR2 lfs sandbox create)
# watcher_settled N: sandbox events answers once N's watcher has loaded or given up.
watcher_settled() { lfs sandbox events "$1" >/dev/null; }
LAYERFS_CGROUP_ROOT=$CGR2 watcher_settled "$A"
grep -q "BPF watcher loaded" "$LAYERFS_HOME/sandboxes/p-$A/daemon.log" || skip "the BPF watcher does not load here"
assert_eq "$(max_entries "$CGR2")" 4096 "a cgroup root's map of rings holds 4,096 Sandboxes"
LAYERFS_CGROUP_ROOT=$CGR2 lfs sandbox close "$A" >/dev/null
rmdir "$CGR2"

# ---- a root of two: the third is LimitReached, and leaves nothing ------------------------
export LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT=2
A=$(lfs sandbox create)
B=$(lfs sandbox create)
watcher_settled "$A"
watcher_settled "$B"
assert_eq "$(max_entries) $(ring_count) $(sandbox_dirs)" "2 2 2" "the map's size, its rings, the Sandboxes' cgroups"
LAYERFS_WATCHER=bpf expect_refusal LimitReached \
        "already has 2 Sandboxes open, the most one root's BPF watcher serves; close one" "$LAYERFS" sandbox create
assert_eq "$(records "SELECT number FROM sandboxes ORDER BY number" | xargs)" "$A $B" "no record of the refused one"
assert_eq "$(ls "$LAYERFS_HOME/sandboxes" | xargs)" "p-$A p-$B" "no directory of the refused one"
assert_eq "$(ring_count) $(sandbox_dirs)" "2 2" "no ring or cgroup of the refused one"
LAYERFS_WATCHER=bpf expect_refusal LimitReached "LAYERFS_CGROUP_ROOT" "$LAYERFS" sandbox create
# By default: made, watched without BPF, taking no ring.
D=$(lfs sandbox create)
watcher_settled "$D"
grep -q "did not take this Sandbox" "$LAYERFS_HOME/sandboxes/p-$D/daemon.log" || fail "the log does not say why"
grep -q "BPF watcher loaded" "$LAYERFS_HOME/sandboxes/p-$D/daemon.log" && fail "a Sandbox past the bound has a ring"
lfs workspace mount "$D" main >/dev/null
lfs workspace exec "$D" main -- sh -c 'exit 6' || true
assert_eq "$(lfs sandbox events "$D" | python3 -c 'import json, sys; print([e.get("exit") for e in map(json.loads, sys.stdin) if e["event"] == "exit"])')" \
        "[6]" "a command's exit, seen without BPF"
assert_eq "$(ring_count) $(sandbox_dirs)" "2 3" "the rings, and the cgroups of the three"
lfs sandbox close "$D" --force >/dev/null

# ---- a place freed is a place taken ---------------------------------------------------------
lfs sandbox close "$A" >/dev/null
C=$(lfs sandbox create)
watcher_settled "$C"
assert_eq "$(ring_count) $(sandbox_dirs)" "2 2" "a closed Sandbox's place goes to the next"
lfs sandbox close "$B" >/dev/null
lfs sandbox close "$C" >/dev/null
assert_no_sandbox_left "after the last close"
echo "ok: $(basename "$0") ($CHECKS checks)"
