#!/bin/bash
# Cut the power of one test machine: every process of the node (systemd, its services, the
# nested containers) is killed at once with SIGKILL, as a pulled plug would; nothing is shut
# down cleanly. The node's disk (overlay upper dir, /var/lib/containerd) and network namespace
# stay, so up.sh with the same PREFIX and N boots it again with its state, as a power-on would.
#   PREFIX=abc NODE=n2 test/hosts/poweroff.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root
PREFIX=${PREFIX:-}
NODE=${NODE:-}
check_prefix "$PREFIX"
[[ $NODE =~ ^n[0-9]{1,2}$ ]] || die "NODE='$NODE' is invalid: name one machine, e.g. NODE=n2"
D=$RUNS/$PREFIX/nodes/$NODE
[ -f "$D/cgroups" ] || die "machine $NODE of run $PREFIX has no cgroups recorded ($D/cgroups)"
w=$(node_wrapper "$D") || die "machine $NODE of run $PREFIX is not running"
# The wrapper first, so that it does not start nspawn again; then everything in the node's
# cgroups, until they are empty.
kill -KILL "$w" 2>/dev/null
# shellcheck disable=SC2046 # one path per word
cgroups=$(cat "$D/cgroups")
for _ in $(seq 1 50); do
  # shellcheck disable=SC2086
  pids=$(find $cgroups -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
  [ -z "$pids" ] && break
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  sleep 0.1
done
[ -z "$pids" ] || die "processes of $NODE survive SIGKILL: $pids"
# The node's cgroup subtrees (made by its systemd) go; up.sh makes the node's own again.
# shellcheck disable=SC2086
find $cgroups -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
rm -f "$D/wrapper.pid"
# The nested mounts nspawn made live in its mount namespace and are gone with it; the overlay
# root stays mounted for the next boot.
echo "$NODE of run $PREFIX powered off"
