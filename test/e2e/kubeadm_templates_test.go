//go:build e2e

package e2e

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
)

// kubeadmVars are kubeVars in kubeadm mode with a stacked etcd, the shared
// image names the roles read (images_refs: upstream's) and the role's
// defaults.
func kubeadmVars(t *testing.T, host string, extra map[string]any) map[string]any {
	t.Helper()
	return kubeadmVarsWith(t, host, nil, extra)
}

// kubeadmVarsWith is kubeadmVars with adjust changing the spec.
func kubeadmVarsWith(t *testing.T, host string, adjust func(spec map[string]any), extra map[string]any) map[string]any {
	t.Helper()
	v := kubeVars(host, func(spec map[string]any) {
		spec["kubernetes"].(map[string]any)["type"] = "kubeadm"
		spec["kubernetes"].(map[string]any)["proxyMode"] = "iptables"
		spec["etcd"] = defaultedEtcd(t, "kubeadm")
		if adjust != nil {
			adjust(spec)
		}
	})
	v["images_refs"] = map[string]any{
		"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.37.2",
		"coredns":        "registry.k8s.io/coredns/coredns:v1.14.6",
		"etcd":           "registry.k8s.io/etcd:3.7.0-0",
	}
	v["coredns_cluster_ip"] = "10.233.0.10"
	v["facts"] = map[string]any{"cgroup_version": 1}
	for k, val := range extra {
		v[k] = val
	}
	return withDefaults(t, "kubernetes/kubeadm", v)
}

// defaultedEtcd is spec.etcd of the given type as schema.SetDefaults fills
// it, the way the inventory hands it to the roles.
func defaultedEtcd(t *testing.T, etcdType string) map[string]any {
	t.Helper()
	var c schema.Cluster
	c.Spec.Etcd.Type = etcdType
	schema.SetDefaults(&c)
	b, err := yaml.Marshal(c.Spec.Etcd)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// kubeadmDocs splits a rendered multi-document file into its documents by kind.
func kubeadmDocs(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	docs := map[string]map[string]any{}
	for _, d := range strings.Split(out, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, d)
		}
		if m == nil {
			continue
		}
		docs[m["kind"].(string)] = m
	}
	return docs
}

// kubeadmValidate runs `kubeadm config validate` of the test artifacts'
// kubeadm on the file, when that kubeadm has been built.
func kubeadmValidate(t *testing.T, out string) {
	t.Helper()
	cache := os.Getenv("KUBEXM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/kubexm-test"
	}
	kubeadm := filepath.Join(cache, "artifacts", "kubernetes", kubernetesVersion, "amd64", "kubeadm")
	if _, err := os.Stat(kubeadm); err != nil {
		t.Logf("no %s: kubeadm config validate skipped", kubeadm)
		return
	}
	f := filepath.Join(t.TempDir(), "kubeadm.yaml")
	if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(kubeadm, "config", "validate", "--config", f).CombinedOutput(); err != nil {
		t.Errorf("kubeadm config validate: %v\n%s\n%s", err, b, out)
	}
}

