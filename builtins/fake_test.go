package builtins

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// fakeHost is a scripted transport for builtins that need root or a real
// init (systemd, package managers, users): it records the commands and
// answers them from a table, and keeps files in memory.
type fakeHost struct {
	mu    sync.Mutex
	cmds  []string
	files map[string]string
	links map[string]string // symlink path -> target
	// answer returns the result for a command line (argv joined by spaces,
	// or the script for sh -c); ok false means "not scripted" (rc 127).
	answer func(cmd string) (transport.Result, bool)
}

func newFake(answer func(cmd string) (transport.Result, bool)) *fakeHost {
	return &fakeHost{files: map[string]string{}, links: map[string]string{}, answer: answer}
}

func fakeEnv(h *fakeHost) *step.Env {
	return &step.Env{Host: "fake", Target: h, Control: h, Vars: map[string]any{}, Logf: func(string, ...any) {}}
}

func ok(out string) (transport.Result, bool) { return transport.Result{Stdout: []byte(out)}, true }
func rc(code int, out, errOut string) (transport.Result, bool) {
	return transport.Result{ExitCode: code, Stdout: []byte(out), Stderr: []byte(errOut)}, true
}

func (f *fakeHost) Host() string { return "fake" }
func (f *fakeHost) Close() error { return nil }

func (f *fakeHost) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	line := c.Script
	if len(c.Argv) > 0 {
		line = strings.Join(c.Argv, " ")
	}
	f.mu.Lock()
	f.cmds = append(f.cmds, line)
	f.mu.Unlock()
	if res, ok := f.answer(line); ok {
		return res, nil
	}
	return transport.Result{ExitCode: 127, Stderr: []byte("not scripted: " + line)}, nil
}

func (f *fakeHost) Put(_ context.Context, src io.Reader, dst string, _ transport.PutOptions) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[dst] = string(b)
	return nil
}

func (f *fakeHost) PutFile(context.Context, string, string, transport.PutOptions) (bool, error) {
	return false, fmt.Errorf("fake: PutFile not supported")
}

func (f *fakeHost) Get(_ context.Context, src string, w io.Writer, _ bool) error {
	f.mu.Lock()
	s, ok := f.files[src]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("fake: %s: no such file", src)
	}
	_, err := io.Copy(w, strings.NewReader(s))
	return err
}

func (f *fakeHost) Stat(_ context.Context, p string, _ bool) (transport.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tgt, ok := f.links[p]; ok {
		return transport.FileInfo{Exists: true, IsLink: true, LinkTarget: tgt, Mode: 0o777, Owner: "root", Group: "root"}, nil
	}
	if s, ok := f.files[p]; ok {
		return transport.FileInfo{Exists: true, Mode: 0o644, Size: int64(len(s)), Owner: "root", Group: "root"}, nil
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range f.files {
		if strings.HasPrefix(k, prefix) {
			return transport.FileInfo{Exists: true, IsDir: true, Mode: 0o755}, nil
		}
	}
	return transport.FileInfo{}, nil
}

func (f *fakeHost) Sha256(_ context.Context, p string, _ bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.files[p]; ok {
		return sha256Hex([]byte(s)), nil
	}
	return "", nil
}

// ran reports the recorded commands that mutate (those matching any of
// the given prefixes).
func (f *fakeHost) ran(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.cmds {
		for _, p := range prefixes {
			if strings.HasPrefix(c, p) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
