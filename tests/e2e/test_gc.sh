#!/usr/bin/env bash
# project gc (issue 18): a deleted branch's unique data is gone from disk afterwards (the
# bytes of objects/ measured with du before and after), what a branch still reaches stays
# and exports the same, a pack whose live share fell under the threshold is rewritten,
# the database shrinks when most of it was garbage, --dry-run and refused input change
# nothing, progress shows on a terminal only, and a gc
# SIGKILLed at each of its steps (LAYERFS_FAULT) leaves a Store that verifies, loses
# nothing reachable, and whose next gc finishes the work. `project verify` after each. A
# pack that holds only empty files' blobs stays.
source "$(dirname "$0")/lib.sh"
export LAYERFS_PROJECT=g
P=$LAYERFS_HOME/projects/g
FIFO=$WORK/fault

# on_disk: bytes of blocks that objects/ takes.
on_disk() { du -s --block-size=1 "$P/objects" | cut -f1; }
# loose_path FILE: where the Store keeps FILE's contents as a loose object.
loose_path() {
        local h
        h=$(sha256sum "$1" | cut -c1-64)
        echo "$P/objects/${h:0:2}/${h:2}"
}
# pack_of FILE: the pack that holds FILE's contents (nothing if none does).
pack_of() {
        local h
        h=$(sha256sum "$1" | cut -c1-64)
        sqlite3 -cmd ".timeout 10000" "$P/store.db" \
                "SELECT p.name FROM blobs b JOIN packs p ON p.id = b.pack WHERE hex(b.id) = upper('$h')"
}
# head_of BRANCH: its head commit.
head_of() { lfs --json branch log "$1" --limit 1 | json_get 'j[0]["commit"]'; }
# same_tree BRANCH DIR: the branch exports as DIR.
same_tree() {
        local out=$WORK/export-$RANDOM expected got
        lfs branch export "$1" "$out" >/dev/null
        expected=$(tree_manifest "$2")
        got=$(tree_manifest "$out")
        [ -n "$expected" ] && [ "$expected" = "$got" ] || fail "branch $1 does not export as $2 after gc"
        rm -rf "$out"
        ok
}
verified() {
        lfs project verify >/dev/null || fail "project verify after $1"
        ok
}
# packs_match: the pack files on disk are exactly those the packs table names.
packs_match() {
        local disk table
        disk=$(ls "$P/objects/packs" | sort)
        table=$(sqlite3 -cmd ".timeout 10000" "$P/store.db" 'SELECT name FROM packs ORDER BY name')
        assert_eq "$disk" "$table" "pack files against the packs table ($1)"
}
# small_files DIR N TAG: N files of 4 KiB of random bytes (packed): TAG-001, TAG-002...
small_files() {
        mkdir -p "$1"
        head -c $(($2 * 4096)) /dev/urandom | split -b 4096 -a 3 --numeric-suffixes=1 - "$1/$3-"
}

mkdir -p "$WORK/main/src"
printf 'int main(void) { return 0; }\n' >"$WORK/main/src/main.c"
head -c 1000000 /dev/urandom >"$WORK/main/kept.bin"
small_files "$WORK/main/small" 20 main
lfs project init g --from "$WORK/main" >/dev/null

# 1. A branch with data of its own: a loose object (8 MiB) and a pack of 100 small files,
# beside a file it shares with main.
cp -a "$WORK/main" "$WORK/big"
head -c 8388608 /dev/urandom >"$WORK/big/unique.bin"
small_files "$WORK/big/more" 100 big
lfs branch create big >/dev/null
lfs branch commit big --from "$WORK/big" -m big >/dev/null
big_commit=$(head_of big)
unique=$(loose_path "$WORK/big/unique.bin")
big_pack=$(pack_of "$WORK/big/more/big-001")
[ -f "$unique" ] && [ -n "$big_pack" ] && [ -f "$P/objects/packs/$big_pack" ] ||
        fail "the branch's data is not where the Store keeps it ($unique, pack '$big_pack')"
lfs branch delete big >/dev/null
before=$(on_disk)

# Refused before anything is removed.
expect_refusal InvalidInput "--repack-below" lfs project gc --repack-below 0
expect_refusal InvalidInput "--repack-below" lfs project gc --repack-below 101
expect_refusal InvalidInput "--repack-below" lfs project gc --repack-below 5x
expect_refusal InvalidInput "takes 0 arguments" lfs project gc everything
expect_refusal InvalidInput "unknown option" lfs project gc --all
expect_refusal NoSuchProject "" lfs --project nosuch project gc
assert_eq "$(on_disk)" "$before" "bytes on disk after refused gcs"

# --dry-run: says what would go, and how many bytes, and removes nothing.
dry=$(lfs --json project gc --dry-run)
checks="[j['dry_run'] is True, j['commits'] == 1, j['loose_objects'] == 1, j['packed_blobs'] == 100,
        j['bytes'] >= 8388608 + 100 * 4096,
        any(p['pack'] == '$big_pack' and p['action'] == 'removed' for p in j['packs'])]"
