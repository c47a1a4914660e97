#!/bin/sh
# /node-cache of the test node-cache image (images.sh build_node-cache): what
# upstream's k8s-dns-node-cache (k8s.io/dns cmd/node-cache) does around
# CoreDNS, for the flags kubexm's nodelocaldns DaemonSet passes, so that the
# same manifest runs this image and upstream's:
#   - a dummy interface (-interfacename, default nodelocaldns) holding every
#     address of -localip (comma-separated), unless -setupinterface=false;
#   - for each of them NOTRACK rules in the raw table and ACCEPT rules in the
#     filter table for DNS (port 53, UDP and TCP) and the health port, so
#     that queries to the local address bypass conntrack and kube-proxy,
#     unless -setupiptables=false;
#   - CoreDNS run with -conf; the interface and rules checked and put back
#     every -syncinterval (a flush by another program), removed when the
#     pod stops (SIGTERM), unless -skipteardown.
# It runs in the host's network namespace (hostNetwork, NET_ADMIN).
# Unknown flags are ignored, as upstream's -upstreamsvc is: kubexm renders
# the Corefile with the upstream address in it.
set -u

localip=""
conf=/etc/Corefile
ifname=nodelocaldns
setup_interface=true
setup_iptables=true
skip_teardown=false
sync=60
health_port=8080

# Go's flag syntax: -name value, -name=value, --name; booleans take =value.
while [ $# -gt 0 ]; do
	arg=${1#-}
	arg=${arg#-}
	name=${arg%%=*}
	value=""
	has_value=false
	case $arg in *=*)
		value=${arg#*=}
		has_value=true
		;;
	esac
	case $name in
	setupinterface | setupiptables | skipteardown)
		$has_value || value=true
		;;
	*)
		if ! $has_value; then
			if [ $# -lt 2 ]; then
				echo "node-cache: flag -$name needs a value" >&2
				exit 2
			fi
			value=$2
			shift
		fi
		;;
	esac
	case $name in
	localip) localip=$value ;;
	conf) conf=$value ;;
	interfacename) ifname=$value ;;
	setupinterface) setup_interface=$value ;;
	setupiptables) setup_iptables=$value ;;
	skipteardown) skip_teardown=$value ;;
	syncinterval) sync=${value%s} ;;
	health-port) health_port=$value ;;
	*) echo "node-cache: ignoring -$name (not implemented by this test image)" >&2 ;;
	esac
	shift
done

if [ -z "$localip" ]; then
	echo "node-cache: -localip is required" >&2
	exit 2
fi
if [ ! -r "$conf" ]; then
	echo "node-cache: no Corefile at $conf" >&2
	exit 2
fi
ips=$(echo "$localip" | tr ',' ' ')

# The rules of one address, as "table chain rule...", one per line.
rules() {
	for ip in $ips; do
		for p in udp tcp; do
			echo "raw PREROUTING -p $p -d $ip --dport 53 -j NOTRACK"
			echo "raw OUTPUT -p $p -s $ip --sport 53 -j NOTRACK"
			echo "raw OUTPUT -p $p -d $ip --dport 53 -j NOTRACK"
			echo "filter INPUT -p $p -d $ip --dport 53 -j ACCEPT"
			echo "filter OUTPUT -p $p -s $ip --sport 53 -j ACCEPT"
		done
		echo "raw OUTPUT -p tcp -d $ip --dport $health_port -j NOTRACK"
		echo "raw OUTPUT -p tcp -s $ip --sport $health_port -j NOTRACK"
	done
}

comment="NodeLocal DNS Cache: skip conntrack"

setup() {
	if [ "$setup_interface" = true ]; then
		if ! ip link show "$ifname" >/dev/null 2>&1; then
			# Upstream adds a dummy interface. A kernel without CONFIG_DUMMY
			# (the test machines') gets a bridge without ports instead,
			# which holds local addresses the same way.
			if ip link add "$ifname" type dummy 2>/dev/null; then
				echo "node-cache: added interface $ifname (dummy)"
			elif ip link add "$ifname" type bridge && ip link set "$ifname" up; then
				echo "node-cache: added interface $ifname (bridge: the kernel has no dummy interfaces)"
			fi
		fi
		for ip in $ips; do
			if ! ip addr show dev "$ifname" | grep -q " $ip/"; then
				ip addr add "$ip/32" dev "$ifname" && echo "node-cache: added $ip to $ifname"
			fi
		done
	fi
	if [ "$setup_iptables" = true ]; then
		rules | while read -r table chain rule; do
			# shellcheck disable=SC2086 # a rule is words
			if ! iptables -w -t "$table" -C "$chain" $rule -m comment --comment "$comment" 2>/dev/null; then
				iptables -w -t "$table" -I "$chain" 1 $rule -m comment --comment "$comment" &&
					echo "node-cache: added $table $chain $rule"
			fi
		done
	fi
}

teardown() {
	if [ "$skip_teardown" = true ]; then
		return
	fi
	if [ "$setup_iptables" = true ]; then
		rules | while read -r table chain rule; do
			# shellcheck disable=SC2086
			while iptables -w -t "$table" -D "$chain" $rule -m comment --comment "$comment" 2>/dev/null; do :; done
		done
	fi
	if [ "$setup_interface" = true ] && ip link show "$ifname" >/dev/null 2>&1; then
		ip link delete "$ifname" && echo "node-cache: removed interface $ifname"
	fi
}

setup
/coredns -conf "$conf" &
coredns=$!
# shellcheck disable=SC2317 # run by the trap
stop() {
	kill -TERM "$coredns" 2>/dev/null
	wait "$coredns"
	teardown
	exit 0
}
trap stop TERM INT

while kill -0 "$coredns" 2>/dev/null; do
	sleep "$sync" &
	wait $!
	kill -0 "$coredns" 2>/dev/null && setup
done
wait "$coredns"
rc=$?
echo "node-cache: coredns exited $rc" >&2
teardown
exit "$rc"
