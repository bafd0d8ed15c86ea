#!/usr/bin/env bash
# test-runner: alone (it compares the host's whole list of links before and after)
# sandbox create --network none|host|private under the namespaces runtime, against the
# real kernel: by default a Sandbox has lo only, up, and a server on 127.0.0.1 inside is
# reached from inside and from nowhere else (not the host, not another Sandbox); with
# host the Sandbox is in the host's network (the host reaches its server, its /sys is the
# host's without the cgroup trees); with private it has eth0 on a /30 of its own with the
# host's end (a veth pair): the host reaches it and it the host, another private Sandbox
# does not reach it. The choice and the addresses are recorded, listed, shown by create
# --json. Bad values are refused before anything is made, native refuses what it cannot
# give, an exhausted LAYERFS_NET_RANGE is LimitReached, a second home skips the /30s the
# first one's Sandboxes hold, and the one that its create in progress holds. Close, and
# reclaim after a SIGKILLed daemon, leave no link
# and no namespace, also when something outside still holds the Sandbox's net namespace.
source "$(dirname "$0")/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
unset LAYERFS_NET_RANGE

mkdir -p "$WORK/src"
cp "$ROOT/tests/e2e/netprobe.py" "$WORK/src/"
lfs project init p --from "$WORK/src" >/dev/null
PROBE=(python3 "$WORK/src/netprobe.py" probe)
LINKS_BEFORE=$(ip -o link | awk -F': ' '{print $2}' | sort)

# serve N ADDRESS MARKER: a listener in Sandbox N on ADDRESS (a port the kernel picks)
# that answers MARKER; sets PORT once it listens (its first line).
serve() {
        local fd
        exec {fd}< <(in_main "$1" /usr/bin/python3 netprobe.py serve "$2" 0 "$3" || true)
        read -r -t 60 -u "$fd" PORT || fail "the listener in sandbox $1 on $2 did not start"
        [[ $PORT =~ ^[0-9]+$ ]] || fail "the listener in sandbox $1 said '$PORT'"
}
# not_reached WHAT OUTPUT MARKER: the probe did not get MARKER.
not_reached() {
        case "$2" in *"$3"*) fail "$1: reached ($2)" ;; *) ok ;; esac
}
# net_inodes PID: the net namespace of PID.
net_of() { readlink "/proc/$1/ns/net"; }
init_of() { cat "$(records "SELECT cgroup FROM sandboxes WHERE number=$1")/init/cgroup.procs"; }

# ---- none (the default) ----
A=$(main_sandbox)
assert_eq "$(records "SELECT network, quote(net_base) FROM sandboxes WHERE number=$A")" "none|NULL" \
        "the record says none, without addresses"
assert_eq "$(in_main "$A" ip -o link | awk -F': ' '{print $2}')" "lo" "ip link shows lo and nothing else"
assert_eq "$(in_main "$A" sh -c 'ip -o link show lo | grep -c "[<,]UP[,>]"')" 1 "lo is up"
serve "$A" 127.0.0.1 "server-of-$A"
A_PORT=$PORT
assert_eq "$(in_main "$A" /usr/bin/python3 netprobe.py probe 127.0.0.1 "$A_PORT")" "server-of-$A" \
        "the listener answers inside its Sandbox"
out=$("${PROBE[@]}" 127.0.0.1 "$A_PORT" || true)
not_reached "the host connected to sandbox $A's 127.0.0.1:$A_PORT" "$out" "server-of-$A"
B=$(main_sandbox --network none)
out=$(in_main "$B" /usr/bin/python3 netprobe.py probe 127.0.0.1 "$A_PORT" || true)
not_reached "sandbox $B connected to sandbox $A's 127.0.0.1:$A_PORT" "$out" "server-of-$A"
assert_eq "$out" "error: ECONNREFUSED" "sandbox $B's 127.0.0.1 is its own"
[ "$(net_of "$(init_of "$A")")" != "$(net_of "$(init_of "$B")")" ] || fail "two Sandboxes share a net namespace"
ok

