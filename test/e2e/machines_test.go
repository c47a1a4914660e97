//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// TestMachines checks that fresh test machines are what kubexm's playbooks
// expect of real servers: their own hostname and IP, systemd as PID 1 that
// enables units, TCP between nodes; and that changes stay inside a node and
// that tearing down leaves nothing on the host.
func TestMachines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hostHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	// Down is idempotent: suiteMachines' cleans up after a failed Up or a
	// failed check; the one at the end is timed and checked.
	start := time.Now()
	set, _ := suiteMachines(ctx, t, 3, "m")
	prefix := set.Prefix
	t.Logf("run %s: 3 machines up in %s", prefix, time.Since(start).Round(time.Millisecond))

	for i, h := range set.Hosts {
		t.Run(h.Name, func(t *testing.T) {
			run := func(script string) string {
				t.Helper()
				out, err := set.SSH(ctx, h.Name, script)
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(out)
			}
			if got := run("hostname"); got != h.Name {
				t.Errorf("hostname %q, want %q", got, h.Name)
			}
			if got := run("ps -p 1 -o comm=; systemctl is-system-running --wait"); got != "systemd\nrunning" {
				t.Errorf("PID 1 and system state %q, want systemd and running", got)
			}
			if got := run("ip -4 -o addr show dev eth0"); !strings.Contains(got, " "+h.Address+"/24 ") {
				t.Errorf("eth0: %q, want %s/24", got, h.Address)
			}
			peer := set.Hosts[(i+1)%len(set.Hosts)]
			if got := run(fmt.Sprintf("timeout 3 bash -c 'exec 3<>/dev/tcp/%s/22; head -c 7 <&3'", peer.Address)); got != "SSH-2.0" {
				t.Errorf("TCP %s -> %s:22 read %q, want the SSH banner", h.Name, peer.Name, got)
			}
			run(`echo "10.0.0.99 e2e-fake" >> /etc/hosts
printf '#!/bin/sh\necho hello from $(hostname)\n' > /usr/local/bin/kubexm-e2e-hello
chmod 755 /usr/local/bin/kubexm-e2e-hello
cat > /etc/systemd/system/kubexm-e2e.service <<'UNIT'
[Unit]
Description=kubexm e2e smoke unit
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/bin/kubexm-e2e-hello
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now kubexm-e2e.service`)
			if got := run("systemctl is-enabled kubexm-e2e.service; systemctl is-active kubexm-e2e.service"); got != "enabled\nactive" {
				t.Errorf("unit state %q, want enabled and active", got)
			}
			if got := run("journalctl -u kubexm-e2e.service -o cat --no-pager | grep hello"); got != "hello from "+h.Name {
				t.Errorf("unit output %q", got)
			}
		})
	}

	if now, err := os.ReadFile("/etc/hosts"); err != nil || string(now) != string(hostHosts) {
		t.Errorf("the host's /etc/hosts changed: a node's write escaped it (%v)", err)
	}
	if _, err := os.Stat("/usr/local/bin/kubexm-e2e-hello"); err == nil {
		t.Error("a node's /usr/local/bin file appeared on the host")
	}

	start = time.Now()
	if err := testhosts.Down(ctx, prefix); err != nil {
		t.Fatal(err)
	}
	t.Logf("run %s down in %s", prefix, time.Since(start).Round(time.Millisecond))
	leftovers, err := testhosts.Script("leftovers.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", leftovers)
	cmd.Env = append(os.Environ(), "PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("leftovers after Down: %v\n%s", err, out)
	}
}
