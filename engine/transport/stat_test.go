package transport

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// shellHost runs commands on this machine, become or not: enough for the
// script StatCommand sends (the files are this user's own).
type shellHost struct {
	Transport
	sent []Command
}

func (h *shellHost) Host() string { return "here" }

func (h *shellHost) Run(ctx context.Context, c Command) (Result, error) {
	h.sent = append(h.sent, c)
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Result{Stdout: out.Bytes(), Stderr: errOut.Bytes(), ExitCode: ee.ExitCode()}, nil
	}
	return Result{Stdout: out.Bytes(), Stderr: errOut.Bytes()}, err
}

func TestStatCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("twelve bytes"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o750|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink("/no/such/target", link); err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	h := &shellHost{}
	ctx := context.Background()

	fi, err := StatCommand(ctx, h, file)
	if err != nil || !fi.Exists || fi.IsDir || fi.IsLink || fi.Size != 12 || fi.Mode != 0o750|os.ModeSetuid || fi.Owner != me.Username || fi.ModTime.IsZero() {
		t.Errorf("file: %+v %v", fi, err)
	}
	if !h.sent[0].Become || h.sent[0].Argv[len(h.sent[0].Argv)-1] != file {
		t.Errorf("the path is not passed as an argument through become: %+v", h.sent[0])
	}
	if fi, err := StatCommand(ctx, h, dir); err != nil || !fi.IsDir {
		t.Errorf("dir: %+v %v", fi, err)
	}
	// A dangling symlink exists, as itself.
	if fi, err := StatCommand(ctx, h, link); err != nil || !fi.Exists || !fi.IsLink || fi.LinkTarget != "/no/such/target" {
		t.Errorf("link: %+v %v", fi, err)
	}
	if fi, err := StatCommand(ctx, h, filepath.Join(dir, "missing")); err != nil || fi.Exists {
		t.Errorf("missing: %+v %v", fi, err)
	}
	// A name that is shell syntax is only ever an argument.
	odd := filepath.Join(dir, "a b'; touch x")
	if fi, err := StatCommand(ctx, h, odd); err != nil || fi.Exists {
		t.Errorf("odd name: %+v %v", fi, err)
	}
	if _, err := os.Stat("x"); err == nil {
		t.Error("a path name ran as a command")
	}
}

func TestParseStat(t *testing.T) {
	fi, err := parseStat("81ed 12 1700000000 root wheel\n")
	if err != nil || fi.Mode != 0o755 || fi.IsDir || fi.Size != 12 || fi.Owner != "root" || fi.Group != "wheel" || fi.ModTime.Unix() != 1700000000 {
		t.Fatalf("%+v %v", fi, err)
	}
	if fi, _ := parseStat("41ed 4096 1 a b\n"); !fi.IsDir {
		t.Fatal("dir not recognised")
	}
	if fi, _ := parseStat("a1ff 7 1 a b\n/target\n"); !fi.IsLink || fi.LinkTarget != "/target" {
		t.Fatalf("link: %+v", fi)
	}
	for _, bad := range []string{"garbage", "81ed x 1 a b", ""} {
		if _, err := parseStat(bad); err == nil || !strings.Contains(err.Error(), "unexpected stat output") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if UnixMode(0o755|os.ModeSetuid) != 0o4755 || FromUnixMode(0o4755) != 0o755|os.ModeSetuid || FromUnixMode(0o1777) != 0o777|os.ModeSticky {
		t.Fatal("special bits")
	}
}
