package cli

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/facts"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// documentedFacts reads the fact names from the Facts table of
// docs/playbooks.md.
func documentedFacts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/playbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### Facts\n")
	if !ok {
		t.Fatal("docs/playbooks.md has no ### Facts section")
	}
	sec, _, _ = strings.Cut(sec, "\n\n"+"Always set")
	name := regexp.MustCompile("`([a-z0-9_]+)`")
	var out []string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(line[2:], "|")
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d facts documented: %v", len(out), out)
	}
	return out
}

// TestDocumentedFacts runs a playbook that reads every documented fact as
// facts.NAME after gather_facts and after an explicit setup task, and checks
// that setup gathers nothing undocumented.
func TestDocumentedFacts(t *testing.T) {
	names := documentedFacts(t)
	got, err := facts.Gather(t.Context(), local.New(inventory.Localhost))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			t.Errorf("setup gathers %q, which docs/playbooks.md does not document", k)
		}
	}
	var pb strings.Builder
	for _, how := range []string{"gather_facts: true\n  tasks:\n", "tasks:\n    - setup: {}\n"} {
		pb.WriteString("- hosts: localhost\n  " + how)
		for _, n := range names {
			fmt.Fprintf(&pb, "    - debug: {var: facts.%s}\n", n)
			fmt.Fprintf(&pb, "    - debug: {msg: \"{{ .facts.%s }}\"}\n", n)
		}
	}
	p, err := engine.LoadBytes(t.Context(), "facts.yaml", []byte(pb.String()), engine.LoadOptions{Builtins: builtins.ByName()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failures []string
	sink := model.SinkFunc(func(e model.Event) {
		if e.Kind == model.EventHostResult && e.Status == model.StatusFailed {
			mu.Lock()
			failures = append(failures, e.Message)
			mu.Unlock()
		}
	})
	rc, err := engine.Run(context.Background(), p, &inventory.Inventory{}, engine.RunOptions{Output: sink, NoJournal: true})
	if err != nil {
		t.Fatalf("%v: %v", err, failures)
	}
	if s := rc.Hosts[inventory.Localhost]; s == nil || s.OK != 4*len(names)+2 {
		t.Errorf("recap %+v, want %d ok", s, 4*len(names)+2)
	}
}
