package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mensylisir/kubexm/engine/model"
)

// overlayBuiltin is a built-in tree with a nested role whose template and
// file a site overlays.
func overlayBuiltin() fstest.MapFS {
	return fstest.MapFS{
		"playbooks/demo/playbook.yaml": {Data: []byte(`name: demo
plays:
  - name: one
    hosts: localhost
    phase: first
    tags: [a]
    tasks:
      - probe: one
  - name: two
    hosts: localhost
    phase: second
    tags: [b]
    roles: [kube/node]
  - name: three
    hosts: localhost
    phase: second
    tags: [c]
    tasks:
      - probe: three
`)},
		"roles/kube/node/tasks/main.yaml":            {Data: []byte("- readfile: {kind: templates, src: config.toml.tmpl}\n- readfile: {kind: files, src: sub/unit.service}\n")},
		"roles/kube/node/templates/config.toml.tmpl": {Data: []byte("builtin template")},
		"roles/kube/node/files/sub/unit.service":     {Data: []byte("builtin unit")},
	}
}

func loadRun(t *testing.T, ref string, builtin fstest.MapFS, lo LoadOptions) ([]string, *Playbook) {
	t.Helper()
	c := &calls{}
	lo.Builtins, lo.BuiltinFS = testRegistry(c), builtin
	pb, err := Load(context.Background(), ref, lo)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := Run(context.Background(), pb, testInventory(), RunOptions{NoJournal: true}); err != nil {
		t.Fatal(err, model.FailedHosts(rc), rc.Hosts["localhost"])
	}
	return c.log, pb
}

// TestOverlayResolution: an overlay file replaces one file of a built-in
// role without a copy of it; a later --overlay wins over an earlier one,
// and both over the fork's site/ directory.
func TestOverlayResolution(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	log, _ := loadRun(t, "demo", b, LoadOptions{})
	if got := strings.Join(log, " "); got != "localhost:one localhost:readfile=builtin template localhost:readfile=builtin unit localhost:three" {
		t.Fatalf("without overlay: %s", got)
	}
	o1 := writeFiles(t, map[string]string{
		"roles/kube/node/templates/config.toml.tmpl": "first overlay",
		"roles/kube/node/files/sub/unit.service":     "first unit",
	})
	o2 := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": "second overlay"})
	log, _ = loadRun(t, "demo", b, LoadOptions{Overlays: []string{o1, o2}})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=second overlay") || !strings.Contains(got, "readfile=first unit") {
		t.Errorf("two overlays: %s", got)
	}
	// A fork laid out as DIR/playbooks/NAME brings DIR/site along.
	fork := writeFiles(t, map[string]string{
		"playbooks/demo/playbook.yaml":                    string(b["playbooks/demo/playbook.yaml"].Data),
		"site/roles/kube/node/templates/config.toml.tmpl": "site template",
	})
	ref := filepath.Join(fork, "playbooks", "demo")
	log, _ = loadRun(t, ref, b, LoadOptions{})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=site template") || !strings.Contains(got, "readfile=builtin unit") {
		t.Errorf("site/: %s", got)
	}
	log, _ = loadRun(t, ref, b, LoadOptions{Overlays: []string{o2}})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=second overlay") {
		t.Errorf("--overlay over site/: %s", got)
	}
}

// TestOverlayErrors: an overlay file that shadows nothing is refused,
// naming the overlay file, the role's real files and the likely one.
func TestOverlayErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"roles/kube/node/templates/config.tml", []string{"config.tml shadows nothing", "role kube/node", `did you mean "config.toml.tmpl"?`, "it has config.toml.tmpl"}},
		{"roles/kube/nod/templates/config.toml.tmpl", []string{`no role "kube/nod"`, `did you mean "kube/node"?`}},
		{"roles/kube/node/tasks/main.yaml", []string{"replaces single files", "copy the role"}},
	} {
		o := writeFiles(t, map[string]string{tc.file: "x"})
		_, err := Load(context.Background(), "demo", LoadOptions{Builtins: testRegistry(&calls{}), BuiltinFS: b, Overlays: []string{o}})
		if err == nil {
			t.Errorf("%s: loaded", tc.file)
			continue
		}
		for _, w := range append(tc.want, filepath.FromSlash(tc.file)) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.file, err, w)
			}
		}
	}
	if _, err := Load(context.Background(), "demo", LoadOptions{BuiltinFS: b, Builtins: testRegistry(&calls{}), Overlays: []string{"/does/not/exist"}}); err == nil || !strings.Contains(err.Error(), "--overlay /does/not/exist: not a directory") {
		t.Errorf("missing overlay dir: %v", err)
	}
}

