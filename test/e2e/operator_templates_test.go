//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKubexmControllerTemplate renders roles/kubexm-controller's manifests
// (spec.operator.enabled) for one master and for three: the namespace and
// labels delete finds them by, the least RBAC (no list of Secrets, the one
// Secret by name), the Deployment on the masters' network with the
// side-loaded image, never pulled, one pod per master (at most 2), taking
// an old pod's place and probed on the health port.
func TestKubexmControllerTemplate(t *testing.T) {
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		masters  []string
		replicas string
	}{
		{"one master", []string{"m1"}, "1"},
		{"three masters", []string{"m1", "m2", "m3"}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: op\nspec:\n  hosts:\n")
			for i, m := range append(slices.Clone(tc.masters), "w1") {
				b.WriteString("    - {name: " + m + ", address: 10.0.0." + string(rune('1'+i)) + ", privateKeyPath: " + key + "}\n")
			}
			b.WriteString("  roleGroups:\n    etcd: [m1]\n    master: [" + strings.Join(tc.masters, ", ") + "]\n    worker: [w1]\n")
			b.WriteString("  operator: {enabled: true}\n")
			vars := withRoleDefaults(t, "kubexm-controller", hostVars(t, b.String(), "m1"), map[string]any{
				"kubexm_controller_image": map[string]any{"ref": "kubexm.local/kubexm-controller:0.1.0-0123456789ab"},
			})
			if vars["kubexm_controller_ssh_key_file"] != key || vars["kubexm_controller_enabled"] != true {
				t.Fatalf("key file %v, enabled %v", vars["kubexm_controller_ssh_key_file"], vars["kubexm_controller_enabled"])
			}
			ns := parseManifest(t, renderRoleTemplate(t, "kubexm-controller", "namespace.yaml.tmpl", vars))
			objs := parseManifest(t, renderRoleTemplate(t, "kubexm-controller", "controller.yaml.tmpl", vars))
			want := []string{"ServiceAccount/kubexm-controller", "ClusterRole/kubexm-controller", "ClusterRoleBinding/kubexm-controller",
				"Role/kubexm-controller", "RoleBinding/kubexm-controller", "Deployment/kubexm-controller"}
			if got := kinds(objs); kinds(ns)[0] != "Namespace/kubexm-system" || !slices.Equal(got, want) {
				t.Fatalf("objects %v %v, want Namespace/kubexm-system %v", kinds(ns), got, want)
			}
			for _, o := range append(ns, objs...) {
				if o.get("metadata", "labels", "app.kubernetes.io/name") != "kubexm-controller" || o.get("metadata", "labels", "app.kubernetes.io/managed-by") != "kubexm" {
					t.Errorf("%s/%s lacks the labels delete finds it by: %v", o.kind(), o.name(), o.get("metadata", "labels"))
				}
			}
			rules, _ := json.Marshal(find(t, objs, "ClusterRole").get("rules"))
			role, _ := json.Marshal(find(t, objs, "Role").get("rules"))
			if strings.Contains(string(rules), "secrets") || strings.Contains(string(rules), `"*"`) ||
				!strings.Contains(string(rules), `"resources":["clusters/status"]`) || !strings.Contains(string(rules), `"resources":["nodes"],"verbs":["get","list","watch"]`) {
				t.Errorf("ClusterRole rules %s", rules)
			}
			if !strings.Contains(string(role), `"resourceNames":["kubexm-ssh"],"resources":["secrets"],"verbs":["get"]`) || !strings.Contains(string(role), `"leases"`) {
				t.Errorf("Role rules %s", role)
			}
			d := find(t, objs, "Deployment")
			pod := func(path ...any) any { return d.get(append([]any{"spec", "template", "spec"}, path...)...) }
			if fmt.Sprint(d.get("spec", "replicas")) != tc.replicas || fmt.Sprint(d.get("spec", "strategy", "rollingUpdate", "maxSurge")) != "0" {
				t.Errorf("replicas %v, strategy %v", d.get("spec", "replicas"), d.get("spec", "strategy"))
			}
			if pod("hostNetwork") != true || pod("serviceAccountName") != "kubexm-controller" || pod("containers", 0, "imagePullPolicy") != "Never" ||
				pod("containers", 0, "image") != "kubexm.local/kubexm-controller:0.1.0-0123456789ab" {
				t.Errorf("pod spec %v", d.get("spec", "template", "spec"))
			}
			hosts, _ := json.Marshal(pod("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 0, "values"))
			if want, _ := json.Marshal(tc.masters); string(hosts) != string(want) {
				t.Errorf("pinned to %s, want the masters %s", hosts, want)
			}
			args := strings.Join(toStrings(pod("containers", 0, "args")), " ")
			if args != "--workdir=/var/lib/kubexm-controller/work --leader-election-namespace=kubexm-system --health-probe-bind-address=:10271 --metrics-bind-address=127.0.0.1:10272 --extra-vars=kubexm_controller_pod=$(POD_NAMESPACE)/$(POD_NAME)" ||
				fmt.Sprint(pod("containers", 0, "readinessProbe", "httpGet", "port")) != "10271" {
				t.Errorf("args %q, readiness %v", args, pod("containers", 0, "readinessProbe"))
			}
			// The pod's own name for its runs (an upgrade's drain leaves it);
			// without an offline bundle no bundle volume.
			if pod("containers", 0, "env", 0, "name") != "POD_NAME" || pod("containers", 0, "env", 0, "valueFrom", "fieldRef", "fieldPath") != "metadata.name" ||
				pod("containers", 0, "env", 1, "valueFrom", "fieldRef", "fieldPath") != "metadata.namespace" || len(pod("volumes").([]any)) != 3 {
				t.Errorf("env %v, volumes %v", pod("containers", 0, "env"), pod("volumes"))
			}
			if pod("volumes", 2, "secret", "secretName") != "kubexm-ssh" || pod("tolerations", 0, "key") != "node-role.kubernetes.io/control-plane" {
				t.Errorf("volumes %v, tolerations %v", pod("volumes"), pod("tolerations"))
			}
		})
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
