package clusterview

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	corev1 "k8s.io/api/core/v1"

	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
)

// Description is describe cluster's view: the file's choices, the work
// directory's state, the certificates kept there and, when the API
// answers, the nodes.
type Description struct {
	Name             string    `json:"name"`
	File             string    `json:"file"`
	Kubernetes       string    `json:"kubernetes"`
	Etcd             string    `json:"etcd"`
	ContainerRuntime string    `json:"container_runtime"`
	Network          string    `json:"network"`
	Endpoint         string    `json:"control_plane_endpoint"`
	Hosts            []NodeRow `json:"hosts"`
	State            State     `json:"work_dir_state"`
	Certificates     []Cert    `json:"certificates"`
	API              string    `json:"api"` // how the API server answered
	// Resource is the Cluster resource (operator mode) when the cluster
	// has one; ResourceNote says why there is none to show.
	Resource     *Resource `json:"cluster_resource,omitempty"`
	ResourceNote string    `json:"cluster_resource_note,omitempty"`
	Runs         []Run     `json:"recent_runs"`
}

// Describe is describe cluster's view of the cluster c (read from file,
// its work directory dir) with the nodes the API server reports, asked with
// kubeconfig; an API that does not answer, or no kubeconfig (kcErr), is
// reported, not an error.
func Describe(ctx context.Context, c *schema.Cluster, inv *inventory.Inventory, file, dir, kubeconfig string, kcErr error) *Description {
	d := describe(c, file, dir)
	nodes, err := []corev1.Node(nil), kcErr
	if err == nil {
		nodes, err = ListNodes(ctx, kubeconfig)
	}
	if err != nil {
		d.API = "no answer: " + err.Error()
	} else {
		d.API = fmt.Sprintf("answered: %d nodes", len(nodes))
	}
	d.Hosts = NodeRows(inv, nodes, err == nil)
	switch {
	case err != nil:
		d.ResourceNote = "not asked: the API server did not answer"
	default:
		if d.Resource, err = askResource(ctx, kubeconfig, c.Metadata.Name); err != nil {
			d.ResourceNote = err.Error()
		}
	}
	return d
}

func describe(c *schema.Cluster, file, dir string) *Description {
	s := &c.Spec
	d := &Description{Name: c.Metadata.Name, File: file}
	d.Kubernetes = fmt.Sprintf("%s (type %s, proxy %s)", s.Kubernetes.Version, s.Kubernetes.Type, s.Kubernetes.ProxyMode)
	d.Etcd = fmt.Sprintf("%s (type %s)", s.Etcd.Version, s.Etcd.Type)
	d.ContainerRuntime = strings.TrimSpace(s.Kubernetes.ContainerRuntime.Type + " " + s.Kubernetes.ContainerRuntime.Version)
	d.Network = s.Network.Plugin
	if s.Network.Plugin == "flannel" && s.Network.Flannel != nil && s.Network.Flannel.BackendMode != "" {
		d.Network += " (" + s.Network.Flannel.BackendMode + ")"
	}
	d.Network += fmt.Sprintf(", pods %s, services %s", s.Network.KubePodsCIDR, s.Network.KubeServiceCIDR)
	d.Endpoint = endpoint(s.ControlPlaneEndpoint)
	d.State, _, _ = ReadState(dir)
	d.Runs = RecentRuns(dir, 5, d.State.Running != "")
	d.Certificates = Certs(dir)
	return d
}

// endpoint is the control-plane endpoint's URL and what serves it.
func endpoint(cpe schema.ControlPlaneEndpoint) string {
	domain := cpe.Domain
	if domain == "" {
		domain = "lb.kubexm.local"
	}
	port := cpe.Port
	if port == 0 {
		port = 6443
	}
	served := "the first master"
	switch {
	case cpe.ExternalLoadBalancer != "":
		served = cpe.ExternalLoadBalancer + " load balancer at " + cpe.LBAddress
	case cpe.InternalLoadbalancer != "":
		served = cpe.InternalLoadbalancer + " on every node that is not a master"
	}
	return fmt.Sprintf("https://%s:%d (%s)", domain, port, served)
}

// Views are the read-only verbs' views that kubexm server serves
// (api.Views), computed from the server's work directory of a cluster and
// its registered config, checked against the support matrix Support.
type Views struct{ Support *matrix.Support }

// State is get clusters' view of one work directory, with its Cluster
// resource's phase as get clusters shows it on this machine.
func (Views) State(ctx context.Context, workDir string) (any, error) {
	s, _, err := ReadState(workDir)
	if err != nil {
		return nil, err
	}
	one := []State{s}
	AskResources(ctx, one)
	return one[0], nil
}

func (v Views) parse(config []byte) (*schema.Cluster, *inventory.Inventory, error) {
	c, _, err := validate.ParseWith("cluster.yaml", config, v.Support)
	if err != nil {
		return nil, nil, err
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		return nil, nil, err
	}
	return c, inv, nil
}

// Nodes is get nodes' view.
func (v Views) Nodes(ctx context.Context, config []byte, workDir string) (any, error) {
	_, inv, err := v.parse(config)
	if err != nil {
		return nil, err
	}
	nodes, err := ListNodes(ctx, filepath.Join(workDir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	return NodeRows(inv, nodes, true), nil
}

// Describe is describe cluster's view.
func (v Views) Describe(ctx context.Context, config []byte, workDir string) (any, error) {
	c, inv, err := v.parse(config)
	if err != nil {
		return nil, err
	}
	return Describe(ctx, c, inv, "cluster.yaml", workDir, filepath.Join(workDir, "kubeconfig"), nil), nil
}
