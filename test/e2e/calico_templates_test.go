//go:build e2e

package e2e

// The calico role without machines: its manifest, rendered with the role's
// defaults and what a cluster.yaml and the nodes' MTUs give, is the pool,
// encapsulation and MTU asked for; its CRDs file holds every resource its
// RBAC names. (TestAddonTemplateRolesLoad loads it with the real builtins,
// through the cni role.)
// go test -tags e2e -run 'TestCalicoTemplate|TestCalicoCRDs' ./test/e2e/

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
)

// calicoVars are m1's variables in a cluster with network, each host's
// calico_node_mtu fact set as the role's first task would.
func calicoVars(t *testing.T, network string, mtus map[string]int, override map[string]any) map[string]any {
	t.Helper()
	vars := hostVarsWith(t, addonCluster("", network, ""), "m1", calicoSupported(t))
	for h, hv := range vars["hostvars"].(map[string]any) {
		if m, ok := mtus[h]; ok {
			hv.(map[string]any)["calico_node_mtu"] = m
		}
	}
	return withRoleDefaults(t, "cni/calico", vars, override)
}

// calicoSupported is the built-in matrix with calico and its settings
// supported, since the matrix refuses calico until an e2e suite proves it.
func calicoSupported(t *testing.T) *matrix.Support {
	t.Helper()
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range s.Choices {
		if !strings.HasPrefix(c.Field, "spec.network.") {
			continue
		}
		for j, v := range c.Values {
			if strings.HasPrefix(c.Field, "spec.network.calico.") || v.Value == "calico" {
				s.Choices[i].Values[j].Status = matrix.StatusSupported
			}
		}
	}
	return s
}

// envOf gives a container's env: name -> value, or "configMap:<key>" /
// "fieldRef:<path>" for values taken from elsewhere.
func envOf(c k8sObject) map[string]string {
	env := map[string]string{}
	for _, e := range c.get("env").([]any) {
		m := k8sObject(e.(map[string]any))
		name := m.get("name").(string)
		switch {
		case m.get("valueFrom", "configMapKeyRef") != nil:
			env[name] = "configMap:" + m.get("valueFrom", "configMapKeyRef", "key").(string)
		case m.get("valueFrom", "fieldRef") != nil:
			env[name] = "fieldRef:" + m.get("valueFrom", "fieldRef", "fieldPath").(string)
		default:
			env[name], _ = m.get("value").(string)
		}
	}
	return env
}