# ---- host ----
H=$(main_sandbox --network host)
assert_eq "$(records "SELECT network, quote(net_base) FROM sandboxes WHERE number=$H")" "host|NULL" "the record says host"
assert_eq "$(net_of "$(init_of "$H")")" "$(readlink /proc/self/ns/net)" "its init is in the host's net namespace"
assert_eq "$(in_main "$H" ip -o link | awk -F': ' '{print $2}' | sort)" "$(ip -o link | awk -F': ' '{print $2}' | sort)" \
        "ip link inside shows the host's links"
assert_eq "$(in_main "$H" ls /sys/class/net | sort)" "$(ls /sys/class/net | sort)" "/sys is the host's"
assert_eq "$(in_main "$H" ls -A /sys/fs/cgroup)" "" "but not its cgroup trees"
serve "$H" 127.0.0.1 "server-of-$H"
assert_eq "$("${PROBE[@]}" 127.0.0.1 "$PORT")" "server-of-$H" "the host reaches a host Sandbox's 127.0.0.1 listener"
assert_eq "$(in_main "$H" hostname)" "sandbox-$H" "still a uts namespace of its own"
assert_eq "$(in_main "$H" id -u)" 501 "still its own user namespace"

# ---- private ----
P=$(lfs --json sandbox create --network private)
P_JSON=$P
P=$(echo "$P_JSON" | json_get 'j["sandbox"]')
lfs workspace mount "$P" main >/dev/null
assert_eq "$(echo "$P_JSON" | json_get 'j["network"]["mode"], j["network"]["prefix"]')" "('private', 30)" \
        "create --json shows the network"
P_HOST=$(echo "$P_JSON" | json_get 'j["network"]["host_address"]')
P_OWN=$(echo "$P_JSON" | json_get 'j["network"]["sandbox_address"]')
P_LINK=$(echo "$P_JSON" | json_get 'j["network"]["host_link"]')
assert_eq "$P_HOST $P_OWN" "169.254.64.1 169.254.64.2" "the first /30 of the default LAYERFS_NET_RANGE"
instance=$(records "SELECT instance FROM sandboxes WHERE number=$P")
assert_eq "$P_LINK" "lfs${instance:0:12}" "the host's end is named after the instance"
assert_eq "$(records "SELECT network, net_base FROM sandboxes WHERE number=$P")" "private|$(((169 << 24) + (254 << 16) + (64 << 8)))" \
        "the record keeps the network and its /30"
assert_eq "$(ip -o -4 addr show dev "$P_LINK" | awk '{print $4}')" "$P_HOST/30" "the host's end has the first address"
ip -o link show "$P_LINK" | grep -q "[<,]UP[,>]" || fail "the host's end is not up"
ok
assert_eq "$(cat "/proc/sys/net/ipv4/conf/$P_LINK/forwarding")" 0 "the host's end forwards nothing"
assert_eq "$(cat "/proc/sys/net/ipv6/conf/$P_LINK/disable_ipv6")" 1 "the host's end has no IPv6"
assert_eq "$(in_main "$P" ip -o link | awk -F': ' '{print $2}' | sed 's/@.*//')" "lo
eth0" "ip link inside: lo and eth0"
assert_eq "$(in_main "$P" ip -o -4 addr show dev eth0 | awk '{print $4}')" "$P_OWN/30" "eth0 has the second address"
assert_eq "$(in_main "$P" ip route show default)" "default via $P_HOST dev eth0 " "the default route goes through the host's end"
serve "$P" 0.0.0.0 "server-of-$P"
P_PORT=$PORT
assert_eq "$("${PROBE[@]}" "$P_OWN" "$P_PORT")" "server-of-$P" "the host reaches the private Sandbox's address"
# The host's side: a listener on the host's end's address.
exec {host_fd}< <(exec python3 "$WORK/src/netprobe.py" serve "$P_HOST" 0 "the-host")
HOST_SERVER=$!
read -r -t 60 -u "$host_fd" HOST_PORT || fail "the host's listener did not start"
assert_eq "$(in_main "$P" /usr/bin/python3 netprobe.py probe "$P_HOST" "$HOST_PORT")" "the-host" \
        "the private Sandbox reaches the host's end"
