#!/usr/bin/env bash
# The pool of Sandboxes made ahead (LAYERFS_POOL, issue 17). Checked: a bad size is
# refused before anything is made; a create with a pool fills it in a detached process
# (whole Sandboxes, 'pooled', not listed, refused to every call but close); the next
# create like it takes one (the same daemon, now listed, working: mount, exec, commit); a
# create with other options, settings or resource limits never takes one made for
# another, and a command in a Sandbox taken from a pool has its creator's limits; a
# pooled daemon killed is not handed out, nor one killed between its take and its
# answer (fault step pool-taken): the create goes on with another; concurrent creates
# get distinct working Sandboxes; the idle close ends a pool and leaves nothing. Attacks
# through the pool (a caller's confinement, its environment): test_pool_confinement.sh.
source "$(dirname "$0")/lib.sh"
use_private_sandboxes
lfs project init p >/dev/null

pooled() { # pooled: the pooled numbers, one per line
        records "SELECT number FROM sandboxes WHERE state='pooled' ORDER BY number"
}
daemon_of() { records "SELECT pid FROM sandboxes WHERE number=$1"; }
fill_done() { flock "$LAYERFS_HOME/pool/fillers.lock" true; } # every fill under way has ended
listed() { lfs --json project list_sandboxes | json_get '" ".join(str(s["sandbox"]) for s in j)'; }

# A bad size: refused, nothing made.
for bad in 17 -1 two 1.5; do
        LAYERFS_POOL=$bad expect_refusal InvalidInput "LAYERFS_POOL" "$LAYERFS" sandbox create
done
assert_eq "$(records)" 0 "records after the refused creates"

# The first create makes its own Sandbox and fills the pool behind it.
first=$(LAYERFS_POOL=2 "$LAYERFS" sandbox create)
fill_done
mapfile -t made < <(pooled)
assert_eq "${#made[@]}" 2 "pooled Sandboxes after the first create with LAYERFS_POOL=2"
for n in "${made[@]}"; do
        [ "$n" != "$first" ] || fail "the create's own Sandbox $first is also pooled"
        d=$(daemon_of "$n")
        kill -0 "$d" || fail "pooled Sandbox $n's daemon $d is not running"
        expect_refusal NoSuchSandbox "pooled" "$LAYERFS" workspace mount "$n" main
        expect_refusal NoSuchSandbox "pooled" "$LAYERFS" workspace exec "$n" main -- true
done
assert_eq "$(listed)" "$first" "list_sandboxes with a pool"
key_default=$(records "SELECT pool FROM sandboxes WHERE number=${made[0]}")

# The next create like it takes the lowest pooled one: the same daemon, now the caller's.
taken_daemon=$(daemon_of "${made[0]}")
sb=$(LAYERFS_POOL=2 "$LAYERFS" sandbox create)
assert_eq "$sb" "${made[0]}" "the Sandbox the second create got"
assert_eq "$(daemon_of "$sb")" "$taken_daemon" "the daemon of the Sandbox taken from the pool"
assert_eq "$(records "SELECT state FROM sandboxes WHERE number=$sb")" running "its record's state"
lfs workspace mount "$sb" main >/dev/null
in_main "$sb" sh -c 'echo from-the-pool >f'
lfs workspace commit "$sb" main -m pooled >/dev/null
lfs workspace unmount "$sb" main >/dev/null
ws=$(main_sandbox)
assert_eq "$(in_main "$ws" cat f)" from-the-pool "the commit of a Sandbox taken from the pool"
lfs sandbox close "$ws" >/dev/null
fill_done
assert_eq "$(pooled | wc -l)" 2 "pooled Sandboxes once the second create's filler is done"

# A variable that no process of a Sandbox reads (a CI's job id, ssh's connection) neither
# reaches a daemon nor keeps a create from the pool.
taken_daemon=$(daemon_of "$(records "SELECT number FROM sandboxes WHERE state='pooled' AND pool='$key_default' ORDER BY number" | head -1)")
n=$(CI_JOB_ID=$RANDOM SSH_CONNECTION="10.0.0.1 $RANDOM 10.0.0.2 22" LAYERFS_POOL=2 "$LAYERFS" sandbox create)
assert_eq "$(daemon_of "$n")" "$taken_daemon" "the daemon a create with other unrelated variables got"
fill_done
for d in $(records "SELECT pid FROM sandboxes"); do
        ! tr '\0' '\n' <"/proc/$d/environ" | grep -q '^CI_JOB_ID=' || fail "daemon $d has its creator's CI_JOB_ID"
done
ok
# A create inside `flock HOME/pool/fillers.lock` (which waits for fills) gets no fill
# rather than waiting for itself.
timeout 60 flock "$LAYERFS_HOME/pool/fillers.lock" env LAYERFS_POOL=2 "$LAYERFS" sandbox create >/dev/null ||
        fail "a create run under the fillers' lock did not return"
