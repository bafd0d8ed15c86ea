#!/usr/bin/env bash
# runtime reclaim after a home is gone (docs/runtime.md, "A home that is gone"). A
# Sandbox's cgroup is named by a hash of its home's path and only that home's records name
# it: deleting the home left it for ever. Create labels the cgroup with its home
# (trusted.layerfs.home) and reclaim, from any home, ends and removes the labelled
# Sandboxes whose home is gone. Checked: home A (its daemon killed, a detached process
# left, the home deleted and made again at the same path) and home C (deleted under its
# live daemon, rm -rf stopping at the mounted Workspace) are reclaimed from home B,
# leaving no process, mount, cgroup or directory of theirs, while B's live Sandbox, its
# processes and its Workspace are untouched; an unlabelled cgroup in the root is left
# alone; a user given a cgroup of their own cannot forge the label.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
HOME_A=$WORK/home-a HOME_B=$WORK/home-b HOME_C=$WORK/home-c

# in_home HOME COMMAND...: COMMAND with LAYERFS_HOME=HOME.
in_home() {
        local home=$1
        shift
        LAYERFS_HOME=$home "$@"
}
# place HOME N, daemon HOME N: Sandbox N's cgroup and daemon pid, from HOME's records.
place() { LAYERFS_HOME=$1 records "SELECT cgroup FROM sandboxes WHERE number=$2"; }
daemon() { LAYERFS_HOME=$1 records "SELECT pid FROM sandboxes WHERE number=$2"; }
# pids_in CGROUP: every process of its subtree.
pids_in() { find "$1" -name cgroup.procs -exec cat {} + | sort -n; }

for home in "$HOME_A" "$HOME_B" "$HOME_C"; do
        in_home "$home" lfs project init p >/dev/null
done
sb_a=$(LAYERFS_HOME=$HOME_A main_sandbox)
in_home "$HOME_A" lfs process start "$sb_a" main -- sh -c 'setsid sleep 1000 & sleep 1000' >/dev/null
sb_b=$(LAYERFS_HOME=$HOME_B main_sandbox)
in_home "$HOME_B" lfs process start "$sb_b" main -- sleep 1000 >/dev/null
sb_c=$(LAYERFS_HOME=$HOME_C main_sandbox)
in_home "$HOME_C" lfs process start "$sb_c" main -- sleep 1000 >/dev/null
cg_a=$(place "$HOME_A" "$sb_a") cg_b=$(place "$HOME_B" "$sb_b") cg_c=$(place "$HOME_C" "$sb_c")
daemon_b=$(daemon "$HOME_B" "$sb_b") daemon_c=$(daemon "$HOME_C" "$sb_c")
b_before=$(pids_in "$cg_b")
python3 - "$cg_a" "$HOME_A" <<'EOF' || fail "the cgroup of home A's Sandbox is not labelled with its home"
import os, sys
label = os.getxattr(sys.argv[1], "trusted.layerfs.home").decode()
sys.exit(0 if label.startswith("1 ") and label.endswith(" " + sys.argv[2]) else 1)
EOF
ok

# A user given a cgroup of their own (delegation) cannot label it: trusted.* is root's.
mkdir "$CGR/forged"
chown 501:20 "$CGR/forged"
setpriv --reuid 501 --regid 20 --clear-groups /usr/bin/python3 - "$CGR/forged" "$HOME_A" <<'EOF' ||
import errno, os, sys
try:
    os.setxattr(sys.argv[1], "trusted.layerfs.home", ("1 %s none 1 1 1 1 1 0 0 %s" % ("0" * 32, sys.argv[2])).encode())
except OSError as e:
    sys.exit(0 if e.errno == errno.EPERM else 2)
sys.exit(1)
EOF
        fail "uid 501 could label its own cgroup as a Sandbox's of home A"
