package validate

import (
	. "github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/schemas"

	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/internal/suggest"
)

// fakeHome points HOME at a directory holding ~/.ssh/id_rsa, which the
// seeds' example names.
func fakeHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	return home
}

func TestFullExampleParsesValidatesRoundTrips(t *testing.T) {
	fakeHome(t)
	c, warnings, err := LoadWith("../testdata/cluster-full.yaml", permissive)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if !strings.Contains(w.Message, "feature gate") {
			t.Errorf("unexpected warning: %v", w)
		}
	}
	s := c.Spec
	if len(s.Hosts) != 13 || s.Hosts[0].Port != 8022 || s.Hosts[0].User != "ubuntu" || s.Hosts[1].Labels["disk"] != "SSD" {
		t.Errorf("hosts decoded wrong: %+v", s.Hosts[:2])
	}
	if got := strings.Join(s.RoleGroups.Master, ","); got != "node4,node5,node6" {
		t.Errorf("master = %s", got)
	}
	if got := strings.Join(s.RoleGroups.Worker, ","); got != "node7,node8,node9,node10" {
		t.Errorf("worker = %s", got)
	}
	if s.Kubernetes.ContainerRuntime.Containerd == nil || !slices.Equal(s.Kubernetes.ContainerRuntime.Containerd.RegistryMirrors, []string{"aliyun.com"}) {
		t.Errorf("containerd settings: %+v", s.Kubernetes.ContainerRuntime.Containerd)
	}
	if s.Etcd.QuotaBackendBytes != 2147483648 || *s.Etcd.MaxWals != 5 || s.Network.IPPool.BlockSize != 26 {
		t.Errorf("etcd/network: %+v %+v", s.Etcd, s.Network)
	}
	if s.Registry.Auths["dockerhub.kubexm.local"].CertsPath != "certs/dockerhub.kubexm.local" {
		t.Errorf("auths: %+v", s.Registry.Auths)
	}
	ipvs := s.Kubernetes.KubeProxyConfiguration["ipvs"].(map[string]any)
	if !reflect.DeepEqual(ipvs["excludeCIDRs"], []any{"172.16.0.2/24"}) {
		t.Errorf("kubeProxyConfiguration: %#v", s.Kubernetes.KubeProxyConfiguration)
	}

	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := ParseWith("../testdata/roundtrip.yaml", out, permissive)
	if err != nil {
		t.Fatalf("marshalled form does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(c.Spec, c2.Spec) || c.Metadata != c2.Metadata {
		t.Errorf("round trip changed the cluster:\n%s", out)
	}
	out2, err := Marshal(c2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, out2) {
		t.Errorf("marshal not stable:\n%s\n---\n%s", out, out2)
	}
}

