#!/usr/bin/env bash
# test-runner: alone (it replaces /run/layerfs/bpf-offsets, which every daemon that loads reads)
# Attack: the BPF watcher reads task_struct and signal_struct at offsets that the first load
# of a boot caches in /run/layerfs/bpf-offsets. A cache that root did not write alone (a
# file others may write), or whose offsets cannot be a member's, is not used: the watcher
# takes them from the kernel's BTF again. Before, any file there with the right first line
# was taken, and offsets pointing elsewhere in the task made the watcher report wrong exit
# codes (or miss exits). Checked by the exit code of a grandchild that setsid away, which
# only the BPF watcher reports.
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes
unset LAYERFS_WATCHER
CACHE=/run/layerfs/bpf-offsets
[ -e /sys/kernel/btf/vmlinux ] || skip "no kernel BTF here"
saved=""
if [ -e "$CACHE" ]; then
        saved=$WORK/saved-offsets
        cp -p "$CACHE" "$saved"
fi
TEARDOWN_EXTRA='if [ -n "'"$saved"'" ]; then cp -p "'"$saved"'" '"$CACHE"'; else rm -f '"$CACHE"'; fi'
lfs project init p >/dev/null

key="$(cat /proc/sys/kernel/random/boot_id) $(uname -r)"
# grandchild_exit: a Sandbox of its own root's first daemon (which loads, reading the
# cache), a command whose setsid grandchild exits 42; what BPF reported of that exit.
grandchild_exit() {
        local sb got=""
        sb=$(lfs sandbox create)
        lfs workspace mount "$sb" main >/dev/null
        lfs workspace exec "$sb" main -- sh -c '(setsid sh -c "exit 42" &); sleep 0.2'
        for _ in $(seq 50); do
                got=$(lfs sandbox events "$sb" | python3 -c 'import json, sys; print([e.get("exit") for e in map(json.loads, sys.stdin) if e["event"] == "exit" and e.get("exit") == 42])')
                [ "$got" = "[42]" ] && break
                sleep 0.1
        done
        lfs sandbox close "$sb" --force >/dev/null
        echo "$got"
}
mkdir -p /run/layerfs
# Offsets that are members' (small, aligned) but wrong, in a file anyone may write.
printf '%s\n0 0 0 0 0 0\n' "$key" >"$CACHE"
chmod 666 "$CACHE"
assert_eq "$(grandchild_exit)" "[42]" "a cache others may write is not used"
# Offsets that cannot be a member's, in root's own file.
printf '%s\n4000000000 4000000000 4000000000 4000000000 4000000000 4000000000\n' "$key" >"$CACHE"
chmod 600 "$CACHE"
assert_eq "$(grandchild_exit)" "[42]" "offsets out of any member's range are not used"
ok
echo "ok: $(basename "$0") ($CHECKS checks)"
