//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// extraArgs turns kubeadm v1beta4's extraArgs (a list of name/value pairs)
// into a map; a name given twice is an error of the template, reported as
// the value "<twice>".
func extraArgs(list any) map[string]string {
	out := map[string]string{}
	l, _ := list.([]any)
	for _, a := range l {
		m, _ := a.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		if _, dup := out[n]; dup {
			v = "<twice>"
		}
		out[n] = v
	}
	return out
}

// kubeadmSpecFieldsVars are kubeadmVars with every spec field of issue 46's
// list at a value other than its default.
func kubeadmSpecFieldsVars(t *testing.T, podsCIDR string) map[string]any {
	t.Helper()
	return kubeadmVarsWith(t, "n1", func(spec map[string]any) {
		k := spec["kubernetes"].(map[string]any)
		k["nodeCidrMaskSize"] = 26
		k["featureGates"] = map[string]any{"SentinelGateA": true, "SentinelGateB": false}
		k["kubeletArgs"] = []any{"--node-labels=kubexm.test/kubelet-args=yes", "--eviction-hard=nodefs.available<10%"}
		e := spec["etcd"].(map[string]any)
		e["dataDir"] = "/data/etcd-sentinel"
		e["heartbeatInterval"] = 300
		e["electionTimeout"] = 3000
		e["snapshotCount"] = 5000
		e["autoCompactionRetention"] = 2
		e["metrics"] = "extensive"
		e["quotaBackendBytes"] = int64(4294967296)
		e["maxRequestBytes"] = int64(2097152)
		e["maxWals"] = 3
		e["logLevel"] = "warn"
		spec["network"].(map[string]any)["kubePodsCIDR"] = podsCIDR
	}, map[string]any{"kubeadm_etcd_image_version": "3.6.16-0"})
}

// TestKubeadmSpecFields (issue 46): in kubeadm mode the fields binary mode
// applies reach kubeadm's configuration too: spec.etcd's tuning and data
// directory the stacked member's flags, nodeCidrMaskSize
// kube-controller-manager's, featureGates the three control-plane
// components', kubeletArgs the kubelet unit. Before, kubeadm kept its own
// values and these were accepted and ignored.
func TestKubeadmSpecFields(t *testing.T) {
	v := kubeadmSpecFieldsVars(t, "10.233.64.0/18")
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
	cc := kubeadmDocs(t, out)["ClusterConfiguration"]
	local := cc["etcd"].(map[string]any)["local"].(map[string]any)
	if local["dataDir"] != "/data/etcd-sentinel" {
		t.Errorf("etcd.local.dataDir %v, want spec.etcd.dataDir", local["dataDir"])
	}
	etcd := extraArgs(local["extraArgs"])
	for flag, want := range map[string]string{
		"heartbeat-interval": "300", "election-timeout": "3000", "snapshot-count": "5000",
		"auto-compaction-mode": "periodic", "auto-compaction-retention": "2", "metrics": "extensive",
		"quota-backend-bytes": "4294967296", "max-request-bytes": "2097152", "max-wals": "3", "log-level": "warn",
	} {
		if etcd[flag] != want {
			t.Errorf("etcd.local.extraArgs %s = %q, want %q", flag, etcd[flag], want)
		}
	}
	gates := "SentinelGateA=true,SentinelGateB=false"
	for _, comp := range []string{"apiServer", "controllerManager", "scheduler"} {
		m, _ := cc[comp].(map[string]any)
		if got := extraArgs(m["extraArgs"])["feature-gates"]; got != gates {
			t.Errorf("%s feature-gates %q, want %q", comp, got, gates)
		}
	}
	cm := extraArgs(cc["controllerManager"].(map[string]any)["extraArgs"])
	if cm["node-cidr-mask-size"] != "26" {
		t.Errorf("controllerManager node-cidr-mask-size %q, want 26", cm["node-cidr-mask-size"])
	}
	kubeadmValidate(t, out)

	// Dual stack: kube-controller-manager's per-family flags, as in binary mode.
	v = kubeadmSpecFieldsVars(t, "10.233.64.0/18,fd00:10:233::/56")
	cc = kubeadmDocs(t, renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v))["ClusterConfiguration"]
	cm = extraArgs(cc["controllerManager"].(map[string]any)["extraArgs"])
	if cm["node-cidr-mask-size-ipv4"] != "26" || cm["node-cidr-mask-size-ipv6"] != "64" || cm["node-cidr-mask-size"] != "" {
		t.Errorf("dual-stack controllerManager extraArgs %#v, want node-cidr-mask-size-ipv4 26 and -ipv6 64", cm)
	}

	// The roles that read the stacked member's data directory (backup,
	// restore, delete) follow it.
	if v["kubeadm_etcd_data_dir"] != "/data/etcd-sentinel" {
		t.Errorf("kubeadm_etcd_data_dir %v, want spec.etcd.dataDir", v["kubeadm_etcd_data_dir"])
	}

	unit := renderRoleTemplate(t, "kubernetes/kubeadm", "kubelet.service.tmpl", v)
	exec := ""
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "ExecStart=") {
			exec = l
		}
	}
	if !strings.HasSuffix(exec, "$KUBELET_KUBEADM_ARGS --node-labels=kubexm.test/kubelet-args=yes --eviction-hard=nodefs.available<10%%") {
		t.Errorf("kubelet ExecStart without kubeletArgs after kubeadm's flags (%% doubled):\n%s", exec)
	}
	v["kubelet_extra_args"] = []any{"--v=4"}
	if unit := renderRoleTemplate(t, "kubernetes/kubeadm", "kubelet.service.tmpl", v); !strings.Contains(unit, "<10%% --v=4\n") {
		t.Errorf("kubelet_extra_args not after kubeletArgs:\n%s", unit)
	}
}

