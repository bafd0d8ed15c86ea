#!/usr/bin/env bash
# A commit racing a gc never loses an object (issue 18). One process commits round after
# round, each round's files partly the contents of branches deleted in earlier rounds (so
# a commit finds them in the Store, dead, and does not write them again: the race a gc
# could win by removing them between that look and the commit's transaction), while
# another runs project gc in a loop. Afterwards project verify passes and every branch
# kept exports exactly the files committed to it. GC_RACE_ROUNDS (default 12) makes it
# longer.
source "$(dirname "$0")/lib.sh"
export LAYERFS_PROJECT=race
ROUNDS=${GC_RACE_ROUNDS:-12}

mkdir -p "$WORK/main"
echo main >"$WORK/main/README"
lfs project init race --from "$WORK/main" >/dev/null
# Three sets of contents that rounds take in turn: small files (packed) and one loose.
for set in 0 1 2; do
        mkdir -p "$WORK/set$set"
        for k in $(seq 1 40); do echo "set $set file $k $RANDOM$RANDOM" >"$WORK/set$set/f$k"; done
        head -c 300000 /dev/urandom >"$WORK/set$set/large.bin"
done

# writer: round i commits set i%3 plus a file of its own to branch b<i>; odd rounds'
# branches are deleted at once, leaving their unique data as garbage.
writer() {
        for i in $(seq 1 "$ROUNDS"); do
                local d=$WORK/round$i
                mkdir -p "$d"
                cp -a "$WORK/set$((i % 3))/." "$d/"
                echo "round $i" >"$d/own"
                "$LAYERFS" branch create "b$i" >/dev/null || return 1
                "$LAYERFS" branch commit "b$i" --from "$d" -m "round $i" >/dev/null || return 1
                if [ $((i % 2)) = 1 ]; then
                        "$LAYERFS" branch delete "b$i" >/dev/null || return 1
                fi
        done
        touch "$WORK/writer-done"
}
start_gc_loop writer-done
writer &
writer_pid=$!
wait "$writer_pid" || fail "the writer failed while gcs ran"
ok
gc_loop_end
gcs=$GC_LOOP_COUNT
echo "   $ROUNDS rounds of commits against $gcs gcs"
[ "$gcs" -ge 2 ] || fail "only $gcs gcs ran"

lfs project verify >/dev/null || fail "project verify after commits raced gcs"
ok
kept=0
for i in $(seq 2 2 "$ROUNDS"); do
        lfs branch export "b$i" "$WORK/out$i" >/dev/null || fail "export of b$i"
        expected=$(tree_manifest "$WORK/round$i")
        got=$(tree_manifest "$WORK/out$i")
        [ -n "$expected" ] && [ "$expected" = "$got" ] || fail "b$i does not hold what was committed to it"
        kept=$((kept + 1))
        ok
done
assert_eq "$kept" $((ROUNDS / 2)) "branches checked"
# The garbage the odd rounds left is gone once nothing runs.
lfs project gc >/dev/null
out=$(lfs --json project gc --dry-run)
assert_eq "$(json_get '(j["commits"], j["loose_objects"], j["packed_blobs"], j["bytes"])' <<<"$out")" "(0, 0, 0, 0)" \
        "what a gc after the race would still remove"
lfs project verify >/dev/null || fail "project verify after the last gc"
ok
finish
