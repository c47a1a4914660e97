// Package facts gathers what the playbooks need to know about a host (the
// `setup` builtin) in one command over its transport.
package facts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// script prints key=value lines; keys in listKeys may repeat. It starts
// with a clock exchange (see clockWatch): a line, a wait for our reply on
// stdin, then the clock.
const script = `LC_ALL=C; export LC_ALL
echo ping
read -r _
echo "epoch_ns=$(date +%s%N 2>/dev/null)"
if [ -r /etc/os-release ]; then
  ( . /etc/os-release; echo "os_id=$ID"; echo "os_version=$VERSION_ID"; echo "os_like=$ID_LIKE"; echo "os_name=$PRETTY_NAME" )
fi
echo "kernel=$(uname -r)"
echo "machine=$(uname -m)"
echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || grep -c ^processor /proc/cpuinfo)"
while read -r k v _; do
  case $k in MemTotal:) echo "mem_kb=$v";; SwapTotal:) echo "swap_kb=$v";; esac
done < /proc/meminfo
echo "hostname=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
echo "fqdn=$(hostname -f 2>/dev/null)"
if command -v ip >/dev/null 2>&1; then
  ip -o -4 addr show scope global 2>/dev/null | while read -r _ _ _ a _; do echo "ipv4=${a%/*}"; done
  ip -o -6 addr show scope global 2>/dev/null | while read -r _ _ _ a _; do echo "ipv6=${a%/*}"; done
  set -- $(ip -4 route show default 2>/dev/null)
  while [ $# -gt 0 ]; do
    if [ "$1" = dev ]; then
      echo "default_interface=$2"
      ip -o -4 addr show dev "$2" scope global 2>/dev/null | while read -r _ _ _ a _; do echo "default_ipv4=${a%/*}"; break; done
      break
    fi
    shift
  done
  set -- $(ip -6 route show default 2>/dev/null)
  while [ $# -gt 0 ]; do [ "$1" = dev ] && { echo "default_interface_v6=$2"; break; }; shift; done
else
  while read -r ifc dst _; do [ "$dst" = 00000000 ] && { echo "default_interface=$ifc"; break; }; done < /proc/net/route
  for a in $(hostname -I 2>/dev/null); do case $a in *:*) echo "ipv6=$a";; *) echo "ipv4=$a";; esac; done
fi
if [ -d /run/systemd/system ]; then echo init=systemd; else echo "init=$(cat /proc/1/comm 2>/dev/null)"; fi
for p in apt-get dnf yum zypper apk; do command -v $p >/dev/null 2>&1 && { echo "pkg_manager=$p"; break; }; done
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo cgroup_version=2; elif [ -d /sys/fs/cgroup ]; then echo cgroup_version=1; fi
echo "resolv_target=$(readlink -f /etc/resolv.conf 2>/dev/null)"
while read -r k v _; do [ "$k" = nameserver ] && echo "nameserver=$v"; done 2>/dev/null < /etc/resolv.conf
if command -v getenforce >/dev/null 2>&1; then echo "selinux=$(getenforce 2>/dev/null)"
elif [ -r /sys/fs/selinux/enforce ]; then echo "selinux_enforce=$(cat /sys/fs/selinux/enforce)"
fi
echo "user=$(id -un)"
echo "uid=$(id -u)"
`

var listKeys = map[string]bool{"ipv4": true, "ipv6": true, "nameserver": true}

