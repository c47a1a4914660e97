#!/usr/bin/env bash
# Builds Kubernetes binaries from the Go module proxy for kubexm's tests.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
# with ./staging paths, so `go install` is refused; a throwaway module pins
# every staging module (the list read from kubernetes' own go.mod at that
# version) with its own replace block instead. The proxy serves the sample-*
# staging modules only for some versions, and only k8s.io/sample-apiserver is
# in the module graph, so a local empty stub stands in for it. v1.35.4,
# v1.36.3 and v1.37.2 have every other staging module on the proxy.
#
# Usage: kubernetes.sh [BINARY...]
#   BINARY is one of kube-apiserver kube-controller-manager kube-scheduler
#   kubelet kube-proxy kubectl kubeadm (default: all seven). Binaries already
#   in the output directory are not rebuilt.
# Usage: kubernetes.sh e2e.test ginkgo agnhost sample-apiserver nonewprivs
#   The conformance suite (make conformance): `go test -c -vet=off` of
#   k8s.io/kubernetes/test/e2e, the ginkgo CLI at the version kubernetes
#   requires, and what its images run (images.sh): agnhost and nonewprivs
#   (test/images/...), sample-apiserver (k8s.io/sample-apiserver). test/e2e imports
#   k8s.io/sample-apiserver for real, so these are built in a module of their
#   own (build/kubernetes-<version>-e2e, its own lock, so an hour-long build
#   does not hold up callers of the seven binaries) that takes the real
#   sample-apiserver v0.<minor>.<patch> from the proxy, which serves it for
#   v1.35.4 and v1.37.2 but not v1.33.13 or v1.36.3. Same flags and
#   dependency versions as the binaries, so the Go build cache they left is
#   reused. Cannot be mixed with the seven in one call.
#
# Environment:
#   KUBE_VERSION          v1.x.y to build (default v1.37.2)
#   GOARCH                target architecture (default: the host's)
#   KUBEXM_TEST_K8S_DIR   where the binaries go
#                         (default /var/cache/kubexm-test/artifacts/kubernetes/$KUBE_VERSION/$GOARCH)
#   KUBEXM_TEST_CACHE     root of the test cache (default /var/cache/kubexm-test);
#                         the build module lives in $KUBEXM_TEST_CACHE/build/
#   FORCE=1               rebuild even when the binaries are there
#
# Prints the directory holding the binaries on its last line.
set -euo pipefail

all=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl kubeadm)
tests=(e2e.test ginkgo agnhost sample-apiserver nonewprivs)
version=${KUBE_VERSION:-v1.37.2}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_K8S_DIR:-$cache/artifacts/kubernetes/$version/$arch}

