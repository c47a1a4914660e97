//go:build integration

package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// --ssh-persist with the real binary on a test machine: the command leaves
// a keeper behind, and the next command works through it without logging
// in to the host again.
func TestSSHPersistOnATestMachine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set := ownMachines(ctx, t, 1)
	bin := buildKubexm(ctx, t)
	home := t.TempDir()
	dir := t.TempDir()
	keepers := "^" + strings.ReplaceAll(bin, ".", `\.`) + " ssh-keeper"
	t.Cleanup(func() { _ = exec.Command("pkill", "-f", keepers).Run() })
	run := func() string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, "--ssh-persist", "60s", "run", "command", "-f", set.InventoryPath, "--nodes", "n1", "--", "echo", "kept")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBEXM_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "kept") {
			t.Fatalf("run command: %v\n%s", err, out)
		}
		return string(out)
	}
	// Each login to n1 is a line of sshd's; this count's own login is one.
	logins := func() int {
		t.Helper()
		out, err := set.SSH(ctx, "n1", "journalctl -u ssh --no-pager -o cat | grep -c '^Accepted '")
		if err != nil {
			t.Fatalf("sshd's journal: %v: %s", err, out)
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("sshd's journal: %q", out)
		}
		return n
	}

	run()
	sockets := func() []string { s, _ := filepath.Glob(filepath.Join(home, "ssh", "*.sock")); return s }
	for i := 0; len(sockets()) == 0; i++ {
		if i == 100 {
			log, _ := os.ReadFile(filepath.Join(home, "ssh", "keeper.log"))
			t.Fatalf("no keeper's socket 10 s after the first command; keeper.log: %s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if exec.Command("pgrep", "-f", keepers).Run() != nil {
		t.Fatal("no keeper process")
	}
	before := logins()
	run()
	if after := logins(); after != before+1 {
		t.Errorf("the second command logged in to n1 again (%d logins, want %d)", after-before-1, 0)
	}

	// Without the flag a command dials, and keeps nothing.
	cmd := exec.CommandContext(ctx, bin, "run", "command", "-f", set.InventoryPath, "--nodes", "n1", "--", "true")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBEXM_HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("without --ssh-persist: %v\n%s", err, out)
	}
	if n := len(sockets()); n != 1 {
		t.Errorf("%d sockets after a command without --ssh-persist, want the one kept before", n)
	}
}
