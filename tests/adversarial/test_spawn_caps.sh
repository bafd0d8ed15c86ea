#!/usr/bin/env bash
# Attack: a command of a namespaces Sandbox reaches, at its start, what the command
# identity (501:20 inside) may not. The child that starts it joins the Sandbox's user
# namespace with setns, which gives it every capability there, then takes the command
# identity with setresuid from the host's uid 0; the kernel drops capabilities at a change
# of uid only when an old id was root of the process's user namespace, which the host's 0
# is not in a Sandbox's, so the child kept them until its execve, and its chdir and the
# execve passed the permission checks on the Sandbox's files:
#   1. --cwd a directory of mode 000 (the command's own), or of mode 700 of another uid
#      inside (502): the command started in it, where native refuses;
#   2. a program below a directory the command identity cannot search (mode 000): it ran,
#      where native's execve fails (126);
#   3. a program of another uid that the command identity may not execute (mode 700): it
#      ran (CAP_DAC_OVERRIDE executes what has any x bit), where native's fails (126);
#   4. an execute-only program of another uid (mode 711): it ran dumpable, as if the
#      command identity could read it (the kernel asks at execve, with the child's
#      capabilities), so the command read the program's text through /proc/PID/mem,
#      where native's is not dumpable and refuses.
# And the child itself, held there (the step spawn-identity-set): its capability sets must
# be empty, under native too, whose permitted set was the host's root's.
# Each is tried under native too, the reference: each must fail under both runtimes. On
# the code before the fix every one succeeded under namespaces (and the held child had
# capabilities under both).
# Fixed by: child_run clears every capability set (capset, ambient too) right after its
# setresuid (cgroup/spawn.c).
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes

mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# attack RUNTIME: every attack in a Sandbox of RUNTIME.
attack() {
        local rt=$1 sb ws base out status
        sb=$(LAYERFS_RUNTIME=$rt main_sandbox)
        ws="$LAYERFS_HOME/sandboxes/p-$sb/mnt/main"
        # Inside the Sandbox 501 is the host's 501 (native) or id_base+501 (namespaces).
        base=$(records "SELECT coalesce(id_base, 0) FROM sandboxes WHERE number=$sb")
        x() { lfs workspace exec "$sb" main "$@"; }
        # Made by the command identity itself: its own, then shut to itself.
        x -- sh -c 'mkdir locked && cp /bin/echo locked/prog && chmod 000 locked'
        # Of another uid inside (502), made by the host's root.
        mkdir "$ws/other" "$ws/private"
        install -m 0700 /bin/echo "$ws/other/noexec"
        install -m 0711 /usr/bin/yes "$ws/other/xonly"
        chown "$((base + 502)):$((base + 20))" "$ws/other/noexec" "$ws/other/xonly" "$ws/private"
        chmod 700 "$ws/private"

        # 1. a --cwd the command identity cannot enter.
        for dir in locked private; do
                local want="cannot start 'pwd' in sandbox $sb: cannot enter the working directory of the command, '$ws/$dir': Permission denied; give --cwd a directory inside the Workspace that the command identity (uid 501) can enter"
                status=0
                out=$(x --cwd "$dir" -- pwd 2>&1) || status=$?
                case "$status:$out" in
                "125:Failed: $want"*) ok ;;
                0:*) succeeded "$rt: start in $dir ($(stat -c %a "$ws/$dir"), not its to enter): $out" ;;
                *) fail "$rt: --cwd $dir exited $status: $out" ;;
                esac
        done
        # 2 and 3. a program the command identity cannot reach or may not execute.
        for prog in locked/prog other/noexec; do
                status=0
                out=$(x -- "$prog" ran 2>&1) || status=$?
                case "$status:$out" in
                126:*) ok ;;
                0:ran) succeeded "$rt: run $prog, not its to run" ;;
                *) fail "$rt: $prog exited $status, expected 126: $out" ;;
                esac
        done
        # 4. an execute-only program as the command: it runs, its text stays unread. Its
        # first line says it has been executed; it blocks on the fifo after, alive. Another
        # command of the same identity reads its first page through /proc/PID/mem
        # (/proc/PID/exe would open the file itself, with the reader's permissions).
        local started=$WORK/started-$rt cli
        mkfifo "$started"
        x -- other/xonly "xonly-$rt-$$" >"$started" 2>/dev/null &
        cli=$!
        exec 3<"$started"
        read -r _ <&3 || fail "$rt: other/xonly (mode 711) did not start"
        out=$(x -- python3 -c '
import os, signal, sys
token = sys.argv[1].encode()
pid = next(p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[1:2] == [token])
try:
    with open(f"/proc/{pid}/maps") as maps:
        start = next(int(line.split("-")[0], 16) for line in maps if line.rstrip().endswith("/other/xonly"))
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        page = mem.read(4096)
    # What the target and the file were, and the host fs.suid_dumpable (at 1 the kernel
    # leaves an execute-only program dumpable: docs/security.md), for a failure to say.
    status = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open(f"/proc/{pid}/status") if ":" in l}
    st = os.stat("other/xonly")
    print("read", len(page), "bytes, starting", page[:4], "; the target: Uid", status.get("Uid"),
          "CapEff", status.get("CapEff"), "; the file: mode", oct(st.st_mode), "owner", st.st_uid,
          "; fs.suid_dumpable", open("/proc/sys/fs/suid_dumpable").read().strip())