func TestKubeadmInitConfigTemplate(t *testing.T) {
	v := kubeadmVars(t, "n1", map[string]any{
		"kubelet_extra_config":       map[string]any{"imageGCHighThresholdPercent": 100},
		"kubeadm_etcd_image_version": "3.6.16-0",
	})
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
	if again := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v); again != out {
		t.Fatalf("two renderings differ (a second run would change the file)")
	}
	docs := kubeadmDocs(t, out)
	for _, kind := range []string{"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration", "KubeProxyConfiguration"} {
		if docs[kind] == nil {
			t.Fatalf("no %s in:\n%s", kind, out)
		}
	}
	cc := docs["ClusterConfiguration"]
	want := map[string]any{
		"apiVersion":           "kubeadm.k8s.io/v1beta4",
		"controlPlaneEndpoint": "lb.kubexm.local:6443",
		"kubernetesVersion":    "v1.37.2",
		"imageRepository":      "registry.k8s.io",
		"networking":           map[string]any{"dnsDomain": "cluster.local", "podSubnet": "10.233.64.0/18", "serviceSubnet": "10.233.0.0/18"},
		"dns":                  map[string]any{"imageRepository": "registry.k8s.io/coredns", "imageTag": "v1.14.6"},
	}
	local := cc["etcd"].(map[string]any)["local"].(map[string]any)
	delete(local, "extraArgs") // TestKubeadmSpecFields
	if w := map[string]any{"imageRepository": "registry.k8s.io", "imageTag": "3.6.16-0", "dataDir": "/var/lib/etcd"}; !reflect.DeepEqual(local, w) {
		t.Errorf("ClusterConfiguration etcd.local: %#v, want %#v", local, w)
	}
	for k, w := range want {
		if !reflect.DeepEqual(cc[k], w) {
			t.Errorf("ClusterConfiguration %s: %#v, want %#v", k, cc[k], w)
		}
	}
	nr := docs["InitConfiguration"]["nodeRegistration"].(map[string]any)
	if nr["name"] != "n1" || len(nr["taints"].([]any)) != 1 {
		t.Errorf("nodeRegistration of a master that is not a worker: %#v", nr)
	}
	kc := docs["KubeletConfiguration"]
	if kc["failCgroupV1"] != false || kc["imageGCHighThresholdPercent"] != uint64(100) || kc["cgroupDriver"] != "systemd" {
		t.Errorf("KubeletConfiguration: %#v", kc)
	}
	if kp := docs["KubeProxyConfiguration"]; kp["mode"] != "iptables" || kp["clusterCIDR"] != "10.233.64.0/18" {
		t.Errorf("KubeProxyConfiguration: %#v", kp)
	}
	if strings.Contains(out, "token:") {
		t.Errorf("the init configuration names a token:\n%s", out)
	}
	kubeadmValidate(t, out)
}

// TestKubeadmInitConfigLBAddress: with the user's load balancer at
// lb_address, kubeadm's API server certificate names lb_address too, which
// the control machine's admin kubeconfig uses (kubeadm itself adds only
// controlPlaneEndpoint's host, the domain).
func TestKubeadmInitConfigLBAddress(t *testing.T) {
	v := kubeadmVars(t, "n1", map[string]any{"kubeadm_etcd_image_version": "3.6.16-0"})
	spec := v["spec"].(map[string]any)
	spec["controlPlaneEndpoint"].(map[string]any)["externalLoadBalancer"] = "external"
	spec["controlPlaneEndpoint"].(map[string]any)["lb_address"] = "172.16.0.100"
	spec["kubernetes"].(map[string]any)["apiserverCertExtraSans"] = []any{"api.corp.example", "172.16.0.100"}
	delete(v, "kubeadm_apiserver_cert_sans")
	v = withDefaults(t, "kubernetes/kubeadm", v)
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
	api, _ := kubeadmDocs(t, out)["ClusterConfiguration"]["apiServer"].(map[string]any)
	if want := []any{"api.corp.example", "172.16.0.100"}; !reflect.DeepEqual(api["certSANs"], want) {
		t.Errorf("certSANs with lb_address: %#v, want %#v", api["certSANs"], want)
	}
	delete(spec["kubernetes"].(map[string]any), "apiserverCertExtraSans")
	delete(v, "kubeadm_apiserver_cert_sans")
	v = withDefaults(t, "kubernetes/kubeadm", v)
	api, _ = kubeadmDocs(t, renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v))["ClusterConfiguration"]["apiServer"].(map[string]any)
	if want := []any{"172.16.0.100"}; !reflect.DeepEqual(api["certSANs"], want) {
		t.Errorf("certSANs with lb_address only: %#v, want %#v", api["certSANs"], want)
	}
	kubeadmValidate(t, out)
}

