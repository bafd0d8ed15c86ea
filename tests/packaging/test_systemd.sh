#!/usr/bin/env bash
# The systemd units, checked where systemd is not PID 1 (as on these machines) with
# `systemd-analyze verify` in a root holding systemd's own units and a make install:
# layerfs-reclaim.service, and the drop-in layerfs-delegate.conf applied to a service
# that runs LayerFS. Any message fails (verify exits 0 on an unknown key, it only warns),
# and a unit with a typo shows that the check sees them.
source "$(dirname "$0")/../e2e/lib.sh"

command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing ('make deps' installs systemd)"
R=$WORK/root
make -s -C "$ROOT" BUILD="$BUILD" install DESTDIR="$R" >"$WORK/install.log" 2>&1 ||
        fail "make install: $(tail -5 "$WORK/install.log")"
# The targets and units the ones under test refer to (multi-user.target, sysinit.target...).
mkdir -p "$R/usr/lib/systemd" "$R/etc/systemd/system"
cp -a /usr/lib/systemd/system "$R/usr/lib/systemd/"

# verify UNIT: systemd-analyze's verdict on UNIT in the root; prints what it said.
verify() {
        systemd-analyze verify --man=no --root="$R" "$1" 2>&1 || echo "(exit $?)"
}
said=$(verify layerfs-reclaim.service)
[ -z "$said" ] || fail "layerfs-reclaim.service: $said"
ok

# A service that runs LayerFS, with the drop-in as the docs say to install it.
printf '[Unit]\nDescription=A CI runner\n\n[Service]\nExecStart=/usr/local/bin/layerfs runtime status\n\n[Install]\nWantedBy=multi-user.target\n' \
        >"$R/etc/systemd/system/ci-runner.service"
mkdir "$R/etc/systemd/system/ci-runner.service.d"
cp "$R/usr/local/share/layerfs/systemd/layerfs-delegate.conf" "$R/etc/systemd/system/ci-runner.service.d/layerfs.conf"
said=$(verify ci-runner.service)
[ -z "$said" ] || fail "ci-runner.service with layerfs-delegate.conf: $said"
grep -qx 'Delegate=yes' "$R/etc/systemd/system/ci-runner.service.d/layerfs.conf" || fail "the drop-in lacks Delegate=yes"
grep -qx 'Environment=LAYERFS_CGROUP_ROOT=/sys/fs/cgroup/system.slice/%n/layerfs' \
        "$R/etc/systemd/system/ci-runner.service.d/layerfs.conf" || fail "the drop-in does not set LAYERFS_CGROUP_ROOT"
ok

# The check can fail: a misspelt key, a program that is not there.
sed -i 's/^Type=oneshot$/Typ=oneshot/' "$R/usr/local/lib/systemd/system/layerfs-reclaim.service"
said=$(verify layerfs-reclaim.service)
[[ $said == *"Unknown key 'Typ'"* ]] || fail "verify did not see a misspelt key: $said"
rm "$R/usr/local/bin/layerfs"
said=$(verify ci-runner.service)
[[ $said == *"/usr/local/bin/layerfs"* ]] || fail "verify did not see a missing program: $said"
ok
finish
