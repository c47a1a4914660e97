package cmdtree

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true}
	get := &cobra.Command{Use: "get", Short: "Show things", Annotations: map[string]string{UnknownHint: "pods are kubectl's"}}
	run := func(*cobra.Command, []string) error { return nil }
	get.AddCommand(&cobra.Command{Use: "nodes", RunE: run}, &cobra.Command{Use: "job", RunE: run}, &cobra.Command{Use: "jobs", RunE: run})
	root.AddCommand(get)
	AddNounAliases(root, [][2]string{{"node", "nodes"}, {"job", "jobs"}})
	RefuseUnknownSubcommands(root)
	return root
}

func execute(root *cobra.Command, args ...string) (string, error) {
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// An unknown noun is an error that exits 1 with a did-you-mean and the
// group's hint; the group alone prints its help.
func TestRefuseUnknownSubcommands(t *testing.T) {
	_, err := execute(tree(), "get", "nodse", "-o", "wide")
	var usage *UsageError
	if !errors.As(err, &usage) || usage.ExitCode() != 1 || !strings.Contains(err.Error(), `did you mean "tool get nodes"?`) ||
		!strings.Contains(err.Error(), "pods are kubectl's") {
		t.Errorf("get nodse: %v", err)
	}
	if out, err := execute(tree(), "get"); err != nil || !strings.Contains(out, "Show things") || strings.Contains(out, "tool get [flags]") {
		t.Errorf("get alone: %v\n%s", err, out)
	}
	if _, err := execute(tree(), "get", "-x"); err == nil || !strings.Contains(err.Error(), "takes a command first") {
		t.Errorf("get -x: %v", err)
	}
}

// A noun answers to its other number unless a sibling has that name.
func TestAddNounAliases(t *testing.T) {
	root := tree()
	get, _, _ := root.Find([]string{"get"})
	for _, c := range get.Commands() {
		want := map[string][]string{"nodes": {"node"}, "job": nil, "jobs": nil}[c.Name()]
		if !slices.Equal(c.Aliases, want) {
			t.Errorf("%s: aliases %q, want %q", c.Name(), c.Aliases, want)
		}
	}
	if _, err := execute(tree(), "get", "node"); err != nil {
		t.Errorf("get node: %v", err)
	}
}
