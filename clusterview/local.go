package clusterview

import (
	"context"
	"fmt"
	"io"

	"github.com/mensylisir/kubexm/lifecycle"
)

// View is one cluster as get nodes and describe cluster show it: seen
// from this machine (Local) or from a kubexm server (service/client's
// View), printed alike.
type View interface {
	Nodes(ctx context.Context) ([]NodeRow, error)
	Describe(ctx context.Context) (*Description, error)
}

// ClusterList is the clusters get clusters shows: those of the work
// directories under a directory of this machine (LocalClusters) or those
// registered on a kubexm server (service/client's ClusterList), printed
// alike (WriteClusters).
type ClusterList interface {
	Clusters(ctx context.Context) ([]State, error)
	// None is what to say when there is none: where they were looked for,
	// and how one is made.
	None() string
}

// LocalClusters are the clusters of the work directories under Dir, each
// with its Cluster resource as its API server has it (AskResources).
type LocalClusters struct{ Dir string }

// Clusters are the states of the work directories under l.Dir.
func (l LocalClusters) Clusters(ctx context.Context) ([]State, error) {
	states, err := Clusters(l.Dir)
	if err == nil {
		AskResources(ctx, states)
	}
	return states, err
}

// None says there is no cluster under l.Dir.
func (l LocalClusters) None() string {
	return fmt.Sprintf("no clusters under %s (kubexm create cluster -f cluster.yaml makes .kubexm/<name>)", l.Dir)
}

// Local is the view from this machine: the cluster file's hosts and work
// directory, and the API server asked with the work directory's admin
// kubeconfig, taken from the cluster first when there is none
// (lifecycle.Runner.AdminKubeconfig, whose log goes to Errw).
type Local struct {
	Runner  lifecycle.Runner
	Request lifecycle.KubeconfigRequest
	// File is the cluster file as the user named it ("" for the default),
	// for the hints.
	File string
	Errw io.Writer
}

// Nodes are the hosts of the cluster file beside the nodes its API server
// lists.
func (l Local) Nodes(ctx context.Context) ([]NodeRow, error) {
	_, inv, dir, err := lifecycle.LoadCluster(l.Request.Inventory, l.Request.WorkDir, l.Request.RolesPath)
	if err != nil {
		return nil, err
	}
	kc, err := l.Runner.AdminKubeconfig(ctx, l.Request, dir, l.Errw)
	if err != nil {
		return nil, err
	}
	nodes, err := ListNodes(ctx, kc)
	if err != nil {
		return nil, err
	}
	return NodeRows(inv, nodes, true), nil
}

// Describe is describe cluster, the API server asked as Nodes asks it.
func (l Local) Describe(ctx context.Context) (*Description, error) {
	c, inv, dir, err := lifecycle.LoadCluster(l.Request.Inventory, l.Request.WorkDir, l.Request.RolesPath)
	if err != nil {
		return nil, err
	}
	kc, err := l.Runner.AdminKubeconfig(ctx, l.Request, dir, l.Errw)
	return Describe(ctx, c, inv, l.File, dir, kc, err), nil
}
