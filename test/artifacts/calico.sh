#!/usr/bin/env bash
# Builds calico for kubexm's tests from calico's release source, which the Go
# module proxy does not serve: the archives in $KUBEXM_SOURCES_DIR (default
# ../shared/sources beside the repository; see its README.md), each checked
# against the sha256 below before it is unpacked.
#
# Usage: calico.sh [images|binaries]
#
# images (the default) runs `images.sh calico`: the images a calico
# cluster needs, as OCI tarballs in $OUT/images (see images.sh for their
# root file systems):
#   calico-node-$VER-$ARCH.tar              docker.io/calico/node:$VER
#   calico-cni-$VER-$ARCH.tar               docker.io/calico/cni:$VER
#   calico-kube-controllers-$VER-$ARCH.tar  docker.io/calico/kube-controllers:$VER
#   calico-typha-$VER-$ARCH.tar             docker.io/calico/typha:$VER
#
# binaries builds, into $KUBEXM_TEST_CACHE/artifacts/calico/$VER/$ARCH, and
# prints that directory on its last line:
#   calico-node       node/cmd/calico-node: felix, confd, the startup and
#                     the node's other services in one binary, as upstream
#   calico, calico-ipam   the CNI plugins (one binary, chosen by its name)
#   install           cni-plugin/cmd/install: calico/cni's install-cni
#   kube-controllers, check-status, wrapper   kube-controllers/cmd/*
#   calico-typha      typha/cmd/calico-typha (the role runs it from
#                     calico_typha_threshold nodes up), and typha.cfg
#   bird, bird6, birdcl, birdcl6   calico's BIRD fork, from its C source, as
#                     its create_binaries.sh: protocols bfd bgp pipe static,
#                     pthreads, linked static, run state in /var/run/calico
#   filesystem/       calico-node's files from the archive, as node/Makefile
#                     assembles them: node/filesystem (the runit services,
#                     rc.local, start_runit, felix.cfg) and confd's conf.d
#                     and templates (BIRD's configuration) in etc/calico/confd
#   VERSION           what was built, from which archives (sha256)
# Go binaries are built with CGO_ENABLED=0, -trimpath, -s -w and calico's
# buildinfo version and commit. Upstream builds calico-node with cgo against
# libbpf for the eBPF dataplane; without cgo that dataplane and its BPF
# object files are left out, and calico-node runs its iptables or nftables
# dataplane, which is what kubexm configures (upstream's non-cgo
# architectures build it the same way).
#
# One build per version at a time (flock); what is built is kept and reused
# (FORCE=1 builds again). Builds run under nice.
#
# Environment:
#   CALICO_VERSION     v3.32.1 (or v3.31.7, the previous minor, for upgrades)
#   BIRD_SOURCE        bird-v0.3.3-208-g1e2ff99d (calico v3.32.1 pins
#                      v0.3.3-211-g9111ec3c, three commits later, which is not
#                      among the sources)
#   KUBEXM_SOURCES_DIR where the archives are (default <repo>/../shared/sources)
#   KUBEXM_TEST_CACHE  /var/cache/kubexm-test; KUBEXM_TEST_RELEASE_DIR ($OUT)
#   GOARCH             only the host's (amd64 here); FORCE=1
set -euo pipefail

what=${1:-images}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
calico_version=${CALICO_VERSION:-v3.32.1}
bird_source=${BIRD_SOURCE:-bird-v0.3.3-208-g1e2ff99d}
sources=${KUBEXM_SOURCES_DIR:-$repo/../shared/sources}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
arch=$(dpkg --print-architecture)

if [[ -n ${GOARCH:-} && $GOARCH != "$arch" ]]; then
	echo "calico.sh: GOARCH=$GOARCH: only the host's architecture ($arch) is supported" >&2
	exit 2
fi

case $what in
images)
	exec env CALICO_VERSION="$calico_version" "$here/images.sh" calico
	;;
binaries) ;;
*)
	echo "calico.sh: unknown target \"$what\"; want images or binaries" >&2
	exit 2
	;;
esac

# The archives this script knows, with the sha256 and commit of
# ../shared/sources/README.md.
declare -A sum commit
sum[calico-v3.32.1]=dcd3b574adf2330cb9739c8ef69575f77c00a5969543d8f4dc817aacde9fc994
commit[calico-v3.32.1]=0ca9d1b93644778cafdf1812f3dda02ac0c361e8
sum[calico-v3.31.7]=447a8f2519cd34f8fe085b6609ad12c5c41a9109ebdd4b19ae36a348fd31307d
commit[calico-v3.31.7]=94bd1d5b0e04459d4d1c83653e0335a9201248b8
sum[bird-v0.3.3-208-g1e2ff99d]=fe297b26ddbe14a46788868425bed3ef534c6f5102a70d2aab0e1188d7b17bbd

calico_source=calico-$calico_version

export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
dest=$cache/artifacts/calico/$calico_version/$arch
mkdir -p "$cache/build"
exec 9>"$cache/build/calico-$calico_version.lock"
flock 9

# VERSION is written last, so it means the build is complete.
if [[ ${FORCE:-0} != 1 && -f $dest/VERSION ]]; then
	echo "calico.sh: calico $calico_version/$arch already built in $dest (FORCE=1 rebuilds)" >&2
	echo "$dest"
	exit 0
fi

