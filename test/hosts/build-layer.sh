#!/bin/bash
# Build an extra read-only layer over the current base rootfs by installing Debian packages in
# a chroot, and print its directory (the last line of stdout; progress goes to stderr).
#   build-layer.sh k8s conntrack socat      -> $KUBEXM_TEST_CACHE/layers/k8s-<version>
# up.sh builds layers itself from LAYERS="k8s=conntrack,socat". The version is a hash of the
# base rootfs version and the package list, so a layer is rebuilt only when either changed;
# layers/<name>.current links to the newest, and versions no mount uses are deleted.
# Package postinsts enable their units, so services such as containerd start at every node boot.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

[ $# -ge 2 ] || die "usage: $0 NAME PACKAGE... (e.g. $0 k8s conntrack socat)"
NAME=$1
shift
[[ $NAME =~ ^[a-z0-9][a-z0-9]*$ ]] || die "layer name '$NAME' is invalid: use [a-z0-9]"

build() {
  local base version L W M t0=$SECONDS d
  base=$(readlink -f "$ROOTFS_LINK" || true)
  if [ -z "$base" ] || [ ! -d "$base" ]; then
    die "no base rootfs in $CACHE; run $HOSTS_DIR/prepare-rootfs.sh first"
  fi
  version=$( (
    echo "${base##*/}"
    printf '%s\n' "$@"
  ) | short_hash)
  L=$LAYERDIR/$NAME-$version
  W=$LAYERDIR/.work-$NAME
  M=$LAYERDIR/.mnt-$NAME
  if [ ! -d "$L" ]; then
    cleanup() {
      if mountpoint -q "$M"; then umount -R "$M"; fi
      rm -rf "$W" "$M" "$L.tmp"
    }
    trap cleanup EXIT
    cleanup
    mkdir -p "$L.tmp" "$W" "$M"
    mount -t overlay overlay -o "lowerdir=$base,upperdir=$L.tmp,workdir=$W" "$M"
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
        DEBIAN_FRONTEND=noninteractive chroot "$M" apt-get install -y -qq --no-install-recommends "$@" &&
        chroot "$M" apt-get clean
    } >"$LAYERDIR/$NAME.log" 2>&1; then
      die "installing $* into layer $NAME failed; see $LAYERDIR/$NAME.log"
    fi
    # resolv.conf is written per node by nspawn (--resolv-conf=copy-host)
    rm -rf "$M"/var/lib/apt/lists/* "$M/usr/sbin/policy-rc.d" "$M/etc/resolv.conf"
    umount -R "$M"
    mv "$L.tmp" "$L"
    echo "$base" >"$L.base"
    cleanup
    trap - EXIT
    echo "built layer $NAME ($*) on ${base##*/} in $((SECONDS - t0)) s ($(du -sh "$L" | cut -f1))" >&2
  fi
  ln -sfn "${L##*/}" "$LAYERDIR/$NAME.current.tmp"
  mv -T "$LAYERDIR/$NAME.current.tmp" "$LAYERDIR/$NAME.current"
  for d in "$LAYERDIR/$NAME"-*; do
    if [ ! -d "$d" ] || [ -L "$d" ] || [ "$d" = "$L" ] || [ -n "$(mounts_using "$d")" ]; then
      continue
    fi
    rm -rf "$d" "$d.base"
  done
  echo "$L"
}

mkdir -p "$LAYERDIR"
# Exclusive: the base must not switch versions (prepare-rootfs.sh) while the layer is built on it.
with_lock "$ROOTFS_LOCK" build "$@"
