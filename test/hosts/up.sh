#!/bin/bash
# Start N test machines: systemd-nspawn containers with systemd as PID 1 and sshd, each with its
# own network namespace, IP, hostname, overlay root and cgroup subtree, on a bridge per run.
#
#   N=3 PREFIX=abc test/hosts/up.sh
#
#   N        number of machines, 1-244 (default 3); they are named n1..nN and get the addresses
#            .11 to .254 of the run's /24 (100 were measured: docs/perf.md, "Fan-out at scale")
#   PREFIX   names the run: bridge, veths, netns, cgroups and the state dir
#            $KUBEXM_TEST_CACHE/runs/<PREFIX>; [a-z0-9]{1,8}; default: random
#   LAYERS   extra layers over the base rootfs, e.g. "k8s=conntrack,socat"
#            (built on first use, see build-layer.sh); a bare name uses an existing layer
#   UP_TIMEOUT  seconds to wait for all machines to finish booting (default 120 + 3 per machine:
#            on the shared 2-core box 30 machines took 3 min, 100 about 7)
#   KUBELET  1: the machines will run kubelet; sets the few kernel-global sysctls it insists on,
#            on the host (see lib.sh; down.sh restores them when the last run is gone). Every
#            run raises the host's inotify limits (HOST_SYSCTLS_MIN, restored the same way):
#            each machine's systemd takes instances from root's 128
#   LINK_RATE  e.g. 1gbit or 250mbit: every link of the run is that fast, as on a switched
#            network where each machine, and the control machine, has one NIC of that speed
#            (tc tbf on the bridge for the control machine's uplink, on each machine's
#            host-side veth for its downlink and on its eth0 for its uplink). Default: no limit,
#            where every "network" is memory and only CPU limits a transfer.
#
# Idempotent: machines of the run that are already up are left alone. The run gets the subnet
# 10.77.X.0/24 (X chosen per prefix, never shared by two runs); the host side of its bridge is
# 10.77.X.1. When the machines are ready it writes, in the state dir: id_ed25519 (the client key
# for root and for the sudo user kubexm), ssh_config, cluster.yaml and hosts.env.
# Tear down with down.sh (PREFIX=... test/hosts/down.sh), also after a failed up.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

