#!/usr/bin/env bash
# What a Store's writers leave, and the file size limit. Under `ulimit -f` below what they
# write, `branch commit --from` and `project init --from` were ended by SIGXFSZ mid-write
# (exit 153, a pack or a temporary object or a half-made project left), and under about
# 32 KiB any call that opens a Store was (SQLite sizes its -shm file to 32 KiB). Now the
# Store's writes fail EFBIG: Failed naming the limit and the fix, nothing left, the Store
# unchanged and verified. What a SIGKILLed writer leaves (its pack, its directory of
# temporary objects, a project being made) was judged dead by its pid: kept while its pid
# was reused, and a live writer of another pid namespace whose pid is free here had its
# pack and temporary objects removed under it (its commit failed). Now each writer holds
# flock on what it writes, and the next writer removes only what no writer holds.
# What the CLI holds, it holds only while a Store or the home's records are open: a
# command run by `workspace exec` still gets SIGXFSZ itself (exit 153).
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (new pid namespaces)"
use_private_sandboxes

P=$LAYERFS_HOME/projects
# limited KIB command...: command under ulimit -f KIB.
limited() { bash -c 'ulimit -f "$1" && exec "${@:2}"' sh "$@"; }
# store_left PROJECT: what writers left in the Store: pack files no row names, then what
# objects/tmp holds.
store_left() {
        local disk table
        disk=$(ls "$P/$1/objects/packs" | sort)
        table=$(sqlite3 -cmd ".timeout 10000" "$P/$1/store.db" 'SELECT name FROM packs ORDER BY name')
        comm -23 <(echo "$disk") <(echo "$table") | tr '\n' ' '
        ls -A "$P/$1/objects/tmp" | tr '\n' ' '
}
head_of() { lfs --project "$1" branch list | awk '$2 == "main" {print $1}'; }

# A tree with a large file (a loose object, through objects/tmp) and 200 small ones (a
# pack of 600 KB).
mkdir "$WORK/src"
head -c 1048576 /dev/urandom >"$WORK/src/a-big"
for i in $(seq 200); do head -c 3000 /dev/urandom >"$WORK/src/s$i"; done
# One small file, committed to branch other beside the writers killed or held.
mkdir "$WORK/one"
echo small >"$WORK/one/small"
lfs project init work >/dev/null
before=$(head_of work)

# The file size limit: a commit and an init, through io_uring and the plain calls, and at
# 16 KiB (the Store's database) any call that opens the Store.
for uring in 0 1; do
        export LAYERFS_NO_URING=$uring
        expect_refusal Failed "ulimit -f, is 100 KiB" limited 100 "$LAYERFS" --project work branch commit main --from "$WORK/src" -m limited
        assert_eq "$(store_left work)" "" "what a commit past ulimit -f left (LAYERFS_NO_URING=$uring)"
        assert_eq "$(head_of work)" "$before" "main after a commit past ulimit -f (LAYERFS_NO_URING=$uring)"
        for kib in 100 16; do
                expect_refusal Failed "ulimit -f, is $kib KiB" limited "$kib" "$LAYERFS" project init limited --from "$WORK/src"
                assert_eq "$(ls -A "$P" | tr '\n' ' ')" "work " "what an init past ulimit -f $kib left (LAYERFS_NO_URING=$uring)"
        done
done
unset LAYERFS_NO_URING
expect_refusal Failed "ulimit -f, is 16 KiB" limited 16 "$LAYERFS" --project work branch list
expect_refusal Failed "ulimit -f, is 16 KiB" limited 16 "$LAYERFS" --project work project verify
lfs --project work project verify >/dev/null || fail "the Store does not verify after the refused writes"
ok

# A Sandbox created, mounted and run in under ulimit -f 64: its command's write past the
# limit ends it with SIGXFSZ; under 16 KiB the exec is refused before it runs anything.
n=$(limited 64 "$LAYERFS" --project work sandbox create)
limited 64 "$LAYERFS" --project work workspace mount "$n" main >/dev/null
status=0
limited 64 "$LAYERFS" --project work workspace exec "$n" main -- sh -c 'head -c 200000 /dev/zero >too-big' 2>/dev/null || status=$?
assert_eq "$status" 153 "the exit status of a command's write past ulimit -f"
expect_refusal Failed "ulimit -f, is 16 KiB" limited 16 "$LAYERFS" --project work workspace exec "$n" main -- touch ran
[ ! -e "$LAYERFS_HOME/sandboxes/work-$n/mnt/main/ran" ] || fail "the exec refused under ulimit -f 16 ran its command"
lfs --project work workspace unmount "$n" main --discard >/dev/null
lfs --project work sandbox close "$n" >/dev/null
ok

FIFO=$WORK/fifo
# killed_at_record command...: the command, killed at record-start (every object
# written, none published); prints the pid it had.
killed_at_record() {
        fault_fifo "$FIFO"
        LAYERFS_FAULT="record-start@$FIFO" "$@" >/dev/null 2>"$WORK/killed.err" &
        local pid=$! line
        line=$(fault_reached "$pid" "$FIFO") || fail "$* ended before record-start: $(cat "$WORK/killed.err")"
        kill -9 "${line##* }"
        wait "$pid" 2>/dev/null || true
        echo "${line##* }"
}

