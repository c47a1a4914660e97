package files

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func TestFileStates(t *testing.T) {
	env, root := steptest.Env(t)
	dir := filepath.Join(root, "a", "b")
	steptest.Converge(t, File{}, env, step.Args{"path": dir, "state": "directory", "mode": "0700"}, root)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", fi, err)
	}
	f := filepath.Join(dir, "f")
	steptest.Converge(t, File{}, env, step.Args{"path": f, "state": "touch", "mode": "0600"}, root)
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("touch: %v %v", fi, err)
	}
	steptest.Converge(t, File{}, env, step.Args{"path": f, "state": "file", "mode": "0640"}, root)
	link := filepath.Join(root, "l")
	steptest.Converge(t, File{}, env, step.Args{"path": link, "state": "link", "src": f}, root)
	if tgt, err := os.Readlink(link); err != nil || tgt != f {
		t.Fatalf("link: %q %v", tgt, err)
	}
	steptest.Converge(t, File{}, env, step.Args{"path": link, "state": "link", "src": dir}, root)
	steptest.Converge(t, File{}, env, step.Args{"path": dir, "state": "directory", "mode": "0755", "recurse": true}, root)
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o755 {
		t.Errorf("recurse: %v", fi.Mode())
	}
	// No state: keep what the path is, fix attributes.
	steptest.Converge(t, File{}, env, step.Args{"path": dir, "mode": "0711"}, root)
	steptest.Converge(t, File{}, env, step.Args{"path": f, "mode": "0600"}, root)
	steptest.Converge(t, File{}, env, step.Args{"path": filepath.Join(root, "l2"), "src": f}, root)
	steptest.Converge(t, File{}, env, step.Args{"path": filepath.Join(root, "a"), "state": "absent"}, root)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("absent")
	}
	for _, bad := range []step.Args{
		{"path": filepath.Join(root, "nope"), "state": "file"},
		{"path": link, "state": "link"},
		{"path": "/", "state": "absent"},
		{"path": f, "state": "weird"},
	} {
		if _, err := steptest.RunBuiltin(t.Context(), env, File{}, bad); err == nil {
			t.Errorf("%v: want error", bad)
		}
	}
}

// TestFileAbsentRefusesSystemDirs: state absent never removes a system
// directory or a parent of one, written directly, with .., or reached
// through a symbolic link on the host; check mode refuses the same.
func TestFileAbsentRefusesSystemDirs(t *testing.T) {
	bothWays(t, testFileAbsentRefusesSystemDirs)
}

// bothWays runs a test of state: absent on the control machine, where
// kubexm removes in its own process, and as on a host, through the
// scripts (the local transport hidden behind the Transport interface).
func bothWays(t *testing.T, test func(t *testing.T, env *step.Env, root string)) {
	for _, onHost := range []bool{false, true} {
		name := "control machine"
		if onHost {
			name = "host"
		}
		t.Run(name, func(t *testing.T) {
			env, root := steptest.Env(t)
			if onHost {
				env.Target = struct{ transport.Transport }{env.Target}
			}
			test(t, env, root)
		})
	}
}

func testFileAbsentRefusesSystemDirs(t *testing.T, env *step.Env, root string) {
	toRoot := filepath.Join(root, "toroot")
	if err := os.Symlink("/", toRoot); err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{true, false} {
		env.Check = check
		for _, p := range []string{"/", "/etc", "/etc/", "/usr/local/bin", "/usr/local", "/var/lib", "//var//lib",
			"/usr/lib/systemd", "/x/../etc", "relative/dir", filepath.Join(toRoot, "etc"), filepath.Join(toRoot, "usr")} {
			_, err := steptest.RunBuiltin(t.Context(), env, File{}, step.Args{"path": p, "state": "absent"})
			if err == nil || !strings.Contains(err.Error(), "refusing") {
				t.Errorf("check=%v: removing %q: got %v, want a refusal", check, p, err)
			}
		}
	}
	if _, err := os.Stat("/etc"); err != nil {
		t.Fatal(err)
	}
	// A directory of kubexm's below a system directory is fine, and a
	// symbolic link is removed as a link, never followed.
	env.Check = false
	link := filepath.Join(root, "link-to-etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	steptest.Converge(t, File{}, env, step.Args{"path": link, "state": "absent"}, root)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("link not removed: %v", err)
	}
}

// TestFileAbsentUnmount: unmount: true unmounts what is mounted below the
// path; a path that is a mount point itself is emptied, not removed.
func TestFileAbsentUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	bothWays(t, testFileAbsentUnmount)
}

func testFileAbsentUnmount(t *testing.T, env *step.Env, root string) {
	top := filepath.Join(root, "data")
	inner := filepath.Join(top, "pods", "vol")
	steptest.MustWrite(t, filepath.Join(inner, "x"), "")
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", inner).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", inner).Run() })
	steptest.MustWrite(t, filepath.Join(inner, "secret"), "s")
	// Without unmount, rm stays on its file system and fails on the mount.
	if _, err := steptest.RunBuiltin(t.Context(), env, File{}, step.Args{"path": top, "state": "absent"}); err == nil {
		t.Fatal("removing a tree with a mount below it without unmount: want an error")
	}
	if b, err := os.ReadFile(filepath.Join(inner, "secret")); err != nil || string(b) != "s" {
		t.Fatalf("the mounted file system's file after the refusal: %q %v", b, err)
	}
	steptest.Converge(t, File{}, env, step.Args{"path": top, "state": "absent", "unmount": true}, root)
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Fatalf("not removed: %v", err)
	}
	// A mount point itself is emptied.
	mp := filepath.Join(root, "mp")
	steptest.MustWrite(t, filepath.Join(mp, "keep"), "")
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", mp).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mp).Run() })
	steptest.MustWrite(t, filepath.Join(mp, "a", "b"), "x")
	res := steptest.Run(t, File{}, env, step.Args{"path": mp, "state": "absent", "unmount": true})
	if !res.Changed || !strings.Contains(res.Msg, "empty") {
		t.Errorf("mount point: %+v", res)
	}
	if ents, err := os.ReadDir(mp); err != nil || len(ents) != 0 {
		t.Errorf("mount point not emptied: %v %v", ents, err)
	}
	// An empty mount point is what a first delete leaves: nothing to do.
	for _, check := range []bool{true, false} {
		env.Check = check
		if res := steptest.Run(t, File{}, env, step.Args{"path": mp, "state": "absent", "unmount": true}); res.Changed {
			t.Errorf("check=%v: an empty mount point again: %+v", check, res)
		}
	}
}
