#!/bin/bash
# The quick start without servers: three local test machines (systemd-nspawn,
# each with its own systemd, sshd and IP) and a Kubernetes v1.37.2 cluster
# built on them by kubexm in binary mode: n1 master and etcd, n2 and n3
# workers, containerd, flannel and CoreDNS. There is no internet: Kubernetes,
# etcd, CoreDNS and flannel are compiled from the Go module proxy (the first
# run takes 10-20 minutes for that), and so are containerd 2, runc and the
# CNI plugins; the images are built locally; kubexm gathers them
# into an offline bundle and installs from it. Needs root. The machines stay
# up afterwards:
#   ssh -F /var/cache/kubexm-test/runs/$PREFIX/ssh_config n1
#   make hosts-down PREFIX=$PREFIX
# N=5 makes five machines (n2-n5 workers); RERUNS=3 then runs the same
# create-cluster 3 times again and 3 times with --check, each printing its
# time (make perf-quiet: docs/perf.md's quiet re-run figures); with PERSIST=60s
# as many again with --ssh-persist 60s, on connections kept. KIND=kubeadm
# makes the same cluster with kubeadm (kubernetes.type and etcd.type
# kubeadm: n1 runs kubeadm's control plane and its stacked etcd). MASTERS=3
# (with N of 4 or more) makes the control plane highly available: n1-n3
# masters and etcd members, the other machines workers reaching the API
# through haproxy (internalLoadbalancer haproxy; its packages travel in the
# bundle): make perf-quiet's HA figures. BUNDLE=bundle.tar.zst exports and
# installs a zstd bundle instead of the default .tar.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
PREFIX=${PREFIX:-demo}
CACHE=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
RELEASE=${KUBEXM_TEST_RELEASE_DIR:-$CACHE/release}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
KUBE_VERSION=v1.37.2
CONTAINERD_VERSION=2.4.2 RUNC_VERSION=1.5.2 CNI_VERSION=1.9.1 CRICTL_VERSION=1.37.0

[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (make demo runs it under sudo): it starts systemd-nspawn machines" >&2; exit 1; }
go build -o bin/kubexm ./cmd/kubexm
test/hosts/prepare-rootfs.sh
echo "== the releases, built once and cached in $CACHE"
for script in release.sh containerd.sh crictl.sh kubernetes-release.sh flannel.sh images.sh; do
  ETCD_VERSION=$ETCD_VERSION KUBE_VERSION=$KUBE_VERSION CONTAINERD_VERSION=$CONTAINERD_VERSION \
    RUNC_VERSION=$RUNC_VERSION CNI_VERSION=$CNI_VERSION CRICTL_VERSION=$CRICTL_VERSION test/artifacts/$script >/dev/null
done
N=${N:-3}
RERUNS=${RERUNS:-0}
PERSIST=${PERSIST:-}
BUNDLE=${BUNDLE:-bundle.tar.gz}
KIND=${KIND:-kubexm}
MASTERS=${MASTERS:-1}
case $MASTERS in
1) ;;
3) [ "$N" -ge 4 ] || { echo "demo: MASTERS=3 needs N=4 or more: the workers run haproxy in front of the masters" >&2; exit 1; } ;;
*) echo "demo: MASTERS=$MASTERS: want 1 or 3" >&2; exit 1 ;;
esac
case $KIND in
kubexm) ;;
kubeadm)
  # kubeadm, and the control plane's images it runs (etcd's at the tag
  # vars.yaml names below).
  KUBE_VERSION=$KUBE_VERSION test/artifacts/kubernetes-release.sh kubeadm >/dev/null
  ETCD_VERSION=$ETCD_VERSION KUBE_VERSION=$KUBE_VERSION test/artifacts/images.sh kubeadm pause coredns >/dev/null ;;
*) echo "demo: KIND=$KIND: want kubexm (binary mode) or kubeadm" >&2; exit 1 ;;
esac
KUBELET=1 N=$N PREFIX=$PREFIX test/hosts/up.sh
# shellcheck source=/dev/null
. "$CACHE/runs/$PREFIX/hosts.env"

work=$CACHE/runs/$PREFIX/work
mkdir -p "$work"
# The harness's inventory (n1 master, all etcd members, the others workers),
# with an etcd member on each master and Kubernetes in binary mode
# (KIND=kubeadm: kubeadm's, its etcd stacked on the masters); with
# MASTERS=3, n2 and n3 masters too and haproxy on the workers.
ha=()
if [ "$MASTERS" = 3 ]; then
  ha=(-e '/^    master:$/,/^    worker:$/{s/^    - n1$/    - n1\n    - n2\n    - n3/}'
    -e '/^    worker:$/,/^  kubernetes:$/{/^    - n[23]$/d}'
    -e 's/^  kubernetes:$/  controlPlaneEndpoint:\n    internalLoadbalancer: haproxy\n  kubernetes:/')
fi
sed -e 's/^    proxyMode: iptables.*/    type: '"$KIND"'\n    version: '"$KUBE_VERSION"'\n    proxyMode: iptables\n    containerRuntime: {type: containerd, version: '"$CONTAINERD_VERSION"'}\n  network:\n    plugin: flannel\n  etcd:\n    type: '"$KIND"'/' \
  -e '/^    etcd:$/,/^    master:$/{/^    - n['"$((MASTERS + 1))"'-9]$/d}' \
  "${ha[@]}" "$KUBEXM_TEST_INVENTORY" >"$work/cluster.yaml"