ok

# Creates unlike the pooled ones (options, a setting, a resource limit) make their own.
# own_create WHAT ENV... -- ARGS...: a create (in a subshell, after the commands in ENV)
# must not take any Sandbox pooled before it; prints its number.
own_create() {
        local what=$1 before n
        shift
        before=" $(pooled | tr '\n' ' ') "
        n=$(eval "$1" && LAYERFS_POOL=1 "$LAYERFS" sandbox create "${@:2}") || fail "$what failed"
        case "$before" in *" $n "*) fail "$what took pooled Sandbox $n, made for another create" ;; esac
        ok
        fill_done
        echo "$n"
}
own_create "a create with --disk 100M" true --disk 100M >/dev/null
own_create "a create with LAYERFS_IDLE_SECONDS=100" "export LAYERFS_IDLE_SECONDS=100" >/dev/null
soft=$(ulimit -Sf)
fsize() { in_main "$1" awk '/^Max file size/ { print $4 }' /proc/self/limits; } # fsize N: bytes
[ "$soft" != 1000 ] || fail "this shell's soft file size limit is 1000 blocks already: the test needs another"
before=" $(pooled | tr '\n' ' ') "
own_create "a create under ulimit -f 1000" "ulimit -Sf 1000" >/dev/null
limited=$(for n in $(pooled); do case "$before" in *" $n "*) ;; *) echo "$n" ;; esac; done)
assert_eq "$(wc -w <<<"$limited")" 1 "Sandboxes pooled for creates under ulimit -f 1000"
# ... one with the same limit takes it, and its commands get the limit.
key_1000=$(records "SELECT pool FROM sandboxes WHERE number=$limited")
n=$(ulimit -Sf 1000 && LAYERFS_POOL=1 "$LAYERFS" sandbox create)
assert_eq "$n" "$limited" "the Sandbox a create under ulimit -f 1000 got"
fill_done
lfs workspace mount "$n" main >/dev/null
assert_eq "$(fsize "$n")" 1024000 "the file size limit -f in a Sandbox taken from a pool made under ulimit -f 1000"
made_1000=" $(records "SELECT number FROM sandboxes WHERE state='pooled' AND pool='$key_1000'" | tr '\n' ' ') "
[ "$made_1000" != "  " ] || fail "no Sandbox pooled for creates under ulimit -f 1000 after one was taken"
n=$(LAYERFS_POOL=1 "$LAYERFS" sandbox create)
case "$made_1000" in *" $n "*) fail "a create under ulimit -f $soft took Sandbox $n, pooled for ulimit -f 1000" ;; esac
fill_done
lfs workspace mount "$n" main >/dev/null
assert_eq "$(fsize "$n")" "$([ "$soft" = unlimited ] && echo unlimited || echo $((soft * 1024)))" "the file size limit -f in a Sandbox of a create under ulimit -f $soft"

# A pooled daemon killed is not handed out; its record is reclaimed.
# (The number may come back: a create that makes its own reclaims the dead one first.)
mapfile -t made < <(pooled)
dead=$(daemon_of "${made[0]}")
kill_daemon "${made[0]}"
n=$(LAYERFS_POOL=2 "$LAYERFS" sandbox create)
[ "$(daemon_of "$n")" != "$dead" ] || fail "the create got pooled Sandbox ${made[0]}, whose daemon was killed"
ok
lfs workspace mount "$n" main >/dev/null
in_main "$n" true
fill_done
lfs runtime reclaim >/dev/null
assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE pid=$dead")" 0 \
        "records of pooled Sandbox ${made[0]}'s killed daemon after a reclaim"

# Killed between its take and its answer: the create goes on with another.
fault_fifo "$WORK/taken"
mapfile -t made < <(records "SELECT number FROM sandboxes WHERE state='pooled' AND pool='$key_default'")
[ "${#made[@]}" -ge 1 ] || fail "no pooled Sandbox to take"
LAYERFS_POOL=2 LAYERFS_FAULT="pool-taken#1@$WORK/taken" "$LAYERFS" sandbox create >"$WORK/got" &
creator=$!
# (Run with '&', which ignores SIGINT and SIGQUIT: no matter to the pool, its daemon and
# commands set every signal back.)
fault_reached "$creator" "$WORK/taken" 60 >/dev/null || fail "the create ended without taking a pooled Sandbox"
victim=
for n in "${made[@]}"; do
        [ "$(records "SELECT state FROM sandboxes WHERE number=$n")" != running ] || victim=$n
done
[ -n "$victim" ] || fail "no pooled Sandbox of ${made[*]} is taken at the step pool-taken"
dead=$(daemon_of "$victim")
kill_daemon "$victim"
fault_release "$WORK/taken"
wait "$creator" || fail "the create whose pooled Sandbox died before it answered failed"
got=$(cat "$WORK/got")
[ "$(daemon_of "$got")" != "$dead" ] || fail "the create returned Sandbox $victim, whose daemon was killed"
ok
lfs workspace mount "$got" main >/dev/null
in_main "$got" true
fill_done