# SIGKILLed writers whose pid is in use again (this shell's): what they left goes with the
# next writer.
pid=$(killed_at_record "$LAYERFS" --project work branch commit main --from "$WORK/src" -m killed)
left=$(store_left work)
[ -n "$left" ] || fail "a commit killed at record-start left nothing: killed too late"
for name in $(ls "$P/work/objects/packs") $(ls "$P/work/objects/tmp"); do
        case "$name" in "$pid"-*) ;; *) continue ;; esac
        for dir in packs tmp; do
                [ -e "$P/work/objects/$dir/$name" ] && mv "$P/work/objects/$dir/$name" "$P/work/objects/$dir/$$-${name#"$pid"-}"
        done
done
lfs --project work branch create other >/dev/null
lfs --project work branch commit other --from "$WORK/one" -m next >/dev/null
assert_eq "$(store_left work)" "" "what a killed commit whose pid is in use again left, after the next commit"
pid=$(killed_at_record "$LAYERFS" project init killed --from "$WORK/src")
mv "$P/.init-$pid-killed" "$P/.init-$$-killed"
lfs project init again >/dev/null
assert_eq "$(ls -A "$P" | tr '\n' ' ')" "again work " "what a killed init whose pid is in use again left, after the next init"
lfs --project work project verify >/dev/null || fail "the Store does not verify after the killed writers"
ok

# A live writer in another pid namespace, with a pid no process has here: held at
# record-start while a commit beside it looks for leftovers, then let go, it commits.
pid_max=$(cat /proc/sys/kernel/pid_max)
inner=$((pid_max - 1000))
while kill -0 "$inner" 2>/dev/null; do inner=$((inner - 1)); done
fault_fifo "$FIFO"
LAYERFS_FAULT="record-start@$FIFO" unshare --pid --fork --mount-proc --kill-child sh -c \
        'echo "$(($1 - 1))" >/proc/sys/kernel/ns_last_pid && "$2" --project work branch commit main --from "$3" -m held' \
        sh "$inner" "$LAYERFS" "$WORK/src" >/dev/null 2>"$WORK/held.err" &
held=$!
line=$(fault_reached "$held" "$FIFO") || fail "the held commit ended before record-start: $(cat "$WORK/held.err")"
assert_eq "${line##* }" "$inner" "the held commit's pid in its namespace"
kill -0 "$inner" 2>/dev/null && fail "pid $inner is in use here"
echo beside >"$WORK/one/small"
lfs --project work branch commit other --from "$WORK/one" -m beside >/dev/null
[ -n "$(store_left work)" ] || fail "the commit beside removed the held commit's pack and objects"
fault_release "$FIFO"
wait "$held" || fail "the held commit failed once let go: $(cat "$WORK/held.err")"
assert_eq "$(store_left work)" "" "what the held commit left"
lfs --project work project verify >/dev/null || fail "the Store does not verify after the held commit"
lfs --project work branch export main "$WORK/out" >/dev/null
diff -r "$WORK/src" "$WORK/out" >/dev/null || fail "main after the held commit differs from what it committed"
ok

# An init's sweep that opened another init's directory by its name, and locks it only once
# that init let go (renamed to its project's name, then unlocked): it must not remove what
# the name no longer leads to. It emptied the finished project through its descriptor (the
# review reproduced it with a delayed flock).
fault_fifo "$WORK/renaming"
LAYERFS_FAULT="import-rename@$WORK/renaming" lfs project init first --from "$WORK/src" >/dev/null 2>"$WORK/first.err" &
first=$!
fault_reached "$first" "$WORK/renaming" >/dev/null || fail "the first init ended before import-rename: $(cat "$WORK/first.err")"
fault_fifo "$WORK/sweeping"
LAYERFS_FAULT="leftover-opened@$WORK/sweeping" lfs project init second >/dev/null 2>"$WORK/second.err" &
second=$!
fault_reached "$second" "$WORK/sweeping" >/dev/null || fail "the second init's sweep did not open the first's directory: $(cat "$WORK/second.err")"
fault_release "$WORK/renaming"
wait "$first" || fail "the first init failed: $(cat "$WORK/first.err")"
fault_release "$WORK/sweeping"
wait "$second" || fail "the second init failed: $(cat "$WORK/second.err")"
lfs --project first project verify >/dev/null || fail "the first project does not verify after the second init's sweep"
# An init held between the make of its directory and its lock while another init sweeps:
# the sweep waits for the directory's lock and leaves the live one's be (it took it for a
# dead one's and removed it, and the held init failed Busy: the load suite met it).
fault_fifo "$WORK/made"
LAYERFS_FAULT="leftover-made#1@$WORK/made" lfs project init third --from "$WORK/src" >/dev/null 2>"$WORK/third.err" &
third=$!
fault_reached "$third" "$WORK/made" >/dev/null || fail "the third init ended before leftover-made: $(cat "$WORK/third.err")"
lfs project init fourth >/dev/null 2>"$WORK/fourth.err" &
fourth=$!
fault_release "$WORK/made"
wait "$third" || fail "an init whose directory another init's sweep met before its lock failed: $(cat "$WORK/third.err")"
wait "$fourth" || fail "the sweeping init failed: $(cat "$WORK/fourth.err")"
lfs --project third project verify >/dev/null || fail "the third project does not verify"
ok
lfs --project first branch export main "$WORK/first-out" >/dev/null
diff -r "$WORK/src" "$WORK/first-out" >/dev/null || fail "the first project differs from its source after the sweep"
ok
finish
