#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl from the Go module proxy for kubexm's tests.
#
# `go install go.etcd.io/etcd/server/v3@VERSION` is refused because etcd's
# go.mod has replace directives, so a throwaway module requires the three
# module roots and builds them (see /work/shared/notes/test-artifacts.md §2).
#
# Environment:
#   ETCD_VERSION          v3.5.x, v3.6.x or v3.7.x to build (default v3.7.3)
#   GOARCH                target architecture (default: the host's)
#   KUBEXM_TEST_ETCD_DIR  where the binaries go
#                         (default /var/cache/kubexm-test/artifacts/etcd/$ETCD_VERSION/$GOARCH)
#   KUBEXM_TEST_CACHE     root of the test cache (default /var/cache/kubexm-test);
#                         the build module lives in $KUBEXM_TEST_CACHE/build/
#   FORCE=1               rebuild even when the binaries are there
#
# Prints the directory holding the binaries on its last line.
set -euo pipefail

version=${ETCD_VERSION:-v3.7.3}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_ETCD_DIR:-$cache/artifacts/etcd/$version/$arch}

# The module set differs per minor: 3.5 has client/v2 (numbered
# v2.30<minor>.<patch>) and raft inside etcd; 3.6 and 3.7 dropped client/v2
# and moved raft to go.etcd.io/raft/v3, which the server's go.mod pins.
# The modules' replace directives point into etcd's own tree and are ignored
# for a dependency; 3.7's go.mod wants Go 1.26.0 (`go mod tidy` raises this
# module's go line to it).
case $version in
v3.5.*) extra=$'\tgo.etcd.io/etcd/client/v2 v2.305.'"${version##*.}"$'\n\tgo.etcd.io/etcd/raft/v3 '"$version" ;;
v3.6.* | v3.7.*) extra= ;;
*)
	echo "etcd.sh: ETCD_VERSION=$version: only v3.5.x, v3.6.x and v3.7.x are supported" >&2
	exit 2
	;;
esac
if [[ ! $version =~ ^v3\.[567]\.[0-9]+$ ]]; then
	echo "etcd.sh: ETCD_VERSION=$version: want v3.<minor>.<patch>" >&2
	exit 2
fi

mkdir -p "$cache/build"
exec 9>"$cache/build/etcd-$version.lock"
flock 9

if [[ ${FORCE:-0} != 1 && -x $out/etcd && -x $out/etcdctl && -x $out/etcdutl ]]; then
	echo "etcd.sh: $version/$arch already built in $out (FORCE=1 rebuilds)" >&2
	echo "$out"
	exit 0
fi

mod=$cache/build/etcd-$version
mkdir -p "$mod" "$out"
cat >"$mod/go.mod" <<GOMOD
module example.com/kubexm-etcdbuild

go 1.23.0

require (
	go.etcd.io/etcd/etcdctl/v3 $version
	go.etcd.io/etcd/etcdutl/v3 $version
	go.etcd.io/etcd/server/v3 $version
	go.etcd.io/etcd/api/v3 $version
	go.etcd.io/etcd/client/pkg/v3 $version
	go.etcd.io/etcd/client/v3 $version
	go.etcd.io/etcd/pkg/v3 $version
$extra
)
GOMOD
cat >"$mod/tools.go" <<'GO'
//go:build tools

// Package tools keeps the etcd main packages in the module graph.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
GO

export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
cd "$mod"
echo "etcd.sh: resolving modules for etcd $version" >&2
go mod tidy
echo "etcd.sh: building etcd $version ($arch) into $out" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# One invocation for the three shares the compilation of their common
# packages; the server's main package is its module root, named "server".
go build -trimpath -ldflags='-s -w' -o "$tmp/" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdutl/v3
mv -f "$tmp/server" "$tmp/etcd"
# Move into place only after all three built, so a half build never looks done.
for b in etcd etcdctl etcdutl; do
	mv -f "$tmp/$b" "$out/$b"
done
if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
	"$out/etcd" --version >&2
fi
echo "$out"
