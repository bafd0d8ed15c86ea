#!/usr/bin/env bash
# A Sandbox's limits (sandbox create --memory/--pids/--cpus/--disk): bad values and
# limits this host cannot enforce are refused before anything is made; --disk bounds the
# Workspaces' uncommitted data and TMPDIR together, ENOSPC reaching the writer; the limits
# are recorded and listed; close and reclaim leave nothing of them. --memory, --pids and
# --cpus are checked against the cgroup files where the host offers their controllers
# (a pure cgroup v2 host); where it does not (a hybrid one), their refusal is.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=lim
mkdir -p "$WORK/src"
echo seed >"$WORK/src/seed"
lfs project init lim --from "$WORK/src" >/dev/null

# ---- runtime status: each namespace probe agrees with unshare(1), as root and as nobody ----
mkdir -p "$WORK/nobody-home"
chown 65534:65534 "$WORK/nobody-home"
lfs --json runtime status >"$WORK/status-root.json"
setpriv --reuid 65534 --regid 65534 --clear-groups env LAYERFS_HOME="$WORK/nobody-home" "$LAYERFS" --json \
        runtime status >"$WORK/status-nobody.json"
for pair in user:userns pid:pidns mount:mntns net:netns ipc:ipcns uts:utsns cgroup:cgroupns; do
        flag=${pair%%:*} name=kernel:${pair#*:}
        for who in root nobody; do
                as=()
                [ "$who" = root ] || as=(setpriv --reuid 65534 --regid 65534 --clear-groups)
                if "${as[@]}" unshare "--$flag" true 2>/dev/null; then want=True; else want=False; fi
                assert_eq "$(json_get "j['kernel']['$name']" <"$WORK/status-$who.json")" "$want" \
                        "$name as $who against unshare --$flag"
                assert_eq "$(json_get "'$name' in j['missing']" <"$WORK/status-$who.json")" \
                        "$([ "$want" = True ] && echo False || echo True)" "$name in missing as $who"
        done
done
assert_eq "$(json_get "j['kernel']['kernel:seccomp']" <"$WORK/status-root.json")" \
        "$(grep -q '^Seccomp_filters:' /proc/self/status && echo True || echo False)" "kernel:seccomp"

# ---- values not of their form: InvalidInput naming the option and the value --------------
refused_leaving_nothing() {
        local code=$1 text=$2
        shift 2
        expect_refusal "$code" "$text" lfs sandbox create "$@"
        assert_nothing_left "sandbox create $*"
}
refused_leaving_nothing InvalidInput "--memory '2X' is not a size" --memory 2X
refused_leaving_nothing InvalidInput "--memory '1M' is out of range" --memory 1M
refused_leaving_nothing InvalidInput "--pids '0' is out of range" --pids 0
refused_leaving_nothing InvalidInput "--pids '-1' is not a whole number" --pids -1
refused_leaving_nothing InvalidInput "--cpus 'abc' is not a number of CPUs" --cpus abc
refused_leaving_nothing InvalidInput "--cpus '100000' is out of range" --cpus 100000
refused_leaving_nothing InvalidInput "--disk '10Q' is not a size" --disk 10Q
refused_leaving_nothing InvalidInput "--disk '4K' is out of range" --disk 4K
# The value is checked before the platform and the controllers: a bad value with a good
# one is still InvalidInput, naming the bad one.
refused_leaving_nothing InvalidInput "--pids 'many'" --memory 1G --pids many

# ---- the controllers: offered to LayerFS's cgroup root, or refused Unsupported -------------
# What the code must find: the root's cgroup.controllers, or its parent's subtree_control
# while the root is not made.
offered() {
        if [ -d "$CGR" ]; then cat "$CGR/cgroup.controllers"; else cat "$(dirname "$CGR")/cgroup.subtree_control"; fi
}
echo "controllers offered to $CGR: '$(offered)'"
lfs --json runtime status >"$WORK/status.json"
declare -A option_of=([memory]="--memory 256M" [pids]="--pids 64" [cpu]="--cpus 0.5")
for controller in memory pids cpu; do
        present=$(json_get "j['kernel']['cgroup:$controller']" <"$WORK/status.json")
        listed=$(json_get "'cgroup:$controller' in j['missing']" <"$WORK/status.json")
        # shellcheck disable=SC2086
        if [[ " $(offered) " == *" $controller "* ]]; then
                assert_eq "$present/$listed" "True/False" "runtime status on cgroup:$controller (offered)"
                n=$(lfs sandbox create ${option_of[$controller]})
                lfs sandbox close "$n" >/dev/null
        else
                assert_eq "$present/$listed" "False/True" "runtime status on cgroup:$controller (not offered)"
                refused_leaving_nothing Unsupported \
                        "needs the cgroup controller '$controller', which host $(uname -n) does not offer" \
                        ${option_of[$controller]}
        fi
done
assert_nothing_left "the controller checks"

# Where all three are offered, the files on the Sandbox's cgroup say what was asked, before
# and while commands run, and the pids limit holds for them.
if [[ " $(offered) " == *" memory "* && " $(offered) " == *" pids "* && " $(offered) " == *" cpu "* ]]; then
        n=$(lfs sandbox create --memory 512M --pids 100 --cpus 1.5)
        cg=$(records "SELECT cgroup FROM sandboxes WHERE number=$n")
        assert_eq "$(cat "$cg/memory.max")" $((512 << 20)) "memory.max"
        assert_eq "$(cat "$cg/pids.max")" 100 "pids.max"
        assert_eq "$(cat "$cg/cpu.max")" "150000 100000" "cpu.max"
        lfs workspace mount "$n" main >/dev/null
        # 150 background sleeps in a Sandbox of 100 pids: fork fails in the command.
        set +e
        out=$(lfs workspace exec "$n" main -- sh -c 'for i in $(seq 150); do sleep 30 & done; wait' 2>&1)
        set -e
        case "$out" in *"Resource temporarily unavailable"* | *"Cannot fork"* | *"fork"*) ok ;;
        *) fail "150 processes in a Sandbox of --pids 100: $out" ;; esac
        lfs sandbox close "$n" --force >/dev/null
        assert_nothing_left "the Sandbox with cgroup limits"
