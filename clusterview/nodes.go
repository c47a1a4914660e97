package clusterview

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mensylisir/kubexm/inventory"
)

// apiTimeout bounds one question to the API server: the views report an
// API that does not answer instead of waiting on it.
const apiTimeout = 15 * time.Second

// restConfig is the configuration of a kubeconfig file's current context,
// each question bounded by apiTimeout.
func restConfig(kubeconfig string) (*rest.Config, error) {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("no admin kubeconfig: %w (kubexm get kubeconfig -f cluster.yaml takes it from the cluster; create cluster writes it too; --workdir if it is elsewhere)", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	cfg.Timeout = apiTimeout
	return cfg, nil
}

// Client is a client of the API server of a kubeconfig file (its current
// context), and the server's URL for messages.
func Client(kubeconfig string) (kubernetes.Interface, string, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", kubeconfig, err)
	}
	return cs, cfg.Host, nil
}

// ListNodes asks the API server of the admin kubeconfig for its nodes:
// no kubectl needed.
func ListNodes(ctx context.Context, kubeconfig string) ([]corev1.Node, error) {
	cs, server, err := Client(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("the API server %s (from %s): %w", server, kubeconfig, err)
	}
	return list.Items, nil
}

// NodeRow is one line of get nodes: a host of cluster.yaml, a Node of the
// API, or both.
type NodeRow struct {
	Name       string   `json:"name"`
	Address    string   `json:"address"`
	Roles      []string `json:"roles"`
	InFile     bool     `json:"in_cluster_file"`
	Status     string   `json:"status"`
	Age        string   `json:"age"`
	Kubelet    string   `json:"kubelet_version"`
	IsK8sNode  bool     `json:"kubernetes_node"`
	APIPresent bool     `json:"in_api"`
}

// ready is a Node's STATUS as kubectl shows it.
func ready(n *corev1.Node) string {
	st := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			st = map[corev1.ConditionStatus]string{corev1.ConditionTrue: "Ready", corev1.ConditionFalse: "NotReady"}[c.Status]
			if st == "" {
				st = "Unknown"
			}
		}
	}
	if n.Spec.Unschedulable {
		st += ",SchedulingDisabled"
	}
	return st
}

// hostRoles lists the role groups of cluster.yaml a host is in.
func hostRoles(inv *inventory.Inventory, host string) []string {
	var roles []string
	for _, g := range []string{"master", "worker", "etcd", "registry", "loadbalancer"} {
		if slices.Contains(inv.Groups[g], host) {
			roles = append(roles, g)
		}
	}
	return roles
}

// NodeRows joins the hosts of the file with the Nodes of the API; without
// an answer from the API (asked false) every status is Unknown.
func NodeRows(inv *inventory.Inventory, nodes []corev1.Node, asked bool) []NodeRow {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	var rows []NodeRow
	for _, h := range inv.Hosts {
		r := NodeRow{Name: h.Name, Address: h.Address, Roles: hostRoles(inv, h.Name), InFile: true, Status: "-", Age: "-", Kubelet: "-"}
		if ia, ok := h.Vars["internal_address"].(string); ok && ia != "" {
			r.Address = strings.Split(ia, ",")[0]
		}
		r.IsK8sNode = slices.Contains(inv.Groups["k8s_cluster"], h.Name)
		if n, ok := byName[h.Name]; ok {
			r.APIPresent, r.Status, r.Age, r.Kubelet = true, ready(n), Age(n.CreationTimestamp.Time), n.Status.NodeInfo.KubeletVersion
			delete(byName, h.Name)
		} else if r.IsK8sNode {
			r.Status = "NotJoined"
			if !asked {
				r.Status = "Unknown"
			}
		}
		rows = append(rows, r)
	}
	for i := range nodes {
		n := &nodes[i]
		if _, left := byName[n.Name]; !left {
			continue
		}
		r := NodeRow{Name: n.Name, Roles: []string{}, Status: ready(n), Age: Age(n.CreationTimestamp.Time), Kubelet: n.Status.NodeInfo.KubeletVersion, APIPresent: true, IsK8sNode: true}
		for _, ad := range n.Status.Addresses {
			if ad.Type == corev1.NodeInternalIP {
				r.Address = ad.Address
				break
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// Age is how long ago t was, as kubectl shows it (45s, 12m, 30h, 5d); "-"
// for no time.
func Age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
