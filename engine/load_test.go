package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mensylisir/kubexm/engine/playbook"
)

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string // substrings of the error
	}{
		{"unknown play key", map[string]string{"playbook.yaml": "- hosts: all\n  taks: []\n"},
			[]string{"playbook.yaml:2:3", `unknown play key "taks"`, `did you mean "tasks"`}},
		{"unknown builtin", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - name: x\n      prob: a\n"},
			[]string{"playbook.yaml:4:7", `task "x"`, `unknown builtin or keyword "prob"`, `did you mean "probe"`}},
		{"unknown argument", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: {id: a, mgs: x}\n"},
			[]string{"playbook.yaml:3:22", `probe has no argument "mgs"`, `did you mean "msg"`}},
		{"missing required argument", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: {msg: x}\n"},
			[]string{"playbook.yaml:3", "probe needs argument id"}},
		{"wrong type", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: {id: a, count: abc}\n"},
			[]string{"argument count", `"abc" is not a number`}},
		{"alias and choices", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: {id: a, n: 2, mode: fsat}\n"},
			[]string{`"fsat" is not one of fast, slow`, `did you mean "fast"`}},
		{"two actions", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      noop:\n"},
			[]string{"several actions (probe, noop)"}},
		{"misspelt task key beside a builtin", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - name: t\n      probe: a\n      regster: x\n"},
			[]string{"playbook.yaml:5:7", `task "t"`, `unknown task key or builtin "regster"`, `did you mean "register"`}},
		{"bad expression names the task", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - name: guarded\n      probe: a\n      failed_when: x ===\n"},
			[]string{"playbook.yaml:5:20", `task "guarded"`, "expression"}},
		{"no action", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - name: lonely\n      when: true\n"},
			[]string{`task "lonely"`, "no action"}},
		{"bad expression", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      when: x ===\n"},
			[]string{"playbook.yaml:4:13", "expression"}},
		{"template in when", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      when: \"{{ .x }}\"\n"},
			[]string{"conditions are expressions"}},
		{"bad template", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: {id: \"{{ .x \"}\n"},
			[]string{"playbook.yaml:3:19", "template"}},
		{"yaml syntax", map[string]string{"playbook.yaml": "- hosts: all\n  tasks: [\n"},
			[]string{"playbook.yaml:", "YAML syntax error"}},
		{"unknown handler", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      notify: restrat\n  handlers:\n    - name: restart\n      probe: r\n"},
			[]string{`notify "restrat": no handler`, `did you mean "restart"`}},
		{"requires", map[string]string{"playbook.yaml": "name: x\nversion: 1.0.0\nrequires: {kubexm: \">=9.0.0\"}\nplays: []\n"},
			[]string{"playbook.yaml:3:20", "requires kubexm >=9.0.0, but this is kubexm 0.1.0"}},
		{"import cycle", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - import_tasks: a.yaml\n", "a.yaml": "- import_tasks: b.yaml\n", "b.yaml": "- import_tasks: a.yaml\n"},
			[]string{"includes itself"}},
		{"role not found", map[string]string{"playbook.yaml": "- hosts: all\n  roles: [etdc]\n"},
			[]string{`role "etdc" not found`}},
		{"loop not a list", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      loop: 3\n"},
			[]string{"loop needs a list"}},
		{"duplicate key", map[string]string{"playbook.yaml": "- hosts: all\n  hosts: web\n"},
			[]string{"playbook.yaml:2:3", `"hosts" already defined`}},
		{"header key", map[string]string{"playbook.yaml": "name: x\nplay: []\n"},
			[]string{`unknown playbook key "play"`, `did you mean "plays"`}},
		{"bad serial", map[string]string{"playbook.yaml": "- hosts: all\n  serial: 0\n"},
			[]string{"serial: 0: a batch needs at least one host"}},
		{"free-form on a mapping builtin", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - set_fact: x\n"},
			[]string{"set_fact takes a mapping of arguments"}},
		{"unknown meta", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - meta: flush_handler\n"},
			[]string{`meta: unknown action "flush_handler"`, `did you mean "flush_handlers"`}},
		{"listen outside handlers", map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n      listen: x\n"},
			[]string{"listen is only valid on handlers"}},
		{"bad pattern", map[string]string{"playbook.yaml": "- hosts: \"web:&\"\n"},
			[]string{"bad part"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			_, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(&calls{}), Version: "0.1.0"})
			if err == nil {
				t.Fatal("loaded without error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadBuiltinPlaybooksAndRoles(t *testing.T) {
	builtin := fstest.MapFS{
		"playbooks/demo/playbook.yaml": {Data: []byte("name: demo\nversion: 0.2.0\nrequires: {kubexm: \">=0.1.0\"}\nplays:\n  - hosts: localhost\n    roles: [r1]\n")},
		"roles/r1/tasks/main.yaml":     {Data: []byte("- probe: {id: r1, msg: \"{{ .v }}\"}\n- copyfile: f.txt\n")},
		"roles/r1/defaults/main.yaml":  {Data: []byte("v: builtin\n")},
		"roles/r1/files/f.txt":         {Data: []byte("hello")},
	}
	c := &calls{}
	reg := testRegistry(c)
	var found string
	reg["copyfile"] = fakeBuiltin{spec: specWithFree("copyfile", "src"), run: func(_ context.Context, env *stepEnv, a stepArgs) (stepResult, error) {
		p, err := env.FindFile("files", a.String("src"))
		found = p
		return stepResult{}, err
	}}
	t.Chdir(t.TempDir())
	pb, err := Load(context.Background(), "demo", LoadOptions{Builtins: reg, BuiltinFS: builtin, Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if pb.Name != "demo" || pb.Version != "0.2.0" || !strings.HasPrefix(pb.Path, "builtin:") {
		t.Errorf("playbook = %s %s %s", pb.Name, pb.Version, pb.Path)
	}
	if _, err := Run(context.Background(), pb, testInventory(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := c.sorted(); len(got) != 1 || got[0] != "localhost:r1=builtin" {
		t.Errorf("calls = %v", got)
	}
	if found == "" || filepath.Base(found) != "f.txt" {
		t.Errorf("FindFile gave %q", found)
	}

	// A role on --roles-path overrides the built-in one.
	dir := writeFiles(t, map[string]string{"r1/tasks/main.yaml": "- probe: {id: forked}\n"})
	c2 := &calls{}
	pb2, err := Load(context.Background(), "demo", LoadOptions{Builtins: testRegistry(c2), BuiltinFS: builtin, RolesPath: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := c2.sorted(); len(got) != 1 || got[0] != "localhost:forked" {
		t.Errorf("calls = %v", got)
	}
	if _, err := Load(context.Background(), "dmeo", LoadOptions{BuiltinFS: builtin}); err == nil || !strings.Contains(err.Error(), `did you mean "demo"`) {
		t.Errorf("unknown playbook: %v", err)
	}
}

func TestImportPlaybook(t *testing.T) {
	rr := runFiles(t, map[string]string{
		"playbook.yaml": "name: main\nplays:\n  - import_playbook: other.yaml\n  - hosts: h1\n    tasks: [{probe: main}]\n",
		"other.yaml":    "- hosts: h2\n  tasks: [{probe: other}]\n",
	}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := strings.Join(rr.calls.sorted(), " "); got != "h1:main h2:other" {
		t.Errorf("calls = %s", got)
	}
}

// TestPlayDefaults: a header's play_defaults are the keywords of every
// play of that file that does not write them; a play's own value wins, an
// imported playbook keeps its own header's, and a keyword that selects
// hosts or tasks cannot be defaulted.
func TestPlayDefaults(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"playbook.yaml": "name: main\nplay_defaults: {become: true, any_errors_fatal: true}\nplays:\n" +
			"  - import_playbook: other.yaml\n" +
			"  - {name: a, hosts: h1, tasks: [{probe: a}]}\n" +
			"  - {name: b, hosts: h1, any_errors_fatal: false, become: false, tasks: [{probe: b}]}\n",
		"other.yaml": "plays:\n  - {name: o, hosts: h2, tasks: [{probe: o}]}\n",
	})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pb.Plays {
		got = append(got, fmt.Sprintf("%s become=%v fatal=%v task-become=%v", p.Name, p.Become, p.AnyErrorsFatal, p.Tasks[0].Become))
	}
	want := "o become=false fatal=false task-become=false, a become=true fatal=true task-become=true, b become=false fatal=false task-become=false"
	if strings.Join(got, ", ") != want {
		t.Errorf("plays = %s, want %s", strings.Join(got, ", "), want)
	}
	bad := writeFiles(t, map[string]string{"playbook.yaml": "play_defaults: {become: true, hosts: all}\nplays:\n  - {hosts: h1, tasks: [{probe: a}]}\n"})
	if _, err := Load(context.Background(), bad, LoadOptions{Builtins: testRegistry(&calls{})}); err == nil || !strings.Contains(err.Error(), `play_defaults: "hosts" cannot be defaulted`) {
		t.Errorf("play_defaults with hosts: %v", err)
	}
}

// TestImportSiblingOfAFork: a fork of one playbook imports a sibling
// playbook's file (../other/x.yaml) it has no copy of from the built-ins,
// and its own copy when it has one.
func TestImportSiblingOfAFork(t *testing.T) {
	builtin := fstest.MapFS{
		"playbooks/other/playbook.yaml": {Data: []byte("plays: []\n")},
		"playbooks/other/shared.yaml":   {Data: []byte("- hosts: h2\n  tasks: [{probe: builtin}]\n")},
	}
	fork := map[string]string{
		"main/playbook.yaml":  "plays:\n  - import_playbook: ../other/shared.yaml\n",
		"other/playbook.yaml": "plays:\n  - import_playbook: shared.yaml\n",
	}
	for _, withCopy := range []bool{false, true} {
		if withCopy {
			fork["other/shared.yaml"] = "- hosts: h2\n  tasks: [{probe: forked}]\n"
		}
		dir := writeFiles(t, fork)
		for _, pbName := range []string{"main", "other"} {
			c := &calls{}
			pb, err := Load(context.Background(), filepath.Join(dir, pbName), LoadOptions{Builtins: testRegistry(c), BuiltinFS: builtin})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), pb, testInventory(), RunOptions{}); err != nil {
				t.Fatal(err)
			}
			want := "h2:builtin"
			if withCopy {
				want = "h2:forked"
			}
			if got := strings.Join(c.sorted(), " "); got != want {
				t.Errorf("%s, fork with its own copy %v: calls = %s, want %s", pbName, withCopy, got, want)
			}
		}
	}
}

func TestParseExtraVars(t *testing.T) {
	dir := writeFiles(t, map[string]string{"e.yaml": "a: 1\nb: {c: [x]}\n"})
	got, err := ParseExtraVars([]string{"n=3", "s=hello world", "t=true", "@" + filepath.Join(dir, "e.yaml"), `{"j": 2}`, "l=[1,2]"})
	if err != nil {
		t.Fatal(err)
	}
	if got["n"] != 3 || got["s"] != "hello world" || got["t"] != true || got["a"] != 1 || got["j"] != 2 || got["l"] != "[1,2]" {
		t.Errorf("extra vars = %#v", got)
	}
	for _, bad := range []string{"novalue", "@/nonexistent.yaml", "{bad"} {
		if _, err := ParseExtraVars([]string{bad}); err == nil {
			t.Errorf("ParseExtraVars(%q) succeeded", bad)
		}
	}
}

func TestMatchHosts(t *testing.T) {
	inv := testInventory()
	cases := []struct {
		pattern string
		want    string
	}{
		{"all", "h1 h2 h3"},
		{"*", "h1 h2 h3"},
		{"web", "h1 h2"},
		{"db:web", "h1 h2 h3"},
		{"all:!db", "h1 h2"},
		{"web:&h2", "h2"},
		{"h*:!h1", "h2 h3"},
		{"localhost", "localhost"},
		{"web,localhost", "h1 h2 localhost"},
		{"nothing", ""},
		{"w?b", "h1 h2"},
		{"all[0]", "h1"},
		{"all[-1]", "h3"},
		{"all[1:3]", "h2 h3"},
		{"all[1:]", "h2 h3"},
		{"all[:1]", "h1"},
		{"all[5]", ""},
		{"web[1]:db", "h2 h3"},
		{"all:!web[0]", "h2 h3"},
		{"all:&web[0:2]", "h1 h2"},
		{"web:!db", "h1 h2"},
		{"all:&db", "h3"},
		{"h[12]", "h1 h2"},
	}
	for _, tc := range cases {
		got, _, err := playbook.MatchHosts(inv, tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("matchHosts(%q) = %q, want %q", tc.pattern, s, tc.want)
		}
	}
}

func TestLoadBillionLaughs(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 12; i++ {
		prev := "*a" + string(rune('0'+i-1))
		if i > 9 {
			prev = "*a" + string(rune('a'+i-10))
		}
		name := "a" + string(rune('0'+i))
		if i > 9 {
			name = "a" + string(rune('a'+i-10))
		}
		sb.WriteString(name + ": &" + name + " [" + strings.Repeat(prev+", ", 9) + prev + "]\n")
	}
	_, err := LoadBytes(context.Background(), "laughs.yaml", []byte(sb.String()), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err = %v", err)
	}
}

// -e @file has the same bounds as playbook files: issue 13's 320-byte file
// of nested aliases took 255 MB.
func TestExtraVarsFileAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), ","))
	}
	p := filepath.Join(t.TempDir(), "vars.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(t.TempDir(), "deep.yaml")
	if err := os.WriteFile(deep, []byte("x: "+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{p: "too large after expanding aliases", deep: "nested deeper"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := ParseExtraVars([]string{"@" + file})
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; el > 2*time.Second || alloc > 64<<20 {
			t.Errorf("%s: took %s and allocated %d MiB", file, el, alloc>>20)
		}
	}
	// Ordinary files still work, aliases included.
	ok := filepath.Join(t.TempDir(), "ok.yaml")
	os.WriteFile(ok, []byte("a: &a {x: 1}\nb: *a\nn: 3\n"), 0o644)
	m, err := ParseExtraVars([]string{"@" + ok, `{c: [1, 2]}`})
	if err != nil || fmt.Sprint(m) != "map[a:map[x:1] b:map[x:1] c:[1 2] n:3]" {
		t.Fatalf("got %v %v", m, err)
	}
}