else
        echo "not here: memory.max, pids.max and cpu.max of a Sandbox (controllers offered: '$(offered)')"
fi

# ---- --disk: one budget for the Workspaces' changes and TMPDIR, ENOSPC in the writer ------
n=$(lfs sandbox create --disk 8M)
ws=$(lfs workspace mount "$n" main)
dir=$(records "SELECT dir FROM sandboxes WHERE number=$n")
assert_eq "$(findmnt -n -o FSTYPE "$dir/disk")" tmpfs "the disk budget's filesystem"
assert_eq "$(findmnt -n -b -o SIZE "$dir/disk" | tr -d ' ')" $((8 << 20)) "the disk budget's size"
# no_space WHAT COMMAND: COMMAND, run in the Workspace, fails with ENOSPC.
no_space() {
        local what=$1 out status
        set +e
        out=$(lfs workspace exec "$n" main -- sh -c "$2" 2>&1)
        status=$?
        set -e
        [ "$status" -ne 0 ] || fail "$what: it succeeded"
        case "$out" in *"No space left"*) ok ;; *) fail "$what: it said $out" ;; esac
}
# Past the budget in the Workspace: dd fails with ENOSPC, nothing of the file beyond it.
no_space "16 MiB into a Workspace of an 8 MiB budget" 'dd if=/dev/zero of=big bs=1M count=16'
size=$(stat -c %s "$ws/big")
[ "$size" -le $((8 << 20)) ] || fail "the file past the budget has $size bytes"
ok
lfs workspace exec "$n" main -- rm big
# Past it in TMPDIR: the same.
no_space "16 MiB into TMPDIR of an 8 MiB budget" 'dd if=/dev/zero of="$TMPDIR/big" bs=1M count=16'
# A namespaces Sandbox's /tmp, a tmpfs of its own, is no way around the budget.
if [ "$(records "SELECT runtime FROM sandboxes WHERE number=$n")" = namespaces ]; then
        no_space "16 MiB into /tmp of a namespaces Sandbox with an 8 MiB budget" \
                'rm -f "$TMPDIR/big"; dd if=/dev/zero of=/tmp/big bs=1M count=16'
        lfs workspace exec "$n" main -- rm -f /tmp/big
fi
# One budget: 5 MiB in TMPDIR leave too little for 5 MiB in the Workspace.
lfs workspace exec "$n" main -- sh -c 'rm -f "$TMPDIR/big"; dd if=/dev/zero of="$TMPDIR/five" bs=1M count=5 status=none'
no_space "5 MiB in TMPDIR, then 5 MiB in the Workspace, with an 8 MiB budget" 'dd if=/dev/zero of=five bs=1M count=5'
# Freed, it takes writes again, and a commit of them works.
lfs workspace exec "$n" main -- sh -c 'rm -f "$TMPDIR/five" five; head -c 3000000 /dev/urandom >kept'
lfs workspace commit "$n" main -m "within the budget" >/dev/null
assert_eq "$(lfs workspace exec "$n" main -- stat -c %s kept)" 3000000 "the committed file's size"

# ---- recorded and listed -------------------------------------------------------------------
assert_eq "$(records "SELECT disk FROM sandboxes WHERE number=$n")" $((8 << 20)) "the record's disk"
assert_eq "$(records "SELECT quote(memory) || quote(pids) || quote(cpus) FROM sandboxes WHERE number=$n")" \
        "NULLNULLNULL" "the record's other limits"
lfs --json project list_sandboxes >"$WORK/list.json"
limits_of() { json_get "[[s['limits'][k] for k in ('memory', 'pids', 'cpus', 'disk')] for s in j if s['sandbox'] == $1][0]"; }
assert_eq "$(limits_of "$n" <"$WORK/list.json")" "[None, None, None, 8388608]" "list_sandboxes --json limits"
case "$(lfs project list_sandboxes)" in *"1 workspaces; disk 8M"*) ok ;;
*) fail "list_sandboxes says: $(lfs project list_sandboxes)" ;; esac
n2=$(lfs sandbox create)
assert_eq "$(lfs --json project list_sandboxes | limits_of "$n2")" "[None, None, None, None]" "a Sandbox without limits"
lfs sandbox close "$n2" >/dev/null

# ---- the end: close, and reclaim after the daemon was killed, leave no mount -------------
lfs sandbox close "$n" >/dev/null
assert_nothing_left "close of a Sandbox with a disk budget"
n=$(lfs sandbox create --disk 4M)
lfs workspace mount "$n" main >/dev/null
lfs workspace exec "$n" main -- sh -c 'echo x >"$TMPDIR/x"'
pid=$(records "SELECT pid FROM sandboxes WHERE number=$n")
kill -9 "$pid"
wait_exit "$pid" 30 || fail "the daemon did not exit on SIGKILL"
lfs runtime reclaim >/dev/null
assert_nothing_left "reclaim of a Sandbox with a disk budget whose daemon was killed"
finish
