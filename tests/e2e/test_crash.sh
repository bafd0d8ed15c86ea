#!/usr/bin/env bash
# SIGKILL an import, a commit or a merge inside its work: the Store must always open, pass
# PRAGMA integrity_check, and every reachable object must hash to its name; a head is
# either where it was or at the finished result. Each kill lands at a named step
# (LAYERFS_FAULT, userspace-lib/base/fault.h): an object written part-way through
# (object-write#N), every object written and none published (record-start), the head moved
# in a transaction not yet committed (record-transaction), an import whole under its
# temporary name (import-rename). Each part reports how many rounds the kill interrupted,
# and fails unless every one did: a kill after the work finished tests nothing.
source "$(dirname "$0")/lib.sh"
ROUNDS=${CRASH_ROUNDS:-12}

# A tree with work to interrupt: 3,000 small files (more objects than the thousand an
# object-write kill picks from) and the kernel's headers (/usr/include/linux, 800 files,
# the biggest stored loose), not all of /usr/include (8,000 files, 130 MB), whose import
# and verify in every round were most of this test's time and interrupted nothing more.
mkdir -p "$WORK/src"
cp -a /usr/include/linux "$WORK/src/include"
mkdir -p "$WORK/src/gen"
for d in $(seq 1 30); do
        mkdir -p "$WORK/src/gen/$d"
        for f in $(seq 1 100); do echo "$d/$f $RANDOM" >"$WORK/src/gen/$d/$f"; done
done
FIFO=$WORK/fault

# run_killed ROUND STEPS ARGS...: starts layerfs ARGS (itself, not through a shell
# function, so that the kill reaches it) with the ROUND-th of STEPS (cycling) as its
# LAYERFS_FAULT, and SIGKILLs it there. Counts the rounds in INTERRUPTED.
INTERRUPTED=0
run_killed() {
        local round=$1 steps
        read -r -a steps <<<"$2"
        shift 2
        local step=${steps[$(((round - 1) % ${#steps[@]}))]}
        # object-write: at one of its first thousand objects, a different one each round.
        [ "$step" != object-write ] || step="object-write#$((RANDOM % 1000 + 1))"
        fault_fifo "$FIFO"
        LAYERFS_FAULT="$step@$FIFO" "$LAYERFS" "$@" >/dev/null 2>&1 &
        if kill_at_step "$FIFO" $!; then
                INTERRUPTED=$((INTERRUPTED + 1))
        else
                echo "   round $round: $* ended before reaching $step"
        fi
}
# interrupted WHAT: says how many of the ROUNDS rounds the kill interrupted, all or fail.
interrupted() {
        echo "   $1: $INTERRUPTED of $ROUNDS rounds killed inside the work"
        assert_eq "$INTERRUPTED" "$ROUNDS" "$1: rounds whose kill landed inside the work"
        INTERRUPTED=0
}

store_is_sound() {
        local project=$1
        sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/$project/store.db" 'PRAGMA integrity_check' | grep -qx ok ||
                fail "integrity_check of $project"
        lfs --project "$project" project verify >/dev/null || fail "verify of $project after a kill"
        ok
}

# 1. Import: killed before it is put in place, there is no project; the next import of
# the same name is whole and sound.
for round in $(seq 1 "$ROUNDS"); do
        run_killed "$round" "object-write record-start record-transaction import-rename" \
                project init "imp$round" --from "$WORK/src"
        [ ! -e "$LAYERFS_HOME/projects/imp$round" ] || fail "import $round: a project after a kill before its rename"
        ok
done
interrupted import
lfs project init "imp1" --from "$WORK/src" >/dev/null
store_is_sound imp1
lfs --project imp1 branch export main "$WORK/out" >/dev/null
diff -r --no-dereference "$WORK/src" "$WORK/out" >/dev/null || fail "the import after the killed ones is incomplete"
rm -rf "$WORK/out"
ok
# An interrupted init leaves only its temporary directory, which the next init removes.
lfs project init after-crash >/dev/null
left=$(find "$LAYERFS_HOME/projects" -maxdepth 1 -name '.init-*' | wc -l)
assert_eq "$left" 0 "temporary init directories after the next init"

# 2. Commit of 3,000 changed files, killed before its transaction committed: the head
# stays; the Store stays sound.
lfs project init work --from "$WORK/src" >/dev/null
export LAYERFS_PROJECT=work
old=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
for d in $(seq 1 30); do for f in $(seq 1 100); do echo "changed $d/$f" >"$WORK/src/gen/$d/$f"; done; done
for round in $(seq 1 "$ROUNDS"); do
        lfs branch create "c$round" --from "$old" >/dev/null
        run_killed "$round" "object-write record-start record-transaction" \
                branch commit "c$round" --from "$WORK/src" -m "round $round"
        store_is_sound work
        assert_eq "$(lfs --json branch log "c$round" --limit 1 | json_get 'j[0]["commit"]')" "$old" \
                "round $round: the head after a commit killed before its transaction committed"
done
interrupted commit

# Packs and tmp objects that killed writers left are removed by the next writer.
lfs branch create sweep --from "$old" >/dev/null
lfs branch commit sweep --from "$WORK/src" -m sweep >/dev/null
lfs branch export sweep "$WORK/sweep" >/dev/null
diff -r --no-dereference "$WORK/src" "$WORK/sweep" >/dev/null || fail "the commit after the killed ones is incomplete"
rm -rf "$WORK/sweep"
ok
packs_dir="$LAYERFS_HOME/projects/work/objects/packs"
on_disk=$(ls "$packs_dir" | sort)
recorded=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/work/store.db" 'SELECT name FROM packs ORDER BY name')
assert_eq "$on_disk" "$recorded" "pack files on disk against the packs table"
assert_eq "$(ls -A "$LAYERFS_HOME/projects/work/objects/tmp")" "" "objects/tmp after the next writer"

# 3. Merge of two branches with many changes, killed before its transaction committed:
# the head stays.
lfs branch create ours --from "$old" >/dev/null
lfs branch commit ours --from "$WORK/src" -m ours >/dev/null
lfs branch create theirs --from "$old" >/dev/null
lfs branch export theirs "$WORK/theirs" >/dev/null
for i in $(seq 1 500); do echo "theirs $i" >"$WORK/theirs/include/theirs-$i.h"; done
lfs branch commit theirs --from "$WORK/theirs" -m theirs >/dev/null
ours=$(lfs --json branch log ours --limit 1 | json_get 'j[0]["commit"]')
for round in $(seq 1 "$ROUNDS"); do
        lfs branch create "m$round" --from "$ours" >/dev/null
        run_killed "$round" "record-start record-transaction" branch merge theirs "m$round"
        store_is_sound work
        assert_eq "$(lfs --json branch log "m$round" --limit 1 | json_get 'j[0]["commit"]')" "$ours" \
                "round $round: the head after a merge killed before its transaction committed"
done
interrupted merge
# Unkilled, the same merge finishes.
lfs branch merge theirs m1 >/dev/null
assert_eq "$(lfs --json branch log m1 --limit 1 | json_get 'len(j[0]["parents"])')" 2 "the merge after the killed ones"
store_is_sound work
finish
