#!/usr/bin/env bash
# A Sandbox's daemon is not ended by the limits of the shell that created it. Created
# from a shell with `ulimit -f 2048` (2 MiB), the first Workspace write past 2 MiB killed
# the daemon with SIGXFSZ: the Workspace was gone ("Transport endpoint is not
# connected"); `ulimit -t` would end it with SIGXCPU after that much CPU, `ulimit -v`
# fail its allocations. The daemon lifts file size, CPU time, address space and data for
# itself (soft limits to the hard ones; past them where it has CAP_SYS_RESOURCE, which
# this host's root may lack), ignores SIGXFSZ, and its commands get the creator's limits
# back: a command still cannot write past 2 MiB.
source "$(dirname "$0")/../e2e/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
use_private_sandboxes
export LAYERFS_PROJECT=limits
lfs project init limits >/dev/null
head -c 4000000 /dev/urandom >"$WORK/big"
daemon_limit() { awk -v l="$1" 'index($0, l) == 1 {print $(NF-2)}' "/proc/$dpid/limits"; }

# An address space limit is left out under the sanitizers: ASan reserves terabytes of
# shadow memory at start and cannot run under one.
vlimit="&& ulimit \$2 -v 4000000"
# (ldd's output taken whole: `ldd | grep -q` under pipefail failed when grep's early exit
# cut ldd off with SIGPIPE, and the limit stayed.)
case "$(ldd "$LAYERFS")" in *libasan*) vlimit="" ;; esac
# create TRANSPORT [-S]: a Sandbox made from a shell with those limits (-S: soft ones
# only; none: soft and hard); sets n, ws and dpid.
create() {
        n=$(LAYERFS_FUSE_TRANSPORT=$1 bash -c "ulimit \$2 -f 2048 && ulimit \$2 -t 1000 && ulimit \$2 -n 512 $vlimit && exec \"\${@:3}\"" \
                sh "$1" "$2" "$LAYERFS" sandbox create)
        ws=$(lfs workspace mount "$n" main)
        dpid=$(records "SELECT pid FROM sandboxes WHERE number=$n")
        [ -n "$dpid" ] && [ -d "/proc/$dpid" ] || fail "sandbox $n has no daemon (pid '$dpid')"
}

# commands_keep_limits WHAT: a command has the creator's limits, and its write past them
# fails while the daemon lives.
commands_keep_limits() {
        assert_eq "$(in_main "$n" python3 -c 'import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE)[0], r.getrlimit(r.RLIMIT_CPU)[0], r.getrlimit(r.RLIMIT_NOFILE)[0])')" \
                "2097152 1000 512" "a command's file size, CPU time and open files limits ($1)"
        local rc=0
        in_main "$n" sh -c 'head -c 3000000 /dev/zero >too-big' 2>/dev/null || rc=$?
        [ "$rc" != 0 ] || fail "a command wrote past its creator's ulimit -f ($1)"
        [ -d "/proc/$dpid" ] || fail "the daemon ended after a command's write past its limit ($1)"
}

for transport in libfuse dev; do
        # Soft limits: lifted to the hard ones (none), so the host's write goes through.
        create "$transport" -S
        for limit in "Max file size" "Max cpu time" "Max address space" "Max data size"; do
                assert_eq "$(daemon_limit "$limit")" unlimited "the daemon's $limit, soft limits ($transport)"
        done
        cp "$WORK/big" "$ws/big" || fail "a 4 MB write into the Workspace failed ($transport)"
        [ -d "/proc/$dpid" ] || fail "the daemon ended on a write past its creator's ulimit -f ($transport)"
        cmp "$WORK/big" "$ws/big" || fail "the Workspace's big differs from what was written ($transport)"
        commands_keep_limits "soft, $transport"
        assert_eq "$(lfs workspace status "$n" main | sort | tr '\n' ' ')" "A big A too-big " \
                "status after the writes ($transport)"
        lfs workspace unmount "$n" main --discard >/dev/null
        lfs sandbox close "$n" >/dev/null
        ok

        # Hard limits: past them only with CAP_SYS_RESOURCE; without, a write the daemon
        # makes fails EFBIG to the writer, and the daemon and its Workspace stay.
        create "$transport" ""
        rc=0
        cp "$WORK/big" "$ws/big" 2>/dev/null || rc=$?
        [ -d "/proc/$dpid" ] || fail "the daemon ended on a write past its creator's hard ulimit -f ($transport)"
        # It goes through where the daemon could lift the limit, or where the kernel writes
        # the upper file itself (passthrough, under the writer's limits).
        if [ "$rc" = 0 ]; then
                cmp "$WORK/big" "$ws/big" || fail "the Workspace's big differs from what was written ($transport)"
        else
                [ "$(daemon_limit "Max file size")" != unlimited ] ||
                        fail "the write failed with the daemon's file size unlimited ($transport)"
        fi
        echo small >"$ws/small" || fail "the Workspace does not take a small write after that ($transport)"
        assert_eq "$(cat "$ws/small")" small "a small file after the refused write ($transport)"
        commands_keep_limits "hard, $transport"
        lfs workspace unmount "$n" main --discard >/dev/null
        lfs sandbox close "$n" >/dev/null
        ok
done

# A creator's soft limit of open files below what the daemon holds: the command gets the
# creator's limit and still starts. The limit used to be set before the spawn's last
# descriptor (Landlock's ruleset, for a namespaces Sandbox on the host's network), which
# then failed EMFILE once the daemon's table was past it.
if [ "$(new_runtime)" = namespaces ]; then
        n=$(bash -c 'ulimit -Sn 64 && exec "$@"' sh "$LAYERFS" sandbox create --network host)
        ws=$(lfs workspace mount "$n" main)
        dpid=$(records "SELECT pid FROM sandboxes WHERE number=$n")
        in_main "$n" sh -c 'i=0; while [ $i -lt 300 ]; do echo x >f$i; i=$((i+1)); done'
        mkfifo -m 666 "$ws/held"
        # A command raises its own soft limit (up to the hard one) and holds them all open.
        lfs process start "$n" main -- python3 -c "
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
files = [open('f%d' % i, 'r+') for i in range(300)]
with open('held', 'w') as f:
    f.write('%d\\n' % len(files))
open('held').read()
" >/dev/null
        read -r -t 120 held <"$ws/held" || fail "the command did not say it holds its files"
        assert_eq "$held" 300 "files the command holds open"
        fds=$(find "/proc/$dpid/fd" -mindepth 1 | wc -l)
        [ "$fds" -gt 64 ] || fail "the daemon holds only $fds descriptors: the test needs more than 64"
        assert_eq "$(in_main "$n" sh -c 'ulimit -n')" 64 "a command's limit of open files, its creator's 64 (the daemon holds $fds)"
        echo done >"$ws/held"
        lfs sandbox close "$n" --force >/dev/null
fi
finish
