#!/usr/bin/env bash
# Builds dockerd, docker-proxy and the docker CLI from the Go module proxy,
# and cri-dockerd from its release source (../shared/sources), and lays them
# out as their upstream releases, for the docker runtime's tests (there is
# no internet here):
#
#   $OUT/linux/static/stable/$UARCH/                       (download.docker.com)
#     docker-$DOCKER_VERSION.tgz       docker/{docker,dockerd,docker-proxy}
#     docker-$DOCKER_VERSION.tgz.sha256 and SHA256SUMS
#   $OUT/Mirantis/cri-dockerd/releases/download/v$CRI_DOCKERD_VERSION/
#     cri-dockerd-$CRI_DOCKERD_VERSION.$ARCH.tgz  cri-dockerd/cri-dockerd
#     cri-dockerd-$CRI_DOCKERD_VERSION.$ARCH.tgz.sha256 and SHA256SUMS
#
# ($UARCH is x86_64 or aarch64, as download.docker.com names them.)
# Upstream's static docker tarball also carries containerd, ctr, the shim,
# runc and docker-init: docker here runs on the containerd the containerd
# role installs (one containerd, not two), so they are left out. Upstream
# publishes no checksum file beside either archive; the .sha256 files here
# stand in for the sums a user gives (docker_sha256, cri_dockerd_sha256).
#
# How each is built:
#   dockerd, docker-proxy  go install github.com/moby/moby/v2/cmd/...@$MOBY_VERSION,
#                          CGO off, upstream's tags (netgo osusergo static_build
#                          nri_no_wasm) and exclude_graphdriver_btrfs; dockerd
#                          reports the moby module's version (-X dockerversion.Version)
#   docker                 github.com/docker/cli@v$DOCKER_VERSION+incompatible: its
#                          vendor.mod as go.mod (the module zip has no vendor/), one
#                          go build of ./cmd/docker, CGO off, -X cli/version.Version;
#                          swarmkit v2.1.3, which the proxy refuses, replaced by the
#                          commit moby's go.mod pins (SWARMKIT_VERSION)
#   cri-dockerd            the archive cri-dockerd-v$CRI_DOCKERD_VERSION.tar.gz, its sha256
#                          checked against the one below, go build -mod=vendor as
#                          upstream's Makefile (-X cmd/version.Version)
# Binaries are kept under $KUBEXM_TEST_CACHE/artifacts/<name>/<version>/<arch>;
# a release directory whose SHA256SUMS is there is left alone (FORCE=1
# redoes it). Builds run under nice.
#
# Environment: DOCKER_VERSION (29.9.3, the CLI's), MOBY_VERSION
# (v2.0.0-beta.24), CRI_DOCKERD_VERSION (0.4.3), GOARCH (the host's),
# KUBEXM_SOURCES_DIR (<repo>/../shared/sources), KUBEXM_TEST_CACHE
# (/var/cache/kubexm-test), KUBEXM_TEST_RELEASE_DIR = $OUT (default
# $KUBEXM_TEST_CACHE/release), FORCE=1. Prints $OUT on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
docker_version=${DOCKER_VERSION:-29.9.3}
moby_version=${MOBY_VERSION:-v2.0.0-beta.24}
cri_dockerd_version=${CRI_DOCKERD_VERSION:-0.4.3}
arch=${GOARCH:-$(go env GOARCH)}
sources=${KUBEXM_SOURCES_DIR:-$repo/../shared/sources}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-$cache/release}

# ../shared/sources/README.md: the archive's sha256.
declare -A cri_dockerd_sha256=(
	[0.4.3]=ce52593ed21a1939ac57a008d59b1b2cbae1bb4f5933613802576f3c117c0bcc
)

