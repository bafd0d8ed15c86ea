#!/usr/bin/env bash
# runtime reclaim judges a labelled cgroup's home gone, then ends and removes the
# Sandbox at that cgroup's path (docs/runtime.md, "A home that is gone"). A home deleted
# and made again at the same path names its Sandbox 1 by the same cgroup path: a create
# there, between the reclaim's judgement of the old cgroup and its act, removes the old
# cgroup as remains and makes its own. The reclaim must not then end the new home's live
# Sandbox, whose cgroup it never judged.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
HOME_B=$WORK/home-b

lfs project init p >/dev/null
LAYERFS_HOME=$HOME_B lfs project init p >/dev/null
old=$(main_sandbox)
cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$old")
# The home's daemon killed, the home deleted and made again at the same path.
kill_daemon "$old"
grep -F "$LAYERFS_HOME/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
rm -rf "$LAYERFS_HOME"
lfs project init p >/dev/null
[ -d "$cg" ] || fail "the old home's cgroup $cg went with its home"
ok

# The reclaim, from home B, paused once it has judged the old cgroup's home gone.
fault_fifo "$WORK/judged"
LAYERFS_HOME=$HOME_B LAYERFS_FAULT="reclaim-orphan-judged#1@$WORK/judged" lfs runtime reclaim >"$WORK/reclaim.out" 2>&1 &
reclaim=$!
fault_reached "$reclaim" "$WORK/judged" >/dev/null || fail "the reclaim ended before it judged the old cgroup: $(cat "$WORK/reclaim.out")"
# Meanwhile the new home makes its Sandbox 1: the same cgroup path, made again.
new=$(main_sandbox)
assert_eq "$new" "$old" "the new home's Sandbox number"
assert_eq "$(records "SELECT cgroup FROM sandboxes WHERE number=$new")" "$cg" "the new Sandbox's cgroup"
lfs process start "$new" main -- sleep 1000 >/dev/null
daemon=$(records "SELECT pid FROM sandboxes WHERE number=$new")
before=$(find "$cg" -name cgroup.procs -exec cat {} + | sort -n)
fault_release "$WORK/judged"
wait "$reclaim" || fail "the reclaim failed: $(cat "$WORK/reclaim.out")"
[ -d "$cg" ] || fail "the reclaim of the old home's cgroup removed the new home's live cgroup $cg"
assert_eq "$(find "$cg" -name cgroup.procs -exec cat {} + | sort -n)" "$before" "the new home's Sandbox's processes after the reclaim"
assert_eq "$(in_main "$new" sh -c 'echo alive')" alive "an exec in the new home's Sandbox after the reclaim"
ok
lfs sandbox close "$new" --force >/dev/null
wait_exit "$daemon" 30 || fail "the new home's daemon still runs 30 s after its close"
assert_nothing_left "after the close of the new home's Sandbox"
finish
