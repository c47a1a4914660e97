#!/usr/bin/env bash
# Lays out containerd, runc and the CNI plugins as their official GitHub
# releases, for the containerd role's tests. There is no internet here, and
# rather than building them from the Go module proxy, the binaries come from
# Debian bookworm's packages (containerd 1.6.20, runc 1.1.5,
# containernetworking-plugins 1.1.1), fetched with apt-get download:
#
#   $OUT/containerd/containerd/releases/download/v$CONTAINERD_VERSION/
#     containerd-$CONTAINERD_VERSION-linux-$ARCH.tar.gz   bin/{containerd,containerd-shim,
#                                                          containerd-shim-runc-v1,containerd-shim-runc-v2,ctr}
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
# order, owner and times; gzip without a timestamp), and a directory whose
# SHA256SUMS is there is left alone (FORCE=1 lays it out again).
#
# Differences from upstream: Debian's binaries are dynamically linked (libc;
# runc also libseccomp2, which systemd pulls into every Debian system) and
# report versions such as 1.6.20~ds1; containerd-stress and the CNI
# tarball's LICENSE and README.md are not in the packages.
#
# Environment: CONTAINERD_VERSION (1.6.20), RUNC_VERSION (1.1.5),
# CNI_VERSION (1.1.1) must be the versions of the Debian packages;
# KUBEXM_TEST_RELEASE_DIR = $OUT (default /var/cache/kubexm-test/release).
# Only amd64 (the packages of this machine's architecture).
# Prints $OUT on its last line.
set -euo pipefail

containerd_version=${CONTAINERD_VERSION:-1.6.20}
runc_version=${RUNC_VERSION:-1.1.5}
cni_version=${CNI_VERSION:-1.1.1}
out=${KUBEXM_TEST_RELEASE_DIR:-/var/cache/kubexm-test/release}
arch=$(dpkg --print-architecture)

containerd_dir=$out/containerd/containerd/releases/download/v$containerd_version
runc_dir=$out/opencontainers/runc/releases/download/v$runc_version
cni_dir=$out/containernetworking/plugins/releases/download/v$cni_version

if [[ ${FORCE:-0} != 1 && -f $containerd_dir/SHA256SUMS && -f $runc_dir/SHA256SUMS && -f $cni_dir/SHA256SUMS ]]; then
	echo "containerd.sh: containerd $containerd_version, runc $runc_version, CNI plugins $cni_version already in $out (FORCE=1 redoes them)" >&2
	echo "$out"
	exit 0
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# apt-get download fetches as the user _apt, into a directory it may write.
mkdir "$stage/debs"
chmod 0755 "$stage"
if id _apt >/dev/null 2>&1; then chown _apt "$stage/debs"; fi

# fetch <package> <version>: unpack the package into $stage/<package>,
# refusing any other version than the one the release is named for.
fetch() {
	local pkg=$1 want=$2 deb
	(cd "$stage/debs" && apt-get download -q "$pkg" >&2) || {
		echo "containerd.sh: apt-get download $pkg failed (apt-get update first?)" >&2
		exit 1
	}
	deb=$(echo "$stage/debs/${pkg}"_*.deb)
	local have
	have=$(dpkg-deb -f "$deb" Version)
	# Debian versions look like 1.6.20~ds1-1+deb12u3 or 1.1.1+ds1-3+b5.
	if [[ ${have%%[~+-]*} != "$want" ]]; then
		echo "containerd.sh: Debian's $pkg is $have, not $want; set the version to match" >&2
		exit 1
	fi
	dpkg-deb -x "$deb" "$stage/$pkg"
	echo "containerd.sh: $pkg $have" >&2
}

# pack <dir> <archive> <members...>: a reproducible tar.gz of dir's members.
pack() {
	local dir=$1 archive=$2
	shift 2
	tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$@" |
		gzip -n -9 >"$archive"
}

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

fetch containerd "$containerd_version"
fetch runc "$runc_version"
fetch containernetworking-plugins "$cni_version"

# containerd: bin/ holds the binaries, as in the upstream tarball.
mkdir -p "$stage/containerd-tar/bin"
for b in containerd containerd-shim containerd-shim-runc-v1 containerd-shim-runc-v2 ctr; do
	install -m 0755 "$stage/containerd/usr/bin/$b" "$stage/containerd-tar/bin/$b"
done
name=containerd-$containerd_version-linux-$arch.tar.gz
pack "$stage/containerd-tar" "$stage/$name" bin
publish "$containerd_dir" "$stage/$name" "$name.sha256sum"

# runc: a bare binary named runc.<arch>; upstream's runc.sha256sum lists it.
install -m 0755 "$stage/runc/usr/sbin/runc" "$stage/runc.$arch"
publish "$runc_dir" "$stage/runc.$arch" runc.sha256sum

# CNI plugins: flat, members ./bridge etc., as upstream.
mkdir -p "$stage/cni-tar"
for p in "$stage"/containernetworking-plugins/usr/lib/cni/*; do
	install -m 0755 "$p" "$stage/cni-tar/$(basename "$p")"
done
name=cni-plugins-linux-$arch-v$cni_version.tgz
pack "$stage/cni-tar" "$stage/$name" .
publish "$cni_dir" "$stage/$name" "$name.sha256"

echo "$out"
