package files

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func TestCopyContent(t *testing.T) {
	env, root := steptest.Env(t)
	dest := filepath.Join(root, "etc", "app.conf")
	env.Diff = true
	res := steptest.Converge(t, copyBuiltin{}, env, step.Args{"content": "a=1\n", "dest": dest, "mode": "0640"}, root)
	if !strings.Contains(res.Diff, "+a=1") {
		t.Errorf("diff: %q", res.Diff)
	}
	fi, _ := os.Stat(dest)
	if fi.Mode().Perm() != 0o640 || steptest.MustRead(t, dest) != "a=1\n" {
		t.Errorf("mode %v content %q", fi.Mode(), steptest.MustRead(t, dest))
	}
	// A changed content with backup keeps the old file and shows a diff.
	res = steptest.Run(t, copyBuiltin{}, env, step.Args{"content": "a=2\n", "dest": dest, "backup": true})
	if !res.Changed || !strings.Contains(res.Diff, "-a=1\n+a=2") {
		t.Fatalf("%+v", res)
	}
	bak, _ := res.Data["backup_file"].(string)
	if steptest.MustRead(t, bak) != "a=1\n" {
		t.Errorf("backup %s", bak)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode not kept: %v", fi.Mode())
	}
	// Only the mode differs: corrected, reported as changed.
	res = steptest.Run(t, copyBuiltin{}, env, step.Args{"content": "a=2\n", "dest": dest, "mode": "0600"})
	if !res.Changed || !strings.Contains(res.Msg, "0640 -> 0600") {
		t.Errorf("%+v", res)
	}
}

func TestCopySrcFromFiles(t *testing.T) {
	env, root := steptest.Env(t)
	steptest.MustWrite(t, filepath.Join(root, "files", "x.txt"), "hello\n")
	out := filepath.Join(root, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	steptest.Converge(t, copyBuiltin{}, env, step.Args{"src": "x.txt", "dest": out}, out)
	if steptest.MustRead(t, filepath.Join(out, "x.txt")) != "hello\n" {
		t.Error("content")
	}
	// force: false leaves an existing file alone.
	steptest.MustWrite(t, filepath.Join(root, "files", "x.txt"), "changed\n")
	if res := steptest.Run(t, copyBuiltin{}, env, step.Args{"src": "x.txt", "dest": out, "force": false}); res.Changed {
		t.Errorf("force false changed: %+v", res)
	}
	_, err := steptest.RunBuiltin(t.Context(), env, copyBuiltin{}, step.Args{"src": "missing.txt", "dest": out})
	if err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("want error naming the file, got %v", err)
	}
}

func TestCopyLargeFile(t *testing.T) {
	env, root := steptest.Env(t)
	big := strings.Repeat("0123456789abcdef", diffLimit/16+1)
	src := filepath.Join(root, "big.bin")
	steptest.MustWrite(t, src, big)
	out := filepath.Join(root, "out")
	steptest.Converge(t, copyBuiltin{}, env, step.Args{"src": src, "dest": out + "/"}, out)
	if steptest.MustRead(t, filepath.Join(out, "big.bin")) != big {
		t.Error("content")
	}
}

func TestTemplate(t *testing.T) {
	env, root := steptest.Env(t)
	steptest.MustWrite(t, filepath.Join(root, "templates", "c.conf.tmpl"), "name={{ name }}\n")
	env.Vars["name"] = "n1"
	dest := filepath.Join(root, "out", "c.conf")
	steptest.Converge(t, templateBuiltin{}, env, step.Args{"src": "c.conf.tmpl", "dest": dest}, filepath.Join(root, "out"))
	if got := steptest.MustRead(t, dest); got != "name=n1\n" {
		t.Errorf("got %q", got)
	}
	env.Vars = map[string]any{}
	if _, err := steptest.RunBuiltin(t.Context(), env, templateBuiltin{}, step.Args{"src": "c.conf.tmpl", "dest": dest}); err == nil || !strings.Contains(err.Error(), "c.conf.tmpl") {
		t.Errorf("want render error naming the template, got %v", err)
	}
}

