#!/usr/bin/env bash
# A command makes the root daemon hold memory it never gives back (issue 13, item 2).
# Before: 100,000 symlinks with 4,000-byte targets, made and unlinked, left +467 MB in the
# daemon; 10,000 user.* xattrs of 64 KiB on one file +800 MB; nothing came back after
# unlink or FORGET, and nothing bounded what a Workspace's metadata could take.
# Now: a record, its target and its xattrs are freed when its last name, open and kernel
# reference are gone; a file's xattrs fit in one 4 KiB block as on ext4 (ENOSPC past it,
# E2BIG past 64 KiB); a Workspace's metadata has a budget (LAYERFS_WORKSPACE_MEMORY)
# past which new names get ENOSPC, as a full inode table would.
# Usage: test_daemon_memory.sh [--big] (the issue's sizes: 100,000 symlinks and inodes).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
LINKS=10000 INODES=10000
[ "${1:-}" = --big ] && LINKS=100000 INODES=100000
start_sandbox mem
mb() { echo $(($1 / 1024)); }

churn_symlinks() { # COUNT: made and unlinked, 4,000-byte targets, by the command identity
        in_ws "
import os
t = 'x' * 4000
for i in range($1):
    os.symlink(t, 'l'); os.unlink('l')
"
}
churn_symlinks 2000 # the allocator's arenas settle
settle_forgets
rss0=$(daemon_rss_kb)
churn_symlinks "$LINKS"
settle_forgets
rss1=$(daemon_rss_kb)
echo "RSS before $(mb "$rss0") MB, after $LINKS symlinks made and unlinked $(mb "$rss1") MB"
# Their targets alone are $LINKS * 4,000 bytes; what stays must be far less than that.
[ $((rss1 - rss0)) -lt $((LINKS * 4 / 8)) ] ||
        rss_fail "the daemon kept $(mb $((rss1 - rss0))) MB after $LINKS symlinks were made and unlinked"
ok

# xattrs: as ext4 with 4 KiB blocks, one file's names and values share one block.
errno_of() { in_ws "
import os, errno
try:
    $1
    print('ok')
except OSError as e:
    print(errno.errorcode[e.errno])"; }
in_ws "open('x', 'w').close()"
assert_eq "$(errno_of "os.setxattr('x', 'user.big', b'v' * 65536)")" ENOSPC "a 64 KiB xattr"
assert_eq "$(errno_of "os.setxattr('x', 'user.big', b'v' * 65537)")" E2BIG "a value past 64 KiB"
assert_eq "$(errno_of "os.setxattr('x', 'user.one', b'v' * 4000)")" ok "a 4,000-byte xattr"
assert_eq "$(errno_of "os.setxattr('x', 'user.two', b'v' * 100)")" ENOSPC "past the block"
assert_eq "$(errno_of "os.setxattr('x', 'user.one', b'v' * 10)")" ok "a smaller value replaces"
assert_eq "$(errno_of "os.setxattr('x', 'user.two', b'v' * 100)")" ok "room again"
assert_eq "$(in_ws "import os; print(len(os.getxattr('x', 'user.two')))")" 100 "the value kept"
# The attack: 10,000 values of 64 KiB on one file are all refused and cost nothing.
in_ws "
import os
n = 0
for i in range(10000):
    try:
        os.setxattr('x', 'user.a%d' % i, b'v' * 65536); n += 1
    except OSError:
        pass
print(n)" | { read -r kept; assert_eq "$kept" 0 "64 KiB xattrs accepted"; }
# Full blocks on many files, then the files unlinked: the memory comes back.
settle_forgets
rss2=$(daemon_rss_kb)
in_ws "
import os
os.mkdir('xd')
for i in range(2000):
    p = 'xd/%d' % i
    open(p, 'w').close()
    for k in range(3):
        os.setxattr(p, 'user.k%d' % k, b'v' * 1300)
"
rss3=$(daemon_rss_kb)
rm -rf "$WS/xd"
settle_forgets
rss4=$(daemon_rss_kb)
echo "RSS $(mb "$rss2") MB; with 2,000 files of 3,900 bytes of xattrs $(mb "$rss3") MB; after rm $(mb "$rss4") MB"
[ $((rss4 - rss2)) -lt 4096 ] || rss_fail "the daemon kept $(mb $((rss4 - rss2))) MB of xattrs of unlinked files"
ok

# Inodes: what a record costs, and that making and removing them twice costs no more
# than once (what the allocator keeps after the first round is used again).
inode_round() {
        in_ws "
import os
os.mkdir('many')
for i in range($INODES):
    open('many/%d' % i, 'w').close()
"
        settle_forgets
        full=$(daemon_rss_kb)
        rm -rf "$WS/many"
        settle_forgets
        after=$(daemon_rss_kb)
}
rss5=$(daemon_rss_kb)
inode_round
rss6=$full rss7=$after
inode_round
rss8=$after
echo "RSS $(mb "$rss5") MB; with $INODES empty files $(mb "$rss6") MB" \
        "($(((rss6 - rss5) * 100000 / INODES / 1024)) MB per 100,000); after rm $(mb "$rss7") MB;" \
        "after a second round $(mb "$rss8") MB"
[ $((rss8 - rss7)) -lt $(((rss6 - rss5) / 4)) ] ||
        rss_fail "a second round of $INODES files made and removed kept $(mb $((rss8 - rss7))) MB more"
ok

# The Workspace's budget: a second Sandbox with 4 MiB for its metadata.
n2=$(LAYERFS_WORKSPACE_MEMORY=4M lfs sandbox create)
ws2=$(lfs workspace mount "$n2" main)
fill() { lfs workspace exec "$n2" main -- python3 -c "
import os, errno
n = 0
try:
    while True:
        $1
        n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n)"; }
read -r code made < <(fill "open('f%d' % n, 'w').close()")
assert_eq "$code" ENOSPC "files past the budget"
[ "$made" -gt 1000 ] || fail "only $made files fit in 4 MiB"
read -r code links < <(fill "os.symlink('t' * 4000, 's%d' % n)")
assert_eq "$code:$links" ENOSPC:0 "a symlink when the budget is spent"
lfs workspace exec "$n2" main -- sh -c 'rm f1*'
read -r code links < <(fill "os.symlink('t' * 4000, 's%d' % n)")
assert_eq "$code" ENOSPC "symlinks past the budget"
[ "$links" -gt 100 ] || fail "removing files freed no room for symlinks ($links made)"
# What a 4,000-byte symlink no longer fits in may still hold a few empty files: df -i
# counts those (a record and a short name each), so it shows 0 once they are made too.
read -r code _ < <(fill "open('g%d' % n, 'w').close()")
assert_eq "$code" ENOSPC "files after the symlinks"
assert_eq "$(df --output=iavail "$ws2" | tail -1 | tr -d ' ')" 0 "df -i shows the budget spent"
lfs workspace unmount "$n2" main --discard
ok
finish
