package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/client"
)

// The read-only verbs (get clusters, get nodes, get runs, logs, describe
// cluster, get kubeconfig) read what kubexm keeps on this machine (the work
// directories of seeds/003: .kubexm/<cluster>/ with runs/, certs/ and the
// admin kubeconfig) and ask the API server with that kubeconfig; they
// change nothing. Given --server, get clusters, get nodes and describe
// cluster show what the server computes with the same code (its
// registered config and its work directory there), printed alike.

func newGetClustersCmd() *cobra.Command {
	var dir, format string
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the clusters whose work directories are under .kubexm",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printers.Check(format, "text"); err != nil {
				return err
			}
			var list clusterview.ClusterList = clusterview.LocalClusters{Dir: dir}
			if remote.Server != "" {
				if err := refuseLocalFlags(cmd, "dir"); err != nil {
					return err
				}
				c, err := readClient(remote, format)
				if err != nil {
					return err
				}
				list = client.ClusterList{Client: c}
			}
			states, err := list.Clusters(cmd.Context())
			if err != nil {
				return err
			}
			return printers.PrintItems(cmd.OutOrStdout(), format, states, func(w io.Writer) error { return clusterview.WriteClusters(w, states, list.None()) })
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".kubexm", "the directory holding the work directories")
	addOutputFlag(cmd, &format, "text")
	addServerFlags(cmd.Flags(), &remote, "list the clusters registered on this kubexm server (URL), with their work directories there", "a read-only or operator one")
	return cmd
}

// clusterFlags locate a cluster on this machine (its file, work directory
// and roles) or, with --server, by its name there; output is -o.
type clusterFlags struct {
	file, cluster, workDir, output string
	rolesPath, extraVars           []string
}

// addClusterFlags adds -f, --workdir, --roles-path and, unless human is
// "", -o with human as the format for people.
func addClusterFlags(cmd *cobra.Command, f *clusterFlags, human string) {
	addClusterFileFlag(cmd.Flags(), &f.file)
	cmd.Flags().StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	addRolesPathFlag(cmd, &f.rolesPath)
	if human != "" {
		addOutputFlag(cmd, &f.output, human)
	}
}

// localFile is the cluster file of a read verb run on this machine.
func localFile(f clusterFlags) (string, error) {
	if err := printers.Check(f.output, "text"); err != nil {
		return "", err
	}
	if f.cluster != "" {
		return "", errors.New("--cluster names a cluster registered on a kubexm server: give --server URL too, or -f cluster.yaml for this machine's work directory")
	}
	return clusterFile(f.file)
}

// workDir is the work directory of the cluster of f on this machine.
func workDir(f clusterFlags) (string, error) {
	file, err := localFile(f)
	if err != nil {
		return "", err
	}
	_, _, dir, err := lifecycle.LoadCluster(file, f.workDir, f.rolesPath)
	return dir, err
}

// addRemoteReadFlags adds --server (and how to reach it) and --cluster to
// a read-only verb of a cluster.
func addRemoteReadFlags(cmd *cobra.Command, f *clusterFlags, remote *clientFlags) {
	addServerFlags(cmd.Flags(), remote, "ask this kubexm server (URL): its registered config of the cluster and its work directory there", "a read-only or operator one")
	cmd.Flags().StringVar(&f.cluster, "cluster", "", "with --server: the registered cluster's name (default metadata.name of -f)")
}

// view is the cluster of f as this machine sees it or, with --server, as
// the server does (lifecycle.ClusterName: nothing is registered by a
// read).
func (f clusterFlags) view(cmd *cobra.Command, a *app, remote clientFlags) (clusterview.View, error) {
	if remote.Server == "" {
		file, err := localFile(f)
		if err != nil {
			return nil, err
		}
		return clusterview.Local{Runner: a.Runner, Request: f.kubeconfigRequest(file), File: f.file, Errw: cmd.ErrOrStderr()}, nil
	}
	if err := refuseLocalFlags(cmd, "workdir", "roles-path"); err != nil {
		return nil, err
	}
	name, err := lifecycle.ClusterName(f.cluster, f.file)
	if err != nil {
		return nil, err
	}
	c, err := readClient(remote, f.output)
	if err != nil {
		return nil, err
	}
	return client.View{Client: c, Cluster: name, File: cmp.Or(f.file, defaultClusterFile)}, nil
}

