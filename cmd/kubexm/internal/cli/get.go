package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema"
)

// `kubexm get clusters`, `get nodes` and `describe cluster` read what
// kubexm keeps on this machine (the work directories of seeds/003:
// .kubexm/<cluster>/ with runs/, certs/ and the admin kubeconfig) and ask
// the API server with that kubeconfig; they change nothing.

func newGetClustersCmd() *cobra.Command {
	var dir, format string
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the clusters whose work directories are under .kubexm",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote.server != "" {
				if err := refuseLocalFlags(cmd, "dir"); err != nil {
					return err
				}
				return getClustersRemote(cmd, format, remote)
			}
			return getClusters(cmd.OutOrStdout(), dir, format)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".kubexm", "the directory holding the work directories")
	addOutputFlag(cmd, &format, "text")
	addServerFlags(cmd.Flags(), &remote, "list the clusters registered on this kubexm server (URL), with their work directories there", "a read-only or operator one")
	return cmd
}

func getClusters(w io.Writer, dir, format string) error {
	if err := checkOutputFormat(format, "text"); err != nil {
		return err
	}
	out, err := clusterview.Clusters(dir)
	if err != nil {
		return err
	}
	return writeClusters(w, format, out, fmt.Sprintf("no clusters under %s (kubexm create cluster -f cluster.yaml makes .kubexm/<name>)", dir))
}

// writeClusters prints get clusters' table (or JSON lines); none is the
// line for no cluster at all.
func writeClusters(w io.Writer, format string, out []clusterview.State, none string) error {
	if format != "text" {
		return writeItems(w, format, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLAST RUN\tSTATUS\tAGE\tKUBECONFIG\tCA EXPIRES")
	for _, s := range out {
		last, status, when := "-", "-", "-"
		if s.Last != nil {
			last, status, when = s.Last.Playbook, s.Last.Outcome, clusterview.Age(s.Last.Start)
		}
		kc, ca := "no", "-"
		if s.Kubeconfig {
			kc = "yes"
		}
		if s.CA != nil {
			ca = fmt.Sprintf("%s (%dd)", s.CA.NotAfter.UTC().Format("2006-01-02"), s.CA.DaysLeft)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, last, status, when, kc, ca)
	}
	return tw.Flush()
}

// clusterFlags locate a cluster: its file and its work directory (or,
// with --server, its name on the server).
type clusterFlags struct {
	file      string
	cluster   string
	workDir   string
	rolesPath []string
	output    string
}

func addClusterFlags(cmd *cobra.Command, f *clusterFlags) {
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.file)
	fl.StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles (their support matrix checks the cluster file)")
	addOutputFlag(cmd, &f.output, "text")
}

// loadCluster reads the cluster file of f and its inventory (groups with
// ranges expanded) and finds its work directory.
func loadCluster(f clusterFlags) (*schema.Cluster, *inventory.Inventory, string, error) {
	if err := checkOutputFormat(f.output, "text"); err != nil {
		return nil, nil, "", err
	}
	if f.cluster != "" {
		return nil, nil, "", errors.New("--cluster names a cluster registered on a kubexm server: give --server URL too, or -f cluster.yaml for this machine's work directory")
	}
	file, err := clusterFile(f.file)
	if err != nil {
		return nil, nil, "", err
	}
	return lifecycle.LoadCluster(file, f.workDir, f.rolesPath)
}

func newGetNodesCmd(a *app) *cobra.Command {
	var f clusterFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "nodes -f cluster.yaml",
		Short: "The hosts of cluster.yaml and the cluster's nodes, side by side",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote.server != "" {
				return getNodesRemote(cmd, f, remote)
			}
			_, inv, dir, err := loadCluster(f)
			if err != nil {
				return err
			}
			kc, err := a.adminKubeconfig(cmd.Context(), cmd.ErrOrStderr(), f, dir)
			if err != nil {
				return err
			}
			nodes, err := clusterview.ListNodes(cmd.Context(), kc)
			if err != nil {
				return err
			}
			return writeNodes(cmd.OutOrStdout(), f.output, clusterview.NodeRows(inv, nodes, true))
		},
	}
	addClusterFlags(cmd, &f)
	addRemoteReadFlags(cmd, &f, &remote)
	return cmd
}

// adminKubeconfig is the work directory's admin kubeconfig, taken from
// the cluster first when the directory has none (lifecycle.AdminKubeconfig).
func (a *app) adminKubeconfig(ctx context.Context, errw io.Writer, f clusterFlags, dir string) (string, error) {
	if a == nil {
		return filepath.Join(dir, "kubeconfig"), nil
	}
	file, err := clusterFile(f.file)
	if err != nil {
		return "", err
	}
	return a.runner().AdminKubeconfig(ctx, lifecycle.KubeconfigRequest{Inventory: file, WorkDir: f.workDir, RolesPath: f.rolesPath}, dir, errw)
}

func writeNodes(w io.Writer, format string, rows []clusterview.NodeRow) error {
	if format != "text" {
		return writeItems(w, format, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tROLES\tSTATUS\tAGE\tVERSION")
	for _, r := range rows {
		roles := strings.Join(r.Roles, ",")
		if !r.InFile {
			roles = "(not in cluster file)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Address, roles, r.Status, r.Age, r.Kubelet)
	}
	return tw.Flush()
}

// writeItems writes a list for programs: -o json one JSON object per
// line, -o yaml the same objects as YAML documents, each after "---".
func writeItems[T any](w io.Writer, format string, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if format == "json" {
			if err := enc.Encode(it); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := writeStructured(w, format, it); err != nil {
			return err
		}
	}
	return nil
}
