//go:build integration

package testhosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The machines of `make hosts-up` (via `source hosts.env`) are what the
// other packages' integration tests talk to: check they are what those
// tests rely on.
func TestMachinesFromEnv(t *testing.T) {
	set, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := os.Stat(set.InventoryPath); err != nil {
		t.Errorf("inventory: %v", err)
	}
	for _, h := range set.Hosts {
		t.Run(h.Name, func(t *testing.T) {
			out, err := set.SSH(ctx, h.Name, `hostname; ps -p 1 -o comm=; systemctl is-system-running || true; ip -4 -o addr show dev eth0; ip route show default`)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", h.Name, strings.ReplaceAll(strings.TrimSpace(out), "\n", " | "))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 5 {
				t.Fatalf("want 5 lines, got %q", out)
			}
			if lines[0] != h.Name {
				t.Errorf("hostname %q, want %q", lines[0], h.Name)
			}
			if lines[1] != "systemd" {
				t.Errorf("PID 1 is %q, want systemd", lines[1])
			}
			// Other packages' integration tests share these machines and may
			// leave a failed unit behind (degraded); systemd itself must be up.
			if lines[2] != "running" && lines[2] != "degraded" {
				t.Errorf("systemd state %q, want running (or degraded)", lines[2])
			}
			if !strings.Contains(lines[3], " "+h.Address+"/24 ") {
				t.Errorf("eth0 %q does not have %s", lines[3], h.Address)
			}
			if !strings.Contains(lines[4], "via "+set.Gateway+" ") {
				t.Errorf("default route %q is not via the gateway %s", lines[4], set.Gateway)
			}
		})
	}
}

// The sudo user exists for the SSH transport's become tests: sudo must ask
// for the password, and the user can log in with it.
func TestSudoUser(t *testing.T) {
	set, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := set.Hosts[0]
	u := set.SudoUser
	if _, err := set.SSH(ctx, h.Name, "su - "+u+" -c 'sudo -n true'"); err == nil {
		t.Errorf("sudo -n as %s succeeded: it must require a password", u)
	}
	out, err := set.SSH(ctx, h.Name, fmt.Sprintf("su - %s -c \"echo '%s' | sudo -S -p '' id -u\"", u, set.SudoPassword))
	if err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sudo -S with the password: %q, %v", out, err)
	}

	askpass := filepath.Join(t.TempDir(), "askpass")
	if err := os.WriteFile(askpass, []byte("#!/bin/sh\necho '"+set.SudoPassword+"'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	login := func(user string) (string, error) {
		cmd := exec.CommandContext(ctx, "ssh", "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
			"-o", "ConnectTimeout=5", user+"@"+h.Address, "id -un")
		cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := login(u); err != nil || strings.TrimSpace(out) != u {
		t.Errorf("password login as %s: %q, %v", u, out, err)
	}
	if out, err := login("root"); err == nil {
		t.Errorf("password login as root succeeded (%q): root must be key-only", out)
	}
}

// A run of its own beside the one from the environment: both work at once,
// and Down leaves nothing behind (leftovers.sh finds the objects by name).
func TestUpDownLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prefix, err := NewPrefix()
	if err != nil {
		t.Fatal(err)
	}
	// Down is idempotent: this one cleans up after a failed Up or check.
	t.Cleanup(func() {
		if err := Down(context.Background(), prefix); err != nil {
			t.Error(err)
		}
	})
	set, err := Up(ctx, 2, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run %s: %+v", set.Prefix, set.Hosts)
	if env, err := FromEnv(); err == nil && env.Gateway == set.Gateway {
		t.Errorf("second run got the same subnet as the first (%s)", env.Gateway)
	}
	out, err := set.SSH(ctx, "n2", "timeout 3 bash -c 'exec 3<>/dev/tcp/"+set.Hosts[0].Address+"/22; head -c 7 <&3'")
	if err != nil || out != "SSH-2.0" {
		t.Errorf("n2 -> n1:22: %q, %v", out, err)
	}
	if err := Down(ctx, prefix); err != nil {
		t.Fatal(err)
	}
	leftovers, err := Script("leftovers.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", leftovers)
	cmd.Env = append(os.Environ(), "PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("after Down: %v\n%s", err, out)
	}
}