ok
# An unlabelled cgroup in the root, holding a process, named as a Sandbox of A would be.
unlabelled=$CGR/${cg_a##*/}0
mkdir "$unlabelled"
sleep 1000 &
bystander=$!
echo "$bystander" >"$unlabelled/cgroup.procs"

# Home A: its daemon killed, the home deleted, and a new home made at the same path.
a_left=$(pids_in "$cg_a")
[ -n "$a_left" ] || fail "no process of home A's Sandbox before its daemon was killed"
LAYERFS_HOME=$HOME_A kill_daemon "$sb_a"
[ -n "$(pids_in "$cg_a")" ] || fail "no process of home A's Sandbox left after its daemon was killed"
# What its dead daemon left mounted goes first (rm -rf cannot pass a dead FUSE mount).
grep -F "$HOME_A/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
left=$(grep -F "$HOME_A/" /proc/mounts || true)
[ -z "$left" ] || fail "home A's mounts could not be detached: $left"
rm -rf "$HOME_A"
in_home "$HOME_A" lfs project init p >/dev/null
# Home C: deleted under its live daemon (rm -rf goes through the Workspace and stops at
# its mount point).
rm -rf "$HOME_C" 2>/dev/null || true
[ ! -e "$HOME_C/home.db" ] || fail "rm -rf left home C's records"
[ -d "/proc/$daemon_c" ] || fail "home C's daemon ended as its home was deleted"
ok

out=$(in_home "$HOME_B" lfs --json runtime reclaim)
python3 - "$out" "$HOME_A/sandboxes/p-$sb_a" "$HOME_C/sandboxes/p-$sb_c" <<'EOF' || fail "runtime reclaim --json did not list both homes' Sandboxes as removed: $out"
import json, sys
items = json.loads(sys.argv[1])
items = items.get("reclaimed", items) if isinstance(items, dict) else items
removed = {i["dir"] for i in items if not i.get("left_alone")}
sys.exit(0 if {sys.argv[2], sys.argv[3]} <= removed else 1)
EOF
ok
[ ! -e "$cg_a" ] || fail "home A's cgroup $cg_a is still there after the reclaim: $(pids_in "$cg_a")"
[ ! -e "$cg_c" ] || fail "home C's cgroup $cg_c is still there after the reclaim"
wait_exit "$daemon_c" 10 || fail "home C's daemon $daemon_c outlived the reclaim"
# A killed process may leave its cgroup (which lets the reclaim remove it) before /proc
# shows it a zombie: its end is waited for (pidfd), not looked up at once.
for p in $a_left; do
        wait_exit "$p" 5 || fail "process $p of home A's Sandbox outlived the reclaim"
done
left=$(grep -F -e "$HOME_A" -e "$HOME_C" /proc/mounts || true)
[ -z "$left" ] || fail "mounts of the deleted homes left: $left"
[ ! -e "$HOME_C/sandboxes/p-$sb_c" ] || fail "home C's Sandbox directory is still there"
ok
# Home B's live Sandbox, untouched; the unlabelled cgroup and its process too.
assert_eq "$(pids_in "$cg_b")" "$b_before" "the processes of home B's live Sandbox after the reclaim"
[ -d "/proc/$daemon_b" ] || fail "home B's daemon did not survive the reclaim"
assert_eq "$(in_home "$HOME_B" in_main "$sb_b" sh -c 'echo alive')" alive "an exec in home B's Sandbox after the reclaim"
assert_eq "$(cat "$unlabelled/cgroup.procs")" "$bystander" "the process of the unlabelled cgroup"
kill "$bystander"
wait "$bystander" 2>/dev/null || true
rmdir "$unlabelled" "$CGR/forged"
in_home "$HOME_B" lfs sandbox close "$sb_b" --force >/dev/null
wait_exit "$daemon_b" 30 || fail "home B's daemon still runs 30 s after its close"
LAYERFS_HOME=$HOME_B assert_nothing_left "after the reclaim of the gone homes and the close of B's Sandbox"
finish
