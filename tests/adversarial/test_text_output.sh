#!/usr/bin/env bash
# The attack (issue 12, item 7): text output could be forged. A file named
# $'harmless\nD a.txt' printed a fake 'D a.txt' line in `workspace status`; a command line
# with '\n' and an OSC escape added a fake row to `process list` and sent the escape to the
# terminal. Paths, command lines, commit messages, log lines and error messages were
# printed as they were.
# Now every text printer quotes what could break one line per entry or drive a terminal
# (control characters, DEL, C1 controls, bytes that are not UTF-8, line separators and
# bidirectional overrides), as git's quotePath does: the entry in double quotes with C
# escapes. --json is unchanged: it gives the exact values.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes

ESC=$'\e'
C1_CSI=$'\xc2\x9b' # U+009B: CSI on terminals that take C1 controls
FORGED_FILE=$'harmless\nD a.txt'
OSC=$'\e]0;pwned\a'

# no_raw_controls WHAT FILE: the text holds no control character but newline (and tab),
# no DEL and no C1 control.
no_raw_controls() {
        if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$2"; then
                fail "$1 printed raw control characters: $(cat -A "$2")"
        fi
        ok
}

mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# ---- 1. file names: workspace status, branch diff ------------------------------------
SB=$(lfs sandbox create)
lfs workspace mount "$SB" main >/dev/null
lfs workspace exec "$SB" main -- sh -c 'echo x > "$1"; echo y > "$2"' sh "$FORGED_FILE" "osc$OSC.txt"
lfs workspace status "$SB" main >"$WORK/status"
no_raw_controls "workspace status" "$WORK/status"
assert_eq "$(wc -l <"$WORK/status")" 2 "workspace status: one line per changed path"
grep -qxF 'A "harmless\nD a.txt"' "$WORK/status" || fail "workspace status: $(cat -A "$WORK/status")"
grep -qxF 'A "osc\033]0;pwned\a.txt"' "$WORK/status" || fail "workspace status: $(cat -A "$WORK/status")"
ok
# --json gives the exact names.
# json_has EXPRESSION ARG...: the expression (on j, the JSON on stdin, and a, the args).
json_has() {
        python3 -c 'import json,sys; j=json.load(sys.stdin); a=sys.argv[2:]; print(eval(sys.argv[1]))' "$@"
}
assert_eq "$(lfs --json workspace status "$SB" main | json_has 'sorted(c["path"] for c in j) == sorted(a)' "$FORGED_FILE" "osc$OSC.txt")" True \
        "workspace status --json: the exact names"
lfs workspace commit "$SB" main -m "odd names" >/dev/null
first=$(lfs --json branch log main | json_get 'j[-1]["commit"]')
lfs branch diff "$first" main >"$WORK/diff"
no_raw_controls "branch diff" "$WORK/diff"
assert_eq "$(wc -l <"$WORK/diff")" 2 "branch diff: one line per changed path"
grep -qxF 'A "harmless\nD a.txt"' "$WORK/diff" || fail "branch diff: $(cat -A "$WORK/diff")"
ok

# ---- 2. command lines: process list --------------------------------------------------
# A pid above any pid_max (4194304), so that no real process's row can start with it.
FORGED_ROW=$'x\n9999999     cmd-99     running    forged'"$OSC"
# A background sh waits on a fifo with a builtin (its own command line stays, with no
# child); the exec returns once it runs.
pid=$(lfs workspace exec "$SB" main -- sh -c 'mkfifo "$TMPDIR/ready" "$TMPDIR/hold"
        sh -c "echo > \"\$TMPDIR/ready\"; read x 0<>\"\$TMPDIR/hold\"" "$1" &
        read x < "$TMPDIR/ready"; echo $!' sh "$FORGED_ROW")
lfs process list "$SB" >"$WORK/ps"
lfs --json process list "$SB" >"$WORK/ps.json"
no_raw_controls "process list" "$WORK/ps"
grep -q '9999999' "$WORK/ps" && ! grep -q '^9999999' "$WORK/ps" || fail "process list: $(cat -A "$WORK/ps")"
assert_eq "$(wc -l <"$WORK/ps")" "$(json_get 'len(j)' <"$WORK/ps.json")" "process list: one line per process"
ok
lfs process kill "$SB" "$(host_pids "$SB" "$pid")" >/dev/null

# ---- 3. program names in events (comm) and the daemon's log ---------------------------
# A program whose file name carries a C1 CSI and DEL: the kernel takes its name as comm.
lfs workspace exec "$SB" main -- sh -c 'cp /bin/true "$TMPDIR/$1"; "$TMPDIR/$1"' sh "c1${C1_CSI}31m"$'\x7f'
lfs sandbox events "$SB" >"$WORK/events"
no_raw_controls "sandbox events" "$WORK/events"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$WORK/events" ||
        fail "sandbox events: not JSON lines any more"
ok
# A command line with a newline lands in the daemon's log: every line of it is one entry.
lfs workspace exec "$SB" main -- $'no-such\n2099-01-01T00:00:00 forged entry' 2>/dev/null || true
lfs sandbox log "$SB" >"$WORK/log"
no_raw_controls "sandbox log" "$WORK/log"
if grep -v -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} ' "$WORK/log" | grep -q .; then
        fail "sandbox log: a line that is not an entry: $(grep -v -E '^[0-9]{4}-' "$WORK/log" | cat -A)"
