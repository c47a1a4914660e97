package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
)

// clusterDescription is describe cluster's view: the file's choices, the
// work directory's state, the certificates kept there and, when the API
// answers, the nodes.
type clusterDescription struct {
	Name             string       `json:"name"`
	File             string       `json:"file"`
	Kubernetes       string       `json:"kubernetes"`
	Etcd             string       `json:"etcd"`
	ContainerRuntime string       `json:"container_runtime"`
	Network          string       `json:"network"`
	Endpoint         string       `json:"control_plane_endpoint"`
	Hosts            []nodeRow    `json:"hosts"`
	State            clusterState `json:"work_dir_state"`
	Certificates     []certState  `json:"certificates"`
	API              string       `json:"api"` // how the API server answered
	Runs             []runState   `json:"recent_runs"`
}

func newDescribeClusterCmd(a *app) *cobra.Command {
	var f clusterFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "cluster -f cluster.yaml",
		Short: "A cluster's versions, hosts, endpoint, work directory, certificates and nodes",
		Long: `Describe a cluster: the versions and types cluster.yaml chooses (with the
defaults filled in), its hosts and their roles, the control-plane endpoint,
the work directory's state (last runs, a run holding it now), the expiry of
every certificate kept in the work directory, and the nodes as the API
server reports them (asked with the work directory's admin kubeconfig; a
work directory without one takes it from the cluster first, as kubexm get
kubeconfig does, changing nothing there; an API that does not answer is
reported, not an error).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var d *clusterDescription
			if remote.server != "" {
				var err error
				if d, err = describeRemote(cmd, f, remote); err != nil {
					return err
				}
			} else {
				c, inv, dir, err := loadCluster(f)
				if err != nil {
					return err
				}
				kc, err := a.adminKubeconfig(cmd.Context(), cmd.ErrOrStderr(), f, dir)
				d = describeWithNodes(cmd.Context(), c, inv, f.file, dir, kc, err)
			}
			if f.output != "text" {
				return writeStructured(cmd.OutOrStdout(), f.output, d)
			}
			return writeDescription(cmd.OutOrStdout(), d)
		},
	}
	addClusterFlags(cmd, &f)
	addRemoteReadFlags(cmd, &f, &remote)
	return cmd
}

// describeWithNodes is describe cluster's view: describeCluster and the
// nodes the API server reports, asked with kubeconfig (an API that does not
// answer, or no kubeconfig, kcErr, is reported, not an error).
func describeWithNodes(ctx context.Context, c *schema.Cluster, inv *inventory.Inventory, file, dir, kubeconfig string, kcErr error) *clusterDescription {
	d := describeCluster(c, inv, file, dir)
	nodes, err := []apiNode(nil), kcErr
	if err == nil {
		nodes, err = listNodes(ctx, kubeconfig)
	}
	if err != nil {
		d.API = "no answer: " + err.Error()
	} else {
		d.API = fmt.Sprintf("answered: %d nodes", len(nodes))
	}
	d.Hosts = nodeRows(inv, nodes, err == nil)
	return d
}

func describeCluster(c *schema.Cluster, inv *inventory.Inventory, file, dir string) *clusterDescription {
	s := &c.Spec
	d := &clusterDescription{Name: c.Metadata.Name, File: file}
	d.Kubernetes = fmt.Sprintf("%s (type %s, proxy %s)", s.Kubernetes.Version, s.Kubernetes.Type, s.Kubernetes.ProxyMode)
	d.Etcd = fmt.Sprintf("%s (type %s)", s.Etcd.Version, s.Etcd.Type)
	d.ContainerRuntime = strings.TrimSpace(s.Kubernetes.ContainerRuntime.Type + " " + s.Kubernetes.ContainerRuntime.Version)
	d.Network = s.Network.Plugin
	if s.Network.Plugin == "flannel" && s.Network.Flannel != nil && s.Network.Flannel.BackendMode != "" {
		d.Network += " (" + s.Network.Flannel.BackendMode + ")"
	}
	d.Network += fmt.Sprintf(", pods %s, services %s", s.Network.KubePodsCIDR, s.Network.KubeServiceCIDR)
	cpe := s.ControlPlaneEndpoint
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
	d.Endpoint = fmt.Sprintf("https://%s:%d (%s)", domain, port, served)
	d.State, _, _ = readClusterState(dir)
	// The newest five runs, newest first.
	runs, _ := engine.Runs(dir)
	for i := len(runs) - 1; i >= 0 && len(d.Runs) < 5; i-- {
		d.Runs = append(d.Runs, toRunState(runs[i], i == len(runs)-1 && d.State.Running != ""))
	}
	d.Certificates = workDirCerts(dir)
	return d
}

// workDirCerts lists every certificate under the work directory's certs/
// with its expiry, soonest first.
func workDirCerts(dir string) []certState {
	root := filepath.Join(dir, "certs")
	var out []certState
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".crt") {
			return nil
		}
		c, err := readCert(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, certState{File: rel, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, DaysLeft: daysLeft(c.NotAfter)})
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].NotAfter.Before(out[j].NotAfter) })
	return out
}

func writeDescription(w io.Writer, d *clusterDescription) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", d.Name)
	fmt.Fprintf(tw, "File:\t%s\n", d.File)
	fmt.Fprintf(tw, "Kubernetes:\t%s\n", d.Kubernetes)
	fmt.Fprintf(tw, "etcd:\t%s\n", d.Etcd)
	fmt.Fprintf(tw, "Container runtime:\t%s\n", d.ContainerRuntime)
	fmt.Fprintf(tw, "Network:\t%s\n", d.Network)
	fmt.Fprintf(tw, "Control plane:\t%s\n", d.Endpoint)
	fmt.Fprintf(tw, "API server:\t%s\n", d.API)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Hosts:")
	var hosts bytes.Buffer
	if err := writeNodes(&hosts, "text", d.Hosts); err != nil {
		return err
	}
	writeIndented(w, hosts.String())
	st := d.State
	fmt.Fprintf(w, "Work directory: %s\n", st.WorkDir)
	kc := "none yet"
	if st.Kubeconfig {
		kc = filepath.Join(st.WorkDir, "kubeconfig")
	}
	fmt.Fprintf(w, "  admin kubeconfig: %s\n", kc)
	if st.Running != "" {
		fmt.Fprintf(w, "  in use by: %s\n", st.Running)
	}
	fmt.Fprintf(w, "  runs: %d\n", st.Runs)
	for _, r := range d.Runs {
		fmt.Fprintf(w, "    %s  %-16s %-12s %s ago\n", r.ID, r.Playbook, r.Outcome, age(r.Start))
	}
	if len(d.Certificates) == 0 {
		fmt.Fprintln(w, "Certificates: none in the work directory")
		return nil
	}
	fmt.Fprintln(w, "Certificates (work directory, soonest expiry first):")
	var certs bytes.Buffer
	tw = tabwriter.NewWriter(&certs, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSUBJECT\tEXPIRES\tLEFT\t")
	for _, c := range d.Certificates {
		mark := ""
		if c.DaysLeft < 90 {
			mark = "  renew soon: kubexm certs renew -f " + d.File
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%dd\t%s\n", c.File, c.Subject, c.NotAfter.UTC().Format("2006-01-02"), c.DaysLeft, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeIndented(w, certs.String())
	return nil
}

func writeIndented(w io.Writer, text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
