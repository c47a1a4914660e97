package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// runMain runs kubexm's whole command tree with args and returns what it
// printed and the exit status main would give its error.
func runMain(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return out.String(), 0
	}
	out.WriteString("Error: " + err.Error())
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return out.String(), coded.ExitCode()
	}
	return out.String(), 1
}

// An unknown noun is an error (exit 1) with a did-you-mean when one is
// close and the list of what the group has; cobra printed the group's
// help and exited 0.
func TestUnknownSubcommand(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"get", "pods"}, []string{`unknown command "pods" for "kubexm get"`, "kubexm get has: clusters, ", "nodes, runs (kubexm get --help)", "kubectl --kubeconfig"}, []string{"did you mean"}},
		{[]string{"get", "nod"}, []string{`did you mean "kubexm get nodes"?`}, nil},
		{[]string{"get", "clu"}, []string{`did you mean "kubexm get clusters"?`}, nil},
		{[]string{"get", "nodez", "-f", "x.yaml"}, []string{`did you mean "kubexm get nodes"?`}, nil},
		{[]string{"artifact", "import"}, []string{`unknown command "import" for "kubexm artifact"`, `did you mean "kubexm artifact export"?`}, nil},
		{[]string{"config", "foo"}, []string{`unknown command "foo" for "kubexm config"`, "validate", "view"}, []string{"did you mean"}},
		{[]string{"config", "vaildate"}, []string{`did you mean "kubexm config validate"?`}, nil},
		{[]string{"cordon", "nodez"}, []string{`did you mean "kubexm cordon node"?`}, nil},
		{[]string{"bogus"}, []string{`unknown command "bogus" for "kubexm"`}, nil},
		{[]string{"get", "--bogus"}, []string{"kubexm get takes a command first, not --bogus"}, nil},
	} {
		out, code := runMain(t, tc.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1:\n%s", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(out, w) {
				t.Errorf("%v: output has %q:\n%s", tc.args, w, out)
			}
		}
	}
	// A group alone is a request for its help.
	for _, args := range [][]string{{"get"}, {"config"}, {"get", "--help"}, {}} {
		if out, code := runMain(t, args...); code != 0 || !strings.Contains(out, "Available Commands") {
			t.Errorf("%v: exit %d:\n%s", args, code, out)
		}
	}
	// A group's help offers its commands, not the group alone; its
	// commands keep their use line.
	if out, _ := runMain(t, "get", "--help"); !strings.Contains(out, "Usage:\n  kubexm get [command]\n") {
		t.Errorf("get --help:\n%s", out)
	}
	if out, _ := runMain(t, "get", "nodes", "--help"); !strings.Contains(out, "Usage:\n  kubexm get nodes -f cluster.yaml [flags]\n") {
		t.Errorf("get nodes --help:\n%s", out)
	}
}

// The nouns answer to both numbers, and to the same command.
func TestNounAliases(t *testing.T) {
	root := newRootCmd()
	for _, tc := range [][2]string{
		{"get node", "kubexm get nodes"}, {"get nodes", "kubexm get nodes"},
		{"get cluster", "kubexm get clusters"}, {"describe clusters", "kubexm describe cluster"},
		{"create clusters", "kubexm create cluster"}, {"delete node", "kubexm delete nodes"},
		{"add node", "kubexm add nodes"}, {"cordon nodes", "kubexm cordon node"},
		{"get job", "kubexm get job"}, {"get jobs", "kubexm get jobs"},
	} {
		c, _, err := root.Find(strings.Fields(tc[0]))
		if err != nil || c.CommandPath() != tc[1] {
			t.Errorf("%s: %v %v, want %s", tc[0], c.CommandPath(), err, tc[1])
		}
	}
}

// The verbs users of kubectl and kk look for exist and refuse with exit 3.
func TestNotYetConventionVerbs(t *testing.T) {
	for _, args := range [][]string{{"restart", "cluster"}, {"config", "get-contexts"}, {"config", "use-context", "demo"}} {
		out, code := runMain(t, args...)
		if code != 3 || !strings.Contains(out, "not available yet") || !strings.Contains(out, "meanwhile") {
			t.Errorf("%v: exit %d:\n%s", args, code, out)
		}
	}
}

// config validate, config view and get nodes find the cluster file alike:
// -f, else ./cluster.yaml.
func TestClusterFileDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"config", "validate"}, {"config", "view"}, {"get", "nodes"}, {"describe", "cluster"}, {"create", "cluster"}} {
		if out, code := runMain(t, args...); code != 1 || !strings.Contains(out, "no cluster file: pass -f FILE") {
			t.Errorf("%v without a cluster file: exit %d:\n%s", args, code, out)
		}
	}
	if out, code := runMain(t, "create", "config", "-o", "cluster.yaml"); code != 0 {
		t.Fatal(out)
	}
	if out, code := runMain(t, "config", "validate"); code != 0 || !strings.Contains(out, "cluster.yaml: valid") {
		t.Errorf("config validate: exit %d:\n%s", code, out)
	}
	// get nodes read ./cluster.yaml: it went on to the work directory of
	// its cluster, and without a kubeconfig there to the cluster, which
	// has none to give (exit 2: a task of the kubeconfig playbook failed).
	if out, code := runMain(t, "get", "nodes"); code != 2 || !strings.Contains(out, ".kubexm/mycluster/kubeconfig") || !strings.Contains(out, "no admin certificate to make a kubeconfig from") {
		t.Errorf("get nodes: exit %d:\n%s", code, out)
	}
	// describe cluster takes the kubeconfig from the cluster as get nodes
	// does; that the API cannot be asked is reported, not an error.
	if out, code := runMain(t, "describe", "cluster"); code != 0 || !strings.Contains(out, "taking it from the cluster failed") || !strings.Contains(out, "no admin certificate to make a kubeconfig from") {
		t.Errorf("describe cluster: exit %d:\n%s", code, out)
	}
	if err := os.Rename("cluster.yaml", "other.yaml"); err != nil {
		t.Fatal(err)
	}
	if out, code := runMain(t, "config", "validate", "-f", "other.yaml"); code != 0 || !strings.Contains(out, "other.yaml: valid") {
		t.Errorf("config validate -f: exit %d:\n%s", code, out)
	}
}