func TestCalicoTemplate(t *testing.T) {
	mtus := map[string]int{"m1": 1500, "w1": 1450, "mw": 9000}
	for _, tc := range []struct {
		name, network                   string
		override                        map[string]any
		pool, block, ipip, vxlan, encap string
		mtu                             string
		bird, typha                     bool
	}{
		{name: "defaults: vxlan, MTU of the smallest interface less 50", network: `  network:
    plugin: calico
    kubePodsCIDR: 10.244.0.0/16
    kubeServiceCIDR: 10.96.0.0/12
`, pool: "10.244.0.0/16", block: "26", ipip: "Never", vxlan: "Always", encap: "vxlan", mtu: "1400"},
		{name: "ipip, block size 24, dual stack", network: `  network:
    plugin: calico
    calico: {ipipMode: CrossSubnet}
    ippool: {blockSize: 24}
    kubePodsCIDR: 10.233.64.0/18,fd85:ee78:d8a6:8607::1:0/112
    kubeServiceCIDR: 10.233.0.0/18,fd85:ee78:d8a6:8607::1000/116
`, pool: "10.233.64.0/18", block: "24", ipip: "CrossSubnet", vxlan: "Never", encap: "ipip", mtu: "1430", bird: true},
		{name: "no encapsulation, vethMTU set", network: `  network:
    plugin: calico
    calico: {ipipMode: Never, vxlanMode: Never, vethMTU: 1300}
`, pool: "10.233.64.0/18", block: "26", ipip: "Never", vxlan: "Never", encap: "none", mtu: "1300", bird: true},
		{name: "typha from the threshold up", network: `  network:
    plugin: calico
`, override: map[string]any{"calico_typha_threshold": 3}, pool: "10.233.64.0/18", block: "26", ipip: "Never", vxlan: "Always", encap: "vxlan", mtu: "1400", typha: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := calicoVars(t, tc.network, mtus, tc.override)
			if vars["calico_encapsulation"] != tc.encap {
				t.Errorf("calico_encapsulation %v, want %s", vars["calico_encapsulation"], tc.encap)
			}
			objs := parseManifest(t, renderRoleTemplate(t, "cni/calico", "calico.yaml.tmpl", vars))
			want := []string{"ServiceAccount/calico-kube-controllers", "ServiceAccount/calico-node", "ServiceAccount/calico-cni-plugin",
				"ConfigMap/calico-config", "ClusterRole/calico-kube-controllers", "ClusterRole/calico-node", "ClusterRole/calico-cni-plugin",
				"ClusterRole/calico-tier-getter",
				"ClusterRoleBinding/calico-kube-controllers", "ClusterRoleBinding/calico-node", "ClusterRoleBinding/calico-cni-plugin",
				"ClusterRoleBinding/calico-tier-getter"}
			if tc.typha {
				want = append(want, "Service/calico-typha", "PodDisruptionBudget/calico-typha", "Deployment/calico-typha")
			}
			want = append(want, "DaemonSet/calico-node", "PodDisruptionBudget/calico-kube-controllers", "Deployment/calico-kube-controllers")
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Fatalf("objects %v, want %v", got, want)
			}
			for _, o := range objs {
				if b := o; b.kind() == "ClusterRoleBinding" && b.name() != "calico-tier-getter" &&
					(b.get("roleRef", "name") != b.name() || b.get("subjects", 0, "name") != b.name() || b.get("subjects", 0, "namespace") != "kube-system") {
					t.Errorf("binding %s: roleRef %v subjects %v", b.name(), b.get("roleRef"), b.get("subjects"))
				}
			}

			cm := find(t, objs, "ConfigMap")
			backend := "vxlan"
			if tc.bird {
				backend = "bird"
			}
			if cm.get("data", "veth_mtu") != tc.mtu || cm.get("data", "calico_backend") != backend {
				t.Errorf("calico-config veth_mtu %v calico_backend %v, want %s %s", cm.get("data", "veth_mtu"), cm.get("data", "calico_backend"), tc.mtu, backend)
			}
			// The conflist install-cni writes is JSON once its placeholders are filled in.
			conf := strings.NewReplacer("__KUBERNETES_NODE_NAME__", "m1", "__CNI_MTU__", tc.mtu,
				"__KUBECONFIG_FILEPATH__", "/etc/cni/net.d/calico-kubeconfig").Replace(cm.get("data", "cni_network_config").(string))
			var cni map[string]any
			if err := json.Unmarshal([]byte(conf), &cni); err != nil {
				t.Fatalf("cni_network_config: %v\n%s", err, conf)
			}
			plugins := cni["plugins"].([]any)
			first := plugins[0].(map[string]any)
			if first["type"] != "calico" || first["ipam"].(map[string]any)["type"] != "calico-ipam" ||
				first["policy"].(map[string]any)["type"] != "k8s" || first["datastore_type"] != "kubernetes" {
				t.Errorf("calico plugin %v", first)
			}

			ds := find(t, objs, "DaemonSet")
			spec := k8sObject(ds.get("spec", "template", "spec").(map[string]any))
			if spec.get("hostNetwork") != true || spec.get("serviceAccountName") != "calico-node" {
				t.Errorf("pod spec hostNetwork %v serviceAccountName %v", spec.get("hostNetwork"), spec.get("serviceAccountName"))
			}
			inits := spec.get("initContainers").([]any)
			if len(inits) != 1 {
				t.Fatalf("init containers %v", inits)
			}
			install := k8sObject(inits[0].(map[string]any))
			ienv := envOf(install)
			if install.get("image") != "docker.io/calico/cni:v3.32.1" || install.get("command", 0) != "/opt/cni/bin/install" ||
				ienv["CNI_CONF_NAME"] != "10-calico.conflist" || ienv["CNI_MTU"] != "configMap:veth_mtu" || ienv["SLEEP"] != "false" {
				t.Errorf("install-cni %v %v env %v", install.get("image"), install.get("command"), ienv)
			}
			// Only calico and calico-ipam are installed: the other plugins are the runtime's.
			skip := strings.Split(ienv["SKIP_CNI_BINARIES"], ",")
			for _, p := range []string{"portmap", "bandwidth", "loopback", "host-local", "flannel"} {
				if !slices.Contains(skip, p) {
					t.Errorf("SKIP_CNI_BINARIES %v lacks %s", skip, p)
				}
			}
			cs := containersOf(ds)
			if len(cs) != 1 {
				t.Fatalf("containers %v", cs)
			}
			node := k8sObject(cs[0].(map[string]any))
			env := envOf(node)
			clusterType := "k8s,kubexm"
			if tc.bird {
				clusterType = "k8s,bgp"
			}
			for k, v := range map[string]string{
				"CALICO_IPV4POOL_CIDR": tc.pool, "CALICO_IPV4POOL_BLOCK_SIZE": tc.block,
				"CALICO_IPV4POOL_IPIP": tc.ipip, "CALICO_IPV4POOL_VXLAN": tc.vxlan,
				"CALICO_NETWORKING_BACKEND": "configMap:calico_backend", "CLUSTER_TYPE": clusterType,
				"FELIX_VXLANMTU": "configMap:veth_mtu", "FELIX_IPINIPMTU": "configMap:veth_mtu",
				"IP_AUTODETECTION_METHOD": "kubernetes-internal-ip", "DATASTORE_TYPE": "kubernetes",
				"NODENAME": "fieldRef:spec.nodeName",
			} {
				if env[k] != v {
					t.Errorf("calico-node %s = %q, want %q", k, env[k], v)
				}
			}
			if node.get("image") != "docker.io/calico/node:v3.32.1" || node.get("securityContext", "privileged") != true {
				t.Errorf("calico-node image %v securityContext %v", node.get("image"), node.get("securityContext"))
			}
			ready := node.get("readinessProbe", "exec", "command").([]any)
			if slices.Contains(ready, any("-bird-ready")) != tc.bird || !slices.Contains(ready, any("-felix-ready")) {
				t.Errorf("readiness %v (bird %v)", ready, tc.bird)
			}

			var kc, typha k8sObject
			for _, o := range objs {
				if o.kind() == "Deployment" && o.name() == "calico-kube-controllers" {
					kc = o
				}
				if o.kind() == "Deployment" && o.name() == "calico-typha" {
					typha = o
				}
			}
			wantTypha := "none"
			if tc.typha {
				wantTypha = "calico-typha"
				tc := k8sObject(containersOf(typha)[0].(map[string]any))
				if typha.get("spec", "replicas") != uint64(3) || tc.get("image") != "docker.io/calico/typha:v3.32.1" ||
					typha.get("spec", "template", "spec", "serviceAccountName") != "calico-node" {
					t.Errorf("calico-typha replicas %#v image %v", typha.get("spec", "replicas"), tc.get("image"))
				}
			}
			if cm.get("data", "typha_service_name") != wantTypha || (env["FELIX_TYPHAK8SSERVICENAME"] != "") != tc.typha {
				t.Errorf("typha_service_name %v, FELIX_TYPHAK8SSERVICENAME %q, want typha %v", cm.get("data", "typha_service_name"), env["FELIX_TYPHAK8SSERVICENAME"], tc.typha)
			}
			kcc := k8sObject(containersOf(kc)[0].(map[string]any))
			if kcc.get("image") != "docker.io/calico/kube-controllers:v3.32.1" || envOf(kcc)["ENABLED_CONTROLLERS"] != "node" {
				t.Errorf("calico-kube-controllers %v env %v", kcc.get("image"), envOf(kcc))
			}
		})
	}
}

