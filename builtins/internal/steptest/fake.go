// Package steptest holds the builtins' test helpers: a scripted host, an
// Env on the local transport, and running a builtin to convergence. Only
// tests import it.
package steptest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// FakeHost is a scripted transport for builtins that need root or a real
// init (systemd, package managers, users): it records the commands and
// answers them from a table, and keeps files in memory.
type FakeHost struct {
	mu    sync.Mutex
	Cmds  []string
	Files map[string]string
	Links map[string]string // symlink path -> target
	// answer returns the result for a command line (argv joined by spaces,
	// or the script for sh -c); ok false means "not scripted" (rc 127).
	Answer func(cmd string) (transport.Result, bool)
}

// NewFake is a scripted host answering commands with answer.
func NewFake(answer func(cmd string) (transport.Result, bool)) *FakeHost {
	return &FakeHost{Files: map[string]string{}, Links: map[string]string{}, Answer: answer}
}

// FakeEnv is an Env whose target and control machine are h.
func FakeEnv(h *FakeHost) *step.Env {
	return &step.Env{Host: "fake", Target: h, Control: h, Vars: map[string]any{}, Logf: func(string, ...any) {}}
}

// OK answers a scripted command with exit 0 and out.
func OK(out string) (transport.Result, bool) { return transport.Result{Stdout: []byte(out)}, true }

// RC answers a scripted command with code and its output.
func RC(code int, out, errOut string) (transport.Result, bool) {
	return transport.Result{ExitCode: code, Stdout: []byte(out), Stderr: []byte(errOut)}, true
}

func (f *FakeHost) Host() string { return "fake" }
func (f *FakeHost) Close() error { return nil }

func (f *FakeHost) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	line := c.Script
	if len(c.Argv) > 0 {
		line = strings.Join(c.Argv, " ")
	}
	f.mu.Lock()
	f.Cmds = append(f.Cmds, line)
	f.mu.Unlock()
	if res, ok := f.Answer(line); ok {
		return res, nil
	}
	return transport.Result{ExitCode: 127, Stderr: []byte("not scripted: " + line)}, nil
}

func (f *FakeHost) Put(_ context.Context, src io.Reader, dst string, _ transport.PutOptions) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Files[dst] = string(b)
	return nil
}

func (f *FakeHost) PutFile(context.Context, string, string, transport.PutOptions) (bool, error) {
	return false, fmt.Errorf("fake: PutFile not supported")
}

func (f *FakeHost) Get(_ context.Context, src string, w io.Writer, _ bool) error {
	f.mu.Lock()
	s, ok := f.Files[src]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("fake: %s: no such file", src)
	}
	_, err := io.Copy(w, strings.NewReader(s))
	return err
}

func (f *FakeHost) Stat(_ context.Context, p string, _ bool) (transport.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tgt, ok := f.Links[p]; ok {
		return transport.FileInfo{Exists: true, IsLink: true, LinkTarget: tgt, Mode: 0o777, Owner: "root", Group: "root"}, nil
	}
	if s, ok := f.Files[p]; ok {
		return transport.FileInfo{Exists: true, Mode: 0o644, Size: int64(len(s)), Owner: "root", Group: "root"}, nil
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range f.Files {
		if strings.HasPrefix(k, prefix) {
			return transport.FileInfo{Exists: true, IsDir: true, Mode: 0o755}, nil
		}
	}
	return transport.FileInfo{}, nil
}

func (f *FakeHost) Sha256(_ context.Context, p string, _ bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.Files[p]; ok {
		return onhost.SHA256Hex([]byte(s)), nil
	}
	return "", nil
}

// ran reports the recorded commands that mutate (those matching any of
// the given prefixes).
func (f *FakeHost) Ran(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.Cmds {
		for _, p := range prefixes {
			if strings.HasPrefix(c, p) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
