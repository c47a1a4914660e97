#!/usr/bin/env bash
# Builds crictl from the Go module proxy (sigs.k8s.io/cri-tools) and lays it
# out as its official GitHub release, for the crictl role's tests (there is
# no internet here):
#
#   $OUT/kubernetes-sigs/cri-tools/releases/download/v$CRICTL_VERSION/
#     crictl-v$CRICTL_VERSION-linux-$ARCH.tar.gz          ./crictl (flat, as upstream's)
#     crictl-v$CRICTL_VERSION-linux-$ARCH.tar.gz.sha256   the bare digest, as upstream's
#     SHA256SUMS
#
# Built as upstream's Makefile does: CGO off, -X pkg/version.Version. The
# binary is kept under $KUBEXM_TEST_CACHE/artifacts/crictl/<version>/<arch>;
# a release directory whose SHA256SUMS is there is left alone (FORCE=1
# builds and lays out again). The tarball is reproducible.
#
# Environment: CRICTL_VERSION (1.37.0), GOARCH (the host's), KUBEXM_TEST_CACHE
# (/var/cache/kubexm-test), KUBEXM_TEST_RELEASE_DIR = $OUT (default
# $KUBEXM_TEST_CACHE/release), FORCE=1. Prints $OUT on its last line.
set -euo pipefail

version=${CRICTL_VERSION:-1.37.0}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-$cache/release}

if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "crictl.sh: version \"$version\": want <major>.<minor>.<patch> without a v" >&2
	exit 2
fi

dir=$out/kubernetes-sigs/cri-tools/releases/download/v$version
name=crictl-v$version-linux-$arch.tar.gz

mkdir -p "$cache/build"
exec 9>"$cache/build/crictl.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -f $dir/SHA256SUMS && -f $dir/$name ]]; then
	echo "crictl.sh: crictl $version already in $dir (FORCE=1 redoes it)" >&2
	echo "$out"
	exit 0
fi

export GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
stage=$(mktemp -d "$cache/build/.crictl.XXXXXX")
trap 'rm -rf "$stage"' EXIT

bin=$cache/artifacts/crictl/$version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $bin/crictl ]]; then
	echo "crictl.sh: go install sigs.k8s.io/cri-tools/cmd/crictl@v$version" >&2
	mkdir -p "$stage/bin"
	(cd "$stage" && GOBIN=$stage/bin nice -n 10 go install -trimpath \
		-ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v$version" \
		"sigs.k8s.io/cri-tools/cmd/crictl@v$version")
	mkdir -p "$bin"
	mv -f "$stage/bin/crictl" "$bin/crictl"
fi
if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	"$bin/crictl" --version >&2
fi

# shellcheck source=test/artifacts/pack.sh
. "$(dirname "$0")/pack.sh"
mkdir -p "$stage/tar"
install -m 0755 "$bin/crictl" "$stage/tar/crictl"
pack "$stage/tar" "$stage/$name" crictl
publish_digest crictl.sh "$dir" "$stage/$name"
echo "$out"
