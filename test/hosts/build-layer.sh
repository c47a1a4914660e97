#!/bin/bash
# Build an extra read-only layer over the base rootfs by installing Debian packages in a chroot.
#   build-layer.sh k8s iptables conntrack socat      -> $KUBEXM_TEST_CACHE/layers/k8s
# up.sh builds layers itself from LAYERS="k8s=iptables,conntrack,socat"; a layer is rebuilt
# only when its package list or the base rootfs changed.
# Package postinsts enable their units, so services such as containerd start at every node boot.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

[ $# -ge 2 ] || die "usage: $0 NAME PACKAGE... (e.g. $0 k8s iptables conntrack socat)"
NAME=$1
shift
[[ $NAME =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "layer name '$NAME' is invalid: use [a-z0-9-]"
[ -f "$CACHE/rootfs.stamp" ] || die "no base rootfs in $CACHE; run $HOSTS_DIR/prepare-rootfs.sh first"

L=$LAYERDIR/$NAME
W=$LAYERDIR/.work-$NAME
M=$LAYERDIR/.mnt-$NAME

cleanup() {
  if mountpoint -q "$M"; then umount -R "$M"; fi
  rm -rf "$W" "$M"
}

build() {
  local stamp
  stamp=$( (
    cat "$CACHE/rootfs.stamp"
    printf '%s\n' "$@"
  ) | short_hash)
  if [ -d "$L" ] && [ "$(cat "$L.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  local busy
  busy=$(mounts_using "$L")
  [ -z "$busy" ] || die "layer $NAME needs a rebuild, but test machines use it ($busy); take those runs down first"
  local t0=$SECONDS
  trap cleanup EXIT
  rm -rf "$L" "$L.stamp"
  cleanup
  mkdir -p "$L.tmp" "$W" "$M"
  rm -rf "${L:?}.tmp"/*
  mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$L.tmp,workdir=$W" "$M"
  mount -t proc proc "$M/proc"
  mount --rbind /dev "$M/dev"
  mount --make-rslave "$M/dev"
  mount -t sysfs sysfs "$M/sys"
  cp /etc/resolv.conf "$M/etc/resolv.conf"
  # exit 101 = "do not start services" for postinst scripts
  printf '#!/bin/sh\nexit 101\n' >"$M/usr/sbin/policy-rc.d"
  chmod 755 "$M/usr/sbin/policy-rc.d"
  if ! {
    chroot "$M" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive chroot "$M" apt-get install -y -qq --no-install-recommends "$@"
  } >"$LAYERDIR/$NAME.log" 2>&1; then
    die "installing $* into layer $NAME failed; see $LAYERDIR/$NAME.log"
  fi
  chroot "$M" apt-get clean
  # resolv.conf is written per node by nspawn (--resolv-conf=copy-host)
  rm -rf "$M"/var/lib/apt/lists/* "$M/usr/sbin/policy-rc.d" "$M/etc/resolv.conf"
  cleanup
  trap - EXIT
  mv "$L.tmp" "$L"
  echo "$stamp" >"$L.stamp"
  echo "built layer $NAME ($*) in $((SECONDS - t0)) s ($(du -sh "$L" | cut -f1))"
}

mkdir -p "$LAYERDIR"
with_lock "$LAYERDIR/$NAME.lock" build "$@"
