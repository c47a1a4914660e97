package cmdtree

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Parent makes the missing words of a path once, with their short help,
// and finds the ones that are there.
func TestParent(t *testing.T) {
	root := &cobra.Command{Use: "tool"}
	shorts := map[string]string{"delete": "Delete things"}
	p := Parent(root, "delete nodes", shorts)
	if p.Name() != "delete" || p.Short != "Delete things" || p.Parent() != root {
		t.Fatalf("Parent(delete nodes) = %q (%q) under %v", p.Name(), p.Short, p.Parent())
	}
	if again := Parent(root, "delete cluster", shorts); again != p || len(root.Commands()) != 1 {
		t.Errorf("the second path under delete made another delete: %v", root.Commands())
	}
	if deep := Parent(root, "certs renew ca", shorts); deep.CommandPath() != "tool certs renew" {
		t.Errorf("Parent(certs renew ca) = %q", deep.CommandPath())
	}
	if top := Parent(root, "version", shorts); top != root {
		t.Errorf("Parent(version) = %q, want the root", top.CommandPath())
	}
}

// A table's flag has the type of its value and counts as given only when
// it is not its zero value.
func TestFlag(t *testing.T) {
	flags := []Flag{{Name: "b", Value: false}, {Name: "s", Value: ""}, {Name: "n", Value: 0}, {Name: "l", Value: []string(nil)}}
	for _, c := range []struct {
		args []string
		want []any // the value of each flag of flags, nil where not given
	}{
		{nil, []any{nil, nil, nil, nil}},
		{[]string{"--b", "--s=x", "--n=2", "--l=a,b", "--l=c"}, []any{true, "x", 2, "a,b,c"}},
		{[]string{"--b=false", "--s=", "--n=0"}, []any{nil, nil, nil, nil}},
	} {
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		for _, f := range flags {
			f.Add(fl)
		}
		if err := fl.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		for i, f := range flags {
			v, ok := f.Given(fl)
			if !ok {
				v = nil
			}
			if v != c.want[i] {
				t.Errorf("%v: --%s = %v (%v), want %v", c.args, f.Name, v, ok, c.want[i])
			}
		}
	}
}

// A command not written yet refuses whatever it is given, with exit 3.
func TestNotYet(t *testing.T) {
	root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(NotYet("cordon", NotYetError{What: "tool cordon", Why: "no playbook", Hint: "drain by hand"}))
	_, err := execute(root, "cordon", "--whatever", "x")
	var e *NotYetError
	if !errors.As(err, &e) || e.ExitCode() != 3 || err.Error() != "tool cordon is not available yet: no playbook; meanwhile: drain by hand" {
		t.Errorf("err = %v", err)
	}
}

// A command's help file is its long help, then its examples.
func TestSetHelp(t *testing.T) {
	root := &cobra.Command{Use: "tool"}
	create := &cobra.Command{Use: "create"}
	cluster := &cobra.Command{Use: "cluster"}
	create.AddCommand(cluster)
	root.AddCommand(create, &cobra.Command{Use: "version"})
	SetHelp(root, fstest.MapFS{
		"help/create_cluster.txt": {Data: []byte("Create a cluster.\n\nIt takes a while.\n\nExamples:\n  tool create cluster -f c.yaml\n")},
		"help/version.txt":        {Data: []byte("Print the version.\n")},
	}, "help")
	if cluster.Long != "Create a cluster.\n\nIt takes a while." || cluster.Example != "  tool create cluster -f c.yaml" {
		t.Errorf("create cluster: Long %q, Example %q", cluster.Long, cluster.Example)
	}
	if v := root.Commands()[1]; v.Long != "Print the version." || v.Example != "" {
		t.Errorf("version: Long %q, Example %q", v.Long, v.Example)
	}
	if create.Long != "" {
		t.Errorf("create has no file but Long %q", create.Long)
	}
}