cd "$work"
kubexm=$OLDPWD/bin/kubexm
# The machines get new host keys each time they are made: keep the keys
# kubexm trusts with them, not in ~/.kubexm.
export KUBEXM_HOME=$work/.kubexm

# Where the releases are (stand-ins for GitHub, dl.k8s.io and the
# registries) and the versions they are built at; then what the machines
# need because they are containers: no package mirror (the packages are
# there), read-only kernel-global sysctls, no CAP_SYS_RESOURCE, the host's
# disk and conntrack limits.
cat >vars.yaml <<EOF
etcd_local_dir: $RELEASE/etcd-io/etcd/releases/download/$ETCD_VERSION
containerd_local_dir: $RELEASE/containerd/containerd/releases/download/v$CONTAINERD_VERSION
runc_local_dir: $RELEASE/opencontainers/runc/releases/download/v$RUNC_VERSION
cni_plugins_local_dir: $RELEASE/containernetworking/plugins/releases/download/v$CNI_VERSION
crictl_local_dir: $RELEASE/kubernetes-sigs/cri-tools/releases/download/v$CRICTL_VERSION
kubernetes_local_dir: $RELEASE/kubernetes/release/$KUBE_VERSION/bin/linux/amd64
flannel_cni_plugin_local_dir: $RELEASE/flannel-io/cni-plugin/releases/download/v0.9.1
images_local_dir: $RELEASE/images
flannel_version: v0.28.10
flannel_cni_plugin_version: v0.9.1

os_packages: [iptables, iproute2, kmod, procps, curl]
# The machines have these: no OS packages in the bundle (an export without
# this line carries the os role's packages for hosts without a mirror).
os_bundle_packages: []
os_sysctl_ignore_readonly: true
containerd_restrict_oom_score_adj: true
kubelet_extra_config:
  evictionHard: {nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
  imageGCHighThresholdPercent: 100
kube_proxy_conntrack_max_per_core: 0
EOF
if [ "$KIND" = kubeadm ]; then
  # The etcd image images.sh built (kubeadm would name its own pin), and no
  # kernel configuration for kubeadm's SystemVerification in a container.
  cat >>vars.yaml <<EOF
kubeadm_etcd_image_version: "${ETCD_VERSION#v}-0"
kubeadm_ignore_preflight_errors: [SystemVerification]
EOF
fi

echo "== kubexm artifact export: every binary and image cluster.yaml needs, in one file"
"$kubexm" artifact export -f cluster.yaml -o "$BUNDLE" -e @vars.yaml
echo
echo "== kubexm play create-cluster --offline-bundle $BUNDLE"
"$kubexm" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml
kubectl=$RELEASE/kubernetes/release/$KUBE_VERSION/bin/linux/amd64/kubectl
echo
echo "== the cluster, as kubectl on this machine sees it:"
"$kubectl" --kubeconfig "$work/.kubexm/kubexm-test-$PREFIX/kubeconfig" get nodes -o wide
"$kubectl" --kubeconfig "$work/.kubexm/kubexm-test-$PREFIX/kubeconfig" get pods -A -o wide
echo
echo "kubectl:       $kubectl --kubeconfig $work/.kubexm/kubexm-test-$PREFIX/kubeconfig get nodes"
echo "Look around:   ssh -F $KUBEXM_TEST_SSH_CONFIG n1"
echo "Run it again:  make demo PREFIX=$PREFIX   (reports 0 changed)"
echo "Delete it:     cd $work && $kubexm play delete -i cluster.yaml -e @vars.yaml"
echo "Remove the machines:  make hosts-down PREFIX=$PREFIX"
for i in $(seq "$RERUNS"); do
  echo "== re-run $i: $("$kubexm" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml 2>&1 | grep '^run ' | tail -1)"
done
for i in $(seq "$RERUNS"); do
  echo "== --check $i: $("$kubexm" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml --check 2>&1 | grep '^run ' | tail -1)"
done
if [ -n "$PERSIST" ] && [ "$RERUNS" -gt 0 ]; then
  # The same with connections kept between runs: a --check leaves the keepers, whose sockets
  # the runs after it find.
  "$kubexm" --ssh-persist "$PERSIST" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml --check >/dev/null 2>&1
  socks=${KUBEXM_HOME:-$HOME/.kubexm}/ssh
  for _ in $(seq 100); do
    [ "$(find "$socks" -name '*.sock' -newer "$BUNDLE" 2>/dev/null | wc -l)" -ge "$N" ] && break
    sleep 0.1
  done
  for i in $(seq "$RERUNS"); do
    echo "== re-run $i, connections kept: $("$kubexm" --ssh-persist "$PERSIST" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml 2>&1 | grep '^run ' | tail -1)"
  done
  for i in $(seq "$RERUNS"); do
    echo "== --check $i, connections kept: $("$kubexm" --ssh-persist "$PERSIST" play create-cluster -i cluster.yaml --offline-bundle "$BUNDLE" -e @vars.yaml --check 2>&1 | grep '^run ' | tail -1)"
  done
fi
