#!/usr/bin/env bash
# Builds flannel's pieces from the Go module proxy for kubexm's tests.
#
# Usage: flannel.sh [cni-plugin|flanneld]
#
# cni-plugin (the default) lays out the flannel CNI plugin as the releases of
# github.com/flannel-io/cni-plugin do:
#
#   $OUT/flannel-io/cni-plugin/releases/download/$VER/
#     cni-plugin-flannel-linux-$ARCH-$VER.tgz          member: flannel-$ARCH
#     cni-plugin-flannel-linux-$ARCH-$VER.tgz.sha256   (and .sha1, .sha512; sha256sum format)
#     SHA256SUMS
#
#   and prints $OUT on its last line. About the version: the proxy refuses
#   github.com/flannel-io/cni-plugin, and Debian's containernetworking-plugins
#   1.1.1 no longer has the plugin, so it is built from its earlier home,
#   github.com/containernetworking/plugins@v0.9.1 (plugins/meta/flannel), and
#   $VER is that module's version, v0.9.1, not a flannel-io/cni-plugin
#   version (those start at v1.0.0). Run with no CNI_COMMAND, the binary says
#   "CNI flannel plugin v0.9.1". It is the same plugin (flannel-io/cni-plugin
#   was split out of that directory): it reads /run/flannel/subnet.env and
#   delegates to the bridge and host-local plugins. But it speaks CNI spec
#   versions up to 0.4.0 only, so the conflist must say "cniVersion": "0.3.1"
#   or "0.4.0", not "1.0.0" as flannel v0.28.10's kube-flannel.yml does.
#
# flanneld builds flanneld, install-conf and mk-docker-opts.sh of
# github.com/flannel-io/flannel at $FLANNEL_VERSION (for images.sh's flannel
# image) into $KUBEXM_TEST_CACHE/artifacts/flannel/$FLANNEL_VERSION/$ARCH and
# prints that directory on its last line. install-conf, which the install-cni
# init container of v0.28.10's kube-flannel.yml runs, is built only for
# versions that have cmd/install_conf (v0.28.10 has, v0.26.7 has not). As in
# upstream's Makefile, flanneld is built with cgo on amd64 (the UDP backend
# is C) and linked static (glibc here, musl upstream; with the netgo and
# osusergo tags, so no NSS modules are needed), and without cgo elsewhere.
#
# Both build in throwaway modules under $KUBEXM_TEST_CACHE/build/, one build
# at a time (flock), and leave alone what is already there (FORCE=1 redoes
# it). The tarballs are reproducible (fixed order, owner and times; gzip
# without a timestamp; -trimpath builds).
#
# Environment:
#   FLANNEL_VERSION          flannel to build (default v0.28.10, the newest the proxy serves)
#   CNI_FLANNEL_VERSION      containernetworking/plugins version to take the plugin from
#                            (default v0.9.1; v1.0.0 dropped plugins/meta/flannel)
#   TENCENTCLOUD_SDK_VERSION what flanneld's Tencent Cloud SDK is replaced with (v1.0.1000)
#   GOARCH                   target architecture (default: the host's)
#   KUBEXM_TEST_CACHE        root of the test cache (default /var/cache/kubexm-test)
#   KUBEXM_TEST_RELEASE_DIR  = $OUT (default $KUBEXM_TEST_CACHE/release)
#   FORCE=1                  rebuild / lay out again
set -euo pipefail

what=${1:-cni-plugin}
flannel_version=${FLANNEL_VERSION:-v0.28.10}
cni_version=${CNI_FLANNEL_VERSION:-v0.9.1}
arch=${GOARCH:-$(go env GOARCH)}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}/release}

export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
mkdir -p "$cache/build"

