#!/usr/bin/env bash
# Builds the container images a kubexm test cluster needs, without any
# registry, as tarballs that `ctr -n k8s.io images import` (containerd 2)
# and `docker load` take:
#
#   $OUT/images/pause-$PAUSE_VERSION-$ARCH.tar        registry.k8s.io/pause:$PAUSE_VERSION
#   $OUT/images/coredns-$COREDNS_VERSION-$ARCH.tar    registry.k8s.io/coredns/coredns:$COREDNS_VERSION
#   $OUT/images/flannel-$FLANNEL_VERSION-$ARCH.tar    ghcr.io/flannel-io/flannel:$FLANNEL_VERSION
#   $OUT/images/busybox-$BUSYBOX_VERSION-$ARCH.tar    docker.io/library/busybox:$BUSYBOX_VERSION
#   $OUT/images/metrics-server-$METRICS_SERVER_VERSION-$ARCH.tar
#                                                   registry.k8s.io/metrics-server/metrics-server:$METRICS_SERVER_VERSION
#   $OUT/images/node-cache-$NODE_CACHE_TAG-$ARCH.tar registry.k8s.io/dns/k8s-dns-node-cache:$NODE_CACHE_TAG
#   $OUT/images/kube-vip-$KUBE_VIP_VERSION-$ARCH.tar ghcr.io/kube-vip/kube-vip:$KUBE_VIP_VERSION
#   and, for kubernetes.type kubeadm (asked by name, or all five as "kubeadm"):
#   $OUT/images/kube-apiserver-$KUBE_VERSION-$ARCH.tar registry.k8s.io/kube-apiserver:$KUBE_VERSION
#     (kube-controller-manager, kube-scheduler, kube-proxy the same way)
#   $OUT/images/etcd-$ETCD_IMAGE_TAG-$ARCH.tar         registry.k8s.io/etcd:$ETCD_IMAGE_TAG
#   and for the Kubernetes conformance suite (make conformance; asked by
#   name, or all as "conformance"), named as e2e.test v1.37.2's image list
#   (test/utils/image/manifest.go) with the registries moved to
#   $E2E_IMAGE_REGISTRY (default e2e.kubexm.local), which the suite is told
#   with KUBE_TEST_REPO_LIST (TestConformance writes it), so that no
#   name claims to be upstream's image:
#   $OUT/images/e2e-agnhost-2.66.1-$ARCH.tar           $E2E_IMAGE_REGISTRY/e2e-test-images/agnhost:2.66.1
#     (e2e-agnhost-prev agnhost:2.55, e2e-busybox busybox:1.37.0-2, e2e-nginx
#     nginx:1.27.0-2, e2e-nginx-new nginx:1.28.0-2, e2e-nautilus nautilus:1.8,
#     e2e-kitten kitten:1.8, e2e-nonewprivs nonewprivs:1.4,
#     e2e-sample-apiserver sample-apiserver:1.29.2, e2e-glibc-dns-testing
#     glibc-dns-testing:2.1.1 the same way;
#     e2e-etcd $E2E_IMAGE_REGISTRY/etcd:3.7.0-0)
#   and calico's (asked by name, or all four as "calico"; calico.sh runs
#   images.sh calico), from calico.sh's binaries of $CALICO_VERSION:
#   $OUT/images/calico-node-$CALICO_VERSION-$ARCH.tar docker.io/calico/node:$CALICO_VERSION
#   $OUT/images/calico-cni-$CALICO_VERSION-$ARCH.tar  docker.io/calico/cni:$CALICO_VERSION
#   $OUT/images/calico-kube-controllers-$CALICO_VERSION-$ARCH.tar
#                                                   docker.io/calico/kube-controllers:$CALICO_VERSION
#   $OUT/images/calico-typha-$CALICO_VERSION-$ARCH.tar docker.io/calico/typha:$CALICO_VERSION
#   $OUT/images/SHA256SUMS                            sha256sum format, every *.tar
#   $OUT/images/images.txt                            "<file> <image reference>" per line
#
# Usage: images.sh [pause|coredns|flannel|busybox|metrics-server|node-cache|kube-vip|kube-apiserver|
#                  kube-controller-manager|kube-scheduler|kube-proxy|etcd|kubeadm|
#                  e2e-...|conformance|calico-node|calico-cni|calico-kube-controllers|
#                  calico-typha|calico ...]
#   (default: pause coredns flannel busybox; kubeadm = the five kubeadm images;
#   conformance = the e2e-* images; metrics-server and node-cache only when
#   asked: make e2e-nodes asks for them; kube-vip when asked: the VIP suite's
#   kube-vip mode asks for it)
#
# Each image is a single layer assembled by imgtool (test/artifacts/imgtool,
# go-containerregistry; built from this repository) from:
#   pause    Kubernetes' own build/pause/linux/pause.c from the
#            k8s.io/kubernetes@$PAUSE_KUBE_VERSION module, gcc -Os -static
#            -DVERSION=$PAUSE_VERSION, stripped; /pause, user 65535:65535, as upstream.
#   coredns  `go install github.com/coredns/coredns@$COREDNS_VERSION` (static,
#            -trimpath -s -w) into a GOBIN of its own; /coredns. Upstream runs it
#            as nonroot with cap_net_bind_service as a file capability; this image
#            has no /etc/passwd, no file capabilities and no /etc/ssl/certs, so it
#            runs as root (kubeadm's Deployment still drops all capabilities but
#            NET_BIND_SERVICE).
#   flannel  flanneld, install-conf (if built) and mk-docker-opts.sh from flannel.sh
#            (/opt/bin, entrypoint /opt/bin/flanneld, as upstream) on a root file
#            system of Debian bookworm packages (apt-get download + dpkg-deb -x):
#            iptables with the alternatives set as Debian's postinst does, to the
#            nft backend by default (IPTABLES_BACKEND=legacy for the other), which
#            is what the Debian test hosts use; nftables (nft); netbase; their
#            libraries (checked with the dynamic loader inside the root file
#            system, so a missing one fails the build); and busybox-static's
#            applets in /bin (cp, sh, ... as upstream's Alpine base has). Checked
#            in a chroot: iptables -V, nft --version, flanneld --version.
#   metrics-server
#            `go install sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION`
#            (static, -trimpath -s -w); /metrics-server, user 65534, as upstream's
#            distroless image (which also has CA certificates and /etc/passwd;
#            metrics-server needs neither: it verifies kubelets with the cluster CA).
#   node-cache
#            NOT upstream's k8s-dns-node-cache (k8s.io/dns is not on the module
#            proxy): CoreDNS $NODE_CACHE_COREDNS_VERSION (`go install`, as coredns
#            above) at /coredns on the flannel image's root file system
#            (iptables with the same backend, ip, busybox), and /node-cache, a
#            shell script (node-cache.sh beside this file) taking node-cache's
#            flags (-localip, -conf, -interfacename, -setupinterface,
#            -setupiptables, -skipteardown, -syncinterval; others are
#            ignored) that does what node-cache does around CoreDNS: the dummy
#            interface holding the local addresses, the raw-table NOTRACK and
#            filter ACCEPT rules for port 53 (and the health port), kept in
#            place every -syncinterval, removed on SIGTERM (a bridge without
#            ports where the kernel has no dummy interfaces). Tagged
#            $NODE_CACHE_TAG (default coredns-<version>) so that the name says
#            what is inside. What upstream does and this does not: its
#            Corefile templating (__PILLAR__ variables from -upstreamsvc;
#            kubexm renders the Corefile itself), its metrics of the setup, and
#            the health-port check that restarts the interface.
#   kube-vip kube-vip.sh's build of the kube-vip release source archive
#            (../shared/sources, its sha256 checked) at /kube-vip, entrypoint
#            /kube-vip, as upstream's image (FROM scratch). Upstream's also
#            has CA certificates, which the control-plane VIP does not use
#            (it verifies the API server with its kubeconfig's CA).
#   kube-apiserver, kube-controller-manager, kube-scheduler
#            the binary kubernetes.sh built for $KUBE_VERSION at
#            /usr/local/bin/<name>, PATH set, as upstream's distroless images
#            (kubeadm's static pods run the command by name).
#   kube-proxy
#            kubernetes.sh's kube-proxy at /usr/local/bin/kube-proxy on the
#            flannel image's root file system (iptables, nft, the same
#            backend) plus conntrack and ipset, as upstream's image has.
#   etcd     etcd, etcdctl and etcdutl of etcd.sh ($ETCD_VERSION) in
#            /usr/local/bin. kubeadm v1.37 pins registry.k8s.io/etcd:3.7.0-0,
#            an etcd the tests do not build: the image is tagged
#            $ETCD_IMAGE_TAG (default <ETCD_VERSION without v>-0, 3.7.3-0)
#            and the test tells kubeadm that tag (kubeadm_etcd_image_version,
#            which ClusterConfiguration etcd.local.imageTag carries), so the
#            name says the etcd that is inside.
#   busybox  Debian's busybox-static, /bin/busybox with every applet as a
#            symlink in /bin (sh, nslookup, wget, ip, ping, ...), cmd ["sh"], as the
#            Docker Hub image; tagged with the package's upstream version.
#   e2e-agnhost, e2e-agnhost-prev
#            kubernetes.sh's agnhost of $KUBE_VERSION (test/images/agnhost) at
#            /agnhost (and agnhost-2), porter's localhost.crt/.key, /uploads,
#            user-defined-in-image (1000) in group-defined-in-image (50000), on a
#            root file system of Debian packages with the tools upstream's
#            Alpine image installs that the specs call: bash, curl, OpenBSD
#            netcat (nc), iproute2 (ip, ss), dig/nslookup (bind9-dnsutils),
#            socat, getent (libc-bin, with an nsswitch.conf of files then dns:
#            the DNS specs' "hosts" lookups run getent hosts), and
#            busybox-static's applets for the rest, bash as
#            /bin/sh (Debian's busybox sh prefers its applets to PATH); entrypoint
#            /agnhost, cmd pause. Without upstream's /coredns, iperf and
#            fake-registry content (no conformance spec uses them).
#   e2e-busybox
#            busybox-static's applets with bash as /bin/sh: upstream's
#            busybox 1.37 keeps environment variables with any name (Debian's
#            1.35 ash drops names with a "-") and its sh runs commands from
#            PATH (Debian's prefers its own applets); bash does both.
#   e2e-nginx, e2e-nginx-new
#            Debian's nginx with upstream's image layout: /etc/nginx/nginx.conf
#            serving /usr/share/nginx/html on port 80, logs to stdout/stderr,
#            cmd nginx -g 'daemon off;'.
#   e2e-nautilus, e2e-kitten
#            the agnhost image plus the picture and data.json of
#            test/images/{nautilus,kitten}/html, cmd test-webserver, as upstream.
#   e2e-nonewprivs
#            the busybox-static rootfs with kubernetes.sh's nonewprivs (nnp.go)
#            at /usr/local/bin/nnp, setuid root; cmd nnp.
#   e2e-sample-apiserver
#            kubernetes.sh's sample-apiserver (k8s.io/sample-apiserver at the
#            staging version of $KUBE_VERSION) at /sample-apiserver.
#   e2e-glibc-dns-testing
#            Debian's dash (as /bin/sh), bind9-dnsutils (dig, nslookup
#            linked with glibc, which the DNS specs query with beside
#            agnhost's), getent (libc-bin, nsswitch.conf as agnhost's) and
#            images.sh's CoreDNS at /coredns, as upstream's
#            debian:bookworm-slim + dnsutils + coredns.
#   e2e-etcd etcd.sh's $ETCD_VERSION under the tag the suite asks for
#            (3.7.0-0, an etcd the tests do not build); the aggregator spec
#            only runs it as the sample-apiserver's storage.
#   calico-node
#            calico.sh's calico-node (felix, confd, startup) and BIRD
#            (bird, bird6, birdcl, birdcl6) in /bin, calico's node/filesystem
#            and confd templates from the release archive (the runit services
#            and rc.local that start_runit runs, as upstream's image), on the
#            flannel image's root file system (iptables with the same backend,
#            nft) plus what upstream's image has that calico-node calls:
#            ipset, iproute2 (ip, tc), conntrack and Debian's runit
#            (runsvdir, sv, svlogd); cmd start_runit, SVDIR as upstream.
#            Without upstream's bpftool, BPF object files and libbpf (the
#            eBPF dataplane; calico.sh builds calico-node without cgo), its
#            iptables-legacy build (Debian's iptables has both backends) and
#            kmod, net-tools, procps and which (busybox's applets serve).
#   calico-cni
#            install, calico and calico-ipam in /opt/cni/bin, PATH and workdir
#            there, cmd install, as upstream's calico/cni; without the
#            containernetworking plugins upstream also ships (kubexm's
#            containerd role installs those, and the role skips them).
#   calico-kube-controllers
#            kube-controllers, check-status and wrapper in /usr/bin,
#            /status/status.json and /profiles owned by 999, user 999,
#            entrypoint wrapper kube-controllers, as upstream.
#   calico-typha
#            calico-typha in /usr/bin and typha.cfg in /etc/calico, user 999,
#            cmd calico-typha, as upstream.
#
# Every image is reproducible: the same inputs give the same tarball (files
# owned 0:0 with mtime 0, sorted; created 1970-01-01). A tarball that is
# there and listed in SHA256SUMS and images.txt is left alone (FORCE=1
# builds it again). One run at a time (flock); build products are kept under
# $KUBEXM_TEST_CACHE/build/ and artifacts/ so a second run is fast.
#
# Environment:
#   PAUSE_VERSION (3.10.2), PAUSE_KUBE_VERSION (v1.37.2: where pause.c comes from),
#   COREDNS_VERSION (v1.14.6), FLANNEL_VERSION (v0.28.10; see flannel.sh),
#   BUSYBOX_VERSION (1.35.0: must be Debian's busybox-static upstream version),
#   METRICS_SERVER_VERSION (v0.8.0), NODE_CACHE_COREDNS_VERSION (= COREDNS_VERSION),
#   NODE_CACHE_TAG (coredns-$NODE_CACHE_COREDNS_VERSION),
#   KUBE_VERSION (v1.37.2), ETCD_VERSION (v3.7.3), ETCD_IMAGE_TAG (3.7.3-0),
#   KUBE_VIP_VERSION (v1.2.3; kube-vip.sh's other variables pass through),
#   E2E_IMAGE_REGISTRY (e2e.kubexm.local), CALICO_VERSION (v3.32.1; see calico.sh),
#   IPTABLES_BACKEND (nft), KUBEXM_TEST_CACHE (/var/cache/kubexm-test),
#   KUBEXM_TEST_RELEASE_DIR = $OUT ($KUBEXM_TEST_CACHE/release), FORCE=1.
# Only the host's architecture (Debian packages and gcc of this machine).
# Needs root (chroot). Prints $OUT/images on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pause_version=${PAUSE_VERSION:-3.10.2}
pause_kube_version=${PAUSE_KUBE_VERSION:-v1.37.2}
coredns_version=${COREDNS_VERSION:-v1.14.6}
flannel_version=${FLANNEL_VERSION:-v0.28.10}
busybox_version=${BUSYBOX_VERSION:-1.35.0}
metrics_server_version=${METRICS_SERVER_VERSION:-v0.8.0}
# The CoreDNS the coredns image has: one CoreDNS build serves both.
node_cache_coredns_version=${NODE_CACHE_COREDNS_VERSION:-$coredns_version}
node_cache_tag=${NODE_CACHE_TAG:-coredns-$node_cache_coredns_version}
iptables_backend=${IPTABLES_BACKEND:-nft}
kube_version=${KUBE_VERSION:-v1.37.2}
etcd_version=${ETCD_VERSION:-v3.7.3}
etcd_image_tag=${ETCD_IMAGE_TAG:-${etcd_version#v}-0}
kube_vip_version=${KUBE_VIP_VERSION:-v1.2.3}
calico_version=${CALICO_VERSION:-v3.32.1}
cache=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
out=${KUBEXM_TEST_RELEASE_DIR:-${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}/release}
dest=$out/images
arch=$(dpkg --print-architecture)

if [[ -n ${GOARCH:-} && $GOARCH != "$arch" ]]; then
	echo "images.sh: GOARCH=$GOARCH: only the host's architecture ($arch) is supported" >&2
	exit 2
fi
if [[ $iptables_backend != nft && $iptables_backend != legacy ]]; then
	echo "images.sh: IPTABLES_BACKEND=$iptables_backend: want nft or legacy" >&2
	exit 2
fi

declare -A file ref
file[pause]=pause-$pause_version-$arch.tar
ref[pause]=registry.k8s.io/pause:$pause_version
file[coredns]=coredns-$coredns_version-$arch.tar
ref[coredns]=registry.k8s.io/coredns/coredns:$coredns_version
file[flannel]=flannel-$flannel_version-$arch.tar
ref[flannel]=ghcr.io/flannel-io/flannel:$flannel_version
file[busybox]=busybox-$busybox_version-$arch.tar
ref[busybox]=docker.io/library/busybox:$busybox_version
file[metrics-server]=metrics-server-$metrics_server_version-$arch.tar
ref[metrics-server]=registry.k8s.io/metrics-server/metrics-server:$metrics_server_version
file[node-cache]=node-cache-$node_cache_tag-$arch.tar
ref[node-cache]=registry.k8s.io/dns/k8s-dns-node-cache:$node_cache_tag
file[kube-vip]=kube-vip-$kube_vip_version-$arch.tar
ref[kube-vip]=ghcr.io/kube-vip/kube-vip:$kube_vip_version
kubeadm_images=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd)
for i in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
	file[$i]=$i-$kube_version-$arch.tar
	ref[$i]=registry.k8s.io/$i:$kube_version
done
file[etcd]=etcd-$etcd_image_tag-$arch.tar
ref[etcd]=registry.k8s.io/etcd:$etcd_image_tag
calico_images=(calico-node calico-cni calico-kube-controllers calico-typha)
for i in "${calico_images[@]}"; do
	file[$i]=$i-$calico_version-$arch.tar
	ref[$i]=docker.io/calico/${i#calico-}:$calico_version
done
# The conformance suite's images, named as e2e.test $KUBE_VERSION (v1.37.2)
# names them, under the registry TestConformance gives it in KUBE_TEST_REPO_LIST.
e2e_registry=${E2E_IMAGE_REGISTRY:-e2e.kubexm.local}
conformance_images=()
e2e_image() {
	file[$1]=$1-$3-$arch.tar
	ref[$1]=$e2e_registry/$2:$3
	conformance_images+=("$1")
}
e2e_image e2e-agnhost e2e-test-images/agnhost 2.66.1
e2e_image e2e-agnhost-prev e2e-test-images/agnhost 2.55
e2e_image e2e-busybox e2e-test-images/busybox 1.37.0-2
e2e_image e2e-nginx e2e-test-images/nginx 1.27.0-2
e2e_image e2e-nginx-new e2e-test-images/nginx 1.28.0-2
e2e_image e2e-nautilus e2e-test-images/nautilus 1.8
e2e_image e2e-kitten e2e-test-images/kitten 1.8
e2e_image e2e-nonewprivs e2e-test-images/nonewprivs 1.4
e2e_image e2e-sample-apiserver e2e-test-images/sample-apiserver 1.29.2
e2e_image e2e-glibc-dns-testing e2e-test-images/glibc-dns-testing 2.1.1
e2e_image e2e-etcd etcd 3.7.0-0

images=()
for i in "$@"; do
	if [[ $i == kubeadm ]]; then
		images+=("${kubeadm_images[@]}")
	elif [[ $i == conformance ]]; then
		images+=("${conformance_images[@]}")
	elif [[ $i == calico ]]; then
		images+=("${calico_images[@]}")
	else
		images+=("$i")
	fi
done
if [[ ${#images[@]} -eq 0 ]]; then
	images=(pause coredns flannel busybox)
fi
for i in "${images[@]}"; do
	if [[ -z ${file[$i]:-} ]]; then
		echo "images.sh: unknown image \"$i\"; want some of: pause coredns flannel busybox metrics-server node-cache kube-vip ${kubeadm_images[*]} kubeadm ${conformance_images[*]} conformance ${calico_images[*]} calico" >&2
		exit 2
	fi
done

export CGO_ENABLED=0 GOARCH=$arch GOOS=linux GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
mkdir -p "$cache/build" "$dest"
# done_already <image>: its tarball is there and listed in both indexes.
done_already() {
	local f=${file[$1]}
	[[ -f $dest/$f && -f $dest/SHA256SUMS && -f $dest/images.txt ]] &&
		grep -q "  $f\$" "$dest/SHA256SUMS" && grep -qx "$f ${ref[$1]}" "$dest/images.txt"
}

# Everything there already: no lock, so that a warm run does not wait for
# another run's build (a suite waited 10 minutes behind another's coredns
# build on 2026-12-03). The indexes are replaced whole (mv) after the
# tarballs, so an image listed in both is complete.
if [[ ${FORCE:-0} != 1 ]]; then
	missing=0
	for i in "${images[@]}"; do
		done_already "$i" || missing=1
	done
	if [[ $missing == 0 ]]; then
		echo "images.sh: ${images[*]} already in $dest (FORCE=1 builds them again)" >&2
		echo "$dest"
		exit 0
	fi
fi

exec 9>"$cache/build/images.lock"
flock 9

todo=()
for i in "${images[@]}"; do
	if [[ ${FORCE:-0} == 1 ]] || ! done_already "$i"; then
		todo+=("$i")
	fi
done
if [[ ${#todo[@]} -eq 0 ]]; then
	echo "images.sh: ${images[*]} already in $dest (FORCE=1 builds them again)" >&2
	echo "$dest"
	exit 0
fi

stage=$(mktemp -d "$cache/build/.images.XXXXXX")
trap 'rm -rf "$stage"' EXIT

imgtool=$cache/build/imgtool/imgtool
mkdir -p "$(dirname "$imgtool")"
(cd "$repo" && go build -trimpath -o "$imgtool" ./test/artifacts/imgtool)

# fetch_debs <package...>: the host's candidate versions of the packages, in
# $cache/build/debs (kept; a file whose SHA256 matches apt's is not fetched
# again). Prints the .deb paths, sorted.
debs=$cache/build/debs
fetch_debs() {
	local name sum want=() get=()
	mkdir -p "$debs"
	# apt-get download runs as the user _apt, into a directory it may write;
	# --print-uris leaves out what is already in the current directory, so
	# it runs in an empty one. One call for all: each costs ~0.6 s.
	local dl
	dl=$(mktemp -d "$debs/.dl.XXXXXX")
	chmod 0755 "$dl"
	if id _apt >/dev/null 2>&1; then chown _apt "$dl"; fi
	# Lines are 'URL' file size SHA256:hex.
	while read -r _ name _ sum; do
		sum=${sum#SHA256:}
		want+=("$name")
		if [[ ! -f $debs/$name ]] || ! echo "$sum  $debs/$name" | sha256sum -c --status; then
			get+=("${name%%_*}")
			echo "$sum  $name" >>"$dl/SHA256SUMS"
		fi
	done < <(cd "$dl" && apt-get download --print-uris "$@")
	if [[ ${#want[@]} -ne $# ]]; then
		echo "images.sh: apt-get download --print-uris $* gave ${#want[@]} files for $# packages (apt-get update first?)" >&2
		exit 1
	fi
	if [[ ${#get[@]} -gt 0 ]]; then
		(cd "$dl" && apt-get download -q "${get[@]}" >&2 && sha256sum -c --quiet SHA256SUMS >&2) || {
			echo "images.sh: apt-get download ${get[*]} failed" >&2
			exit 1
		}
		for name in $(cd "$dl" && ls -- *.deb); do
			mv -f "$dl/$name" "$debs/$name"
		done
	fi
	rm -rf "$dl"
	for name in "${want[@]}"; do
		echo "$debs/$name"
	done | sort
}

# busybox_applets <rootfs>: symlinks in /bin for every applet of
# <rootfs>/bin/busybox that is not already a file somewhere on PATH.
busybox_applets() {
	local root=$1 a d
	for a in $("$root/bin/busybox" --list); do
		[[ $a == busybox ]] && continue
		for d in usr/local/sbin usr/local/bin usr/sbin usr/bin sbin bin; do
			if [[ -e $root/$d/$a || -L $root/$d/$a ]]; then
				continue 2
			fi
		done
		ln -s busybox "$root/bin/$a"
	done
}

# base_etc <rootfs>: the few files of /etc and directories a container expects.
base_etc() {
	local root=$1
	mkdir -p "$root/etc" "$root/root" "$root/tmp" "$root/run" "$root/var"
	chmod 0700 "$root/root"
	chmod 1777 "$root/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	chmod 0644 "$root/etc/passwd" "$root/etc/group"
	ln -sfn ../run "$root/var/run"
}

# nss_files_dns <rootfs>: glibc's name service order, which libc-bin's
# postinst writes on a real Debian system: getent hosts reads the pod's
# /etc/hosts (the kubelet's entries for the pod's hostname and subdomain),
# then DNS.
nss_files_dns() {
	printf 'passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\n' >"$1/etc/nsswitch.conf"
	chmod 0644 "$1/etc/nsswitch.conf"
}

# image <name> <imgtool flags...>: write $stage/out/<file> for image <name>.
image() {
	local i=$1
	shift
	mkdir -p "$stage/out"
	"$imgtool" -o "$stage/out/${file[$i]}" -t "${ref[$i]}" -platform "linux/$arch" -created 0 "$@"
}

build_pause() {
	local dir=$cache/build/pause-$pause_version src
	src=$(cd "$stage" && go mod download -json "k8s.io/kubernetes@$pause_kube_version" |
		sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	if [[ ! -f $src/build/pause/linux/pause.c ]]; then
		echo "images.sh: no build/pause/linux/pause.c in k8s.io/kubernetes@$pause_kube_version" >&2
		exit 1
	fi
	mkdir -p "$dir"
	# As build/pause/Makefile, which says -DVERSION=v$(TAG)-$(REV).
	gcc -Os -Wall -Werror -static -DVERSION="$pause_version" -o "$dir/pause.tmp" "$src/build/pause/linux/pause.c"
	strip "$dir/pause.tmp"
	mv -f "$dir/pause.tmp" "$dir/pause"
	echo "images.sh: $("$dir/pause" -v 2>&1)" >&2
	image pause -file "$dir/pause:/pause:0755" -entrypoint '["/pause"]' -user 65535:65535
}

# go_binary <module path>@<version> <name>: `go install` of a command into
# a GOBIN of its own under the build cache (static, -trimpath -s -w), kept
# between runs; prints the binary's path.
go_binary() {
	local pkg=$1 name=$2 ver=${1##*@}
	local gobin=$cache/build/$name-$ver/bin
	if [[ ${FORCE:-0} == 1 || ! -x $gobin/$name ]]; then
		echo "images.sh: building $pkg" >&2
		mkdir -p "$gobin"
		(cd "$stage" && GOBIN=$gobin go install -trimpath -ldflags='-s -w' "$pkg")
	fi
	echo "$gobin/$name"
}

build_coredns() {
	local bin
	bin=$(go_binary "github.com/coredns/coredns@$coredns_version" coredns)
	echo "images.sh: $("$bin" -version | head -n1)" >&2
	image coredns -file "$bin:/coredns:0755" -entrypoint '["/coredns"]' -workdir /
}

build_metrics-server() {
	local bin
	bin=$(go_binary "sigs.k8s.io/metrics-server/cmd/metrics-server@$metrics_server_version" metrics-server)
	echo "images.sh: metrics-server $("$bin" --version 2>&1 | head -n1)" >&2
	image metrics-server -file "$bin:/metrics-server:0755" -entrypoint '["/metrics-server"]' -user 65534:65534 -workdir /
}

# check_libs <rootfs>: every ELF file must find its libraries in the root
# file system (the xtables extensions are dlopen()ed, so ldd on the binaries
# misses them).
check_libs() {
	local root=$1 f missing=""
	while IFS= read -r f; do
		if cmp -s -n4 "$f" <(printf '\177ELF'); then
			missing+=$(chroot "$root" /lib64/ld-linux-x86-64.so.2 --list "/${f#"$root"/}" 2>&1 | grep 'not found' || true)
		fi
	done < <(find "$root" -type f \( -perm -u+x -o -name '*.so*' \) ! -path "$root/opt/*" ! -path "$root/bin/busybox" ! -path "$root/agnhost")
	if [[ -n $missing ]]; then
		echo "images.sh: $(basename "$root"): missing libraries:" >&2
		echo "$missing" | sort -u >&2
		exit 1
	fi
}

# deb_closure <package...>: the packages and everything they depend on
# (apt's view of this host; not Recommends, and not what only dpkg and
# debconf need on a full system), one a line, sorted.
deb_closure() {
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
		--no-enhances "$@" | grep -v '^[ <]' | sort -u |
		grep -vxE 'base-files|cdebconf|debconf|debianutils|dpkg|install-info|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1|gawk|mawk|original-awk|libsigsegv2|libmpfr6|tar|readline-common'
}

# debian_rootfs <rootfs> <package...>: a root file system of the packages and
# everything they depend on (apt's view of this host; not Recommends, and not
# what only dpkg and debconf need on a full system), busybox-static's applets
# for the rest, every ELF file's libraries checked.
debian_rootfs() {
	local root=$1 deb
	shift
	mkdir -p "$root"
	local pkgs
	mapfile -t pkgs < <(deb_closure busybox-static "$@")
	for deb in $(fetch_debs "${pkgs[@]}"); do
		dpkg-deb -x "$deb" "$root"
	done
	echo "images.sh: rootfs $(basename "$root"): ${pkgs[*]}" >&2
	finish_rootfs "$root"
}

# finish_rootfs <rootfs>: after the packages are unpacked: no documentation,
# /etc's basics, the loader's cache, busybox's applets for what the packages
# do not have, every library found.
finish_rootfs() {
	local root=$1
	rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/lintian" \
		"$root/usr/share/locale" "$root/usr/share/bug"
	base_etc "$root"
	printf 'include /etc/ld.so.conf.d/*.conf\n' >"$root/etc/ld.so.conf"
	ldconfig -r "$root"
	rm -rf "$root/var/cache/ldconfig"
	busybox_applets "$root"
	check_libs "$root"
}

# netfilter_rootfs <rootfs> [package...]: a root file system of Debian
# packages with iptables (alternatives set to $iptables_backend as Debian's
# postinst does), nft, netbase, busybox's applets and the packages named,
# every ELF file's libraries checked with the dynamic loader inside it.
netfilter_rootfs() {
	local root=$1 deb f pkgs
	shift
	mkdir -p "$root"
	mapfile -t pkgs < <(printf '%s\n' libc6 libgcc-s1 iptables libxtables12 libip4tc2 libip6tc2 libnftnl11 libmnl0 \
		libnetfilter-conntrack3 libnfnetlink0 nftables libnftables1 libjansson4 libedit2 libbsd0 libmd0 \
		libtinfo6 libgmp10 netbase busybox-static "$@" | sort -u)
	for deb in $(fetch_debs "${pkgs[@]}"); do
		dpkg-deb -x "$deb" "$root"
		echo "images.sh: rootfs $(basename "$root"): $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >&2
	done
	# What iptables' postinst does with update-alternatives, for the
	# chosen backend (arptables and ebtables only have nft).
	mkdir -p "$root/etc/alternatives"
	local alt
	for alt in iptables ip6tables arptables ebtables; do
		local backend=$iptables_backend
		[[ $alt == arptables || $alt == ebtables ]] && backend=nft
		for f in "$alt" "$alt-restore" "$alt-save"; do
			ln -sfn "/usr/sbin/${f/$alt/$alt-$backend}" "$root/etc/alternatives/$f"
			ln -sfn "/etc/alternatives/$f" "$root/usr/sbin/$f"
		done
	done
	finish_rootfs "$root"
	echo "images.sh: chroot: $(chroot "$root" iptables -V) / $(chroot "$root" ip6tables -V)" >&2
	echo "images.sh: chroot: $(chroot "$root" nft --version)" >&2
	echo "images.sh: chroot: /bin/cp -> $(readlink "$root/bin/cp")" >&2
	# The backend against the kernel, in a network namespace of its own
	# (not fatal: a build host may lack nf_tables; the cluster's nodes will not).
	if ! unshare -n chroot "$root" /bin/sh -c 'iptables -t nat -A POSTROUTING -s 10.244.0.0/16 -j MASQUERADE &&
		iptables-save -t nat | grep -q MASQUERADE' >&2; then
		echo "images.sh: warning: iptables ($iptables_backend) in a fresh network namespace failed" >&2
	else
		echo "images.sh: chroot: iptables ($iptables_backend) added and listed a nat rule in a fresh network namespace" >&2
	fi
}

build_flannel() {
	local bins root=$stage/flannel-rootfs f
	bins=$(env -u FORCE FLANNEL_VERSION="$flannel_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" \
		"$here/flannel.sh" flanneld | tail -n1)
	netfilter_rootfs "$root"
	mkdir -p "$root/opt/bin"
	for f in flanneld install-conf mk-docker-opts.sh; do
		if [[ -f $bins/$f ]]; then
			install -m 0755 "$bins/$f" "$root/opt/bin/$f"
		fi
	done
	echo "images.sh: chroot: flanneld $(chroot "$root" /opt/bin/flanneld --version 2>&1)" >&2
	if [[ -f $root/opt/bin/install-conf ]]; then
		echo "images.sh: chroot: $(chroot "$root" /opt/bin/install-conf 2>&1 | head -n1)" >&2
	fi
	image flannel -dir "$root" -entrypoint '["/opt/bin/flanneld"]' \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -env "FLANNEL_ARCH=$arch"
}

build_node-cache() {
	local bin root=$stage/node-cache-rootfs
	bin=$(go_binary "github.com/coredns/coredns@$node_cache_coredns_version" coredns)
	netfilter_rootfs "$root"
	install -m 0755 "$bin" "$root/coredns"
	install -m 0755 "$here/node-cache.sh" "$root/node-cache"
	echo "images.sh: chroot: $(chroot "$root" /coredns -version | head -n1)" >&2
	# The wrapper's flag parsing and its refusal of a missing Corefile,
	# without touching the build host's network.
	if chroot "$root" /node-cache -localip 169.254.25.10 -conf /nonexistent >/dev/null 2>&1; then
		echo "images.sh: node-cache: started without a Corefile" >&2
		exit 1
	fi
	image node-cache -dir "$root" -entrypoint '["/node-cache"]' \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

# kube_bin <name>: the directory kubernetes.sh built $kube_version's <name> in
# (it builds it first when missing, or waits for a build in progress).
kube_bin() {
	env -u FORCE KUBE_VERSION="$kube_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" \
		"$here/kubernetes.sh" "$1" | tail -n1
}

# A control-plane image: the one binary, run by name as kubeadm's static
# pods do.
build_control_plane() {
	local i=$1 dir
	dir=$(kube_bin "$i")
	echo "images.sh: $i $("$dir/$i" --version 2>&1 | head -n1)" >&2
	image "$i" -file "$dir/$i:/usr/local/bin/$i:0755" -entrypoint "[\"/usr/local/bin/$i\"]" \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}
build_kube-apiserver() { build_control_plane kube-apiserver; }
build_kube-controller-manager() { build_control_plane kube-controller-manager; }
build_kube-scheduler() { build_control_plane kube-scheduler; }

build_kube-proxy() {
	local dir root=$stage/kube-proxy-rootfs
	dir=$(kube_bin kube-proxy)
	netfilter_rootfs "$root" conntrack libnetfilter-cthelper0 libnetfilter-cttimeout1 libnetfilter-queue1 ipset libipset13
	install -D -m 0755 "$dir/kube-proxy" "$root/usr/local/bin/kube-proxy"
	echo "images.sh: chroot: $(chroot "$root" conntrack --version 2>&1) / $(chroot "$root" ipset --version 2>&1 | head -n1)" >&2
	echo "images.sh: chroot: $(chroot "$root" /usr/local/bin/kube-proxy --version 2>&1)" >&2
	image kube-proxy -dir "$root" -entrypoint '["/usr/local/bin/kube-proxy"]' \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

build_etcd() {
	local dir
	dir=$(env -u FORCE ETCD_VERSION="$etcd_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" "$here/etcd.sh" | tail -n1)
	echo "images.sh: etcd $("$dir/etcd" --version 2>&1 | head -n1) as ${ref[etcd]}" >&2
	image etcd -file "$dir/etcd:/usr/local/bin/etcd:0755" -file "$dir/etcdctl:/usr/local/bin/etcdctl:0755" \
		-file "$dir/etcdutl:/usr/local/bin/etcdutl:0755" -entrypoint '["/usr/local/bin/etcd"]' \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

build_busybox() {
	local root=$stage/busybox-rootfs deb have
	deb=$(fetch_debs busybox-static)
	have=$(dpkg-deb -f "$deb" Version)
	have=${have#*:}
	have=${have%%-*}
	if [[ $have != "$busybox_version" ]]; then
		echo "images.sh: Debian's busybox-static is $have, not $busybox_version; set BUSYBOX_VERSION=$have" >&2
		exit 1
	fi
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	rm -rf "${root:?}/usr"
	base_etc "$root"
	busybox_applets "$root"
	local a
	for a in sh nslookup wget sleep cat ls ip ping hostname env echo; do
		if [[ ! -L $root/bin/$a ]]; then
			echo "images.sh: busybox-static has no $a applet" >&2
			exit 1
		fi
	done
	echo "images.sh: chroot: $(chroot "$root" /bin/sh -c 'busybox | head -n1; nslookup 2>&1 | head -n1')" >&2
	image busybox -dir "$root" -cmd '["sh"]' -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

# e2e_bin <name>: the directory kubernetes.sh built $kube_version's test
# binary <name> in (agnhost, sample-apiserver, nonewprivs).
e2e_bin() {
	env -u FORCE KUBE_VERSION="$kube_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" \
		"$here/kubernetes.sh" "$1" | tail -n1
}

# kube_src: where the module proxy's k8s.io/kubernetes@$kube_version is.
kube_src() {
	(cd "$stage" && go mod download -json "k8s.io/kubernetes@$kube_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

e2e_path=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# agnhost_rootfs <rootfs>: the agnhost image's file system (see the header).
agnhost_rootfs() {
	local root=$1 dir src
	dir=$(e2e_bin agnhost)
	src=$(kube_src)
	debian_rootfs "$root" bash curl netcat-openbsd iproute2 bind9-dnsutils socat libc-bin
	nss_files_dns "$root"
	ln -sfn nc.openbsd "$root/bin/nc"
	# Debian's busybox sh runs its own applets before PATH (its nc has no
	# -u, -v, -z): the specs' `sh -c "... | nc -u ..."` must find OpenBSD's.
	ln -sfn bash "$root/bin/sh"
	install -m 0755 "$dir/agnhost" "$root/agnhost"
	ln -sfn agnhost "$root/agnhost-2"
	install -m 0644 "$src/test/images/agnhost/porter/localhost.crt" "$root/localhost.crt"
	install -m 0600 "$src/test/images/agnhost/porter/localhost.key" "$root/localhost.key"
	mkdir -p "$root/uploads"
	echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$root/etc/passwd"
	printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$root/etc/group"
	mkdir -p "$root/home/user-defined-in-image"
	chown 1000:1000 "$root/home/user-defined-in-image"
	echo "images.sh: chroot: $(chroot "$root" /bin/sh -c 'curl --version | head -n1; nc -h 2>&1 | head -n1; ss -V; getent --version | head -n1; /agnhost --help | head -n1' | tr '\n' ' ')" >&2
}

build_e2e-agnhost() {
	agnhost_rootfs "$stage/agnhost-rootfs"
	image e2e-agnhost -dir "$stage/agnhost-rootfs" -entrypoint '["/agnhost"]' -cmd '["pause"]' -env "$e2e_path"
}
build_e2e-agnhost-prev() {
	[[ -d $stage/agnhost-rootfs ]] || agnhost_rootfs "$stage/agnhost-rootfs"
	image e2e-agnhost-prev -dir "$stage/agnhost-rootfs" -entrypoint '["/agnhost"]' -cmd '["pause"]' -env "$e2e_path"
}

# The agnhost image with a picture and data.json, as test/images/<name>.
agnhost_site() {
	local name=$1 src
	[[ -d $stage/agnhost-rootfs ]] || agnhost_rootfs "$stage/agnhost-rootfs"
	src=$(kube_src)
	image "e2e-$name" -dir "$stage/agnhost-rootfs" -file "$src/test/images/$name/html/$name.jpg:/$name.jpg:0644" \
		-file "$src/test/images/$name/html/data.json:/data.json:0644" \
		-entrypoint '["/agnhost"]' -cmd '["test-webserver"]' -env "$e2e_path"
}
build_e2e-nautilus() { agnhost_site nautilus; }
build_e2e-kitten() { agnhost_site kitten; }

# busybox_bash_rootfs <rootfs>: busybox-static's applets, bash as /bin/sh.
busybox_bash_rootfs() {
	local root=$1
	# GNU wget: Debian's busybox wget has no -T (timeout), which specs use.
	debian_rootfs "$root" bash wget
	ln -sfn bash "$root/bin/sh"
	local got
	got=$(chroot "$root" /bin/env -i 'a-b=1' PATH=/bin /bin/sh -c env | grep -c '^a-b=1$' || true)
	if [[ $got != 1 ]]; then
		echo "images.sh: busybox rootfs: sh drops a variable named a-b" >&2
		exit 1
	fi
	local help
	help=$(chroot "$root" /bin/sh -c 'wget --help')
	if [[ $help != *'-T,  --timeout'* ]]; then
		echo "images.sh: busybox rootfs: wget has no -T" >&2
		exit 1
	fi
	# shellcheck disable=SC2016 # expanded by the image's shell
	echo "images.sh: chroot: $(chroot "$root" /bin/sh -c 'echo bash $BASH_VERSION; wget --version | head -n1')" >&2
}

build_e2e-busybox() {
	busybox_bash_rootfs "$stage/busybox-bash-rootfs"
	image e2e-busybox -dir "$stage/busybox-bash-rootfs" -cmd '["sh"]' -env "$e2e_path"
}

build_e2e-nonewprivs() {
	local dir root=$stage/busybox-bash-rootfs
	dir=$(e2e_bin nonewprivs)
	[[ -d $root ]] || busybox_bash_rootfs "$root"
	image e2e-nonewprivs -dir "$root" -file "$dir/nonewprivs:/usr/local/bin/nnp:4755" -cmd '["nnp"]' -env "$e2e_path"
}

nginx_rootfs() {
	local root=$1
	debian_rootfs "$root" nginx
	rm -rf "$root/etc/nginx/sites-enabled" "$root/etc/nginx/conf.d"
	mkdir -p "$root/etc/nginx/conf.d" "$root/usr/share/nginx/html" "$root/var/log/nginx" "$root/var/lib/nginx" "$root/var/cache/nginx"
	echo 'nginx:x:101:101:nginx:/nonexistent:/bin/false' >>"$root/etc/passwd"
	echo 'nginx:x:101:' >>"$root/etc/group"
	# upstream's nginx.conf and conf.d/default.conf (nginx:1.27-alpine).
	cat >"$root/etc/nginx/nginx.conf" <<'CONF'
user nginx;
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /run/nginx.pid;
events {
    worker_connections 1024;
}
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;
}
CONF
	cat >"$root/etc/nginx/conf.d/default.conf" <<'CONF'
server {
    listen 80;
    listen [::]:80;
    server_name localhost;
    location / {
        root /usr/share/nginx/html;
        index index.html index.htm;
    }
    error_page 500 502 503 504 /50x.html;
    location = /50x.html {
        root /usr/share/nginx/html;
    }
}
CONF
	printf '<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n' >"$root/usr/share/nginx/html/index.html"
	printf '<!DOCTYPE html>\n<html>\n<head>\n<title>Error</title>\n</head>\n<body>\n<h1>An error occurred.</h1>\n</body>\n</html>\n' >"$root/usr/share/nginx/html/50x.html"
	chroot "$root" /usr/sbin/nginx -t >&2
	# As upstream, the logs go to the container's output (after the check:
	# the chroot has no /dev).
	rm -f "$root/var/log/nginx/"*
	ln -sfn /dev/stdout "$root/var/log/nginx/access.log"
	ln -sfn /dev/stderr "$root/var/log/nginx/error.log"
	rm -f "$root/run/nginx.pid"
}
build_e2e-nginx() {
	nginx_rootfs "$stage/nginx-rootfs"
	image e2e-nginx -dir "$stage/nginx-rootfs" -cmd '["nginx", "-g", "daemon off;"]' -env "$e2e_path"
}
build_e2e-nginx-new() {
	[[ -d $stage/nginx-rootfs ]] || nginx_rootfs "$stage/nginx-rootfs"
	image e2e-nginx-new -dir "$stage/nginx-rootfs" -cmd '["nginx", "-g", "daemon off;"]' -env "$e2e_path"
}

build_e2e-sample-apiserver() {
	local dir
	dir=$(e2e_bin sample-apiserver)
	image e2e-sample-apiserver -file "$dir/sample-apiserver:/sample-apiserver:0755" -entrypoint '["/sample-apiserver"]'
}

build_e2e-glibc-dns-testing() {
	local root=$stage/glibc-dns-rootfs bin
	bin=$(go_binary "github.com/coredns/coredns@$coredns_version" coredns)
	debian_rootfs "$root" dash bind9-dnsutils libc-bin
	nss_files_dns "$root"
	ln -sfn dash "$root/bin/sh"
	install -m 0755 "$bin" "$root/coredns"
	echo "images.sh: chroot: $(chroot "$root" /bin/sh -c 'dig -v 2>&1; getent --version | head -n1; /coredns -version | head -n1' | tr '\n' ' ')" >&2
	image e2e-glibc-dns-testing -dir "$root" -env "$e2e_path"
}

build_kube-vip() {
	local dir
	dir=$(env -u FORCE KUBE_VIP_VERSION="$kube_vip_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" nice -n 10 "$here/kube-vip.sh" | tail -n1)
	echo "images.sh: kube-vip $("$dir/kube-vip" version 2>&1 | tr '\n' ' ')" >&2
	image kube-vip -file "$dir/kube-vip:/kube-vip:0755" -entrypoint '["/kube-vip"]'
}

build_e2e-etcd() {
	local dir
	dir=$(env -u FORCE ETCD_VERSION="$etcd_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" "$here/etcd.sh" | tail -n1)
	echo "images.sh: etcd $("$dir/etcd" --version 2>&1 | head -n1) as ${ref[e2e-etcd]}" >&2
	image e2e-etcd -file "$dir/etcd:/usr/local/bin/etcd:0755" -file "$dir/etcdctl:/usr/local/bin/etcdctl:0755" \
		-entrypoint '["/usr/local/bin/etcd"]' -env "$e2e_path"
}

# calico_bin: the directory calico.sh built $calico_version's binaries in.
calico_bin() {
	env -u FORCE CALICO_VERSION="$calico_version" GOARCH="$arch" KUBEXM_TEST_CACHE="$cache" \
		"$here/calico.sh" binaries | tail -n1
}

build_calico-node() {
	local bins root=$stage/calico-node-rootfs f extra
	bins=$(calico_bin)
	# What calico-node and felix run besides iptables and nft; runit alone,
	# without the user management its maintainer scripts pull in.
	mapfile -t extra < <(deb_closure ipset iproute2 conntrack | grep -vxE 'passwd|libpam.*|libsemanage.*|libaudit.*|libcap-ng0|libselinux1|libsepol2|libcrypt1|libdb5\.3|libpcre2-8-0|libbz2-1\.0|libzstd1|liblzma5|libacl1|libcap2-bin|libgssapi-krb5-2|libk5crypto3|libkeyutils1|libkrb5-3|libkrb5support0|libcom-err2|libssl3|libtirpc3|libtirpc-common|libreadline8')
	netfilter_rootfs "$root" "${extra[@]}" runit
	# Debian's runit makes /etc/service a link into its own runsvdir;
	# calico's services are a directory there.
	rm -rf "$root/etc/service" "$root/etc/runit" "$root/etc/sv"
	cp -a "$bins/filesystem/etc/." "$root/etc/"
	mkdir -p "$root/usr/sbin" "$root/usr/bin"
	cp -a "$bins/filesystem/sbin/." "$root/usr/sbin/"
	for f in calico-node bird bird6 birdcl birdcl6; do
		install -m 0755 "$bins/$f" "$root/bin/$f"
	done
	# start_runit finds runsvdir with /usr/bin/which.
	[[ -e $root/usr/bin/which ]] || ln -s /bin/busybox "$root/usr/bin/which"
	check_libs "$root"
	echo "images.sh: chroot: $(chroot "$root" /bin/calico-node -v 2>&1 | head -n1)" >&2
	echo "images.sh: chroot: $(chroot "$root" /bin/bird --version 2>&1) $(chroot "$root" /bin/bird6 --version 2>&1)" >&2
	echo "images.sh: chroot: $(chroot "$root" /bin/sh -c 'ipset --version; /bin/ip -V; conntrack --version; which runsvdir sv svlogd' 2>&1 | tr '\n' ' ')" >&2
	image calico-node -dir "$root" -cmd '["start_runit"]' -env SVDIR=/etc/service/enabled \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

build_calico-cni() {
	local bins root=$stage/calico-cni-root f
	bins=$(calico_bin)
	mkdir -p "$root/opt/cni/bin" "$root/tmp"
	chmod 1777 "$root/tmp"
	for f in install calico calico-ipam; do
		install -m 0755 "$bins/$f" "$root/opt/cni/bin/$f"
	done
	echo "images.sh: $("$root/opt/cni/bin/calico" -v 2>&1 | head -n1)" >&2
	image calico-cni -dir "$root" -cmd '["/opt/cni/bin/install"]' -workdir /opt/cni/bin \
		-env PATH=/opt/cni/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

build_calico-kube-controllers() {
	local bins root=$stage/calico-kc-root f
	bins=$(calico_bin)
	mkdir -p "$root/usr/bin" "$root/status" "$root/profiles" "$root/tmp"
	chmod 1777 "$root/tmp"
	for f in kube-controllers check-status wrapper; do
		install -m 0755 "$bins/$f" "$root/usr/bin/$f"
	done
	: >"$root/status/status.json"
	: >"$root/profiles/mem.pprof"
	: >"$root/profiles/cpu.pprof"
	chmod 0644 "$root/status/status.json" "$root/profiles/mem.pprof" "$root/profiles/cpu.pprof"
	image calico-kube-controllers -dir "$root" -user 999 \
		-entrypoint '["/usr/bin/wrapper", "/usr/bin/kube-controllers"]' \
		-chown /status:999:0 -chown /status/status.json:999:0 -chown /profiles/mem.pprof:999:0 -chown /profiles/cpu.pprof:999:0
}

build_calico-typha() {
	local bins root=$stage/calico-typha-root
	bins=$(calico_bin)
	mkdir -p "$root/usr/bin" "$root/etc/calico" "$root/tmp"
	chmod 1777 "$root/tmp"
	install -m 0755 "$bins/calico-typha" "$root/usr/bin/calico-typha"
	install -m 0644 "$bins/typha.cfg" "$root/etc/calico/typha.cfg"
	image calico-typha -dir "$root" -user 999 -cmd '["/usr/bin/calico-typha"]'
}

for i in "${todo[@]}"; do
	t0=$SECONDS
	"build_$i"
	touch -d @0 "$stage/out/${file[$i]}"
	mv -f "$stage/out/${file[$i]}" "$dest/${file[$i]}"
	echo "images.sh: ${file[$i]} ${ref[$i]} ($((SECONDS - t0)) s)" >&2
done

# Both indexes list every tarball in the directory; images.txt keeps the
# references of tarballs this run did not build.
(
	cd "$dest"
	tars=(*.tar)
	sha256sum -- "${tars[@]}" >SHA256SUMS.tmp
	{
		for f in "${tars[@]}"; do
			r=""
			for i in "${!file[@]}"; do
				[[ ${file[$i]} == "$f" ]] && r=${ref[$i]}
			done
			if [[ -z $r && -f images.txt ]]; then
				r=$(awk -v f="$f" '$1 == f {print $2}' images.txt)
			fi
			if [[ -n $r ]]; then
				echo "$f $r"
			fi
		done
	} >images.txt.tmp
	mv -f SHA256SUMS.tmp SHA256SUMS
	mv -f images.txt.tmp images.txt
)
echo "$dest"
