#!/usr/bin/env bash
# An export builds its tree beside DIR as .NAME.layerfs-export-PID and renames it into
# place. Three ways left that directory behind: `ulimit -f` below a file's size ended the
# export with SIGXFSZ; SIGTERM or Ctrl-C ended it mid-way; SIGKILL left it forever, and a
# retry in a new pid namespace (pid 1 again) was refused "File exists". Now the first
# fails EFBIG naming the file (its path shortened), the second removes the directory
# before the signal takes its course, and the next export into DIR removes what a killed
# one left: only directories of that exact name, of this user, not symlinks, and never
# one a running export holds (its flock), in whatever pid namespace it runs.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a directory of another user, new pid namespaces)"

# beside PARENT: what PARENT holds, hidden entries too, on one line.
beside() { ls -A "$1" | sort | tr '\n' ' '; }

# The file size limit, on the large file path (1 MiB, streamed) and on the small one (a
# batch through io_uring, and the plain calls).
mkdir "$WORK/big" "$WORK/small" "$WORK/fsize"
head -c 1048576 /dev/urandom >"$WORK/big/big"
head -c 64000 /dev/urandom >"$WORK/small/small"
lfs project init big --from "$WORK/big" >/dev/null
lfs project init small --from "$WORK/small" >/dev/null
# limited KIB command...: command under ulimit -f KIB.
limited() { bash -c 'ulimit -f "$1" && exec "${@:2}"' sh "$@"; }
expect_refusal Failed "cannot write big: File too large" \
        limited 100 "$LAYERFS" --project big branch export main "$WORK/fsize/out"
assert_eq "$(beside "$WORK/fsize")" "" "what an export past ulimit -f left (large file)"
for uring in 0 1; do
        expect_refusal Failed "cannot write small: File too large" \
                limited 48 env LAYERFS_NO_URING=$uring "$LAYERFS" --project small branch export main "$WORK/fsize/out"
        assert_eq "$(beside "$WORK/fsize")" "" "what an export past ulimit -f left (small file, LAYERFS_NO_URING=$uring)"
done
lfs --project big branch export main "$WORK/fsize/out" >/dev/null
cmp "$WORK/big/big" "$WORK/fsize/out/big" || fail "the export without the limit differs"
ok

# The failing file at the end of a path of about 4,000 bytes: the message shortens it.
long=$WORK/long
for i in $(seq 19); do long=$long/$(printf "d%.0s" $(seq 200)); done
mkdir -p "$long"
head -c 64000 /dev/urandom >"$long/small"
lfs project init long --from "$WORK/long" >/dev/null
message=$(limited 48 "$LAYERFS" --project long branch export main "$WORK/fsize/long" 2>&1 >/dev/null) && fail "an export past ulimit -f succeeded"
case "$message" in
"Failed: cannot write d"*"..."*"/small: File too large"*) ok ;;
*) fail "the message of a long path's write refused: '${message:0:300}...'" ;;
esac
[ "${#message}" -lt 1000 ] || fail "the message of a long path's write is ${#message} bytes"
ok
assert_eq "$(beside "$WORK/fsize")" "out " "what a refused export of a long path left"

# Enough files for several batches (64 each): the export stops between two.
mkdir "$WORK/many"
for i in $(seq 300); do echo "$i" >"$WORK/many/f$i"; done
lfs project init many --from "$WORK/many" >/dev/null
FIFO=$WORK/fifo
# held_export DIR [WRAPPER...]: an export of many into DIR (through WRAPPER) in the
# background, held at its second batch; sets held (its pid) and step_pid (the pid it
# prints, in its own pid namespace).
held_export() {
        fault_fifo "$FIFO"
        LAYERFS_FAULT="export-batch#2@$FIFO" "${@:2}" "$LAYERFS" --project many branch export main "$1" \
                >/dev/null 2>"$WORK/held.err" &
        held=$!
        local line
        line=$(fault_reached "$held" "$FIFO") || fail "the export ended before its second batch: $(cat "$WORK/held.err")"
        step_pid=${line##* }
}

# release_unless_ended PID FIFO: lets the process at the step go on; exits 1 if PID ends
# first, never having taken the go-ahead (ended by the signal where it waited).
release_unless_ended() {
        python3 -c '
import os, select, sys, threading
pid, fifo = int(sys.argv[1]), sys.argv[2]
ended = os.pidfd_open(pid)
done_r, done_w = os.pipe()
def go():
    fd = os.open(fifo, os.O_WRONLY)
    os.write(done_w, b"o")
    os.write(fd, b"go\n")
    os.close(fd)
    os.write(done_w, b"w")
threading.Thread(target=go, daemon=True).start()
got = b""
while not got.endswith(b"w"):
    ready = select.select([ended, done_r], [], [], 120)[0]
    if done_r in ready:
        got += os.read(done_r, 2)
    elif ended in ready or not ready:
        break
os._exit(0 if got else 1)' "$@"
}

# SIGTERM, and SIGINT as a terminal's Ctrl-C sends it (a background job of this shell
# ignores SIGINT: the wrapper gives it back its default).
default_int=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])')
for sig in TERM INT; do
        mkdir "$WORK/$sig"
        held_export "$WORK/$sig/out" "${default_int[@]}"
        assert_eq "$step_pid" "$held" "the pid at the step"
        [ -n "$(ls -A "$WORK/$sig")" ] || fail "no temporary directory while the export runs"
        kill -s "$sig" "$held"
        release_unless_ended "$held" "$FIFO" || true
        status=0
        wait "$held" || status=$?
        assert_eq "$status" "$((128 + $(kill -l "$sig")))" "the exit status of an export stopped by SIG$sig"
        assert_eq "$(beside "$WORK/$sig")" "" "what an export stopped by SIG$sig left"
