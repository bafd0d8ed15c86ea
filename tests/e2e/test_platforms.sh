#!/usr/bin/env bash
# Platforms (SPEC 5): the eight names, the refusals before anything is made, records that
# name their platform (and old ones that do not), calls that follow the record and not
# the caller's default, and runtime status's honest readiness.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
unset LAYERFS_SANDBOX LAYERFS_PLACEMENT

nothing_made() {
        assert_eq "$(records)" 0 "$1: no record"
        [ -z "$(ls -A "$LAYERFS_HOME/sandboxes" 2>/dev/null)" ] || fail "$1: a sandbox directory was made"
        [ -z "$(find "$LAYERFS_CGROUP_ROOT" -mindepth 1 -type d 2>/dev/null)" ] || fail "$1: a cgroup was made"
        local daemons
        daemons=$(pids_matching "layerfs-daemon --home $LAYERFS_HOME")
        [ -z "$daemons" ] || fail "$1: a daemon was started: $daemons"
}
# refused CODE TEXT ARGS...: exits 125 with CODE, its message contains TEXT, nothing made.
refused() {
        expect_refusal "$@"
        nothing_made "${*:3}"
}

lfs project init p >/dev/null
EIGHT="linux, docker, podman, firecracker, qemu, lima, mac, wsl"

# ---- refusals before anything is made ----------------------------------------------------
for bad in windows native namespaces "" Linux dockr LINUX; do
        refused InvalidInput "$EIGHT" lfs sandbox create --platform "$bad"
done
for route in qemu firecracker lima mac wsl; do
        refused Unsupported "home $LAYERFS_HOME (placement host)" lfs sandbox create --platform "$route"
        refused Unsupported "allows linux, docker, podman" lfs sandbox create --platform "$route"
done
refused Unsupported "missing socket:docker" lfs sandbox create --platform docker
refused Unsupported "backend:podman" lfs sandbox create --platform podman
LAYERFS_SANDBOX=docker refused Unsupported "platform 'docker' is not ready" lfs sandbox create
LAYERFS_SANDBOX=bogus refused InvalidInput "LAYERFS_SANDBOX='bogus'" lfs sandbox create
LAYERFS_PLACEMENT=bogus refused InvalidInput "LAYERFS_PLACEMENT='bogus'" lfs sandbox create
LAYERFS_PLACEMENT=bogus expect_error InvalidInput lfs runtime status
LAYERFS_PLACEMENT=qemu refused Unsupported "(placement qemu): one kernel opens a Store, so it allows docker, podman, qemu" \
        lfs sandbox create
LAYERFS_PLACEMENT=qemu refused Unsupported "missing tool:qemu-system-x86_64" lfs sandbox create --platform qemu
LAYERFS_CGROUP_ROOT="$WORK/not-cgroup/x" refused Unsupported "kernel:cgroup2" lfs sandbox create

# ---- the default runtime: namespaces where this host can make them, else native -------
# runtime status lists linux's two runtimes; the default is namespaces when its row is
# ready, else native with the reason; a home that names its runtime gets it as named.
status=$(env -u LAYERFS_RUNTIME "$LAYERFS" --json runtime status)
assert_eq "$(echo "$status" | json_get '" ".join(r["id"] for r in j["runtimes"])')" "native namespaces" "runtime status's runtimes"
ns_ready=$(echo "$status" | json_get '[r["ready"] for r in j["runtimes"] if r["id"] == "namespaces"][0]')
if [ "$ns_ready" = True ]; then
        DEFAULT_RUNTIME=namespaces
        assert_eq "$(echo "$status" | json_get 'j["default_why"]')" None "no reason when the default is namespaces"
else
        DEFAULT_RUNTIME=native
        case "$(echo "$status" | json_get 'j["default_why"]')" in
        "namespaces is not ready here: "*) ok ;;
        *) fail "runtime status gives no reason for native as the default: $status" ;;
        esac
fi
assert_eq "$(echo "$status" | json_get 'j["default"]')" "$DEFAULT_RUNTIME" "runtime status's default"
assert_eq "$(env -u LAYERFS_RUNTIME LAYERFS_SANDBOX=native "$LAYERFS" --json runtime status | json_get 'j["default"], j["default_why"]')" "('native', None)" "the default a home names"
assert_eq "$(LAYERFS_RUNTIME=native "$LAYERFS" runtime status | sed -n 's/^default *//p')" native "the default LAYERFS_RUNTIME names"
if [ -z "${LAYERFS_RUNTIME:-}" ]; then
        SB=$(lfs sandbox create)
        assert_eq "$(records "SELECT runtime FROM sandboxes WHERE number=$SB")" "$DEFAULT_RUNTIME" "a create with no runtime named"
        lfs sandbox close "$SB" >/dev/null
fi