for v in "$docker_version" "$cri_dockerd_version"; do
	if [[ ! $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
		echo "docker.sh: version \"$v\": want <major>.<minor>.<patch> without a v" >&2
		exit 2
	fi
done
if [[ ! $moby_version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
	echo "docker.sh: MOBY_VERSION \"$moby_version\": want a module version such as v2.0.0-beta.24" >&2
	exit 2
fi
case $arch in
amd64) uarch=x86_64 ;;
arm64) uarch=aarch64 ;;
*)
	echo "docker.sh: GOARCH $arch: download.docker.com has x86_64 (amd64) and aarch64 (arm64)" >&2
	exit 2
	;;
esac

docker_dir=$out/linux/static/stable/$uarch
docker_name=docker-$docker_version.tgz
cri_dir=$out/Mirantis/cri-dockerd/releases/download/v$cri_dockerd_version
cri_name=cri-dockerd-$cri_dockerd_version.$arch.tgz

mkdir -p "$cache/build"
exec 9>"$cache/build/docker.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -f $docker_dir/$docker_name && -f $cri_dir/$cri_name && -f $docker_dir/SHA256SUMS && -f $cri_dir/SHA256SUMS ]]; then
	echo "docker.sh: docker $docker_version and cri-dockerd $cri_dockerd_version already in $out (FORCE=1 redoes them)" >&2
	echo "$out"
	exit 0
fi

export GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
stage=$(mktemp -d "$cache/build/.docker.XXXXXX")
trap 'rm -rf "$stage"' EXIT
bins=$cache/artifacts

# timed <what> <command...>: run it and say how long it took.
timed() {
	local what=$1 start
	shift
	start=$(date +%s)
	"$@"
	echo "docker.sh: $what built in $(($(date +%s) - start)) s" >&2
}

dockerd_bin=$bins/dockerd/$moby_version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $dockerd_bin/dockerd || ! -x $dockerd_bin/docker-proxy ]]; then
	build_dockerd() {
		local pkg=github.com/moby/moby/v2
		mkdir -p "$stage/dockerd"
		(cd "$stage" && GOBIN=$stage/dockerd nice -n 10 go install -trimpath \
			-tags "netgo osusergo static_build nri_no_wasm exclude_graphdriver_btrfs" \
			-ldflags="-s -w -X $pkg/dockerversion.Version=${moby_version#v}" \
			"$pkg/cmd/dockerd@$moby_version" "$pkg/cmd/docker-proxy@$moby_version")
		mkdir -p "$dockerd_bin"
		mv -f "$stage"/dockerd/* "$dockerd_bin/"
	}
	timed "dockerd and docker-proxy $moby_version" build_dockerd
fi

cli_bin=$bins/docker-cli/$docker_version/$arch
swarmkit_version=${SWARMKIT_VERSION:-v2.1.3-0.20260828175525-ad0357aedfca}
if [[ ${FORCE:-0} == 1 || ! -x $cli_bin/docker ]]; then
	build_cli() {
		local mod=github.com/docker/cli@v$docker_version+incompatible dir
		dir=$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		if [[ -z $dir ]]; then
			echo "docker.sh: go mod download $mod gave no directory" >&2
			return 1
		fi
		cp -r "$dir" "$stage/cli"
		chmod -R u+w "$stage/cli"
		rm -rf "$stage/cli/vendor"
		cp "$stage/cli/vendor.mod" "$stage/cli/go.mod"
		cp "$stage/cli/vendor.sum" "$stage/cli/go.sum"
		# The module proxy refuses swarmkit v2.1.3 (403); the commit moby's
		# daemon module at $moby_version requires stands in for it.
		(cd "$stage/cli" && go mod edit -replace "github.com/moby/swarmkit/v2=github.com/moby/swarmkit/v2@$swarmkit_version")
		(cd "$stage/cli" && nice -n 10 go build -mod=mod -trimpath -tags "osusergo netgo" \
			-ldflags="-s -w -X github.com/docker/cli/cli/version.Version=$docker_version" \
			-o "$stage/docker" ./cmd/docker)
		mkdir -p "$cli_bin"
		mv -f "$stage/docker" "$cli_bin/docker"
	}
	timed "docker CLI $docker_version" build_cli
fi

cri_bin=$bins/cri-dockerd/$cri_dockerd_version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $cri_bin/cri-dockerd ]]; then
	build_cri_dockerd() {
		local archive=$sources/cri-dockerd-v$cri_dockerd_version.tar.gz want=${cri_dockerd_sha256[$cri_dockerd_version]:-}
		if [[ ! -f $archive ]]; then
			echo "docker.sh: $archive is missing (set KUBEXM_SOURCES_DIR to the directory of the release sources)" >&2
			return 1
		fi
		if [[ -z $want ]]; then
			echo "docker.sh: no sha256 known for cri-dockerd $cri_dockerd_version (add it from ../shared/sources/README.md)" >&2
			return 1
		fi
		echo "$want  $archive" | sha256sum -c --quiet || {
			echo "docker.sh: $archive does not have the sha256 ../shared/sources/README.md gives" >&2
			return 1
		}
		tar -xzf "$archive" -C "$stage"
		(cd "$stage/cri-dockerd-v$cri_dockerd_version" && nice -n 10 go build -mod=vendor -trimpath \
			-ldflags="-s -w -X github.com/Mirantis/cri-dockerd/cmd/version.Version=$cri_dockerd_version" \
			-o "$stage/cri-dockerd" .)
		mkdir -p "$cri_bin"
		mv -f "$stage/cri-dockerd" "$cri_bin/cri-dockerd"
	}
	timed "cri-dockerd $cri_dockerd_version" build_cri_dockerd
fi

if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	"$dockerd_bin/dockerd" --version >&2
	"$cli_bin/docker" --version >&2
	"$cri_bin/cri-dockerd" --version >&2 2>&1 || true
fi

# shellcheck source=test/artifacts/pack.sh
. "$here/pack.sh"

mkdir -p "$stage/docker-tar/docker" "$stage/cri-tar/cri-dockerd"
install -m 0755 "$dockerd_bin/dockerd" "$dockerd_bin/docker-proxy" "$cli_bin/docker" "$stage/docker-tar/docker/"
pack "$stage/docker-tar" "$stage/$docker_name" docker
publish_digest docker.sh "$docker_dir" "$stage/$docker_name"
install -m 0755 "$cri_bin/cri-dockerd" "$stage/cri-tar/cri-dockerd/"
pack "$stage/cri-tar" "$stage/$cri_name" cri-dockerd
publish_digest docker.sh "$cri_dir" "$stage/$cri_name"

echo "$out"
