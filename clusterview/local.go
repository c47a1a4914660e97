package clusterview

import (
	"context"
	"io"

	"github.com/mensylisir/kubexm/lifecycle"
)

// LocalNodes is get nodes on this machine: the hosts of the cluster file
// beside the nodes its API server lists, asked with the work directory's
// admin kubeconfig, taken from the cluster first when there is none
// (lifecycle.Runner.AdminKubeconfig, whose log goes to errw).
func LocalNodes(ctx context.Context, r lifecycle.Runner, req lifecycle.KubeconfigRequest, errw io.Writer) ([]NodeRow, error) {
	_, inv, dir, err := lifecycle.LoadCluster(req.Inventory, req.WorkDir, req.RolesPath)
	if err != nil {
		return nil, err
	}
	kc, err := r.AdminKubeconfig(ctx, req, dir, errw)
	if err != nil {
		return nil, err
	}
	nodes, err := ListNodes(ctx, kc)
	if err != nil {
		return nil, err
	}
	return NodeRows(inv, nodes, true), nil
}

// LocalDescribe is describe cluster on this machine, as LocalNodes asks;
// file is the cluster file as the user named it ("" for the default), for
// the hints.
func LocalDescribe(ctx context.Context, r lifecycle.Runner, req lifecycle.KubeconfigRequest, file string, errw io.Writer) (*Description, error) {
	c, inv, dir, err := lifecycle.LoadCluster(req.Inventory, req.WorkDir, req.RolesPath)
	if err != nil {
		return nil, err
	}
	kc, err := r.AdminKubeconfig(ctx, req, dir, errw)
	return Describe(ctx, c, inv, file, dir, kc, err), nil
}