# go_module <dir> <module path>: a throwaway module in <dir> that requires
# the modules in the array mod_require, replaces those in mod_replace
# ("old => new version" lines) and blank-imports the main packages in
# mod_packages; tidied only when that changed since the last tidy.
go_module() {
	local dir=$1 modname=$2 p
	mkdir -p "$dir"
	{
		printf 'module %s\n\ngo 1.24.0\n\nrequire (\n' "$modname"
		printf '\t%s\n' "${mod_require[@]}"
		printf ')\n'
		if [[ ${#mod_replace[@]} -gt 0 ]]; then
			printf '\nreplace (\n'
			printf '\t%s\n' "${mod_replace[@]}"
			printf ')\n'
		fi
	} >"$dir/go.mod.new"
	{
		printf '//go:build tools\n\n// Package tools keeps the main packages in the module graph.\npackage tools\n\nimport (\n'
		for p in "${mod_packages[@]}"; do
			printf '\t_ "%s"\n' "$p"
		done
		printf ')\n'
	} >"$dir/tools.go"
	if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.in" 2>/dev/null || [[ ! -s $dir/go.sum ]]; then
		cp "$dir/go.mod.new" "$dir/go.mod"
		rm -f "$dir/go.sum" "$dir/go.mod.in"
		echo "flannel.sh: resolving modules in $dir" >&2
		(cd "$dir" && go mod tidy)
		cp "$dir/go.mod.new" "$dir/go.mod.in"
	fi
	rm -f "$dir/go.mod.new"
	# tidy raises a requirement when a package is missing from the version
	# asked for; that would build another version under this one's name.
	local req m v have
	for req in "${mod_require[@]}"; do
		read -r m v <<<"$req"
		have=$(cd "$dir" && go list -m -f '{{.Version}}' "$m")
		if [[ $have != "$v" ]]; then
			rm -f "$dir/go.mod.in"
			echo "flannel.sh: $dir resolved $m to $have, not $v (a package missing from $v?)" >&2
			exit 1
		fi
	done
}

build_flanneld() {
	local dest=$cache/artifacts/flannel/$flannel_version/$arch
	exec 9>"$cache/build/flannel-$flannel_version.lock"
	flock 9
	# flanneld is moved into place last, so it means the build is complete.
	if [[ ${FORCE:-0} != 1 && -x $dest/flanneld && -f $dest/mk-docker-opts.sh ]]; then
		echo "flannel.sh: flanneld $flannel_version/$arch already built in $dest (FORCE=1 rebuilds)" >&2
		echo "$dest"
		return
	fi
	local mod=$cache/build/flannel-$flannel_version
	# `go install` would do, but for the Tencent Cloud SDK: flannel v0.28.10
	# requires tencentcloud/common v1.3.190 and tencentcloud/vpc v1.3.188,
	# which the proxy refuses (403), and it serves no later vpc (vpc v1.1.0
	# downloads but is not in the checksum database). The throwaway module
	# replaces both with v1.0.1000 (2024-09), which has the vpc/v20170312
	# API flannel calls. Only the tencentvpc backend (Tencent Cloud VPC
	# routes) uses the SDK, and these tests never use that backend.
	mod_require=("github.com/flannel-io/flannel $flannel_version")
	mod_replace=(
		"github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common => github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common ${TENCENTCLOUD_SDK_VERSION:-v1.0.1000}"
		"github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc => github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc ${TENCENTCLOUD_SDK_VERSION:-v1.0.1000}"
	)
	# install-conf (what kube-flannel.yml's install-cni init container runs
	# in v0.28.10; v0.26.7 has no cmd/install_conf) is built when the
	# version has it.
	local src
	src=$(cd "$cache/build" && go mod download -json "github.com/flannel-io/flannel@$flannel_version" |
		sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	mod_packages=(github.com/flannel-io/flannel)
	if [[ -d $src/cmd/install_conf ]]; then
		mod_packages+=(github.com/flannel-io/flannel/cmd/install_conf)
	fi
	go_module "$mod" example.com/kubexm-flannelbuild
	mkdir -p "$dest"
	local tmp
	tmp=$(mktemp -d "$dest/.build.XXXXXX")
	# shellcheck disable=SC2064 # expand now: $tmp is local
	trap "rm -rf '$tmp'" EXIT
	echo "flannel.sh: building flanneld $flannel_version ($arch) into $dest" >&2
	local cgo=0
	if [[ $arch == amd64 ]]; then
		cgo=1
	fi
	(
		cd "$mod"
		CGO_ENABLED=$cgo go build -trimpath -tags=netgo,osusergo \
			-ldflags="-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$flannel_version -extldflags -static" \
			-o "$tmp/flanneld" github.com/flannel-io/flannel
		if [[ " ${mod_packages[*]} " == *" github.com/flannel-io/flannel/cmd/install_conf "* ]]; then
			go build -trimpath -ldflags="-s -w" -o "$tmp/install-conf" github.com/flannel-io/flannel/cmd/install_conf
		fi
		install -m 0755 "$src/dist/mk-docker-opts.sh" "$tmp/mk-docker-opts.sh"
	)
	rm -f "$dest/install-conf"
	for b in install-conf mk-docker-opts.sh flanneld; do
		if [[ -f $tmp/$b ]]; then
			mv -f "$tmp/$b" "$dest/$b"
		fi
	done
	if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
		echo "flannel.sh: flanneld --version: $("$dest/flanneld" --version 2>&1)" >&2
	fi
	echo "$dest"
}

cni_plugin() {
	local dest=$out/flannel-io/cni-plugin/releases/download/$cni_version
	local name=cni-plugin-flannel-linux-$arch-$cni_version.tgz
	exec 9>"$cache/build/cni-plugin-flannel-$cni_version.lock"
	flock 9
	if [[ ${FORCE:-0} != 1 && -f $dest/$name && -f $dest/$name.sha256 && -f $dest/SHA256SUMS ]] &&
		grep -q " $name\$" "$dest/SHA256SUMS"; then
		echo "flannel.sh: $name already in $dest (FORCE=1 redoes it)" >&2
		echo "$out"
		return
	fi
	if [[ ! $cni_version =~ ^v0\.([0-9]+)\.[0-9]+$ ]] || ((BASH_REMATCH[1] > 9)); then
		echo "flannel.sh: CNI_FLANNEL_VERSION=$cni_version: the flannel plugin left containernetworking/plugins after v0.9.x" >&2
		exit 2
	fi
	local mod=$cache/build/cni-plugins-$cni_version
	mod_require=("github.com/containernetworking/plugins $cni_version")
	mod_replace=()
	mod_packages=(github.com/containernetworking/plugins/plugins/meta/flannel)
	go_module "$mod" example.com/kubexm-cniflannelbuild
	local stage
	stage=$(mktemp -d)
	# shellcheck disable=SC2064 # expand now: $stage is local
	trap "rm -rf '$stage'" EXIT
	echo "flannel.sh: building the flannel CNI plugin from containernetworking/plugins $cni_version ($arch)" >&2
	(
		cd "$mod"
		go build -trimpath \
			-ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$cni_version" \
			-o "$stage/flannel-$arch" github.com/containernetworking/plugins/plugins/meta/flannel
	)
	chmod 0755 "$stage/flannel-$arch"
	touch -d @0 "$stage/flannel-$arch"
	if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
		# With no CNI_COMMAND the plugin names itself; VERSION lists the
		# CNI spec versions it takes (up to 0.4.0: a conflist must not say
		# "cniVersion": "1.0.0", as flannel v0.28.10's kube-flannel.yml does).
		echo "flannel.sh: $("$stage/flannel-$arch" </dev/null 2>&1)," \
			"spec versions $(CNI_COMMAND=VERSION "$stage/flannel-$arch" </dev/null)" >&2
	fi
	tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "flannel-$arch" |
		gzip -n -9 >"$stage/$name"
	mkdir -p "$dest"
	mv -f "$stage/$name" "$dest/$name"
	(
		cd "$dest"
		for alg in sha1 sha256 sha512; do
			"${alg}sum" -- "$name" >"$name.$alg.tmp"
			mv -f "$name.$alg.tmp" "$name.$alg"
		done
		sha256sum -- *.tgz >SHA256SUMS.tmp
		mv -f SHA256SUMS.tmp SHA256SUMS
	)
	echo "flannel.sh: $(cat "$dest/$name.sha256")" >&2
	echo "$out"
}

case $what in
cni-plugin) cni_plugin ;;
flanneld) build_flanneld ;;
*)
	echo "usage: flannel.sh [cni-plugin|flanneld]" >&2
	exit 2
	;;
esac
