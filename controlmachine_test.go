package kubexm_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The control machine of operator mode is a pod whose image holds the
// kubexm binary alone (roles/kubexm-controller): what a lifecycle playbook
// does there (delegate_to: localhost) is a builtin kubexm runs in its own
// process, never a shell or a program. The export (playbooks/artifact-export
// and roles/artifacts' tasks) is the CLI's alone and may run apt-get, and so
// is each file of cliOnly.
var cliOnly = map[string]string{
	"roles/kubernetes/kubeadm/tasks/ca-rotation.yaml": "playbooks/rotate-ca's alone: the controller rotates no CA (operator: certs-renew only renews the leaves)",
}

func TestNoProgramOnTheControlMachine(t *testing.T) {
	for file := range cliOnly {
		if _, err := os.Stat(file); err != nil {
			t.Errorf("cliOnly names %s: %v", file, err)
		}
	}
	programs := []string{"shell", "command", "script", "raw"}
	var bad []string
	var walk func(file string, node any, local bool)
	walk = func(file string, node any, local bool) {
		switch n := node.(type) {
		case []any:
			for _, x := range n {
				walk(file, x, local)
			}
		case map[string]any:
			here := local || n["delegate_to"] == "localhost" || n["hosts"] == "localhost" || n["connection"] == "local"
			for _, p := range programs {
				if _, ok := n[p]; ok && here {
					bad = append(bad, file+": "+p+" task "+strings.TrimSpace(toString(n["name"])))
				}
			}
			for _, k := range []string{"block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers", "plays"} {
				if sub, ok := n[k]; ok {
					walk(file, sub, here)
				}
			}
		}
	}
	for _, root := range []string{"roles", "playbooks"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			if strings.HasPrefix(p, filepath.Join("playbooks", "artifact-export")) || strings.HasPrefix(p, filepath.Join("roles", "artifacts", "tasks")) {
				return nil
			}
			if _, ok := cliOnly[filepath.ToSlash(p)]; ok {
				return nil
			}
			if root == "roles" && !strings.Contains(p, string(filepath.Separator)+"tasks"+string(filepath.Separator)) && !strings.Contains(p, string(filepath.Separator)+"handlers"+string(filepath.Separator)) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var doc any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Errorf("%s: %v", p, err)
				return nil
			}
			walk(p, doc, false)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(bad) > 0 {
		t.Errorf("a program run on the control machine fails in operator mode's pod; use a builtin (slurp, stat, file, wait_for, sync_dir, fetch, pack) or run it on a host:\n%s", strings.Join(bad, "\n"))
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