// readClient is the client of a read verb with --server; the verb prints
// format itself, so the client is only told whether it is for people.
func readClient(remote clientFlags, format string) (*client.Client, error) {
	if err := printers.Check(format, "text"); err != nil {
		return nil, err
	}
	remote.output = "text"
	if format != "text" {
		remote.output = "json"
	}
	return newAPIClient(&remote)
}

func newGetNodesCmd(a *app) *cobra.Command {
	return viewCmd(a, "nodes -f cluster.yaml", "The hosts of cluster.yaml and the cluster's nodes, side by side",
		func(cmd *cobra.Command, v clusterview.View, output string) error {
			rows, err := v.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			return printers.PrintItems(cmd.OutOrStdout(), output, rows, func(w io.Writer) error { return clusterview.WriteNodes(w, rows) })
		})
}

// viewCmd is a read verb of a cluster as this machine or, with --server, a
// server sees it (clusterFlags.view): show prints what it reads of v in
// the output format of -o.
func viewCmd(a *app, use, short string, show func(cmd *cobra.Command, v clusterview.View, output string) error) *cobra.Command {
	var f clusterFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := f.view(cmd, a, remote)
			if err != nil {
				return err
			}
			return show(cmd, v, f.output)
		},
	}
	addClusterFlags(cmd, &f, "text")
	addRemoteReadFlags(cmd, &f, &remote)
	return cmd
}

// kubeconfigRequest is what fetching the admin kubeconfig of the cluster
// file of f needs.
func (f clusterFlags) kubeconfigRequest(file string) lifecycle.KubeconfigRequest {
	return lifecycle.KubeconfigRequest{Inventory: file, WorkDir: f.workDir, RolesPath: f.rolesPath, ExtraVars: f.extraVars}
}

func newDescribeClusterCmd(a *app) *cobra.Command {
	return viewCmd(a, "cluster -f cluster.yaml", "A cluster's versions, hosts, endpoint, work directory, certificates and nodes",
		func(cmd *cobra.Command, v clusterview.View, output string) error {
			d, err := v.Describe(cmd.Context())
			if err != nil {
				return err
			}
			return printers.Print(cmd.OutOrStdout(), output, d, d.Write)
		})
}

func newGetRunsCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "runs -f cluster.yaml",
		Short: "The runs of the cluster's work directory, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := workDir(f)
			if err != nil {
				return err
			}
			runs, err := clusterview.RunList(dir)
			if err != nil {
				return err
			}
			return printers.Print(cmd.OutOrStdout(), f.output, runs, func(w io.Writer) error { return clusterview.WriteRuns(w, dir, runs) })
		},
	}
	addClusterFlags(cmd, &f, "text")
	return cmd
}

func newLogsCmd() *cobra.Command {
	var f clusterFlags
	var host string
	var failed bool
	cmd := &cobra.Command{
		Use:   "logs RUN -f cluster.yaml",
		Short: "What a run did, task by task and host by host, from its journal",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := workDir(f)
			if err != nil {
				return err
			}
			l, err := clusterview.RunLog(dir, args[0], host, failed)
			if err != nil {
				return err
			}
			return printers.Print(cmd.OutOrStdout(), f.output, l, l.Write)
		},
	}
	addClusterFlags(cmd, &f, "text")
	cmd.Flags().StringVar(&host, "host", "", "only this host's tasks")
	cmd.Flags().BoolVar(&failed, "failed", false, "only the tasks that failed, were unreachable or whose failure was ignored")
	return cmd
}

func newGetKubeconfigCmd(a *app) *cobra.Command {
	var f clusterFlags
	var to string
	cmd := &cobra.Command{
		Use:   "kubeconfig -f cluster.yaml",
		Short: "The cluster's admin kubeconfig, from the cluster itself",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := clusterFile(f.file)
			if err != nil {
				return err
			}
			data, err := a.Runner.Kubeconfig(cmd.Context(), f.kubeconfigRequest(file), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if to == "" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := lifecycle.WritePrivate(to, data); err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (the cluster's admin kubeconfig; kubectl --kubeconfig %s get nodes)\n", to, to)
			return nil
		},
	}
	addClusterFlags(cmd, &f, "")
	cmd.Flags().StringVar(&to, "to", "", "write the kubeconfig to this file (0600) instead of printing it")
	addExtraVarsFlag(cmd.Flags(), &f.extraVars)
	return cmd
}
