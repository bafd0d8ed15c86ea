#!/usr/bin/env bash
# A daemon opens its first mount's Store as it starts answering (daemon/mounts.c,
# start_spare_store), before that mount is asked for. What changed in the Store between
# that open and the mount must be what the mount shows: a branch made since, a commit to
# main made since by another Sandbox. A Sandbox closed without any mount leaves nothing.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null
early=$(lfs sandbox create)
other=$(lfs sandbox create)
# The daemon of $early has answered its create: its Store is open by now, or opening.
lfs branch create feature >/dev/null
ws=$(lfs workspace mount "$other" main)
echo "after the create" >"$ws/later.txt"
lfs workspace commit "$other" main -m later >/dev/null
lfs workspace unmount "$other" main >/dev/null
ws=$(lfs workspace mount "$early" main)
assert_eq "$(cat "$ws/later.txt")" "after the create" "main's commit made after the daemon started, in its first mount"
status=$(lfs workspace status "$early" main)
assert_eq "$status" "" "the first mount's status: clean against main's new head"
feature=$(lfs workspace mount "$early" feature)
[ -d "$feature" ] || fail "the branch made after the daemon started does not mount: $feature"
ok
lfs workspace unmount "$early" main >/dev/null
lfs workspace unmount "$early" feature >/dev/null
lfs sandbox close "$early" >/dev/null
lfs sandbox close "$other" >/dev/null
# A Sandbox that never mounts: its daemon closes the Store it opened ahead, and ends.
idle=$(lfs sandbox create)
lfs sandbox close "$idle" >/dev/null
assert_nothing_left "after Sandboxes whose first mount came late, or never"
finish