// TestKubeadmInitConfigPrivateRegistry: with spec.registry.privateRegistry
// (a registry kubexm deploys, reached at an address and port) kubeadm's
// imageRepository, CoreDNS's and etcd's are that registry, under the names
// roles/artifacts gives the images (images_refs) and pushes them by, so
// kubeadm pulls its control plane, etcd, CoreDNS and pause from it.
func TestKubeadmInitConfigPrivateRegistry(t *testing.T) {
	v := kubeadmVars(t, "n1", map[string]any{
		"kubeadm_etcd_image_version": "3.6.16-0",
		"images_refs": map[string]any{
			"kube-apiserver": "10.0.0.12:5443/kube-apiserver:v1.37.2",
			"coredns":        "10.0.0.12:5443/coredns/coredns:v1.14.6",
			"etcd":           "10.0.0.12:5443/etcd:3.6.16-0",
		},
	})
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
	cc := kubeadmDocs(t, out)["ClusterConfiguration"]
	if got := cc["imageRepository"]; got != "10.0.0.12:5443" {
		t.Errorf("imageRepository %v, want the registry 10.0.0.12:5443", got)
	}
	if w := map[string]any{"imageRepository": "10.0.0.12:5443/coredns", "imageTag": "v1.14.6"}; !reflect.DeepEqual(cc["dns"], w) {
		t.Errorf("dns %#v, want %#v", cc["dns"], w)
	}
	local, _ := cc["etcd"].(map[string]any)["local"].(map[string]any)
	if got := local["imageRepository"]; got != "10.0.0.12:5443" {
		t.Errorf("etcd.local.imageRepository %v, want the registry", got)
	}
	kubeadmValidate(t, out)
}

// TestKubeadmInitConfigExtraConfig: the kube_*_extra_config and
// etcd_extra_config flag maps become v1beta4 extraArgs (name/value pairs,
// sorted), kubeadm accepts the result, and a mapping as a flag is refused
// naming the variable.
func TestKubeadmInitConfigExtraConfig(t *testing.T) {
	v := kubeadmVars(t, "n1", map[string]any{
		"kubeadm_etcd_image_version":           "3.6.16-0",
		"kube_apiserver_extra_config":          map[string]any{"audit-log-maxage": uint64(7), "profiling": false},
		"kube_controller_manager_extra_config": map[string]any{"terminated-pod-gc-threshold": "100"},
		"kube_scheduler_extra_config":          map[string]any{"v": uint64(4)},
		"etcd_extra_config":                    map[string]any{"log-level": "warn", "cipher-suites": []any{"A", "B"}},
	})
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
	cc := kubeadmDocs(t, out)["ClusterConfiguration"]
	arg := func(n, val string) map[string]any { return map[string]any{"name": n, "value": val} }
	for path, want := range map[string][]any{
		// shutdown-delay-duration: kube_apiserver_shutdown_delay_seconds.
		"apiServer":         {arg("audit-log-maxage", "7"), arg("profiling", "false"), arg("shutdown-delay-duration", "5s")},
		"controllerManager": {arg("node-cidr-mask-size", "24"), arg("terminated-pod-gc-threshold", "100")},
		"scheduler":         {arg("v", "4")},
	} {
		m, _ := cc[path].(map[string]any)
		if !reflect.DeepEqual(m["extraArgs"], want) {
			t.Errorf("%s.extraArgs = %#v, want %#v\n%s", path, m["extraArgs"], want, out)
		}
	}
	local := cc["etcd"].(map[string]any)["local"].(map[string]any)
	if got := extraArgs(local["extraArgs"]); got["cipher-suites"] != "A,B" || got["log-level"] != "warn" {
		t.Errorf("etcd.local.extraArgs with etcd_extra_config = %#v, want cipher-suites A,B and log-level warn (the variable over spec.etcd.logLevel)", got)
	}
	if api := cc["apiServer"].(map[string]any); api["certSANs"] == nil {
		t.Errorf("apiServer lost its certSANs: %#v", api)
	}
	kubeadmValidate(t, out)

	// kube_apiserver_extra_config replaces the role's own flag.
	v["kube_apiserver_extra_config"] = map[string]any{"shutdown-delay-duration": "20s"}
	api := kubeadmDocs(t, renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v))["ClusterConfiguration"]["apiServer"].(map[string]any)
	if want := []any{arg("shutdown-delay-duration", "20s")}; !reflect.DeepEqual(api["extraArgs"], want) {
		t.Errorf("apiServer.extraArgs with the delay in kube_apiserver_extra_config = %#v, want %#v", api["extraArgs"], want)
	}

	v["etcd_extra_config"] = map[string]any{"client-transport-security": map[string]any{"cipher-suites": []any{"A"}}}
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "kubernetes/kubeadm", "templates", "kubeadm-init.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eval.New().RenderString(string(src), v); err == nil || !strings.Contains(err.Error(), `etcd_extra_config: flag "client-transport-security": a mapping has no command-line form`) {
		t.Errorf("a mapping in etcd_extra_config in kubeadm mode: %v", err)
	}
}

