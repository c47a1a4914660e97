package clusterview

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

// TestNodeRows: the hosts of the file beside the Nodes of the API, a
// Kubernetes host without a Node NotJoined (Unknown when the API was not
// asked), a Node the file does not name at the end with its InternalIP.
func TestNodeRows(t *testing.T) {
	inv := &inventory.Inventory{
		Hosts: []inventory.Host{
			{Name: "m1", Address: "203.0.113.1", Vars: map[string]any{"internal_address": "10.0.0.1,fd00::1"}},
			{Name: "w1", Address: "10.0.0.2"},
			{Name: "lb", Address: "10.0.0.9"},
		},
		Groups: map[string][]string{"master": {"m1"}, "etcd": {"m1"}, "worker": {"w1"}, "loadbalancer": {"lb"}, "k8s_cluster": {"m1", "w1"}},
	}
	created := metav1.NewTime(time.Now().Add(-72 * time.Hour))
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "m1", CreationTimestamp: created},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "x9", CreationTimestamp: created}, Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "x9"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.99"}}}},
	}
	rows := NodeRows(inv, nodes, true)
	want := []NodeRow{
		{Name: "m1", Address: "10.0.0.1", Roles: []string{"master", "etcd"}, InFile: true, Status: "Ready", Age: "3d", Kubelet: "v1.37.2", IsK8sNode: true, APIPresent: true},
		{Name: "w1", Address: "10.0.0.2", Roles: []string{"worker"}, InFile: true, Status: "NotJoined", Age: "-", Kubelet: "-", IsK8sNode: true},
		{Name: "lb", Address: "10.0.0.9", Roles: []string{"loadbalancer"}, InFile: true, Status: "-", Age: "-", Kubelet: "-"},
		{Name: "x9", Address: "10.0.0.99", Roles: []string{}, Status: "NotReady,SchedulingDisabled", Age: "3d", IsK8sNode: true, APIPresent: true},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows: %+v", rows)
	}
	for i := range want {
		g, w := rows[i], want[i]
		if g.Name != w.Name || g.Address != w.Address || len(g.Roles) != len(w.Roles) || g.InFile != w.InFile || g.Status != w.Status ||
			g.Age != w.Age || g.Kubelet != w.Kubelet || g.IsK8sNode != w.IsK8sNode || g.APIPresent != w.APIPresent {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	if rows := NodeRows(inv, nil, false); rows[1].Status != "Unknown" {
		t.Errorf("without an answer from the API, w1 is %s", rows[1].Status)
	}
}

// TestClusters: a directory holding nothing kubexm writes is no cluster;
// one with a kubeconfig is, and a missing .kubexm holds none.
func TestClusters(t *testing.T) {
	dir := t.TempDir()
	if got, err := Clusters(filepath.Join(dir, "none")); err != nil || len(got) != 0 {
		t.Fatalf("missing dir: %v %v", got, err)
	}
	for _, p := range []string{"stray", "demo"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "demo", "kubeconfig"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Clusters(dir)
	if err != nil || len(got) != 1 || got[0].Name != "demo" || !got[0].Kubeconfig || got[0].Runs != 0 {
		t.Fatalf("clusters: %+v %v", got, err)
	}
}

// LocalClusters lists the clusters under its directory, and says where
// it looked when there are none.
func TestLocalClusters(t *testing.T) {
	dir := t.TempDir()
	var list ClusterList = LocalClusters{Dir: dir}
	if got, err := list.Clusters(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("empty dir: %v %v", got, err)
	}
	if none := list.None(); !strings.HasPrefix(none, "no clusters under "+dir+" ") {
		t.Errorf("None = %q", none)
	}
	if err := os.MkdirAll(filepath.Join(dir, "demo", "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := list.Clusters(context.Background())
	if err != nil || len(got) != 1 || got[0].Name != "demo" {
		t.Fatalf("clusters: %+v %v", got, err)
	}
}

// A command's run (kubexm run command) is listed among the runs but is
// not the cluster's last run, even when it failed after a playbook ran.
func TestCommandRunIsNotTheClustersLastRun(t *testing.T) {
	dir := t.TempDir()
	journalRun := func(id, playbook, start, outcome string) {
		t.Helper()
		p := filepath.Join(dir, "runs", id)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("{\"type\":\"header\",\"time\":%q,\"playbook\":%q}\n", start, playbook)
		if outcome != "" {
			text += fmt.Sprintf("{\"type\":\"end\",\"time\":%q,\"outcome\":%q}\n", start, outcome)
		}
		if err := os.WriteFile(filepath.Join(p, "journal.jsonl"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	journalRun("r1", "create-cluster", "2026-12-03T10:00:00Z", "ok")
	journalRun("r2", lifecycle.CommandPlaybook, "2026-12-03T10:05:00Z", "failed")
	s, ok, err := ReadState(dir)
	if err != nil || !ok {
		t.Fatalf("ReadState: %v %v", ok, err)
	}
	if s.Runs != 2 || s.Last == nil || s.Last.Playbook != "create-cluster" || s.Last.Outcome != "ok" {
		t.Errorf("the cluster's last run: %+v of %d runs, want create-cluster ok of 2", s.Last, s.Runs)
	}
	// create-cluster again, still running (no end yet), and a command
	// typed meanwhile: the command is not the run holding the lock.
	journalRun("r3", "create-cluster", "2026-12-03T11:00:00Z", "")
	journalRun("r4", lifecycle.CommandPlaybook, "2026-12-03T11:01:00Z", "ok")
	recent := RecentRuns(dir, 2, true)
	if len(recent) != 2 || recent[0].Playbook != lifecycle.CommandPlaybook || recent[0].Outcome == "running" || recent[1].Outcome != "running" {
		t.Errorf("recent runs with a playbook running: %+v, want the command's first, not running, and create-cluster's running", recent)
	}
}
