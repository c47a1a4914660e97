//go:build e2e

package e2e

// The fast part of the network, DNS, finalisation and health roles, without
// machines: the roles load with the real builtins, and their manifests,
// rendered with the roles' defaults and the variables a cluster.yaml gives,
// are the Kubernetes objects intended.
// go test -tags e2e -run Template ./test/e2e/

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
)

// addonCluster is a cluster.yaml with a master (m1), a worker (w1) and a
// host that is both (mw); kube is added to its kubernetes block, network
// (a whole network block) and extra (more blocks) to its spec.
func addonCluster(kube, network, extra string) string {
	return `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata:
  name: addons
spec:
  hosts:
    - {name: m1, address: 10.0.0.1, password: x, labels: {disk: ssd, zone: a}}
    - {name: w1, address: 10.0.0.2, password: x}
    - {name: mw, address: 10.0.0.3, password: x, labels: {gpu: "true"}}
  roleGroups:
    etcd: [m1]
    master: [m1, mw]
    worker: [w1, mw]
  kubernetes:
    type: kubexm
` + kube + network + extra
}

// hostVars are the variables of host as a run sees them: the inventory's
// (spec, cluster_name), the host's (labels, roles, addresses), groups and
// hostvars.
func hostVars(t *testing.T, clusterYAML, host string) map[string]any {
	t.Helper()
	return hostVarsWith(t, clusterYAML, host, nil)
}

// hostVarsWith is hostVars against the support matrix s (nil: the built-in
// one), for a role whose choices the matrix still refuses.
func hostVarsWith(t *testing.T, clusterYAML, host string, s *matrix.Support) map[string]any {
	t.Helper()
	c, _, err := validate.ParseWith("cluster.yaml", []byte(clusterYAML), s)
	if err != nil {
		t.Fatalf("cluster.yaml: %v\n%s", err, clusterYAML)
	}
	inv, err := schema.Inventory(c, "test")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"check_mode": false, "work_dir": "/tmp/work"}
	for k, v := range inv.Vars {
		vars[k] = v
	}
	groups := map[string]any{}
	for g, members := range inv.Groups {
		l := make([]any, len(members))
		for i, m := range members {
			l[i] = m
		}
		groups[g] = l
	}
	hostvars := map[string]any{}
	for _, h := range inv.Hosts {
		hostvars[h.Name] = h.Vars
	}
	h, ok := inv.Host(host)
	if !ok {
		t.Fatalf("no host %s", host)
	}
	for k, v := range h.Vars {
		vars[k] = v
	}
	vars["groups"], vars["hostvars"], vars["inventory_hostname"] = groups, hostvars, host
	return vars
}

var templateRef = regexp.MustCompile(`\.([A-Za-z_][A-Za-z0-9_]*)`)

// withRoleDefaults adds roles/artifacts/defaults/main.yaml and the role's defaults/main.yaml to vars (under them, as
// role defaults sit below inventory variables; keys in override win), each
// rendered after the defaults it refers to, as the engine does when a task
// runs.
func withRoleDefaults(t *testing.T, role string, vars, override map[string]any) map[string]any {
	t.Helper()
	// The shared versions and images the playbooks load as defaults_files,
	// then the role's own defaults.
	defaults := map[string]any{}
	for _, f := range []string{filepath.Join("artifacts", "defaults", "main.yaml"), filepath.Join(role, "defaults", "main.yaml")} {
		data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", f))
		if err != nil {
			t.Fatal(err)
		}
		var layer map[string]any
		if err := yaml.Unmarshal(data, &layer); err != nil {
			t.Fatalf("roles/%s: %v", f, err)
		}
		for k, v := range layer {
			defaults[k] = v
		}
	}
	out := map[string]any{}
	for k, v := range vars {
		out[k] = v
	}
	completeSpec(t, out)
	pending := map[string]any{}
	for k, v := range defaults {
		if _, set := vars[k]; !set {
			pending[k] = v
		}
	}
	for k, v := range override {
		delete(pending, k)
		out[k] = v
	}
	ev := eval.New()
	for len(pending) > 0 {
		progress := false
		for k, v := range pending {
			src, _ := yaml.Marshal(v)
			ready := true
			for _, m := range templateRef.FindAllStringSubmatch(string(src), -1) {
				if _, waiting := pending[m[1]]; waiting && m[1] != k {
					ready = false
				}
			}
			if !ready {
				continue
			}
			r, err := ev.RenderValue(v, out)
			if err != nil {
				t.Fatalf("%s default %s: %v", role, k, err)
			}
			out[k] = r
			delete(pending, k)
			progress = true
		}
		if !progress {
			t.Fatalf("%s defaults refer to each other in a circle: %v", role, pending)
		}
	}
	return out
}

