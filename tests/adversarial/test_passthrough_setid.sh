#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): keep a set-user-ID
# bit across a write by the command identity. A passed-through write never reaches the
# daemon, so the daemon keeps set-id files from passing through and refuses chmod +s
# (ETXTBSY) while a file is open for writing with passthrough. The gap tried here: the
# inode already passes through for a reader (an upper file of 64 KiB or more opened
# read-only), the bit is set meanwhile (no writer: allowed), and a writer then opens it.
# An inode keeps the mode of its first open, so the writer gets the reader's backing id
# and its write goes to the upper file without clearing S_ISUID, where a disk clears it
# (and the daemon does for a write it serves, test_setid_write.sh).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
start_passthrough_sandbox ptsetid
[ "$(in_main "$N" id -u)" != 0 ] || skip "commands run as root here: they have CAP_FSETID"
# A program of 2 MiB in the upper directory: a read-only open of it passes through.
in_main "$N" sh -c 'cp /bin/true prog && truncate -s 2M prog && chmod 755 prog'

# Through a reader's open: the reader holds the inode's backing file while the owner
# makes it set-user-ID and a writer appends.
got=$(in_main "$N" sh -c 'exec 3<prog; chmod 4755 prog 2>&1; echo x >>prog; exec 3<&-; echo done')
assert_eq "$got" done "chmod and append with a reader open"
assert_eq "$(stat -c %a "$WS/prog")" 755 "set-user-ID after a write by the command identity (a reader open)"
# As the daemon sees it (no cached attribute of the kernel's in the way).
in_main "$N" chmod 755 prog
ok

# Same with the set-group-ID bit and group execute, and a truncate by the writer.
got=$(in_main "$N" sh -c 'exec 3<prog; chmod 2755 prog; truncate -s 3M prog; exec 3<&-; echo done')
assert_eq "$got" done "chmod and truncate with a reader open"
assert_eq "$(stat -c %a "$WS/prog")" 755 "set-group-ID after a truncate by the command identity (a reader open)"
in_main "$N" chmod 755 prog
ok

# A writer's open held while a reader's open came first, then the bit set: refused or cleared.
got=$(in_main "$N" sh -c 'exec 3<prog; exec 4>>prog; chmod 4755 prog 2>&1 | grep -q "Text file busy" && echo busy; echo y >&4; exec 3<&- 4>&-; stat -c %a prog')
case "$got" in 755 | "busy"*755) ok ;; *) fail "set-user-ID set with a reader and a writer open, then a write: $got" ;; esac
lfs sandbox close "$N" --force >/dev/null
finish