# Only a build needs the archives: a cached build is used without them.
for s in "$calico_source" "$bird_source"; do
	if [[ -z ${sum[$s]:-} ]]; then
		echo "calico.sh: no known sha256 for $s.tar.gz; this script knows: ${!sum[*]}" >&2
		exit 2
	fi
	if [[ ! -f $sources/$s.tar.gz ]]; then
		echo "calico.sh: $sources/$s.tar.gz is missing (set KUBEXM_SOURCES_DIR to the directory of the release sources)" >&2
		exit 1
	fi
done

# unpack <archive name>: the archive, checked, under $cache/build/src/<name>
# (its top directory); kept while its checksum holds.
unpack() {
	local s=$1 dir=$cache/build/src
	if [[ -f $dir/$s/.kubexm-sha256 && $(cat "$dir/$s/.kubexm-sha256") == "${sum[$s]}" ]]; then
		return
	fi
	echo "${sum[$s]}  $sources/$s.tar.gz" | sha256sum -c --quiet || {
		echo "calico.sh: $sources/$s.tar.gz does not have the sha256 its README gives" >&2
		exit 1
	}
	rm -rf "${dir:?}/$s"
	mkdir -p "$dir"
	tar -xzf "$sources/$s.tar.gz" -C "$dir"
	if [[ ! -d $dir/$s ]]; then
		echo "calico.sh: $s.tar.gz has no top directory $s/" >&2
		exit 1
	fi
	echo "${sum[$s]}" >"$dir/$s/.kubexm-sha256"
}
unpack "$calico_source"
unpack "$bird_source"

stage=$(mktemp -d "$cache/build/.calico.XXXXXX")
trap 'rm -rf "$stage"' EXIT

src=$cache/build/src/$calico_source
t0=$SECONDS
echo "calico.sh: building calico $calico_version (Go)" >&2
ldflags="-s -w -X github.com/projectcalico/calico/pkg/buildinfo.Version=$calico_version"
ldflags+=" -X github.com/projectcalico/calico/pkg/buildinfo.GitRevision=${commit[$calico_source]}"
(cd "$src" && nice go build -trimpath -ldflags="$ldflags" -o "$stage/" \
	./node/cmd/calico-node ./cni-plugin/cmd/calico ./cni-plugin/cmd/install \
	./kube-controllers/cmd/kube-controllers ./kube-controllers/cmd/check-status ./kube-controllers/cmd/wrapper \
	./typha/cmd/calico-typha)
cp "$stage/calico" "$stage/calico-ipam"
cp "$src/typha/docker-image/typha.cfg" "$stage/typha.cfg"
echo "calico.sh: Go binaries in $((SECONDS - t0)) s" >&2

# BIRD as its create_binaries.sh builds it: IPv6 (bird6, birdcl6) and IPv4
# (bird, birdcl), each configured in a build directory of its own.
t0=$SECONDS
bsrc=$stage/bird-src
cp -a "$cache/build/src/$bird_source" "$bsrc"
(cd "$bsrc" && nice autoreconf >/dev/null 2>&1)
for v in 6 4; do
	obj=$stage/bird-obj$v
	mkdir -p "$obj"
	args=(--with-protocols="bfd bgp pipe static" --enable-client=no --enable-pthreads=yes --runstatedir=/var/run/calico)
	if [[ $v == 6 ]]; then
		args+=(--enable-ipv6=yes --with-sysconfig=linux-v6)
	else
		args+=(--with-sysconfig=linux)
	fi
	(cd "$obj" && nice "$bsrc/configure" "${args[@]}" >configure.log 2>&1) || {
		tail -n 30 "$obj/configure.log" >&2
		exit 1
	}
	# Named targets only: the default one rebuilds birdc through itself.
	(cd "$obj" && nice make -j"$(nproc)" CC="gcc --static" bird birdcl >make.log 2>&1) || {
		tail -n 30 "$obj/make.log" >&2
		exit 1
	}
	suffix=${v/4/}
	install -m 0755 "$obj/bird" "$stage/bird$suffix"
	install -m 0755 "$obj/birdcl" "$stage/birdcl$suffix"
done
strip "$stage"/bird "$stage"/bird6 "$stage"/birdcl "$stage"/birdcl6
echo "calico.sh: BIRD in $((SECONDS - t0)) s" >&2

"$stage/calico-node" -v >&2
"$stage/bird" --version >&2 2>&1 || true

# calico-node's file system, as node/Makefile copies it into the image.
fs=$stage/filesystem
cp -a "$src/node/filesystem" "$fs"
cp -a "$src/confd/etc/calico/confd/conf.d" "$src/confd/etc/calico/confd/templates" "$fs/etc/calico/confd/"
rm -f "$fs/etc/calico/confd/config/.gitkeep" "$fs/etc/calico/confd/templates/README.md"

mkdir -p "$dest"
rm -rf "$dest/filesystem"
mv "$fs" "$dest/filesystem"
for f in calico-node calico calico-ipam install kube-controllers check-status wrapper calico-typha typha.cfg \
	bird bird6 birdcl birdcl6; do
	mode=0755
	[[ $f == *.cfg ]] && mode=0644
	install -m "$mode" "$stage/$f" "$dest/$f.tmp"
	mv -f "$dest/$f.tmp" "$dest/$f"
done
{
	echo "calico $calico_version ${commit[$calico_source]} $calico_source.tar.gz sha256 ${sum[$calico_source]}"
	echo "bird $bird_source $bird_source.tar.gz sha256 ${sum[$bird_source]}"
} >"$dest/VERSION.tmp"
mv -f "$dest/VERSION.tmp" "$dest/VERSION"
echo "$dest"
