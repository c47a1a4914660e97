package files

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func TestEditLine(t *testing.T) {
	base := []string{"a=1", "b=2", "# c"}
	cases := []struct {
		name          string
		line, re      string
		absent        bool
		after, before string
		want          string
	}{
		{"replace", "b=3", "^b=", false, "", "", "a=1|b=3|# c"},
		{"append", "d=4", "^d=", false, "", "", "a=1|b=2|# c|d=4"},
		{"present exact", "a=1", "", false, "", "", "a=1|b=2|# c"},
		{"insertafter", "x", "", false, "^a=", "", "a=1|x|b=2|# c"},
		{"insertbefore", "x", "", false, "", "^#", "a=1|b=2|x|# c"},
		{"BOF", "x", "", false, "", "BOF", "x|a=1|b=2|# c"},
		{"no match after", "x", "", false, "^zz", "", "a=1|b=2|# c|x"},
		{"absent re", "", "=", true, "", "", "# c"},
		{"absent line", "b=2", "", true, "", "", "a=1|# c"},
	}
	for _, c := range cases {
		var re *regexp.Regexp
		if c.re != "" {
			re = regexp.MustCompile(c.re)
		}
		got, err := EditLine(base, c.line, re, c.absent, c.after, c.before)
		if err != nil || strings.Join(got, "|") != c.want {
			t.Errorf("%s: got %q %v want %q", c.name, strings.Join(got, "|"), err, c.want)
		}
	}
}

func TestLineinfile(t *testing.T) {
	env, root := steptest.Env(t)
	p := filepath.Join(root, "etc", "sysconfig")
	steptest.MustWrite(t, p, "A=1\nB=2\n")
	env.Diff = true
	res := steptest.Converge(t, LineInFile{}, env, step.Args{"path": p, "regexp": "^B=", "line": "B=3", "state": "present"}, root)
	if steptest.MustRead(t, p) != "A=1\nB=3\n" || !strings.Contains(res.Diff, "-B=2\n+B=3") {
		t.Errorf("%q %q", steptest.MustRead(t, p), res.Diff)
	}
	steptest.Converge(t, LineInFile{}, env, step.Args{"path": p, "regexp": "^A=", "state": "absent"}, root)
	if steptest.MustRead(t, p) != "B=3\n" {
		t.Errorf("%q", steptest.MustRead(t, p))
	}
	missing := filepath.Join(root, "new.conf")
	if _, err := steptest.RunBuiltin(t.Context(), env, LineInFile{}, step.Args{"path": missing, "line": "x", "state": "present"}); err == nil {
		t.Error("missing file without create: want error")
	}
	steptest.Converge(t, LineInFile{}, env, step.Args{"path": missing, "line": "x", "state": "present", "create": true, "mode": "0600"}, root)
	if fi, _ := os.Stat(missing); fi.Mode().Perm() != 0o600 || steptest.MustRead(t, missing) != "x\n" {
		t.Error("create")
	}
	// A file without a final newline is left alone when already right.
	steptest.MustWrite(t, p, "only")
	if res := steptest.Run(t, LineInFile{}, env, step.Args{"path": p, "line": "only", "state": "present"}); res.Changed {
		t.Errorf("%+v", res)
	}
}

func TestBlockinfile(t *testing.T) {
	env, root := steptest.Env(t)
	p := filepath.Join(root, "hosts")
	steptest.MustWrite(t, p, "127.0.0.1 localhost\n::1 localhost\n")
	args := step.Args{"path": p, "block": "10.0.0.1 n1\n10.0.0.2 n2\n", "state": "present"}
	steptest.Converge(t, blockinfileBuiltin{}, env, args, root)
	want := "127.0.0.1 localhost\n::1 localhost\n# BEGIN kubexm managed block\n10.0.0.1 n1\n10.0.0.2 n2\n# END kubexm managed block\n"
	if got := steptest.MustRead(t, p); got != want {
		t.Fatalf("got %q", got)
	}
	// Changing the block replaces it in place.
	steptest.MustWrite(t, p, steptest.MustRead(t, p)+"tail\n")
	steptest.Run(t, blockinfileBuiltin{}, env, step.Args{"path": p, "block": "10.0.0.3 n3", "state": "present"})
	want = "127.0.0.1 localhost\n::1 localhost\n# BEGIN kubexm managed block\n10.0.0.3 n3\n# END kubexm managed block\ntail\n"
	if got := steptest.MustRead(t, p); got != want {
		t.Fatalf("got %q", got)
	}
	// Absent removes the block and nothing else.
	steptest.Converge(t, blockinfileBuiltin{}, env, step.Args{"path": p, "state": "absent"}, root)
	if got := steptest.MustRead(t, p); got != "127.0.0.1 localhost\n::1 localhost\ntail\n" {
		t.Fatalf("got %q", got)
	}
	// insertbefore BOF with custom markers.
	steptest.Run(t, blockinfileBuiltin{}, env, step.Args{"path": p, "block": "x", "insertbefore": "BOF", "marker": "// {mark} m", "state": "present"})
	if got := steptest.MustRead(t, p); !strings.HasPrefix(got, "// BEGIN m\nx\n// END m\n127.0.0.1") {
		t.Fatalf("got %q", got)
	}
	steptest.MustWrite(t, p, "# BEGIN kubexm managed block\nx\n")
	if _, err := steptest.RunBuiltin(t.Context(), env, blockinfileBuiltin{}, step.Args{"path": p, "block": "y", "state": "present"}); err == nil {
		t.Error("unterminated block: want error")
	}
}

// TestDiffOfFileWriters: with --diff (also under --check) template,
// blockinfile and sysctl show what they change in the file, and nothing
// when the file is already right.
func TestDiffOfFileWriters(t *testing.T) {
	env, root := steptest.Env(t)
	env.Diff = true
	steptest.MustWrite(t, filepath.Join(root, "templates", "t.conf.tmpl"), "name={{ name }}\n")
	env.Vars["name"] = "n1"
	tdest := filepath.Join(root, "out", "t.conf")
	steptest.MustWrite(t, tdest, "name=old\n")
	hosts := filepath.Join(root, "hosts")
	steptest.MustWrite(t, hosts, "127.0.0.1 localhost\n")
	cases := []struct {
		b    step.Builtin
		args step.Args
		want string
	}{
		{templateBuiltin{}, step.Args{"src": "t.conf.tmpl", "dest": tdest}, "-name=old\n+name=n1"},
		{blockinfileBuiltin{}, step.Args{"path": hosts, "block": "10.0.0.1 n1"}, "+# BEGIN kubexm managed block\n+10.0.0.1 n1\n+# END kubexm managed block"},
	}
	for _, c := range cases {
		steptest.Diffs(t, c.b, env, c.args, c.want)
	}
}
