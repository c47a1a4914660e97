#!/bin/bash
# Stop a run of test machines and remove everything up.sh made for it: processes, cgroups,
# mounts, network namespaces, veths, the bridge and the state dir. Works after a failed or
# interrupted up.sh too, because it finds the objects by their names. Ends with leftovers.sh
# and fails if anything is left.
#   PREFIX=abc test/hosts/down.sh
#   ALL=1 test/hosts/down.sh        every run in $KUBEXM_TEST_CACHE/runs and every kubexm netns
#   HALT_WAIT=10  seconds for a clean systemd halt before the machines are stopped hard (0 = fast)
#   KEEP=1        keep the state dir (console logs, overlay upper dirs) for inspection
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root
HALT_WAIT=${HALT_WAIT:-10}
[[ $HALT_WAIT =~ ^[0-9]+$ ]] || die "HALT_WAIT=$HALT_WAIT is not a number of seconds"

# TERM to nspawn = clean halt of the node's systemd; a second TERM = immediate; then KILL.
stop_node() {
  local D=$1 w nsp attempt wait_s
  # A wrapper that is gone leaves its pid file; that pid may be another process by now.
  w=$(node_wrapper "$D") || {
    rm -f "$D/wrapper.pid"
    return 0
  }
  for attempt in 1 2; do
    kill -0 "$w" 2>/dev/null || break
    nsp=$(pgrep -P "$w" -x systemd-nspawn)
    # shellcheck disable=SC2086 # no or one pid
    [ -n "$nsp" ] && kill -TERM $nsp
    wait_s=$HALT_WAIT
    [ "$attempt" = 2 ] && wait_s=5
    for _ in $(seq 1 $((wait_s * 4))); do
      kill -0 "$w" 2>/dev/null || break
      sleep 0.25
    done
  done
  if kill -0 "$w" 2>/dev/null; then
    # shellcheck disable=SC2046
    kill -KILL "$w" $(pgrep -P "$w") 2>/dev/null
  fi
  rm -f "$D/wrapper.pid"
}

# The run's cgroup dirs in every hierarchy, found by name.
run_cgroups() {
  find /sys/fs/cgroup -mindepth 2 -maxdepth 8 -type d -regextype posix-extended \
    -regex ".*/kubexm-$1-n[0-9]+" -prune -print 2>/dev/null
}

down_run() {
  local P=$1 STATE=$RUNS/$1 D cgroups pids ns link mp
  for D in "$STATE"/nodes/*/; do
    [ -d "$D" ] && stop_node "${D%/}" &
  done
  wait
  # Whatever is still in the run's cgroups (a wrapper whose pid file was lost, shims of nested
  # containers) is killed by pid, then the cgroups are removed depth first.
  cgroups=$(run_cgroups "$P")
  if [ -n "$cgroups" ]; then
    for _ in 1 2 3 4 5; do
      # shellcheck disable=SC2086 # one path per word
      pids=$(find $cgroups -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
      [ -z "$pids" ] && break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null
      sleep 0.3
    done
    # shellcheck disable=SC2086
    find $cgroups -depth -type d -exec rmdir {} + 2>/dev/null
  fi
  # Nested mounts first, then the overlays; lazily only if a plain umount fails.
  awk -v s="$STATE" '$5==s || index($5, s"/")==1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r mp; do umount "$mp" 2>/dev/null || umount -l "$mp"; done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^kubexm-$P-n[0-9]+$"); do
    ip netns del "$ns"
  done
  for link in $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E "^kx$P(br|h[0-9]+)$"); do
    ip link del "$link" 2>/dev/null
  done
  if [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$STATE"
  fi
}

# The tmpfs on /run/systemd/nspawn and the host sysctls up.sh changed are shared by all runs: release them
# when no run is left.
# Under the host lock, which up.sh holds while it mounts it and creates its netns.
# shellcheck disable=SC2317 # called through with_lock
release_host() {
  # Read whole before grep (a grep -q in a pipe under pipefail can fail on ip's SIGPIPE).
  grep -qE '^kubexm-' <<<"$(ip netns list 2>/dev/null)" && return 0
  host_sysctls_restore
  if mountpoint -q /run/systemd/nspawn && ! pgrep -x systemd-nspawn >/dev/null; then
    umount /run/systemd/nspawn
  fi
}

if [ "${ALL:-0}" = 1 ]; then
  prefixes=$(
    ls "$RUNS" 2>/dev/null
    ip netns list 2>/dev/null | awk '{print $1}' | sed -nE 's/^kubexm-([a-z0-9]{1,8})-n[0-9]+$/\1/p'
  )
  prefixes=$(sort -u <<<"$prefixes")
else
  [ -n "${PREFIX:-}" ] || die "PREFIX is not set: PREFIX=abc $0 (or ALL=1 $0 for every run; list: ls $RUNS)"
  prefixes=$PREFIX
fi
t0=$(date +%s%N)
for p in $prefixes; do
  check_prefix "$p"
  down_run "$p"
done
with_lock "$HOST_LOCK" release_host
rc=0
if [ "${ALL:-0}" = 1 ]; then
  "$HOSTS_DIR/leftovers.sh" || rc=1
elif [ "${KEEP:-0}" != 1 ]; then
  PREFIX=$PREFIX "$HOSTS_DIR/leftovers.sh" || rc=1
fi
echo "down${PREFIX:+ $PREFIX} in $((($(date +%s%N) - t0) / 1000000)) ms"
exit "$rc"
