package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/builtins/kube/kubefake"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

// roleStatus renders roles/cluster-resource's status patch from what its
// tasks register (the object, the nodes, the certificates, the cluster
// record) as the engine does, with the extra -e values.
func roleStatus(t *testing.T, extra ...string) map[string]any {
	t.Helper()
	defaults, err := filepath.Abs("../roles/cluster-resource/defaults/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := statusTemplate(t)
	dir := t.TempDir()
	inv := "[master]\nn1 ansible_connection=local\n[etcd]\nn1 ansible_connection=local\n[worker]\nn2 ansible_connection=local\nn3 ansible_connection=local\n" +
		"[k8s_cluster:children]\nmaster\nworker\n"
	// What the role's tasks register, as the k8s and cert_info builtins report it.
	pb := `name: t
plays:
  - name: t
    hosts: n1
    gather_facts: false
    vars_files: [` + defaults + `]
    vars:
          cluster_resource_current: {resources: [{"metadata":{"generation":3},"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2020-01-01T00:00:00Z"},{"type":"Degraded","status":"True","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}]}
          cluster_resource_nodes: {resources: [{"metadata":{"name":"n1"},"status":{"nodeInfo":{"kubeletVersion":"v1.37.2"},"conditions":[{"type":"Ready","status":"True"}]}},{"metadata":{"name":"n2"},"status":{"nodeInfo":{"kubeletVersion":"v1.36.3"},"conditions":[{"type":"Ready","status":"True"}]}},{"metadata":{"name":"n3"},"status":{"nodeInfo":{"kubeletVersion":"v1.37.2"},"conditions":[{"type":"Ready","status":"False"}]}}]}
          cluster_resource_certs: {certs: [{path: /etc/kubernetes/pki/apiserver.crt, exists: true, not_after: "2027-12-02T00:00:00Z"}, {path: /etc/kubernetes/pki/ca.crt, exists: true, not_after: "2036-12-02T00:00:00Z"}]}
          cluster_resource_record: {rc: 0, stdout: '{"settings":{"kubernetes.type":"kubexm","network.plugin":"flannel"}}'}
    tasks:
      - debug: {msg: "{{ .cluster_resource_status }}"}
        vars:
          cluster_resource_status: ` + strconv.Quote(tmpl) + `
`
	if err := os.WriteFile(filepath.Join(dir, "inv.ini"), []byte(inv), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pb.yaml"), []byte(pb), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	var out bytes.Buffer
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
		path := f.Path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return inventory.ParseAnsibleINI(path, data)
	}}
	if _, err := r.Run(context.Background(), lifecycle.Request{Playbook: filepath.Join(dir, "pb.yaml"), Inventory: filepath.Join(dir, "inv.ini"),
		WorkDir: filepath.Join(dir, "w"), NoJournal: true, Output: "json", Stdout: &out, ExtraVars: extra}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		var ev struct{ Kind, Message string }
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Kind != "host_result" {
			continue
		}
		var patch struct{ Status map[string]any }
		if err := json.Unmarshal([]byte(ev.Message), &patch); err != nil || patch.Status == nil {
			t.Fatalf("the status patch is not JSON: %v\n%s", err, ev.Message)
		}
		return patch.Status
	}
	t.Fatalf("no status patch in the output:\n%s", out.String())
	return nil
}

