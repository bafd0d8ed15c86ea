#!/usr/bin/env bash
# project list_sandboxes asks every daemon at once and waits a bounded time (issue 17):
# with one daemon dead (SIGKILL) and one hung (SIGSTOP), the list still comes back, the
# dead one reclaimed and gone from it, the hung one listed from its record and said not to
# have answered, the others with their Workspaces counted. Before, the list asked each
# daemon in turn and waited for ever on a stopped one.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null

# Four Sandboxes: 1 with two Workspaces, 2 dead, 3 hung with one Workspace, 4 idle.
for i in 1 2 3 4; do
        assert_eq "$(lfs sandbox create)" "$i" "sandbox number"
done
lfs branch create other >/dev/null
lfs workspace mount 1 main >/dev/null
lfs workspace mount 1 other >/dev/null
lfs workspace mount 3 main >/dev/null
kill_daemon 2
hung=$(records "SELECT pid FROM sandboxes WHERE number=3")
TEARDOWN_EXTRA="kill -CONT $hung"
kill -STOP "$hung"

# A generous bound only against a hang of the list itself: the list's own wait is 2 s.
list_json() { timeout 60 "$LAYERFS" project list_sandboxes --json; }
out=$(list_json) || fail "list_sandboxes with a stopped daemon did not come back (exit $?)"
summary() {
        python3 -c '
import json, sys
for s in json.load(sys.stdin):
    print(s["sandbox"], s["workspaces"], "answered" if s["answered"] else "silent")'
}
assert_eq "$(summary <<<"$out")" "1 2 answered
3 0 silent
4 0 answered" "the list with sandbox 2 dead and 3 stopped"
assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number=2")" 0 "the dead sandbox's record after the list"
[ ! -e "$LAYERFS_HOME/sandboxes/p-2" ] || fail "the dead sandbox's directory is left after the list"
ok
text=$(timeout 60 "$LAYERFS" project list_sandboxes) || fail "the text list did not come back"
grep -q "^3 .*0 workspaces.*its daemon did not answer within 2 s" <<<"$text" ||
        fail "the text list does not say that sandbox 3 did not answer: $text"
ok
# Paging stays over the same list.
out=$(timeout 60 "$LAYERFS" project list_sandboxes --json --page-size 1 --page 3) || fail "paged list"
assert_eq "$(summary <<<"$out")" "4 0 answered" "page 3 of 1"

# Once the daemon runs again it answers, with its Workspace.
kill -CONT "$hung"
assert_eq "$(summary <<<"$(list_json)")" "1 2 answered
3 1 answered
4 0 answered" "the list once sandbox 3 runs again"

for i in 1 3 4; do lfs sandbox close "$i" --force >/dev/null; done
assert_eq "$(list_json)" "[]" "the list once all are closed"
assert_nothing_left "after the list test"
finish
