#!/usr/bin/env bash
# Builds containerd 2.x, runc and the CNI plugins from the Go module proxy
# and lays them out as their official GitHub releases, for the containerd
# role's tests (there is no internet here):
#
#   $OUT/containerd/containerd/releases/download/v$CONTAINERD_VERSION/
#     containerd-$CONTAINERD_VERSION-linux-$ARCH.tar.gz   bin/{containerd,containerd-shim-runc-v2,ctr}
#     containerd-$CONTAINERD_VERSION-linux-$ARCH.tar.gz.sha256sum
#   $OUT/opencontainers/runc/releases/download/v$RUNC_VERSION/
#     runc.$ARCH                                          the bare binary
#     runc.sha256sum
#   $OUT/containernetworking/plugins/releases/download/v$CNI_VERSION/
#     cni-plugins-linux-$ARCH-v$CNI_VERSION.tgz           ./bridge, ./host-local, ... (flat)
#     cni-plugins-linux-$ARCH-v$CNI_VERSION.tgz.sha256
#
# and a SHA256SUMS in each directory. The checksum files are named as
# upstream's, so the role's defaults work against github.com and against a
# file server rooted at $OUT alike. The tarballs are reproducible (fixed
# order, owner and times; gzip without a timestamp). The binaries are kept
# under $KUBEXM_TEST_CACHE/artifacts/ by version; a release directory whose
# SHA256SUMS is there is left alone (FORCE=1 builds and lays out again).
#
# How each is built, following upstream's Makefiles:
#   containerd, ctr      go install github.com/containerd/containerd/v2/cmd/...@v$CONTAINERD_VERSION,
#                        CGO off (static; no btrfs snapshotter), -X version.Version/Package
#   containerd-shim-runc-v2  the same with tags no_grpc, as upstream's shim
#   runc                 cgo with Debian's libseccomp-dev, static (-extldflags -static,
#                        tags seccomp urfave_cli_no_docs netgo osusergo); without
#                        upstream's libpathrs tag (a Rust library Debian does not have)
#   CNI plugins          every plugins/{main,ipam,meta}/* but windows, CGO off, one go install
#
# Differences from upstream: no containerd-stress in the containerd tarball,
# no LICENSE/README.md in the CNI tarball, and the Git commit is empty in the
# version output (the proxy does not say it).
#
# containerd 2.4 still runs on cgroup v1 (it logs a deprecation warning), which
# the test machines use.
#
# Environment: CONTAINERD_VERSION (2.4.2), RUNC_VERSION (1.5.2),
# CNI_VERSION (1.9.1), GOARCH (the host's), KUBEXM_TEST_CACHE
# (/var/cache/kubexm-test), KUBEXM_TEST_RELEASE_DIR = $OUT
# (default $KUBEXM_TEST_CACHE/release), FORCE=1.
# Needs gcc, pkg-config and libseccomp-dev (for runc).
# Prints $OUT on its last line.
set -euo pipefail

containerd_version=${CONTAINERD_VERSION:-2.4.2}
runc_version=${RUNC_VERSION:-1.5.2}
cni_version=${CNI_VERSION:-1.9.1}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-$cache/release}

