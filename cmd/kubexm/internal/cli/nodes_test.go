package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// delete-nodes refuses before it changes anything, on the control machine
// alone (the hosts of this cluster.yaml do not exist): no node named, every
// master named, every etcd member named, a node that cannot be reached
// without force.
func TestDeleteNodesRefusals(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNodesCluster(t, 3, "etcd: [n1]\n    master: [n1, n2]\n    worker: [n3]",
		"controlPlaneEndpoint:\n    internalLoadbalancer: haproxy\n  kubernetes:\n    type: kubexm", "kubexm")
	for _, c := range []struct {
		nodes, want string
	}{
		{"", "name the nodes to remove"},
		{"n1,n2", "would leave the cluster without a master (masters: n1, n2)"},
		{"n2,n1", "would leave the cluster without a master"},
		{"n1", "would remove every etcd member (n1)"},
		// 192.0.2.0/24 (TEST-NET-1) answers no one.
		{"n3", "n3 cannot be reached"},
	} {
		out, err := runCmd(t, realApp(), "delete-nodes", "-i", "cluster.yaml", "-e", "nodes="+c.nodes, "-e", "nodes_reach_timeout=1")
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("delete-nodes -e nodes=%s: %v, want a refusal saying %q:\n%s", c.nodes, err, c.want, out)
		}
		// A task that changed something logs changed=N.
		if strings.Contains(out, "changed=") {
			t.Errorf("delete-nodes -e nodes=%s changed something before refusing:\n%s", c.nodes, out)
		}
	}
}

// kubeadm: delete-nodes removes masters as binary mode does (their stacked
// etcd members through a master that stays), with the same refusals on the
// control machine before anything runs on a host: the last master, and here
// (no SSH server answers) a master that cannot be reached.
func TestDeleteNodesKubeadmMasters(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNodesCluster(t, 3, "etcd: [n1, n2]\n    master: [n1, n2]\n    worker: [n3]", "kubernetes:\n    type: kubeadm", "kubeadm")
	for _, c := range []struct {
		nodes, want string
	}{
		{"n2,n1", "would leave the cluster without a master"},
		{"n2", "n2 cannot be reached"},
		{"n3", "n3 cannot be reached"},
	} {
		out, err := runCmd(t, realApp(), "delete-nodes", "-i", "cluster.yaml", "-e", "nodes="+c.nodes, "-e", "nodes_reach_timeout=1")
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("delete-nodes -e nodes=%s of a kubeadm cluster: %v, want a refusal saying %q:\n%s", c.nodes, err, c.want, out)
		}
		if strings.Contains(out, "changed=") {
			t.Errorf("delete-nodes -e nodes=%s changed something before refusing:\n%s", c.nodes, out)
		}
	}
}

// writeNodesCluster writes cluster.yaml with hosts n1..nN on addresses of
// 192.0.2.0/24 (TEST-NET-1, which answers no one), the role groups, the
// spec lines that choose the endpoint and Kubernetes type, and etcd.type.
func writeNodesCluster(t *testing.T, hosts int, groups, kube, etcd string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c1\nspec:\n  hosts:\n")
	for i := 1; i <= hosts; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, address: 192.0.2.%d, internalAddress: 192.0.2.%d, user: root, password: refusals-only-1}\n", i, i, i)
	}
	fmt.Fprintf(&b, "  roleGroups:\n    %s\n  %s\n    version: v1.37.2\n    containerRuntime: {type: containerd}\n  etcd:\n    type: %s\n  network:\n    plugin: flannel\n", groups, kube, etcd)
	if err := os.WriteFile("cluster.yaml", []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A site forks one playbook and no role: the copied playbook's
// defaults_files (../../roles/...) are found where the roles are, here the
// built-in ones, and `playbook diff` finds nothing changed.
func TestForkOfOnePlaybook(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNodesCluster(t, 2, "etcd: [n1]\n    master: [n1]\n    worker: [n2]", "kubernetes:\n    type: kubexm", "kubexm")
	if out, err := runCmd(t, realApp(), "playbook", "export", "full"); err != nil {
		t.Fatalf("playbook export: %v\n%s", err, out)
	}
	text, err := os.ReadFile("full/playbooks/create-cluster/playbook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("site/playbooks/create-cluster", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("site/playbooks/create-cluster/playbook.yaml", text, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, realApp(), "site/playbooks/create-cluster", "-i", "cluster.yaml", "--list-tasks"); err != nil || !strings.Contains(out, "Cluster network") {
		t.Errorf("the forked playbook does not load: %v\n%s", err, out)
	}
	if out, err := runCmd(t, realApp(), "playbook", "diff", "site/playbooks/create-cluster"); err != nil || !strings.Contains(out, "0 files changed") {
		t.Errorf("playbook diff of an unchanged copy: %v\n%s", err, out)
	}
}