// Gather runs one command on t and returns the facts:
//
//	os_id, os_version, os_family, os_name, kernel, arch (amd64, arm64...),
//	cpus, memory_mb, swap_mb, hostname, fqdn, ipv4, ipv6 ([]string, global
//	scope), default_interface, default_ipv4, init_system, systemd (bool),
//	pkg_manager, cgroup_version (1|2, 0 when unknown), resolv_stub (bool:
//	/etc/resolv.conf is systemd-resolved's stub), nameservers, selinux
//	(enforcing|permissive|disabled), clock_offset_ms (host minus control
//	machine), clock_uncertainty_ms, user, is_root.
func Gather(ctx context.Context, t transport.Transport) (map[string]any, error) {
	pr, pw := io.Pipe()
	defer pr.Close()
	clock := &clockWatch{reply: pw}
	res, err := t.Run(ctx, transport.Command{Script: script, Stdout: clock, Stdin: pr})
	pw.Close()
	if err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("gather facts on %s: exit %d: %s", t.Host(), res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	raw, lists := parse(res.Stdout)
	f := build(raw, lists)
	clock.mu.Lock()
	pinged, answered := clock.pinged, clock.answered
	clock.mu.Unlock()
	if remote, err := strconv.ParseInt(raw["epoch_ns"], 10, 64); err == nil && !answered.IsZero() {
		// The host read its clock after our reply left (pinged) and
		// before its line arrived (answered): one network round trip
		// plus a fork of date, whatever the session setup cost.
		mid := pinged.Add(answered.Sub(pinged) / 2)
		f["clock_offset_ms"] = float64(remote-mid.UnixNano()) / 1e6
		f["clock_uncertainty_ms"] = float64(answered.Sub(pinged)) / 2e6
	}
	return f, nil
}

// clockWatch answers the script's first line on stdin and notes when it did
// and when the following line (the host's clock) arrived.
type clockWatch struct {
	reply io.WriteCloser

	mu       sync.Mutex
	pinged   time.Time
	answered time.Time
	lines    int
}

func (c *clockWatch) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range p {
		if b != '\n' || c.lines >= 2 {
			continue
		}
		c.lines++
		now := time.Now()
		if c.lines == 1 {
			c.pinged = now
			// The transport copies stdin on its own goroutine; a
			// failure here only means no clock offset.
			go func() {
				io.WriteString(c.reply, "\n")
				c.reply.Close()
			}()
		} else {
			c.answered = now
		}
	}
	return len(p), nil
}

func parse(out []byte) (map[string]string, map[string][]string) {
	raw := map[string]string{}
	lists := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if listKeys[k] {
			if v != "" {
				lists[k] = append(lists[k], v)
			}
			continue
		}
		raw[k] = v
	}
	return raw, lists
}

func build(raw map[string]string, lists map[string][]string) map[string]any {
	atoi := func(k string) int {
		n, _ := strconv.Atoi(raw[k])
		return n
	}
	f := map[string]any{
		"os_id":          raw["os_id"],
		"os_version":     raw["os_version"],
		"os_family":      family(raw["os_id"], raw["os_like"]),
		"os_name":        raw["os_name"],
		"kernel":         raw["kernel"],
		"arch":           arch(raw["machine"]),
		"cpus":           atoi("cpus"),
		"memory_mb":      atoi("mem_kb") / 1024,
		"swap_mb":        atoi("swap_kb") / 1024,
		"hostname":       raw["hostname"],
		"fqdn":           raw["fqdn"],
		"ipv4":           nonNil(lists["ipv4"]),
		"ipv6":           nonNil(lists["ipv6"]),
		"nameservers":    nonNil(lists["nameserver"]),
		"init_system":    raw["init"],
		"systemd":        raw["init"] == "systemd",
		"pkg_manager":    strings.TrimSuffix(raw["pkg_manager"], "-get"),
		"cgroup_version": atoi("cgroup_version"),
		"user":           raw["user"],
		"is_root":        raw["uid"] == "0",
	}
	if f["fqdn"] == "" {
		f["fqdn"] = raw["hostname"]
	}
	f["resolv_stub"] = strings.HasSuffix(raw["resolv_target"], "/systemd/resolve/stub-resolv.conf")
	for _, ns := range lists["nameserver"] {
		if ns == "127.0.0.53" {
			f["resolv_stub"] = true
		}
	}
	switch {
	case raw["selinux"] != "":
		f["selinux"] = strings.ToLower(raw["selinux"])
	case raw["selinux_enforce"] == "1":
		f["selinux"] = "enforcing"
	case raw["selinux_enforce"] == "0":
		f["selinux"] = "permissive"
	default:
		f["selinux"] = "disabled"
	}
	f["default_interface"] = raw["default_interface"]
	f["default_ipv4"] = raw["default_ipv4"]
	return f
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// family maps os-release ID and ID_LIKE to the families playbooks branch on.
func family(id, like string) string {
	for _, w := range append([]string{id}, strings.Fields(like)...) {
		switch w {
		case "debian", "ubuntu":
			return "debian"
		case "rhel", "centos", "fedora", "rocky", "almalinux", "ol", "anolis", "openEuler", "openeuler", "kylin":
			return "redhat"
		case "suse", "opensuse", "sles", "opensuse-leap":
			return "suse"
		case "arch":
			return "arch"
		case "alpine":
			return "alpine"
		}
	}
	return id
}

// arch normalises uname -m to Go/OCI architecture names.
func arch(m string) string {
	switch m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "armv7", "armhf":
		return "arm"
	case "i386", "i686":
		return "386"
	}
	return m
}