for v in "$containerd_version" "$runc_version" "$cni_version"; do
	if [[ ! $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
		echo "containerd.sh: version \"$v\": want <major>.<minor>.<patch> without a v" >&2
		exit 2
	fi
done
if [[ $containerd_version != 2.* ]]; then
	echo "containerd.sh: CONTAINERD_VERSION=$containerd_version: only containerd 2.x is built (the containerd role writes config version 3)" >&2
	exit 2
fi

containerd_dir=$out/containerd/containerd/releases/download/v$containerd_version
runc_dir=$out/opencontainers/runc/releases/download/v$runc_version
cni_dir=$out/containernetworking/plugins/releases/download/v$cni_version

mkdir -p "$cache/build"
exec 9>"$cache/build/containerd.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -f $containerd_dir/SHA256SUMS && -f $runc_dir/SHA256SUMS && -f $cni_dir/SHA256SUMS ]]; then
	echo "containerd.sh: containerd $containerd_version, runc $runc_version, CNI plugins $cni_version already in $out (FORCE=1 redoes them)" >&2
	echo "$out"
	exit 0
fi

export GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
stage=$(mktemp -d "$cache/build/.containerd.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# gobuild <dir> <go install args...>: install into <dir> (kept by version),
# through a temporary GOBIN so a failed build leaves nothing half there.
gobuild() {
	local dir=$1 tmp
	shift
	tmp=$(mktemp -d "$stage/bin.XXXXXX")
	echo "containerd.sh: go install $*" >&2
	(cd "$stage" && GOBIN=$tmp go install -trimpath "$@")
	mkdir -p "$dir"
	mv -f "$tmp"/* "$dir/"
}

bins=$cache/artifacts
cd_bin=$bins/containerd/$containerd_version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $cd_bin/containerd || ! -x $cd_bin/ctr || ! -x $cd_bin/containerd-shim-runc-v2 ]]; then
	pkg=github.com/containerd/containerd/v2
	ld="-s -w -X $pkg/version.Version=v$containerd_version -X $pkg/version.Package=github.com/containerd/containerd/v2"
	CGO_ENABLED=0 gobuild "$cd_bin" -ldflags="$ld" "$pkg/cmd/containerd@v$containerd_version" "$pkg/cmd/ctr@v$containerd_version"
	CGO_ENABLED=0 gobuild "$cd_bin" -tags no_grpc -ldflags="$ld" "$pkg/cmd/containerd-shim-runc-v2@v$containerd_version"
fi

runc_bin=$bins/runc/$runc_version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $runc_bin/runc ]]; then
	if ! pkg-config --exists libseccomp; then
		echo "containerd.sh: runc needs libseccomp-dev and pkg-config (apt-get install libseccomp-dev pkg-config)" >&2
		exit 1
	fi
	CGO_ENABLED=1 gobuild "$runc_bin" -tags "seccomp urfave_cli_no_docs netgo osusergo" \
		-ldflags="-s -w -X main.gitCommit= -extldflags -static" "github.com/opencontainers/runc@v$runc_version"
fi

cni_bin=$bins/cni-plugins/$cni_version/$arch
if [[ ${FORCE:-0} == 1 || ! -x $cni_bin/bridge ]]; then
	pkgs=()
	for p in main/bridge main/dummy main/host-device main/ipvlan main/loopback main/macvlan main/ptp \
		main/tap main/vlan ipam/dhcp ipam/host-local ipam/static meta/bandwidth meta/firewall \
		meta/portmap meta/sbr meta/tuning meta/vrf; do
		pkgs+=("github.com/containernetworking/plugins/plugins/$p@v$cni_version")
	done
	CGO_ENABLED=0 gobuild "$cni_bin" -ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$cni_version" "${pkgs[@]}"
fi

if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	"$cd_bin/containerd" --version >&2
	# sed reads all of it: head would leave runc a closed pipe (SIGPIPE, 141 under pipefail).
	"$runc_bin/runc" --version | sed -n 1p >&2
	if ldd "$runc_bin/runc" >/dev/null 2>&1; then
		echo "containerd.sh: warning: runc is dynamically linked" >&2
	fi
fi

# shellcheck source=test/artifacts/pack.sh
. "$(dirname "$0")/pack.sh"

# publish <dir> <file> <checksum file name>: move file into dir with its
# upstream-named checksum file, then list every file in SHA256SUMS.
publish() {
	local dir=$1 file=$2 sums=$3 name
	name=$(basename "$file")
	mkdir -p "$dir"
	touch -d @0 "$file"
	mv -f "$file" "$dir/$name"
	(cd "$dir" && sha256sum -- "$name" >"$sums.tmp" && mv -f "$sums.tmp" "$sums")
	(
		cd "$dir" || exit 1
		files=()
		for f in *; do
			case $f in *.sha256 | *.sha256sum | SHA256SUMS*) ;; *) files+=("$f") ;; esac
		done
		sha256sum -- "${files[@]}" >SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS
	)
	echo "containerd.sh: $(cat "$dir/$sums")" >&2
}

# containerd: bin/ holds the binaries, as in the upstream tarball.
mkdir -p "$stage/containerd-tar/bin"
for b in containerd containerd-shim-runc-v2 ctr; do
	install -m 0755 "$cd_bin/$b" "$stage/containerd-tar/bin/$b"
done
name=containerd-$containerd_version-linux-$arch.tar.gz
pack "$stage/containerd-tar" "$stage/$name" bin
publish "$containerd_dir" "$stage/$name" "$name.sha256sum"

# runc: a bare binary named runc.<arch>; upstream's runc.sha256sum lists it.
install -m 0755 "$runc_bin/runc" "$stage/runc.$arch"
publish "$runc_dir" "$stage/runc.$arch" runc.sha256sum

# CNI plugins: flat, members ./bridge etc., as upstream.
mkdir -p "$stage/cni-tar"
for p in "$cni_bin"/*; do
	install -m 0755 "$p" "$stage/cni-tar/$(basename "$p")"
done
name=cni-plugins-linux-$arch-v$cni_version.tgz
pack "$stage/cni-tar" "$stage/$name" .
publish "$cni_dir" "$stage/$name" "$name.sha256"

echo "$out"
