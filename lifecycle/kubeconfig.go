package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/internal/printers"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
)

// LoadWith loads a cluster file against the support matrix of the role
// directories given (else the built-in one).
func LoadWith(file string, rolesPath []string) (*schema.Cluster, []schema.Warning, error) {
	s, err := SupportFromRolesPath(rolesPath)
	if err != nil {
		return nil, nil, err
	}
	return validate.LoadWith(file, s)
}

// ViewCluster is the cluster file with every default filled in and its
// secrets masked (config view), or, with resource, the Cluster resource for
// kubectl apply: passwords and passphrases left out, not masked; as YAML,
// or as the same document in JSON when format is json. The warnings are
// the file's, also when it is not valid.
func ViewCluster(file string, rolesPath []string, resource bool, format string) ([]byte, []schema.Warning, error) {
	c, warnings, err := LoadWith(file, rolesPath)
	if err != nil {
		return nil, warnings, err
	}
	var out []byte
	if resource {
		out, err = c.ResourceYAML()
	} else {
		out, err = schema.Marshal(c.Masked())
	}
	if err != nil || format != "json" {
		return out, warnings, err
	}
	// The JSON is the YAML converted: the same keys, the file's.
	if out, err = yaml.YAMLToJSON(out); err != nil {
		return nil, warnings, fmt.Errorf("encode json: %w", err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out, "", "  "); err != nil {
		return nil, warnings, fmt.Errorf("encode json: %w", err)
	}
	indented.WriteByte('\n')
	return indented.Bytes(), warnings, nil
}

// ValidateFile is config validate: every problem of the cluster file at
// once, as text (the warnings on errw) or, for programs, a verdict in
// format. An invalid file is an error also after its verdict, so that
// scripts need not parse it to know.
func ValidateFile(w, errw io.Writer, file string, rolesPath []string, format string) error {
	c, warnings, loadErr := LoadWith(file, rolesPath)
	if format == "text" {
		schema.WriteWarnings(errw, warnings)
		if loadErr != nil {
			return loadErr
		}
	}
	v, err := validate.NewValidation(file, c, warnings, loadErr)
	if err != nil {
		// Not a cluster file's problem (unreadable, no such file): no
		// verdict on its content to print.
		return err
	}
	if err := printers.Print(w, format, v, v.Write); err != nil || loadErr == nil {
		return err
	}
	return fmt.Errorf("%s is not valid: %d problems: %w", file, len(v.Problems), loadErr)
}

// LoadCluster reads a cluster file for the commands that read what kubexm
// keeps of it (get nodes, get runs, describe, logs): the cluster, its
// inventory (groups with ranges expanded) and its work directory (workDir,
// else the default one).
func LoadCluster(file, workDir string, rolesPath []string) (*schema.Cluster, *inventory.Inventory, string, error) {
	c, _, err := LoadWith(file, rolesPath)
	if err != nil {
		return nil, nil, "", err
	}
	inv, err := schema.Inventory(c, file)
	if err != nil {
		return nil, nil, "", err
	}
	if workDir == "" {
		workDir = DefaultWorkDir(c.Metadata.Name, file)
	}
	return c, inv, workDir, nil
}

// KubeconfigPlaybook takes the cluster's PKI from its masters into the
// work directory and writes the admin kubeconfig there, changing nothing
// on the hosts.
const KubeconfigPlaybook = "kubeconfig"

// KubeconfigRequest is a run of KubeconfigPlaybook: the cluster file,
// its work directory ("" for the default), the role directories and -e.
type KubeconfigRequest struct {
	Inventory string
	WorkDir   string
	RolesPath []string
	ExtraVars []string
}

// FetchKubeconfig runs KubeconfigPlaybook (read-only: no lock, no
// journal). Its log is written to errw only when it fails: what the user
// asked for is the kubeconfig.
func (r Runner) FetchKubeconfig(ctx context.Context, req KubeconfigRequest, errw io.Writer) error {
	var log bytes.Buffer
	_, err := r.Run(ctx, Request{Playbook: KubeconfigPlaybook, Inventory: req.Inventory, Output: "text", Forks: 50, WorkDir: req.WorkDir,
		RolesPath: req.RolesPath, ExtraVars: req.ExtraVars, ReadOnly: true, Stdout: &log, Stderr: os.Stderr})
	if err != nil {
		_, _ = io.Copy(errw, &log)
		return err
	}
	return nil
}

// AdminKubeconfig is the admin kubeconfig of the work directory dir. A
// directory without one takes it from the cluster first (FetchKubeconfig),
// unless this kubexm has no built-in playbooks to do it with.
func (r Runner) AdminKubeconfig(ctx context.Context, req KubeconfigRequest, dir string, errw io.Writer) (string, error) {
	kc := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kc); !errors.Is(err, os.ErrNotExist) || r.BuiltinFS == nil {
		return kc, nil
	}
	if err := r.FetchKubeconfig(ctx, req, errw); err != nil {
		return "", fmt.Errorf("no admin kubeconfig %s, and taking it from the cluster failed: %w", kc, err)
	}
	return kc, nil
}

// Kubeconfig takes the cluster's admin kubeconfig from the cluster
// (FetchKubeconfig) and returns it.
func (r Runner) Kubeconfig(ctx context.Context, req KubeconfigRequest, errw io.Writer) ([]byte, error) {
	if err := r.FetchKubeconfig(ctx, req, errw); err != nil {
		return nil, err
	}
	_, _, dir, err := LoadCluster(req.Inventory, req.WorkDir, req.RolesPath)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig playbook wrote no %s: %w", path, err)
	}
	return data, nil
}

// ClusterName is the cluster a command about a registered cluster names:
// cluster, or metadata.name of the cluster file (read for its name only).
func ClusterName(cluster, file string) (string, error) {
	switch {
	case cluster != "" && file != "":
		return "", errors.New("--cluster and -f both name the cluster; give one")
	case cluster != "":
		return cluster, nil
	case file != "":
		c, _, err := LoadWith(file, nil)
		if err != nil {
			return "", err
		}
		return c.Metadata.Name, nil
	}
	return "", errors.New("no cluster: pass --cluster NAME (kubexm get clusters --server URL lists them) or -f cluster.yaml")
}

// AdminKubeconfigHint says, after a run of create-cluster in req's work
// directory for cluster c, where its admin kubeconfig is and how to use
// it: the first thing a user wants next. Nothing when nothing ran (a
// check, a listing, a run --tags stopped before the kubeconfig).
func AdminKubeconfigHint(w io.Writer, req Request, c Cluster) {
	if req.Check || req.ListTasks || req.ListHosts || req.ListTags || req.Syntax || c.WorkDir == "" {
		return
	}
	// As the user named it, or the default relative one: the run's own
	// is absolute.
	dir := req.WorkDir
	if dir == "" {
		dir = DefaultWorkDir(c.Name, req.Inventory)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		return
	}
	abs, err := filepath.Abs(kc)
	if err != nil {
		abs = kc
	}
	fmt.Fprintf(w, "\nThe cluster's admin kubeconfig is %s:\n  kubectl --kubeconfig %s get nodes\n  export KUBECONFIG=%s\n  kubexm get nodes -f %s\n",
		kc, kc, abs, req.Inventory)
}