// TestCoreDNSCorefileKubeadm (issue 46): with kubernetes.type kubeadm the
// coredns role writes into kubeadm's coredns ConfigMap the Corefile binary
// mode deploys, with spec.dns.dnsEtcHosts and spec.dns.coredns.* in it;
// before, kubeadm's stock Corefile stayed and they were ignored.
func TestCoreDNSCorefileKubeadm(t *testing.T) {
	dns := `  dns:
    dnsEtcHosts: |
      192.168.0.100 sentinel-hosts.example.com
    coredns:
      upstreamDNSServers: [192.0.2.53]
      additionalConfigs: |
        whoami
      rewriteBlock: |
        rewrite name sentinel-rewrite.example.com kubernetes.default.svc.cluster.local
      externalZones:
        - zones: [sentinel-zone.example]
          nameservers: [192.0.2.54]
          cache: 7
`
	cluster := strings.Replace(addonCluster("", "", dns), "    type: kubexm\n", "    type: kubeadm\n", 1)
	vars := withRoleDefaults(t, "coredns", hostVars(t, cluster, "m1"), nil)
	objs := parseManifest(t, renderRoleTemplate(t, "coredns", "coredns-corefile.yaml.tmpl", vars))
	if got := kinds(objs); len(got) != 1 || got[0] != "ConfigMap/coredns" {
		t.Fatalf("objects %v, want kubeadm's ConfigMap/coredns alone", got)
	}
	cm := objs[0]
	if cm.get("metadata", "namespace") != "kube-system" {
		t.Errorf("namespace %v", cm.get("metadata", "namespace"))
	}
	corefile, _ := cm.get("data", "Corefile").(string)
	for _, w := range []string{"192.168.0.100 sentinel-hosts.example.com", "forward . 192.0.2.53 {", "whoami",
		"rewrite name sentinel-rewrite.example.com kubernetes.default.svc.cluster.local",
		"sentinel-zone.example {", "forward . 192.0.2.54", "cache 7",
		// kubeadm's own Corefile's plugins stay.
		"kubernetes cluster.local in-addr.arpa ip6.arpa {", "reload", "loop", "ready", "prometheus :9153"} {
		if !strings.Contains(corefile, w) {
			t.Errorf("Corefile lacks %q:\n%s", w, corefile)
		}
	}
	// The same Corefile as binary mode's manifest.
	binary := strings.Replace(cluster, "    type: kubeadm\n", "    type: kubexm\n", 1)
	bvars := withRoleDefaults(t, "coredns", hostVars(t, binary, "m1"), nil)
	if b := find(t, parseManifest(t, renderRoleTemplate(t, "coredns", "coredns.yaml.tmpl", bvars)), "ConfigMap").get("data", "Corefile"); b != corefile {
		t.Errorf("kubeadm mode's Corefile differs from binary mode's:\n%s\n---\n%s", corefile, b)
	}
}