except OSError as e:
    print("refused:", e.strerror)
finally:
    os.kill(int(pid), signal.SIGTERM)' "xonly-$rt-$$" 2>&1)
        exec 3<&-
        wait "$cli" || true
        case "$out" in
        "refused: Permission denied") ok ;;
        "read "*) succeeded "$rt: read other/xonly (mode 711, not its to read) through /proc/PID/mem: $out" ;;
        *) fail "$rt: the execute-only program: $out" ;;
        esac
        lfs workspace unmount "$sb" main --discard >/dev/null
        lfs sandbox close "$sb" >/dev/null
}

# held RUNTIME: the child itself, held with the command identity short of its execve (the
# step spawn-identity-set), has no capability in any set. On the code before, under
# native its permitted set was the host's root's (the effective cleared by the kernel, the
# saved uid still 0), under namespaces its permitted and effective sets were full.
held() {
        local rt=$1 sb fifo cli child caps
        # The pipe is in the Sandbox's tmp, at the same path in its view; no Sandbox is
        # open, so this one is number 1.
        fifo="$LAYERFS_HOME/sandboxes/p-1/tmp/held"
        sb=$(LAYERFS_RUNTIME=$rt LAYERFS_FAULT="spawn-identity-set#1@$fifo" main_sandbox)
        assert_eq "$sb" 1 "the held Sandbox's number"
        fault_fifo "$fifo"
        lfs workspace exec "$sb" main -- true >/dev/null 2>"$WORK/held.err" &
        cli=$!
        fault_reached "$cli" "$fifo" 60 >/dev/null ||
                fail "$rt: the exec ended before its process took the command identity: $(cat "$WORK/held.err")"
        # Its pid there is its pid namespace's: on the host, the one process of a command's leaf.
        child=$(cat "$(records "SELECT cgroup FROM sandboxes WHERE number=$sb")"/cmd-*/cgroup.procs)
        [[ "$child" =~ ^[0-9]+$ ]] || fail "$rt: the command leaves hold '$child', not the one held start"
        caps=$(awk '/^Cap(Inh|Prm|Eff|Amb):/ {printf "%s%s%s", sep, $1, $2; sep = " "}' "/proc/$child/status")
        fault_release "$fifo"
        wait "$cli" || fail "$rt: the held exec of true failed: $(cat "$WORK/held.err")"
        case "$caps" in
        "CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapAmb:0000000000000000") ok ;;
        *) succeeded "$rt: start as the command identity holding capabilities: $caps" ;;
        esac
        lfs workspace unmount "$sb" main --discard >/dev/null
        lfs sandbox close "$sb" >/dev/null
}

attack native
attack namespaces
held native
held namespaces
no_attack_succeeded
assert_no_sandbox_left "after the attacks"
finish
