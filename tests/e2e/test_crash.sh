#!/usr/bin/env bash
# SIGKILL an import, a commit or a merge at random points: the Store must always open,
# pass PRAGMA integrity_check, and every reachable object must hash to its name; a head
# is either where it was or at the finished result.
source "$(dirname "$0")/lib.sh"
ROUNDS=${CRASH_ROUNDS:-12}

# A tree big enough that the kill lands inside the work: /usr/include plus 3,000 files.
mkdir -p "$WORK/src"
cp -a /usr/include "$WORK/src/include"
mkdir -p "$WORK/src/gen"
for d in $(seq 1 30); do
        mkdir -p "$WORK/src/gen/$d"
        for f in $(seq 1 100); do echo "$d/$f $RANDOM" >"$WORK/src/gen/$d/$f"; done
done

elapsed_ms() {
        local start=$EPOCHREALTIME
        "$@" >/dev/null
        echo $(((${EPOCHREALTIME/./} - ${start/./}) / 1000))
}

# run_killed MAX_MS ARGS...: starts layerfs ARGS (itself, not through a shell function,
# so that the kill reaches it), SIGKILLs it after a random delay.
run_killed() {
        local max=$1 delay
        shift
        delay=$((RANDOM % (max + 1)))
        "$LAYERFS" "$@" >/dev/null 2>&1 &
        local pid=$!
        sleep "$(printf '0.%03d' "$delay")"
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
}

store_is_sound() {
        local project=$1
        sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/$project/store.db" 'PRAGMA integrity_check' | grep -qx ok ||
                fail "integrity_check of $project"
        lfs --project "$project" project verify >/dev/null || fail "verify of $project after a kill"
        ok
}

# 1. Import: afterwards there is either no project or a whole, sound one.
full=$(elapsed_ms lfs project init probe --from "$WORK/src")
echo "   import takes ${full} ms; killing within that"
for round in $(seq 1 "$ROUNDS"); do
        run_killed "$full" project init "imp$round" --from "$WORK/src"
        if [ -d "$LAYERFS_HOME/projects/imp$round" ]; then
                store_is_sound "imp$round"
                lfs --project "imp$round" branch export main "$WORK/out$round" >/dev/null
                diff -r --no-dereference "$WORK/src" "$WORK/out$round" >/dev/null || fail "import $round incomplete"
                rm -rf "$WORK/out$round"
                ok
        fi
done
# An interrupted init leaves only its temporary directory, which the next init removes.
lfs project init after-crash >/dev/null
left=$(find "$LAYERFS_HOME/projects" -maxdepth 1 -name '.init-*' | wc -l)
assert_eq "$left" 0 "temporary init directories after the next init"

# 2. Commit of 3,000 changed files: head stays or moves to a commit whose parent is the old head.
lfs project init work --from "$WORK/src" >/dev/null
export LAYERFS_PROJECT=work
old=$(lfs --json branch log main --limit 1 | json_get 'j[0]["commit"]')
for d in $(seq 1 30); do for f in $(seq 1 100); do echo "changed $d/$f" >"$WORK/src/gen/$d/$f"; done; done
commit_ms=$(elapsed_ms lfs branch commit probe-branch --from "$WORK/src" -m probe 2>/dev/null || echo 400)
[ "$commit_ms" -gt 50 ] 2>/dev/null || commit_ms=400
for round in $(seq 1 "$ROUNDS"); do
        lfs branch create "c$round" --from "$old" >/dev/null
        run_killed "$commit_ms" branch commit "c$round" --from "$WORK/src" -m "round $round"
        store_is_sound work
        head=$(lfs --json branch log "c$round" --limit 1 | json_get 'j[0]["commit"], j[0]["parents"]')
        case "$head" in
        "('$old', [])" | "('$old', ['"*) ok ;; # not moved
        *"['$old']"*)
                lfs branch export "c$round" "$WORK/c$round" >/dev/null
                diff -r --no-dereference "$WORK/src" "$WORK/c$round" >/dev/null || fail "commit $round incomplete"
                rm -rf "$WORK/c$round"
                ok
                ;;
        *) fail "after a killed commit, c$round is at $head" ;;
        esac
done

# Packs and tmp objects that killed writers left are removed by the next writer.
lfs branch create sweep --from "$old" >/dev/null
lfs branch commit sweep --from "$WORK/src" -m sweep >/dev/null
packs_dir="$LAYERFS_HOME/projects/work/objects/packs"
on_disk=$(ls "$packs_dir" | sort)
recorded=$(sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/projects/work/store.db" 'SELECT name FROM packs ORDER BY name')
assert_eq "$on_disk" "$recorded" "pack files on disk against the packs table"
assert_eq "$(ls -A "$LAYERFS_HOME/projects/work/objects/tmp")" "" "objects/tmp after the next writer"

# 3. Merge of two branches with many changes: head stays or is the merge commit.
lfs branch create ours --from "$old" >/dev/null
lfs branch commit ours --from "$WORK/src" -m ours >/dev/null
lfs branch create theirs --from "$old" >/dev/null
lfs branch export theirs "$WORK/theirs" >/dev/null
for i in $(seq 1 500); do echo "theirs $i" >"$WORK/theirs/include/theirs-$i.h"; done
lfs branch commit theirs --from "$WORK/theirs" -m theirs >/dev/null
ours=$(lfs --json branch log ours --limit 1 | json_get 'j[0]["commit"]')
for round in $(seq 1 "$ROUNDS"); do
        lfs branch create "m$round" --from "$ours" >/dev/null
        run_killed 60 branch merge theirs "m$round"
        store_is_sound work
        parents=$(lfs --json branch log "m$round" --limit 1 | json_get 'len(j[0]["parents"])')
        head=$(lfs --json branch log "m$round" --limit 1 | json_get 'j[0]["commit"]')
        [ "$head" = "$ours" ] || [ "$parents" = 2 ] || fail "after a killed merge, m$round is at $head"
        ok
done
finish
