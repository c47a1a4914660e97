//go:build e2e

package e2e

// Role kubectl-apply, which the add-on roles include, run on the control
// machine against an in-memory API server (kubefake, through the k8s
// builtin), without machines.
// go test -tags e2e -run TestKubectlApplyRole ./test/e2e/

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/builtins/kube/kubefake"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema/matrix"
)

const kubectlApplyManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: agent, namespace: kube-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: agent, namespace: kube-system}
spec:
  replicas: 1
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: example.com/agent:1}]}
`

// Under --check on a cluster without the objects nothing is written; the
// first run applies both objects (server-side) and finds the Deployment
// rolled out; a re-run and a --check change and write nothing. A Deployment
// that does not roll out fails the role with its pods' states, the hints
// and the including role's hint.
func TestKubectlApplyRole(t *testing.T) {
	dir := t.TempDir()
	srv := kubefake.New()
	defer srv.Close()
	deployment := kubefake.Kind{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespaced: true}
	files := map[string]string{
		"admin.conf": string(srv.Kubeconfig()),
		"agent.yaml": kubectlApplyManifest,
		"inv.ini":    "[master]\nn1 ansible_connection=local\n[etcd]\nn1 ansible_connection=local\n[worker]\n[k8s_cluster:children]\nmaster\n",
		"pb.yaml": `name: t
plays:
  - name: t
    hosts: master
    tasks:
      - name: agent - apply and wait
        include_role:
          name: kubectl-apply
          vars:
            kubectl_apply_file: ` + dir + `/agent.yaml
            kubectl_apply_rollout: deployment/agent
            kubectl_apply_selector: app=agent
            kubectl_apply_timeout: "{{ .agent_timeout }}"
            kubectl_apply_hint: look at the agent's log
    vars:
      kubernetes_admin_kubeconfig: ` + dir + `/admin.conf
      # Long enough for a rollout that is done to be found so on a loaded
      # machine (client-go's rate limiter may hold a request for a second);
      # the run whose rollout does not finish sets 1s.
      agent_timeout: 30s
`}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, err
		}
		return inventory.ParseAnsibleINI(f.Path, data)
	}}
	// play runs the role and returns the tasks changed and the failures.
	play := func(check bool, extra ...string) (changed, failures []string, err error) {
		t.Helper()
		var out bytes.Buffer
		_, err = r.Run(context.Background(), lifecycle.Request{Playbook: filepath.Join(dir, "pb.yaml"), Inventory: filepath.Join(dir, "inv.ini"),
			RolesPath: []string{filepath.Join(moduleRoot(t), "roles")}, WorkDir: filepath.Join(dir, "w"), NoJournal: true, Check: check,
			ExtraVars: extra, Output: "json", Stdout: &out})
		for _, line := range strings.Split(out.String(), "\n") {
			var ev struct{ Kind, Task, Status, Message string }
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Kind != "host_result" {
				continue
			}
			switch ev.Status {
			case "changed":
				changed = append(changed, ev.Task)
			case "failed":
				failures = append(failures, ev.Message)
			}
		}
		return changed, failures, err
	}
	if changed, failures, err := play(true); err != nil || len(srv.Writes()) > 0 || len(changed) != 1 {
		t.Fatalf("--check: changed %v, wrote %v: %v %v", changed, srv.Writes(), err, failures)
	}

	// What the Deployment's controller and the kubelet will have reported:
	// its replica available (kubefake runs no pods; an apply keeps status).
	if err := srv.Add(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "agent", "namespace": "kube-system"},
		"status": map[string]any{"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1}}); err != nil {
		t.Fatal(err)
	}
	changed, failures, err := play(false)
	writes := strings.Join(srv.Writes(), "\n")
	if err != nil || len(changed) != 1 || !strings.Contains(changed[0], "kubectl apply") ||
		!strings.Contains(writes, "PATCH /api/v1/namespaces/kube-system/serviceaccounts/agent application/apply-patch+yaml") ||
		!strings.Contains(writes, "PATCH /apis/apps/v1/namespaces/kube-system/deployments/agent application/apply-patch+yaml") {
		t.Fatalf("the first run changed %v (%v %v); its writes:\n%s", changed, err, failures, writes)
	}
	for _, check := range []bool{false, true} {
		stored := srv.Changes()
		if changed, failures, err := play(check); err != nil || len(changed) > 0 || srv.Changes() != stored {
			t.Errorf("re-run (check %v) changed %v, stored %d objects: %v %v", check, changed, srv.Changes()-stored, err, failures)
		}
	}

	// A new version whose pod cannot start: the rollout does not finish.
	if err := srv.Add(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "agent", "namespace": "kube-system"},
		"status": map[string]any{"replicas": 2, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "agent-new", "namespace": "kube-system", "labels": map[string]any{"app": "agent"}},
		"spec": map[string]any{"nodeName": "n2"}, "status": map[string]any{"phase": "Pending",
			"containerStatuses": []any{map[string]any{"name": "agent", "ready": false, "restartCount": 0, "image": "example.com/agent:1", "imageID": "",
				"state": map[string]any{"waiting": map[string]any{"reason": "ErrImageNeverPull"}}}}}}); err != nil {
		t.Fatal(err)
	}
	_, failures, err = play(false, "agent_timeout=1s")
	msg := strings.Join(failures, "\n")
	for _, want := range []string{
		"deployment/agent in kube-system is not available after 1s",
		"1 old replicas pending termination",
		"agent-new on n2: Pending; container agent waiting: ErrImageNeverPull",
		"kubectl -n kube-system describe pod -l app=agent",
		"look at the agent's log",
	} {
		if err == nil || !strings.Contains(msg, want) {
			t.Errorf("a rollout that does not finish: %v; the failure does not say %q:\n%s", err, want, msg)
		}
	}
	if srv.Get(deployment, "kube-system", "agent") == nil {
		t.Error("the Deployment is gone")
	}
}
