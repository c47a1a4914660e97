package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

// A cluster file the schema accepts: the verbs that ask before a run,
// upgrade cluster, get nodes and describe cluster read it themselves.
const verbClusterYAML = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: demo}
spec:
  hosts:
  - {name: n1, address: localhost, internalAddress: 192.0.2.2}
  - {name: n2, address: 192.0.2.3, password: pw}
  roleGroups: {etcd: [n1], master: [n1], worker: [n2]}
  kubernetes: {version: v1.37.2}
`

// The fake playbooks say which playbook ran and the variables the verbs set.
const verbVars = `nodes={{ .nodes | default "-" }} force={{ .force | default "-" }} serial={{ .upgrade_serial | default "-" }} backup={{ .backup_file | default "-" }} keep={{ .backup_keep | default "-" }} key={{ .backup_key_file | default "-" }} pkgs={{ .delete_packages | default "-" }}`

func verbApp(calls *[]string) *app {
	a := testApp(calls)
	fsys := fstest.MapFS{}
	for _, pb := range []string{"create-cluster", "delete", "add-nodes", "delete-nodes", "upgrade", "backup", "restore", "certs-renew", "rotate-ca", "rollback"} {
		fsys["playbooks/"+pb+"/playbook.yaml"] = &fstest.MapFile{Data: []byte(fmt.Sprintf(`name: %s
version: 0.1.0
requires: {kubexm: ">=0.1.0"}
plays:
  - name: p
    hosts: nodes
    tasks:
      - name: preflight
        fake: {msg: preflight}
        tags: [preflight]
      - name: t
        fake: {msg: '%s %s'}