assert_eq "$(json_get "$checks" <<<"$dry")" "[True, True, True, True, True, True]" \
        "gc --dry-run: dry_run, 1 commit, 1 loose object, 100 packed blobs, their bytes, the pack: $dry"
assert_eq "$(on_disk)" "$before" "bytes on disk after gc --dry-run"
[ -f "$unique" ] || fail "gc --dry-run removed the loose object"
lfs branch create back --from "$big_commit" >/dev/null || fail "gc --dry-run removed the deleted branch's commit"
lfs branch delete back >/dev/null

# Progress goes to a terminal, never into a pipe.
tty_out=$(script -qec "$LAYERFS project gc --dry-run" /dev/null)
case "$tty_out" in *"gc: listing loose objects: 256/256"*) ok ;; *) fail "no progress on a terminal: $tty_out" ;; esac
piped=$(lfs project gc --dry-run 2>&1 >/dev/null)
assert_eq "$piped" "" "stderr of gc into a pipe"

# The gc: the branch's data is gone from disk, main's stays.
out=$(lfs --json project gc)
after=$(on_disk)
echo "   objects/ on disk: $before bytes before gc, $after after (reported freed: $(json_get 'j["bytes"]' <<<"$out"))"
[ $((before - after)) -ge $((8388608 + 100 * 4096)) ] ||
        fail "gc freed $((before - after)) bytes; the deleted branch alone held $((8388608 + 100 * 4096))"
ok
[ ! -e "$unique" ] || fail "the deleted branch's loose object is still on disk"
[ ! -e "$P/objects/packs/$big_pack" ] || fail "the deleted branch's pack is still on disk"
ok
[ -f "$(loose_path "$WORK/main/kept.bin")" ] || fail "gc removed main's loose object"
ok
expect_refusal NoSuchBranch "no branch or commit" lfs branch create back --from "$big_commit"
same_tree main "$WORK/main"
verified "the gc"
packs_match "after the gc"
again=$(lfs --json project gc)
assert_eq "$(json_get '(j["commits"], j["trees"], j["packed_blobs"], j["loose_objects"], j["bytes"])' <<<"$again")" \
        "(0, 0, 0, 0, 0)" "a second gc"

# 2. A pack whose live share fell under the threshold is rewritten: x has 10 files in one
# pack, y reaches 3 of them (the same contents: stored once); x goes.
small_files "$WORK/x" 10 x
mkdir "$WORK/y"
cp "$WORK/x/x-001" "$WORK/x/x-002" "$WORK/x/x-003" "$WORK/y/"
lfs branch create x >/dev/null
lfs branch commit x --from "$WORK/x" -m x >/dev/null
lfs branch create y --from "$(head_of x)" >/dev/null
lfs branch commit y --from "$WORK/y" -m y >/dev/null
x_pack=$(pack_of "$WORK/x/x-001")
assert_eq "$(pack_of "$WORK/y/x-001")" "$x_pack" "y's file lives in x's pack"
lfs branch delete x >/dev/null
# x's commit is y's parent: y still reaches all ten. Only once y moves on without them...
lfs branch create z >/dev/null
lfs branch commit z --from "$WORK/y" -m z >/dev/null
lfs branch delete y >/dev/null
# ... does the pack hold 30% live bytes: kept under a threshold of 20%, rewritten under 50%.
low=$(lfs --json project gc --dry-run --repack-below 20)
assert_eq "$(json_get "[p['action'] for p in j['packs'] if p['pack'] == '$x_pack']" <<<"$low")" "[]" \
        "a pack 30% live under --repack-below 20"
out=$(lfs --json project gc)
assert_eq "$(json_get "[(p['action'], p['live'], p['size']) for p in j['packs'] if p['pack'] == '$x_pack']" <<<"$out")" \
        "[('rewritten', 12288, 40960)]" "the pack 30% live under the default threshold"
[ ! -e "$P/objects/packs/$x_pack" ] || fail "the rewritten pack is still on disk"
new_pack=$(pack_of "$WORK/y/x-001")
[ -n "$new_pack" ] && [ "$new_pack" != "$x_pack" ] || fail "the live blobs did not move to a new pack"
assert_eq "$(stat -c %s "$P/objects/packs/$new_pack")" 12288 "the new pack holds the live blobs only"
same_tree z "$WORK/y"
same_tree main "$WORK/main"
verified "a pack rewrite"
packs_match "after a pack rewrite"

