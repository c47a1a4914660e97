package schema

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The defaults of cluster.yaml live in SetDefaults alone: the roles see the
// defaulted spec, so a role's own `| default` of a spec field is a second
// default that drifts (issue 46: the roles said ipvs long after nothing ran
// it). The test walks the built-in roles for spec fields SetDefaults fills.
func TestRolesHaveNoSecondDefaultOfSpec(t *testing.T) {
	var c Cluster
	SetDefaults(&c)
	defaulted := map[string]bool{
		"kubernetes.proxyMode": c.Spec.Kubernetes.ProxyMode != "",
		"kubernetes.type":      c.Spec.Kubernetes.Type != "",
		"network.plugin":       c.Spec.Network.Plugin != "",
		// Filled whatever else the file says (the etcd ones for etcd.type
		// kubexm, the only type whose etcd.conf.yml the etcd role writes).
		"registry.containerdDataDir": c.Spec.Registry.ContainerdDataDir != "",
		"kubernetes.maxPods":         c.Spec.Kubernetes.MaxPods != 0,
		"kubernetes.podPidsLimit":    c.Spec.Kubernetes.PodPidsLimit != 0,
		"etcd.heartbeatInterval":     c.Spec.Etcd.HeartbeatInterval != 0,
		"etcd.electionTimeout":       c.Spec.Etcd.ElectionTimeout != 0,
		"etcd.snapshotCount":         c.Spec.Etcd.SnapshotCount != 0,
		"etcd.metrics":               c.Spec.Etcd.Metrics != "",
		"etcd.quotaBackendBytes":     c.Spec.Etcd.QuotaBackendBytes != 0,
		"etcd.maxRequestBytes":       c.Spec.Etcd.MaxRequestBytes != 0,
		"etcd.logLevel":              c.Spec.Etcd.LogLevel != "",
	}
	re := regexp.MustCompile(`\.spec\.([A-Za-z.]+)\s*\|\s*default\b`)
	root := filepath.Join("..", "roles")
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			if defaulted[m[1]] {
				found = append(found, p+": "+m[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Kubernetes.ProxyMode != "iptables" {
		t.Errorf("default proxyMode %q, want iptables (the mode the e2e suites run)", c.Spec.Kubernetes.ProxyMode)
	}
	if len(found) > 0 {
		t.Errorf("roles default spec fields SetDefaults already fills:\n%s", strings.Join(found, "\n"))
	}
}