Q=$(main_sandbox --network private)
Q_OWN=$(lfs --json project list_sandboxes | json_get "[s['network']['sandbox_address'] for s in j if s['sandbox'] == $Q][0]")
assert_eq "$Q_OWN" "169.254.64.6" "a second private Sandbox takes the next /30"
out=$(in_main "$Q" /usr/bin/python3 netprobe.py probe "$P_OWN" "$P_PORT" 5 || true)
not_reached "private sandbox $Q connected to private sandbox $P" "$out" "server-of-$P"
out=$(in_main "$A" /usr/bin/python3 netprobe.py probe "$P_OWN" "$P_PORT" 5 || true)
not_reached "sandbox $A (none) connected to private sandbox $P" "$out" "server-of-$P"
case "$(lfs project list_sandboxes)" in
*"network private $P_OWN/30 (host $P_HOST on $P_LINK)"*) ok ;;
*) fail "list_sandboxes does not show the private network: $(lfs project list_sandboxes)" ;;
esac
case "$(lfs project list_sandboxes)" in *"network none"*"network host"*) ok ;; *) fail "list_sandboxes: none and host" ;; esac

# ---- a second home skips the /30s the host's links hold ----
HOME2=$WORK/home2
LAYERFS_HOME=$HOME2 lfs project init p2 --from "$WORK/src" >/dev/null
TEARDOWN_EXTRA='kill "$HOST_SERVER" 2>/dev/null; for n in $(sqlite3 "$HOME2/home.db" "SELECT number FROM sandboxes" 2>/dev/null); do LAYERFS_HOME=$HOME2 "$LAYERFS" sandbox close "$n" --force; done'
R=$(LAYERFS_HOME=$HOME2 lfs --json sandbox create --network private)
assert_eq "$(echo "$R" | json_get 'j["network"]["sandbox_address"]')" "169.254.64.10" \
        "another home's private Sandbox skips the /30s this one's hold"
LAYERFS_HOME=$HOME2 lfs sandbox close "$(echo "$R" | json_get 'j["sandbox"]')" >/dev/null

# ---- refusals, before anything is made ----
links_now=$(ip -o link | wc -l)
count=$(records)
expect_refusal InvalidInput "--network 'bogus' is not a network; give none, host or private" \
        "$LAYERFS" sandbox create --network bogus
expect_refusal InvalidInput "--network 'Private'" "$LAYERFS" sandbox create --network Private
expect_refusal Unsupported "--network none: the native runtime" \
        env LAYERFS_RUNTIME=native "$LAYERFS" sandbox create --network none
expect_refusal Unsupported "--network private: the native runtime" \
        env LAYERFS_RUNTIME=native "$LAYERFS" sandbox create --network private
expect_refusal InvalidInput "LAYERFS_NET_RANGE='10.0.0.1/24'" \
        env LAYERFS_NET_RANGE=10.0.0.1/24 "$LAYERFS" sandbox create --network private
expect_refusal InvalidInput "LAYERFS_NET_RANGE='127.0.0.0/30'" \
        env LAYERFS_NET_RANGE=127.0.0.0/30 "$LAYERFS" sandbox create --network private
expect_refusal LimitReached "no /30 is free for a private network in this home's LAYERFS_NET_RANGE 169.254.64.0/29" \
        env LAYERFS_NET_RANGE=169.254.64.0/29 "$LAYERFS" sandbox create --network private