# ---- a linux Sandbox made with the default, driven by a client whose default is docker --
out=$(lfs --json sandbox create --image ignored:latest)
assert_eq "$(echo "$out" | json_get '(j["platform"], j["image"])')" "('linux', None)" "create's result"
SB=$(echo "$out" | json_get 'j["sandbox"]')
assert_eq "$(records "SELECT platform || '/' || runtime FROM sandboxes WHERE number=$SB")" "linux/${LAYERFS_RUNTIME:-$DEFAULT_RUNTIME}" "the record (its runtime: LAYERFS_RUNTIME's, else the default runtime status names)"
export LAYERFS_SANDBOX=docker
assert_eq "$(lfs --json workspace mount "$SB" main | json_get 'j["platform"]')" linux "mount's platform"
lfs workspace exec "$SB" main -- sh -c 'echo from-docker-client > f'
assert_eq "$(lfs --json sandbox list_workspaces "$SB" | json_get 'j[0]["platform"]')" linux "list_workspaces' platform"
assert_eq "$(lfs --json project list_sandboxes | json_get '[s["platform"] for s in j]')" "['linux']" "list_sandboxes"
lfs workspace commit "$SB" main -m "from a docker-default client" >/dev/null
lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null
unset LAYERFS_SANDBOX
nothing_made "the docker-default client's close"
assert_eq "$(lfs branch log main --limit 1 | grep -c 'from a docker-default client')" 1 "its commit"

# ---- a record from before platforms were recorded ---------------------------------------
# (native: records of those days had no id range, which a namespaces record must have)
SB=$(LAYERFS_RUNTIME=native lfs sandbox create)
sqlite3 -cmd ".timeout 10000" "$LAYERFS_HOME/home.db" "
        BEGIN;
        CREATE TABLE old AS SELECT project, number, runtime, image, pid, start_time, boot_id, dir, state, cgroup, socket
                FROM sandboxes;
        DROP TABLE sandboxes;
        CREATE TABLE sandboxes(project TEXT NOT NULL, number INTEGER NOT NULL, runtime TEXT NOT NULL, image TEXT,
                pid INTEGER, start_time INTEGER, boot_id TEXT, dir TEXT NOT NULL, state TEXT NOT NULL, cgroup TEXT,
                socket TEXT, PRIMARY KEY(project, number)) WITHOUT ROWID;
        INSERT INTO sandboxes SELECT * FROM old;
        DROP TABLE old;
        COMMIT;"
assert_eq "$(lfs --json project list_sandboxes | json_get '[s["platform"] for s in j]')" "['linux']" \
        "an old record reads as its runtime's platform"
lfs workspace mount "$SB" main >/dev/null
assert_eq "$(lfs workspace exec "$SB" main -- cat f)" "from-docker-client" "an old record's Sandbox works"
lfs workspace unmount "$SB" main >/dev/null
lfs sandbox close "$SB" >/dev/null
nothing_made "the old record's close"

# ---- runtime status: eight platforms, honest readiness ----------------------------------
lfs --json runtime status >"$WORK/status.json"
assert_eq "$(json_get '[p["id"] for p in j["platforms"]]' <"$WORK/status.json")" \
        "['linux', 'docker', 'podman', 'firecracker', 'qemu', 'lima', 'mac', 'wsl']" "the eight"
assert_eq "$(json_get '[(p["id"], p["allowed"]) for p in j["platforms"] if p["allowed"]]' <"$WORK/status.json")" \
        "[('linux', True), ('docker', True), ('podman', True)]" "host allows linux, docker, podman"
assert_eq "$(json_get '[p for p in j["platforms"] if p["id"] == "linux"][0]["ready"]' <"$WORK/status.json")" True \
        "linux is ready here"
assert_eq "$(json_get 'all(m in j["missing"] for p in j["platforms"] if p["allowed"] for m in p["missing"])' <"$WORK/status.json")" \
        True "an allowed platform's missing names are in the top-level missing"
# Each missing entry against a probe the test reproduces.
docker_sock=$( [ -S /var/run/docker.sock ] && echo yes || echo no)
assert_eq "$(json_get '"socket:docker" in [p for p in j["platforms"] if p["id"] == "docker"][0]["missing"]' <"$WORK/status.json")" \
        "$([ "$docker_sock" = no ] && echo True || echo False)" "socket:docker follows /var/run/docker.sock"
qemu=$(command -v qemu-system-x86_64 >/dev/null && echo False || echo True)
assert_eq "$(json_get '"tool:qemu-system-x86_64" in [p for p in j["platforms"] if p["id"] == "qemu"][0]["missing"]' <"$WORK/status.json")" \
        "$qemu" "tool:qemu-system-x86_64 follows PATH"
mkdir -p "$WORK/not-cgroup"
LAYERFS_CGROUP_ROOT="$WORK/not-cgroup/layerfs" lfs --json runtime status >"$WORK/status2.json"
assert_eq "$(json_get '[(p["ready"], "kernel:cgroup2" in p["missing"]) for p in j["platforms"] if p["id"] == "linux"][0]' <"$WORK/status2.json")" \
        "(False, True)" "with LAYERFS_CGROUP_ROOT outside cgroup2, linux is not ready and says why"
echo "ok: $(basename "$0") ($CHECKS checks)"
