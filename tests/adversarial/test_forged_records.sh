#!/usr/bin/env bash
# Attack: records in home.db that lie (issue 12, item 1). Reclaim trusted a record whose
# directory matched the path built from the record's own project, which was never
# checked: a project of '../../..' made that path anything, so 'project list_sandboxes'
# deleted a directory outside the home, and with the cgroup column pointing at a
# directory holding a 'cgroup.procs' file, 'runtime reclaim' SIGKILLed the pid listed
# there and printed "nothing to reclaim". A number above 2^31 was read cut to 32 bits, so
# a forged dead row numbered 2^32 + 1 was taken for Sandbox 1 and reclaim ended the live
# Sandbox 1.
# Fixed by: every field of a record is checked against the rules that made it (project
# name, number range, state, pid, platform, directory and cgroup exactly as this home
# computes them, the cgroup a cgroup2 directory) before anything acts on it; a record
# that fails is refused (InvalidInput) and left alone; cgroup.procs is read only from a
# cgroup2 directory.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
TEARDOWN_EXTRA='[ -n "${DECOY:-}" ] && kill -9 "$DECOY" 2>/dev/null'
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]; }

mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null
SB=$(lfs sandbox create)
assert_eq "$SB" 1 "the first Sandbox"
boot=$(cat /proc/sys/kernel/random/boot_id)

# What the forged rows point at: a directory outside the home, and a directory that
# looks like a cgroup, whose cgroup.procs names a live process.
mkdir -p "$WORK/victim-8" "$WORK/victim-7"
echo precious >"$WORK/victim-8/file"
sleep 1000 &
DECOY=$!
echo "$DECOY" >"$WORK/victim-7/cgroup.procs"
# Enough '..' to climb from the cgroup root and from the home to '/'.
up=../../../../../../../../../..
evil="$up$WORK/victim"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state)
        VALUES('$evil', 8, 'linux', 'native', 999999, 1, 'x', '$LAYERFS_HOME/sandboxes/$evil-8', 'running')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, state)
        VALUES('$evil', 7, 'linux', 'native', 999999, 1, 'x', '$LAYERFS_HOME/sandboxes/$evil-7',
               '$CGR/$evil-7', 'running')"
# Sandbox 1's own directory and cgroup, under a number that is 1 cut to 32 bits.
real_cgroup=$(records "SELECT cgroup FROM sandboxes WHERE number=1")
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, state)
        VALUES('p', 4294967297, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-1',
               '$real_cgroup', 'running')"
# A record of a known project whose fields are of the wrong kind or out of range.
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, state)
        VALUES('p', 0, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-0', '$CGR', 'running')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, state)
        VALUES('p', 5, 'linux', 'native', -1, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-5', '$CGR', 'running')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, state)
        VALUES('p', 6, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-6',
               '$CG_MOUNT', 'running')"
# A socket elsewhere, an unknown platform, an instance that is not one.
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, cgroup, socket, state)
        VALUES('p', 9, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-9', NULL,
               '$WORK/evil.sock', 'running')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state)
        VALUES('p', 10, 'windows', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-10', 'running')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, instance)
        VALUES('p', 11, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-11', 'running', '../x')"
# A limit that no create writes (limits are shown, so they are checked like the rest).
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, memory)
        VALUES('p', 12, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-12', 'running', 'lots')"
# A network no create writes: native's is the host's, a private one's addresses are a /30,
# and a second record naming a live private Sandbox's link (the first 12 digits of its
# instance) would have its reclaim remove that Sandbox's link.
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, network)
        VALUES('p', 13, 'linux', 'native', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-13', 'running', 'private')"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, id_base,
        network, net_base)
        VALUES('p', 14, 'linux', 'namespaces', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-14', 'running',
               2147483648, 'private', 3)"
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, id_base,
        network, net_base)
        VALUES('p', 15, 'linux', 'namespaces', 999999, 1, '$boot', '$LAYERFS_HOME/sandboxes/p-15', 'running',
               2147549184, 'none', 2851356672)"
n_forged=13

for what in "project list_sandboxes" "runtime reclaim" "sandbox create"; do
        # shellcheck disable=SC2086
        out=$(lfs $what 2>&1) || fail "$what failed: $out"
        assert_eq "$(cat "$WORK/victim-8/file" 2>/dev/null)" precious "$what: the directory a forged record points at"
        [ -f "$WORK/victim-7/cgroup.procs" ] || fail "$what removed the forged cgroup directory"
        alive "$DECOY" || fail "$what SIGKILLed the pid listed in a forged record's cgroup.procs"
        ok
        alive "$(records "SELECT pid FROM sandboxes WHERE number=1")" ||
                fail "$what ended Sandbox 1 for a forged record of number 4294967297"
        assert_eq "$(lfs sandbox list_workspaces 1 2>&1)" "" "Sandbox 1 still answers after $what"
        assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number NOT BETWEEN 1 AND 2 OR project != 'p'")" \
                "$n_forged" "$what left the forged records alone"
done
# The create took the next free number, and the forged 4294967297 was not taken for 1.
assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number=2 AND state='running'")" 1 "the create after the forgeries"
# Listing shows only what is real.
assert_eq "$(lfs project list_sandboxes | awk '{print $1}' | sort | tr '\n' ' ')" "1 2 " \
        "list_sandboxes lists the real Sandboxes only"

# Refused by every call that names them, with the field and the value.
set +e
msg=$(lfs sandbox close 6 --force 2>&1)
set -e
case "$msg" in "InvalidInput: "*"cgroup"*"$CG_MOUNT"*) ok ;; *) fail "close of a record with a foreign cgroup said: $msg" ;; esac
expect_error InvalidInput lfs sandbox close 5 --force
expect_refusal InvalidInput "has memory 'lots'" lfs sandbox close 12 --force
expect_refusal InvalidInput "has network 'private', but that is not a network its runtime gives a Sandbox" \
        lfs sandbox close 13 --force
expect_refusal InvalidInput "has net_base 3, but a private network's addresses are a /30" lfs sandbox close 14 --force
expect_refusal InvalidInput "has net_base 2851356672, but only a private network has addresses" lfs sandbox close 15 --force
expect_error InvalidInput lfs workspace mount 6 main
alive "$DECOY" || fail "a refused close signalled the decoy"

# A reclaim that finds records it refuses says so rather than "nothing to reclaim".
out=$(lfs runtime reclaim 2>&1)
case "$out" in *"left alone"*) ok ;; *) fail "reclaim with forged records said: $out" ;; esac

# Removing the forgeries (the fix the message names) lets everything proceed.
records "DELETE FROM sandboxes WHERE number NOT BETWEEN 1 AND 2 OR project != 'p'"
lfs sandbox close 2 >/dev/null
lfs sandbox close 1 >/dev/null
assert_eq "$(records "SELECT count(*) FROM sandboxes")" 0 "the real records went with their Sandboxes"
assert_eq "$(cat "$WORK/victim-8/file")" precious "the victim directory at the end"
alive "$DECOY" || fail "the decoy at the end"
ok
kill "$DECOY"
DECOY=
finish
