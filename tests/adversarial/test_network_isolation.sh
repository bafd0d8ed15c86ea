#!/usr/bin/env bash
# test-runner: alone (it compares the host's whole list of links, and sets the host's ip_forward)
# Attack: a command of a namespaces Sandbox goes after the host's and other Sandboxes'
# network (issue 15). Under native every command is in the host's network: it reaches
# every listener of the host's 127.0.0.1 and every other Sandbox's. Here, with the host's
# ip_forward ON (as on a host that runs containers), a command of a none or a private
# Sandbox tries to reach a listener the host keeps on 127.0.0.1 (through its own
# 127.0.0.1, the host's end of its veth pair and every address of the host's), a
# listener of another private Sandbox (through the host, which would route it), and to
# make, move, and change links: of its own net namespace, of the host's (from a host
# network Sandbox), and from a user and net namespace of its own into the Sandbox's.
# Each attack must fail, judged by its effect (what the listener answered, what links
# the host and the Sandbox have), not by an exit status.
# Fixed by: a net namespace per Sandbox (none, private); commands as 501 without
# capabilities in it; the host's end of a private pair forwards nothing whatever
# ip_forward says (without that, the private Sandbox reached the other one here).
source "$(dirname "$0")/../e2e/lib.sh"

use_private_sandboxes
export LAYERFS_RUNTIME=namespaces
unset LAYERFS_NET_RANGE
FORWARD_WAS=$(cat /proc/sys/net/ipv4/ip_forward)
TEARDOWN_EXTRA='echo "$FORWARD_WAS" >/proc/sys/net/ipv4/ip_forward; kill "${HOST_SERVER:-}" 2>/dev/null; ip link del lfsatk0 2>/dev/null'
echo 1 >/proc/sys/net/ipv4/ip_forward

mkdir -p "$WORK/src"
cp "$ROOT/tests/e2e/netprobe.py" "$WORK/src/"
lfs project init p --from "$WORK/src" >/dev/null
address_of() {
        lfs --json project list_sandboxes | json_get "[s['network']['$2'] for s in j if s['sandbox'] == $1][0]"
}
links() { ip -o link | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }

LINKS_BEFORE=$(links)
NONE=$(main_sandbox)
VICTIM=$(main_sandbox --network private)
ATTACKER=$(main_sandbox --network private)
HOSTNET=$(main_sandbox --network host)
V_OWN=$(address_of "$VICTIM" sandbox_address)
V_LINK=$(address_of "$VICTIM" host_link)
A_HOST=$(address_of "$ATTACKER" host_address)

# The host's own listener, on 127.0.0.1 only.
exec {host_fd}< <(exec python3 "$WORK/src/netprobe.py" serve 127.0.0.1 0 "host-secret")
HOST_SERVER=$!
read -r -t 60 -u "$host_fd" HOST_PORT || fail "the host's listener did not start"
# The victim's, on every address of its own.
exec {victim_fd}< <(in_main "$VICTIM" /usr/bin/python3 netprobe.py serve 0.0.0.0 0 "victim-secret" || true)
read -r -t 60 -u "$victim_fd" V_PORT || fail "the victim's listener did not start"
assert_eq "$(python3 "$WORK/src/netprobe.py" probe "$V_OWN" "$V_PORT")" "victim-secret" \
        "the victim's listener answers the host (the attacks below are not failing for want of it)"

SUCCEEDED=""
# attack WHAT MARKER N TARGET PORT: Sandbox N's command connects to TARGET:PORT.
attack() {
        local what=$1 marker=$2 n=$3 out
        out=$(in_main "$n" /usr/bin/python3 netprobe.py probe "$4" "$5" 5 2>&1 || true)
        case "$out" in
        *"$marker"*)
                echo "attack succeeded: a command of sandbox $n could $what ($out)" >&2
                SUCCEEDED="$SUCCEEDED; $what"
                ;;
        *) ok ;;
        esac
}
attack "reach the host's 127.0.0.1 listener from a none Sandbox" host-secret "$NONE" 127.0.0.1 "$HOST_PORT"
attack "reach the host's 127.0.0.1 listener from a private Sandbox" host-secret "$ATTACKER" 127.0.0.1 "$HOST_PORT"
attack "reach the host's 127.0.0.1 listener through the host's end" host-secret "$ATTACKER" "$A_HOST" "$HOST_PORT"
for address in $(ip -o -4 addr | awk '{print $4}' | cut -d/ -f1); do
        attack "reach the host's 127.0.0.1 listener at $address" host-secret "$ATTACKER" "$address" "$HOST_PORT"
