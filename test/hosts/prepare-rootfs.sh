#!/bin/bash
# Build the shared, read-only Debian 12 root filesystem that every test machine overlays.
# Cached in $KUBEXM_TEST_CACHE (default /var/cache/kubexm-test) as rootfs-<version>, with the
# link rootfs.current naming the one new runs use. The version is a hash of this script:
# debootstrap runs only when there is no rootfs yet or the package list changed; otherwise a
# changed script copies the current rootfs and re-applies the configuration. Runs that are up
# keep the version they started with (never change a lower layer under a mounted overlay), and
# versions that no mount uses any more are deleted.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

INCLUDE=systemd,systemd-sysv,dbus,openssh-server,iproute2,iptables,sudo,procps,kmod,ca-certificates,curl

install_tools() {
  command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null && return 0
  apt-get update -qq
  # --no-install-recommends: the recommended libnss-mymachines adds "mymachines" to the host's
  # /etc/nsswitch.conf, which switches Go programs on the host to the cgo resolver.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    debootstrap systemd-container openssh-client iproute2 >/dev/null
}

bootstrap() {
  local dir=$1 t0=$SECONDS
  echo "debootstrap bookworm ($INCLUDE) into $dir ..."
  debootstrap --variant=minbase --include="$INCLUDE" bookworm "$dir" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $CACHE/debootstrap.log"
  echo "debootstrap took $((SECONDS - t0)) s"
}

configure() {
  local R=$1
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
  # Timers and gettys would wake up inside every node (the console getty is nspawn's: masked).
  rm -f "$R"/etc/systemd/system/getty.target.wants/* "$R"/etc/systemd/system/timers.target.wants/apt-daily*.timer
  ln -sfn /dev/null "$R/etc/systemd/system/console-getty.service"
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

# Delete rootfs versions (and the pre-versioning $CACHE/rootfs) that are not current and that
# no overlay mount uses.
prune() {
  local keep=$1 d
  for d in "$CACHE"/rootfs-* "$CACHE/rootfs"; do
    if [ ! -d "$d" ] || [ -L "$d" ] || [ "$d" = "$keep" ] || [ -n "$(mounts_using "$d")" ]; then
      continue
    fi
    rm -rf "$d" "$d.include"
  done
  [ -d "$CACHE/rootfs" ] || rm -f "$CACHE/rootfs.stamp"
}

prepare() {
  mkdir -p "$CACHE"
  local version want cur tmp t0
  version=$( (
    cat "$0"
    uname -r
  ) | short_hash)
  want=$CACHE/rootfs-$version
  if [ ! -x "$want/lib/systemd/systemd" ]; then
    install_tools
    t0=$SECONDS
    tmp=$want.tmp
    rm -rf "$tmp"
    # Start from the current rootfs when it has the same packages: configure is idempotent.
    cur=$(readlink -f "$ROOTFS_LINK" 2>/dev/null || true)
    [ -n "$cur" ] && [ -d "$cur" ] || cur=$CACHE/rootfs
    if [ -x "$cur/lib/systemd/systemd" ] && [ "$(cat "$cur.include" 2>/dev/null)" = "$INCLUDE" ]; then
      cp -a "$cur" "$tmp"
    else
      bootstrap "$tmp"
    fi
    configure "$tmp"
    echo "$INCLUDE" >"$want.include"
    mv "$tmp" "$want"
    echo "prepared $want in $((SECONDS - t0)) s ($(du -sh "$want" | cut -f1))"
  fi
  if [ "$(readlink "$ROOTFS_LINK" 2>/dev/null)" != "${want##*/}" ]; then
    ln -sfn "${want##*/}" "$ROOTFS_LINK.tmp"
    mv -T "$ROOTFS_LINK.tmp" "$ROOTFS_LINK"
  fi
  prune "$want"
}

with_lock "$ROOTFS_LOCK" prepare