// An IPv6-only pod range is refused (no IPv4 pool to make); an MTU nobody
// measured is 0.
func TestCalicoTemplateRefuses(t *testing.T) {
	vars := calicoVars(t, `  network:
    plugin: calico
    kubePodsCIDR: fd00:10:244::/56
    kubeServiceCIDR: fd00:10:96::/112
`, map[string]int{"m1": 1500}, map[string]any{"calico_pool_cidr": "unused"})
	if _, err := eval.New().RenderValue(calicoDefault(t, "calico_pool_cidr"), vars); err == nil || !strings.Contains(err.Error(), "no IPv4 range") {
		t.Errorf("IPv6-only pods: %v", err)
	}
	// 0, which tasks/mtu.yaml refuses, until the nodes' MTUs are known.
	vars = calicoVars(t, "  network:\n    plugin: calico\n", nil, nil)
	if vars["calico_veth_mtu"] != "0" && vars["calico_veth_mtu"] != 0 {
		t.Errorf("calico_veth_mtu %#v without the nodes' MTUs, want 0", vars["calico_veth_mtu"])
	}
}

func calicoDefault(t *testing.T, name string) any {
	t.Helper()
	var d map[string]any
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "cni", "calico", "defaults", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d[name]
}

// TestCalicoVersionChange: what calico_version may do to the calico a
// cluster runs (calico_running_version, from calico-node's image): a patch
// release anywhere, the next minor only with calico_version_change_allowed
// (playbooks/upgrade), which create-cluster's refusal names; never down,
// never two minors at once.
func TestCalicoVersionChange(t *testing.T) {
	for _, tc := range []struct {
		running, target string
		allowed         bool
		want            string // a part of the problem, "" for none
	}{
		{running: "", target: "v3.32.1"},
		{running: "v3.32.1", target: "v3.32.1"},
		{running: "v3.32.0", target: "v3.32.1"},
		{running: "v3.31.7", target: "v3.32.1", want: "create-cluster and add-nodes keep calico's minor version. Upgrade with `kubexm play upgrade -i cluster.yaml`"},
		{running: "v3.31.7", target: "v3.32.1", allowed: true},
		{running: "v3.30.4", target: "v3.32.1", allowed: true, want: "skips a minor: upgrade calico one minor at a time (to v3.31 first)"},
		{running: "v3.32.1", target: "v3.31.7", allowed: true, want: "calico downgrade refused: the cluster runs calico v3.32.1 and calico_version is v3.31.7"},
		{running: "v3.32.1", target: "v3.32.0", want: "calico downgrade refused"},
		{running: "v3.32.1", target: "v4.0.0", allowed: true, want: "skips a minor"},
	} {
		vars := calicoVars(t, "  network:\n    plugin: calico\n", map[string]int{"m1": 1500}, map[string]any{
			"calico_running_version": tc.running, "calico_version": tc.target, "calico_version_change_allowed": tc.allowed,
		})
		got, err := eval.New().RenderValue(calicoDefault(t, "calico_version_change_problems"), vars)
		if err != nil {
			t.Fatalf("%s -> %s: %v", tc.running, tc.target, err)
		}
		if p := strings.TrimSpace(got.(string)); (tc.want == "") != (p == "") || !strings.Contains(p, tc.want) {
			t.Errorf("%s -> %s (allowed %v): %q, want %q", tc.running, tc.target, tc.allowed, p, tc.want)
		}
	}
}

