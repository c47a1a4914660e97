#!/bin/bash
# List what a run of test machines left on the host: network namespaces, links (bridge, veths),
# mounts, cgroups, processes and the state dir. Exit 1 if anything is left, 0 if the host is clean.
#   PREFIX=abc test/hosts/leftovers.sh     one run
#   test/hosts/leftovers.sh                every run (any prefix), plus the shared nspawn tmpfs
# Objects are found by the names up.sh derives from the prefix, not by up.sh's records, so a
# failed up.sh or a lost state dir cannot hide anything.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_root

if [ -n "${PREFIX:-}" ]; then
  check_prefix "$PREFIX"
  P=$PREFIX
else
  P='[a-z0-9]{1,8}'
fi

found=0
report() {
  local what=$1 list=$2
  [ -n "$list" ] || return 0
  found=1
  while read -r item; do echo "leftover $what: $item"; done <<<"$list"
}

report netns "$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^kubexm-$P-n[0-9]+$" || true)"
report link "$(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E "^kx$P(br|h[0-9]+)$" || true)"
report mount "$(awk '{print $5}' /proc/self/mountinfo | grep -E "^($RUNS/$P(/|$)|/run/netns/kubexm-$P-n[0-9]+$)" || true)"
report cgroup "$(find /sys/fs/cgroup -mindepth 2 -maxdepth 8 -type d -regextype posix-extended \
  -regex ".*/kubexm-$P-n[0-9]+" -prune -print 2>/dev/null || true)"
procs=""
while read -r f; do
  [ -n "$f" ] || continue
  pid=${f#/proc/}
  pid=${pid%/cgroup}
  procs+="$pid $(tr '\0\n' '  ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-100)"$'\n'
done <<<"$(grep -lE "/kubexm-$P-n[0-9]+(/|$)" /proc/[0-9]*/cgroup 2>/dev/null)"
# An nspawn that escaped its node's cgroup would be missed above.
for pid in $(pgrep -x systemd-nspawn || true); do
  if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE "^--machine=kubexm-$P-n[0-9]+$" &&
    ! grep -q "^$pid " <<<"$procs"; then
    procs+="$pid systemd-nspawn (outside its node's cgroup)"$'\n'
  fi
done
report process "${procs%$'\n'}"
if [ -n "${PREFIX:-}" ]; then
  [ -e "$RUNS/$PREFIX" ] && report "state dir" "$RUNS/$PREFIX"
elif mountpoint -q /run/systemd/nspawn && ! pgrep -x systemd-nspawn >/dev/null; then
  report mount "/run/systemd/nspawn (tmpfs, no nspawn running)"
fi

if [ "$found" = 0 ]; then
  echo "no leftovers${PREFIX:+ of run $PREFIX}"
fi
exit "$found"
