#!/usr/bin/env bash
# Attack: a teardown that cannot finish, and what close says about it (issue 12, item 3).
# The daemon deleted the Sandbox's record whatever its teardown left, and close then
# said "closed" (or "its record stays so that reclaim can try again" when it did not):
# what stayed behind was no longer recorded, so no reclaim ever removed it, and the
# number was handed out again over the remains.
# Here an immutable file in the Sandbox's TMPDIR stands for anything the teardown cannot
# remove. Fixed by: a record is deleted only after its teardown finished; close says
# what stays and exits 125; the number stays taken; reclaim finishes the teardown once
# it can.
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
TEARDOWN_EXTRA='[ -n "${STUCK:-}" ] && chattr -i "$STUCK" 2>/dev/null'
mkdir -p "$WORK/src"
echo hello >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

for how in close idle reclaim; do
        if [ "$how" = idle ]; then
                SB=$(LAYERFS_IDLE_SECONDS=1 lfs sandbox create)
        else
                SB=$(lfs sandbox create)
        fi
        dir="$LAYERFS_HOME/sandboxes/p-$SB"
        STUCK="$dir/tmp/stuck"
        echo x >"$STUCK"
        chattr +i "$STUCK"
        daemon=$(records "SELECT pid FROM sandboxes WHERE number=$SB")
        case $how in
        close)
                set +e
                out=$(lfs sandbox close "$SB" --force 2>&1)
                status=$?
                set -e
                [ "$status" = 125 ] || fail "close of a Sandbox whose teardown cannot finish exited $status: $out"
                case "$out" in
                "Failed: "*"$STUCK"*"record stays"*) ok ;;
                *) fail "close of a Sandbox whose teardown cannot finish said: $out" ;;
                esac
                ;;
        idle)
                while kill -0 "$daemon" 2>/dev/null; do sleep 0.1; done
                ;;
        reclaim)
                kill_daemon "$SB"
                out=$(lfs runtime reclaim 2>&1)
                case "$out" in *"reclaimed sandbox $SB"*) fail "reclaim claimed it removed sandbox $SB: $out" ;; esac
                ok
                ;;
        esac
        assert_eq "$(records "SELECT count(*) FROM sandboxes WHERE number=$SB")" 1 "$how: the record stays while its remains do"
        [ -e "$STUCK" ] || fail "$how: the stuck file is gone?"
        assert_eq "$(lfs project list_sandboxes | wc -l)" 0 "$how: a Sandbox whose daemon is gone is not listed"
        other=$(lfs sandbox create)
        [ "$other" != "$SB" ] || fail "$how: the number of a Sandbox whose remains stay was handed out again"
        ok
        lfs sandbox close "$other" >/dev/null
        chattr -i "$STUCK"
        STUCK=
        out=$(lfs runtime reclaim)
        case "$out" in *"reclaimed sandbox $SB of p"*) ok ;; *) fail "$how: reclaim once it could said: $out" ;; esac
        [ ! -e "$dir" ] || fail "$how: $dir stays after the reclaim"
        assert_eq "$(records)" 0 "$how: records after the reclaim"
        left=$(find "$CGR" -mindepth 1 -type d)
        [ -z "$left" ] || fail "$how: cgroups left: $left"
done
finish