// TestCalicoRunningVersion: tasks/version.yaml reads the running version
// from the tag of the calico-node container's image, and nothing from no
// DaemonSet or a tag that is no version.
func TestCalicoRunningVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "cni", "calico", "tasks", "version.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	var expr any
	for _, task := range tasks {
		if sf, ok := task["set_fact"].(map[string]any); ok && sf["calico_running_version"] != nil {
			expr = sf["calico_running_version"]
		}
	}
	if expr == nil {
		t.Fatal("tasks/version.yaml sets no calico_running_version")
	}
	ds := func(images ...string) map[string]any {
		var cs []any
		for i, im := range images {
			cs = append(cs, map[string]any{"name": []string{"calico-node", "other"}[i], "image": im})
		}
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": cs}}}}
	}
	for _, tc := range []struct {
		running map[string]any
		want    string
	}{
		{running: map[string]any{"resources": []any{}}},
		{running: map[string]any{"skipped": true}},
		{running: map[string]any{"resources": []any{ds("docker.io/calico/node:v3.31.7", "x/y:v9.9.9")}}, want: "v3.31.7"},
		{running: map[string]any{"resources": []any{ds("registry.local:5000/calico/node:v3.32.1")}}, want: "v3.32.1"},
		{running: map[string]any{"resources": []any{ds("registry.local:5000/calico/node@sha256:0123")}}},
		{running: map[string]any{"resources": []any{ds("docker.io/calico/node:latest")}}},
	} {
		got, err := eval.New().RenderValue(expr, map[string]any{"calico_running": tc.running})
		if err != nil || strings.TrimSpace(got.(string)) != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.running, got, err, tc.want)
		}
	}
}

