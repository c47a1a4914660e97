#!/bin/bash
# Installs this machine's dependencies (test/deps/packages.txt) with apt-get, and Go when
# /usr/local/go is missing. Root, or a user with sudo. Idempotent: packages already installed
# are left alone and apt-get runs only when one is missing, so a warm machine spends no time here.
set -euo pipefail
list=$(dirname "$0")/packages.txt
mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$list")
export PATH=/usr/local/go/bin:$PATH DEBIAN_FRONTEND=noninteractive

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: run as root, or install sudo: the test machines need root" >&2; exit 1; }
  sudo=(sudo)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
command -v go >/dev/null || missing+=(golang-go)
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages of $list are installed"
  exit 0
fi
echo "deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
# policy-rc.d keeps the packages from starting a host sshd on port 22, haproxy, nginx or
# postgresql. --no-install-recommends: the recommended libnss-mymachines would add "mymachines"
# to /etc/nsswitch.conf and switch Go programs to the cgo resolver.
policy=/usr/sbin/policy-rc.d made_policy=0 rc=0
if [ ! -e "$policy" ]; then
  "${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy" && made_policy=1
fi
# go.mod's `go` line makes Debian's older go fetch the right toolchain from the module proxy.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
[ "$made_policy" = 0 ] || "${sudo[@]}" rm -f "$policy"
[ "$rc" = 0 ] || { echo "deps: apt-get install ${missing[*]} failed (exit $rc)" >&2; exit "$rc"; }
go version
