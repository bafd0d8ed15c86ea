#!/usr/bin/env bash
# test-runner: alone (it compares the host's whole list of links before and after)
# Attacks of a hostile command on what the namespaces runtime gives since its first
# adversarial pass (test_namespaces_escape.sh): the disk budget's tmpfs and the ends of a
# Sandbox that is killed while it is made (test_host_abstract_sockets.sh has --network
# host's abstract sockets). The attack was seen to succeed on the code before its fix:
#   1. the disk budget (--disk) bounded bytes only: a tmpfs counts no blocks for an empty
#      file, a directory or an extended attribute, and has half the host's pages as its
#      inodes whatever its size, so a command of a Sandbox with --disk 1M made 400,000 empty
#      files in its TMPDIR (+407 MB of the kernel's memory; df said 0 bytes used) and hung
#      300 MB of user.* attributes on one file;
# And what holds, with --network private and --disk: the Sandbox's init killed from the
# host, the CLI killed while the init starts, the daemon killed before the init is ready:
# close or reclaim leaves no process, mount, link, cgroup, directory or record.
# Each attack must fail; every one that succeeds is named at the end.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
unset LAYERFS_NET_RANGE
links() { ip -o link | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }
LINKS_BEFORE=$(links)
TEARDOWN_EXTRA='kill ${CREATE_CLI:-} 2>/dev/null'

mkdir -p "$WORK/src"
echo "source" >"$WORK/src/file.txt"
lfs project init p --from "$WORK/src" >/dev/null

# ---- 1. the disk budget's inodes and attributes ------------------------------------------
# FILL PLACE N: makes N empty files in PLACE (a directory of its own there), or as many as
# it can; prints how many and why it stopped. XATTRS FILE N: N attributes of 64000 bytes.
FILL='
import errno, os, sys
what, place, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
made, why = 0, "done"
try:
    if what == "files":
        os.mkdir(place)
        while made < n:
            os.mknod(os.path.join(place, str(made)))
            made += 1
    else:
        open(place, "w").close()
        while made < n:
            os.setxattr(place, "user.a%d" % made, b"a" * 64000)
            made += 1
except OSError as e:
    why = errno.errorcode.get(e.errno, str(e.errno))
print(made, why)'
D=$(main_sandbox --disk 1M)
d() { lfs workspace exec "$D" main -- "$@"; }
# past_budget WHAT KIND PLACE N: FILL KIND PLACE N, in the Sandbox, must stop with ENOSPC
# before N (a 1 MiB budget holds 256 files of one page each: no more inodes than that).
past_budget() {
        local made why
        read -r made why < <(d sh -c "exec python3 -c '$FILL' $2 $3 $4")
        if [ "$made" -ge "$4" ]; then
                succeeded "$1 ($made) in a Sandbox with --disk 1M"
        else
                assert_eq "$why" ENOSPC "why '$1' stopped"
        fi
}
for place in '$TMPDIR' /tmp /dev/shm; do
        past_budget "make empty files in $place" files "$place/many" 20000
        d sh -c "rm -rf $place/many"
done
past_budget "hang attributes of 64000 bytes on a file" xattrs '$TMPDIR/attributes' 160
# The budget still takes what fits: a file of 512 KiB in TMPDIR and one in the Workspace.
d sh -c 'rm -f "$TMPDIR/attributes"; head -c 512K /dev/zero >"$TMPDIR/half"; head -c 256K /dev/zero >quarter'
assert_eq "$(d stat -c %s quarter)" 262144 "a file within the budget"
lfs sandbox close "$D" --force >/dev/null

# ---- 2. ends of a Sandbox killed while it is made, or whose init is killed ---------------
# The init killed from the host: the Sandbox runs no command any more, and close removes
# everything, its link and its budget's tmpfs too.
K=$(main_sandbox --network private --disk 8M)
lfs workspace exec "$K" main -- sh -c 'echo kept >"$TMPDIR/x"'
init=$(cat "$(records "SELECT cgroup FROM sandboxes WHERE number=$K")/init/cgroup.procs")
kill -9 "$init"
wait_exit "$init" 30 || fail "the init did not end on SIGKILL"
! lfs workspace exec "$K" main -- true 2>/dev/null || fail "a command ran in a Sandbox whose init was killed"
lfs sandbox close "$K" --force >/dev/null
assert_nothing_left "close of a Sandbox whose init was killed"
assert_eq "$(links)" "$LINKS_BEFORE" "no link left after the init was killed"

# The Sandbox init waits at a gate: there the CLI (then the daemon) is killed, while the
# init has not set the view up yet. The runtime runs the layerfs-init beside the daemon it
# is given, so the gated pair is a directory of its own.
GATE=$WORK/gate
ARRIVED=$WORK/arrived
mkfifo -m 666 "$GATE" "$ARRIVED"
# Held open for reading and writing: the init's open of the gate never waits for a writer,
# and a "go" for an init that is gone already never waits for a reader.
exec {gate_fd}<>"$GATE"
mkdir "$WORK/gated"
printf '#!/bin/sh\nexec %s/layerfs-daemon "$@"\n' "$BUILD" >"$WORK/gated/layerfs-daemon"
cat >"$WORK/gated/layerfs-init" <<EOF
#!/bin/sh
echo arrived >$ARRIVED
read -r go <$GATE
exec $BUILD/layerfs-init "\$@"
EOF
chmod 755 "$WORK/gated/layerfs-daemon" "$WORK/gated/layerfs-init"
# create_at_gate: a create of a private Sandbox with a budget whose init waits at the gate;
# the CLI's pid in CREATE_CLI once the init is there.
create_at_gate() {
        # (from a subshell of its own, which keeps its exit status in create.status and says
        # nothing of its kill)
        (
                set +e
                trap - ERR
                LAYERFS_DAEMON=$WORK/gated/layerfs-daemon "$LAYERFS" sandbox create --network private --disk 8M \
                        >"$WORK/create.out" 2>&1 &
                echo $! >"$WORK/cli.pid"
                wait $!
                echo $? >"$WORK/create.status"
        ) 2>/dev/null &
        CREATE_JOB=$!
        read -r _ <"$ARRIVED"
        CREATE_CLI=$(cat "$WORK/cli.pid")
}
create_at_gate
kill -9 "$CREATE_CLI"
wait "$CREATE_JOB"
echo go >&"$gate_fd"
lfs runtime reclaim >/dev/null
assert_nothing_left "reclaim after the CLI was killed while the init started"
assert_eq "$(links)" "$LINKS_BEFORE" "no link left after the CLI was killed"

create_at_gate
kill -9 "$(pids_matching "layerfs-daemon --home $LAYERFS_HOME")"
echo go >&"$gate_fd"
wait "$CREATE_JOB"
CREATE_CLI=
[ "$(cat "$WORK/create.status")" -ne 0 ] || fail "a create whose daemon was killed succeeded: $(cat "$WORK/create.out")"
lfs runtime reclaim >/dev/null
assert_nothing_left "a create whose daemon was killed before the init was ready"
assert_eq "$(links)" "$LINKS_BEFORE" "no link left after the daemon was killed"

no_attack_succeeded
finish
