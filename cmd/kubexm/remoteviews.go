package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
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
		c, _, err := loadWith(f.file, nil)
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
	var out struct {
		Clusters []struct {
			State clusterState `json:"state"`
		} `json:"clusters"`
	}
	if err := c.get(cmd.Context(), "/api/v1/clusters", url.Values{"state": {"true"}}, &out); err != nil {
		return err
	}
	states := make([]clusterState, 0, len(out.Clusters))
	for _, cl := range out.Clusters {
		states = append(states, cl.State)
	}
	return writeClusters(cmd.OutOrStdout(), format, states, fmt.Sprintf("no clusters registered on %s (kubexm create cluster -f cluster.yaml --server %s registers one)", c.base.Redacted(), c.base.Redacted()))
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
	var rows []nodeRow
	if err := c.get(cmd.Context(), "/api/v1/clusters/"+url.PathEscape(name)+"/nodes", nil, &rows); err != nil {
		return err
	}
	return writeNodes(cmd.OutOrStdout(), f.output, rows)
}

func describeRemote(cmd *cobra.Command, f clusterFlags, remote clientFlags) (*clusterDescription, error) {
	name, err := remoteCluster(cmd, f)
	if err != nil {
		return nil, err
	}
	c, err := readClient(remote, f.output)
	if err != nil {
		return nil, err
	}
	var d clusterDescription
	if err := c.get(cmd.Context(), "/api/v1/clusters/"+url.PathEscape(name)+"/describe", nil, &d); err != nil {
		return nil, err
	}
	// The file is the server's registered one: the hints name the file
	// given here, if any, as the verbs with --server register it.
	d.File = f.file
	if d.File == "" {
		d.File = "cluster.yaml"
	}
	return &d, nil
}

// verbViews are the read-only verbs' views that kubexm server serves
// (api.Views), computed by the verbs' own code from the server's work
// directory of a cluster and its registered config.
type verbViews struct{ support *schema.Support }

func (verbViews) State(workDir string) (any, error) {
	s, _, err := readClusterState(workDir)
	return s, err
}

func (v verbViews) parse(config []byte) (*schema.Cluster, *inventory.Inventory, error) {
	c, _, err := schema.ParseWith("cluster.yaml", config, v.support)
	if err != nil {
		return nil, nil, err
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		return nil, nil, err
	}
	return c, inv, nil
}

func (v verbViews) Nodes(ctx context.Context, config []byte, workDir string) (any, error) {
	_, inv, err := v.parse(config)
	if err != nil {
		return nil, err
	}
	nodes, err := listNodes(ctx, filepath.Join(workDir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	return nodeRows(inv, nodes, true), nil
}

func (v verbViews) Describe(ctx context.Context, config []byte, workDir string) (any, error) {
	c, inv, err := v.parse(config)
	if err != nil {
		return nil, err
	}
	return describeWithNodes(ctx, c, inv, "cluster.yaml", workDir, filepath.Join(workDir, "kubeconfig"), nil), nil
}