done

# SIGKILL: what it leaves, found by the next export into the same directory, even as pid
# 1 of a new pid namespace (the pid a killed container's export had), beside directories
# of that pattern that are not its to remove.
mkdir "$WORK/kill" "$WORK/victim" "$WORK/kill/.out.layerfs-export-8" "$WORK/kill/.out.layerfs-export-9x" \
        "$WORK/kill/.other.layerfs-export-10"
for d in victim kill/.out.layerfs-export-8 kill/.out.layerfs-export-9x kill/.other.layerfs-export-10; do
        echo keep >"$WORK/$d/keep"
done
chown -R nobody "$WORK/kill/.out.layerfs-export-8"
ln -s "$WORK/victim" "$WORK/kill/.out.layerfs-export-7"
held_export "$WORK/kill/out"
kill -9 "$held"
{ wait "$held"; } 2>/dev/null || true
left=$(cd "$WORK/kill" && ls -d .out.layerfs-export-"$held")
[ -n "$(ls -A "$WORK/kill/$left")" ] || fail "the killed export's directory is empty: killed too early"
mv "$WORK/kill/$left" "$WORK/kill/.out.layerfs-export-1"
unshare --pid --fork "$LAYERFS" --project many branch export main "$WORK/kill/out" >/dev/null ||
        fail "an export as pid 1 after a killed one that was pid 1"
assert_eq "$(beside "$WORK/kill")" ".other.layerfs-export-10 .out.layerfs-export-7 .out.layerfs-export-8 .out.layerfs-export-9x out " \
        "what the export beside a killed one's directory and others left"
for d in victim kill/.out.layerfs-export-8 kill/.out.layerfs-export-9x kill/.other.layerfs-export-10; do
        assert_eq "$(cat "$WORK/$d/keep")" keep "$d/keep after the export removed a killed one's directory"
done
diff -r "$WORK/many" "$WORK/kill/out" >/dev/null || fail "the export after a killed one differs"
ok

# A running export's directory stays, whatever its pid: pid 1 of one namespace while an
# export into the same directory runs as pid 1 of another, or with any other pid.
mkdir "$WORK/live"
# --kill-child: a test that fails meanwhile ends it with its job (unshare).
held_export "$WORK/live/out" unshare --pid --fork --kill-child
assert_eq "$step_pid" 1 "the held export's pid in its namespace"
# Held at its second batch, the first may still be writing (the ring writes one batch
# while the next is read): files may come after this listing, none may go. A count taken
# here was exceeded under the sanitizers (51, then 65).
files=$(find "$WORK/live/.out.layerfs-export-1" | sort)
expect_refusal Busy "is a running export's" unshare --pid --fork "$LAYERFS" --project many branch export main "$WORK/live/out"
lfs --project many branch export main "$WORK/live/out" >/dev/null
assert_eq "$(comm -23 <(echo "$files") <(find "$WORK/live/.out.layerfs-export-1" | sort))" "" \
        "the running export's files gone after two exports beside it"
# Let go, it finds out taken (no longer empty), fails and removes its own.
fault_release "$FIFO"
status=0
wait "$held" || status=$?
assert_eq "$status" 125 "the exit status of the held export, its target taken meanwhile"
grep -q "cannot move the export into place" "$WORK/held.err" || fail "the held export said: $(cat "$WORK/held.err")"
assert_eq "$(beside "$WORK/live")" "out " "what the exports into one directory left"
finish
