#!/usr/bin/env bash
# Lays out the Kubernetes binaries built by kubernetes.sh as dl.k8s.io
# serves them, for the roles' tests:
#
#   $OUT/kubernetes/release/$KUBE_VERSION/bin/linux/$ARCH/<binary>
#   $OUT/kubernetes/release/$KUBE_VERSION/bin/linux/$ARCH/<binary>.sha256   hex digest only
#   $OUT/kubernetes/release/$KUBE_VERSION/bin/linux/$ARCH/<binary>.sha512   hex digest only
#
# The checksum files hold just the hex digest with no name and no newline,
# exactly as dl.k8s.io's do (`echo "$(cat kubectl.sha256)  kubectl" |
# sha256sum -c` is upstream's documented check), so a file server rooted at
# $OUT/kubernetes can stand in for https://dl.k8s.io. The binaries are hard
# links to kubernetes.sh's output when it is on the same file system, copies
# otherwise. When every binary and its .sha256 are already there, the
# directory is left alone (FORCE=1 lays it out again; it does not rebuild).
#
# Usage: kubernetes-release.sh [BINARY...]
#   BINARY is any of kubernetes.sh's (default: kube-apiserver
#   kube-controller-manager kube-scheduler kubelet kube-proxy kubectl);
#   missing ones are built by kubernetes.sh, which takes a lock, so a build
#   already running is waited for rather than repeated.
#
# Environment: KUBE_VERSION (default v1.37.2), GOARCH (default the host's),
# KUBEXM_TEST_CACHE (default /var/cache/kubexm-test), KUBEXM_TEST_K8S_DIR
# (kubernetes.sh's output), KUBEXM_TEST_RELEASE_DIR = $OUT (default
# $KUBEXM_TEST_CACHE/release), FORCE=1.
# Prints the directory holding the binaries on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${KUBE_VERSION:-v1.37.2}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}/release}
dest=$out/kubernetes/release/$version/bin/linux/$arch

bins=("$@")
if [[ ${#bins[@]} -eq 0 ]]; then
	bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
fi

done_already() {
	local b
	for b in "${bins[@]}"; do
		[[ -f $dest/$b && -s $dest/$b.sha256 ]] || return 1
	done
}

if [[ ${FORCE:-0} != 1 ]] && done_already; then
	echo "kubernetes-release.sh: ${bins[*]} $version/$arch already in $dest (FORCE=1 lays them out again)" >&2
	echo "$dest"
	exit 0
fi

# FORCE here means "lay out again", not "rebuild": kubernetes.sh gets no FORCE.
src=$(env -u FORCE KUBE_VERSION="$version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" \
	"$here/kubernetes.sh" "${bins[@]}" | tail -n1)

mkdir -p "$cache/build" "$dest"
exec 9>"$cache/build/kubernetes-release-$version-$arch.lock"
flock 9
# Another caller may have laid it out while this one waited.
if [[ ${FORCE:-0} != 1 ]] && done_already; then
	echo "$dest"
	exit 0
fi

for b in "${bins[@]}"; do
	# The checksums go first to a temporary name and the binary is replaced
	# by rename, so a reader never sees a binary with a stale checksum file
	# left beside it as if it were complete.
	rm -f "$dest/$b.sha256" "$dest/$b.sha512"
	if [[ ! $dest/$b -ef $src/$b ]]; then
		ln -f "$src/$b" "$dest/.$b.tmp" 2>/dev/null || cp -f "$src/$b" "$dest/.$b.tmp"
		chmod 0755 "$dest/.$b.tmp"
		mv -f "$dest/.$b.tmp" "$dest/$b"
	fi
	for alg in sha256 sha512; do
		sum=$("${alg}sum" <"$dest/$b")
		printf '%s' "${sum%% *}" >"$dest/.$b.$alg.tmp"
		mv -f "$dest/.$b.$alg.tmp" "$dest/$b.$alg"
	done
	echo "kubernetes-release.sh: $(cat "$dest/$b.sha256")  $b" >&2
done
echo "$dest"
