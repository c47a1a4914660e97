package validate

import (
	"fmt"
	"strings"
	"testing"
)

// withSpec appends YAML under spec: to the base cluster.
func withSpec(extra string) string { return base + extra }

// TestValueValidation: values that cannot mean what their field means are
// refused at their position with a hint, the injection values
// among them, and all problems come at once.
func TestValueValidation(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		path string
		msg  string
	}{
		{"etcd data dir /etc", edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: /etc\n"), "spec.etcd.dataDir", "system directory"},
		{"containerd data dir /", withSpec("  registry:\n    containerdDataDir: /\n"), "spec.registry.containerdDataDir", "system directory"},
		{"data dir parent of a system dir", withSpec("  registry:\n    containerdDataDir: /usr/local\n"), "spec.registry.containerdDataDir", "system directory"},
		{"data dir of another component", withSpec("  registry:\n    registryDataDir: /etc/kubernetes\n"), "spec.registry.registryDataDir", "another component"},
		{"data dirs overlap", edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: /var/lib/containerd/etcd\n"), "spec.etcd.dataDir", "overlaps"},
		{"backup dir /etc", edit(t, "    type: kubexm\n", "    type: kubexm\n    backupPeriod: 60\n    backupDir: /etc\n"), "spec.etcd.backupDir", "system directory"},
		{"backup dir in etcd's data dir", edit(t, "    type: kubexm\n", "    type: kubexm\n    backupPeriod: 60\n    backupDir: /var/lib/etcd/backups\n"), "spec.etcd.backupDir", "overlaps spec.etcd.dataDir"},
		{"backup dir injection", edit(t, "    type: kubexm\n", "    type: kubexm\n    backupPeriod: 60\n    backupDir: \"/b'; touch PWNED\"\n"), "spec.etcd.backupDir", "characters"},
		{"etcd data dir injection", edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: \"/x'; touch PWNED; echo '\"\n"), "spec.etcd.dataDir", "characters"},
		{"relative data dir", edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: var/lib/etcd\n"), "spec.etcd.dataDir", "absolute"},
		{"data dir not normalised", edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: /var/lib/../lib/etcd\n"), "spec.etcd.dataDir", "normalised"},
		{"deb injection", withSpec("  system:\n    debs: [\"curl$(touch PWNED)\"]\n"), "spec.system.debs[0]", "Debian package"},
		{"deb with version", withSpec("  system:\n    debs: [\"curl=7.88\"]\n"), "spec.system.debs[0]", "versions"},
		{"deb starting with -", withSpec("  system:\n    debs: [\"-y\"]\n"), "spec.system.debs[0]", "Debian package"},
		{"rpm with space", withSpec("  system:\n    rpms: [\"a b\"]\n"), "spec.system.rpms[0]", "RPM package"},
		{"label key --server", edit(t, "{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, labels: {--server: x}}"), "spec.hosts[2].labels.--server", "invalid label key"},
		{"label key bad prefix", edit(t, "{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, labels: {\"Ex_ample/zone\": a}}"), `spec.hosts[2].labels["Ex_ample/zone"]`, "prefix"},
		{"label value", edit(t, "{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, labels: {zone: \"a b\"}}"), "spec.hosts[2].labels.zone", "invalid label value"},
		{"user name", edit(t, "{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, user: \"root;id\"}"), "spec.hosts[2].user", "not a user name"},
		{"timezone", withSpec("  system:\n    timezone: Mars/Olympus\n"), "spec.system.timezone", "unknown timezone"},
		{"timezone path", withSpec("  system:\n    timezone: ../../etc/passwd\n"), "spec.system.timezone", "unknown timezone"},
		{"ntp server", withSpec("  system:\n    ntpServers: [\"pool.ntp.org; iburst\"]\n"), "spec.system.ntpServers[0]", "NTP server"},
		{"kubelet arg with space", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    kubeletArgs: [\"--v=2 --root-dir=/\"]\n"), "spec.kubernetes.kubeletArgs[0]", "kubelet flag"},
		{"kubelet arg newline", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    kubeletArgs: [\"--v=2\\nExecStartPre=/bin/touch /PWNED\"]\n"), "spec.kubernetes.kubeletArgs[0]", "kubelet flag"},
		{"kubelet arg no dashes", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    kubeletArgs: [\"v=2\"]\n"), "spec.kubernetes.kubeletArgs[0]", "kubelet flag"},
		{"cluster name", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    clusterName: \"a b\"\n"), "spec.kubernetes.clusterName", "DNS domain"},
		{"feature gate", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    featureGates: {\"a=b,c\": true}\n"), `spec.kubernetes.featureGates["a=b,c"]`, "feature gate"},
		{"registry mirror", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    containerRuntime: {type: containerd, containerd: {registryMirrors: [\"https://m.example.com\\\"]\"]}}\n"), "spec.kubernetes.containerRuntime.containerd.registryMirrors[0]", "registry URL"},
		{"insecure registry", edit(t, "    version: v1.37.2\n", "    version: v1.37.2\n    containerRuntime: {type: containerd, containerd: {insecureRegistries: [\"r:99999\"]}}\n"), "spec.kubernetes.containerRuntime.containerd.insecureRegistries[0]", "registry host"},
		{"private registry port", withSpec("  registry:\n    privateRegistry: reg.local:abc\n"), "spec.registry.privateRegistry", "registry host"},
		{"private registry path", withSpec("  registry:\n    privateRegistry: reg.local:5000/Kube$x\n"), "spec.registry.privateRegistry", "registry host"},
		{"private registry empty path", withSpec("  registry:\n    privateRegistry: reg.local:5000/\n"), "spec.registry.privateRegistry", "registry host"},
		{"namespace override", withSpec("  registry:\n    privateRegistry: reg.local\n    namespaceOverride: \"a b\"\n"), "spec.registry.namespaceOverride", "image namespace"},
		{"dnsEtcHosts brace", withSpec("  dns:\n    dnsEtcHosts: |\n      10.0.0.1 a.example.com\n      }\n      reload\n"), "spec.dns.dnsEtcHosts", "line 2"},
		{"auth user name", withSpec("  registry:\n    auths: {\"reg.local\": {username: \"u\\x01\"}}\n"), `spec.registry.auths["reg.local"].username`, "control character"},
		{"auth registry name", withSpec("  registry:\n    auths: {\"reg.local/x\": {username: u}}\n"), `spec.registry.auths["reg.local/x"]`, "registry host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := problemsOf(t, tc.yaml)
			for _, p := range ps {
				if p.Path == tc.path && strings.Contains(p.Message+" "+p.Hint, tc.msg) {
					if p.Pos.Line == 0 {
						t.Errorf("problem has no line: %v", p)
					}
					if p.Hint == "" {
						t.Errorf("problem has no hint: %v", p)
					}
					return
				}
			}
			t.Errorf("want a problem at %s containing %q, got %v", tc.path, tc.msg, ps)
		})
	}
}

func TestValueValidationAccepts(t *testing.T) {
	good := withSpec(`  system:
    debs: [curl, libc6:amd64, g++, python3.11]
    rpms: [NetworkManager, perl-Data-Dumper, libstdc++]
    timezone: Asia/Shanghai
    ntpServers: [pool.ntp.org, 192.168.1.1, m1]
  registry:
    privateRegistry: "[fd00::1]:5000"
    namespaceOverride: kubexm/images
    containerdDataDir: /data/containerd
    auths: {"reg.local:5000": {username: u, password: p}}
  dns:
    dnsEtcHosts: |
      # comment
      10.0.0.1 a.example.com b
      fd00::1 c.example.com.
`)
	good = strings.Replace(good, "{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, user: deploy.user, labels: {node-role.kubernetes.io/edge: \"\", example.com/zone: eu-1, disktype: ssd}}", 1)
	good = strings.Replace(good, "    version: v1.37.2\n", "    version: v1.37.2\n    kubeletArgs: [\"--eviction-hard=memory.available<100Mi,nodefs.available<10%\", --fail-swap-on=false, --rotate-certificates]\n", 1)
	if ps := problemsOf(t, good); ps != nil {
		t.Fatalf("valid values refused: %v", ps)
	}
}

// TestValueValidationAllAtOnce: one file with several bad values gets every
// problem in one error.
func TestValueValidationAllAtOnce(t *testing.T) {
	y := edit(t, "    type: kubexm\n", "    type: kubexm\n    dataDir: /etc\n") +
		"  system:\n    debs: [\"curl$(touch PWNED)\"]\n    timezone: Nowhere/City\n  registry:\n    containerdDataDir: /\n"
	ps := problemsOf(t, y)
	got := map[string]bool{}
	for _, p := range ps {
		got[p.Path] = true
	}
	for _, want := range []string{"spec.etcd.dataDir", "spec.system.debs[0]", "spec.system.timezone", "spec.registry.containerdDataDir"} {
		if !got[want] {
			t.Errorf("no problem for %s in %s", want, fmt.Sprint(ps))
		}
	}
}

// TestPrivateRegistryProjectPath: an existing registry's project path (as
// Harbor names a project: host:port/project) is accepted, with the
// credentials under the host and a robot account's name holding $.
func TestPrivateRegistryProjectPath(t *testing.T) {
	for _, reg := range []string{"harbor.example.local:8443/kubexm", "10.0.0.5/library/k8s", "[fd00::1]:5000/kubexm"} {
		y := withSpec(fmt.Sprintf("  registry:\n    type: external\n    privateRegistry: %q\n    auths: {%q: {username: \"robot$kubexm\", password: p}}\n", reg, strings.SplitN(reg, "/", 2)[0]))
		if ps := problemsOf(t, y); ps != nil {
			t.Errorf("privateRegistry %s refused: %v", reg, ps)
		}
	}
}
