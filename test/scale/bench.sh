#!/bin/bash
# The scale benchmark of issue 25 (make bench-scale; needs root, not part of CI).
#
# For each count in NS it brings up that many test machines (test/hosts/up.sh, one run per count,
# taken down right after), then runs with kubexm:
#   fleet   test/scale/fleet: create-cluster's preflight and os roles and a `distribute` of the
#           Kubernetes binaries (scale_binaries, default kubectl) from the test cache's release,
#           on fresh machines and again (a re-run, nothing to change);
#   twenty  test/scale/twenty, the 20-task play, on counts listed in ANSIBLE_NS also with
#           ansible-playbook (test/scale/twenty.ansible.yaml; pipelining, ControlPersist,
#           forks = hosts) on the same machines: each tool on fresh machines (the play's files
#           removed in between; no connection kept), then REPEAT re-runs of kubexm alternating with ANSIBLE_REPEAT
#           (default REPEAT) of ansible-playbook, then as many --check runs of each, all of them
#           on connections kept from the run before (kubexm --ssh-persist, ControlPersist), and
#           REPEAT re-runs of kubexm that dial each machine (rerun-dial).
# Each run's wall time, the kubexm (or ansible-playbook) process tree's CPU time (user+sys, from
# GNU time) and the bytes the control machine sent to the machines (the tx bytes of the run's
# bridge: host-to-host relay traffic is bridged between veths and not counted) go to
# $OUT/results.tsv, with the load average when the run started.
#
#   NS="10 30 100" ANSIBLE_NS="10 30" REPEAT=3 PREFIX=ksc OUT=/tmp/bench-scale test/scale/bench.sh
#
#   KUBEXM      the kubexm binary (default: built from this checkout into $OUT)
#   RELEASE     a directory holding the Kubernetes binaries and their .sha256 files
#               (default: the test cache's v1.37.2 linux/amd64)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../hosts/lib.sh
. "$ROOT/test/hosts/lib.sh"
need_root

NS=${NS:-10 30 100}
ANSIBLE_NS=${ANSIBLE_NS:-10}
REPEAT=${REPEAT:-3}
ANSIBLE_REPEAT=${ANSIBLE_REPEAT:-$REPEAT}
PREFIX=${PREFIX:-ksc}
OUT=${OUT:-/tmp/kubexm-bench-scale}
RELEASE=${RELEASE:-$CACHE/release/kubernetes/release/v1.37.2/bin/linux/amd64}
[[ $PREFIX =~ ^[a-z0-9]{1,5}$ ]] || die "PREFIX=$PREFIX: use [a-z0-9]{1,5} (the count is appended)"
for r in "$REPEAT" "$ANSIBLE_REPEAT"; do
  [[ $r =~ ^[0-9]+$ ]] || die "REPEAT=$REPEAT, ANSIBLE_REPEAT=$ANSIBLE_REPEAT: give numbers of re-runs"
done
for n in $NS $ANSIBLE_NS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "'$n' in NS/ANSIBLE_NS is not a machine count"
done
[ -f "$RELEASE/kubectl.sha256" ] || die "no Kubernetes release in $RELEASE; build it: test/artifacts/kubernetes-release.sh"
[ -x /usr/bin/time ] || die "GNU time is missing: apt-get install time"
if [ -n "$ANSIBLE_NS" ] && ! command -v ansible-playbook >/dev/null; then
  die "ansible-playbook is missing (apt-get install ansible-core), or run with ANSIBLE_NS="
fi

mkdir -p "$OUT"
if [ -z "${KUBEXM:-}" ]; then
  KUBEXM=$OUT/kubexm
  (cd "$ROOT" && nice go build -o "$KUBEXM" ./cmd/kubexm)
fi
export KUBEXM_HOME=$OUT/home
RESULTS=$OUT/results.tsv
[ -f "$RESULTS" ] || printf 'hosts\ttool\tplay\trun\twall_s\tcpu_s\tuplink_bytes\tchanged\tload1\n' >"$RESULTS"
BLOB=$OUT/blob20m
[ -f "$BLOB" ] || head -c 20000000 /dev/urandom >"$BLOB"

