#!/usr/bin/env bash
# Load under faults (tests/load/README.md): LOAD_SANDBOXES Sandboxes at once (4 under make
# check, 32 at full size), each with LOAD_WORKSPACES Workspaces (2; 4) and LOAD_ROUNDS
# rounds of create / mount / exec / process start and kill / commit / unmount / close,
# while a faulter SIGKILLs daemons, commands and CLI calls at random and runs `runtime
# reclaim` (driver.py). Afterwards: every project passes `project verify`, every branch's
# history is exactly the commits made, each holding what was written (driver.py), and
# nothing is left: no process, mount, cgroup, record or directory.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
SANDBOXES=${LOAD_SANDBOXES:-4}
WORKSPACES=${LOAD_WORKSPACES:-2}
ROUNDS=${LOAD_ROUNDS:-3}
SEED=${LOAD_SEED:-$RANDOM$RANDOM}
for v in SANDBOXES WORKSPACES ROUNDS; do
        [[ ${!v} =~ ^[1-9][0-9]*$ ]] || fail "LOAD_$v must be a positive number, got '${!v}'"
done
[ "$WORKSPACES" -le 16 ] || fail "LOAD_WORKSPACES must be at most 16 (a Sandbox's limit), got $WORKSPACES"
# The driver's guard on a Workspace's commands, alone first (no Sandbox: cheap).
LAYERFS=$LAYERFS WORK=$WORK python3 "$(dirname "$0")/exec_guard_check.py" || fail "driver.py's exec guard"
ok
echo "   seed $SEED (LOAD_SEED=$SEED replays the same choices; the timing of faults differs)"

LAYERFS=$LAYERFS WORK=$WORK python3 "$(dirname "$0")/driver.py" "$SANDBOXES" "$WORKSPACES" "$ROUNDS" "$SEED" ||
        fail "the load found failures (above); seed $SEED"
ok
assert_nothing_left "after the load"
left=$(pids_matching "^$LAYERFS ")
[ -z "$left" ] || fail "after the load: CLI calls left: $left"
ok
finish
