# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Shared settings and helpers for the test-host scripts (sourced, not run).
# The recipe and the reason behind every workaround: /work/shared/notes/test-hosts.md.

CACHE=${KUBEXM_TEST_CACHE:-/var/cache/kubexm-test}
# The rootfs new runs use (a link to rootfs-<version>, see prepare-rootfs.sh); prepare-rootfs.sh
# holds ROOTFS_LOCK exclusively while it switches versions and deletes unused ones, up.sh holds
# it shared while it mounts.
ROOTFS_LINK=$CACHE/rootfs.current
ROOTFS_LOCK=$CACHE/rootfs.lock
LAYERDIR=$CACHE/layers
RUNS=$CACHE/runs
MIRROR=${KUBEXM_TEST_MIRROR:-http://deb.debian.org/debian}
HOSTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
  echo "$(basename "$0"): $*" >&2
  exit 1
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (systemd-nspawn, netns and cgroups need it); try: sudo $0"
}

# A prefix names everything a run creates, so it must fit in interface names
# (15 bytes: kx<prefix>h<node>) and must not contain the separators used below.
check_prefix() {
  [[ $1 =~ ^[a-z0-9]{1,8}$ ]] || die "PREFIX '$1' is invalid: use 1-8 characters of [a-z0-9] (e.g. PREFIX=abc)"
}

# Names derived from a prefix; down.sh and leftovers.sh find a run's objects by these
# patterns even when up.sh failed before it recorded them.
bridge_name() { echo "kx$1br"; }
veth_name() { echo "kx$1h$2"; }
netns_name() { echo "kubexm-$1-n$2"; }
cgroup_name() { echo "kubexm-$1-n$2"; }

# The pid of the node's wrapper (up.sh's start_node) if it still runs, else nothing and status 1.
# A pid file alone says nothing: pids are reused, and with the kernel's pid_max at 32768 (this
# host's) a cluster run goes through them in minutes, so a stale wrapper.pid can name a process
# of another machine, which kill -0 finds alive and kill -KILL would kill. The wrapper joins the
# node's cgroups before anything else and stays in the first one, so that is where it is checked.
node_wrapper() {
  local D=$1 w cg
  [ -f "$D/wrapper.pid" ] && [ -f "$D/cgroups" ] || return 1
  w=$(cat "$D/wrapper.pid")
  cg=$(head -n1 "$D/cgroups")
  [[ $w =~ ^[0-9]+$ ]] && [ -n "$cg" ] && grep -qx "$w" "$cg/cgroup.procs" 2>/dev/null || return 1
  echo "$w"
}

# Run "$@" holding an exclusive lock on the file $1.
with_lock() {
  local file=$1
  shift
  mkdir -p "$(dirname "$file")"
  (
    flock 9
    "$@"
  ) 9>"$file"
}

# Bridges, netns and the nspawn tmpfs are host-wide, so runs from different caches share this lock.
HOST_LOCK=/run/lock/kubexm-test-host.lock

# sha256 of stdin, first 16 hex digits.
short_hash() { sha256sum | cut -c1-16; }

# Overlay mounts whose lower layers include $1 (a directory in the cache).
mounts_using() {
  awk -v d="$1" 'index($0, "lowerdir=") && (index($0, d ":") || index($0, d ",")) {print $5}' /proc/self/mountinfo
}

# kubelet refuses to start unless these kernel-global sysctls have its values, and a node cannot
# set them (only /proc/sys/net is writable inside). They are host-wide, so up.sh sets them on the
# host for runs started with KUBELET=1, keeping the old values in HOST_SYSCTL_ORIG, and down.sh
# puts those back when the last run is gone. Nothing else of the host kernel is changed.
KUBELET_SYSCTLS="vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1 kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000"
# Raised to at least these values for every run: the inotify limits count per user, and every
# machine's systemd (and kubelet and containerd) is the host's root. Debian's 128 instances run
# out with about 25 machines up ("Failed to allocate manager object" from a booting machine's
# systemd), or with two suites' kubelets ("inotify_init: too many open files").
HOST_SYSCTLS_MIN="fs.inotify.max_user_instances=1024 fs.inotify.max_user_watches=524288"
# The path stays what older checkouts use, so runs of two checkouts share one record.
HOST_SYSCTL_ORIG=/run/lock/kubexm-test-kubelet-sysctl.orig

# Save the values of every sysctl up.sh may change, once for all runs.
host_sysctls_save() {
  local kv key
  [ ! -f "$HOST_SYSCTL_ORIG" ] || return 0
  for kv in $KUBELET_SYSCTLS $HOST_SYSCTLS_MIN; do
    key=${kv%%=*}
    echo "$key=$(sysctl -n "$key")"
  done >"$HOST_SYSCTL_ORIG.tmp" && mv "$HOST_SYSCTL_ORIG.tmp" "$HOST_SYSCTL_ORIG"
}

# Raise HOST_SYSCTLS_MIN on the host where it is lower.
host_sysctls_raise() {
  local kv key
  host_sysctls_save
  for kv in $HOST_SYSCTLS_MIN; do
    key=${kv%%=*}
    [ "$(sysctl -n "$key")" -ge "${kv#*=}" ] ||
      sysctl -q -w "$kv" >/dev/null || die "cannot set $kv on the host (the test machines' systemd and kubelets need it)"
  done
}

# Set KUBELET_SYSCTLS on the host, saving the values found first (once, for all runs).
kubelet_sysctls_set() {
  local kv
  host_sysctls_save
  for kv in $KUBELET_SYSCTLS; do
    sysctl -q -w "$kv" >/dev/null || die "cannot set $kv on the host (kubelet needs it in the test machines)"
  done
}

# Put back what host_sysctls_save found.
host_sysctls_restore() {
  local kv
  [ -f "$HOST_SYSCTL_ORIG" ] || return 0
  while read -r kv; do
    [ -n "$kv" ] && sysctl -q -w "$kv" >/dev/null
  done <"$HOST_SYSCTL_ORIG"
  rm -f "$HOST_SYSCTL_ORIG"
}