`, pb, pb, verbVars))}
	}
	a.BuiltinFS = fsys
	return a
}

// verbRoot is the command tree of main with the test app.
func verbRoot(a *app) *cobra.Command {
	root := &cobra.Command{Use: "kubexm", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(newLogsCmd())
	addGroupCmds(root, a)
	return root
}

func runVerb(t *testing.T, a *app, stdin string, args ...string) (string, error) {
	t.Helper()
	root := verbRoot(a)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

func verbDir(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	if err := os.WriteFile("cluster.yaml", []byte(verbClusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Each verb runs its playbook with the variables its flags stand for.
func TestVerbsRunTheirPlaybooks(t *testing.T) {
	verbDir(t)
	abs, _ := filepath.Abs("b.tar.gz")
	for _, c := range []struct {
		args []string
		want string // the last call
	}{
		{[]string{"create", "cluster", "-f", "cluster.yaml"}, "n1:create-cluster nodes=- force=- serial=- backup=- keep=- key=- pkgs=-"},
		{[]string{"delete", "cluster", "-f", "cluster.yaml", "--yes", "--delete-packages"}, "n1:delete nodes=- force=- serial=- backup=- keep=- key=- pkgs=true"},
		{[]string{"add", "nodes", "-f", "cluster.yaml", "--nodes", "n1"}, "n1:add-nodes nodes=- force=- serial=- backup=- keep=- key=- pkgs=-"},
		{[]string{"delete", "nodes", "-f", "cluster.yaml", "--nodes", "n4,n5", "--force", "-y"}, "n1:delete-nodes nodes=n4,n5 force=true serial=- backup=- keep=- key=- pkgs=-"},
		{[]string{"upgrade", "cluster", "-f", "cluster.yaml", "--to-version", "1.37.2", "--node-concurrency", "3"}, "n1:upgrade nodes=- force=- serial=3 backup=- keep=- key=- pkgs=-"},
		{[]string{"backup", "cluster", "-f", "cluster.yaml", "--keep", "7", "--key-file", "k"}, "n1:backup nodes=- force=- serial=- backup=- keep=7 key=k pkgs=-"},
		{[]string{"restore", "cluster", "-f", "cluster.yaml", "--backup", "b.tar.gz", "--yes"}, "n1:restore nodes=- force=- serial=- backup=" + abs + " keep=- key=- pkgs=-"},
		{[]string{"certs", "renew", "all", "-f", "cluster.yaml"}, "n1:certs-renew nodes=- force=- serial=- backup=- keep=- key=- pkgs=-"},
		{[]string{"certs", "renew", "ca", "-f", "cluster.yaml", "--yes"}, "n1:rotate-ca nodes=- force=- serial=- backup=- keep=- key=- pkgs=-"},
		{[]string{"rollback", "cluster", "-f", "cluster.yaml"}, "n1:rollback nodes=- force=- serial=- backup=- keep=- key=- pkgs=-"},
	} {
		var calls []string
		a := verbApp(&calls)
		out, err := runVerb(t, a, "", c.args...)
		if err != nil {
			t.Errorf("%v: %v\n%s", c.args, err, out)
			continue
		}
		if len(calls) != 2 || calls[0] != "n1:preflight" || calls[1] != c.want {
			t.Errorf("%v: calls %q, want [n1:preflight %s]", c.args, calls, c.want)
		}
	}
}

func TestVerbFlags(t *testing.T) {
	verbDir(t)
	var calls []string
	a := verbApp(&calls)

	// --skip-preflight is --skip-tags preflight.
	if out, err := runVerb(t, a, "", "create", "cluster", "-f", "cluster.yaml", "--skip-preflight"); err != nil || len(calls) != 1 || !strings.HasPrefix(calls[0], "n1:create-cluster") {
		t.Errorf("--skip-preflight: %v %q\n%s", err, calls, out)
	}
	// -o json: one JSON object per line, the recap last.
	calls = nil
	out, err := runVerb(t, a, "", "create", "cluster", "-f", "cluster.yaml", "-o", "json")
	if err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("not a JSON line: %q", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"kind":"recap"`) {
		t.Errorf("last line: %s", lines[len(lines)-1])
	}
	// --check runs the playbook as a check: no journal is written.
	calls = nil
	if _, err := runVerb(t, a, "", "create", "cluster", "-f", "cluster.yaml", "--dry-run"); err != nil || len(calls) != 2 {
		t.Errorf("--dry-run: %v %q", err, calls)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"delete", "nodes", "-f", "cluster.yaml", "-y"}, "--nodes is required"},
		{[]string{"delete", "nodes", "-f", "cluster.yaml", "-y", "--nodes", "n3", "-e", "nodes=n4"}, "--nodes and -e nodes both set nodes"},
		{[]string{"add", "nodes", "-f", "cluster.yaml", "--nodes", "n1", "--limit", "n1"}, "--nodes and --limit"},
		{[]string{"upgrade", "cluster", "-f", "cluster.yaml"}, "--to-version is required"},
		{[]string{"upgrade", "cluster", "-f", "cluster.yaml", "--to-version", "v1.38.0"}, "--to-version v1.38.0, but spec.kubernetes.version of cluster.yaml is v1.37.2"},
		{[]string{"restore", "cluster", "-f", "cluster.yaml", "-y"}, "--backup is required"},
		{[]string{"backup", "cluster", "-f", "missing.yaml"}, "missing.yaml"},
	} {
		calls = nil
		_, err := runVerb(t, a, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
		if len(calls) != 0 {
			t.Errorf("%v: ran %q after refusing", c.args, calls)
		}
	}
}

// delete cluster, delete nodes and restore cluster ask first, naming the
// cluster the run loaded; only "yes" (or --yes, or --check) goes on.
func TestVerbConfirmation(t *testing.T) {
	verbDir(t)
	var calls []string
	a := verbApp(&calls)
	for _, args := range [][]string{
		{"delete", "cluster", "-f", "cluster.yaml"},
		{"delete", "nodes", "-f", "cluster.yaml", "--nodes", "n2"},
		{"restore", "cluster", "-f", "cluster.yaml", "--backup", "b.tar.gz"},
	} {
		calls = nil
		out, err := runVerb(t, a, "", args...)
		if err == nil || !strings.Contains(err.Error(), "pass --yes") || len(calls) != 0 {
			t.Errorf("%v without an answer: err %v, calls %q", args, err, calls)
		}
		// The question names the run's own inventory (testApp's: n1 only).
		if !strings.Contains(out, "cluster demo (hosts n1)") {
			t.Errorf("%v: the question does not name the cluster:\n%s", args, out)
		}
		if _, err := runVerb(t, a, "no\n", args...); err == nil || !strings.Contains(err.Error(), `answered "no"`) || len(calls) != 0 {
			t.Errorf("%v answered no: err %v, calls %q", args, err, calls)
		}
		if out, err := runVerb(t, a, "yes\n", args...); err != nil || len(calls) != 2 {
			t.Errorf("%v answered yes: err %v, calls %q\n%s", args, err, calls, out)
		}
		calls = nil
		if out, err := runVerb(t, a, "", append(args, "--check")...); err != nil || len(calls) != 2 {
			t.Errorf("%v --check asked: err %v, calls %q\n%s", args, err, calls, out)
		}
	}
}