// k8sObject is the part of a manifest's documents the tests look at.
type k8sObject map[string]any

func (o k8sObject) kind() string { s, _ := o["kind"].(string); return s }

func (o k8sObject) name() string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// get walks keys (map keys, or list indexes as ints).
func (o k8sObject) get(path ...any) any {
	var v any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func parseManifest(t *testing.T, text string) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	var out []k8sObject
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("manifest is not YAML: %v\n%s", err, text)
		}
		if o == nil {
			continue
		}
		if o["apiVersion"] == nil || o["kind"] == nil || k8sObject(o).name() == "" {
			t.Errorf("document without apiVersion, kind or name: %v", o)
		}
		out = append(out, o)
	}
	return out
}

func kinds(objs []k8sObject) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.kind()+"/"+o.name())
	}
	return out
}

func find(t *testing.T, objs []k8sObject, kind string) k8sObject {
	t.Helper()
	for _, o := range objs {
		if o.kind() == kind {
			return o
		}
	}
	t.Fatalf("no %s in %v", kind, kinds(objs))
	return nil
}

func containersOf(o k8sObject) []any {
	l, _ := o.get("spec", "template", "spec", "containers").([]any)
	return l
}

const flannelNetwork = `  network:
    plugin: flannel
    kubePodsCIDR: 10.244.0.0/16
    kubeServiceCIDR: 10.96.0.0/12
`

