package main

import (
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
	cluster := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata:
  name: c1
spec:
  hosts:
  - {name: n1, address: 192.0.2.1, internalAddress: 192.0.2.1, user: root, password: refusals-only-1}
  - {name: n2, address: 192.0.2.2, internalAddress: 192.0.2.2, user: root, password: refusals-only-1}
  - {name: n3, address: 192.0.2.3, internalAddress: 192.0.2.3, user: root, password: refusals-only-1}
  roleGroups:
    etcd: [n1]
    master: [n1, n2]
    worker: [n3]
  controlPlaneEndpoint:
    internalLoadbalancer: haproxy
  kubernetes:
    type: kubexm
    version: v1.37.2
    containerRuntime: {type: containerd}
  etcd:
    type: kubexm
  network:
    plugin: flannel
`
	if err := os.WriteFile("cluster.yaml", []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
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

// kubeadm's nodes join with a token and leave with kubeadm reset, which
// add-nodes and delete-nodes do not do yet: both refuse such a cluster
// before anything runs on a host, rather than give a new host a runtime
// and no kubelet, or leave a removed one's kubelet running.
func TestNodesPlaybooksRefuseKubeadm(t *testing.T) {
	t.Chdir(t.TempDir())
	cluster := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata:
  name: c1
spec:
  hosts:
  - {name: n1, address: 192.0.2.1, internalAddress: 192.0.2.1, user: root, password: refusals-only-1}
  - {name: n2, address: 192.0.2.2, internalAddress: 192.0.2.2, user: root, password: refusals-only-1}
  roleGroups:
    etcd: [n1]
    master: [n1]
    worker: [n2]
  kubernetes:
    type: kubeadm
    version: v1.37.2
    containerRuntime: {type: containerd}
  etcd:
    type: kubeadm
  network:
    plugin: flannel
`
	if err := os.WriteFile("cluster.yaml", []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"add-nodes", "-i", "cluster.yaml"},
		{"delete-nodes", "-i", "cluster.yaml", "-e", "nodes=n2"},
	} {
		out, err := runCmd(t, realApp(), args...)
		if err == nil || !strings.Contains(out, "kubernetes.type kubeadm") || !strings.Contains(out, "not done yet") {
			t.Errorf("%s of a kubeadm cluster: %v, want a refusal naming kubernetes.type kubeadm:\n%s", args[0], err, out)
		}
		if strings.Contains(out, "changed=") {
			t.Errorf("%s changed something before refusing:\n%s", args[0], out)
		}
	}
}