if [[ ! $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
	echo "kubernetes.sh: KUBE_VERSION=$version: want v1.<minor>.<patch>" >&2
	exit 2
fi
minor=${BASH_REMATCH[1]}
staging=v0.$minor.${BASH_REMATCH[2]}

wanted=("$@")
if [[ ${#wanted[@]} -eq 0 ]]; then
	wanted=("${all[@]}")
fi
# flavor: "" for the seven binaries, "-e2e" for the test binaries.
flavor=
known=("${all[@]}")
if [[ " ${tests[*]} " == *" ${wanted[0]} "* ]]; then
	flavor=-e2e
	known=("${tests[@]}")
fi
for b in "${wanted[@]}"; do
	if [[ " ${known[*]} " != *" $b "* ]]; then
		echo "kubernetes.sh: unknown binary \"$b\"; want some of: ${all[*]}, or some of: ${tests[*]} (not both in one call)" >&2
		exit 2
	fi
done

# One build at a time per version and flavor: concurrent callers (CI stages,
# e2e suites, a developer's make) share the module directory and the output,
# and a caller that waited finds what the other one built.
mkdir -p "$cache/build"
exec 9>"$cache/build/kubernetes-$version$flavor.lock"
flock 9

todo=()
for b in "${wanted[@]}"; do
	if [[ ${FORCE:-0} == 1 || ! -x $out/$b ]]; then
		todo+=("$b")
	fi
done
if [[ ${#todo[@]} -eq 0 ]]; then
	echo "kubernetes.sh: ${wanted[*]} $version/$arch already built in $out (FORCE=1 rebuilds)" >&2
	echo "$out"
	exit 0
fi

mod=$cache/build/kubernetes-$version$flavor
mkdir -p "$mod" "$out"
export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

# The staging modules differ per minor (v1.36 added cri-streaming and
# streaming), so the replace list comes from kubernetes' own go.mod at that
# version: each `k8s.io/x => ./staging/...` line becomes `k8s.io/x =>
# k8s.io/x v0.<minor>.<patch>`. The sample-* modules are not needed by any
# binary built here and the proxy serves them only for some versions, so
# only sample-apiserver (the one kubernetes requires) is kept, as a stub.
kmod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
if [[ ! -s $kmod ]]; then
	echo "kubernetes.sh: cannot fetch the go.mod of k8s.io/kubernetes@$version from the module proxy" >&2
	exit 1
fi
staging_mods=$(sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*|\1|p' "$kmod" | grep -v '^k8s\.io/sample-' | sort -u)
if [[ -z $staging_mods ]]; then
	echo "kubernetes.sh: no staging replace lines in $kmod" >&2
	exit 1
fi
# kubernetes' own go and godebug lines (only the main module's godebug
# applies, and v1.37 needs go 1.26).
go_line=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kmod")
godebug_line=$(grep -m1 '^godebug ' "$kmod" || true)
{
	cat <<GOMOD
module example.com/kubexm-k8sbuild

go ${go_line:-1.24.0}

$godebug_line

require k8s.io/kubernetes $version

replace (
GOMOD
	for m in $staging_mods; do
		printf '\t%s => %s %s\n' "$m" "$m" "$staging"
	done
	if [[ -n $flavor ]]; then
		printf '\tk8s.io/sample-apiserver => k8s.io/sample-apiserver %s\n)\n' "$staging"
	else
		printf '\tk8s.io/sample-apiserver => ./stub/sample-apiserver\n)\n'
	fi
} >"$mod/go.mod.new"
# Keep the tidied go.mod and go.sum when the requirements did not change, so
# a second run does not resolve the module graph again.
if ! cmp -s "$mod/go.mod.new" "$mod/go.mod.in" 2>/dev/null || [[ ! -s $mod/go.sum ]]; then
	cp "$mod/go.mod.new" "$mod/go.mod"
	cp "$mod/go.mod.new" "$mod/go.mod.in"
	rm -f "$mod/go.sum"
	tidy=1
fi
rm -f "$mod/go.mod.new"
if [[ -n $flavor ]]; then
	tool_pkgs=(k8s.io/kubernetes/test/e2e k8s.io/kubernetes/test/images/agnhost github.com/onsi/ginkgo/v2/ginkgo
		k8s.io/sample-apiserver k8s.io/kubernetes/test/images/nonewprivs)
else
	mkdir -p "$mod/stub/sample-apiserver"
	printf 'module k8s.io/sample-apiserver\n\ngo %s\n' "${go_line:-1.24.0}" >"$mod/stub/sample-apiserver/go.mod"
	tool_pkgs=()
	for b in "${all[@]}"; do
		tool_pkgs+=("k8s.io/kubernetes/cmd/$b")
	done
fi
{
	printf '//go:build tools\n\n// Package tools keeps the Kubernetes main packages in the module graph.\npackage tools\n\nimport (\n'
	for p in "${tool_pkgs[@]}"; do
		printf '\t_ "%s"\n' "$p"
	done
	printf ')\n'
} >"$mod/tools.go"

cd "$mod"
if [[ ${tidy:-0} == 1 ]]; then
	echo "kubernetes.sh: resolving modules for Kubernetes $version" >&2
	if ! go mod tidy; then
		rm -f go.mod.in
		exit 1
	fi
fi

# The version variables are what `make` sets (hack/lib/version.sh). buildDate
# is the tag's time from the proxy rather than now, so a rebuild links the
# same binary and is a build-cache hit.
build_date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
	ldflags+=" -X $p.gitTreeState=clean -X $p.gitCommit= -X $p.buildDate=$build_date"
done
pkgs=()
e2e_test=0
for b in "${todo[@]}"; do
	case $b in
	e2e.test) e2e_test=1 ;;
	ginkgo) pkgs+=(github.com/onsi/ginkgo/v2/ginkgo) ;;
	agnhost | nonewprivs) pkgs+=("k8s.io/kubernetes/test/images/$b") ;;
	sample-apiserver) pkgs+=(k8s.io/sample-apiserver) ;;
	*) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
	esac
done

echo "kubernetes.sh: building ${todo[*]} $version ($arch) into $out" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
flags=(-trimpath "-tags=selinux,notest" "-ldflags=$ldflags")
# e2e_test.go's imports are outside `go mod tidy`'s view (it skips the tests
# of dependencies), so -mod=mod adds their go.sum lines; the module graph
# itself is kubernetes' and stays.
if [[ -n $flavor ]]; then
	flags+=(-mod=mod)
fi
if [[ ${#pkgs[@]} -gt 0 ]]; then
	go build "${flags[@]}" -o "$tmp/" "${pkgs[@]}"
fi
# vet of the whole suite costs a quarter of the build and finds nothing in
# upstream's released code.
if [[ $e2e_test == 1 ]]; then
	go test -c -vet=off "${flags[@]}" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e
fi
# Move into place only after the whole build succeeded, so a half build never
# looks done.
for b in "${todo[@]}"; do
	mv -f "$tmp/$b" "$out/$b"
done
if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	for b in "${todo[@]}"; do
		case $b in
		kubectl) "$out/$b" version --client >&2 ;;
		kubeadm) echo "kubeadm $("$out/$b" version -o short)" >&2 ;;
		e2e.test) "$out/$b" --version >&2 ;;
		ginkgo) "$out/$b" version >&2 ;;
		agnhost) "$out/$b" --help 2>&1 | sed -n 1p >&2 ;;
		sample-apiserver) "$out/$b" --help 2>&1 | sed -n 1p >&2 ;;
		nonewprivs) "$out/$b" >&2 ;;
		*) "$out/$b" --version >&2 ;;
		esac
	done
fi
echo "$out"
