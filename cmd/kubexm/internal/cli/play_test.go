package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

// fakeStep records its calls; the engine runs hosts in parallel.
type fakeStep struct {
	mu    *sync.Mutex
	calls *[]string
}

func newFakeStep(calls *[]string) fakeStep { return fakeStep{mu: new(sync.Mutex), calls: calls} }

func (fakeStep) Spec() step.Spec {
	return step.Spec{Name: "fake", FreeForm: "msg", Args: []step.Arg{{Name: "msg", Type: step.String}, {Name: "fail", Type: step.Bool, Default: false}}}
}

func (f fakeStep) Run(_ context.Context, env *step.Env, a step.Args) (step.Result, error) {
	f.mu.Lock()
	*f.calls = append(*f.calls, env.Host+":"+a.String("msg"))
	f.mu.Unlock()
	return step.Result{Failed: a.Bool("fail"), Msg: a.String("msg")}, nil
}

func testApp(calls *[]string) *app {
	return newApp(lifecycle.Runner{
		LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
			path := f.Path
			if path != "cluster.yaml" {
				return nil, errors.New("no such inventory " + path)
			}
			return &inventory.Inventory{Hosts: []inventory.Host{{Name: "n1", Local: true}}, Groups: map[string][]string{"nodes": {"n1"}},
				Vars: map[string]any{"cluster_name": "demo"}}, nil
		},
		Builtins: map[string]step.Builtin{"fake": newFakeStep(calls)},
		BuiltinFS: fstest.MapFS{
			"playbooks/demo/playbook.yaml":  {Data: []byte("name: demo\nversion: 0.1.0\nrequires: {kubexm: \">=0.1.0\"}\nplays:\n  - name: p\n    hosts: nodes\n    roles: [r]\n    tasks:\n      - name: t\n        fake: {msg: \"{{ .inventory_hostname }} {{ .x }}\", fail: \"{{ .bad }}\"}\n        tags: [x]\n")},
			"roles/r/tasks/main.yaml":       {Data: []byte("- name: in role\n  fake: role\n")},
			"playbooks/local/playbook.yaml": {Data: []byte("- hosts: localhost\n  tasks:\n    - fake: here\n")},
		},
	})
}

func runCmd(t *testing.T, a *app, args ...string) (string, error) {
	t.Helper()
	cmd := newPlayCmd(a)
	if args[0] == "playbook" {
		cmd = &cobra.Command{Use: "kubexm"}
		addGroupCmds(cmd, a)
	}
	var out bytes.Buffer
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestPlayCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	var calls []string
	a := testApp(&calls)

	out, err := runCmd(t, a, "demo", "--syntax-check")
	if err != nil || !strings.Contains(out, "syntax OK") {
		t.Fatalf("syntax-check: %v %s", err, out)
	}
	out, err = runCmd(t, a, "demo", "--list-tasks", "--tags", "x")
	if err != nil || !strings.Contains(out, "t\tTAGS: [x]") || strings.Contains(out, "in role") {
		t.Fatalf("list-tasks: %v %s", err, out)
	}
	out, err = runCmd(t, a, "demo", "-i", "cluster.yaml", "--list-hosts")
	if err != nil || !strings.Contains(out, "n1") {
		t.Fatalf("list-hosts: %v %s", err, out)
	}
	if _, err := runCmd(t, a, "demo", "--list-hosts"); err == nil || !strings.Contains(err.Error(), "-i cluster.yaml") {
		t.Fatalf("list-hosts without inventory: %v", err)
	}

	out, err = runCmd(t, a, "demo", "-i", "cluster.yaml", "-e", "x=1", "-e", "bad=false", "-o", "json")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if strings.Join(calls, ",") != "n1:role,n1:n1 1" {
		t.Errorf("calls = %v", calls)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"kind":"recap"`) {
		t.Errorf("last line is not the recap: %s", lines[len(lines)-1])
	}
	if _, err := os.Stat(filepath.Join(".kubexm", "demo", "runs")); err != nil {
		t.Errorf("no journal under .kubexm/demo: %v", err)
	}

	// A failure exits 2 and can be resumed.
	calls = nil
	out, err = runCmd(t, a, "demo", "-i", "cluster.yaml", "-e", "x=2", "-e", "bad=true")
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("failed run: err %v, want exit code 2\n%s", err, out)
	}
	if !strings.Contains(out, "RECAP") || !strings.Contains(out, "--resume") {
		t.Errorf("text output lacks the recap: %s", out)
	}
	calls = nil
	if out, err = runCmd(t, a, "demo", "-i", "cluster.yaml", "-e", "x=3", "-e", "bad=false", "--resume"); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if strings.Join(calls, ",") != "n1:n1 3" {
		t.Errorf("resume redid finished tasks: %v", calls)
	}
	if _, err := runCmd(t, a, "demo", "-i", "cluster.yaml", "-o", "yaml"); err == nil {
		t.Error("-o yaml accepted")
	}

	// A playbook for the control machine alone needs no cluster file.
	calls = nil
	if out, err := runCmd(t, a, "local"); err != nil || strings.Join(calls, ",") != "localhost:here" {
		t.Errorf("localhost playbook without -i: %v %v\n%s", err, calls, out)
	}
}

func TestPlaybookExport(t *testing.T) {
	dir := t.TempDir()
	var calls []string
	a := testApp(&calls)
	out, err := runCmd(t, a, "playbook", "export", dir)
	if err != nil || !strings.Contains(out, "wrote 3 files") {
		t.Fatalf("export: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "roles/r/tasks/main.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, a, "playbook", "export", dir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second export: %v", err)
	}
	if _, err := runCmd(t, a, "playbook", "export", dir, "--force"); err != nil {
		t.Errorf("export --force: %v", err)
	}
	// The exported fork runs from disk, finding its roles beside playbooks/.
	if err := os.WriteFile(filepath.Join(dir, "roles/r/tasks/main.yaml"), []byte("- fake: forked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if _, err := runCmd(t, a, filepath.Join(dir, "playbooks/demo"), "-i", "cluster.yaml", "-e", "x=1", "-e", "bad=false"); err != nil {
		t.Fatal(err)
	}
	if calls[0] != "n1:forked" {
		t.Errorf("fork did not use its own role: %v", calls)
	}
	out, err = runCmd(t, a, "playbook", "list")
	if err != nil || strings.TrimSpace(out) != "demo\nlocal" {
		t.Errorf("list: %v %q", err, out)
	}
}

// Every built-in playbook loads with the real builtins and lists its tasks.
func TestBuiltinPlaybooksSyntax(t *testing.T) {
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	a := newApp(lifecycle.Runner{Builtins: reg, BuiltinFS: kubexm.Content()})
	ents, err := fs.ReadDir(kubexm.Content(), "playbooks")
	if err != nil || len(ents) == 0 {
		t.Fatalf("no built-in playbooks: %v", err)
	}
	for _, e := range ents {
		for _, flag := range []string{"--syntax-check", "--list-tasks"} {
			if out, err := runCmd(t, a, e.Name(), flag); err != nil {
				t.Errorf("kubexm play %s %s: %v\n%s", e.Name(), flag, err, out)
			}
		}
	}
}