// The verbs without a playbook exist, say so, and exit 3.
func TestNotYetVerbs(t *testing.T) {
	var calls []string
	a := verbApp(&calls)
	cases := [][]string{{"certs", "renew", "apiserver", "-f", "cluster.yaml"}, {"certs", "renew", "all", "apiserver"}}
	for _, n := range notYetVerbs() {
		cases = append(cases, []string{n.verb, n.noun, "-f", "cluster.yaml", "--whatever"})
	}
	for _, args := range cases {
		_, err := runVerb(t, a, "", args...)
		var coded interface{ ExitCode() int }
		if err == nil || !errors.As(err, &coded) || coded.ExitCode() != 3 || !strings.Contains(err.Error(), "not available yet") || !strings.Contains(err.Error(), "meanwhile") {
			t.Errorf("%v: %v", args, err)
		}
	}
	if len(calls) != 0 {
		t.Errorf("a not-yet verb ran something: %q", calls)
	}
}

// plan cluster: create-cluster under --check --diff, per host, with the
// summary line.
func TestPlanCluster(t *testing.T) {
	t.Chdir(t.TempDir())
	var calls []string
	a := testApp(&calls)
	a.LoadInventory = func(*lifecycle.ClusterFile, *matrix.Support) (*inventory.Inventory, error) {
		return &inventory.Inventory{Hosts: []inventory.Host{{Name: "n1", Local: true}, {Name: "n2", Local: true}},
			Groups: map[string][]string{"nodes": {"n1", "n2"}}, Vars: map[string]any{"cluster_name": "demo"}}, nil
	}
	a.Builtins["change"] = changeStep{}
	a.BuiltinFS = fstest.MapFS{"playbooks/create-cluster/playbook.yaml": {Data: []byte(`name: create-cluster
version: 0.1.0
requires: {kubexm: ">=0.1.0"}
plays:
  - name: p
    hosts: nodes
    tasks:
      - name: config file
        change: {on: n1, diff: "-old\n+new"}
      - name: unit
        change: {on: "n1,n2"}
      - name: same
        change: {on: none}
      - name: not here
        change: {on: none}
        when: inventory_hostname == "n9"
`)}}
	root := verbRoot(a)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"plan", "cluster", "-f", "cluster.yaml"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("plan: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"n1: 2 to change, 1 unchanged\n  ~ config file\n      -old\n      +new\n  ~ unit\n",
		"n2: 1 to change, 2 unchanged\n  ~ unit\n",
		"2 tasks skipped",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "Plan: 3 to change, 3 unchanged.\n") {
		t.Errorf("plan does not end with the summary:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(".kubexm", "demo", "runs")); err == nil {
		t.Error("plan wrote a journal")
	}

	out.Reset()
	root.SetArgs([]string{"plan", "cluster", "-f", "cluster.yaml", "-o", "json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var last struct {
		Kind      string `json:"kind"`
		ToChange  int    `json:"to_change"`
		Unchanged int    `json:"unchanged"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Kind != "plan" || last.ToChange != 3 || last.Unchanged != 3 {
		t.Errorf("json plan line: %v %+v", err, last)
	}
}

// changeStep reports a change on the hosts of "on", with diff; it changes
// nothing (and fails if it is not run in check mode).
type changeStep struct{}

func (changeStep) Spec() step.Spec {
	return step.Spec{Name: "change", Args: []step.Arg{{Name: "on", Type: step.String}, {Name: "diff", Type: step.String, Default: ""}}}
}

func (changeStep) Run(_ context.Context, env *step.Env, a step.Args) (step.Result, error) {
	if !env.Check {
		return step.Result{Failed: true, Msg: "not a check run"}, nil
	}
	for _, h := range strings.Split(a.String("on"), ",") {
		if h == env.Host {
			return step.Result{Changed: true, Diff: a.String("diff")}, nil
		}
	}
	return step.Result{}, nil
}

// create cluster ends by saying where the admin kubeconfig is and how to
// use it, when the run wrote one; a --check run does not.
func TestCreateClusterNamesKubeconfig(t *testing.T) {
	verbDir(t)
	var calls []string
	a := verbApp(&calls)
	out, err := runVerb(t, a, "", "create", "cluster")
	if err != nil || strings.Contains(out, "admin kubeconfig") {
		t.Fatalf("without a kubeconfig: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(".kubexm", "demo"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(".kubexm", "demo", "kubeconfig"), []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runVerb(t, a, "", "create", "cluster")
	want := "The cluster's admin kubeconfig is " + filepath.Join(".kubexm", "demo", "kubeconfig") + ":\n  kubectl --kubeconfig .kubexm/demo/kubeconfig get nodes\n"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "kubexm get nodes -f cluster.yaml") {
		t.Errorf("after create cluster: %v\n%s", err, out)
	}
	if out, err := runVerb(t, a, "", "create", "cluster", "--check"); err != nil || strings.Contains(out, "admin kubeconfig") {
		t.Errorf("create cluster --check: %v\n%s", err, out)
	}
	// kubexm play create-cluster says the same.
	root := &cobra.Command{Use: "kubexm", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(newPlayCmd(a))
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs([]string{"play", "create-cluster", "-i", "cluster.yaml"})
	if err := root.ExecuteContext(context.Background()); err != nil || !strings.Contains(buf.String(), want) {
		t.Errorf("after play create-cluster: %v\n%s", err, buf.String())
	}
}

// upgrade cluster --rollback-on-failure: a failed upgrade runs the rollback
// playbook, told to roll back only an unfinished upgrade; a successful one
// does not, nor a failed one without the flag; --server refuses the flag.
func TestUpgradeRollbackOnFailure(t *testing.T) {
	verbDir(t)
	run := func(fail bool, args ...string) ([]string, string, error) {
		var calls []string
		a := verbApp(&calls)
		fsys := a.BuiltinFS.(fstest.MapFS)
		failWith := "false"
		if fail {
			failWith = "true"
		}
		fsys["playbooks/upgrade/playbook.yaml"] = &fstest.MapFile{Data: []byte(`name: upgrade
version: 0.1.0
requires: {kubexm: ">=0.1.0"}
plays:
  - name: p
    hosts: nodes
    tasks:
      - name: t
        fake: {msg: upgrade, fail: ` + failWith + `}
`)}
		fsys["playbooks/rollback/playbook.yaml"] = &fstest.MapFile{Data: []byte(`name: rollback
version: 0.1.0
requires: {kubexm: ">=0.1.0"}
plays:
  - name: p
    hosts: nodes
    tasks:
      - name: t
        fake: {msg: 'rollback unfinished={{ .rollback_unfinished_only | default "-" }}'}
`)}
		out, err := runVerb(t, a, "", append([]string{"upgrade", "cluster", "-f", "cluster.yaml", "--to-version", "v1.37.2"}, args...)...)
		return calls, out, err
	}
	calls, out, err := run(true, "--rollback-on-failure")
	if err == nil || !strings.Contains(err.Error(), "the upgrade failed and was rolled back") || len(calls) == 0 || calls[len(calls)-1] != "n1:rollback unfinished=true" {
		t.Errorf("failed upgrade with --rollback-on-failure: err %v, calls %q\n%s", err, calls, out)
	}
	if calls, out, err := run(false, "--rollback-on-failure"); err != nil || len(calls) != 1 {
		t.Errorf("upgrade that succeeds: err %v, calls %q\n%s", err, calls, out)
	}
	if calls, out, err := run(true); err == nil || slices.Contains(calls, "n1:rollback unfinished=true") {
		t.Errorf("failed upgrade without the flag: err %v, calls %q\n%s", err, calls, out)
	}
	if _, _, err := run(true, "--rollback-on-failure", "--server", "https://kubexm.example:8443"); err == nil || !strings.Contains(err.Error(), "--rollback-on-failure runs locally only") {
		t.Errorf("--rollback-on-failure --server: %v", err)
	}
}
