package kubexm_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mensylisir/kubexm"

// moduleImports returns the packages of this module that pkg imports,
// directly or through others (test files left out), each with the chain
// that leads to it.
func moduleImports(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	reach := map[string][]string{}
	var visit func(p string, chain []string)
	visit = func(p string, chain []string) {
		dir := filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
		bp, err := build.ImportDir(filepath.Join(".", dir), 0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, done := reach[imp]; done {
				continue
			}
			next := append(slices.Clone(chain), imp)
			reach[imp] = next
			visit(imp, next)
		}
	}
	visit(pkg, []string{pkg})
	return reach
}

// TestLayering keeps the package map of docs/architecture.md true: the
// configuration does not reach into the interpreter, and the shared leaves
// depend on no other kubexm package, so that each layer uses only the
// layers below it.
func TestLayering(t *testing.T) {
	for _, c := range []struct {
		pkg       string
		forbidden []string // prefixes of import paths, or one path with "$"; "" forbids all of the module
	}{
		{"schema", []string{"engine", "builtins", "cmd", "bundle", "schema/validate", "schema/schemas", "schema/sample"}},
		// Below the format: the support matrix and the role variables'
		// declarations know no cluster.yaml type (the checks of a
		// cluster against them are validation's), and the declarations
		// know no matrix.
		{"schema/matrix", []string{"schema$", "schema/validate", "schema/schemas", "schema/sample", "inventory", "engine", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		{"schema/rolevars", []string{"schema$", "schema/matrix", "schema/validate", "schema/schemas", "schema/sample", "inventory", "engine", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		// Above it: what is generated from the types (the published
		// schemas, the sample file) needs no validation.
		{"schema/schemas", []string{"schema/validate", "schema/sample", "engine", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		{"schema/sample", []string{"schema/validate", "schema/schemas", "engine", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		// Validation reads the format and is read by the run: it knows
		// neither the interpreter nor a command line.
		{"schema/validate", []string{"engine", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		// The value rules and the spelling of field paths are leaves that
		// the format and its validation share.
		{"schema/internal/valid", []string{"engine", "schema", "inventory", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		{"schema/internal/fieldpath", []string{""}},
		{"schema/hostrange", []string{""}},
		{"inventory", []string{""}},
		{"internal/yamlguard", []string{""}},
		// The one YAML parser of schema and the engine sits below both.
		{"internal/ytree", []string{"engine", "schema", "inventory", "builtins", "cmd", "bundle"}},
		{"internal/suggest", []string{""}},
		// The command tree's conventions are cobra's and suggest's only.
		{"internal/cmdtree", []string{"engine", "schema", "inventory", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		// -o: json and yaml for programs, beside a command's own text.
		{"internal/printers", []string{"engine", "schema", "inventory", "builtins", "cmd", "bundle", "lifecycle", "service"}},
		{"internal/sysdirs", []string{""}},
		{"internal/flock", []string{""}},
		{"internal/profile", []string{""}},
		// How a process stops at a signal: the CLI's, the worker's and the
		// operator's alike.
		{"internal/interrupt", []string{""}},
		// The engine diffs forks with it: it must not pull the builtins up.
		{"internal/textdiff", []string{""}},
		// The engine is generic: it knows no builtin, command or Kubernetes bundle.
		{"engine", []string{"builtins", "cmd", "bundle", "schema"}},
		// The engine's rooms (docs/architecture.md): the model of a
		// playbook imports no other room; the loader builds it and the run
		// runs it, and neither imports the other (a dynamic include reaches
		// the loader through the load function it carries); the journal
		// knows neither; only the front door (engine) imports them all.
		{"engine/playbook", []string{"engine$", "engine/load", "engine/run", "engine/journal", "engine/model", "engine/output", "lifecycle", "service"}},
		{"engine/load", []string{"engine$", "engine/run", "engine/journal", "engine/model", "engine/output", "lifecycle", "service"}},
		{"engine/run", []string{"engine$", "engine/load", "engine/output", "lifecycle", "service"}},
		// The run's connections and its tasks' files are parts of the run
		// room that know no other part of it: the run holds them.
		{"engine/run/hostconn", []string{"engine$", "engine/load", "engine/run", "engine/playbook", "engine/journal", "engine/variables", "engine/eval", "engine/model", "engine/output", "lifecycle", "service"}},
		{"engine/run/taskfiles", []string{"engine$", "engine/load", "engine/run", "engine/journal", "engine/variables", "engine/hostlock", "engine/model", "engine/output", "lifecycle", "service"}},
		{"engine/variables", []string{"engine$", "engine/load", "engine/run", "engine/journal", "engine/model", "engine/output", "lifecycle", "service"}},
		// Evaluation knows no room: the rooms hand it their variables. Its
		// function library knows no variables either (the evaluator adds
		// the functions that read them), and nothing of the evaluator.
		{"engine/eval", []string{"engine$", "engine/playbook", "engine/load", "engine/run", "engine/journal", "engine/variables", "engine/hostlock", "engine/model", "engine/output", "engine/step", "lifecycle", "service"}},
		{"engine/eval/funcs", []string{"engine$", "engine/eval$", "engine/playbook", "engine/load", "engine/run", "engine/journal", "engine/variables", "engine/hostlock", "engine/model", "engine/output", "engine/step", "lifecycle", "service"}},
		// A host's lock knows only the transport it takes the lock through.
		{"engine/hostlock", []string{"engine$", "engine/playbook", "engine/load", "engine/run", "engine/journal", "engine/variables", "engine/eval", "engine/model", "engine/output", "lifecycle", "service"}},
		{"engine/journal", []string{"engine$", "engine/playbook", "engine/load", "engine/run", "engine/eval", "engine/output", "engine/transport", "lifecycle", "service"}},
		// The model the loader and the run share (events, statuses, the
		// recap) depends on nothing; the output prints it and knows nothing
		// of the interpreter ("engine$": that package, not its children).
		{"engine/model", []string{""}},
		{"engine/output", []string{"engine$", "engine/eval", "engine/step", "engine/transport", "builtins", "cmd", "schema", "lifecycle", "service"}},
		{"bundle", []string{"engine/eval", "builtins", "cmd", "schema"}},
		// The builtins' kinds sit below the registry that assembles them
		// (builtins.All), and what they share sits below them all.
		{"builtins/files", []string{"builtins$", "builtins/system", "builtins/transfer", "builtins/images", "builtins/pack", "builtins/network", "cmd", "lifecycle", "service"}},
		{"builtins/system", []string{"builtins$", "builtins/transfer", "builtins/images", "builtins/pack", "builtins/network", "cmd", "lifecycle", "service"}},
		{"builtins/transfer", []string{"builtins$", "builtins/files", "builtins/system", "builtins/images", "builtins/pack", "builtins/network", "cmd", "lifecycle", "service"}},
		{"builtins/images", []string{"builtins$", "builtins/files", "builtins/system", "builtins/pack", "builtins/network", "cmd", "lifecycle", "service"}},
		{"builtins/pack", []string{"builtins$", "builtins/files", "builtins/system", "builtins/transfer", "builtins/images", "builtins/network", "cmd", "lifecycle", "service"}},
		{"builtins/network", []string{"builtins$", "builtins/files", "builtins/system", "builtins/transfer", "builtins/images", "builtins/pack", "cmd", "lifecycle", "service"}},
		{"builtins/onhost", []string{"builtins$", "builtins/files", "builtins/system", "builtins/transfer", "builtins/images", "builtins/pack", "builtins/network", "builtins/controlfs", "cmd", "lifecycle", "service"}},
		{"builtins/controlfs", []string{"builtins$", "builtins/files", "builtins/system", "builtins/transfer", "builtins/images", "builtins/pack", "builtins/network", "builtins/onhost", "cmd", "lifecycle", "service"}},
		// Pushing images knows the bundle, not cluster.yaml: the caller
		// says where to push.
		{"imagepush", []string{"engine$", "engine/eval", "engine/step", "builtins", "cmd", "schema", "lifecycle", "service"}},
		// "Run this playbook against this cluster" is a library the CLI,
		// the worker's child and the operator call: it knows no command line.
		{"lifecycle", []string{"cmd", "service"}},
		// Service mode is a library the CLI (and the operator) wire up: it
		// knows no command line, and the API and the workers share only the
		// data directory's layout and the job store.
		{"service/api", []string{"cmd", "service/worker"}},
		{"service/worker", []string{"cmd", "service/api"}},
		{"service/confine", []string{"cmd", "service/api", "service/worker"}},
		{"service/jobstore", []string{"cmd", "service/api", "service/worker", "engine", "builtins"}},
		{"service/datadir", []string{""}},
		{"service/secretbox", []string{""}},
	} {
		pkg := module + "/" + c.pkg
		for imp, chain := range moduleImports(t, pkg) {
			rel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			for _, f := range c.forbidden {
				exact, ok := strings.CutSuffix(f, "$")
				if f == "" || rel == exact || (!ok && strings.HasPrefix(rel, f+"/")) {
					t.Errorf("%s imports %s (%s); see the package map in docs/architecture.md", c.pkg, rel, strings.Join(chain, " -> "))
				}
			}
		}
	}
	// The check sees imports at all: the engine does import the inventory.
	if _, ok := moduleImports(t, module+"/engine")[module+"/inventory"]; !ok {
		t.Error("engine does not seem to import inventory: moduleImports is broken")
	}
}
