package operator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema"
)

// testSpec is a loaded cluster of n1 (master, etcd) and the workers named,
// at version, with the edit applied to the file's text.
func testSpec(t *testing.T, version string, workers []string, edit func(string) string) (*schema.Spec, map[string][]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c1\nspec:\n  hosts:\n")
	b.WriteString("  - {name: n1, address: 10.0.0.1, user: root}\n")
	for i, w := range workers {
		b.WriteString("  - {name: " + w + ", address: 10.0.0." + string(rune('2'+i)) + ", user: root}\n")
	}
	b.WriteString("  roleGroups:\n    etcd: [n1]\n    master: [n1]\n")
	if len(workers) > 0 {
		b.WriteString("    worker: [" + strings.Join(workers, ", ") + "]\n")
	}
	b.WriteString("  kubernetes:\n    version: " + version + "\n")
	text := b.String()
	if edit != nil {
		text = edit(text)
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, groups, err := loadCluster(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return &c.Spec, groups
}

// settings are the cluster record's settings of testSpec's cluster.
var settings = map[string]string{
	"kubernetes.type": "kubexm", "etcd.type": "kubexm", "network.plugin": "flannel",
	"network.kubePodsCIDR": "10.233.64.0/18", "network.kubeServiceCIDR": "10.233.0.0/18",
	"kubernetes.clusterName": "cluster.local", "controlPlaneEndpoint.domain": "lb.kubexm.local",
}

// expiring is in at 2026-12-03 08:00 UTC with its earliest certificate
// expiring after left.
func expiring(in Input, left time.Duration) Input {
	in.Now = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	in.Status.Certificates = &schema.CertificateStatus{EarliestExpiry: in.Now.Add(left).Format(time.RFC3339)}
	return in
}

func readyNodes(version string, names ...string) map[string]Node {
	m := map[string]Node{}
	for _, n := range names {
		m[n] = Node{KubeletVersion: version, Ready: true}
	}
	return m
}

// TestDecide: each class of change of the spec against the status and the
// nodes gives its plan, and only its plan.
func TestDecide(t *testing.T) {
	applied, appliedGroups := testSpec(t, "v1.36.3", []string{"n2", "n3"}, nil)
	converged := func(in Input) Input {
		in.Applied, in.AppliedGroups = applied, appliedGroups
		in.Generation, in.Status.ObservedGeneration = 2, 1
		in.Status.Settings = settings
		return in
	}
	spec := func(version string, workers []string, edit func(string) string) Input {
		s, g := testSpec(t, version, workers, edit)
		return converged(Input{Spec: s, Groups: g, Nodes: readyNodes("v1.36.3", "n1", "n2", "n3")})
	}
	tests := []struct {
		name      string
		in        Input
		action    Action
		playbook  string
		vars      []string
		onApplied bool
		reason    string
		says      []string
	}{
		{name: "nothing changed", in: func() Input {
			in := spec("v1.36.3", []string{"n2", "n3"}, nil)
			in.Status.ObservedGeneration = in.Generation
			return in
		}(), action: Converged, reason: "AsSpecified"},
		{name: "a new generation that changes nothing", in: spec("v1.36.3", []string{"n2", "n3"}, nil), action: Converged, reason: "AsSpecified"},
		{name: "paused", in: func() Input {
			in := spec("v1.37.2", []string{"n2", "n3", "n4"}, nil)
			in.Annotations = map[string]string{AnnotationPaused: "true"}
			return in
		}(), action: Paused, reason: "Paused"},
		{name: "immutable field", in: spec("v1.37.2", []string{"n2", "n3", "n4"}, func(s string) string {
			return s + "  network:\n    kubePodsCIDR: 10.244.0.0/16\n"
		}), action: Refuse, reason: "ImmutableFieldChanged", says: []string{"network.kubePodsCIDR is 10.233.64.0/18", "asks 10.244.0.0/16"}},
		{name: "kubernetes.type", in: spec("v1.36.3", []string{"n2", "n3"}, func(s string) string {
			return strings.Replace(s, "  kubernetes:\n", "  kubernetes:\n    type: kubeadm\n", 1) + "  etcd:\n    type: kubeadm\n"
		}), action: Refuse, reason: "ImmutableFieldChanged", says: []string{"kubernetes.type is kubexm", "etcd.type is kubexm"}},
		{name: "host removed", in: spec("v1.36.3", []string{"n2"}, nil), action: Run, playbook: "delete-nodes",
			vars: []string{"nodes=n3"}, onApplied: true, reason: "RemovingNodes", says: []string{"n3"}},
		{name: "host removed, forced", in: func() Input {
			in := spec("v1.36.3", []string{"n2"}, nil)
			in.Annotations = map[string]string{AnnotationForceDelete: "true"}
			return in
		}(), action: Run, playbook: "delete-nodes", vars: []string{"nodes=n3", "force=true"}, onApplied: true, reason: "RemovingNodes"},
		{name: "host removed that is no node any more", in: func() Input {
			in := spec("v1.36.3", []string{"n2"}, nil)
			delete(in.Nodes, "n3")
			return in
		}(), action: Converged, reason: "AsSpecified"},
		{name: "host removed without an applied spec", in: func() Input {
			in := spec("v1.36.3", []string{"n2"}, nil)
			in.Applied, in.AppliedGroups = nil, nil
			in.Status.Nodes = []schema.NodeStatus{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
			return in
		}(), action: Refuse, reason: "RemovedHostUnknown", says: []string{"delete-nodes -e nodes=n3"}},
		{name: "spec.operator (the CLI's create-cluster installs the controller)", in: spec("v1.36.3", []string{"n2", "n3"}, func(s string) string {
			key := filepath.Join(t.TempDir(), "id")
			if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
				t.Fatal(err)
			}
			return strings.ReplaceAll(s, "user: root}", "user: root, privateKeyPath: "+key+"}") + "  operator:\n    enabled: true\n"
		}), action: Converged, reason: "AsSpecified"},
		{name: "host added", in: spec("v1.36.3", []string{"n2", "n3", "n4"}, nil), action: Run, playbook: "add-nodes", reason: "AddingNodes", says: []string{"n4"}},
		{name: "one minor up", in: spec("v1.37.2", []string{"n2", "n3"}, nil), action: Run, playbook: "upgrade", reason: "Upgrading", says: []string{"v1.36.3", "v1.37.2"}},
		{name: "a patch up", in: spec("v1.36.9", []string{"n2", "n3"}, nil), action: Run, playbook: "upgrade", reason: "Upgrading"},
		{name: "one node behind (an interrupted upgrade)", in: func() Input {
			in := spec("v1.37.2", []string{"n2", "n3"}, nil)
			in.Nodes = readyNodes("v1.37.2", "n1", "n2")
			in.Nodes["n3"] = Node{KubeletVersion: "v1.36.3", Ready: true}
			return in
		}(), action: Run, playbook: "upgrade", reason: "Upgrading"},
		{name: "down", in: func() Input {
			in := spec("v1.36.3", []string{"n2", "n3"}, nil)
			in.Nodes = readyNodes("v1.37.2", "n1", "n2", "n3")
			return in
		}(), action: Refuse, reason: "VersionDowngrade"},
		{name: "two minors up", in: func() Input {
			in := spec("v1.37.2", []string{"n2", "n3"}, nil)
			in.Nodes = readyNodes("v1.35.1", "n1", "n2", "n3")
			return in
		}(), action: Refuse, reason: "VersionSkew", says: []string{"one minor at a time"}},
		{name: "renewal annotation", in: func() Input {
			in := spec("v1.36.3", []string{"n2", "n3"}, nil)
			in.Annotations = map[string]string{AnnotationRenewCertificates: "2026-12-02"}
			return in
		}(), action: Run, playbook: "certs-renew", reason: "RenewingCertificates"},
		{name: "a certificate within the renewal window", in: expiring(spec("v1.36.3", []string{"n2", "n3"}, nil), 29*24*time.Hour),
			action: Run, playbook: "certs-renew", reason: "CertificatesExpiring", says: []string{"2027-01-01T08:00:00Z", "within 30 days"}},
		{name: "a certificate outside the renewal window", in: func() Input {
			in := expiring(spec("v1.36.3", []string{"n2", "n3"}, nil), 31*24*time.Hour)
			in.Status.ObservedGeneration = in.Generation
			return in
		}(), action: Converged},
		{name: "a certificate within the window, autoRenewCerts (the masters' timer renews it)", in: func() Input {
			in := expiring(spec("v1.36.3", []string{"n2", "n3"}, func(s string) string {
				return strings.Replace(s, "    version: v1.36.3\n", "    version: v1.36.3\n    autoRenewCerts: true\n", 1)
			}), time.Hour)
			in.Status.ObservedGeneration = in.Generation
			return in
		}(), action: Converged},
		{name: "still within the window after a certs-renew that succeeded", in: func() Input {
			in := expiring(spec("v1.36.3", []string{"n2", "n3"}, nil), 29*24*time.Hour)
			in.Status.LastRun = &schema.RunStatus{ID: "20261202-080000", Playbook: "certs-renew", Result: "Succeeded"}
			return in
		}(), action: Refuse, reason: "CertificatesStillExpiring", says: []string{"20261202-080000", "kubexm certs check", AnnotationRenewCertificates}},
		{name: "another field", in: spec("v1.36.3", []string{"n2", "n3"}, func(s string) string {
			return s + "  dns:\n    nodelocaldns:\n      enabled: true\n"
		}), action: Run, playbook: "create-cluster", reason: "ApplyingSpec", says: []string{"dns"}},
		{name: "another field, no applied spec", in: func() Input {
			in := spec("v1.36.3", []string{"n2", "n3"}, nil)
			in.Applied, in.AppliedGroups = nil, nil
			return in
		}(), action: Run, playbook: "create-cluster", reason: "ApplyingSpec"},
		{name: "another field of a generation already observed", in: func() Input {
			in := spec("v1.36.3", []string{"n2", "n3"}, func(s string) string { return s + "  dns:\n    nodelocaldns:\n      enabled: true\n" })
			in.Status.ObservedGeneration = in.Generation
			return in
		}(), action: Converged},
		// One step at a time, removals first: the upgrade comes at the
		// next reconcile.
		{name: "host removed and version up", in: spec("v1.37.2", []string{"n2"}, nil), action: Run, playbook: "delete-nodes", vars: []string{"nodes=n3"}, onApplied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if p.Action != tt.action || p.Playbook != tt.playbook || p.OnApplied != tt.onApplied || !slices.Equal(p.Vars, tt.vars) {
				t.Errorf("plan %+v, want action %d playbook %q vars %v onApplied %v", p, tt.action, tt.playbook, tt.vars, tt.onApplied)
			}
			if tt.reason != "" && p.Reason != tt.reason {
				t.Errorf("reason %q, want %q (%s)", p.Reason, tt.reason, p.Message)
			}
			for _, s := range tt.says {
				if !strings.Contains(p.Message, s) {
					t.Errorf("message %q does not say %q", p.Message, s)
				}
			}
		})
	}
}
