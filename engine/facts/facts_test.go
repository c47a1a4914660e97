package facts

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/transport/local"
)

func TestGatherLocal(t *testing.T) {
	f, err := Gather(context.Background(), local.New("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", f)
	if f["arch"] != runtime.GOARCH {
		t.Errorf("arch %v, want %s", f["arch"], runtime.GOARCH)
	}
	if n, _ := f["cpus"].(int); n < 1 {
		t.Errorf("cpus %v", f["cpus"])
	}
	if n, _ := f["memory_mb"].(int); n < 64 {
		t.Errorf("memory_mb %v", f["memory_mb"])
	}
	host, _ := os.Hostname()
	if f["hostname"] != host {
		t.Errorf("hostname %v, want %s", f["hostname"], host)
	}
	if f["is_root"] != (os.Geteuid() == 0) {
		t.Errorf("is_root %v", f["is_root"])
	}
	if f["os_id"] == "" || f["kernel"] == "" || f["os_family"] == "" {
		t.Errorf("os facts missing: %v %v %v", f["os_id"], f["kernel"], f["os_family"])
	}
	off, ok := f["clock_offset_ms"].(float64)
	unc, _ := f["clock_uncertainty_ms"].(float64)
	// Same clock: the offset is within the measurement's own uncertainty.
	if !ok || off < -unc-1 || off > unc+1 {
		t.Errorf("clock offset %v ± %v on the same machine", f["clock_offset_ms"], unc)
	}
	if _, ok := f["ipv4"].([]string); !ok {
		t.Errorf("ipv4 %T", f["ipv4"])
	}
}

func TestBuild(t *testing.T) {
	raw, lists := parse([]byte(strings.Join([]string{
		"epoch_ns=1", "os_id=rocky", "os_version=9.3", `os_like=rhel centos fedora`, "machine=aarch64",
		"cpus=4", "mem_kb=8048000", "swap_kb=0", "hostname=node1", "fqdn=",
		"ipv4=10.0.0.5", "ipv4=172.17.0.1", "ipv6=fd00::5", "default_interface=eth0", "default_ipv4=10.0.0.5",
		"init=systemd", "pkg_manager=dnf", "cgroup_version=2", "resolv_target=/run/systemd/resolve/stub-resolv.conf",
		"nameserver=127.0.0.53", "selinux=Enforcing", "user=admin", "uid=1000", "garbage line",
	}, "\n")))
	f := build(raw, lists)
	want := map[string]any{
		"os_family": "redhat", "arch": "arm64", "cpus": 4, "memory_mb": 7859, "fqdn": "node1",
		"default_interface": "eth0", "default_ipv4": "10.0.0.5", "systemd": true, "pkg_manager": "dnf",
		"cgroup_version": 2, "resolv_stub": true, "selinux": "enforcing", "is_root": false,
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %v, want %v", k, f[k], v)
		}
	}
	if ips := f["ipv4"].([]string); len(ips) != 2 || ips[1] != "172.17.0.1" {
		t.Errorf("ipv4 %v", ips)
	}
	if family("ubuntu", "debian") != "debian" || family("opensuse-leap", "suse opensuse") != "suse" || arch("x86_64") != "amd64" {
		t.Error("family/arch mapping")
	}
	raw, lists = parse([]byte("os_id=debian\nmachine=x86_64\nresolv_target=/etc/resolv.conf\nnameserver=8.8.8.8\napt=\npkg_manager=apt-get\n"))
	f = build(raw, lists)
	if f["resolv_stub"] != false || f["pkg_manager"] != "apt" || f["selinux"] != "disabled" || f["cgroup_version"] != 0 {
		t.Errorf("debian: %v", f)
	}
}