// Each CRDs file is upstream's: calico's crd.projectcalico.org
// CustomResourceDefinitions and policy.networking.k8s.io's network policy
// ones (v3.31's AdminNetworkPolicy and BaselineAdminNetworkPolicy, v3.32's
// ClusterNetworkPolicy), and every resource of those groups the manifest's
// RBAC grants is one of them, but the other version's network policy
// resources, granted so that the calico-nodes of either minor keep their
// watches during an upgrade (the projectcalico.org names are the same
// resources served by calico's API server, which kubexm does not run;
// globalfelixconfigs, globalbgpconfigs and ipamconfigurations are
// upstream's other names, granted though not defined here).
func TestCalicoCRDs(t *testing.T) {
	for _, tc := range []struct {
		version string
		crds    int
		other   []string
	}{
		{version: "v3.32.1", crds: 23, other: []string{"adminnetworkpolicies", "baselineadminnetworkpolicies"}},
		{version: "v3.31.7", crds: 24, other: []string{"clusternetworkpolicies"}},
	} {
		data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "cni", "calico", "files", "calico-crds-"+tc.version+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		plurals := map[string]bool{}
		n := 0
		for _, o := range parseManifest(t, string(data)) {
			g := o.get("spec", "group")
			if o.kind() != "CustomResourceDefinition" || (g != "crd.projectcalico.org" && g != "policy.networking.k8s.io") {
				t.Errorf("%s: %s/%s in the CRDs file", tc.version, o.kind(), o.name())
				continue
			}
			n++
			plurals[o.get("spec", "names", "plural").(string)] = true
		}
		if n != tc.crds {
			t.Errorf("%s: %d CRDs, want %d: %v", tc.version, n, tc.crds, plurals)
		}
		legacy := map[string]bool{"globalfelixconfigs": true, "globalbgpconfigs": true, "ipamconfigurations": true, "*": true}
		for _, o := range tc.other {
			if plurals[o] {
				t.Errorf("%s defines %s, which the test takes for the other minor's", tc.version, o)
			}
			legacy[o] = true
		}
		vars := calicoVars(t, "  network:\n    plugin: calico\n", map[string]int{"m1": 1500, "w1": 1500, "mw": 1500}, map[string]any{"calico_version": tc.version})
		for _, o := range parseManifest(t, renderRoleTemplate(t, "cni/calico", "calico.yaml.tmpl", vars)) {
			if o.kind() != "ClusterRole" {
				continue
			}
			for _, r := range o.get("rules").([]any) {
				rule := k8sObject(r.(map[string]any))
				groups := rule.get("apiGroups").([]any)
				if !slices.Contains(groups, any("crd.projectcalico.org")) && !slices.Contains(groups, any("policy.networking.k8s.io")) &&
					!slices.Contains(groups, any("projectcalico.org")) {
					continue
				}
				for _, res := range rule.get("resources").([]any) {
					s, _, _ := strings.Cut(res.(string), "/")
					if !plurals[s] && !legacy[s] {
						t.Errorf("%s: ClusterRole %s grants %s, which no CRD defines", tc.version, o.name(), s)
					}
				}
			}
		}
	}
}
