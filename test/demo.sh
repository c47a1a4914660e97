#!/bin/bash
# The quick start without servers: three local test machines (systemd-nspawn,
# each with its own systemd, sshd and IP) and a TLS etcd cluster built on them
# by kubexm, from etcd v3.5.35 compiled from the Go module proxy and served
# from a local directory. Needs root. The machines stay up afterwards:
#   ssh -F /var/cache/kubexm-test/runs/$PREFIX/ssh_config n1
#   make hosts-down PREFIX=$PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
PREFIX=${PREFIX:-demo}
CACHE=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
ETCD_VERSION=${ETCD_VERSION:-v3.5.35}

[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (sudo make demo): it starts systemd-nspawn machines" >&2; exit 1; }
go build -o bin/kubexm ./cmd/kubexm
test/hosts/prepare-rootfs.sh
N=3 PREFIX=$PREFIX test/hosts/up.sh
# shellcheck source=/dev/null
. "$CACHE/runs/$PREFIX/hosts.env"
test/artifacts/release.sh >/dev/null
release=${KUBEXM_TEST_RELEASE_DIR:-$CACHE/release}/etcd-io/etcd/releases/download/$ETCD_VERSION

work=$CACHE/runs/$PREFIX/work
mkdir -p "$work"
cp "$KUBEXM_TEST_INVENTORY" "$work/cluster.yaml"
cd "$work"
kubexm=$OLDPWD/bin/kubexm
# The test machines have no package mirror (their packages are installed
# already) and, being containers, cannot set kernel-global sysctls.
"$kubexm" play create-cluster -i cluster.yaml --tags preflight,os,etcd \
  -e etcd_local_dir="$release" \
  -e '{"os_packages": ["iptables", "iproute2", "kmod", "procps"]}' \
  -e os_sysctl_ignore_readonly=true
first=${KUBEXM_TEST_HOSTS%% *}
addr=${first#*=}
etcdctl="etcdctl --endpoints=https://$addr:2379 --cacert /etc/kubexm/etcd/ssl/ca.pem --cert /etc/kubexm/etcd/ssl/admin-n1.pem --key /etc/kubexm/etcd/ssl/admin-n1-key.pem"
echo
echo "== the etcd cluster, as etcdctl on n1 sees it over TLS:"
ssh -F "$KUBEXM_TEST_SSH_CONFIG" n1 "$etcdctl member list -w table && $etcdctl endpoint health --cluster"
echo
echo "Look around:   ssh -F $KUBEXM_TEST_SSH_CONFIG n1"
echo "Run it again:  make demo PREFIX=$PREFIX   (reports 0 changed)"
echo "Delete it:     cd $work && $kubexm play delete -i cluster.yaml"
echo "Remove the machines:  make hosts-down PREFIX=$PREFIX"
