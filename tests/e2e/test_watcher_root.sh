#!/usr/bin/env bash
# The BPF watcher's programs are one pair per cgroup root, shared by the daemons of every
# Sandbox below it (bpf/README.md): the first daemon loads the pair, the next ones join it
# (also from another home on the same root); two Sandboxes open at once each see only
# their own processes; a Sandbox's ring leaves the root's map when it closes, and a
# SIGKILLed daemon's when `runtime reclaim` reclaims its Sandbox; nothing BPF is left (the
# links, programs and maps, the daemons' rings) once the last Sandbox closes, or once the
# last daemon is killed; another cgroup root gets a pair of its own.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
export LAYERFS_WATCHER=bpf LAYERFS_RUNTIME=native # the watcher is the same in every runtime
# Another home on the same root, and one on a root of its own.
HOME2="$WORK/home2" HOME3="$WORK/home3" CGR3="$CGR-3"
# close_home HOME ROOT: closes every Sandbox of that home.
close_home() {
        local n
        for n in $(sqlite3 -cmd ".timeout 10000" "$1/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do
                LAYERFS_HOME=$1 LAYERFS_CGROUP_ROOT=$2 "$LAYERFS" sandbox close "$n" --force >/dev/null 2>&1
        done
}
TEARDOWN_EXTRA='close_home "$HOME2" "$CGR"; close_home "$HOME3" "$CGR3"
        [ ! -d "$CGR3" ] || { echo 1 >"$CGR3/cgroup.kill"; sleep 0.2; find "$CGR3" -depth -type d -exec rmdir {} +; }'

lfs project init p >/dev/null

# root_set [ROOT]: the ids of the fork link, exit link and map of rings that the root's
# xattr names ("" when it names none).
root_set() {
        python3 -c 'import os, sys
try: print(os.getxattr(sys.argv[1], "trusted.layerfs.watcher.1").decode())
except OSError: print("")' "${1:-$CGR}"
}
# bpf_objects DAEMON_PID...: "prog:ID" and "map:ID" of every BPF object the daemons hold
# (their fds, and the programs of their links), one per line, sorted.
bpf_objects() {
        local pid
        for pid in "$@"; do cat /proc/"$pid"/fdinfo/* 2>/dev/null || true; done |
                awk '$1 == "prog_id:" { print "prog:" $2 } $1 == "map_id:" { print "map:" $2 } $1 == "link_id:" { print "link:" $2 }' | sort -u
}
# alive OBJECT...: the ones of OBJECTs (prog:ID, map:ID, link:ID) the kernel still has.
alive() {
        local o
        for o in "$@"; do bpftool "${o%%:*}" show id "${o#*:}" >/dev/null 2>&1 && echo "$o"; done
        true
}
# gone_within OBJECT...: the OBJECTs still alive after at most 5 s. The kernel frees the
# inner maps of a map of maps, and what only they held, after an RCU grace period of its
# own (bpf_map_fd_put_ptr), some time after the last fd closed; nothing tells user space
# when, so this looks again every 0.1 s.
gone_within() {
        local i left
        for ((i = 0; i < 50; i++)); do
                left=$(alive "$@")
                [ -n "$left" ] || break
                sleep 0.1
        done
        echo "$left"
}
# ring_keys: the cgroup ids the root's map of rings has a ring for, sorted.
ring_keys() {
        local map
        map=$(root_set | awk '{ print $3 }')
        bpftool -j map dump id "$map" | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    k = e.get("key")
    if isinstance(k, list):
        print(int.from_bytes(bytes(int(b, 16) for b in k), "little"))
    else:
        print(e["formatted"]["key"])' | sort -n | xargs
}
daemon_of() { sqlite3 -cmd ".timeout 10000" "${2:-$LAYERFS_HOME}/home.db" "SELECT pid FROM sandboxes WHERE number=$1"; }
log_of() { cat "${2:-$LAYERFS_HOME}/sandboxes/p-$1/daemon.log"; }
cgroup_id() { stat -c %i "$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "SELECT cgroup FROM sandboxes WHERE number=$1")"; }
events() { lfs sandbox events "$1" >"$WORK/events-$1"; }
exits() {
        python3 -c 'import json, sys
print(sorted(set(e["exit"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "exit" and "exit" in e)))' "$WORK/events-$1"
}

# ---- the first daemon loads the pair, the second joins it ------------------------------
[ -z "$(root_set)" ] || fail "a new cgroup root names a set already"
A=$(main_sandbox)
B=$(main_sandbox)
log_of "$A" | grep -q "loaded the programs of its cgroup root" || fail "Sandbox $A did not load the pair: $(log_of "$A")"
log_of "$B" | grep -q "joined the programs of its cgroup root" || fail "Sandbox $B did not join the pair: $(log_of "$B")"
ok
read -r fork_link exit_link rings <<<"$(root_set)"
[ -n "$rings" ] || fail "the root names no set"
held_a=$(bpf_objects "$(daemon_of "$A")")
held_b=$(bpf_objects "$(daemon_of "$B")")
assert_eq "$(grep -c '^prog:' <<<"$held_a") $(grep -c '^prog:' <<<"$held_b")" "2 2" "each daemon holds the two programs"
assert_eq "$(grep '^prog:' <<<"$held_a" | xargs)" "$(grep '^prog:' <<<"$held_b" | xargs)" "the same two programs"
assert_eq "$(grep '^link:' <<<"$held_a" | cut -d: -f2 | xargs)" "$fork_link $exit_link" "the links the root names"
assert_eq "$(ring_keys)" "$(printf '%s\n' "$(cgroup_id "$A")" "$(cgroup_id "$B")" | sort -n | xargs)" \
        "a ring for each Sandbox, under its cgroup id"
all=$(printf '%s\n' "$held_a" "$held_b" | sort -u)

# ---- each sees only its own processes ---------------------------------------------------
in_main "$A" sh -c 'i=0; while [ $i -lt 50 ]; do (exit 11) & i=$((i + 1)); done; wait' &
in_main "$B" sh -c 'i=0; while [ $i -lt 50 ]; do (exit 22) & i=$((i + 1)); done; wait' &
sh -c '(exit 33)' || true # the host's own
wait
sleep 0.5
events "$A"
events "$B"
assert_eq "$(exits "$A")" "[0, 11]" "Sandbox $A sees its own exits only"
assert_eq "$(exits "$B")" "[0, 22]" "Sandbox $B sees its own exits only"

# ---- a Sandbox that closes leaves the map; the pair stays for the other --------------------
lfs workspace unmount "$A" main >/dev/null
lfs sandbox close "$A" >/dev/null
assert_eq "$(ring_keys)" "$(cgroup_id "$B")" "Sandbox $A's ring left the map at its close"
assert_eq "$(alive "link:$fork_link" "link:$exit_link" | wc -l)" 2 "the pair stays while Sandbox $B is open"

# ---- another home on the same root joins; another root gets a pair of its own -----------
LAYERFS_HOME=$HOME2 lfs project init p >/dev/null
C=$(LAYERFS_HOME=$HOME2 lfs sandbox create)
log_of "$C" "$HOME2" | grep -q "joined the programs" || fail "another home's Sandbox did not join the pair"
LAYERFS_HOME=$HOME3 lfs project init p >/dev/null
D=$(LAYERFS_HOME=$HOME3 LAYERFS_CGROUP_ROOT=$CGR3 lfs sandbox create)
log_of "$D" "$HOME3" | grep -q "loaded the programs" || fail "another root's Sandbox did not load a pair of its own"
read -r fork3 _ _ <<<"$(root_set "$CGR3")"
[ -n "$fork3" ] && [ "$fork3" != "$fork_link" ] || fail "the other root names the first root's pair: '$fork3'"
ok
held_d=$(bpf_objects "$(daemon_of "$D" "$HOME3")")
close_home "$HOME3" "$CGR3"
close_home "$HOME2" "$CGR"
# shellcheck disable=SC2086 # one object per word
assert_eq "$(gone_within $held_d)" "" "nothing of the other root's pair is left after its last Sandbox"
assert_eq "$(ring_keys)" "$(cgroup_id "$B")" "the other home's Sandbox left the map at its close"
rmdir "$CGR3"

# ---- a SIGKILLed daemon's ring: reclaim takes it out -----------------------------------
E=$(main_sandbox)
all=$(printf '%s\n' "$all" "$(bpf_objects "$(daemon_of "$E")")" | sort -u)
killed=$(cgroup_id "$B")
kill -KILL "$(daemon_of "$B")"
wait_exit "$(daemon_of "$B")" 30 || fail "the daemon of Sandbox $B did not die"
assert_eq "$(ring_keys)" "$(printf '%s\n' "$killed" "$(cgroup_id "$E")" | sort -n | xargs)" \
        "the killed daemon's ring is still in the map"
lfs runtime reclaim >/dev/null
assert_eq "$(ring_keys)" "$(cgroup_id "$E")" "reclaim took the killed daemon's ring out"

# ---- after the last Sandbox, nothing is left -----------------------------------------
lfs workspace unmount "$E" main >/dev/null
lfs sandbox close "$E" >/dev/null
# shellcheck disable=SC2086 # one object per word
assert_eq "$(gone_within $all)" "" "links, programs and maps left after the last Sandbox closed"

# ---- the last daemon killed: the kernel frees the pair; reclaim the rest ---------------
F=$(lfs sandbox create)
held_f=$(bpf_objects "$(daemon_of "$F")")
[ "$(grep -c . <<<"$held_f")" -ge 5 ] || fail "the daemon holds too little: $held_f"
daemon=$(daemon_of "$F")
kill -KILL "$daemon"
wait_exit "$daemon" 30 || fail "the daemon of Sandbox $F did not die"
# shellcheck disable=SC2086 # one object per word
assert_eq "$(gone_within $held_f)" "" "BPF objects left after the last daemon was killed"
lfs runtime reclaim >/dev/null
assert_no_sandbox_left "after the reclaim"
echo "ok: $(basename "$0") ($CHECKS checks)"
