#!/usr/bin/env bash
# Attack on FUSE passthrough (dev loop, LAYERFS_FUSE_PASSTHROUGH on): keep a set-user-ID
# bit across a write through a registration the daemon kept. A file's registration with
# the kernel (BACKING_OPEN) outlives its opens until the kernel forgets the inode, and a
# write passed through never reaches the daemon, so it clears no set-id bit. The gap
# tried here: a file written (its create registers it), made set-user-ID after its last
# close, then opened for writing and written. On a disk the open keeps the bit and the
# write by someone without CAP_FSETID clears it, while root's write keeps it. The daemon
# lets a set-id file's kept registration go before such an open, so the write comes to
# it and it clears the bits as the kernel says (test_setid_write.sh); a writer passed
# through would have them cleared at its open, whoever it is (do_open).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/passthrough_lib.sh"
start_passthrough_sandbox ptsetidkept
[ "$(in_main "$N" id -u)" != 0 ] || skip "commands run as root here: they have CAP_FSETID"

# prog's mode after a write-open, then after a write through it, by
# the command identity, on a file written and closed before it became set-user-ID.
in_main "$N" sh -c 'printf data >prog && chmod 755 prog && cat prog >/dev/null'
in_main "$N" chmod 4755 prog
got=$(in_main "$N" sh -c 'exec 3>>prog; stat -c %a prog; printf x >&3; exec 3>&-; stat -c %a prog' | tr '\n' ' ')
assert_eq "$got" "4755 755 " "set-user-ID after a write-open, then after a write by the command identity"
assert_eq "$(stat -c %a "$WS/prog")" 755 "set-user-ID as the mount shows it after the write"
assert_eq "$(cat "$WS/prog")" datax "the file after the write"
ok

# The same with set-group-ID and group execute, the file open for reading meanwhile
# registered again (its bit gone: a write-open passes through once more).
in_main "$N" sh -c 'printf y >>prog && cat prog >/dev/null'
in_main "$N" chmod 2755 prog
got=$(in_main "$N" sh -c 'exec 3>>prog; stat -c %a prog; printf z >&3; exec 3>&-; stat -c %a prog' | tr '\n' ' ')
assert_eq "$got" "2755 755 " "set-group-ID after a write-open, then after a write by the command identity"
assert_eq "$(cat "$WS/prog")" dataxyz "the file after the second write"
ok

# Root (CAP_FSETID) keeps them, as on a disk: its open is not passed through with the
# bits cleared.
in_main "$N" sh -c 'printf w >>prog'
in_main "$N" chmod 4755 prog
echo r >>"$WS/prog"
assert_eq "$(stat -c %a "$WS/prog")" 4755 "set-user-ID after a write by root"
assert_eq "$(cat "$WS/prog")" "$(printf 'dataxyzwr')" "the file after root's write"
ok
lfs sandbox close "$N" --force >/dev/null
finish