assert_eq "$(records)" "$count" "no record of the refused creates"
assert_eq "$(ip -o link | wc -l)" "$links_now" "no link of the refused creates"
assert_eq "$(ls "$LAYERFS_HOME/sandboxes" | wc -l)" "$count" "no directory of the refused creates"
assert_eq "$(find "$CGR" -mindepth 1 -maxdepth 1 -type d | wc -l)" "$count" "no cgroup of the refused creates"
N=$(env LAYERFS_RUNTIME=native "$LAYERFS" sandbox create --network host)
assert_eq "$(records "SELECT runtime, network FROM sandboxes WHERE number=$N")" "native|host" "native gives host"
lfs sandbox close "$N" >/dev/null

# ---- teardown: no link, no namespace; even when the namespace is held from outside ----
NS=""
for n in "$A" "$B" "$P" "$Q"; do NS="$NS $(net_of "$(init_of "$n")")"; done
# This shell holds P's net namespace: the pair would live on with it, but the host's end goes.
exec {held}<"/proc/$(init_of "$P")/ns/net"
for n in "$A" "$B" "$H" "$P"; do lfs sandbox close "$n" >/dev/null; done
ip -o link show "$P_LINK" >/dev/null 2>&1 && fail "the host's end $P_LINK outlived the close of sandbox $P"
ok
exec {held}<&-
# SIGKILLed daemon, then reclaim.
Q_LINK=$(lfs --json project list_sandboxes | json_get "[s['network']['host_link'] for s in j if s['sandbox'] == $Q][0]")
ip -o link show "$Q_LINK" >/dev/null || fail "sandbox $Q has no host end"
kill_daemon "$Q"
lfs runtime reclaim >/dev/null
ip -o link show "$Q_LINK" >/dev/null 2>&1 && fail "the host's end $Q_LINK outlived the reclaim of sandbox $Q"
ok
assert_nothing_left "after close and reclaim"
for ino in $NS; do
        left=$(find /proc/[0-9]*/ns -lname "$ino" 2>/dev/null | head -3 || true)
        [ -z "$left" ] || fail "net namespace $ino is still held: $left"
        ok
done

# ---- two homes' creates at one instant take two /30s ----
# The first create stops once its /30 is claimed, before the host's end of its network
# has an address: the other home's records do not hold that /30 and no host address is
# in it yet, so only the create's lock (/run/layerfs/net/<base>) keeps it.
FIFO=$WORK/claimed.fifo
fault_fifo "$FIFO"
LAYERFS_FAULT=create-claimed@$FIFO "$LAYERFS" sandbox create --network private >"$WORK/first" &
first=$!
fault_reached "$first" "$FIFO" >/dev/null || fail "the first create did not stop at create-claimed"
claimed=$(records "SELECT net_base FROM sandboxes WHERE state='starting'")
assert_eq "$claimed" "$(((169 << 24) + (254 << 16) + (64 << 8)))" "the first create claimed the first /30"
R=$(LAYERFS_HOME=$HOME2 lfs --json sandbox create --network private)
assert_eq "$(echo "$R" | json_get 'j["network"]["sandbox_address"]')" "169.254.64.6" \
        "another home's create skips the /30 a create in progress holds"
fault_release "$FIFO"
wait "$first" || fail "the first create failed after its pause"
F=$(cat "$WORK/first")
assert_eq "$(lfs --json project list_sandboxes | json_get "[s['network']['sandbox_address'] for s in j if s['sandbox'] == $F][0]")" \
        "169.254.64.2" "the first create's Sandbox has the /30 it claimed"
lfs sandbox close "$F" >/dev/null
LAYERFS_HOME=$HOME2 lfs sandbox close "$(echo "$R" | json_get 'j["sandbox"]')" >/dev/null
assert_nothing_left "after the creates at one instant"

kill "$HOST_SERVER"
exec {host_fd}<&-
assert_eq "$(ip -o link | awk -F': ' '{print $2}' | sort)" "$LINKS_BEFORE" "the host's links are what they were"
finish