# 2b. The database shrinks when much of it was a deleted branch's (VACUUM): 12 commits
# with messages of 120 KB each.
db_bytes() { echo $(($(stat -c %s "$P/store.db") + $(stat -c %s "$P/store.db-wal" 2>/dev/null || echo 0))); }
long=$(head -c 120000 /dev/zero | tr '\0' m)
mkdir -p "$WORK/talk"
lfs branch create talk >/dev/null
for i in $(seq 1 12); do
        echo "$i" >"$WORK/talk/n"
        lfs branch commit talk --from "$WORK/talk" -m "$i $long" >/dev/null
done
lfs branch delete talk >/dev/null
db_before=$(db_bytes)
out=$(lfs --json project gc)
db_after=$(db_bytes)
echo "   store.db and its WAL: $db_before bytes before gc, $db_after after"
assert_eq "$(json_get '(j["commits"], j["database_bytes"] >= 12 * 120000, j["vacuumed"])' <<<"$out")" \
        "(12, True, True)" "a gc of 1.4 MB of commit messages"
[ $((db_before - db_after)) -ge 1200000 ] || fail "the database shrank by $((db_before - db_after)) bytes only"
ok
same_tree main "$WORK/main"
verified "a gc that compacted the database"

# 3. A gc killed at each of its steps: nothing reachable is lost, the Store verifies, and
# the next gc finishes (nothing left that no row names).
INTERRUPTED=0
STEPS="gc-repacked gc-transaction gc-remove#2"
for step in $STEPS; do
        tag=${step//#/-}
        # Garbage of every kind: a loose object, a pack 25% live (c-001 and c-002 of 8 files
        # stay reachable from k2), a pack with nothing live.
        mkdir -p "$WORK/c-$tag" "$WORK/keep-$tag"
        head -c 300000 /dev/urandom >"$WORK/c-$tag/loose.bin"
        small_files "$WORK/c-$tag" 8 c
        lfs branch create "c-$tag" >/dev/null
        lfs branch commit "c-$tag" --from "$WORK/c-$tag" -m c >/dev/null
        small_files "$WORK/c-$tag" 4 d
        lfs branch commit "c-$tag" --from "$WORK/c-$tag" -m d >/dev/null
        cp "$WORK/c-$tag/c-001" "$WORK/c-$tag/c-002" "$WORK/keep-$tag/"
        lfs branch create "k2-$tag" >/dev/null
        lfs branch commit "k2-$tag" --from "$WORK/keep-$tag" -m k2 >/dev/null
        lfs branch delete "c-$tag" >/dev/null
        fault_fifo "$FIFO"
        LAYERFS_FAULT="$step@$FIFO" "$LAYERFS" project gc >/dev/null 2>&1 &
        if kill_at_step "$FIFO" $!; then
                INTERRUPTED=$((INTERRUPTED + 1))
        else
                echo "   gc ended before reaching $step"
        fi
        verified "a gc killed at $step"
        same_tree z "$WORK/y"
        same_tree "k2-$tag" "$WORK/keep-$tag"
        out=$(lfs --json project gc)
        case $step in
        # Killed before its transaction: the next gc does all the work, and removes the new
        # pack the killed one left.
        gc-repacked | gc-transaction)
                assert_eq "$(json_get '(j["loose_objects"], j["leftovers"] >= 1, len(j["packs"]))' <<<"$out")" \
                        "(1, True, 2)" "the gc after one killed at $step" ;;
        # Killed after it: the rows are gone; the next gc removes the files left.
        *)
                assert_eq "$(json_get '(j["commits"], j["leftovers"] + j["loose_objects"] >= 1)' <<<"$out")" \
                        "(0, True)" "the gc after one killed at $step" ;;
        esac
        [ ! -e "$(loose_path "$WORK/c-$tag/loose.bin")" ] || fail "the loose object after the gc after $step"
        packs_match "the gc after one killed at $step"
        assert_eq "$(ls -A "$P/objects/tmp")" "" "objects/tmp after the gc after $step"
        same_tree "k2-$tag" "$WORK/keep-$tag"
        verified "the gc after one killed at $step"
done
echo "   $INTERRUPTED of $(wc -w <<<"$STEPS") gcs killed inside the work"
assert_eq "$INTERRUPTED" "$(wc -w <<<"$STEPS")" "gcs whose kill landed at their step"

# A pack whose live blobs are all empty files' (0 bytes each): gc judged packs by their
# live bytes, called this one dead, removed it and the rows of its blobs, and the next
# verify found the empty file's blob missing.
mkdir -p "$WORK/empties/d"
: >"$WORK/empties/empty"
: >"$WORK/empties/d/also-empty"
lfs --project empties project init empties --from "$WORK/empties" >/dev/null
lfs --project empties project gc >/dev/null
lfs --project empties project verify >/dev/null || fail "verify after gc of a project of empty files"
lfs --project empties branch export main "$WORK/empties-out" >/dev/null
assert_eq "$(tree_manifest "$WORK/empties-out")" "$(tree_manifest "$WORK/empties")" \
        "a project of empty files exported after gc"
finish