func TestSeedExampleVerbatimIsReportedNotCrashed(t *testing.T) {
	// The seed's example uses full-width colons (version： 1.7.6), which is
	// not YAML; the error must point at the line.
	_, _, err := Load("../testdata/seed-003-verbatim.yaml")
	if err == nil || !strings.Contains(err.Error(), "seed-003-verbatim.yaml:91:") || !strings.Contains(err.Error(), "full-width colon") {
		t.Fatalf("err = %v", err)
	}
	// With only the colons fixed, every remaining problem is reported at once.
	data, err := os.ReadFile("../testdata/seed-003-verbatim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fakeHome(t)
	_, _, err = Parse("seed.yaml", bytes.ReplaceAll(data, []byte("："), []byte(":")))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`spec.controlPlaneEndpoint.internalLoadbalancer: invalid value "haproxy| nginx | kube-vip"`,
		`spec.controlPlaneEndpoint.lb_address: externalLoadBalancer kubexm needs lb_address`,
		`spec.kubernetes.version: Kubernetes v1.32.4 is not supported by this kubexm (hint: supported: v1.35 to v1.37`,
		`spec.network.calico.ipipMode: Always is not supported yet`,
		`spec.roleGroups.worker[2]: host "node9" is not in spec.hosts`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, _, err := parse("c.yaml", []byte(base), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	checks := []struct {
		name      string
		got, want any
	}{
		{"host port", s.Hosts[0].Port, 22},
		{"host user", s.Hosts[0].User, "root"},
		{"host arch", s.Hosts[0].Arch, "amd64"},
		{"host connection", s.Hosts[0].Connection, "ssh"},
		{"endpoint port", s.ControlPlaneEndpoint.Port, 6443},
		{"internal LB", s.ControlPlaneEndpoint.InternalLoadbalancer, ""},
		{"k8s type", s.Kubernetes.Type, "kubexm"},
		{"k8s version", s.Kubernetes.Version, "v1.37.2"},
		{"runtime", s.Kubernetes.ContainerRuntime.Type, "containerd"},
		{"runtime version", s.Kubernetes.ContainerRuntime.Version, "2.4.2"},
		{"proxy", s.Kubernetes.ProxyMode, "iptables"},
		{"maxPods", s.Kubernetes.MaxPods, 110},
		{"etcd type", s.Etcd.Type, "kubexm"},
		{"etcd version", s.Etcd.Version, "v3.7.3"},
		{"etcd maxWals", *s.Etcd.MaxWals, 5},
		{"plugin", s.Network.Plugin, "calico"},
		{"ipip", s.Network.Calico.IPIPMode, "Never"},
		{"vxlan", s.Network.Calico.VXLANMode, "Always"},
		{"block size", s.Network.IPPool.BlockSize, 26},
		{"pods", s.Network.KubePodsCIDR, "10.233.64.0/18"},
		{"services", s.Network.KubeServiceCIDR, "10.233.0.0/18"},
		{"registry type", s.Registry.Type, ""},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	// Explicit zeros that mean something survive defaulting.
	c, _, err = parse("c.yaml", []byte(edit(t, "type: kubexm", "type: kubexm\n    maxWals: 0")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if *c.Spec.Etcd.MaxWals != 0 {
		t.Errorf("maxWals 0 overridden by default")
	}
	// Defaulting is idempotent.
	before, _ := Marshal(c)
	SetDefaults(c)
	after, _ := Marshal(c)
	if !bytes.Equal(before, after) {
		t.Errorf("SetDefaults not idempotent")
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw.txt"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := edit(t,
		"{name: m1, address: 192.168.1.1}", `{name: m1, address: 192.168.1.1, password: "${KUBEXM_PW}"}`,
		"{name: m2, address: 192.168.1.2}", `{name: m2, address: 192.168.1.2, passwordFile: pw.txt}`,
		"plugin: calico", "plugin: calico\n  registry:\n    auths:\n      reg.local: {username: u, password: \"${KUBEXM_REG}\"}")
	file := filepath.Join(dir, "cluster.yaml")
	env := map[string]string{"KUBEXM_PW": "env-secret", "KUBEXM_REG": "reg-secret"}
	c, _, err := parse(file, []byte(y), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Hosts[0].Password != "env-secret" || c.Spec.Hosts[1].Password != "from-file" || c.Spec.Registry.Auths["reg.local"].Password != "reg-secret" {
		t.Fatalf("secrets not expanded: %+v %+v", c.Spec.Hosts[:2], c.Spec.Registry.Auths)
	}
	m := c.Masked()
	out, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"env-secret", "from-file", "reg-secret"} {
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("masked output contains %q", secret)
		}
	}
	if !bytes.Contains(out, []byte(Mask)) || !bytes.Contains(out, []byte("passwordFile: pw.txt")) {
		t.Errorf("masked output:\n%s", out)
	}
	if c.Spec.Hosts[0].Password != "env-secret" || c.Spec.Registry.Auths["reg.local"].Password != "reg-secret" {
		t.Errorf("Masked modified the original")
	}
}

func TestKubeKeyConversion(t *testing.T) {
	c, warnings, err := parse("../testdata/kubekey-v3.yaml", mustRead(t, "../testdata/kubekey-v3.yaml"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	// One warning lists the conversion; the others name KubeKey defaults
	// (kubekey_docs_test.go).
	var w string
	for _, x := range warnings {
		if x.Path == "apiVersion" {
			w = x.String()
		}
	}
	for _, want := range []string{
		"kubekey-v3.yaml:2:1",
		"spec.roleGroups.control-plane -> spec.roleGroups.master",
		"spec.kubernetes.containerManager -> spec.kubernetes.containerRuntime.type",
		"spec.etcd.type kubekey -> kubexm",
		"spec.registry.registryMirrors -> spec.kubernetes.containerRuntime.containerd.registryMirrors",
		"spec.kubernetes.kubeletConfiguration -> spec.roleGroupVars.all.kubelet_extra_config",
		"spec.kubernetes.apiserverArgs -> spec.roleGroupVars.all.kube_apiserver_extra_config",
		"dropped: spec.hosts[2].timeout",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	s := c.Spec
	if c.APIVersion != APIVersion || !slices.Equal(s.RoleGroups.Master, []string{"node1"}) || !slices.Equal(s.RoleGroups.Worker, []string{"node2", "node3"}) {
		t.Errorf("converted: %s %+v", c.APIVersion, s.RoleGroups)
	}
	// KubeKey's scheduled etcd backups are kubexm's too (roles/etcd's timer).
	if strings.Contains(w, "spec.etcd.backup") || s.Etcd.BackupPeriod != 1440 || s.Etcd.KeepBackupNumber != 5 || s.Etcd.BackupDir != "/var/backups/kube_etcd" {
		t.Errorf("KubeKey's etcd backup fields: period %d, keep %d, dir %q; warnings:\n%s", s.Etcd.BackupPeriod, s.Etcd.KeepBackupNumber, s.Etcd.BackupDir, w)
	}
	// KubeKey's add-on format is kubexm's: kept as written.
	if strings.Contains(w, "spec.addons") || len(s.Addons) != 1 || s.Addons[0].Name != "nfs-client" || s.Addons[0].Namespace != "kube-system" ||
		s.Addons[0].Kind() != AddonChartKind || s.Addons[0].Sources.Chart.Repo != "https://charts.kubesphere.io/main" {
		t.Errorf("converted addons %+v; warnings:\n%s", s.Addons, w)
	}
	all := s.RoleGroupVars["all"]
	if fmt.Sprint(all["kube_apiserver_extra_config"]) != "map[audit-log-maxage:30]" || fmt.Sprint(all["kubelet_extra_config"]) != "map[evictionHard:map[memory.available:5%]]" {
		t.Errorf("KubeKey's apiserverArgs and kubeletConfiguration as group vars: %v", all)
	}
	if s.Etcd.Type != "kubexm" || s.Kubernetes.ContainerRuntime.Type != "containerd" || s.Kubernetes.Type != "kubeadm" {
		t.Errorf("converted: etcd %s runtime %s", s.Etcd.Type, s.Kubernetes.ContainerRuntime.Type)
	}
	if got := s.Kubernetes.ContainerRuntime.Containerd.RegistryMirrors; !slices.Equal(got, []string{"https://mirror.ccs.tencentyun.com"}) {
		t.Errorf("mirrors = %v", got)
	}
	// A problem in a KubeKey file still points into that file.
	bad := bytes.Replace(mustRead(t, "../testdata/kubekey-v3.yaml"), []byte("    - node1\n    worker"), []byte("    - node7\n    worker"), 1)
	_, _, err = parse("kk.yaml", bad, noEnv)
	if err == nil || !strings.Contains(err.Error(), `kk.yaml:15:7: spec.roleGroups.master[0]: host "node7"`) {
		t.Errorf("err = %v", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestJSONSchemaIsCurrent(t *testing.T) {
	want, err := schemas.JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	got := mustRead(t, "../cluster.schema.json")
	if !bytes.Equal(got, want) {
		t.Fatal("cluster.schema.json is stale: run `go generate ./schema`")
	}
	for _, frag := range []string{`"lb_address"`, `"kube-vip"`, `"additionalProperties": false`, `"const": "kubexm.mensylisir.io/v1alpha1"`} {
		if !bytes.Contains(got, []byte(frag)) {
			t.Errorf("schema lacks %s", frag)
		}
	}
}

func TestSyntaxAndShapeErrors(t *testing.T) {
	cases := map[string]string{
		"":                  "empty file",
		"a: [":              "c.yaml:1:",
		"- a\n- b\n":        "mapping with apiVersion",
		"a: 1\n---\nb: 2\n": "2 YAML documents",
		"a: 1\na: 2\n":      `c.yaml:2:1: YAML syntax: mapping key "a" already defined`,
		"a: *nope\n":        "alias",
		"apiVersion: [1]\n": "apiVersion: expected a string",
		"spec: {hosts: [{port: 99999999999999999999}]}": "spec.hosts[0].port",
	}
	for in, want := range cases {
		_, _, err := parse("c.yaml", []byte(in), noEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", in, err, want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	names := []string{"internalAddress", "address", "port", "privateKeyPath"}
	for in, want := range map[string]string{
		"prot":            `did you mean "port"?`,
		"internaladdress": `did you mean "internalAddress"?`,
		"privateKeyFile":  `did you mean "privateKeyPath"?`,
		"xyz":             "",
	} {
		if got := suggest.DidYouMean(in, names); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"../testdata/cluster-full.yaml", "../testdata/kubekey-v3.yaml", "../testdata/seed-003-verbatim.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("spec: {roleGroups: {master: [\"n[1:99]\"]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := parse("fuzz.yaml", data, noEnv)
		if err == nil {
			if _, err := Marshal(c.Masked()); err != nil {
				t.Fatalf("valid cluster does not marshal: %v", err)
			}
			if _, err := Inventory(c, ""); err != nil {
				t.Fatalf("valid cluster has no inventory: %v", err)
			}
		}
	})
}

func TestAliasBombIsAnError(t *testing.T) {
	var b strings.Builder
	b.WriteString("spec:\n  kubernetes:\n    kubeProxyConfiguration:\n      l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 8; i++ {
		refs := strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10)
		fmt.Fprintf(&b, "      l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(refs, ", "))
	}
	_, _, err := parse("bomb.yaml", []byte(b.String()), noEnv)
	if err == nil || !strings.Contains(err.Error(), "nested aliases") {
		t.Fatalf("err = %v", err)
	}
}

// Strings that read as other YAML types must come back as the same strings.
func TestMarshalRoundTripsAmbiguousStrings(t *testing.T) {
	for _, s := range []string{"123", "true", "yes", "null", "~", "0x1F", "1e3", "a: b", "#x", "- x", "'q'", "\"dq\"", " lead", "trail ", "${X}", "@at", "*star", "&amp", "!bang", "%pct", "`tick", "{a}", "[a]", "0123", ".inf", "NaN", "2022::2", "1_000"} {
		c := &Cluster{Metadata: Metadata{Name: s}, Spec: Spec{Hosts: []Host{{Name: "n", Password: s, Labels: map[string]string{s: s}}}}}
		out, err := Marshal(c)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		c2, _, err := Decode("x", out)
		if err != nil {
			t.Errorf("%q: %v\n%s", s, err, out)
			continue
		}
		if c2.Metadata.Name != s || c2.Spec.Hosts[0].Password != s || c2.Spec.Hosts[0].Labels[s] != s {
			t.Errorf("%q came back as %q / %q\n%s", s, c2.Metadata.Name, c2.Spec.Hosts[0].Password, out)
		}
	}
}

// calico's encapsulation defaults to vxlan; a mode set alone decides the
// other, so that a KubeKey file saying only ipipMode (or vxlanMode Never)
// keeps ipip.
func TestCalicoEncapsulationDefaults(t *testing.T) {
	for _, tc := range []struct{ calico, ipip, vxlan string }{
		{"", "Never", "Always"},
		{"\n    calico: {ipipMode: Always}", "Always", "Never"},
		{"\n    calico: {ipipMode: CrossSubnet}", "CrossSubnet", "Never"},
		{"\n    calico: {vxlanMode: CrossSubnet}", "Never", "CrossSubnet"},
		{"\n    calico: {ipipMode: Never, vxlanMode: Never}", "Never", "Never"},
		{"\n    calico: {vxlanMode: Never}", "Always", "Never"},
	} {
		c, _, err := parse("c.yaml", []byte(edit(t, "plugin: calico", "plugin: calico"+tc.calico)), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", tc.calico, err)
		}
		n := c.Spec.Network
		if n.Calico.IPIPMode != tc.ipip || n.Calico.VXLANMode != tc.vxlan {
			t.Errorf("%q: ipipMode %s vxlanMode %s, want %s %s", tc.calico, n.Calico.IPIPMode, n.Calico.VXLANMode, tc.ipip, tc.vxlan)
		}
	}
}
