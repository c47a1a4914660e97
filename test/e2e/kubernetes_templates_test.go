//go:build e2e

package e2e

// The fast part of the Kubernetes binary-mode roles (roles/kubernetes/pki,
// control-plane and node), without machines: the roles load with the real
// builtins, the copies of the shared defaults agree, and the defaults and
// templates render what the roles intend for a small cluster (n1 master,
// n2 and n3 workers) and its variants.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
)

var kubeRoles = []string{"kubernetes/pki", "kubernetes/control-plane", "kubernetes/node"}

// kubeVars are the inventory variables of host (n1 master, n2 and n3
// workers, every host an etcd member) as schema.Inventory makes them, with
// spec holding the fields the roles read. adjust changes the spec.
func kubeVars(host string, adjust func(spec map[string]any)) map[string]any {
	addrs := map[string]string{"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
	hostvars := map[string]any{}
	for n, a := range addrs {
		hostvars[n] = map[string]any{"internal_address": a, "address": a, "arch": "amd64", "labels": map[string]any{}}
	}
	spec := map[string]any{
		"controlPlaneEndpoint": map[string]any{
			"externalLoadBalancer": "", "internalLoadbalancer": "haproxy", "externalDNS": false,
			"domain": "lb.kubexm.local", "lb_address": "", "port": 6443,
		},
		"kubernetes": map[string]any{
			"type": "kubexm", "version": "v1.37.2", "clusterName": "cluster.local",
			"apiserverCertExtraSans": []any{"192.168.8.8", "api.example.org"},
			"maxPods":                110, "podPidsLimit": 10000, "nodeCidrMaskSize": 24, "proxyMode": "ipvs",
			"masqueradeAll": false, "featureGates": map[string]any{}, "kubeProxyConfiguration": map[string]any{},
			"kubeletArgs":      []any{},
			"containerRuntime": map[string]any{"type": "containerd", "version": "2.4.2"},
		},
		"etcd": map[string]any{
			"type":     "kubexm",
			"external": map[string]any{"endpoints": []any{}, "caFile": "", "certFile": "", "keyFile": ""},
		},
		"network":  map[string]any{"kubePodsCIDR": "10.233.64.0/18", "kubeServiceCIDR": "10.233.0.0/18"},
		"registry": map[string]any{"containerdDataDir": "/var/lib/containerd"},
	}
	if adjust != nil {
		adjust(spec)
	}
	v := map[string]any{
		"inventory_hostname": host,
		"cluster_name":       "c1",
		"cluster_file":       "/clusters/c1/cluster.yaml",
		"check_mode":         false,
		"groups": map[string]any{
			"all": []any{"n1", "n2", "n3"}, "etcd": []any{"n1", "n2", "n3"},
			"master": []any{"n1"}, "control_plane": []any{"n1"}, "worker": []any{"n2", "n3"},
			"k8s_cluster": []any{"n1", "n2", "n3"},
		},
		"hostvars": hostvars,
		"spec":     spec,
	}
	for k, val := range hostvars[host].(map[string]any) {
		v[k] = val
	}
	return v
}

// readDefaults returns a role's defaults/main.yaml in file order.
func readDefaults(t *testing.T, role string) yaml.MapSlice {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", role, "defaults", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ms yaml.MapSlice
	if err := yaml.Unmarshal(b, &ms); err != nil {
		t.Fatalf("%s defaults: %v", role, err)
	}
	return ms
}

// withDefaults renders the shared vars file and a role's defaults in declaration order over vars, as
// the engine does (each may use the ones before it), without replacing
// values vars already has (as -e would set them).
func withDefaults(t *testing.T, role string, vars map[string]any) map[string]any {
	t.Helper()
	out := make(map[string]any, len(vars)+64)
	for k, v := range vars {
		out[k] = v
	}
	completeSpec(t, out)
	out = withEtcdTuning(t, out)
	ev := eval.New()
	// The playbooks load roles/artifacts/defaults/main.yaml as shared
	// defaults: its Kubernetes release, paths and ranges come before the
	// role's defaults.
	var shared yaml.MapSlice
	for _, item := range readDefaults(t, "artifacts") {
		if sharedKubeName(fmt.Sprint(item.Key)) {
			shared = append(shared, item)
		}
	}
	for _, item := range append(shared, readDefaults(t, role)...) {
		name := fmt.Sprint(item.Key)
		if _, set := vars[name]; set {
			continue
		}
		v, err := ev.RenderValue(item.Value, out)
		if err != nil {
			t.Fatalf("%s default %s: %v", role, name, err)
		}
		out[name] = v
	}
	return out
}

// withEtcdTuning adds the role variables roles/etcd/defaults/main.yaml
// maps from spec.etcd's tuning (etcdTuning) that vars does not have: the
// playbooks load that file as a defaults file, and kubeadm's stacked etcd
// takes its tuning from them too. vars is not modified.
func withEtcdTuning(t *testing.T, vars map[string]any) map[string]any {
	t.Helper()
	out := maps.Clone(vars)
	ev := eval.New()
	for _, item := range readDefaults(t, "etcd") {
		name := fmt.Sprint(item.Key)
		if _, tuning := etcdTuning[name]; !tuning {
			continue
		}
		if _, set := out[name]; set {
			continue
		}
		v, err := ev.RenderValue(item.Value, out)
		if err != nil {
			t.Fatalf("etcd default %s: %v", name, err)
		}
		out[name] = v
	}
	return out
}

// completeSpec fills the fields a test's spec leaves out from a defaulted
// minimal cluster's, as schema.Inventory gives the roles every field of
// the spec: the roles' defaults map spec's fields (the cluster's choices
// among them) and would find a field missing that a real spec has.
func completeSpec(t *testing.T, vars map[string]any) {
	t.Helper()
	spec, _ := vars["spec"].(map[string]any)
	if spec == nil {
		return
	}
	c, _, err := validate.Parse("defaults.yaml", []byte(schema.MinimalCluster))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	var fill func(dst, src map[string]any)
	fill = func(dst, src map[string]any) {
		for k, sv := range src {
			dv, ok := dst[k]
			if !ok {
				dst[k] = sv
				continue
			}
			dm, dok := dv.(map[string]any)
			sm, sok := sv.(map[string]any)
			if dok && sok {
				fill(dm, sm)
			}
		}
	}
	fill(spec, inv.Vars["spec"].(map[string]any))
}

// sharedKubeName says whether a name of the shared versions file is one the
// Kubernetes roles read: its release, pins, paths and ranges (the image and
// artifact lists need more of cluster.yaml than kubeVars has).
// clusterChoices are the shared variables holding cluster.yaml's modes
// and the spec fields several roles read (roles/artifacts/defaults/main.yaml,
// "the cluster's choices").
var clusterChoices = []string{"kubernetes_type", "etcd_type", "container_runtime_type", "network_plugin", "registry_type",
	"control_plane_external_lb", "control_plane_internal_lb", "network_custom_role", "container_runtime_custom_role",
	"cluster_addons", "registry_auths"}

func sharedKubeName(name string) bool {
	// kubelet_cluster_dns reads the node-local cache's switch and address
	// and the kube-dns Service's address; kubelet and kubeadm name the
	// node's CRI socket, cri_endpoint. kube-vip's image is the load
	// balancer role's (it reads images_refs, which these tests leave out).
	if strings.HasPrefix(name, "kube_vip_") {
		return false
	}
	// The cluster's choices (kubernetes_type, etcd_type, ...) map spec's
	// modes once, for every role.
	if slices.Contains(clusterChoices, name) {
		return true
	}
	return strings.HasPrefix(name, "kube") || name == "pause_version" || name == "coredns_version" || name == "cri_endpoint" ||
		slices.Contains([]string{"nodelocaldns_enabled", "nodelocaldns_ip", "coredns_service_cidr", "coredns_cluster_ip"}, name)
}

func TestKubernetesTemplateRolesLoad(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("name: kube\nplays:\n")
	for _, p := range []struct{ hosts, role, from string }{
		{"k8s_cluster", "kubernetes/pki", ""}, {"master", "kubernetes/control-plane", ""}, {"k8s_cluster", "kubernetes/node", ""},
		{"k8s_cluster", "kubernetes/node", "delete"}, {"master", "kubernetes/control-plane", "delete"}, {"k8s_cluster", "kubernetes/pki", "delete"},
	} {
		fmt.Fprintf(&b, "  - hosts: %s\n    become: true\n    roles:\n      - {role: %s", p.hosts, p.role)
		if p.from != "" {
			fmt.Fprintf(&b, ", tasks_from: %s", p.from)
		}
		b.WriteString("}\n")
	}
	file := filepath.Join(dir, "playbook.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := loadOptions()
	opts.RolesPath = []string{filepath.Join(root, "roles")}
	pb, err := engine.Load(context.Background(), file, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.Plays) != 6 {
		t.Fatalf("%d plays, want 6", len(pb.Plays))
	}
	for _, role := range kubeRoles {
		for _, f := range []string{"README.md", "meta/main.yaml", "tasks/main.yaml", "tasks/delete.yaml"} {
			if _, err := os.Stat(filepath.Join(root, "roles", role, f)); err != nil {
				t.Errorf("%s: %v", role, err)
			}
		}
	}
}

// The variables the three roles share live once, in the shared defaults the
// playbooks load (defaults_files); a role that defined one of them in its
// own defaults would hide the shared value (role defaults rank above the
// shared defaults).
func TestKubernetesTemplateSharedDefaults(t *testing.T) {
	shared := map[string]bool{}
	for _, item := range readDefaults(t, "artifacts") {
		if name := fmt.Sprint(item.Key); strings.HasPrefix(name, "kube_") {
			shared[name] = true
		}
	}
	for _, name := range []string{"kube_version", "kube_cert_dir", "kube_config_dir", "kube_bin_dir", "kube_apiserver_port",
		"kube_apiserver_local_url", "kube_dns_domain", "kube_service_cidr", "kube_pods_cidr", "kube_apiserver_kubelet_client_cn"} {
		if !shared[name] {
			t.Errorf("%s is not in roles/artifacts/defaults/main.yaml", name)
		}
	}
	for _, role := range kubeRoles {
		for _, item := range readDefaults(t, role) {
			if name := fmt.Sprint(item.Key); shared[name] {
				t.Errorf("%s defines %s, which hides the shared value", role, name)
			}
		}
	}
}

// TestNoDuplicatedSchemaDefaults: the defaults the schema gives the DNS
// domain and the service and pod ranges are written once, as the shared
// kube_dns_domain, kube_service_cidr and kube_pods_cidr
// (roles/artifacts/defaults/main.yaml), and a host's architecture once, as
// the inventory's arch (schema.DefaultArch); a role that needs them reads
// those variables instead of repeating the literal, so the two cannot drift.
func TestNoDuplicatedSchemaDefaults(t *testing.T) {
	root := filepath.Join(moduleRoot(t), "roles")
	home := filepath.Join("artifacts", "defaults", "main.yaml")
	literals := []string{`"cluster.local"`, `\"cluster.local\"`, `"10.233.0.0/18"`, `\"10.233.0.0/18\"`, `"10.233.64.0/18"`, `\"10.233.64.0/18\"`,
		`"amd64"`, `\"amd64\"`}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == home || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".tmpl")) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, lit := range literals {
				if strings.Contains(line, "default "+lit) {
					t.Errorf("roles/%s:%d: default %s repeats a schema default; use kube_dns_domain, kube_service_cidr or kube_pods_cidr (roles/%s), or arch (every host has it, localhost too)", rel, i+1, lit, home)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestKubernetesTemplatePKIDefaults(t *testing.T) {
	v := withDefaults(t, "kubernetes/pki", kubeVars("n1", nil))
	sans := strings.Split(v["kube_apiserver_sans"].(string), ",")
	for _, want := range []string{
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"10.233.0.1", "n1", "10.0.0.1", "127.0.0.1", "localhost", "lb.kubexm.local", "192.168.8.8", "api.example.org",
	} {
		if !slices.Contains(sans, want) {
			t.Errorf("API server SANs lack %q: %v", want, sans)
		}
	}
	for _, not := range []string{"n2", "10.0.0.2", ""} {
		if slices.Contains(sans, not) {
			t.Errorf("API server SANs have %q: %v", not, sans)
		}
	}
	// Every kubeconfig names the endpoint's domain; without a load balancer
	// it resolves to the first master, and the control machine's admin
	// kubeconfig, which has no hosts entry, names that master.
	if got := v["kube_apiserver_url"]; got != "https://lb.kubexm.local:6443" {
		t.Errorf("without a load balancer the URL is %v, want the endpoint's domain", got)
	}
	if got := v["kube_control_plane_host_address"]; got != "10.0.0.1" {
		t.Errorf("without a load balancer the domain resolves to %v, want the first master", got)
	}
	if got := v["kube_apiserver_admin_url"]; got != "https://10.0.0.1:6443" {
		t.Errorf("without a load balancer the admin URL is %v, want the first master's", got)
	}
	if got := v["kube_apiserver_local_url"]; got != "https://127.0.0.1:6443" {
		t.Errorf("local URL %v", got)
	}

	for _, tc := range []struct {
		name             string
		host             string
		adjust           func(map[string]any)
		url, addr, admin string
		sans             []string
	}{
		{"lb_address", "n2", func(s map[string]any) {
			cpe := s["controlPlaneEndpoint"].(map[string]any)
			cpe["lb_address"], cpe["port"], cpe["externalLoadBalancer"] = "10.0.0.100", 8443, "kubexm"
		}, "https://lb.kubexm.local:8443", "10.0.0.100", "https://10.0.0.100:8443", []string{"10.0.0.100", "lb.kubexm.local"}},
		{"externalDNS", "n2", func(s map[string]any) {
			cpe := s["controlPlaneEndpoint"].(map[string]any)
			cpe["externalDNS"], cpe["domain"], cpe["externalLoadBalancer"] = true, "api.corp.example", "external"
		}, "https://api.corp.example:6443", "", "https://api.corp.example:6443", []string{"api.corp.example"}},
		{"internal haproxy, master", "n1", func(s map[string]any) {
			s["controlPlaneEndpoint"].(map[string]any)["internalLoadbalancer"] = "haproxy"
		}, "https://lb.kubexm.local:6443", "10.0.0.1", "https://10.0.0.1:6443", []string{"lb.kubexm.local"}},
		{"internal haproxy, worker", "n2", func(s map[string]any) {
			s["controlPlaneEndpoint"].(map[string]any)["internalLoadbalancer"] = "haproxy"
		}, "https://lb.kubexm.local:6443", "127.0.0.1", "https://10.0.0.1:6443", []string{"lb.kubexm.local"}},
		{"dual stack", "n1", func(s map[string]any) {
			n := s["network"].(map[string]any)
			n["kubeServiceCIDR"], n["kubePodsCIDR"] = "10.96.0.0/16,fd00:10:96::/112", "10.244.0.0/16,fd00:10:244::/56"
			s["kubernetes"].(map[string]any)["clusterName"] = "corp.local"
		}, "https://lb.kubexm.local:6443", "10.0.0.1", "https://10.0.0.1:6443", []string{"10.96.0.1", "fd00:10:96::1", "kubernetes.default.svc.corp.local"}},
	} {
		v := withDefaults(t, "kubernetes/pki", kubeVars(tc.host, tc.adjust))
		if got := v["kube_apiserver_url"]; got != tc.url {
			t.Errorf("%s: URL %v, want %s", tc.name, got, tc.url)
		}
		if got := v["kube_control_plane_host_address"]; got != tc.addr {
			t.Errorf("%s: on %s the domain resolves to %q, want %q", tc.name, tc.host, got, tc.addr)
		}
		if got := v["kube_apiserver_admin_url"]; got != tc.admin {
			t.Errorf("%s: admin URL %v, want %s", tc.name, got, tc.admin)
		}
		sans := strings.Split(v["kube_apiserver_sans"].(string), ",")
		for _, want := range tc.sans {
			if !slices.Contains(sans, want) {
				t.Errorf("%s: SANs lack %q: %v", tc.name, want, sans)
			}
		}
	}
}

func TestKubeAPIServerUnitTemplate(t *testing.T) {
	v := withDefaults(t, "kubernetes/control-plane", kubeVars("n1", func(s map[string]any) {
		s["kubernetes"].(map[string]any)["featureGates"] = map[string]any{"B": false, "A": true}
	}))
	v["kube_apiserver_extra_args"] = []any{"--audit-log-maxage=7"}
	unit := renderRoleTemplate(t, "kubernetes/control-plane", "kube-apiserver.service.tmpl", v)
	for _, want := range []string{
		"Type=notify",
		"--advertise-address=10.0.0.1 ",
		"--secure-port=6443 ",
		"--authorization-mode=Node,RBAC ",
		"--enable-admission-plugins=NodeRestriction ",
		"--etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379,https://10.0.0.3:2379 ",
		"--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt ",
		"--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt ",
		"--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key ",
		"--service-cluster-ip-range=10.233.0.0/18 ",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local ",
		"--service-account-key-file=/etc/kubernetes/pki/sa.pub ",
		"--service-account-signing-key-file=/etc/kubernetes/pki/sa.key ",
		"--kubelet-client-certificate=/etc/kubernetes/pki/apiserver-kubelet-client.crt ",
		"--kubelet-certificate-authority=/etc/kubernetes/pki/ca.crt ",
		"--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt ",
		"--requestheader-allowed-names=front-proxy-client ",
		"--proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt ",
		"--feature-gates=A=true,B=false ",
		"--audit-log-maxage=7\n",
		// kube_apiserver_shutdown_delay_seconds, and systemd's stop
		// timeout 15 s beyond it.
		"--shutdown-delay-duration=5s ",
		"TimeoutStopSec=20\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("kube-apiserver.service lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(unit, "bootstrap-token") {
		t.Errorf("bootstrap tokens are not used:\n%s", unit)
	}
	checkContinuations(t, "kube-apiserver.service", unit)

	// External etcd without TLS: the endpoints and no certificate flags.
	v = withDefaults(t, "kubernetes/control-plane", kubeVars("n1", func(s map[string]any) {
		s["etcd"] = map[string]any{"type": "external", "external": map[string]any{
			"endpoints": []any{"http://10.1.0.5:2379", "http://10.1.0.6:2379"}, "caFile": "", "certFile": "", "keyFile": ""}}
	}))
	unit = renderRoleTemplate(t, "kubernetes/control-plane", "kube-apiserver.service.tmpl", v)
	if !strings.Contains(unit, "--etcd-servers=http://10.1.0.5:2379,http://10.1.0.6:2379 ") || strings.Contains(unit, "--etcd-cafile") || strings.Contains(unit, "--etcd-certfile") {
		t.Errorf("external etcd without TLS:\n%s", unit)
	}
	checkContinuations(t, "kube-apiserver.service (external etcd)", unit)
}

func TestKubeControllerManagerAndSchedulerUnitTemplates(t *testing.T) {
	v := withDefaults(t, "kubernetes/control-plane", kubeVars("n1", nil))
	unit := renderRoleTemplate(t, "kubernetes/control-plane", "kube-controller-manager.service.tmpl", v)
	for _, want := range []string{
		"--kubeconfig=/etc/kubernetes/controller-manager.kubeconfig ",
		"--cluster-cidr=10.233.64.0/18 ",
		"--service-cluster-ip-range=10.233.0.0/18 ",
		"--allocate-node-cidrs=true ",
		"--node-cidr-mask-size=24 ",
		"--service-account-private-key-file=/etc/kubernetes/pki/sa.key ",
		"--cluster-signing-cert-file=/etc/kubernetes/pki/ca-signer.crt ",
		"--cluster-signing-key-file=/etc/kubernetes/pki/ca.key ",
		"--root-ca-file=/etc/kubernetes/pki/ca.crt ",
		"--use-service-account-credentials=true ",
		"--bind-address=127.0.0.1 ",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("kube-controller-manager.service lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(unit, "--feature-gates") {
		t.Errorf("no feature gates given, but the flag is there:\n%s", unit)
	}
	checkContinuations(t, "kube-controller-manager.service", unit)

	v = withDefaults(t, "kubernetes/control-plane", kubeVars("n1", func(s map[string]any) {
		n := s["network"].(map[string]any)
		n["kubeServiceCIDR"], n["kubePodsCIDR"] = "10.96.0.0/16,fd00:10:96::/112", "10.244.0.0/16,fd00:10:244::/56"
	}))
	unit = renderRoleTemplate(t, "kubernetes/control-plane", "kube-controller-manager.service.tmpl", v)
	for _, want := range []string{"--cluster-cidr=10.244.0.0/16,fd00:10:244::/56 ", "--node-cidr-mask-size-ipv4=24 ", "--node-cidr-mask-size-ipv6=64 "} {
		if !strings.Contains(unit, want) {
			t.Errorf("dual stack: kube-controller-manager.service lacks %q:\n%s", want, unit)
		}
	}
	checkContinuations(t, "kube-controller-manager.service (dual stack)", unit)

	unit = renderRoleTemplate(t, "kubernetes/control-plane", "kube-scheduler.service.tmpl", v)
	for _, want := range []string{"--kubeconfig=/etc/kubernetes/scheduler.kubeconfig ", "--leader-elect=true ", "--bind-address=127.0.0.1 "} {
		if !strings.Contains(unit, want) {
			t.Errorf("kube-scheduler.service lacks %q:\n%s", want, unit)
		}
	}
	checkContinuations(t, "kube-scheduler.service", unit)
}

// The *_extra_config flag maps replace a default flag (never a second
// --v), add flags, remove one with null, and are quoted for systemd; the
// *_extra_args are still appended as written.
func TestControlPlaneExtraConfig(t *testing.T) {
	for _, tc := range []struct {
		tmpl, prefix string
		extra        map[string]any
		want, absent []string
	}{
		{"kube-apiserver.service.tmpl", "kube_apiserver", map[string]any{
			"v": uint64(4), "audit-log-path": "/var/log/kube audit.log", "enable-admission-plugins": []any{"NodeRestriction", "EventRateLimit"},
			"kubelet-preferred-address-types": nil,
		}, []string{"  --v=4 \\\n", `  "--audit-log-path=/var/log/kube audit.log" \`, "--enable-admission-plugins=NodeRestriction,EventRateLimit \\"},
			[]string{"--v=2", "--kubelet-preferred-address-types"}},
		{"kube-controller-manager.service.tmpl", "kube_controller_manager", map[string]any{"node-cidr-mask-size": 26, "terminated-pod-gc-threshold": "100"},
			[]string{"--node-cidr-mask-size=26 ", "--terminated-pod-gc-threshold=100 "}, []string{"--node-cidr-mask-size=24"}},
		{"kube-scheduler.service.tmpl", "kube_scheduler", map[string]any{"leader-elect": false, "profiling": "100%"},
			[]string{"--leader-elect=false ", "--profiling=100%% "}, []string{"--leader-elect=true"}},
	} {
		v := withDefaults(t, "kubernetes/control-plane", kubeVars("n1", nil))
		v[tc.prefix+"_extra_config"] = tc.extra
		v[tc.prefix+"_extra_args"] = []any{"--audit-log-maxage=7"}
		unit := renderRoleTemplate(t, "kubernetes/control-plane", tc.tmpl, v)
		for _, w := range append(tc.want, "  --audit-log-maxage=7\nRestart=always") {
			if !strings.Contains(unit, w) {
				t.Errorf("%s with %s_extra_config lacks %q:\n%s", tc.tmpl, tc.prefix, w, unit)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(unit, a) {
				t.Errorf("%s with %s_extra_config still has %q:\n%s", tc.tmpl, tc.prefix, a, unit)
			}
		}
		checkContinuations(t, tc.tmpl, unit)

		// Not a mapping, or a mapping as a flag's value: an error naming the variable.
		src, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "kubernetes/control-plane", "templates", tc.tmpl))
		if err != nil {
			t.Fatal(err)
		}
		for bad, msg := range map[string]any{
			tc.prefix + "_extra_config must be a mapping":                []any{"--v=4"},
			tc.prefix + `_extra_config: flag "feature-gates": a mapping`: map[string]any{"feature-gates": map[string]any{"A": true}},
		} {
			v[tc.prefix+"_extra_config"] = msg
			if _, err := eval.New().RenderString(string(src), v); err == nil || !strings.Contains(err.Error(), bad) {
				t.Errorf("%s: %v: got %v, want %q", tc.tmpl, msg, err, bad)
			}
		}
	}
}

// checkContinuations checks that ExecStart's lines all end in " \" but the
// last, so no flag is lost to a broken continuation.
func checkContinuations(t *testing.T, name, unit string) {
	t.Helper()
	lines := strings.Split(unit, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "ExecStart=") {
			in = true
		}
		if !in {
			continue
		}
		if !strings.HasSuffix(l, " \\") {
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  -") {
				t.Errorf("%s: line %q ends the command, but %q follows", name, l, lines[i+1])
			}
			return
		}
	}
}

func nodeVars(t *testing.T, host string, adjust func(map[string]any), extra map[string]any) map[string]any {
	t.Helper()
	v := kubeVars(host, adjust)
	for k, val := range extra {
		v[k] = val
	}
	v = withDefaults(t, "kubernetes/node", v)
	if _, ok := v["kubelet_resolv_conf"]; !ok {
		v["kubelet_resolv_conf"] = "/etc/resolv.conf"
	}
	return v
}

func TestKubeletConfigTemplate(t *testing.T) {
	v := nodeVars(t, "n2", nil, nil)
	out := renderRoleTemplate(t, "kubernetes/node", "kubelet-config.yaml.tmpl", v)
	if again := renderRoleTemplate(t, "kubernetes/node", "kubelet-config.yaml.tmpl", v); again != out {
		t.Fatalf("two renderings differ (a second run would change the file):\n%s\n---\n%s", out, again)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("config.yaml is not YAML: %v\n%s", err, out)
	}
	want := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"cgroupDriver":             "systemd",
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"clusterDNS":               []any{"10.233.0.10"},
		"clusterDomain":            "cluster.local",
		"tlsCertFile":              "/etc/kubernetes/pki/kubelet.crt",
		"tlsPrivateKeyFile":        "/etc/kubernetes/pki/kubelet.key",
		"rotateCertificates":       false,
		"serverTLSBootstrap":       false,
		"maxPods":                  uint64(110),
		"podPidsLimit":             uint64(10000),
		"failSwapOn":               false,
		"staticPodPath":            "/etc/kubernetes/manifests",
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              uint64(10248),
		"authorization":            map[string]any{"mode": "Webhook", "webhook": map[string]any{"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true, "cacheTTL": "2m0s"},
			"x509":      map[string]any{"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
		},
	}
	for k, w := range want {
		if !reflect.DeepEqual(cfg[k], w) {
			t.Errorf("%s: %#v, want %#v", k, cfg[k], w)
		}
	}
	if _, ok := cfg["resolvConf"]; ok {
		t.Errorf("resolvConf is set although /etc/resolv.conf is the default:\n%s", out)
	}

	// The test machines' settings, merged; systemd-resolved's file.
	v = nodeVars(t, "n2", func(s map[string]any) {
		k := s["kubernetes"].(map[string]any)
		k["maxPods"], k["podPidsLimit"] = 50, 4096
	}, map[string]any{"kubelet_extra_config": map[string]any{
		"evictionHard":                    map[string]any{"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"},
		"imageGCHighThresholdPercent":     100,
		"failCgroupV1":                    false,
		"protectKernelDefaults":           false,
		"localStorageCapacityIsolation":   false,
		"authentication":                  map[string]any{"webhook": map[string]any{"enabled": true, "cacheTTL": "10s"}},
		"failSwapOn":                      true,
		"containerLogMaxSize":             "5Mi",
		"kubeReservedCgroup":              "",
		"systemReservedCgroup":            "/system.slice",
		"enforceNodeAllocatable":          []any{"pods"},
		"featureGates":                    map[string]any{"X": true},
		"registerWithTaints":              []any{},
		"shutdownGracePeriod":             "0s",
		"shutdownGracePeriodCriticalPods": "0s",
	}})
	v["kubelet_resolv_conf"] = "/run/systemd/resolve/resolv.conf"
	out = renderRoleTemplate(t, "kubernetes/node", "kubelet-config.yaml.tmpl", v)
	cfg = nil
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("config.yaml is not YAML: %v\n%s", err, out)
	}
	want = map[string]any{
		"evictionHard":                  map[string]any{"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"},
		"imageGCHighThresholdPercent":   uint64(100),
		"failCgroupV1":                  false,
		"protectKernelDefaults":         false,
		"localStorageCapacityIsolation": false,
		// A mapping is merged key by key: x509 and anonymous stay.
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true, "cacheTTL": "10s"},
			"x509":      map[string]any{"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
		},
		"failSwapOn":   true,
		"maxPods":      uint64(50),
		"podPidsLimit": uint64(4096),
		"featureGates": map[string]any{"X": true},
		"resolvConf":   "/run/systemd/resolve/resolv.conf",
	}
	for k, w := range want {
		if !reflect.DeepEqual(cfg[k], w) {
			t.Errorf("with kubelet_extra_config: %s: %#v, want %#v", k, cfg[k], w)
		}
	}
	// The defaults are not changed by the merge (the engine shares them
	// between hosts).
	if ah := v["kubelet_config"].(map[string]any)["authentication"].(map[string]any)["webhook"].(map[string]any)["cacheTTL"]; ah != "2m0s" {
		t.Errorf("rendering changed kubelet_config itself: webhook.cacheTTL = %v", ah)
	}
}

func TestKubeletUnitTemplate(t *testing.T) {
	for _, tc := range []struct{ host, taint string }{
		{"n1", "--register-with-taints=node-role.kubernetes.io/control-plane:NoSchedule \\"},
		{"n2", ""},
	} {
		v := kubeVars(tc.host, func(s map[string]any) {
			s["kubernetes"].(map[string]any)["kubeletArgs"] = []any{"--root-dir=/data/kubelet", "--eviction-hard=nodefs.available<10%"}
		})
		if tc.host == "n2" {
			v["labels"] = map[string]any{"disk": "SSD"}
		}
		v = withDefaults(t, "kubernetes/node", v)
		unit := renderRoleTemplate(t, "kubernetes/node", "kubelet.service.tmpl", v)
		for _, want := range []string{
			"--config=/var/lib/kubelet/config.yaml \\",
			"--kubeconfig=/etc/kubernetes/kubelet.kubeconfig \\",
			"--hostname-override=" + tc.host + " \\",
			"--node-ip=" + v["internal_address"].(string) + " \\",
			"--root-dir=/data/kubelet \\",
			// % is a systemd specifier: written %%.
			"--eviction-hard=nodefs.available<10%% \\",
			"After=containerd.service",
		} {
			if !strings.Contains(unit, want) {
				t.Errorf("%s: kubelet.service lacks %q:\n%s", tc.host, want, unit)
			}
		}
		if tc.taint != "" && !strings.Contains(unit, tc.taint) {
			t.Errorf("%s: kubelet.service lacks %q:\n%s", tc.host, tc.taint, unit)
		}
		if tc.taint == "" && strings.Contains(unit, "register-with-taints") {
			t.Errorf("%s is a worker but gets a taint:\n%s", tc.host, unit)
		}
		checkContinuations(t, "kubelet.service", unit)
	}
	// A master that is a worker too is not tainted.
	v := kubeVars("n1", nil)
	v["groups"].(map[string]any)["worker"] = []any{"n1", "n2", "n3"}
	v = withDefaults(t, "kubernetes/node", v)
	if unit := renderRoleTemplate(t, "kubernetes/node", "kubelet.service.tmpl", v); strings.Contains(unit, "register-with-taints") {
		t.Errorf("a master that is also a worker gets a taint:\n%s", unit)
	}
	// Dual stack: both addresses.
	v = kubeVars("n2", nil)
	v["internal_address_v6"] = "fd00::2"
	v = withDefaults(t, "kubernetes/node", v)
	if got := v["kubelet_node_ip"]; got != "10.0.0.2,fd00::2" {
		t.Errorf("dual-stack node IP %v", got)
	}
}

func TestKubeProxyTemplates(t *testing.T) {
	v := nodeVars(t, "n3", nil, nil)
	out := renderRoleTemplate(t, "kubernetes/node", "kube-proxy-config.yaml.tmpl", v)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("kube-proxy config is not YAML: %v\n%s", err, out)
	}
	want := map[string]any{
		"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
		"mode":               "ipvs",
		"clusterCIDR":        "10.233.64.0/18",
		"hostnameOverride":   "n3",
		"clientConnection":   map[string]any{"kubeconfig": "/etc/kubernetes/kube-proxy.kubeconfig"},
		"conntrack":          map[string]any{"maxPerCore": uint64(32768)},
		"healthzBindAddress": "0.0.0.0:10256",
	}
	for k, w := range want {
		if !reflect.DeepEqual(cfg[k], w) {
			t.Errorf("%s: %#v, want %#v", k, cfg[k], w)
		}
	}

	// The test machines: iptables, no conntrack changes; the spec's
	// kubeProxyConfiguration and kube_proxy_extra_config merged.
	v = nodeVars(t, "n3", func(s map[string]any) {
		k := s["kubernetes"].(map[string]any)
		k["proxyMode"], k["masqueradeAll"] = "iptables", true
		k["kubeProxyConfiguration"] = map[string]any{"ipvs": map[string]any{"excludeCIDRs": []any{"172.16.0.2/24"}}, "iptables": map[string]any{"minSyncPeriod": "5s"}}
	}, map[string]any{
		"kube_proxy_conntrack_max_per_core": 0,
		"kube_proxy_extra_config":           map[string]any{"conntrack": map[string]any{"min": 0}, "iptables": map[string]any{"syncPeriod": "1m"}},
	})
	out = renderRoleTemplate(t, "kubernetes/node", "kube-proxy-config.yaml.tmpl", v)
	cfg = nil
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("kube-proxy config is not YAML: %v\n%s", err, out)
	}
	want = map[string]any{
		"mode":      "iptables",
		"conntrack": map[string]any{"maxPerCore": uint64(0), "min": uint64(0)},
		"iptables":  map[string]any{"masqueradeAll": true, "minSyncPeriod": "5s", "syncPeriod": "1m"},
		"ipvs":      map[string]any{"excludeCIDRs": []any{"172.16.0.2/24"}},
	}
	for k, w := range want {
		if !reflect.DeepEqual(cfg[k], w) {
			t.Errorf("merged: %s: %#v, want %#v", k, cfg[k], w)
		}
	}
	// nftables: the mode as written (kube-proxy needs nft on the node,
	// which kubexm does not install).
	v = nodeVars(t, "n3", func(s map[string]any) {
		s["kubernetes"].(map[string]any)["proxyMode"] = "nftables"
	}, nil)
	cfg = nil
	if err := yaml.Unmarshal([]byte(renderRoleTemplate(t, "kubernetes/node", "kube-proxy-config.yaml.tmpl", v)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["mode"] != "nftables" {
		t.Errorf("proxyMode nftables: mode %#v", cfg["mode"])
	}
	unit := renderRoleTemplate(t, "kubernetes/node", "kube-proxy.service.tmpl", v)
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/kube-proxy \\\n  --config=/var/lib/kube-proxy/config.yaml\n") {
		t.Errorf("kube-proxy.service:\n%s", unit)
	}
}
