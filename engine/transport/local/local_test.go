package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

func TestRunCapturesOutputAndExitCode(t *testing.T) {
	tr := New("localhost")
	res, err := tr.Run(context.Background(), transport.Command{Script: "echo out; echo err >&2; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 7 {
		t.Fatalf("got stdout=%q stderr=%q rc=%d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func TestRunArgvEnvDirStdin(t *testing.T) {
	tr := New("localhost")
	dir := t.TempDir()
	res, err := tr.Run(context.Background(), transport.Command{
		Argv:  []string{"/bin/sh", "-c", `printf '%s|%s|' "$FOO" "$(pwd)"; cat`},
		Env:   map[string]string{"FOO": "bar baz"},
		Dir:   dir,
		Stdin: strings.NewReader("in"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "bar baz|" + dir + "|in"; string(res.Stdout) != want {
		t.Fatalf("got %q, want %q", res.Stdout, want)
	}
}

func TestRunOutputCap(t *testing.T) {
	tr := New("localhost")
	tr.OutputCap = 10
	var stream bytes.Buffer
	res, err := tr.Run(context.Background(), transport.Command{Script: "printf 0123456789abcdef", Stdout: &stream})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "0123456789" || !res.Truncated || stream.String() != "0123456789abcdef" {
		t.Fatalf("got %q truncated=%v stream=%q", res.Stdout, res.Truncated, stream.String())
	}
}

func TestRunCancelKillsChildren(t *testing.T) {
	tr := New("localhost")
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tr.Run(ctx, transport.Command{Script: "sleep 600 & echo $! > " + pidFile + "; wait"})
		done <- err
	}()
	var pid string
	for i := 0; i < 200 && pid == ""; i++ {
		b, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(b))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == "" {
		t.Fatal("command did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			return
		}
		if b, _ := os.ReadFile("/proc/" + pid + "/stat"); strings.Contains(string(b), ") Z ") {
			return // zombie: killed, waiting for reaping by init
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep %s still running after cancel", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunTimeout(t *testing.T) {
	tr := New("localhost")
	start := time.Now()
	_, err := tr.Run(context.Background(), transport.Command{Script: "sleep 30", Timeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("timeout not honoured")
	}
}

func TestPutFileSkipsSameContent(t *testing.T) {
	ctx := context.Background()
	tr := New("localhost")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "a", "b", "dst")
	changed, err := tr.PutFile(ctx, src, dst, transport.PutOptions{Mode: 0o640})
	if err != nil || !changed {
		t.Fatalf("first put: changed=%v err=%v", changed, err)
	}
	fi, _ := os.Stat(dst)
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	changed, err = tr.PutFile(ctx, src, dst, transport.PutOptions{Mode: 0o640})
	if err != nil || changed {
		t.Fatalf("second put: changed=%v err=%v", changed, err)
	}
	changed, err = tr.PutFile(ctx, src, dst, transport.PutOptions{Mode: 0o600})
	if err != nil || !changed {
		t.Fatalf("mode change: changed=%v err=%v", changed, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestStatShaGet(t *testing.T) {
	ctx := context.Background()
	tr := New("localhost")
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := tr.Put(ctx, strings.NewReader("abc"), p, transport.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	sum, err := tr.Sha256(ctx, p, false)
	if err != nil || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("sha %q %v", sum, err)
	}
	if sum, err := tr.Sha256(ctx, filepath.Join(dir, "missing"), false); sum != "" || err != nil {
		t.Fatalf("missing file: %q %v", sum, err)
	}
	fi, err := tr.Stat(ctx, p, false)
	if err != nil || !fi.Exists || fi.IsDir || fi.Size != 3 || fi.Mode != 0o644 {
		t.Fatalf("stat %+v %v", fi, err)
	}
	if fi, _ := tr.Stat(ctx, filepath.Join(dir, "missing"), false); fi.Exists {
		t.Fatal("missing file exists")
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := tr.Stat(ctx, filepath.Join(dir, "l"), false); !fi.IsLink || fi.LinkTarget != "f" {
		t.Fatalf("link %+v", fi)
	}
	var buf bytes.Buffer
	if err := tr.Get(ctx, p, &buf, false); err != nil || buf.String() != "abc" {
		t.Fatalf("get %q %v", buf.String(), err)
	}
}

// A numeric owner or group matches the name Stat reports for that id, so a
// second PutFile with the same content is not a change.
func TestPutFileNumericOwnerIsNotAChange(t *testing.T) {
	ctx := context.Background()
	tr := New("localhost")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	// Our own ids: chown to them needs no privilege.
	opts := transport.PutOptions{Mode: 0o644, Owner: strconv.Itoa(os.Getuid()), Group: strconv.Itoa(os.Getgid())}
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || !changed {
		t.Fatalf("first put: changed=%v err=%v", changed, err)
	}
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || changed {
		t.Fatalf("second put with numeric owner %s:%s: changed=%v err=%v", opts.Owner, opts.Group, changed, err)
	}
}

// The local transport's temporary file is 0600 while it is written.
func TestLocalUploadNotWorldReadableWhileWritten(t *testing.T) {
	tr := New("localhost")
	dir := t.TempDir()
	dst := filepath.Join(dir, "secret.conf")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- tr.Put(context.Background(), pr, dst, transport.PutOptions{Mode: 0o644}) }()
	if _, err := pw.Write([]byte("password = hunter2\n")); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), ".secret.conf.kubexm-") {
		t.Fatalf("entries while writing: %v", ents)
	}
	st, err := os.Stat(filepath.Join(dir, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("temporary file is %v while written", st.Mode().Perm())
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("final file: %v %v", st, err)
	}
}

func TestSha256WithSums(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := New("control", WithSums(&transport.SumCache{}))
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if sum, err := tr.Sha256(ctx, p, false); err != nil || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
			t.Fatalf("sum %d: %q %v", i, sum, err)
		}
	}
	if sum, err := tr.Sha256(ctx, filepath.Join(dir, "missing"), false); sum != "" || err != nil {
		t.Errorf("missing file: %q %v, want no sum and no error", sum, err)
	}
	if _, err := tr.Sha256(ctx, dir, false); err == nil {
		t.Error("a directory was summed")
	}
}

// SumTree in Go lists what the command (find -type f, sha256sum) lists on
// the same tree: nested files, not the links below the root (to a file or
// a directory), the root itself through a link; absent and not a
// directory as the command reports them.
func TestSumTreeAsTheCommand(t *testing.T) {
	ctx := context.Background()
	tr := New("localhost")
	dir := t.TempDir()
	root := filepath.Join(dir, "tree")
	for name, content := range map[string]string{"ca.crt": "a", "etcd/ca.key": "b", "etcd/sub/x@y+z": "c", ".hidden": "d"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("e"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link-dir")); err != nil {
		t.Fatal(err)
	}
	rootLink := filepath.Join(dir, "root-link")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, rootLink} {
		got, exists, err := tr.SumTree(ctx, d, false)
		if err != nil || !exists {
			t.Fatalf("SumTree(%s): %v, exists %v", d, err, exists)
		}
		want, wantExists, err := transport.SumTreeCommand(ctx, tr, d, false)
		if err != nil || !wantExists {
			t.Fatalf("SumTreeCommand(%s): %v, exists %v", d, err, wantExists)
		}
		if len(got) != 4 || !maps.Equal(got, want) {
			t.Errorf("SumTree(%s) = %v, the command lists %v", d, got, want)
		}
	}
	if files, exists, err := tr.SumTree(ctx, filepath.Join(dir, "absent"), false); err != nil || exists || len(files) != 0 {
		t.Errorf("SumTree of an absent directory: %v, exists %v, %v", files, exists, err)
	}
	if _, _, err := tr.SumTree(ctx, filepath.Join(root, "ca.crt"), false); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("SumTree of a file: %v, want not a directory", err)
	}
}

// MkdirAll in Go makes the directories and their parents with the mode.
func TestMkdirAll(t *testing.T) {
	dir := t.TempDir()
	dirs := []string{filepath.Join(dir, "certs"), filepath.Join(dir, "certs", "etcd", "sub")}
	if err := New("localhost").MkdirAll(context.Background(), dirs, 0o700, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi, err)
		}
	}
}
