package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --ssh-persist is refused where no connection of this process would be
// kept, and a bad value or socket directory is named before anything runs.
func TestSSHPersistWhereItApplies(t *testing.T) {
	t.Chdir(t.TempDir())
	home := t.TempDir()
	t.Setenv("KUBEXM_HOME", home)
	t.Setenv("KUBEXM_SERVER", "")
	playbook := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(playbook, []byte("plays:\n  - hosts: localhost\n    tasks:\n      - command: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ssh-persist", "60s", "server", "token", "list", "--data-dir", t.TempDir()}, "kubexm server does not keep connections"},
		{[]string{"--ssh-persist", "60s", "controller"}, "kubexm controller does not keep connections"},
		{[]string{"--ssh-persist", "60s", "version"}, "kubexm version connects to no host"},
		{[]string{"--ssh-persist", "60s", "--confine-dial=", "play", playbook, "--list-tasks"}, "worker's jobs do not keep connections"},
		{[]string{"--ssh-persist", "-1s", "play", playbook, "--list-tasks"}, "-1s is not a duration"},
		{[]string{"--ssh-persist", "60s", "create", "cluster", "--server", "https://127.0.0.1:1", "-f", "cluster.yaml"}, "run without --server to use it"},
	} {
		out, code := runMain(t, tc.args...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("kubexm %s: exit %d, want an error with %q:\n%s", strings.Join(tc.args, " "), code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "ssh")); !os.IsNotExist(err) {
		t.Errorf("a refused --ssh-persist made its directory: %v", err)
	}

	if out, code := runMain(t, "--ssh-persist", "60s", "play", playbook, "--list-tasks"); code != 0 {
		t.Fatalf("play --list-tasks with --ssh-persist: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(filepath.Join(home, "ssh")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the sockets' directory: %v, %v", fi, err)
	}

	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	t.Setenv("KUBEXM_HOME", long)
	if out, code := runMain(t, "--ssh-persist", "60s", "play", playbook, "--list-tasks"); code == 0 || !strings.Contains(out, "set KUBEXM_HOME to a shorter directory") {
		t.Errorf("a socket directory too long for a unix socket: exit %d\n%s", code, out)
	}
}