N=${N:-3}
PREFIX=${PREFIX:-r$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')}
LAYERS=${LAYERS:-}
UP_TIMEOUT=${UP_TIMEOUT:-}
LINK_RATE=${LINK_RATE:-}
check_prefix "$PREFIX"
if [ -n "$LINK_RATE" ] && ! [[ $LINK_RATE =~ ^[1-9][0-9]*(kbit|mbit|gbit)$ ]]; then
  die "LINK_RATE=$LINK_RATE is invalid: use a rate such as 1gbit, 250mbit or 500kbit"
fi
# 244: the machines' addresses are .11 to .254 of the run's /24.
if ! [[ $N =~ ^[0-9]+$ ]] || [ "$N" -lt 1 ] || [ "$N" -gt 244 ]; then die "N=$N is invalid: use 1-244"; fi
UP_TIMEOUT=${UP_TIMEOUT:-$((120 + 3 * N))}
[[ $UP_TIMEOUT =~ ^[0-9]+$ ]] || die "UP_TIMEOUT=$UP_TIMEOUT is not a number of seconds"
STATE=$RUNS/$PREFIX
T0=$(date +%s%N)
elapsed_ms() { echo $((($(date +%s%N) - T0) / 1000000)); }

for tool in systemd-nspawn ssh ssh-keygen ip flock; do
  command -v "$tool" >/dev/null || die "$tool not found; install: apt-get install --no-install-recommends systemd-container openssh-client iproute2 util-linux"
done
if [ -n "$LINK_RATE" ]; then
  command -v tc >/dev/null || die "LINK_RATE needs tc; install: apt-get install --no-install-recommends iproute2"
fi

"$HOSTS_DIR/prepare-rootfs.sh"
layer_names=()
for spec in $LAYERS; do
  name=${spec%%=*}
  if [ "$name" != "$spec" ]; then
    IFS=, read -r -a pkgs <<<"${spec#*=}"
    "$HOSTS_DIR/build-layer.sh" "$name" "${pkgs[@]}" >/dev/null
  fi
  layer_names+=("$name")
done
# Shared: prepare-rootfs.sh must not delete the versions this run mounts until they are mounted.
exec 8>>"$ROOTFS_LOCK"
flock -s 8
ROOTFS=$(readlink -f "$ROOTFS_LINK")
LOWER=$ROOTFS
for name in "${layer_names[@]}"; do
  layer=$(readlink -f "$LAYERDIR/$name.current" || true)
  if [ -z "$layer" ] || [ ! -d "$layer" ]; then
    die "layer '$name' does not exist; give its packages: LAYERS=\"$name=pkg1,pkg2\""
  fi
  [ "$(cat "$layer.base" 2>/dev/null)" = "$ROOTFS" ] ||
    die "layer '$name' was built on an older rootfs; rebuild it: LAYERS=\"$name=pkg1,pkg2\""
  LOWER=$layer:$LOWER
done

mkdir -p "$STATE/nodes"
if [ -f "$STATE/lower" ] && [ "$(cat "$STATE/lower")" != "$LOWER" ]; then
  die "run $PREFIX was started on another rootfs or other layers ($(cat "$STATE/lower")); take it down first: PREFIX=$PREFIX $HOSTS_DIR/down.sh"
fi
echo "$LOWER" >"$STATE/lower"
for d in "$STATE"/nodes/n*; do
  [ -d "$d" ] || continue
  i=${d##*/n}
  [ "$i" -le "$N" ] || die "run $PREFIX already has node n$i, more than N=$N; take it down first: PREFIX=$PREFIX $HOSTS_DIR/down.sh"
done

# Choose the run's subnet (once) and create the host-side network objects. Under the host lock,
# so that two runs starting together never pick the same subnet, and so that down.sh does not
# unmount the shared /run/systemd/nspawn tmpfs while this run is starting.
setup_host() {
  if [ ! -f "$STATE/net" ]; then
    local taken start x k
    taken=$(
      cat "$RUNS"/*/net 2>/dev/null || true
      ip -4 -o addr show | grep -oE '10\.77\.[0-9]+\.' | sed 's/\.$//' || true
    )
    start=$((0x$(printf %s "$PREFIX" | sha256sum | cut -c1-4) % 254 + 1))
    for k in $(seq 0 253); do
      x=$(((start - 1 + k) % 254 + 1))
      if ! grep -qx "10\.77\.$x" <<<"$taken"; then
        echo "10.77.$x" >"$STATE/net"
        break
      fi
    done
    [ -f "$STATE/net" ] || die "no free 10.77.X.0/24 subnet left; take old runs down (ls $RUNS)"
  fi
  local net br
  net=$(cat "$STATE/net")
  br=$(bridge_name "$PREFIX")
  # nspawn's cleanup refuses to rm -rf /run/systemd/nspawn/propagate/<machine> unless it is on
  # tmpfs ("Attempted to remove disk file system ..."); /run is a plain directory here.
  mkdir -p /run/systemd/nspawn
  mountpoint -q /run/systemd/nspawn || mount -t tmpfs -o mode=755 tmpfs /run/systemd/nspawn
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add "$br" type bridge
  fi
  ip addr replace "$net.1/24" dev "$br"
  ip link set "$br" up
  local i ns veth
  for i in $(seq 1 "$N"); do
    ns=$(netns_name "$PREFIX" "$i")
    veth=$(veth_name "$PREFIX" "$i")
    # The addresses read whole before grep: `ip ... | grep -q` under pipefail fails when grep
    # exits at the first line and ip, writing a line at a time, gets SIGPIPE on the next one
    # (a VIP on eth0: a quarter of the checks), and this node's running netns was then torn down.
    if [ -e "/run/netns/$ns" ] &&
      grep -q " $net\.$((10 + i))/24 " <<<"$(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null)"; then
      continue
    fi
    # half made by an earlier, interrupted up
    ip netns del "$ns" 2>/dev/null || true
    ip link del "$veth" 2>/dev/null || true
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$br" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$net.1"
  done
  if [ -n "$LINK_RATE" ]; then
    # Egress only: each direction of a link is shaped where its packets leave. The bridge's
    # own qdisc sees only what the host (the control machine) sends, not bridged traffic.
    # burst: tbf needs at least rate/HZ bytes; 1 MB covers 1gbit at HZ=100.
    local shape=(root tbf rate "$LINK_RATE" burst 1mb latency 50ms)
    tc qdisc replace dev "$br" "${shape[@]}"
    for i in $(seq 1 "$N"); do
      tc qdisc replace dev "$(veth_name "$PREFIX" "$i")" "${shape[@]}"
      ip netns exec "$(netns_name "$PREFIX" "$i")" tc qdisc replace dev eth0 "${shape[@]}"
    done
  fi
}
with_lock "$HOST_LOCK" setup_host
with_lock "$HOST_LOCK" host_sysctls_raise
if [ "${KUBELET:-0}" = 1 ]; then
  with_lock "$HOST_LOCK" kubelet_sysctls_set
  : >"$STATE/kubelet"
fi
NET=$(cat "$STATE/net")

KEY=$STATE/id_ed25519
[ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C "kubexm-test-$PREFIX" -f "$KEY"
KUBEXM_IDS=$(awk -F: '$1=="kubexm"{print $3":"$4}' "$ROOTFS/etc/passwd")
[ -n "$KUBEXM_IDS" ] || die "user kubexm is missing in $ROOTFS; rerun $HOSTS_DIR/prepare-rootfs.sh"

# This shell's cgroup path in the hierarchy mounted at /sys/fs/cgroup/$1.
cg_self() {
  case $1 in
  unified) awk -F: '$1=="0"{print $3}' /proc/self/cgroup ;;
  systemd) awk -F: '$2=="name=systemd"{print $3}' /proc/self/cgroup ;;
  *) awk -F: -v c="$1" '{n=split($2,a,","); for(i=1;i<=n;i++) if(a[i]==c) print $3}' /proc/self/cgroup ;;
  esac
}

# Make the node's cgroup in every hierarchy and record it (before creating it, so that down.sh
# removes it even if this script dies halfway).
cg_make() {
  local D=$1 name=$2 h p dir
  : >"$D/cgroups"
  for h in /sys/fs/cgroup/*; do
    [ -f "$h/cgroup.procs" ] || continue
    p=$(cg_self "$(basename "$h")")
    [ -n "$p" ] || continue
    dir="$h${p%/}/$name"
    echo "$dir" >>"$D/cgroups"
    mkdir -p "$dir"
    if [ -f "$dir/cpuset.cpus" ] && [ -z "$(cat "$dir/cpuset.cpus")" ]; then
      cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
      cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
    fi
  done
}

start_node() {
  local i=$1 name=n$1 ip=$NET.$((10 + $1))
  local D=$STATE/nodes/$name ns machine
  ns=$(netns_name "$PREFIX" "$i")
  machine=$(cgroup_name "$PREFIX" "$i")
  if node_wrapper "$D" >/dev/null; then
    echo "$name $ip already running"
    return 0
  fi
  [ ! -f "$D/wrapper.pid" ] || echo "$name $ip was running and is gone (its wrapper exited): booting it again"
  STARTED+=("$i")
  mkdir -p "$D"/{upper,work,merged,containerd}
  mountpoint -q "$D/merged" ||
    mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$D/upper,workdir=$D/work" "$D/merged"
  local M=$D/merged t
  # Per-node host keys, ed25519 and ecdsa only: RSA generation costs up to 0.8 s per node.
  for t in ed25519 ecdsa; do
    [ -f "$M/etc/ssh/ssh_host_${t}_key" ] ||
      ssh-keygen -q -t "$t" -N '' -C "root@$name" -f "$M/etc/ssh/ssh_host_${t}_key"
  done
  if [ ! -e "$D/upper/etc/hostname" ]; then # first start only: keep the node's own later edits
    echo "$name" >"$M/etc/hostname"
    printf '127.0.0.1 localhost\n%s %s\n' "$ip" "$name" >"$M/etc/hosts"
    install -d -m 700 "$M/root/.ssh"
    install -m 600 "$KEY.pub" "$M/root/.ssh/authorized_keys"
    install -d -m 700 -o "${KUBEXM_IDS%:*}" -g "${KUBEXM_IDS#*:}" "$M/home/kubexm/.ssh"
    install -m 600 -o "${KUBEXM_IDS%:*}" -g "${KUBEXM_IDS#*:}" "$KEY.pub" "$M/home/kubexm/.ssh/authorized_keys"
  fi
  cg_make "$D" "$machine"
  # SYSTEMD_NSPAWN_API_VFS_WRITABLE=network: only /proc/sys/net (per netns) is writable. Never
  #   "=1": that lets a node's `sysctl -w vm.overcommit_memory=1` change the real host kernel.
  # --bind .../containerd: containerd's overlayfs snapshotter cannot use the overlay root as upperdir.
  # --capability CAP_NET_ADMIN: not granted with --network-namespace-path (iptables, net.* sysctls).
  # --system-call-filter @keyring: runc needs keyctl for its session keyring.
  # --bind=/dev/kmsg + CAP_SYSLOG: kubelet reads /dev/kmsg.
  # --register=no --keep-unit: there is no host systemd/machined to talk to.
  # The wrapper joins the node's cgroups first, so each node gets its own cgroup-namespace root
  # (otherwise all nodes would share <our cgroup>/payload and collide), and it restarts nspawn
  # when the node reboots (nspawn exits 133 on `systemctl reboot`).
  # shellcheck disable=SC2016 # the script is expanded by the inner bash
  CGDIRS=$(cat "$D/cgroups") setsid bash -c '
      for d in $CGDIRS; do echo $$ > "$d/cgroup.procs"; done
      while :; do "$@"; rc=$?; [ $rc -eq 133 ] || exit $rc; echo "=== node rebooted ==="; done
      ' _ env SYSTEMD_NSPAWN_API_VFS_WRITABLE=network systemd-nspawn -D "$M" \
    --register=no --keep-unit --machine="$machine" --hostname="$name" \
    --network-namespace-path="/run/netns/$ns" \
    --resolv-conf=copy-host --timezone=off --console=read-only \
    --bind="$D/containerd:/var/lib/containerd" \
    --bind=/dev/kmsg \
    --capability=CAP_NET_ADMIN,CAP_SYS_RESOURCE,CAP_IPC_LOCK,CAP_SYSLOG \
    --kill-signal=SIGRTMIN+3 \
    --system-call-filter="@keyring bpf" \
    /usr/local/sbin/kubexm-test-init \
    >"$D/console.log" 2>&1 </dev/null 8>&- &
  echo $! >"$D/wrapper.pid"
}

STARTED=()
for i in $(seq 1 "$N"); do start_node "$i"; done
flock -u 8
exec 8>&-

SSHOPTS=(-i "$KEY" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
  -o ConnectTimeout=2 -o BatchMode=yes)
for i in $(seq 1 "$N"); do
  printf 'Host n%s %s-n%s\n  HostName %s\n  User root\n  IdentityFile %s\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
    "$i" "$PREFIX" "$i" "$NET.$((10 + i))" "$KEY"
done >"$STATE/ssh_config"

deadline=$((SECONDS + UP_TIMEOUT))
for i in $(seq 1 "$N"); do
  ip=$NET.$((10 + i))
  D=$STATE/nodes/n$i
  while :; do
    # timeout: --wait blocks for as long as a unit hangs in starting
    if state=$(timeout 30 ssh "${SSHOPTS[@]}" "root@$ip" 'systemctl is-system-running --wait' 2>/dev/null) ||
      [ "$state" = degraded ]; then
      note=""
      if [ "$state" = degraded ]; then
        note=" (degraded: $(ssh "${SSHOPTS[@]}" "root@$ip" 'systemctl --failed --plain --no-legend | cut -d" " -f1 | xargs'))"
      fi
      echo "n$i $ip up: ssh ok, systemd $state$note, $(elapsed_ms) ms after start"
      break
    fi
    if ! kill -0 "$(cat "$D/wrapper.pid")" 2>/dev/null; then
      tail -n 20 "$D/console.log" >&2
      die "n$i exited while booting (log above, $D/console.log); clean up with: PREFIX=$PREFIX $HOSTS_DIR/down.sh"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 20 "$D/console.log" >&2
      how="booted by this up.sh"
      if ! [[ " ${STARTED[*]} " == *" $i "* ]]; then
        # Say what is left of a machine that was up before: its wrapper, and the
        # processes in its cgroup (0: everything of it was killed).
        # shellcheck disable=SC2046 # one path per word
        procs=$(find $(cat "$D/cgroups") -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | wc -l)
        how="already running before this up.sh, wrapper $(node_wrapper "$D" >/dev/null && echo alive || echo gone), $procs processes in its cgroups"
      fi
      die "n$i ($ip) not ready after ${UP_TIMEOUT}s ($how; ssh: $(timeout 10 ssh "${SSHOPTS[@]}" "root@$ip" true 2>&1 | tail -n1); log above, $D/console.log); clean up with: PREFIX=$PREFIX $HOSTS_DIR/down.sh"
    fi
    sleep 0.3
  done
done

hosts=""
for i in $(seq 1 "$N"); do hosts="$hosts n$i=$NET.$((10 + i))"; done
{
  echo "apiVersion: kubexm.mensylisir.io/v1alpha1"
  echo "kind: Cluster"
  echo "metadata:"
  echo "  name: kubexm-test-$PREFIX"
  echo "spec:"
  echo "  hosts:"
  for i in $(seq 1 "$N"); do
    ip=$NET.$((10 + i))
    echo "  - {name: n$i, address: $ip, internalAddress: $ip, port: 22, user: root, privateKeyPath: \"$KEY\"}"
  done
  echo "  roleGroups:"
  echo "    etcd:"
  for i in $(seq 1 "$N"); do echo "    - n$i"; done
  echo "    master:"
  echo "    - n1"
  if [ "$N" -gt 1 ]; then
    echo "    worker:"
    for i in $(seq 2 "$N"); do echo "    - n$i"; done
  else
    echo "    worker: []"
  fi
  echo "  kubernetes:"
  echo "    proxyMode: iptables   # the test machines' kernel has no IPVS"
} >"$STATE/cluster.yaml"
cat >"$STATE/hosts.env" <<EOF
# Test machines of run $PREFIX, written by test/hosts/up.sh. Use: source $STATE/hosts.env
export KUBEXM_TEST_PREFIX=$PREFIX
export KUBEXM_TEST_HOSTS="${hosts# }"
export KUBEXM_TEST_KEY=$KEY
export KUBEXM_TEST_GATEWAY=$NET.1
export KUBEXM_TEST_INVENTORY=$STATE/cluster.yaml
export KUBEXM_TEST_SSH_CONFIG=$STATE/ssh_config
export KUBEXM_TEST_SUDO_USER=kubexm
export KUBEXM_TEST_SUDO_PASSWORD=kubexm
export KUBEXM_TEST_LINK_RATE=$LINK_RATE
EOF
echo "run $PREFIX: $N machine(s) on $(bridge_name "$PREFIX") $NET.0/24 ready in $(elapsed_ms) ms"
echo "  ssh -F $STATE/ssh_config n1"
echo "  source $STATE/hosts.env"
echo "  inventory: $STATE/cluster.yaml"