// TestOverlayHash: an overlay file is part of the playbook's identity, so
// --resume after changing it is refused as after changing a role.
func TestOverlayHash(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	load := func(lo LoadOptions) string {
		t.Helper()
		lo.Builtins, lo.BuiltinFS = testRegistry(&calls{}), b
		pb, err := Load(context.Background(), "demo", lo)
		if err != nil {
			t.Fatal(err)
		}
		return pb.Hash
	}
	plain := load(LoadOptions{})
	o := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": "v1"})
	h1 := load(LoadOptions{Overlays: []string{o}})
	if h1 == plain {
		t.Error("an overlay does not change the hash")
	}
	if err := os.WriteFile(filepath.Join(o, "roles/kube/node/templates/config.toml.tmpl"), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	h2 := load(LoadOptions{Overlays: []string{o}})
	if h2 == h1 {
		t.Error("a changed overlay file does not change the hash")
	}
	if load(LoadOptions{Overlays: []string{o}}) != h2 {
		t.Error("the hash is not stable")
	}
	// The journal refuses a resume across the change, as for a role.
	work := t.TempDir()
	c := &calls{}
	run := func(content string, resume string) error {
		if err := os.WriteFile(filepath.Join(o, "roles/kube/node/templates/config.toml.tmpl"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		pb, err := Load(context.Background(), "demo", LoadOptions{Builtins: testRegistry(c), BuiltinFS: b, Overlays: []string{o}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, Resume: resume})
		return err
	}
	if err := run("v3", ""); err != nil {
		t.Fatal(err)
	}
	if err := run("v4", "last"); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("resume after an overlay changed: %v", err)
	}
}

// TestHooks: hook playbooks of the playbook's directory, of site/ and
// --overlay directories and of the options run before the first and after
// the last play of their phase, in that order, with the phase's tags; their
// relative paths resolve from their own directory.
func TestHooks(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	fork := writeFiles(t, map[string]string{
		"playbooks/demo/playbook.yaml":                    string(b["playbooks/demo/playbook.yaml"].Data),
		"playbooks/demo/hooks/before-second.yaml":         "- hosts: localhost\n  tasks:\n    - probe: pb-before-second\n",
		"playbooks/demo/hooks/after-first.yaml":           "- hosts: localhost\n  tasks:\n    - include_tasks: tasks/more.yaml\n",
		"playbooks/demo/hooks/tasks/more.yaml":            "- probe: pb-after-first-included\n",
		"site/hooks/demo/after-second.yaml":               "- hosts: localhost\n  roles: [site-role]\n  tasks:\n    - probe: site-after-second\n    - readfile: {kind: files, src: note.txt}\n",
		"site/hooks/demo/roles/site-role/tasks/main.yaml": "- probe: hook-role\n",
		"site/hooks/demo/files/note.txt":                  "beside the hook",
		"site/hooks/other/after-nothing.yaml":             "not read: another playbook's hook",
	})
	o := writeFiles(t, map[string]string{"hooks/demo/after-second.yaml": "- hosts: localhost\n  tasks:\n    - probe: overlay-after-second\n"})
	decl := writeFiles(t, map[string]string{"label.yaml": "- hosts: localhost\n  tasks:\n    - probe: declared-after-second\n"})
	lo := LoadOptions{Overlays: []string{o}, Hooks: []Hook{
		{Playbook: "demo", Phase: "second", When: "after", File: filepath.Join(decl, "label.yaml"), From: "cluster.yaml:3:5"},
		{Playbook: "other", Phase: "nope", When: "after", File: "/nowhere", From: "cluster.yaml:9:5"},
	}}
	ref := filepath.Join(fork, "playbooks", "demo")
	log, pb := loadRun(t, ref, b, lo)
	want := "localhost:one localhost:pb-after-first-included localhost:pb-before-second localhost:readfile=builtin template localhost:readfile=builtin unit localhost:three " +
		"localhost:hook-role localhost:site-after-second localhost:readfile=beside the hook localhost:overlay-after-second localhost:declared-after-second"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
	if got := strings.Join(pb.Phases(), ","); got != "first,second" {
		t.Errorf("phases %s", got)
	}
	// A hook inherits the tags of every play of its phase.
	for _, p := range pb.Plays {
		if p.Hook == "after-second" && strings.Join(p.Tags, ",") != "b,c" {
			t.Errorf("hook play tags %v", p.Tags)
		}
	}
	var list bytes.Buffer
	if err := pb.ListTasks(&list, []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	out := list.String()
	if !strings.Contains(out, "phases: first, second") || !strings.Contains(out, "PHASE: first (hook after-first") || !strings.Contains(out, "probe\tTAGS: [a]") {
		t.Errorf("--list-tasks:\n%s", out)
	}
	// --tags c runs the second phase's hooks, not the first's.
	c := &calls{}
	lo.Builtins, lo.BuiltinFS = testRegistry(c), b
	pb, err := Load(context.Background(), ref, lo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), pb, testInventory(), RunOptions{NoJournal: true, Tags: []string{"c"}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.log, " "); got != "localhost:pb-before-second localhost:three localhost:hook-role localhost:site-after-second localhost:readfile=beside the hook localhost:overlay-after-second localhost:declared-after-second" {
		t.Errorf("--tags c: %s", got)
	}
	// --start-at-task counts hook tasks as tasks of the playbook.
	c = &calls{}
	lo.Builtins = testRegistry(c)
	pb, _ = Load(context.Background(), ref, lo)
	if _, err := Run(context.Background(), pb, testInventory(), RunOptions{NoJournal: true, StartAt: "probe"}); err != nil {
		t.Fatal(err)
	}
	if len(c.log) == 0 || c.log[0] != "localhost:one" {
		t.Errorf("--start-at-task: %v", c.log)
	}
}

// TestHookErrors: a hook of a phase the playbook lacks, a misnamed hook
// file, a missing declared hook and a phase split in two are refused.
func TestHookErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	load := func(files map[string]string, hooks ...Hook) error {
		t.Helper()
		files["playbooks/demo/playbook.yaml"] = string(b["playbooks/demo/playbook.yaml"].Data)
		dir := writeFiles(t, files)
		_, err := Load(context.Background(), filepath.Join(dir, "playbooks", "demo"), LoadOptions{Builtins: testRegistry(&calls{}), BuiltinFS: b, Hooks: hooks})
		return err
	}
	err := load(map[string]string{"site/hooks/demo/after-secnd.yaml": "[]"})
	if err == nil || !strings.Contains(err.Error(), `hook of phase "secnd"`) || !strings.Contains(err.Error(), `did you mean "second"?`) || !strings.Contains(err.Error(), "its phases are first, second") {
		t.Errorf("unknown phase: %v", err)
	}
	if err := load(map[string]string{"playbooks/demo/hooks/afterfirst.yaml": "[]"}); err == nil || !strings.Contains(err.Error(), "before-<phase>.yaml or after-<phase>.yaml") {
		t.Errorf("misnamed hook: %v", err)
	}
	if err := load(map[string]string{}, Hook{Phase: "first", When: "after", File: "/no/such.yaml", From: "c.yaml:4:7"}); err == nil || !strings.Contains(err.Error(), "c.yaml:4:7: hook playbook /no/such.yaml not found") {
		t.Errorf("missing declared hook: %v", err)
	}
	if err := load(map[string]string{"playbooks/demo/hooks/after-first.yaml": "- hosts: localhost\n  phase: second\n  tasks: []\n"}); err == nil || !strings.Contains(err.Error(), "a hook's plays belong to the phase it hooks") {
		t.Errorf("hook play with another phase: %v", err)
	}
	split := "name: demo\nplays:\n  - {hosts: localhost, phase: a, tasks: []}\n  - {hosts: localhost, phase: b, tasks: []}\n  - {name: late, hosts: localhost, phase: a, tasks: []}\n"
	if _, err := LoadBytes(context.Background(), "split.yaml", []byte(split), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "keep the plays of a phase together") {
		t.Errorf("split phase: %v", err)
	}
	if _, err := LoadBytes(context.Background(), "bad.yaml", []byte("- {hosts: localhost, phase: Not A Phase, tasks: []}\n"), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "is not a phase name") {
		t.Errorf("bad phase name: %v", err)
	}
}

// TestSingleFileIgnoresSiteAndHooks: a single-file playbook's directory is
// often the working directory, so its site/ and hooks/ are not the
// playbook's (a cluster.yaml's hook files live in hooks/, say).
func TestSingleFileIgnoresSiteAndHooks(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"run.yaml":                             "- {hosts: localhost, phase: one, tasks: []}\n",
		"site/roles/nothing/files/x":           "not an overlay",
		"hooks/label-nodes.yaml":               "- {hosts: all, tasks: []}\n",
		"hooks/after-one.yaml":                 "- {hosts: all, tasks: [{probe: not-a-hook}]}\n",
		"fork/playbooks/x/playbook.yaml":       "- {hosts: localhost, phase: one, tasks: []}\n",
		"fork/playbooks/x/hooks/after-one.yml": "- {name: hooked, hosts: localhost, tasks: []}\n",
	})
	pb, err := Load(context.Background(), filepath.Join(dir, "run.yaml"), LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil || len(pb.Plays) != 1 {
		t.Fatalf("single file: %v", err)
	}
	pb, err = Load(context.Background(), filepath.Join(dir, "fork", "playbooks", "x"), LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil || len(pb.Plays) != 2 || pb.Plays[1].Name != "hooked" {
		t.Fatalf("playbook directory: %v", err)
	}
}

// TestHookSeesSharedDefaults: a hook's plays read the hooked phase's shared
// defaults (the playbook's defaults_files), as the phase's own plays do.
func TestHookSeesSharedDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	fork := writeFiles(t, map[string]string{
		"playbooks/p/playbook.yaml":         "name: p\ndefaults_files: [shared.yaml]\nplays:\n  - hosts: localhost\n    phase: only\n    tasks:\n      - probe: \"in-{{ .shared_x }}\"\n",
		"playbooks/p/shared.yaml":           "shared_x: one\n",
		"playbooks/p/hooks/after-only.yaml": "- hosts: localhost\n  tasks:\n    - probe: \"hook-{{ .shared_x }}\"\n",
	})
	log, _ := loadRun(t, filepath.Join(fork, "playbooks", "p"), overlayBuiltin(), LoadOptions{})
	if got := strings.Join(log, " "); got != "localhost:in-one localhost:hook-one" {
		t.Errorf("calls %s", got)
	}
}
