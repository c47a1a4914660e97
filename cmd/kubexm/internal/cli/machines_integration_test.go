//go:build integration

package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// ownMachines starts n test machines for one test, under
// $KUBEXM_TEST_OWN_PREFIX (else a random prefix), and brings them down
// when the test ends.
func ownMachines(ctx context.Context, t *testing.T, n int) *testhosts.Set {
	t.Helper()
	prefix := os.Getenv("KUBEXM_TEST_OWN_PREFIX")
	if prefix == "" {
		var err error
		if prefix, err = testhosts.NewPrefix(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := testhosts.Down(context.Background(), prefix); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	set, err := testhosts.Up(ctx, n, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// buildKubexm builds the kubexm binary for a test that runs it as users do.
func buildKubexm(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubexm")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/mensylisir/kubexm/cmd/kubexm").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}
