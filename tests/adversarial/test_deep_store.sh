#!/usr/bin/env bash
# Attack (issue 13, item 1, the library's side): trees deeper than any walk's stack.
# A directory of 3,000 levels imported (`project init --from`), a Store whose trees nest
# DEPTH levels (written straight into store.db, as a Store made elsewhere or by an older
# version could hold them) verified, diffed, merged and exported, and a chain of
# TMP_DEPTH directories that a command leaves in the Sandbox's TMPDIR removed at close
# (`test_deep_store.sh DEPTH TMP_DEPTH`, default 100,000 and 30,000: more than the
# daemon's fd limit here). Before: import held one
# directory fd per level and failed with "Too many open files", verify, diff and merge
# recursed once per level until the stack overflowed, and close's rm -rf (daemon and
# library) recursed with an fd and a 32 KiB stream per level, so the Sandbox's directory
# stayed. Now every walk keeps its own stack, import refuses a path longer than the Store
# records (4,095 bytes) by name, export refuses to write one, and rm -rf holds a bounded
# number of directories open (deeper ones are moved up first).
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
# DEEP_STORE_DEPTH for make sanitize (20000: the same walks, whose depth the normal build
# proves past any stack).
DEPTH=${1:-${DEEP_STORE_DEPTH:-100000}}
TMP_DEPTH=${2:-30000}
export LAYERFS_PROJECT=deep

# A directory on disk of 3,000 levels, past the Store's 2,048 and the CLI's 1,024 fds:
# import refuses it by name.
python3 - "$WORK/disk" 3000 <<'EOF'
import os, sys
os.makedirs(sys.argv[1]); os.chdir(sys.argv[1])
for _ in range(int(sys.argv[2])):
    os.mkdir("d"); os.chdir("d")
open("f", "w").write("deep\n")
EOF
out=$(lfs project init deep --from "$WORK/disk" 2>&1) && fail "the import of 3,000 levels answered: ${out:0:200}"
case "$out" in
"InvalidInput: "*"at most 4,095 bytes"*) ok ;;
*) fail "the import of 3,000 levels said '${out:0:300}'" ;;
esac
[ ! -e "$LAYERFS_HOME/projects/deep" ] || fail "a failed import left its project"
ok

# Trees of DEPTH levels, written into the Store directly: main and other both change
# what is at the bottom of the chain that their common ancestor made.
lfs project init deep >/dev/null
python3 - "$LAYERFS_HOME/projects/deep/store.db" "$DEPTH" <<'EOF'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
depth = int(sys.argv[2])
empty = hashlib.sha256(b"").digest()
def tree(entries):  # [(mode, name, id)], sorted by name
    data = b"".join(b"%o 0 %s\0" % (mode, name) + ident for mode, name, ident in entries)
    ident = hashlib.sha256(data).digest()
    db.execute("INSERT OR IGNORE INTO trees(id, data) VALUES(?, ?)", (ident, data))
    return ident
def chain(bottom):  # DEPTH directories "c" above the bottom tree
    ident = bottom
    for _ in range(depth):
        ident = tree([(0o40000, b"c", ident)])
    return ident
def commit(root, parent, message):
    text = "tree %s\n" % root.hex()
    if parent:
        text += "parent %s\n" % parent.hex()
    text += "author test <test@localhost>\ntime 1700000000\n\n%s" % message
    ident = hashlib.sha256(text.encode()).digest()
    db.execute("INSERT INTO commits(id, tree, parent1, parent2, author, time, message) VALUES(?, ?, ?, NULL, ?, ?, ?)",
               (ident, root, parent, "test <test@localhost>", 1700000000, message))
    return ident
head = db.execute("SELECT commit_id FROM branches WHERE name='main'").fetchone()[0]
base = commit(chain(empty), head, "a deep chain")
ours = commit(chain(tree([(0o40000, b"x", empty)])), base, "x at the bottom")
theirs = commit(chain(tree([(0o40000, b"y", empty)])), base, "y at the bottom")
db.execute("UPDATE branches SET commit_id=? WHERE name='main'", (ours,))
db.execute("INSERT INTO branches(name, commit_id) VALUES('other', ?)", (theirs,))
db.commit()
EOF
deepest="$(printf 'c/%.0s' $(seq "$DEPTH"))"
lfs project verify >/dev/null
ok
assert_eq "$(lfs branch diff main other)" "$(printf 'D %sx\nA %sy' "$deepest" "$deepest")" "diff at the bottom of the chain"
lfs branch merge other main >/dev/null
assert_eq "$(lfs branch diff other main)" "A ${deepest}x" "the merge holds both sides"
lfs project verify >/dev/null
out=$(lfs branch export main "$WORK/out" 2>&1) && fail "the export of $DEPTH levels answered: ${out:0:200}"
case "$out" in
"Failed: "*"longer than 4,095 bytes"*) ok ;;
*) fail "the export of $DEPTH levels said '${out:0:300}'" ;;
esac
[ ! -e "$WORK/out" ] && [ -z "$(find "$WORK" -maxdepth 1 -name '.out.layerfs-export-*')" ] || fail "a failed export left files"
ok

# A command leaves a chain of TMP_DEPTH directories in the Sandbox's TMPDIR; close removes it.
n=$(lfs sandbox create)
lfs workspace mount "$n" main >/dev/null
lfs workspace exec "$n" main -- python3 -c '
import os, sys
os.chdir(os.environ["TMPDIR"])
for _ in range(int(sys.argv[1])):
    os.mkdir("t"); os.chdir("t")
open("f", "w").write("deep\n")' "$TMP_DEPTH"
lfs sandbox close "$n" --force >/dev/null
[ -z "$(ls -A "$LAYERFS_HOME/sandboxes")" ] || fail "close left the Sandbox's directory: $(ls "$LAYERFS_HOME/sandboxes")"
grep -q " $LAYERFS_HOME/" /proc/mounts && fail "a mount is left"
ok
finish