func TestAddonTemplateFlannel(t *testing.T) {
	for _, tc := range []struct {
		name, network  string
		override       map[string]any
		netConf        map[string]any
		iface, backend string
	}{
		{name: "defaults", network: flannelNetwork,
			netConf: map[string]any{"Network": "10.244.0.0/16", "EnableNFTables": false, "Backend": map[string]any{"Type": "vxlan"}}},
		{name: "dual stack, host-gw, iface", network: `  network:
    plugin: flannel
    flannel: {backendMode: host-gw}
    kubePodsCIDR: 10.233.64.0/18,fd85:ee78:d8a6:8607::1:0/112
    kubeServiceCIDR: 10.233.0.0/18,fd85:ee78:d8a6:8607::1000/116
`, override: map[string]any{"flannel_iface": "eth1", "flannel_version": "v0.27.0", "flannel_api_host": ""},
			netConf: map[string]any{"Network": "10.233.64.0/18", "EnableIPv6": true, "IPv6Network": "fd85:ee78:d8a6:8607::1:0/112",
				"EnableNFTables": false, "Backend": map[string]any{"Type": "host-gw"}},
			iface: "--iface=eth1"},
		{name: "IPv6 only", network: `  network:
    plugin: flannel
    kubePodsCIDR: fd00:10:244::/56
    kubeServiceCIDR: fd00:10:96::/112
`, netConf: map[string]any{"EnableIPv4": false, "EnableIPv6": true, "IPv6Network": "fd00:10:244::/56",
			"EnableNFTables": false, "Backend": map[string]any{"Type": "vxlan"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := withRoleDefaults(t, "cni/flannel", hostVars(t, addonCluster("", tc.network, ""), "m1"), tc.override)
			objs := parseManifest(t, renderRoleTemplate(t, "cni/flannel", "kube-flannel.yaml.tmpl", vars))
			want := []string{"Namespace/kube-flannel", "ServiceAccount/flannel", "ClusterRole/flannel", "ClusterRoleBinding/flannel",
				"ConfigMap/kube-flannel-cfg", "DaemonSet/kube-flannel-ds"}
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Fatalf("objects %v, want %v", got, want)
			}
			for _, o := range objs[1:] {
				if ns := o.get("metadata", "namespace"); ns != nil && ns != "kube-flannel" {
					t.Errorf("%s/%s in namespace %v", o.kind(), o.name(), ns)
				}
			}
			if b := objs[3]; b.get("subjects", 0, "namespace") != "kube-flannel" || b.get("subjects", 0, "name") != "flannel" {
				t.Errorf("binding subjects %v", b.get("subjects"))
			}

			cm := find(t, objs, "ConfigMap")
			var netConf, cniConf map[string]any
			if err := json.Unmarshal([]byte(cm.get("data", "net-conf.json").(string)), &netConf); err != nil {
				t.Fatalf("net-conf.json: %v", err)
			}
			if !jsonEqual(netConf, tc.netConf) {
				t.Errorf("net-conf.json %v, want %v", netConf, tc.netConf)
			}
			// The ConfigMap's cni-conf.json is the conflist the role writes on the nodes.
			if err := json.Unmarshal([]byte(cm.get("data", "cni-conf.json").(string)), &cniConf); err != nil {
				t.Fatalf("cni-conf.json: %v", err)
			}
			var written map[string]any
			if err := json.Unmarshal([]byte(vars["flannel_cni_config"].(string)), &written); err != nil {
				t.Fatalf("flannel_cni_config: %v", err)
			}
			if !jsonEqual(cniConf, written) || cniConf["name"] != "cbr0" {
				t.Errorf("cni-conf.json %v, conflist %v", cniConf, written)
			}
			plugins, _ := cniConf["plugins"].([]any)
			if len(plugins) != 2 || plugins[0].(map[string]any)["type"] != "flannel" || plugins[1].(map[string]any)["type"] != "portmap" {
				t.Errorf("conflist plugins %v", plugins)
			}
			if vars["flannel_cni_conf_file"] != "/etc/cni/net.d/10-flannel.conflist" {
				t.Errorf("conflist path %v", vars["flannel_cni_conf_file"])
			}

			ds := find(t, objs, "DaemonSet")
			spec, _ := ds.get("spec", "template", "spec").(map[string]any)
			if spec["hostNetwork"] != true || spec["serviceAccountName"] != "flannel" {
				t.Errorf("pod spec %v", spec)
			}
			if _, ok := spec["initContainers"]; ok {
				t.Errorf("the DaemonSet has init containers: %v", spec["initContainers"])
			}
			tolerated := false
			for _, tol := range spec["tolerations"].([]any) {
				m := tol.(map[string]any)
				if m["effect"] == "NoSchedule" && m["operator"] == "Exists" && (m["key"] == nil || m["key"] == "node-role.kubernetes.io/control-plane") {
					tolerated = true
				}
			}
			if !tolerated {
				t.Errorf("the control-plane taint is not tolerated: %v", spec["tolerations"])
			}
			cs := containersOf(ds)
			if len(cs) != 1 {
				t.Fatalf("containers %v", cs)
			}
			c := k8sObject(cs[0].(map[string]any))
			version := "v0.26.7"
			if v, ok := tc.override["flannel_version"]; ok {
				version = v.(string)
			}
			if c.get("image") != "ghcr.io/flannel-io/flannel:"+version || c.get("imagePullPolicy") != "IfNotPresent" {
				t.Errorf("image %v %v", c.get("image"), c.get("imagePullPolicy"))
			}
			args := c.get("args").([]any)
			wantArgs := []any{"--ip-masq", "--kube-subnet-mgr"}
			if tc.iface != "" {
				wantArgs = append(wantArgs, tc.iface)
			}
			if !slices.Equal(args, wantArgs) || c.get("command", 0) != "/opt/bin/flanneld" {
				t.Errorf("command %v args %v, want %v", c.get("command"), args, wantArgs)
			}
			caps := c.get("securityContext", "capabilities", "add").([]any)
			if !slices.Contains(caps, any("NET_ADMIN")) || !slices.Contains(caps, any("NET_RAW")) {
				t.Errorf("capabilities %v", caps)
			}
			env := map[string]any{}
			for _, e := range c.get("env").([]any) {
				m := e.(map[string]any)
				env[m["name"].(string)] = m["value"]
				if m["valueFrom"] != nil {
					env[m["name"].(string)] = "fieldRef"
				}
			}
			if env["POD_NAME"] != "fieldRef" || env["POD_NAMESPACE"] != "fieldRef" || env["EVENT_QUEUE_DEPTH"] != "5000" {
				t.Errorf("env %v", env)
			}
			// flanneld asks the API server at the control plane's endpoint,
			// not through kube-proxy's rules, unless flannel_api_host is
			// emptied (upstream's ClusterIP).
			host, port := env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
			if h, ok := tc.override["flannel_api_host"]; ok && h == "" {
				if host != nil || port != nil {
					t.Errorf("flannel_api_host empty, yet the env names the API server: %v:%v", host, port)
				}
			} else if host == nil || host == "" || host != vars["kube_control_plane_domain"] || port != fmt.Sprint(vars["kube_control_plane_port"]) {
				t.Errorf("KUBERNETES_SERVICE_HOST:PORT %v:%v, want the control plane's endpoint %v:%v",
					host, port, vars["kube_control_plane_domain"], vars["kube_control_plane_port"])
			}
			mounts := map[string]any{}
			for _, m := range c.get("volumeMounts").([]any) {
				mm := m.(map[string]any)
				mounts[mm["mountPath"].(string)] = mm["name"]
			}
			for _, p := range []string{"/run/flannel", "/etc/kube-flannel/", "/run/xtables.lock"} {
				if mounts[p] == nil {
					t.Errorf("no mount at %s: %v", p, mounts)
				}
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestAddonTemplateCoreDNS(t *testing.T) {
	for _, tc := range []struct {
		name, kube, network, extra string
		clusterIP, domain          string
		want, unwanted             []string // lines in the Corefile
	}{
		{name: "defaults", network: flannelNetwork, clusterIP: "10.96.0.10", domain: "cluster.local",
			want: []string{"kubernetes cluster.local in-addr.arpa ip6.arpa {", "forward . /etc/resolv.conf {", "cache 30 {",
				"loop", "reload", "ready", "health {", "errors", "loadbalance"},
			unwanted: []string{"hosts {"}},
		{name: "schema defaults", network: "", clusterIP: "10.233.0.10", domain: "cluster.local"},
		{name: "dual stack, a domain, DNS settings", network: `  network:
    plugin: flannel
    kubePodsCIDR: 10.233.64.0/18,fd85:ee78:d8a6:8607::1:0/112
    kubeServiceCIDR: 10.233.0.0/18,fd85:ee78:d8a6:8607::1000/116
`, kube: "    clusterName: corp.local\n", extra: `  dns:
    dnsEtcHosts: |
      192.168.0.100 api.example.com
      192.168.0.200 ingress.example.com
    coredns:
      upstreamDNSServers: [8.8.8.8, 1.2.4.8]
      additionalConfigs: |
        whoami
      externalZones:
        - zones: [example.com, example.io:1053]
          nameservers: [1.1.1.1, 2.2.2.2]
          cache: 5
        - zones: [mydomain.tld]
          nameservers: [10.233.0.3]
          rewrite: [name substring website.tld website.namespace.svc.corp.local]
`, clusterIP: "10.233.0.10", domain: "corp.local",
			want: []string{"kubernetes corp.local in-addr.arpa ip6.arpa {", "forward . 8.8.8.8 1.2.4.8 {", "disable success corp.local",
				"hosts {", "192.168.0.100 api.example.com", "fallthrough", "whoami",
				"example.com example.io:1053 {", "forward . 1.1.1.1 2.2.2.2", "cache 5",
				"mydomain.tld {", "rewrite name substring website.tld website.namespace.svc.corp.local"},
			unwanted: []string{"forward . /etc/resolv.conf {"}},
		{name: "a /22 range", network: `  network:
    plugin: flannel
    kubeServiceCIDR: 172.16.8.0/22
`, clusterIP: "172.16.8.10", domain: "cluster.local"},
		{name: "IPv6 only", network: `  network:
    plugin: flannel
    kubePodsCIDR: fd00:10:244::/56
    kubeServiceCIDR: fd00:10:96::/108
`, clusterIP: "fd00:10:96::a", domain: "cluster.local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := addonCluster(tc.kube, tc.network, tc.extra)
			vars := withRoleDefaults(t, "coredns", hostVars(t, cluster, "m1"), nil)
			objs := parseManifest(t, renderRoleTemplate(t, "coredns", "coredns.yaml.tmpl", vars))
			want := []string{"ServiceAccount/coredns", "ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns",
				"ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns"}
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Fatalf("objects %v, want %v", got, want)
			}
			for _, o := range objs {
				if o.kind() != "ClusterRole" && o.kind() != "ClusterRoleBinding" && o.get("metadata", "namespace") != "kube-system" {
					t.Errorf("%s/%s not in kube-system", o.kind(), o.name())
				}
			}

			svc := find(t, objs, "Service")
			if svc.get("spec", "clusterIP") != tc.clusterIP || vars["coredns_cluster_ip"] != tc.clusterIP {
				t.Errorf("clusterIP %v (coredns_cluster_ip %v), want %s", svc.get("spec", "clusterIP"), vars["coredns_cluster_ip"], tc.clusterIP)
			}
			if svc.get("spec", "selector", "k8s-app") != "kube-dns" || len(svc.get("spec", "ports").([]any)) != 3 {
				t.Errorf("service spec %v", svc.get("spec"))
			}

			dep := find(t, objs, "Deployment")
			if dep.get("spec", "replicas") != uint64(2) {
				t.Errorf("replicas %v (%T)", dep.get("spec", "replicas"), dep.get("spec", "replicas"))
			}
			c := k8sObject(containersOf(dep)[0].(map[string]any))
			if c.get("image") != "registry.k8s.io/coredns/coredns:v1.14.6" || c.get("imagePullPolicy") != "IfNotPresent" {
				t.Errorf("image %v %v", c.get("image"), c.get("imagePullPolicy"))
			}
			if c.get("readinessProbe", "httpGet", "port") != uint64(8181) || c.get("readinessProbe", "httpGet", "path") != "/ready" {
				t.Errorf("readiness %v", c.get("readinessProbe"))
			}
			if dep.get("spec", "template", "spec", "serviceAccountName") != "coredns" {
				t.Errorf("service account %v", dep.get("spec", "template", "spec", "serviceAccountName"))
			}

			corefile := find(t, objs, "ConfigMap").get("data", "Corefile").(string)
			lines := map[string]bool{}
			for _, l := range strings.Split(corefile, "\n") {
				lines[strings.TrimSpace(l)] = true
			}
			for _, w := range append([]string{".:53 {", "kubernetes " + tc.domain + " in-addr.arpa ip6.arpa {"}, tc.want...) {
				if !lines[w] {
					t.Errorf("Corefile lacks %q:\n%s", w, corefile)
				}
			}
			for _, w := range tc.unwanted {
				if lines[w] {
					t.Errorf("Corefile has %q:\n%s", w, corefile)
				}
			}
			if strings.Count(corefile, "{") != strings.Count(corefile, "}") {
				t.Errorf("Corefile braces do not balance:\n%s", corefile)
			}
		})
	}
}

func TestAddonTemplateFinalizeLabels(t *testing.T) {
	cluster := addonCluster("", flannelNetwork, "")
	for host, want := range map[string][]string{
		"m1": {"node-role.kubernetes.io/control-plane=", "disk=ssd", "zone=a"},
		"w1": {"node-role.kubernetes.io/worker="},
		"mw": {"node-role.kubernetes.io/control-plane=", "node-role.kubernetes.io/worker=", "gpu=true"},
	} {
		vars := withRoleDefaults(t, "cluster-finalize", hostVars(t, cluster, host), nil)
		var got []string
		if err := json.Unmarshal([]byte(vars["cluster_finalize_labels"].(string)), &got); err != nil {
			t.Fatalf("%s: cluster_finalize_labels %q: %v", host, vars["cluster_finalize_labels"], err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: labels %v, want %v", host, got, want)
		}
		if vars["cluster_finalize_node_name"] != host || vars["kubectl_host"] != "m1" {
			t.Errorf("%s: node name %v, kubectl host %v", host, vars["cluster_finalize_node_name"], vars["kubectl_host"])
		}
	}
}

func TestAddonTemplateHealthVars(t *testing.T) {
	for _, tc := range []struct {
		kube, network               string
		server, name, typ, expected string
	}{
		{"", flannelNetwork, "10.96.0.10", "kubernetes.default.svc.cluster.local", "A", "10.96.0.1"},
		{"    clusterName: k8s.test\n", "  network:\n    kubePodsCIDR: fd00:10:244::/56,10.244.0.0/16\n    kubeServiceCIDR: fd00:10:96::/108,10.96.0.0/12\n",
			"fd00:10:96::a", "kubernetes.default.svc.k8s.test", "AAAA", "fd00:10:96::1"},
	} {
		cluster := addonCluster(tc.kube, tc.network, "")
		vars := withRoleDefaults(t, "health", hostVars(t, cluster, "w1"), nil)
		// The coredns role gives the Service the address health asks.
		dns := withRoleDefaults(t, "coredns", hostVars(t, cluster, "w1"), nil)
		if vars["coredns_cluster_ip"] != tc.server || dns["coredns_cluster_ip"] != tc.server || vars["health_dns_name"] != tc.name ||
			vars["health_dns_type"] != tc.typ || vars["health_dns_expected"] != tc.expected {
			t.Errorf("%s: server %v (coredns %v), name %v, type %v, expected %v", tc.network, vars["coredns_cluster_ip"], dns["coredns_cluster_ip"],
				vars["health_dns_name"], vars["health_dns_type"], vars["health_dns_expected"])
		}
	}
}

// TestAddonTemplateRolesLoad loads every task file of the four roles with the
// real builtins, the way create-cluster and delete use them.
func TestAddonTemplateRolesLoad(t *testing.T) {
	dir := t.TempDir()
	pb := `name: addons
plays:
  - {name: network, hosts: k8s_cluster, become: true, tags: [network], roles: [cni]}
  - {name: dns, hosts: master, become: true, tags: [dns], roles: [coredns]}
  - {name: finalize, hosts: k8s_cluster, become: true, tags: [finalize], roles: [cluster-finalize]}
  - {name: health, hosts: k8s_cluster, become: true, tags: [health], roles: [health]}
  - {name: remove dns, hosts: master, roles: [{role: coredns, tasks_from: delete}]}
  - {name: remove network, hosts: k8s_cluster, roles: [{role: cni, tasks_from: delete}]}
  - {name: flannel alone, hosts: k8s_cluster, roles: [cni/flannel, {role: cni/flannel, tasks_from: delete}]}
  - {name: add-ons, hosts: master, roles: [nodelocaldns, metrics-server]}
  - {name: remove add-ons, hosts: master, roles: [{role: nodelocaldns, tasks_from: delete}, {role: metrics-server, tasks_from: delete}]}
  - {name: clean nodes, hosts: k8s_cluster, roles: [{role: nodelocaldns, tasks_from: clean-node}]}
`
	if err := os.WriteFile(filepath.Join(dir, "playbook.yaml"), []byte(pb), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := loadOptions()
	opts.RolesPath = []string{filepath.Join(moduleRoot(t), "roles")}
	if _, err := engine.Load(context.Background(), dir, opts); err != nil {
		t.Fatal(err)
	}
}

// TestAddonTemplateMetricsServer: spec.addons [metrics-server] turns the
// role and its image on; the kubelets' certificates are checked against the
// cluster CA in binary mode and not in kubeadm mode (self-signed there).
func TestAddonTemplateMetricsServer(t *testing.T) {
	for _, tc := range []struct {
		name, extra                string
		kubeadm, enabled, insecure bool
	}{
		{name: "off", extra: ""},
		{name: "binary mode", extra: "  addons: [metrics-server]\n", enabled: true},
		{name: "kubeadm", kubeadm: true, extra: "  addons: [metrics-server]\n", enabled: true, insecure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := addonCluster("", flannelNetwork, tc.extra)
			if tc.kubeadm {
				cluster = strings.Replace(cluster, "type: kubexm", "type: kubeadm", 1)
			}
			vars := withRoleDefaults(t, "metrics-server", hostVars(t, cluster, "m1"), nil)
			if vars["metrics_server_enabled"] != tc.enabled {
				t.Fatalf("metrics_server_enabled %v, want %v", vars["metrics_server_enabled"], tc.enabled)
			}
			if has := slices.ContainsFunc(vars["images_needed"].([]any), func(m any) bool { return m.(map[string]any)["name"] == "metrics-server" }); has != tc.enabled {
				t.Errorf("metrics-server image needed %v, want %v", has, tc.enabled)
			}
			objs := parseManifest(t, renderRoleTemplate(t, "metrics-server", "metrics-server.yaml.tmpl", vars))
			want := []string{"ServiceAccount/metrics-server", "ClusterRole/system:aggregated-metrics-reader", "ClusterRole/system:metrics-server",
				"RoleBinding/metrics-server-auth-reader", "ClusterRoleBinding/metrics-server:system:auth-delegator",
				"ClusterRoleBinding/system:metrics-server", "Service/metrics-server", "Deployment/metrics-server", "APIService/v1beta1.metrics.k8s.io"}
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Fatalf("objects %v, want %v", got, want)
			}
			// Without the type the API server defaults, kubectl apply sends
			// {"spec":{"strategy":{"$retainKeys":["rollingUpdate"]}}} on
			// every run and reports the Deployment configured (TestNodes).
			if typ := find(t, objs, "Deployment").get("spec", "strategy", "type"); typ != "RollingUpdate" {
				t.Errorf("the Deployment's strategy type is %v, want RollingUpdate written out", typ)
			}
			c := k8sObject(containersOf(find(t, objs, "Deployment"))[0].(map[string]any))
			if c.get("image") != "registry.k8s.io/metrics-server/metrics-server:v0.8.0" {
				t.Errorf("image %v", c.get("image"))
			}
			args := c.get("args").([]any)
			if slices.Contains(args, any("--kubelet-insecure-tls")) != tc.insecure ||
				slices.Contains(args, any("--kubelet-certificate-authority=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")) == tc.insecure {
				t.Errorf("args %v, insecure TLS wanted: %v", args, tc.insecure)
			}
		})
	}
}

// TestAddonTemplateNodeLocalDNS: spec.dns.nodelocaldns turns the cache on,
// moves every kubelet's clusterDNS (binary and kubeadm modes) to its
// address, and the Corefile binds that address and forwards cluster names
// to CoreDNS.
func TestAddonTemplateNodeLocalDNS(t *testing.T) {
	for _, tc := range []struct {
		name, extra   string
		enabled       bool
		ip, kubeletIP string
		want          []string
	}{
		{name: "off", kubeletIP: "10.96.0.10"},
		{name: "on", extra: "  dns:\n    nodelocaldns: {}\n", enabled: true, ip: "169.254.25.10", kubeletIP: "169.254.25.10",
			want: []string{"cluster.local:53 {", "bind 169.254.25.10", "forward . 10.96.0.10 {", "force_tcp", "forward . /etc/resolv.conf",
				"health 169.254.25.10:9254", "in-addr.arpa:53 {", "ip6.arpa:53 {", ".:53 {"}},
		{name: "turned off", extra: "  dns:\n    nodelocaldns: {enabled: false}\n", kubeletIP: "10.96.0.10"},
		{name: "another address and zones", extra: `  dns:
    coredns:
      upstreamDNSServers: [8.8.8.8]
    nodelocaldns:
      localIP: 169.254.20.10
      externalZones:
        - zones: [example.com]
          nameservers: [1.1.1.1]
          cache: 5
`, enabled: true, ip: "169.254.20.10", kubeletIP: "169.254.20.10",
			want: []string{"example.com {", "forward . 1.1.1.1", "cache 5", "bind 169.254.20.10", "forward . 8.8.8.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := addonCluster("", flannelNetwork, tc.extra)
			vars := withRoleDefaults(t, "nodelocaldns", hostVars(t, cluster, "w1"), nil)
			if vars["nodelocaldns_enabled"] != tc.enabled {
				t.Fatalf("nodelocaldns_enabled %v, want %v", vars["nodelocaldns_enabled"], tc.enabled)
			}
			node := withRoleDefaults(t, "kubernetes/node", hostVars(t, cluster, "w1"), nil)
			if node["kube_cluster_dns"] != tc.kubeletIP {
				t.Errorf("binary mode kubelet clusterDNS %v, want %s", node["kube_cluster_dns"], tc.kubeletIP)
			}
			kubeadm := withRoleDefaults(t, "kubernetes/kubeadm", hostVars(t, strings.Replace(cluster, "type: kubexm", "type: kubeadm", 1), "w1"), nil)
			if got := kubeadm["kubeadm_kubelet_config"].(map[string]any)["clusterDNS"]; !jsonEqual(got, []any{tc.kubeletIP}) {
				t.Errorf("kubeadm kubelet clusterDNS %v, want %s", got, tc.kubeletIP)
			}
			if !tc.enabled {
				return
			}
			objs := parseManifest(t, renderRoleTemplate(t, "nodelocaldns", "nodelocaldns.yaml.tmpl", vars))
			if got, want := kinds(objs), []string{"ServiceAccount/nodelocaldns", "ConfigMap/nodelocaldns", "DaemonSet/nodelocaldns"}; !slices.Equal(got, want) {
				t.Fatalf("objects %v, want %v", got, want)
			}
			ds := find(t, objs, "DaemonSet")
			if ds.get("spec", "template", "spec", "hostNetwork") != true || ds.get("spec", "template", "spec", "dnsPolicy") != "Default" {
				t.Errorf("pod spec %v", ds.get("spec", "template", "spec"))
			}
			c := k8sObject(containersOf(ds)[0].(map[string]any))
			if c.get("image") != "registry.k8s.io/dns/k8s-dns-node-cache:1.25.0" {
				t.Errorf("image %v", c.get("image"))
			}
			if args := c.get("args").([]any); !jsonEqual(args[:4], []any{"-localip", tc.ip, "-conf", "/etc/coredns/Corefile"}) {
				t.Errorf("args %v", args)
			}
			corefile := find(t, objs, "ConfigMap").get("data", "Corefile").(string)
			lines := map[string]bool{}
			for _, l := range strings.Split(corefile, "\n") {
				lines[strings.TrimSpace(l)] = true
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("Corefile lacks %q:\n%s", w, corefile)
				}
			}
			if strings.Count(corefile, "{") != strings.Count(corefile, "}") {
				t.Errorf("Corefile braces do not balance:\n%s", corefile)
			}
		})
	}
}

// TestImagesOfEachHost: in kubeadm mode the control plane's static-pod
// images (and kube-vip's) go to the masters only, every other image to
// every host, and the registry push still sees the whole set.
func TestImagesOfEachHost(t *testing.T) {
	cluster := strings.Replace(addonCluster("", flannelNetwork, ""), "type: kubexm", "type: kubeadm", 1)
	cluster = strings.Replace(cluster, "    etcd: [m1]\n", "", 1) + "  etcd:\n    type: kubeadm\n"
	names := func(host, key string) []string {
		vars := withRoleDefaults(t, "images", hostVars(t, cluster, host), nil)
		var out []string
		for _, m := range vars[key].([]any) {
			out = append(out, m.(map[string]any)["name"].(string))
		}
		slices.Sort(out)
		return out
	}
	all := []string{"coredns", "etcd", "flannel", "kube-apiserver", "kube-controller-manager", "kube-proxy", "kube-scheduler", "pause"}
	if got := names("w1", "images_needed"); !slices.Equal(got, all) {
		t.Errorf("images_needed on a worker %v, want the cluster's %v", got, all)
	}
	if got := names("m1", "images_host"); !slices.Equal(got, all) {
		t.Errorf("a master's images %v, want %v", got, all)
	}
	if got, want := names("w1", "images_host"), []string{"coredns", "flannel", "kube-proxy", "pause"}; !slices.Equal(got, want) {
		t.Errorf("a worker's images %v, want %v", got, want)
	}

	// The role's assert refuses an images_extra entry whose group the
	// inventory does not have, and its message names it.
	var tasks []map[string]any
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "images", "tasks", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	idx := slices.IndexFunc(tasks, func(m map[string]any) bool {
		return m["name"] == "images - each image's group is one of the inventory's"
	})
	if idx < 0 {
		t.Fatal("no group assert in roles/images/tasks/main.yaml")
	}
	assert := tasks[idx]["assert"].(map[string]any)
	ev := eval.New()
	for _, tc := range []struct {
		group string
		ok    bool
	}{{"", true}, {"worker", true}, {"gpu-nodes", false}} {
		vars := withRoleDefaults(t, "images", hostVars(t, addonCluster("", flannelNetwork, ""), "w1"),
			map[string]any{"images_extra": []any{map[string]any{"name": "tool", "repo": "example.org/tool", "tag": "v1", "group": tc.group}}})
		ok, err := ev.EvalBool(assert["that"].([]any)[0].(string), vars)
		if err != nil || ok != tc.ok {
			t.Errorf("group %q: assert %v, %v; want %v", tc.group, ok, err, tc.ok)
		}
		if !tc.ok {
			msg, err := ev.RenderString(assert["fail_msg"].(string), vars)
			if err != nil || !strings.Contains(msg, `tool (group "gpu-nodes")`) {
				t.Errorf("message %q, %v: want the image and its group named", msg, err)
			}
		}
	}
}
