package lifecycle

import (
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
)

// Cluster is what a verb tells its user of the cluster a run is about.
type Cluster struct {
	Name  string
	Hosts []string // in the file's order
	// WorkDir is the run's work directory (absolute in a run).
	WorkDir string
}

func clusterOf(inv *inventory.Inventory, workDir string) Cluster {
	c := Cluster{WorkDir: workDir}
	c.Name, _ = inv.Vars["cluster_name"].(string)
	for _, h := range inv.Hosts {
		c.Hosts = append(c.Hosts, h.Name)
	}
	return c
}

// ReadCluster reads the cluster file of a run that does not run here (it
// goes to a kubexm server), checked against the support matrix of
// rolesPath, for the same confirmation a local run asks.
func ReadCluster(file, workDir string, rolesPath []string) (Cluster, error) {
	s, err := SupportFromRolesPath(rolesPath)
	if err != nil {
		return Cluster{}, err
	}
	c, _, err := schema.LoadWith(file, s)
	if err != nil {
		return Cluster{}, err
	}
	out := Cluster{Name: c.Metadata.Name, WorkDir: workDir}
	if out.WorkDir == "" {
		out.WorkDir = DefaultWorkDir(c.Metadata.Name, file)
	}
	for _, h := range c.Spec.Hosts {
		out.Hosts = append(out.Hosts, h.Name)
	}
	return out, nil
}
