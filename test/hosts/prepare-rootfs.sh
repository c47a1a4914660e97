#!/bin/bash
# Build the shared, read-only Debian 12 root filesystem that every test machine overlays.
# Cached in $KUBEXM_TEST_CACHE/rootfs (default /var/cache/kubexm-test). Cheap when up to date:
# debootstrap runs only when the rootfs is missing or the package list changed, and the
# configuration step only when this script changed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

INCLUDE=systemd,systemd-sysv,dbus,openssh-server,iproute2,iptables,sudo,procps,kmod,ca-certificates

install_tools() {
  command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null && return 0
  apt-get update -qq
  # --no-install-recommends: the recommended libnss-mymachines adds "mymachines" to the host's
  # /etc/nsswitch.conf, which switches Go programs on the host to the cgo resolver.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    debootstrap systemd-container openssh-client iproute2 >/dev/null
}

bootstrap() {
  local tmp=$CACHE/rootfs.tmp
  rm -rf "$tmp"
  echo "debootstrap bookworm ($INCLUDE) into $ROOTFS ..."
  local t0=$SECONDS
  debootstrap --variant=minbase --include="$INCLUDE" bookworm "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $CACHE/debootstrap.log"
  rm -rf "$ROOTFS"
  mv "$tmp" "$ROOTFS"
  echo "$INCLUDE" >"$CACHE/rootfs.include"
  rm -f "$CACHE/rootfs.stamp"
  echo "debootstrap took $((SECONDS - t0)) s"
}

configure() {
  local R=$ROOTFS
  # No host keys and no authorized_keys in the shared layer: up.sh writes per-node host keys
  # and the per-run client key into each node's overlay.
  rm -f "$R"/etc/ssh/ssh_host_*
  passwd -R "$R" -l root >/dev/null
  # The non-root user for the SSH transport's sudo tests: sudo must ask for its password.
  chroot "$R" id kubexm >/dev/null 2>&1 || chroot "$R" useradd -m -s /bin/bash -G sudo kubexm
  echo 'kubexm:kubexm' | chroot "$R" chpasswd
  rm -f "$R/etc/sudoers.d/kubexm"
  mkdir -p "$R/etc/ssh/sshd_config.d"
  cat >"$R/etc/ssh/sshd_config.d/10-kubexm-test.conf" <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
HostKey /etc/ssh/ssh_host_ecdsa_key
UseDNS no
PermitRootLogin prohibit-password
PasswordAuthentication no
Match User kubexm
    PasswordAuthentication yes
EOF
  # Fallback host key generation. ExecStartPre= must be reset first: the stock unit's
  # "sshd -t" runs before appended lines and fails without keys.
  mkdir -p "$R/etc/systemd/system/ssh.service.d"
  cat >"$R/etc/systemd/system/ssh.service.d/10-hostkeys.conf" <<'EOF'
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || /usr/bin/ssh-keygen -A'
ExecStartPre=/usr/sbin/sshd -t
EOF
  # 0 bytes, not "\n": nspawn then derives a distinct machine-id per node; a file holding only a
  # newline makes nspawn fail with "Failed to read machine ID from container image".
  : >"$R/etc/machine-id"
  rm -f "$R/var/lib/dbus/machine-id"
  echo localhost >"$R/etc/hostname"
  # Timers and gettys would wake up inside every node.
  rm -f "$R"/etc/systemd/system/getty.target.wants/* "$R"/etc/systemd/system/timers.target.wants/apt-daily*.timer
  # The host kernel is monolithic (no /lib/modules): declare what it has built in, so that
  # `modprobe overlay br_netfilter` in a node succeeds as it would on a real machine.
  local kv
  kv=$(uname -r)
  rm -rf "$R"/lib/modules/*
  mkdir -p "$R/lib/modules/$kv"
  cat >"$R/lib/modules/$kv/modules.builtin" <<'EOF'
kernel/fs/overlayfs/overlay.ko
kernel/net/bridge/bridge.ko
kernel/net/bridge/br_netfilter.ko
kernel/net/netfilter/nf_conntrack.ko
kernel/net/netfilter/nf_nat.ko
kernel/net/netfilter/nf_tables.ko
kernel/net/netfilter/x_tables.ko
kernel/net/ipv4/netfilter/ip_tables.ko
kernel/net/ipv4/netfilter/iptable_filter.ko
kernel/net/ipv4/netfilter/iptable_nat.ko
kernel/net/ipv4/netfilter/iptable_mangle.ko
kernel/net/ipv6/netfilter/ip6_tables.ko
kernel/net/netfilter/ipset/ip_set.ko
kernel/drivers/net/veth.ko
kernel/drivers/net/vxlan/vxlan.ko
kernel/drivers/net/tun.ko
EOF
  : >"$R/lib/modules/$kv/modules.order"
  : >"$R/lib/modules/$kv/modules.builtin.modinfo"
  chroot "$R" depmod -a "$kv"
  # PID 1 of a node. nspawn mounts the cgroup-v1 controllers read-only in hybrid mode; a bind
  # remount makes the node's own subtree (its cgroup-namespace root) writable, so containerd and
  # runc inside can create cgroups. Then systemd takes over.
  mkdir -p "$R/usr/local/sbin"
  cat >"$R/usr/local/sbin/kubexm-test-init" <<'EOF'
#!/bin/sh
for c in /sys/fs/cgroup/*; do
  case "$(basename "$c")" in systemd|unified) continue ;; esac
  [ -f "$c/cgroup.procs" ] && mount -o remount,bind,rw "$c"
done
exec /lib/systemd/systemd "$@"
EOF
  chmod 755 "$R/usr/local/sbin/kubexm-test-init"
  chroot "$R" apt-get clean
  rm -rf "$R"/var/lib/apt/lists/*
}

prepare() {
  mkdir -p "$CACHE"
  local stamp want_include=$INCLUDE have_include=""
  stamp=$(cat "$0" "$HOSTS_DIR/lib.sh" <(uname -r) | short_hash)
  [ -f "$CACHE/rootfs.include" ] && have_include=$(cat "$CACHE/rootfs.include")
  if [ -x "$ROOTFS/lib/systemd/systemd" ] && [ "$have_include" = "$want_include" ] &&
    [ "$(cat "$CACHE/rootfs.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  # Changing a lower layer under a mounted overlay is undefined behaviour.
  local busy
  busy=$(mounts_using "$ROOTFS")
  [ -z "$busy" ] || die "the rootfs needs an update, but test machines use it ($busy); run \`make hosts-down PREFIX=...\` for every run first"
  install_tools
  if [ ! -x "$ROOTFS/lib/systemd/systemd" ] || [ "$have_include" != "$want_include" ]; then
    bootstrap
  fi
  local t0=$SECONDS
  configure
  echo "$stamp" >"$CACHE/rootfs.stamp"
  echo "configured $ROOTFS in $((SECONDS - t0)) s ($(du -sh "$ROOTFS" | cut -f1))"
}

with_lock "$CACHE/rootfs.lock" prepare
