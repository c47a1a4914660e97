package builtins

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
)

func TestFileStates(t *testing.T) {
	env, root := testEnv(t)
	dir := filepath.Join(root, "a", "b")
	converge(t, fileBuiltin{}, env, step.Args{"path": dir, "state": "directory", "mode": "0700"}, root)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", fi, err)
	}
	f := filepath.Join(dir, "f")
	converge(t, fileBuiltin{}, env, step.Args{"path": f, "state": "touch", "mode": "0600"}, root)
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("touch: %v %v", fi, err)
	}
	converge(t, fileBuiltin{}, env, step.Args{"path": f, "state": "file", "mode": "0640"}, root)
	link := filepath.Join(root, "l")
	converge(t, fileBuiltin{}, env, step.Args{"path": link, "state": "link", "src": f}, root)
	if tgt, err := os.Readlink(link); err != nil || tgt != f {
		t.Fatalf("link: %q %v", tgt, err)
	}
	converge(t, fileBuiltin{}, env, step.Args{"path": link, "state": "link", "src": dir}, root)
	converge(t, fileBuiltin{}, env, step.Args{"path": dir, "state": "directory", "mode": "0755", "recurse": true}, root)
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o755 {
		t.Errorf("recurse: %v", fi.Mode())
	}
	// No state: keep what the path is, fix attributes.
	converge(t, fileBuiltin{}, env, step.Args{"path": dir, "mode": "0711"}, root)
	converge(t, fileBuiltin{}, env, step.Args{"path": f, "mode": "0600"}, root)
	converge(t, fileBuiltin{}, env, step.Args{"path": filepath.Join(root, "l2"), "src": f}, root)
	converge(t, fileBuiltin{}, env, step.Args{"path": filepath.Join(root, "a"), "state": "absent"}, root)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("absent")
	}
	for _, bad := range []step.Args{
		{"path": filepath.Join(root, "nope"), "state": "file"},
		{"path": link, "state": "link"},
		{"path": "/", "state": "absent"},
		{"path": f, "state": "weird"},
	} {
		if _, err := (fileBuiltin{}).Run(t.Context(), env, bad); err == nil {
			t.Errorf("%v: want error", bad)
		}
	}
}
