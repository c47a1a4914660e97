#!/usr/bin/env bash
# Lays out the etcd binaries built by etcd.sh as etcd's official release
# tarball, for the etcd role's tests:
#
#   $OUT/etcd-io/etcd/releases/download/$VERSION/etcd-$VERSION-linux-$ARCH.tar.gz
#     containing etcd-$VERSION-linux-$ARCH/{etcd,etcdctl,etcdutl}
#   $OUT/etcd-io/etcd/releases/download/$VERSION/SHA256SUMS
#
# The directory tree mirrors github.com's download paths, so a file server
# rooted at $OUT can stand in for https://github.com. The tarball is
# reproducible (fixed order, owner and times; gzip without a timestamp), so
# its sha256 only changes when the binaries do.
#
# Environment: ETCD_VERSION (default v3.7.3), GOARCH (default the host's),
# KUBEXM_TEST_ETCD_DIR (the binaries; built by etcd.sh when missing),
# KUBEXM_TEST_RELEASE_DIR = $OUT (default $KUBEXM_TEST_CACHE/release).
# Prints the tarball's path on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${ETCD_VERSION:-v3.7.3}
arch=${GOARCH:-$(go env GOARCH)}
out=${KUBEXM_TEST_RELEASE_DIR:-${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}/release}

bins=$(ETCD_VERSION=$version GOARCH=$arch "$here/etcd.sh" | tail -n1)
name=etcd-$version-linux-$arch
dest=$out/etcd-io/etcd/releases/download/$version
mkdir -p "$dest"
# One run at a time: the e2e suites run two at a time and each lays this out.
locks=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}/build
mkdir -p "$locks"
exec 9>"$locks/etcd-release-$version-$arch.lock"
flock 9

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
for b in etcd etcdctl etcdutl; do
	install -m 0755 "$bins/$b" "$stage/$name/$b"
done
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$name" |
	gzip -n -9 >"$stage/$name.tar.gz"
mv -f "$stage/$name.tar.gz" "$dest/$name.tar.gz"

# SHA256SUMS lists every tarball in the directory, as the official one does.
(cd "$dest" && sha256sum -- *.tar.gz >SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS)
echo "release.sh: $(grep " $name.tar.gz\$" "$dest/SHA256SUMS")" >&2
echo "$dest/$name.tar.gz"