func TestFetch(t *testing.T) {
	env, root := steptest.Env(t)
	src := filepath.Join(root, "remote", "admin.conf")
	steptest.MustWrite(t, src, "secret\n")
	res := steptest.Converge(t, fetchBuiltin{}, env, step.Args{"src": src, "dest": "fetched"}, env.WorkDir)
	want := filepath.Join(env.WorkDir, "fetched", "node1", src)
	if res.Data["dest"] != want || steptest.MustRead(t, want) != "secret\n" {
		t.Errorf("%+v", res)
	}
	flat := filepath.Join(root, "flat") + "/"
	steptest.Run(t, fetchBuiltin{}, env, step.Args{"src": src, "dest": flat, "flat": true})
	if steptest.MustRead(t, filepath.Join(root, "flat", "admin.conf")) != "secret\n" {
		t.Error("flat")
	}
	if res := steptest.Run(t, fetchBuiltin{}, env, step.Args{"src": src + ".no", "dest": flat, "flat": true, "fail_on_missing": false}); res.Changed {
		t.Error("missing changed")
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, fetchBuiltin{}, step.Args{"src": src + ".no", "dest": flat, "flat": true}); err == nil {
		t.Error("missing src: want error")
	}
	// Owner-only unless a mode is given; the same content with another
	// mode gets the mode asked, then nothing changes.
	if fi, err := os.Stat(want); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the copy's mode: %v %v", fi.Mode(), err)
	}
	res = steptest.Converge(t, fetchBuiltin{}, env, step.Args{"src": src, "dest": "fetched", "mode": "0644"}, env.WorkDir)
	if fi, err := os.Stat(want); err != nil || fi.Mode().Perm() != 0o644 || !res.Changed {
		t.Errorf("mode 0644: %v %v %+v", fi.Mode(), err, res)
	}
}

// readCounter counts the reads and sums a builtin asks of the host.
type readCounter struct {
	transport.Transport
	gets, sums int
}

func (c *readCounter) Get(ctx context.Context, p string, w io.Writer, become bool) error {
	c.gets++
	return c.Transport.Get(ctx, p, w, become)
}

func (c *readCounter) Sha256(ctx context.Context, p string, become bool) (string, error) {
	c.sums++
	return c.Transport.Sha256(ctx, p, become)
}

// TestCopyComparesWhatIsThere: a file already written is compared with the
// content by reading it back (no sum on the host), one byte changed with
// the size and mtime kept is found and put back, a file of another size is
// rewritten without being read, and an empty file, a large one and a
// symbolic link are compared by their sum.
func TestCopyComparesWhatIsThere(t *testing.T) {
	env, root := steptest.Env(t)
	host := &readCounter{Transport: env.Target}
	env.Target = host
	dest := filepath.Join(root, "app.conf")
	args := step.Args{"content": "a=1\nb=2\n", "dest": dest}
	steptest.Converge(t, copyBuiltin{}, env, args, root)
	reset := func() { host.gets, host.sums = 0, 0 }

	reset()
	if res := steptest.Run(t, copyBuiltin{}, env, args); res.Changed || host.gets != 1 || host.sums != 0 {
		t.Errorf("unchanged file: changed %v, %d reads, %d sums; want 1 read, no sum", res.Changed, host.gets, host.sums)
	}
	fi, _ := os.Stat(dest)
	steptest.MustWrite(t, dest, "a=1\nb=3\n")
	if err := os.Chtimes(dest, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if res := steptest.Run(t, copyBuiltin{}, env, args); !res.Changed || steptest.MustRead(t, dest) != "a=1\nb=2\n" {
		t.Errorf("one byte changed, size and mtime kept: changed %v, content %q", res.Changed, steptest.MustRead(t, dest))
	}
	steptest.MustWrite(t, dest, "a=1\n")
	reset()
	if res := steptest.Run(t, copyBuiltin{}, env, args); !res.Changed || host.gets != 0 || host.sums != 0 || steptest.MustRead(t, dest) != "a=1\nb=2\n" {
		t.Errorf("another size: changed %v, %d reads, %d sums, content %q", res.Changed, host.gets, host.sums, steptest.MustRead(t, dest))
	}

	empty := filepath.Join(root, "empty")
	steptest.MustWrite(t, empty, "")
	reset()
	if res := steptest.Run(t, copyBuiltin{}, env, step.Args{"content": "", "dest": empty}); res.Changed || host.gets != 0 || host.sums != 1 {
		t.Errorf("empty file: changed %v, %d reads, %d sums; want its sum", res.Changed, host.gets, host.sums)
	}
	large := strings.Repeat("x", onhost.ReadCompareMax+1)
	big := filepath.Join(root, "big")
	steptest.MustWrite(t, big, large)
	reset()
	if res := steptest.Run(t, copyBuiltin{}, env, step.Args{"content": large, "dest": big}); res.Changed || host.gets != 0 || host.sums != 1 {
		t.Errorf("large file: changed %v, %d reads, %d sums; want its sum", res.Changed, host.gets, host.sums)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(dest, link); err != nil {
		t.Fatal(err)
	}
	reset()
	if res := steptest.Run(t, copyBuiltin{}, env, step.Args{"content": "a=1\nb=2\n", "dest": link}); res.Changed || host.gets != 0 || host.sums != 1 {
		t.Errorf("symbolic link: changed %v, %d reads, %d sums; want the sum of its target", res.Changed, host.gets, host.sums)
	}
}
