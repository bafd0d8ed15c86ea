#!/usr/bin/env bash
# `branch merge` of two Branches diverged by one commit each on top of a long history
# (issue 18: the merge base walked every commit ever made). Usage:
# BENCH_COMPARE=DIR bench/merge_history.sh [COMMITS [RUNS]]: DIR is another build
# directory (an older commit's); each run merges with its layerfs and with this build's,
# alternating which goes first, each on a project of its own made alike: an import, then
# COMMITS (10,000) commits of the same tree written straight into store.db (with their
# real ids, without generations: as a Store made before them), a Branch side made from
# main, then per run one commit on side, one on main and the timed merge. The first
# merge of each project is reported apart (this build fills the generations then, once).
# It reports and never judges: it exits non-zero when a command fails, never because of
# a figure.
set -euo pipefail
set -o errtrace
shopt -s inherit_errexit # a failed command inside $(merge ...) ends the script

COMMITS=${1:-10000}
RUNS=${2:-5}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_need_built layerfs
OTHER=${BENCH_COMPARE:?"bench: BENCH_COMPARE=DIR names the build to compare with"}
[ -x "$OTHER/layerfs" ] || {
        echo "bench: $OTHER/layerfs is missing" >&2
        exit 1
}
bench_stock_env
export LAYERFS_PROJECT=hist
mkdir -p "$BUILD"
WORK=$(mktemp -d "$BUILD/merge-history.XXXXXX")
cleanup() { rm -rf --one-file-system "$WORK"; }
bench_traps

# extend DB N: N commits in a line on top of main's head, of its tree, main moved there.
extend() {
        python3 - "$1" "$2" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2])
(head,) = db.execute("SELECT commit_id FROM branches WHERE name='main'").fetchone()
(tree,) = db.execute("SELECT tree FROM commits WHERE id=?", (head,)).fetchone()
rows = []
for i in range(n):
    msg = "history %d" % i
    text = "tree %s\nparent %s\nauthor bench\ntime %d\n\n%s" % (tree.hex(), head.hex(), i, msg)
    cid = hashlib.sha256(text.encode()).digest()
    rows.append((cid, tree, head, "bench", i, msg))
    head = cid
with db:
    db.executemany("INSERT INTO commits(id, tree, parent1, author, time, message) VALUES(?,?,?,?,?,?)", rows)
    db.execute("UPDATE branches SET commit_id=? WHERE name='main'", (head,))
PY
}

mkdir "$WORK/src"
echo 0 >"$WORK/src/a"
declare -A BIN=([other]="$OTHER/layerfs" [this]="$LAYERFS")
for b in other this; do
        export LAYERFS_HOME="$WORK/$b/home"
        "${BIN[$b]}" project init hist --from "$WORK/src" >/dev/null
        extend "$LAYERFS_HOME/projects/hist/store.db" "$COMMITS"
        "${BIN[$b]}" branch create side >/dev/null
        for br in main side; do "${BIN[$b]}" branch export "$br" "$WORK/$b/$br" >/dev/null; done
done

# merge B RUN: a commit on each Branch, then the merge, timed (microseconds).
merge() {
        local b=$1 run=$2 t0 t1
        export LAYERFS_HOME="$WORK/$b/home"
        for br in main side; do
                echo "$run" >"$WORK/$b/$br/$br"
                "${BIN[$b]}" branch commit "$br" --from "$WORK/$b/$br" -m "$br $run" >/dev/null
        done
        t0=$(now_us)
        "${BIN[$b]}" branch merge side main >/dev/null
        t1=$(now_us)
        # main's directory as main is now, side's file merged in: its next commit keeps it.
        rm -rf "$WORK/$b/main"
        "${BIN[$b]}" branch export main "$WORK/$b/main" >/dev/null
        echo $((t1 - t0))
}

declare -A FIRST TIMES
for b in other this; do FIRST[$b]=$(merge "$b" 0); done
for run in $(seq 1 "$RUNS"); do
        order=(other this)
        ((run % 2)) || order=(this other)
        for b in "${order[@]}"; do TIMES[$b]+="$(merge "$b" "$run") "; done
done
echo "branch merge of two Branches diverged by one commit each, on $COMMITS commits; $RUNS runs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-40s %12s %12s %s\n' build dir "first (ms)" "median (ms)" "runs (ms)"
for b in other this; do
        dir=$OTHER
        [ "$b" = this ] && dir=$BUILD
        ms=()
        # shellcheck disable=SC2086 # the runs, one word each
        for t in ${TIMES[$b]}; do ms+=("$(awk -v t="$t" 'BEGIN { printf "%.1f", t / 1000 }')"); done
        printf '%-8s %-40s %12s %12s %s\n' "$b" "$dir" "$(awk -v t="${FIRST[$b]}" 'BEGIN { printf "%.1f", t / 1000 }')" \
                "$(median "${ms[@]}")" "${ms[*]}"
done
