package steptest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport/local"
)

// Env is an Env on the local transport whose role files live in
// <tmp>/files and <tmp>/templates and whose work dir is <tmp>/work.
func Env(t testing.TB) (*step.Env, string) {
	t.Helper()
	root := t.TempDir()
	lt := local.New("localhost")
	var logs []string
	env := &step.Env{
		Host:    "node1",
		Target:  lt,
		Control: lt,
		Vars:    map[string]any{},
		Render: func(text string, vars map[string]any) (string, error) {
			// A minimal {{ name }} expander: the real engine is tested elsewhere.
			for k, v := range vars {
				text = strings.ReplaceAll(text, "{{ "+k+" }}", fmt.Sprint(v))
			}
			if strings.Contains(text, "{{") {
				return "", fmt.Errorf("undefined variable in %q", text)
			}
			return text, nil
		},
		Eval: func(expr string, vars map[string]any) (any, error) {
			switch expr {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			if v, ok := vars[expr]; ok {
				return v, nil
			}
			return nil, fmt.Errorf("unknown name %q", expr)
		},
		FindFile: func(kind, name string) (string, error) {
			p := filepath.Join(root, kind, name)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%s/%s not found", kind, name)
			}
			return p, nil
		},
		WorkDir: filepath.Join(root, "work"),
		Logf:    func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
	}
	return env, root
}

// MustWrite writes a file, creating its directory.
func MustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// MustRead reads a file.
func MustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func Run(t *testing.T, b step.Builtin, env *step.Env, args step.Args) step.Result {
	t.Helper()
	res, err := RunBuiltin(context.Background(), env, b, args)
	if err != nil {
		t.Fatalf("%s: %v", b.Spec().Name, err)
	}
	return res
}

// Snapshot describes every path under dir (type, mode, content, link
// target) so a test can tell whether anything changed.
func Snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", p, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			line += " -> " + tgt
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Converge runs b three times: in check mode (must report changed and leave
// dir untouched), for real (changed), and again (unchanged). It returns the
// real run's result.
func Converge(t *testing.T, b step.Builtin, env *step.Env, args step.Args, dir string) step.Result {
	t.Helper()
	before := Snapshot(t, dir)
	env.Check = true
	res := Run(t, b, env, args)
	env.Check = false
	if !res.Changed {
		t.Fatalf("check mode: want changed, got %+v", res)
	}
	if after := Snapshot(t, dir); after != before {
		t.Fatalf("check mode changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	first := Run(t, b, env, args)
	if !first.Changed || first.Failed {
		t.Fatalf("first run: want changed, got %+v", first)
	}
	second := Run(t, b, env, args)
	if second.Changed || second.Failed {
		t.Fatalf("second run: want unchanged, got %+v", second)
	}
	env.Check = true
	third := Run(t, b, env, args)
	env.Check = false
	if third.Changed {
		t.Fatalf("check mode after converging: want unchanged, got %+v", third)
	}
	return first
}

// RunBuiltin runs b as the engine would: with its Spec's defaults for what
// args leave out.
func RunBuiltin(ctx context.Context, env *step.Env, b step.Builtin, args step.Args) (step.Result, error) {
	return b.Run(ctx, env, b.Spec().WithDefaults(args))
}

// Diffs runs b in check mode, then twice for real, on an Env with Diff set:
// the first two must change and show want in their diff, the last neither.
func Diffs(t *testing.T, b step.Builtin, env *step.Env, args step.Args, want string) {
	t.Helper()
	name := b.Spec().Name
	env.Check = true
	res := Run(t, b, env, args)
	env.Check = false
	if !res.Changed || !strings.Contains(res.Diff, want) {
		t.Errorf("%s check diff: %+v\n%s", name, res, res.Diff)
	}
	if res := Run(t, b, env, args); !res.Changed || !strings.Contains(res.Diff, want) {
		t.Errorf("%s diff: %+v\n%s", name, res, res.Diff)
	}
	if res := Run(t, b, env, args); res.Changed || res.Diff != "" {
		t.Errorf("%s second run: %+v\n%s", name, res, res.Diff)
	}
}
