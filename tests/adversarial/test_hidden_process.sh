#!/usr/bin/env bash
# A command hides its processes from `process list` and `sandbox events` (found in review,
# issue 14): a command line or a process name (comm, set with prctl, or cut by the kernel
# at 15 bytes inside a character) that is not UTF-8 made json_pack fail, and the daemon
# dropped the entry: a process running `sleep` under argv[0] "\xff" was not listed, and the
# exit of a process named "\xff\xfe" was no event. Both are listed now, as lossy text
# (U+FFFD for each byte that is not UTF-8), like paths.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=hide
lfs project init hide >/dev/null
n=$(lfs sandbox create)
lfs workspace mount "$n" main >/dev/null

out=$(lfs process start "$n" main -- python3 -c 'import os; os.execv("/bin/sleep", [b"\xff", b"600"])')
pid=${out%% *}
case "$pid" in
'' | *[!0-9]*) fail "process start printed '$out', not a pid" ;;
esac
# Listed once the exec happened (before it, the command line is python's).
listed=""
for _ in $(seq 100); do
        listed=$(lfs --json process list "$n" | json_get \
                "'yes' if any(p['pid'] == $pid and p.get('command') == '\ufffd 600' for p in j) else 'no'")
        [ "$listed" = yes ] && break
        sleep 0.1
done
assert_eq "$listed" yes "process list shows the process whose argv[0] is \\xff"
ok

# Which watcher the daemon has (its log: the default loads after the create answered).
log=$(lfs sandbox log "$n")
case $log in
*"BPF watcher loaded"*) watcher=bpf ;;
*"watcher proc)"*) watcher=proc ;;
*) watcher=cgroup ;;
esac
if [ "$watcher" = bpf ] || [ "$watcher" = proc ]; then
        lfs workspace exec "$n" main -- python3 -c 'import ctypes; ctypes.CDLL(None).prctl(15, b"\xff\xfe", 0, 0, 0)'
        named=""
        for _ in $(seq 100); do
                named=$(lfs --json sandbox events "$n" | python3 -c '
import json, sys
print(sum(1 for line in sys.stdin if line.strip()
          for e in [json.loads(line)] if e["event"] == "exit" and e["comm"] == "\ufffd\ufffd"))')
                [ "$named" -ge 1 ] && break
                sleep 0.1
        done
        [ "$named" -ge 1 ] || fail "the exit of a process named \\xff\\xfe is no event ($watcher watcher)"
        ok
else
        skip_part "the $watcher watcher reports no process names"
fi
lfs sandbox close "$n" --force >/dev/null
finish
