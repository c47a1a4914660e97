#!/usr/bin/env bash
# Builds the CNCF distribution registry (github.com/distribution/distribution/v3,
# cmd/registry) from the Go module proxy and lays it out as its GitHub
# release, for the registry role's tests (there is no internet here):
#
#   $OUT/distribution/distribution/releases/download/v$REGISTRY_VERSION/
#     registry_${REGISTRY_VERSION}_linux_$ARCH.tar.gz   ./registry (flat, as upstream's)
#     registry_${REGISTRY_VERSION}_linux_$ARCH.tar.gz.sha256
#     SHA256SUMS
#
# Built as upstream's release does: CGO off, -X version.version. The binary
# is kept under $KUBEXM_TEST_CACHE/artifacts/registry/<version>/<arch>; a
# release directory whose SHA256SUMS is there is left alone (FORCE=1 builds
# and lays out again). The tarball is reproducible.
#
# Environment: REGISTRY_VERSION (3.1.2), GOARCH (the host's), KUBEXM_TEST_CACHE
# (/var/cache/kubexm-test), KUBEXM_TEST_RELEASE_DIR = $OUT (default
# $KUBEXM_TEST_CACHE/release), FORCE=1. Prints $OUT on its last line.
set -euo pipefail

version=${REGISTRY_VERSION:-3.1.2}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-$cache/release}

if [[ ! $version =~ ^3\.[0-9]+\.[0-9]+$ ]]; then
	echo "registry.sh: version \"$version\": want 3.<minor>.<patch> without a v" >&2
	exit 2
fi

dir=$out/distribution/distribution/releases/download/v$version
name=registry_${version}_linux_$arch.tar.gz

mkdir -p "$cache/build"
exec 9>"$cache/build/registry.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -f $dir/SHA256SUMS && -f $dir/$name ]]; then
	echo "registry.sh: registry $version already in $dir (FORCE=1 redoes it)" >&2
	echo "$out"
	exit 0
fi

export GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
stage=$(mktemp -d "$cache/build/.registry.XXXXXX")
trap 'rm -rf "$stage"' EXIT

bin=$cache/artifacts/registry/$version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $bin/registry ]]; then
	echo "registry.sh: go install github.com/distribution/distribution/v3/cmd/registry@v$version" >&2
	mkdir -p "$stage/bin"
	(cd "$stage" && GOBIN=$stage/bin nice -n 10 go install -trimpath \
		-ldflags="-s -w -X github.com/distribution/distribution/v3/version.version=v$version" \
		"github.com/distribution/distribution/v3/cmd/registry@v$version")
	mkdir -p "$bin"
	mv -f "$stage/bin/registry" "$bin/registry"
fi
if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	"$bin/registry" --version >&2
fi

# shellcheck source=test/artifacts/pack.sh
. "$(dirname "$0")/pack.sh"
mkdir -p "$stage/tar"
install -m 0755 "$bin/registry" "$stage/tar/registry"
pack "$stage/tar" "$stage/$name" registry
publish_digest registry.sh "$dir" "$stage/$name"
echo "$out"
