#!/usr/bin/env bash
# The namespaces runtime's seccomp filter (issue 15; cgroup/seccomp.c, docs/security.md):
# every command of a namespaces Sandbox, and its init, run under it. The attack: a command
# makes the calls that reach past the Sandbox's view or into the kernel's shared state
# (new mounts, the keyring, bpf, perf, modules, kexec, the clock, nested user namespaces,
# ...). Each fails with EPERM inside a namespaces Sandbox; the same calls from a native
# Sandbox's command get the kernel's own answer (EFAULT, EINVAL, EBADF... for the
# arguments seccomp_probe.c gives), so the EPERM is the filter's. The calls whose
# capability check comes first are EPERM under native too: for them the filter is shown
# by /proc/self/status ("Seccomp: 2") and by the unit test that runs the filter as root
# (tests/unit/test_seccomp.c).
source "$(dirname "$0")/../e2e/lib.sh"
use_private_sandboxes

cc -O2 -Wall -Wextra -Werror -o "$WORK/seccomp_probe" "$(dirname "$0")/seccomp_probe.c"
mkdir -p "$WORK/src"
echo hi >"$WORK/src/hello.txt"
lfs project init p --from "$WORK/src" >/dev/null

# probe RUNTIME: the probe's lines from a command of a new Sandbox of that runtime, then
# its Seccomp line.
probe() {
        local sb
        sb=$(LAYERFS_RUNTIME=$1 lfs sandbox create)
        lfs workspace mount "$sb" main >/dev/null
        install -m 0755 "$WORK/seccomp_probe" "$LAYERFS_HOME/sandboxes/p-$sb/tmp/seccomp_probe"
        lfs workspace exec "$sb" main -- sh -c '$TMPDIR/seccomp_probe; grep "^Seccomp:" /proc/self/status' \
                >"$WORK/$1.out" || fail "$1: the probe did not run: $(cat "$WORK/$1.out")"
        lfs workspace unmount "$sb" main >/dev/null
        lfs sandbox close "$sb" >/dev/null
}
probe namespaces
probe native
echo "namespaces | native:"
paste -d'|' "$WORK/namespaces.out" "$WORK/native.out"

# result RUNTIME CALL: what the call got.
result() { awk -v c="$2" '$1 == c { print $2 }' "$WORK/$1.out"; }

denied=$(awk '/^[a-z_0-9]+ / && $1 != "personality" && $1 != "fork" && $1 !~ /^(unshare|clone)/ { print $1 }' \
        "$WORK/namespaces.out")
[ "$(echo "$denied" | wc -l)" -ge 36 ] || fail "the probe made too few calls: $denied"
for call in $denied; do
        assert_eq "$(result namespaces "$call")" EPERM "namespaces: $call"
        if ! grep -q "^$call .*(EPERM anyway)" "$WORK/native.out"; then
                [ "$(result native "$call")" != EPERM ] ||
                        fail "native: $call is EPERM without the filter: the probe cannot tell the filter's EPERM"
        fi
done
ok
# A personality that weakens the process, and user namespaces of its own: refused inside
# (clone3, whose flags the filter cannot read, is ENOSYS: glibc falls back to clone).
for call in personality "unshare(CLONE_NEWUSER)" "clone(CLONE_NEWUSER)"; do
        assert_eq "$(grep -F "$call " "$WORK/namespaces.out" | head -1 | awk '{print $2}')" EPERM "namespaces: $call"
        assert_eq "$(grep -F "$call " "$WORK/native.out" | head -1 | awk '{print $2}')" ok "native: $call"
done
assert_eq "$(result namespaces clone3)" ENOSYS "namespaces: clone3"
assert_eq "$(result native clone3)" ok "native: clone3"
# What the filter lets through: the personality query, fork.
assert_eq "$(grep '^personality ' "$WORK/namespaces.out" | tail -1)" "personality ok" "namespaces: the personality query"
assert_eq "$(result namespaces fork)" ok "namespaces: fork"
ok
assert_eq "$(grep '^Seccomp:' "$WORK/namespaces.out" | awk '{print $2}')" 2 "namespaces: Seccomp (2: a filter)"
assert_eq "$(grep '^Seccomp:' "$WORK/native.out" | awk '{print $2}')" 0 "native: Seccomp"
ok

# The init is under the filter too (it only reaps once its namespaces are set up).
sb=$(LAYERFS_RUNTIME=namespaces lfs sandbox create)
init=$(cat "$LAYERFS_CGROUP_ROOT"/*-p-"$sb"/init/cgroup.procs)
[ -n "$init" ] || fail "sandbox $sb has no init"
assert_eq "$(awk '/^Seccomp:/ {print $2}' "/proc/$init/status")" 2 "the init's Seccomp"
assert_eq "$(awk '/^NoNewPrivs:/ {print $2}' "/proc/$init/status")" 1 "the init's NoNewPrivs"
lfs sandbox close "$sb" >/dev/null
ok
assert_nothing_left "the Sandboxes"
finish