// The role's status patch: the nodes of k8s_cluster with their versions and
// readiness, the lowest version, the phase and conditions (a condition whose
// status stays keeps its transition time), the certificates, the record's
// settings and the run.
func TestRoleStatus(t *testing.T) {
	st := roleStatus(t)
	js, _ := json.Marshal(st)
	for _, want := range []string{`"readyNodes":"2/3"`, `"kubernetesVersion":"v1.36.3"`, `"phase":"Degraded"`, `"observedGeneration":3`,
		`"earliestExpiry":"2027-12-02T00:00:00Z"`, `"caExpiry":"2036-12-02T00:00:00Z"`, `"network.plugin":"flannel"`,
		`{"kubernetesVersion":"v1.37.2","name":"n1","ready":true,"roles":["etcd","master"]}`, `"result":"Succeeded"`,
		`"message":"2/3 nodes Ready; not Ready: n3"`,
		// Degraded stayed True: its time is kept; Ready went False: a new one.
		`"lastTransitionTime":"2020-01-01T00:00:00Z","message":"2/3 nodes Ready; not Ready: n3","observedGeneration":3,"reason":"NodesNotReady","status":"True","type":"Degraded"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("the status does not hold %s:\n%s", want, js)
		}
	}
	if strings.Contains(string(js), `"lastTransitionTime":"2020-01-01T00:00:00Z","message":"2/3 nodes Ready; not Ready: n3","observedGeneration":3,"reason":"NodesNotReady","status":"False","type":"Ready"`) {
		t.Errorf("Ready went False but kept its transition time:\n%s", js)
	}
	// delete-nodes: the removed nodes are left out.
	if js, _ := json.Marshal(roleStatus(t, "cluster_resource_removed=n3")); !strings.Contains(string(js), `"readyNodes":"2/2"`) || strings.Contains(string(js), `"n3"`) {
		t.Errorf("with n3 removed:\n%s", js)
	}
	// The controller's runs: no generation, phase or conditions (the
	// controller's to write).
	js, _ = json.Marshal(roleStatus(t, "cluster_resource_by_controller=true"))
	for _, not := range []string{"observedGeneration", "phase", "conditions"} {
		if strings.Contains(string(js), not) {
			t.Errorf("a controller's run writes %s:\n%s", not, js)
		}
	}
	if !strings.Contains(string(js), `"readyNodes":"2/3"`) {
		t.Errorf("a controller's run does not write the nodes:\n%s", js)
	}
}

// statusTemplate is the status task's cluster_resource_status in
// roles/cluster-resource/tasks/main.yaml.
func statusTemplate(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../roles/cluster-resource/tasks/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tasks []struct {
		Block []struct {
			Name string
			Vars map[string]string
		}
	}
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	for _, b := range tasks {
		for _, task := range b.Block {
			if task.Name == "Cluster resource - status" && task.Vars["cluster_resource_status"] != "" {
				return task.Vars["cluster_resource_status"]
			}
		}
	}
	t.Fatal("no cluster_resource_status in the status task")
	return ""
}

// The whole role on the control machine against a fake API server: under
// --check on fresh hosts it writes nothing; the first run applies the CRD
// and the object and writes the status; a re-run and a --check report 0
// changed and write nothing but the status.
func TestRoleRuns(t *testing.T) {
	dir := t.TempDir()
	srv := kubefake.New()
	defer srv.Close()
	if err := srv.Add(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"},
		"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": "v1.37.2"}, "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}); err != nil {
		t.Fatal(err)
	}
	roles, err := filepath.Abs("../roles")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"admin.conf":  string(srv.Kubeconfig()),
		"record.json": `{"settings":{"kubernetes.type":"kubexm"}}`,
		"inv.ini":     "[master]\nn1 ansible_connection=local\n[etcd]\nn1 ansible_connection=local\n[worker]\n[k8s_cluster:children]\nmaster\n",
		"pb.yaml": `name: t
plays:
  - name: t
    hosts: master
    gather_facts: false
    vars:
      kubernetes_admin_kubeconfig: ` + dir + `/admin.conf
      kube_cert_dir: ` + dir + `/pki
      cluster_resource_dir: ` + dir + `/resource
      cluster_resource_record_file: ` + dir + `/record.json
      cluster_resource: "apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {}\n"
      cluster_name: c1
    roles:
      - cluster-resource
`}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
		path := f.Path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return inventory.ParseAnsibleINI(path, data)
	}}
	play := func(check bool) (changed []string) {
		t.Helper()
		var out bytes.Buffer
		_, err := r.Run(context.Background(), lifecycle.Request{Playbook: filepath.Join(dir, "pb.yaml"), Inventory: filepath.Join(dir, "inv.ini"),
			RolesPath: []string{roles}, WorkDir: filepath.Join(dir, "w"), NoJournal: true, Check: check, Output: "json", Stdout: &out})
		if err != nil {
			t.Fatalf("check %v: %v\n%s", check, err, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			var ev struct{ Kind, Task, Status string }
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "host_result" && ev.Status == "changed" {
				changed = append(changed, ev.Task)
			}
		}
		return changed
	}
	if play(true); len(srv.Writes()) > 0 {
		t.Errorf("--check wrote:\n%s", strings.Join(srv.Writes(), "\n"))
	}
	changed := play(false)
	writes := strings.Join(srv.Writes(), "\n")
	if !strings.Contains(writes, "PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusters.kubexm.mensylisir.io application/apply-patch+yaml") ||
		!strings.Contains(writes, "PATCH /apis/kubexm.mensylisir.io/v1alpha1/clusters/c1/status application/merge-patch+json") {
		t.Errorf("the first run's writes:\n%s", writes)
	}
	cluster := kubefake.Kind{Group: "kubexm.mensylisir.io", Version: "v1alpha1", Kind: "Cluster", Resource: "clusters"}
	st, _ := srv.Get(cluster, "", "c1")["status"].(map[string]any)
	if st["phase"] != "Ready" || st["readyNodes"] != "1/1" {
		t.Errorf("the status written: %v", st)
	}
	if len(changed) == 0 {
		t.Error("the first run changed nothing")
	}
	for _, check := range []bool{false, true} {
		before := len(srv.Writes())
		changed := play(check)
		var applied []string
		for _, w := range srv.Writes()[before:] {
			if !strings.HasSuffix(w, "/status application/merge-patch+json") {
				applied = append(applied, w)
			}
		}
		if len(changed) > 0 || len(applied) > 0 {
			t.Errorf("re-run (check %v) changed %v, wrote %v", check, changed, applied)
		}
	}
}
