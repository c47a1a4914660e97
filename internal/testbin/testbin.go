// Package testbin builds small programs for tests that need a real
// executable of a given kind, such as the static binary operator mode's
// controller image takes.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Static builds an empty Go program, statically linked as make build links
// kubexm (CGO_ENABLED=0), and returns its path, named kubexm.
func Static(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kubexm")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}