done
attack "reach another private Sandbox's listener (the host routes)" victim-secret "$ATTACKER" "$V_OWN" "$V_PORT"
attack "reach another private Sandbox's listener from a none Sandbox" victim-secret "$NONE" "$V_OWN" "$V_PORT"
attack "reach another Sandbox's listener on its own 127.0.0.1" victim-secret "$ATTACKER" 127.0.0.1 "$V_PORT"

# Links: nothing of the host's changes, nor of the Sandboxes'.
host_links=$(links)
none_links=$(in_main "$NONE" ip -o link | awk -F': ' '{print $2}')
attacker_addr=$(in_main "$ATTACKER" ip -o -4 addr show dev eth0 | awk '{print $4}')
try() { in_main "$@" >/dev/null 2>&1 || true; }
try "$NONE" ip link add lfsatk0 type dummy
try "$NONE" unshare -Urn sh -c 'ip link add lfsatk0 type dummy && ip link set lfsatk0 netns 1'
try "$NONE" unshare -Urn sh -c 'ip link add lfsatk0 type veth peer name lfsatk1 netns 1'
try "$ATTACKER" ip link set eth0 down
try "$ATTACKER" ip addr add "$V_OWN/30" dev eth0
try "$ATTACKER" ip route add 127.0.0.0/8 via "$A_HOST" dev eth0 table 100
try "$HOSTNET" ip link add lfsatk0 type dummy
try "$HOSTNET" ip link set "$V_LINK" down
try "$HOSTNET" ip addr add 192.0.2.254/32 dev "$V_LINK"
if [ "$(links)" != "$host_links" ]; then
        echo "attack succeeded: the host's links changed: $(links | tr '\n' ' ')" >&2
        SUCCEEDED="$SUCCEEDED; make a link on the host"
fi
ip -o link show "$V_LINK" | grep -q "[<,]UP[,>]" || SUCCEEDED="$SUCCEEDED; set the victim's host end down"
[ -z "$(ip -o -4 addr show dev "$V_LINK" | grep 192.0.2.254)" ] || SUCCEEDED="$SUCCEEDED; add an address on the host"
[ "$(in_main "$NONE" ip -o link | awk -F': ' '{print $2}')" = "$none_links" ] ||
        SUCCEEDED="$SUCCEEDED; make or move a link into its Sandbox"
[ "$(in_main "$ATTACKER" ip -o -4 addr show dev eth0 | awk '{print $4}')" = "$attacker_addr" ] ||
        SUCCEEDED="$SUCCEEDED; change its own address"
in_main "$ATTACKER" ip -o link show eth0 | grep -q "[<,]UP[,>]" || SUCCEEDED="$SUCCEEDED; set its eth0 down"
ok
[ -z "$SUCCEEDED" ] || fail "attacks that succeeded:${SUCCEEDED#;}"

# A forged record of a dead private Sandbox whose instance starts as the victim's: its
# reclaim would remove the link of that name, the victim's. It is refused, and the
# victim keeps its network.
v_instance=$(records "SELECT instance FROM sandboxes WHERE number=$VICTIM")
records "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, boot_id, dir, state, instance,
        id_base, network, net_base)
        VALUES('p', 90, 'linux', 'namespaces', NULL, NULL, NULL, '$LAYERFS_HOME/sandboxes/p-90', 'removing',
               '${v_instance:0:12}00000000000000000000', 3221225472, 'private', $(((169 << 24) + (254 << 16) + (127 << 8))))"
out=$(lfs runtime reclaim 2>&1 || true)
ip -o link show "$V_LINK" >/dev/null 2>&1 || fail "a forged record's reclaim removed the victim's link $V_LINK ($out)"
assert_eq "$(python3 "$WORK/src/netprobe.py" probe "$V_OWN" "$V_PORT")" "victim-secret" "the victim keeps its network"
case "$out" in *"sandbox 90"*"$V_LINK"*) ok ;; *) fail "reclaim of the forged record said: $out" ;; esac
records "DELETE FROM sandboxes WHERE number=90"

kill "$HOST_SERVER"
for n in "$NONE" "$VICTIM" "$ATTACKER" "$HOSTNET"; do lfs sandbox close "$n" --force >/dev/null; done
assert_nothing_left "after the attacks"
assert_eq "$(links)" "$LINKS_BEFORE" "no link left"
finish