// TestKubeadmInitConfigExternalEtcd: with etcd.type kubexm the init
// configuration names roles/etcd's members as kubeadm's external etcd, with
// the client files roles/kubernetes/pki's etcd-client tasks put on the
// masters; with etcd.type external, cluster.yaml's endpoints, and no TLS
// files when it names none.
func TestKubeadmInitConfigExternalEtcd(t *testing.T) {
	for _, c := range []struct {
		name     string
		etcd     map[string]any
		wantEtcd map[string]any
	}{
		{"kubexm", map[string]any{"type": "kubexm", "external": map[string]any{"endpoints": []any{}, "caFile": "", "certFile": "", "keyFile": ""}},
			map[string]any{"external": map[string]any{
				"endpoints": []any{"https://10.0.0.1:2379", "https://10.0.0.2:2379", "https://10.0.0.3:2379"},
				"caFile":    "/etc/kubernetes/pki/etcd/ca.crt",
				"certFile":  "/etc/kubernetes/pki/apiserver-etcd-client.crt",
				"keyFile":   "/etc/kubernetes/pki/apiserver-etcd-client.key"}}},
		{"external without TLS", map[string]any{"type": "external", "external": map[string]any{"endpoints": []any{"http://192.0.2.10:2379"}, "caFile": "", "certFile": "", "keyFile": ""}},
			map[string]any{"external": map[string]any{"endpoints": []any{"http://192.0.2.10:2379"}}}},
		{"external with a CA only", map[string]any{"type": "external", "external": map[string]any{"endpoints": []any{"https://192.0.2.10:2379", "https://192.0.2.11:2379"}, "caFile": "etcd-ca.crt", "certFile": "", "keyFile": ""}},
			map[string]any{"external": map[string]any{"endpoints": []any{"https://192.0.2.10:2379", "https://192.0.2.11:2379"}, "caFile": "/etc/kubernetes/pki/etcd/ca.crt"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := kubeVars("n1", func(spec map[string]any) {
				spec["kubernetes"].(map[string]any)["type"] = "kubeadm"
				spec["kubernetes"].(map[string]any)["proxyMode"] = "iptables"
				spec["etcd"] = c.etcd
			})
			v["images_refs"] = map[string]any{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.37.2", "coredns": "registry.k8s.io/coredns/coredns:v1.14.6"}
			v["coredns_cluster_ip"] = "10.233.0.10"
			v["facts"] = map[string]any{"cgroup_version": 2}
			v = withDefaults(t, "kubernetes/kubeadm", v)
			out := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", v)
			got := kubeadmDocs(t, out)["ClusterConfiguration"]["etcd"]
			if !reflect.DeepEqual(got, c.wantEtcd) {
				t.Errorf("etcd: %#v, want %#v\n%s", got, c.wantEtcd, out)
			}
			kubeadmValidate(t, out)
		})
	}
}

func TestKubeadmJoinConfigTemplate(t *testing.T) {
	creds := map[string]any{
		"kubeadm_join_token":           "abcdef.0123456789abcdef",
		"kubeadm_join_ca_hash":         "sha256:" + strings.Repeat("ab", 32),
		"kubeadm_join_certificate_key": strings.Repeat("cd", 32),
	}
	worker := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-join.yaml.tmpl", kubeadmVars(t, "n2", creds))
	jc := kubeadmDocs(t, worker)["JoinConfiguration"]
	if jc == nil {
		t.Fatalf("no JoinConfiguration:\n%s", worker)
	}
	bt := jc["discovery"].(map[string]any)["bootstrapToken"].(map[string]any)
	if bt["apiServerEndpoint"] != "lb.kubexm.local:6443" || bt["token"] != "abcdef.0123456789abcdef" {
		t.Errorf("discovery: %#v", bt)
	}
	if _, ok := jc["controlPlane"]; ok {
		t.Errorf("a worker's JoinConfiguration has controlPlane:\n%s", worker)
	}
	if nr := jc["nodeRegistration"].(map[string]any); nr["name"] != "n2" || len(nr["taints"].([]any)) != 0 {
		t.Errorf("a worker's nodeRegistration: %#v", nr)
	}
	kubeadmValidate(t, worker)

	// A second master joins as a control-plane node with the certificate key.
	master := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-join.yaml.tmpl", kubeadmVars(t, "n1", creds))
	cp, ok := kubeadmDocs(t, master)["JoinConfiguration"]["controlPlane"].(map[string]any)
	if !ok || cp["certificateKey"] != strings.Repeat("cd", 32) {
		t.Errorf("a master's controlPlane: %#v", cp)
	}
	kubeadmValidate(t, master)
}

// The autoRenewCerts timer's playbook in kubeadm mode, rendered for n1 and run
// by kubexm as the timer runs it, against a kube_config_dir of its own: with
// kubeadm's certificates far from expiry it changes nothing and runs no
// kubeadm; with one inside the window it runs `kubeadm certs renew all`
// and then the restart of tasks/restart.yaml, which the binary carries
// (here it stops at the missing static-pod manifest: no kubelet runs).
func TestKubeadmAutoRenewPlaybook(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "etc")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{filepath.Join(cfg, "pki"), bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := filepath.Join(dir, "kubeadm.calls")
	fake := "#!/bin/sh\necho \"$@\" >> " + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "kubeadm"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	v := kubeadmVars(t, "n1", map[string]any{"kube_config_dir": cfg, "kube_bin_dir": bin, "kubeadm_restart_timeout": 5})
	out := renderRoleTemplate(t, "kubernetes/kubeadm", "certs-renew.yaml.tmpl", v)
	if !strings.Contains(out, `"renew_before": "30d"`) || !strings.Contains(out, filepath.Join(cfg, "pki/etcd/peer.crt")) ||
		!strings.Contains(out, `"url": "https://127.0.0.1:6443/readyz"`) {
		t.Fatalf("the playbook lacks the window, the stacked etcd's files or the API server's health URL:\n%s", out)
	}
	playbook := filepath.Join(dir, "playbook.yaml")
	if err := os.WriteFile(playbook, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := buildKubexm(t.Context(), t, root, dir)

	caKey, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _, err := pki.Issue(pki.Request{CommonName: "kubernetes", IsCA: true, Validity: 3650 * 24 * time.Hour}, caKey, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(validity time.Duration) {
		t.Helper()
		key, err := pki.GenerateKey(pki.ECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		_, der, err := pki.Issue(pki.Request{CommonName: "kube-apiserver", ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Validity: validity},
			key, &pki.Pair{Cert: caCert, Key: caKey}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg, "pki", "apiserver.crt"), pki.EncodeCert(der), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	play := func() (string, error) {
		cmd := exec.Command(kx, "play", playbook, "--workdir", filepath.Join(dir, "work"), "--no-journal")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}

	leaf(365 * 24 * time.Hour)
	if got, err := play(); err != nil {
		t.Fatalf("nothing due: %v\n%s", err, got)
	}
	if _, err := os.Stat(calls); !os.IsNotExist(err) {
		t.Errorf("kubeadm ran although nothing is due (%v)", err)
	}

	leaf(10 * 24 * time.Hour)
	got, err := play()
	if err == nil || !strings.Contains(got, "kube-apiserver: no manifest "+filepath.Join(cfg, "manifests", "kube-apiserver.yaml")) {
		t.Errorf("a certificate due: want the renewal, then the restart stopping at the missing manifest; got %v\n%s", err, got)
	}
	if b, err := os.ReadFile(calls); err != nil || string(b) != "certs renew all\n" {
		t.Errorf("kubeadm calls %q (%v), want one `certs renew all`", b, err)
	}
}
