//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clusterResource proves the Cluster resource's CRD (deploy/crd, generated
// from the schema's types) on the suite's real API server: it is accepted
// and Established; what `kubexm config view --resource` prints applies as a
// Cluster (server-side, so no last-applied annotation keeps a copy of what
// was sent); the same object with a host's password is refused, naming the
// field; `kubectl get kxc` shows the printer columns. It removes both
// afterwards, so the cluster is left as the suite made it.
func clusterResource(ctx context.Context, t *testing.T, k kubectlRunner, bin, root, inventory, name string) {
	t.Helper()
	crd := filepath.Join(root, "deploy", "crd", "kubexm.mensylisir.io_clusters.yaml")
	if out, err := k.run(ctx, "", "apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("the Cluster CRD is refused by the API server: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/clusters.kubexm.mensylisir.io"); err != nil {
		t.Fatalf("the Cluster CRD is not Established: %v\n%s", err, out)
	}
	defer func() {
		if out, err := k.run(ctx, "", "delete", "--ignore-not-found", "--wait=true", "-f", crd); err != nil {
			t.Errorf("delete the Cluster CRD: %v\n%s", err, out)
		}
	}()
	view, err := exec.CommandContext(ctx, bin, "config", "view", "--resource", "-f", inventory).Output()
	if err != nil {
		t.Fatalf("kubexm config view --resource: %v", err)
	}
	// A password the schema leaves out: the server-side apply refuses the
	// object, naming the field, instead of storing it.
	const secret = "e2e-Pw-never-stored"
	withPassword := strings.Replace(string(view), "  hosts:\n    - name: ", "  hosts:\n    - password: "+secret+"\n      name: ", 1)
	if withPassword == string(view) {
		t.Fatalf("config view's output has no host list to add a password to:\n%s", view)
	}
	if out, err := k.run(ctx, withPassword, "apply", "--server-side", "-f", "-"); err == nil || !strings.Contains(out, "password") || strings.Contains(out, secret) {
		t.Errorf("a Cluster with a host's password: want a refusal naming the field (and not echoing it), got %v\n%s", err, out)
	}
	if out, err := k.run(ctx, string(view), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatalf("config view --resource's output is refused as a Cluster resource: %v\n%s", err, out)
	}
	stored, err := k.run(ctx, "", "get", "clusters.kubexm.mensylisir.io", name, "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl get the Cluster: %v\n%s", err, stored)
	}
	if strings.Contains(stored, secret) {
		t.Errorf("a host's password is stored in the Cluster resource:\n%s", stored)
	}
	if !strings.Contains(stored, "version: "+kubernetesVersion) {
		t.Errorf("the stored Cluster lost spec.kubernetes.version %s:\n%s", kubernetesVersion, stored)
	}
	table, err := k.run(ctx, "", "get", "kxc")
	if err != nil {
		t.Fatalf("kubectl get kxc: %v\n%s", err, table)
	}
	head, _, _ := strings.Cut(table, "\n")
	for _, col := range []string{"NAME", "VERSION", "MODE", "READY", "PHASE", "AGE"} {
		if !strings.Contains(head, col) {
			t.Errorf("kubectl get kxc has no %s column:\n%s", col, table)
		}
	}
	if !strings.Contains(table, name) || !strings.Contains(table, kubernetesVersion) {
		t.Errorf("kubectl get kxc does not list %s at %s:\n%s", name, kubernetesVersion, table)
	}
	t.Logf("the Cluster resource on the API server:\n%s", table)
}