# measure HOSTS TOOL PLAY RUN LOG CMD...: run CMD, append one line to results.tsv.
measure() {
  local hosts=$1 tool=$2 play=$3 run=$4 log=$5
  shift 5
  local tx0 tx1 t0 t1 load rc=0 cpu changed
  load=$(cut -d' ' -f1 /proc/loadavg)
  tx0=$(cat "$BRIDGE_TX")
  t0=$(date +%s%N)
  /usr/bin/time -f '%U %S' -o "$log.time" nice "$@" >"$log" 2>&1 || rc=$?
  t1=$(date +%s%N)
  tx1=$(cat "$BRIDGE_TX")
  if [ "$rc" != 0 ]; then
    tail -n 30 "$log" >&2
    die "$tool $play ($run) on $hosts machines failed (rc $rc); log: $log"
  fi
  cpu=$(awk 'END{printf "%.2f", $1 + $2}' "$log.time")
  # The recap's changed counts, summed over hosts: kubexm prints a table (HOST OK CHANGED ...),
  # ansible "host : ok=N changed=N ..." lines after PLAY RECAP.
  if [ "$tool" = kubexm ]; then
    changed=$(awk '/^RECAP/{r = 1; next} r && $3 ~ /^[0-9]+$/ {s += $3} END{print s + 0}' "$log")
  else
    changed=$(sed -n '/^PLAY RECAP/,$p' "$log" | grep -oE 'changed=[0-9]+' | awk -F= '{s += $2} END{print s + 0}')
  fi
  printf '%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n' "$hosts" "$tool" "$play" "$run" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print (b - a) / 1e9}')" "$cpu" "$((tx1 - tx0))" "$changed" "$load" | tee -a "$RESULTS"
}

# Remove what the 20-task play made, on every machine at once.
twenty_clean() {
  local h pids=()
  for h in $KUBEXM_TEST_HOSTS; do
    ssh -F "$KUBEXM_TEST_SSH_CONFIG" "${h%%=*}" 'systemctl disable --now kxbench.service 2>/dev/null;
      rm -f /etc/systemd/system/kxbench.service; systemctl daemon-reload; rm -rf /opt/kxbench' &
    pids+=($!)
  done
  for h in "${pids[@]}"; do wait "$h"; done
}

# End the connection keepers (--ssh-persist) the runs left, and wait for them to be gone.
stop_keepers() {
  # The keeper runs as the binary's resolved path (os.Executable), matched as a fixed prefix.
  local exe
  exe=$(realpath "$KUBEXM")
  pkill -f "^${exe//./\\.} ssh-keeper" || true
  for _ in $(seq 50); do
    pgrep -f "^${exe//./\\.} ssh-keeper" >/dev/null || return 0
    sleep 0.1
  done
  echo "the connection keepers of $KUBEXM did not end" >&2
  return 1
}

down() { stop_keepers || true; PREFIX=$RUN "$ROOT/test/hosts/down.sh" >"$OUT/$RUN.down.log" 2>&1 || true; }

