#!/usr/bin/env bash
# Attack (issue 16, item 3): a set-user-ID program in a Workspace stays set-user-ID after
# someone without CAP_FSETID rewrites it, so its new contents run with its owner's
# rights. On a disk, write, truncate and O_TRUNC by such a caller clear S_ISUID (and
# S_ISGID when the group may execute), and chown clears them for everyone. Before: the
# dev loop kept both bits after a write by the command identity (it had asked the kernel
# to leave this to it, HANDLE_KILLPRIV, and did nothing; with passthrough the kernel's
# write never reached it), and the libfuse loop kept them after an O_TRUNC open. Now the
# dev loop negotiates HANDLE_KILLPRIV_V2 and clears them when the kernel says the caller
# lacks CAP_FSETID, libfuse's clears them on an O_TRUNC by anyone but root, a set-id file
# never passes through, and a file open for writing with passthrough cannot become set-id
# (ETXTBSY). Checked as the kernel shows the file (its cached attributes), which is what
# exec uses.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
export LAYERFS_PROJECT=setid
lfs project init setid >/dev/null
n=$(lfs sandbox create)
ws=$(lfs workspace mount "$n" main)
in_main "$n" sh -c 'cp /bin/true prog && echo data >plain'
[ "$(in_main "$n" id -u)" != 0 ] || skip "commands run as root here: they have CAP_FSETID"

# mode_after MODE COMMAND: prog's mode (as stat shows it through the mount) after chmod
# MODE and COMMAND by the command identity.
mode_after() {
        in_main "$n" chmod "$1" prog
        in_main "$n" sh -c "$2"
        stat -c %a "$ws/prog"
}
assert_eq "$(mode_after 6755 'echo x >>prog')" 755 "set-id bits after a write by the command identity"
assert_eq "$(mode_after 2745 'echo x >>prog')" 2745 "set-group-ID without group execute after a write"
assert_eq "$(mode_after 4755 'truncate -s 100 prog')" 755 "set-user-ID after a truncate"
assert_eq "$(mode_after 4755 ': >prog')" 755 "set-user-ID after an O_TRUNC open"
# A file already open for writing when the bit is set: the write still clears it, or,
# when that open passes through (its writes never reach the daemon), the bit cannot be
# set while it lasts (ETXTBSY).
got=$(mode_after 755 'exec 3>>prog; chmod 4755 prog 2>&1 | grep -q "Text file busy" && echo busy; echo y >&3')
case "$got" in 755 | "busy"*755) ok ;; *) fail "set-user-ID set while open for writing, then a write: $got" ;; esac
ok
# Root (CAP_FSETID) keeps them, as on a disk.
in_main "$n" chmod 4755 prog
echo x >>"$ws/prog"
assert_eq "$(stat -c %a "$ws/prog")" 4755 "set-user-ID after a write by root"
# chown clears them whoever does it.
chown 0 "$ws/prog"
assert_eq "$(stat -c %a "$ws/prog")" 755 "set-user-ID after a chown"
ok
lfs sandbox close "$n" --force >/dev/null
finish
