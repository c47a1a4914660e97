package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/lifecycle"
)

// The read-only verbs (get clusters, get nodes, describe cluster) given
// --server show what the server knows: its registered config of the
// cluster and its work directory there (the runs its jobs made, the PKI,
// the admin kubeconfig it asks the cluster's API server with). The server
// computes the same structures with the same code (verbViews) and the
// verb prints them as it prints its own.

// addRemoteReadFlags adds --server (and how to reach it) and --cluster to
// a read-only verb of a cluster.
func addRemoteReadFlags(cmd *cobra.Command, f *clusterFlags, remote *clientFlags) {
	fl := cmd.Flags()
	addServerFlags(fl, remote, "ask this kubexm server (URL): its registered config of the cluster and its work directory there", "a read-only or operator one")
	fl.StringVar(&f.cluster, "cluster", "", "with --server: the registered cluster's name (default metadata.name of -f)")
}

// remoteCluster is the name of the cluster a read-only verb with --server
// asks for: --cluster, or metadata.name of -f. The file is only read for
// its name (nothing is registered by a read).
func remoteCluster(cmd *cobra.Command, f clusterFlags) (string, error) {
	if err := refuseLocalFlags(cmd, "workdir", "roles-path"); err != nil {
		return "", err
	}
	switch {
	case f.cluster != "" && f.file != "":
		return "", errors.New("--cluster and -f both name the cluster; give one")
	case f.cluster != "":
		return f.cluster, nil
	case f.file != "":
		c, _, err := lifecycle.LoadWith(f.file, nil)
		if err != nil {
			return "", err
		}
		return c.Metadata.Name, nil
	}
	return "", errors.New("no cluster: pass --cluster NAME (kubexm get clusters --server URL lists them) or -f cluster.yaml")
}

// readClient is the client of a read verb with --server; the verb prints
// format itself, so the client is only told whether it is for people.
func readClient(remote clientFlags, format string) (*apiClient, error) {
	if err := checkOutputFormat(format, "text"); err != nil {
		return nil, err
	}
	remote.output = "text"
	if format != "text" {
		remote.output = "json"
	}
	return newAPIClient(&remote)
}

func getClustersRemote(cmd *cobra.Command, format string, remote clientFlags) error {
	c, err := readClient(remote, format)
	if err != nil {
		return err
	}
	states, err := c.ClusterStates(cmd.Context())
	if err != nil {
		return err
	}
	return writeClusters(cmd.OutOrStdout(), format, states, fmt.Sprintf("no clusters registered on %s (kubexm create cluster -f cluster.yaml --server %s registers one)", c.Base.Redacted(), c.Base.Redacted()))
}

func getNodesRemote(cmd *cobra.Command, f clusterFlags, remote clientFlags) error {
	name, err := remoteCluster(cmd, f)
	if err != nil {
		return err
	}
	c, err := readClient(remote, f.output)
	if err != nil {
		return err
	}
	rows, err := c.Nodes(cmd.Context(), name)
	if err != nil {
		return err
	}
	return writeNodes(cmd.OutOrStdout(), f.output, rows)
}

func describeRemote(cmd *cobra.Command, f clusterFlags, remote clientFlags) (*clusterview.Description, error) {
	name, err := remoteCluster(cmd, f)
	if err != nil {
		return nil, err
	}
	c, err := readClient(remote, f.output)
	if err != nil {
		return nil, err
	}
	d, err := c.Describe(cmd.Context(), name)
	if err != nil {
		return nil, err
	}
	// The file is the server's registered one: the hints name the file
	// given here, if any, as the verbs with --server register it.
	d.File = f.file
	if d.File == "" {
		d.File = "cluster.yaml"
	}
	return d, nil
}