for n in $NS; do
  RUN=$PREFIX$n
  D=$OUT/$RUN
  mkdir -p "$D"
  trap 'down' EXIT
  t0=$SECONDS
  N=$n PREFIX=$RUN LAYERS="py=python3" nice "$ROOT/test/hosts/up.sh" >"$D/up.log" 2>&1 ||
    { tail -n 20 "$D/up.log" >&2; die "bringing up $n machines failed; log: $D/up.log"; }
  echo "$n machines up in $((SECONDS - t0)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # shellcheck disable=SC1090,SC1091 # written by up.sh
  . "$CACHE/runs/$RUN/hosts.env"
  BRIDGE_TX=/sys/class/net/$(bridge_name "$RUN")/statistics/tx_bytes

  # One master and etcd host (preflight's checks per group stay those of a small cluster),
  # every other machine a worker.
  awk '/^  roleGroups:/{exit} {print}' "$KUBEXM_TEST_INVENTORY" >"$D/cluster.yaml"
  {
    echo "  roleGroups:"
    echo "    etcd: [n1]"
    echo "    master: [n1]"
    echo "    worker: [$(seq -s, -f 'n%g' 2 "$n")]"
    echo "  kubernetes:"
    echo "    proxyMode: iptables"
  } >>"$D/cluster.yaml"
  {
    echo "[all]"
    for h in $KUBEXM_TEST_HOSTS; do echo "${h%%=*} ansible_host=${h#*=}"; done
    echo "[all:vars]"
    echo "ansible_user=root"
    echo "ansible_ssh_private_key_file=$KUBEXM_TEST_KEY"
    echo "ansible_python_interpreter=/usr/bin/python3"
  } >"$D/hosts.ini"

  # Connections kept between runs, as ansible-playbook's ControlPersist=300s below: the re-runs
  # and checks work through the keepers the run before left; every fresh run starts without.
  KX=("$KUBEXM" --ssh-host-key-checking off --ssh-persist 300s)
  cd "$D"
  # The machines have no package mirror (the packages os installs are there already), and
  # vm.*, kernel.*, fs.* are read-only in systemd-nspawn: the same -e as test/e2e/etcd_test.go.
  for run in fresh rerun; do
    measure "$n" kubexm fleet "$run" "$D/fleet-$run.log" "${KX[@]}" play "$ROOT/test/scale/fleet" \
      -i "$D/cluster.yaml" --forks "$n" -e "kubernetes_local_dir=$RELEASE" \
      -e '{"os_packages": ["iptables", "iproute2", "kmod", "procps"]}' -e os_sysctl_ignore_readonly=true
  done

  TW=(-e "bench_blob=$BLOB")
  stop_keepers || die "kept connections would make the fresh run's figures those of a re-run"
  measure "$n" kubexm twenty fresh "$D/twenty-kubexm-fresh.log" "${KX[@]}" play "$ROOT/test/scale/twenty" \
    -i "$D/hosts.ini" --forks "$n" "${TW[@]}"
  if [[ " $ANSIBLE_NS " == *" $n "* ]]; then
    twenty_clean
    export ANSIBLE_PIPELINING=1 ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_FORKS=$n ANSIBLE_NOCOLOR=1 \
      ANSIBLE_SSH_ARGS="-o ControlMaster=auto -o ControlPersist=300s -o UserKnownHostsFile=$D/ansible_known_hosts" ANSIBLE_RETRY_FILES_ENABLED=0
    measure "$n" ansible twenty fresh "$D/twenty-ansible-fresh.log" ansible-playbook \
      -i "$D/hosts.ini" "${TW[@]}" "$ROOT/test/scale/twenty.ansible.yaml"
  fi
  for r in $(seq 1 "$REPEAT"); do
    measure "$n" kubexm twenty "rerun$r" "$D/twenty-kubexm-rerun$r.log" "${KX[@]}" play "$ROOT/test/scale/twenty" \
      -i "$D/hosts.ini" --forks "$n" "${TW[@]}"
    if [[ " $ANSIBLE_NS " == *" $n "* ]] && [ "$r" -le "$ANSIBLE_REPEAT" ]; then
      measure "$n" ansible twenty "rerun$r" "$D/twenty-ansible-rerun$r.log" ansible-playbook \
        -i "$D/hosts.ini" "${TW[@]}" "$ROOT/test/scale/twenty.ansible.yaml"
    fi
  done
  # The same re-runs without the kept connections: each dials every machine, as without
  # --ssh-persist (what the keepers save).
  for r in $(seq 1 "$REPEAT"); do
    measure "$n" kubexm twenty "rerun-dial$r" "$D/twenty-kubexm-rerun-dial$r.log" "${KX[@]:0:3}" play "$ROOT/test/scale/twenty" \
      -i "$D/hosts.ini" --forks "$n" "${TW[@]}"
  done
  # --check on the converged machines: every task reads, nothing changes (the read-only probes
  # run in both plays: check_mode: false).
  for r in $(seq 1 "$REPEAT"); do
    measure "$n" kubexm twenty "check$r" "$D/twenty-kubexm-check$r.log" "${KX[@]}" play "$ROOT/test/scale/twenty" \
      -i "$D/hosts.ini" --forks "$n" --check "${TW[@]}"
    if [[ " $ANSIBLE_NS " == *" $n "* ]] && [ "$r" -le "$ANSIBLE_REPEAT" ]; then
      measure "$n" ansible twenty "check$r" "$D/twenty-ansible-check$r.log" ansible-playbook --check \
        -i "$D/hosts.ini" "${TW[@]}" "$ROOT/test/scale/twenty.ansible.yaml"
    fi
  done
  cd "$OUT"
  stop_keepers || die "the keepers hold connections to the machines about to go"

  t0=$SECONDS
  PREFIX=$RUN "$ROOT/test/hosts/down.sh" >"$D/down.log" 2>&1 || die "taking down $RUN failed; log: $D/down.log"
  trap - EXIT
  echo "$n machines down in $((SECONDS - t0)) s"
  PREFIX=$RUN "$ROOT/test/hosts/leftovers.sh"
done
echo "results: $RESULTS"
