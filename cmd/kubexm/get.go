package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema"
)

// `kubexm get clusters`, `get nodes` and `describe cluster` read what
// kubexm keeps on this machine (the work directories of seeds/003:
// .kubexm/<cluster>/ with runs/, certs/ and the admin kubeconfig) and ask
// the API server with that kubeconfig; they change nothing.

// clusterState is what a work directory says about its cluster.
type clusterState struct {
	Name       string     `json:"name"`
	WorkDir    string     `json:"work_dir"`
	Kubeconfig bool       `json:"kubeconfig"`
	Runs       int        `json:"runs"`
	Last       *runState  `json:"last_run,omitempty"`
	Running    string     `json:"running,omitempty"` // who holds the lock
	CA         *certState `json:"ca,omitempty"`
}

type runState struct {
	ID       string    `json:"id"`
	Playbook string    `json:"playbook"`
	Start    time.Time `json:"start"`
	Outcome  string    `json:"outcome"` // ok, failed, cancelled, or interrupted (no end record)
}

type certState struct {
	File     string    `json:"file"`
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"not_after"`
	DaysLeft int       `json:"days_left"`
}

// toRunState turns a journal's summary into what get and describe show; a
// journal without an end is of the run going on (running), else of a run
// that was killed (interrupted).
func toRunState(r engine.RunInfo, running bool) runState {
	out := runState{ID: r.ID, Playbook: r.Playbook, Start: r.Start, Outcome: r.Outcome}
	if out.Outcome == "" {
		out.Outcome = "interrupted"
		if running {
			out.Outcome = "running"
		}
	}
	return out
}

// readClusterState reads a work directory; ok is false for a directory
// that holds nothing kubexm writes.
func readClusterState(dir string) (clusterState, bool, error) {
	s := clusterState{Name: filepath.Base(dir), WorkDir: dir}
	_, err := os.Stat(filepath.Join(dir, "kubeconfig"))
	s.Kubeconfig = err == nil
	runs, err := engine.Runs(dir)
	if err != nil {
		return s, false, err
	}
	s.Runs = len(runs)
	s.Running = lifecycle.LockHolder(dir)
	if n := len(runs); n > 0 {
		last := toRunState(runs[n-1], s.Running != "")
		s.Last = &last
	}
	for _, ca := range []string{"certs/kubernetes/ca.crt", "certs/etcd/ca.crt"} {
		if c, err := readCert(filepath.Join(dir, ca)); err == nil {
			s.CA = &certState{File: ca, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, DaysLeft: daysLeft(c.NotAfter)}
			break
		}
	}
	_, certsErr := os.Stat(filepath.Join(dir, "certs"))
	return s, s.Kubeconfig || s.Runs > 0 || certsErr == nil, nil
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return pki.ParseCert(data)
}

func daysLeft(t time.Time) int { return int(time.Until(t).Hours() / 24) }

func age(t time.Time) string {
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

func newGetClustersCmd() *cobra.Command {
	var dir, format string
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the clusters whose work directories are under .kubexm",
		Long: `List the clusters kubexm has worked on from this directory: every work
directory under .kubexm (or --dir), with its last run (playbook, outcome,
age), whether a run holds it now, whether it has an admin kubeconfig, and
when its CA expires. Versions and nodes are in cluster.yaml and the cluster:
kubexm describe cluster -f cluster.yaml and kubexm get nodes -f cluster.yaml.`,
		Args: cobra.NoArgs,
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
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var out []clusterState
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		s, ok, err := readClusterState(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if ok {
			out = append(out, s)
		}
	}
	return writeClusters(w, format, out, fmt.Sprintf("no clusters under %s (kubexm create cluster -f cluster.yaml makes .kubexm/<name>)", dir))
}

// writeClusters prints get clusters' table (or JSON lines); none is the
// line for no cluster at all.
func writeClusters(w io.Writer, format string, out []clusterState, none string) error {
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
			last, status, when = s.Last.Playbook, s.Last.Outcome, age(s.Last.Start)
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
	var err error
	if f.file, err = clusterFile(f.file); err != nil {
		return nil, nil, "", err
	}
	c, _, err := loadWith(f.file, f.rolesPath)
	if err != nil {
		return nil, nil, "", err
	}
	inv, err := schema.Inventory(c, f.file)
	if err != nil {
		return nil, nil, "", err
	}
	dir := f.workDir
	if dir == "" {
		dir = lifecycle.DefaultWorkDir(c.Metadata.Name, f.file)
	}
	return c, inv, dir, nil
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

// apiNode is the part of a Node object get nodes shows.
type apiNode struct {
	Metadata struct {
		Name              string            `json:"name"`
		CreationTimestamp time.Time         `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool `json:"unschedulable"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
		NodeInfo struct {
			KubeletVersion string `json:"kubeletVersion"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

func (n apiNode) ready() string {
	st := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			st = map[string]string{"True": "Ready", "False": "NotReady"}[c.Status]
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

// listNodes asks the API server of the admin kubeconfig for its nodes,
// with the kubeconfig's CA and client certificate: no kubectl needed.
func listNodes(ctx context.Context, kubeconfig string) ([]apiNode, error) {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("no admin kubeconfig: %w (kubexm get kubeconfig -f cluster.yaml takes it from the cluster; create cluster writes it too; --workdir if it is elsewhere)", err)
	}
	kc, err := pki.ParseKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	server, client, err := kubeClient(kc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(server, "/")+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the API server %s (from %s): %w", server, kubeconfig, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("the API server %s: %w", server, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the API server %s answered %s: %s", server, resp.Status, strings.TrimSpace(string(body)))
	}
	var list struct {
		Items []apiNode `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the API server %s: node list: %w", server, err)
	}
	return list.Items, nil
}

// kubeClient builds an HTTPS client from the current context of kc.
func kubeClient(kc *pki.KubeConfig) (string, *http.Client, error) {
	ctxName := kc.CurrentContext
	if ctxName == "" && len(kc.Contexts) == 1 {
		ctxName = kc.Contexts[0].Name
	}
	var cluster *pki.Cluster
	var user *pki.User
	for _, c := range kc.Contexts {
		if c.Name != ctxName {
			continue
		}
		for i := range kc.Clusters {
			if kc.Clusters[i].Name == c.Context.Cluster {
				cluster = &kc.Clusters[i].Cluster
			}
		}
		for i := range kc.Users {
			if kc.Users[i].Name == c.Context.User {
				user = &kc.Users[i].User
			}
		}
	}
	if cluster == nil || user == nil {
		return "", nil, fmt.Errorf("context %q names no cluster or user of the file", ctxName)
	}
	ca, err := base64.StdEncoding.DecodeString(cluster.CertificateAuthorityData)
	if err != nil {
		return "", nil, fmt.Errorf("certificate-authority-data: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", nil, errors.New("certificate-authority-data holds no PEM certificate")
	}
	cert, err := base64.StdEncoding.DecodeString(user.ClientCertificateData)
	if err != nil {
		return "", nil, fmt.Errorf("client-certificate-data: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(user.ClientKeyData)
	if err != nil {
		return "", nil, fmt.Errorf("client-key-data: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return "", nil, fmt.Errorf("client certificate: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	return cluster.Server, &http.Client{Transport: tr}, nil
}

// nodeRow is one line of get nodes: a host of cluster.yaml, a Node of the
// API, or both.
type nodeRow struct {
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

func newGetNodesCmd(a *app) *cobra.Command {
	var f clusterFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "nodes -f cluster.yaml",
		Short: "The hosts of cluster.yaml and the cluster's nodes, side by side",
		Long: `List every host of cluster.yaml with its roles, and what the API server says
of it (status, age, kubelet version), asked with the admin kubeconfig of the
work directory (no kubectl needed; a work directory without one takes it from
the cluster first, as kubexm get kubeconfig does, changing nothing there). A Kubernetes host without a Node object
shows NotJoined (add nodes -f brings it in); a Node that cluster.yaml does
not name shows "not in cluster file".`,
		Args: cobra.NoArgs,
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
			nodes, err := listNodes(cmd.Context(), kc)
			if err != nil {
				return err
			}
			return writeNodes(cmd.OutOrStdout(), f.output, nodeRows(inv, nodes, true))
		},
	}
	addClusterFlags(cmd, &f)
	addRemoteReadFlags(cmd, &f, &remote)
	return cmd
}

// adminKubeconfig is the work directory's admin kubeconfig. A directory
// with only cluster.yaml takes it from the cluster first
// (playbooks/kubeconfig, read-only, no lock), as get kubeconfig does.
func (a *app) adminKubeconfig(ctx context.Context, errw io.Writer, f clusterFlags, dir string) (string, error) {
	kc := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kc); !errors.Is(err, os.ErrNotExist) || a == nil || a.builtinFS == nil {
		return kc, nil
	}
	file, err := clusterFile(f.file)
	if err != nil {
		return "", err
	}
	if err := a.fetchKubeconfig(ctx, errw, kubeconfigFlags{file: file, workDir: f.workDir, rolesPath: f.rolesPath}); err != nil {
		return "", fmt.Errorf("no admin kubeconfig %s, and taking it from the cluster failed: %w", kc, err)
	}
	return kc, nil
}

// nodeRows joins the hosts of the file with the Nodes of the API; without
// an answer from the API (asked false) every status is Unknown.
func nodeRows(inv *inventory.Inventory, nodes []apiNode, asked bool) []nodeRow {
	byName := map[string]apiNode{}
	for _, n := range nodes {
		byName[n.Metadata.Name] = n
	}
	var rows []nodeRow
	for _, h := range inv.Hosts {
		r := nodeRow{Name: h.Name, Address: h.Address, Roles: hostRoles(inv, h.Name), InFile: true, Status: "-", Age: "-", Kubelet: "-"}
		if ia, ok := h.Vars["internal_address"].(string); ok && ia != "" {
			r.Address = strings.Split(ia, ",")[0]
		}
		r.IsK8sNode = slices.Contains(inv.Groups["k8s_cluster"], h.Name)
		if n, ok := byName[h.Name]; ok {
			r.APIPresent, r.Status, r.Age, r.Kubelet = true, n.ready(), age(n.Metadata.CreationTimestamp), n.Status.NodeInfo.KubeletVersion
			delete(byName, h.Name)
		} else if r.IsK8sNode {
			r.Status = "NotJoined"
			if !asked {
				r.Status = "Unknown"
			}
		}
		rows = append(rows, r)
	}
	for _, n := range nodes {
		if _, left := byName[n.Metadata.Name]; !left {
			continue
		}
		r := nodeRow{Name: n.Metadata.Name, Roles: []string{}, Status: n.ready(), Age: age(n.Metadata.CreationTimestamp), Kubelet: n.Status.NodeInfo.KubeletVersion, APIPresent: true, IsK8sNode: true}
		for _, ad := range n.Status.Addresses {
			if ad.Type == "InternalIP" {
				r.Address = ad.Address
				break
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func writeNodes(w io.Writer, format string, rows []nodeRow) error {
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
