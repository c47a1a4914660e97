package lifecycle

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/inventory"
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
	c, _, err := validate.LoadWith(file, s)
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

// CheckUpgradeTarget refuses an upgrade to a version other than the one
// the cluster file names (spec.kubernetes.version): the file is what the
// cluster is made of, so the next create or add nodes installs the same
// version, and naming the target (--to-version) confirms it, so that a
// file edited by someone else is not upgraded by surprise.
func CheckUpgradeTarget(file string, rolesPath []string, to string) error {
	c, _, err := LoadWith(file, rolesPath)
	if err != nil {
		return err
	}
	want, spec := "v"+strings.TrimPrefix(to, "v"), c.Spec.Kubernetes.Version
	if want != "v"+strings.TrimPrefix(spec, "v") {
		return fmt.Errorf("--to-version %s, but spec.kubernetes.version of %s is %s: the upgrade installs what the cluster file says; set spec.kubernetes.version: %s in %s and run again",
			want, file, spec, want, file)
	}
	return nil
}

// RollBackFailedUpgrade runs the rollback playbook after the upgrade of
// req failed with err (upgrade cluster --rollback-on-failure), with req's
// options, and says on stderr why; it returns the upgrade's error, told
// whether the rollback worked.
func (r Runner) RollBackFailedUpgrade(ctx context.Context, req Request, err error, stderr io.Writer) error {
	fmt.Fprintf(stderr, "the upgrade failed (%v): --rollback-on-failure runs the rollback playbook\n", err)
	// Only the upgrade that failed: one whose record says it finished (a
	// failed re-run of it) is not rolled back.
	extra := append(append([]string(nil), req.ExtraVars...), "rollback_unfinished_only=true")
	back := Request{Playbook: "rollback", Inventory: req.Inventory, ExtraVars: extra, Forks: req.Forks, Output: req.Output,
		Verbose: req.Verbose, RolesPath: req.RolesPath, Overlays: req.Overlays, WorkDir: req.WorkDir, LockWait: req.LockWait,
		Stdout: req.Stdout, Stderr: req.Stderr}
	if _, rerr := r.Run(ctx, back); rerr != nil {
		return fmt.Errorf("the upgrade failed: %w; its rollback failed too: %v", err, rerr)
	}
	return fmt.Errorf("the upgrade failed and was rolled back: %w", err)
}
