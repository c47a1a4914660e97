//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildArtifact runs test/artifacts/<script> with args and the settings env
// (KEY=value, added to this process's environment), which builds an
// artifact into the test cache on first use or finds it there, and returns
// the last line it printed: the scripts print where they laid it out.
func buildArtifact(ctx context.Context, t *testing.T, root string, env []string, script string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "test", "artifacts", script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test/artifacts/%s: %v", strings.Join(append([]string{script}, args...), " "), err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