# A pooled daemon that does not answer (stopped) is ended after the take's deadline, and
# the create goes on with another.
mapfile -t made < <(records "SELECT number FROM sandboxes WHERE state='pooled' AND pool='$key_default' ORDER BY number")
[ "${#made[@]}" -ge 1 ] || fail "no pooled Sandbox to stop"
stopped=$(daemon_of "${made[0]}")
kill -STOP "$stopped"
n=$(LAYERFS_POOL=2 "$LAYERFS" sandbox create)
[ "$(daemon_of "$n")" != "$stopped" ] || fail "the create got Sandbox ${made[0]}, whose daemon is stopped"
ok
wait_exit "$stopped" 30 || fail "the stopped pooled daemon $stopped was not ended by the take that found it silent"
lfs workspace mount "$n" main >/dev/null
in_main "$n" true
fill_done

# The filler keeps nothing of its caller's: no descriptor beyond its stdio (on /dev/null),
# / as its directory. It is held where it makes its next Sandbox (the create itself took
# a pooled one, so the filler's first create-claimed is its own).
fault_fifo "$WORK/filling"
mkdir "$WORK/cwd"
exec {held}>"$WORK/held-by-the-caller"
(cd "$WORK/cwd" && LAYERFS_POOL=2 LAYERFS_FAULT="create-claimed#1@$WORK/filling" "$LAYERFS" sandbox create >/dev/null)
line=$(fault_reached $$ "$WORK/filling" 60) || fail "no filler reached create-claimed"
filler=${line##* }
held_fds=$(find "/proc/$filler/fd" -lname "$WORK/held-by-the-caller" | wc -l)
assert_eq "$held_fds" 0 "the filler's descriptors of a file its caller held open"
assert_eq "$(readlink "/proc/$filler/cwd")" / "the filler's directory"
fault_release "$WORK/filling"
exec {held}>&-
fill_done

# Callers confined or scheduled otherwise, and one caller's environment: see
# tests/adversarial/test_pool_confinement.sh.

# Pooled Sandboxes never keep a create from being made: one that finds no private network
# left ends the project's pooled Sandboxes (any key) and makes its own.
# (The networks are the home's: another project's pool gives way too.)
if [ "$(new_runtime)" = namespaces ]; then
        for n in $(records "SELECT number FROM sandboxes"); do lfs sandbox close "$n" --force >/dev/null; done
        lfs project init q >/dev/null
        export LAYERFS_NET_RANGE=10.253.77.0/29 # two /30s
        n=$(LAYERFS_POOL=1 "$LAYERFS" --project q sandbox create --network private)
        fill_done
        assert_eq "$(pooled | wc -l)" 1 "pooled Sandboxes with a private network"
        n2=$(LAYERFS_IDLE_SECONDS=100 "$LAYERFS" --project p sandbox create --network private) ||
                fail "a create that found every /30 held by another project's pooled Sandbox failed"
        assert_eq "$(pooled | wc -l)" 0 "pooled Sandboxes after a create needed their network"
        lfs --project q sandbox close "$n" >/dev/null
        lfs --project p sandbox close "$n2" >/dev/null
        unset LAYERFS_NET_RANGE
        export LAYERFS_PROJECT=p
fi

# Creates at once: distinct Sandboxes, each working.
pids=()
for i in 1 2 3 4; do
        LAYERFS_POOL=2 "$LAYERFS" sandbox create >"$WORK/at-once-$i" &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a create run at once with others failed"; done
got=$(cat "$WORK"/at-once-* | sort -n | uniq | wc -l)
assert_eq "$got" 4 "distinct Sandboxes of four creates at once"
for i in 1 2 3 4; do
        n=$(cat "$WORK/at-once-$i")
        lfs workspace mount "$n" main >/dev/null
        in_main "$n" true
done
fill_done

# Everything closes, pooled ones too; then a pool ended by its idle close leaves nothing.
for n in $(records "SELECT number FROM sandboxes"); do lfs sandbox close "$n" --force >/dev/null; done
assert_nothing_left "after closing every Sandbox and every pooled one"
n=$(LAYERFS_POOL=1 LAYERFS_IDLE_SECONDS=1 "$LAYERFS" sandbox create)
fill_done
p=$(pooled)
[ -n "$p" ] || fail "no pooled Sandbox with LAYERFS_POOL=1"
d=$(daemon_of "$p")
lfs sandbox close "$n" >/dev/null
wait_exit "$d" 60 || fail "pooled Sandbox $p's daemon $d still runs 60 s into an idle close of 1 s"
assert_nothing_left "after the idle close of a pooled Sandbox"
finish