fi
grep -q '^2099-01-01T00:00:00 forged' "$WORK/log" && fail "sandbox log: a forged entry: $(cat -A "$WORK/log")"
ok

# ---- 4. error messages and the paths they list ---------------------------------------
# A symlink made by a command leads --cwd outside, to a directory whose name is an escape:
# the refusal names where it leads.
lfs workspace exec "$SB" main -- sh -c 'mkdir "$TMPDIR/$1" && ln -s "$TMPDIR/$1" evil' sh "x${OSC}y"
set +e
lfs workspace exec "$SB" main --cwd evil -- true 2>"$WORK/err"
code=$?
set -e
assert_eq "$code" 125 "--cwd through the command's symlink is refused"
no_raw_controls "an error message" "$WORK/err"
assert_eq "$(wc -l <"$WORK/err")" 1 "an error message is one line"
# A Conflict lists paths that commands named.
lfs workspace exec "$SB" main -- sh -c 'rm evil; echo base > "$1"' sh "c$FORGED_FILE"
lfs workspace commit "$SB" main -m base >/dev/null
lfs workspace unmount "$SB" main >/dev/null
lfs branch create other >/dev/null
for b in main other; do
        lfs branch export "$b" "$WORK/x-$b" >/dev/null
        echo "$b" >"$WORK/x-$b/c$FORGED_FILE"
        lfs branch commit "$b" --from "$WORK/x-$b" -m "change on $b" >/dev/null
done
set +e
lfs branch merge other main 2>"$WORK/conflict"
code=$?
set -e
assert_eq "$code" 125 "the merge conflicts"
no_raw_controls "Conflict" "$WORK/conflict"
grep -qxF '  "charmless\nD a.txt"' "$WORK/conflict" || fail "Conflict paths: $(cat -A "$WORK/conflict")"
ok
assert_eq "$({ lfs --json branch merge other main || true; } | json_has 'a[0] in j["error"]["paths"]' "c$FORGED_FILE")" True \
        "Conflict --json: the exact path"

# ---- 5. commit messages and authors: lines stay the message's own --------------------
lfs branch export main "$WORK/y" >/dev/null
echo more >"$WORK/y/more"
LAYERFS_AUTHOR=$'mallory\e[2J <m@x>' lfs branch commit main --from "$WORK/y" -m $'subject\n\e]0;pwned\a body' >/dev/null
lfs branch log main --limit 1 >"$WORK/log1"
no_raw_controls "branch log" "$WORK/log1"
grep -qxF '    subject' "$WORK/log1" || fail "branch log: $(cat -A "$WORK/log1")"
ok

# ---- 6. records: a record's text is quoted too ---------------------------------------
sqlite3 "$LAYERFS_HOME/home.db" "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state) VALUES ('x' || char(10) || '7    p    linux' || char(27) || ']0;y' || char(7), 9, 'linux', 'native', 999999, 1, 'x', '/nonexistent', 'running')" ||
        fail "could not write a forged record"
lfs project list_sandboxes >"$WORK/sandboxes" 2>&1 || true
no_raw_controls "project list_sandboxes" "$WORK/sandboxes"
grep -q '^7 ' "$WORK/sandboxes" && fail "project list_sandboxes: a forged row: $(cat -A "$WORK/sandboxes")"
lfs runtime reclaim >"$WORK/reclaim" 2>&1 || true
no_raw_controls "runtime reclaim" "$WORK/reclaim"
sqlite3 "$LAYERFS_HOME/home.db" "DELETE FROM sandboxes WHERE number=9"

lfs sandbox close "$SB" --force >/dev/null
finish
