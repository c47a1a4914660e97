#!/usr/bin/env bash
# Builds kube-vip for kubexm's tests from its release source archive (kube-vip
# is not on the Go module proxy; its dependencies are):
#
#   $KUBEXM_TEST_CACHE/artifacts/kube-vip/$KUBE_VIP_VERSION/$ARCH/kube-vip
#
# and prints that directory on its last line. images.sh makes the image
# (`images.sh kube-vip`: ghcr.io/kube-vip/kube-vip:$KUBE_VIP_VERSION) from it.
#
# The archive is $KUBE_VIP_SOURCE (default ../shared/sources/kube-vip-<version>.tar.gz
# relative to the repository's root, the shared folder's README names it and its
# sha256); its sha256 must be $KUBE_VIP_SHA256 (the README's, for v1.2.3) before
# anything is unpacked. The build is upstream's Makefile's: CGO off, static,
# `-s -w -X main.Version=<version> -X main.Build=<commit>`, plus -trimpath. Its
# go.mod says go 1.26.4; the local toolchain is used (GOTOOLCHAIN=local).
#
# One build at a time (flock); a binary that is there is left alone (FORCE=1
# builds again). Built with `nice`: the machine is shared.
#
# Environment:
#   KUBE_VIP_VERSION   v1.2.3
#   KUBEXM_SOURCES_DIR the shared sources folder (default <repo>/../shared/sources; a git
#                      worktree elsewhere sets it, e.g. /work/shared/sources)
#   KUBE_VIP_SOURCE    the archive (default $KUBEXM_SOURCES_DIR/kube-vip-$KUBE_VIP_VERSION.tar.gz)
#   KUBE_VIP_SHA256    the archive's sha256 (default: v1.2.3's)
#   KUBE_VIP_COMMIT    the commit the tag names, for main.Build (default: v1.2.3's)
#   GOARCH             target architecture (default: the host's)
#   KUBEXM_TEST_CACHE  root of the test cache (default /var/cache/kubexm-test)
#   FORCE=1            rebuild
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=${KUBE_VIP_VERSION:-v1.2.3}
source=${KUBE_VIP_SOURCE:-${KUBEXM_SOURCES_DIR:-$repo/../shared/sources}/kube-vip-$version.tar.gz}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
declare -A known_sha256=([v1.2.3]=fd6592d003587cd59348d63c1dbe3c0b8596fe745c53ea04313f412dd40af8b1)
declare -A known_commit=([v1.2.3]=7ce55caffa2789b4165072bbef7c7d376000995e)
want_sha256=${KUBE_VIP_SHA256:-${known_sha256[$version]:-}}
commit=${KUBE_VIP_COMMIT:-${known_commit[$version]:-unknown}}

if [[ -z $want_sha256 ]]; then
	echo "kube-vip.sh: no known sha256 for $version: set KUBE_VIP_SHA256" >&2
	exit 2
fi

export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
dest=$cache/artifacts/kube-vip/$version/$arch
mkdir -p "$cache/build"
exec 9>"$cache/build/kube-vip-$version.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -x $dest/kube-vip ]]; then
	echo "kube-vip.sh: kube-vip $version/$arch already built in $dest (FORCE=1 rebuilds)" >&2
	echo "$dest"
	exit 0
fi

if [[ ! -f $source ]]; then
	echo "kube-vip.sh: no source archive $source (set KUBE_VIP_SOURCE)" >&2
	exit 1
fi
if ! echo "$want_sha256  $source" | sha256sum -c --status; then
	echo "kube-vip.sh: $source: sha256 $(sha256sum <"$source" | cut -d' ' -f1), want $want_sha256; not building from it" >&2
	exit 1
fi

src=$cache/build/kube-vip-$version
rm -rf "$src"
mkdir -p "$src"
tar -C "$src" --strip-components=1 -xzf "$source" "kube-vip-$version/"
mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "kube-vip.sh: building kube-vip $version ($arch) from $source" >&2
t0=$SECONDS
(
	cd "$src"
	nice -n 10 go build -trimpath \
		-ldflags "-s -w -X=main.Version=$version -X=main.Build=$commit -extldflags -static" \
		-o "$tmp/kube-vip" .
)
mv -f "$tmp/kube-vip" "$dest/kube-vip"
if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	echo "kube-vip.sh: $("$dest/kube-vip" version 2>&1 | tr '\n' ' ')($((SECONDS - t0)) s)" >&2
fi
echo "$dest"
