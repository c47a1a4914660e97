//go:build integration

package builtins

import (
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// BenchmarkFileLoopSSH is BenchmarkFileLoop on a test machine over SSH: a
// 10-item `file` loop (state directory) run item by item and in one batch,
// on a re-run (nothing to change) and on a fresh host (every directory
// made), logged in as root (Stat is one SFTP request) and through sudo
// (Stat is a command).
//
//	source <run>/hosts.env; go test -tags integration ./builtins -run '^$' -bench FileLoopSSH
func BenchmarkFileLoopSSH(b *testing.B) {
	set := machines(b)
	env := remoteEnv(b, set, 0)
	const items = 10
	dir := "/tmp/kubexm-fileloop"
	args := make([]step.Args, items)
	for i := range args {
		args[i] = step.Args{"path": path.Join(dir, fmt.Sprintf("d%d", i)), "state": "directory", "mode": "0755"}
	}
	for _, become := range []bool{false, true} {
		for _, fresh := range []bool{false, true} {
			for _, batched := range []bool{false, true} {
				b.Run(fmt.Sprintf("become=%v/fresh=%v/batched=%v", become, fresh, batched), func(b *testing.B) {
					e := *env
					e.Become = become
					if become {
						e.Target = sudoTarget(b, set)
					}
					e.Target = &slowHost{Transport: e.Target}
					benchFileLoop(b, &e, args, batched, func() {
						if !fresh {
							return
						}
						if _, err := env.Target.Run(b.Context(), transport.Command{Argv: []string{"rm", "-rf", dir}}); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		}
	}
}

// sudoTarget logs in to the first machine as the sudo user, whose become
// goes through sudo with a password.
func sudoTarget(b *testing.B, set *testhosts.Set) transport.Transport {
	h := set.Hosts[0]
	tr, err := ssh.Dial(b.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: set.SudoUser,
		PrivateKeyPath: set.KeyPath, BecomePassword: set.SudoPassword}, ssh.Options{HostKeyChecking: ssh.Off})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

// TestIntegrationSystemdDaemonReload: on a real systemd, daemon_reload:
// true reloads after a unit file is written or a drop-in of another unit
// under /etc/systemd/system changes, and not on a re-run. It logs what the
// re-run's check costs against the daemon-reload it saves.
func TestIntegrationSystemdDaemonReload(t *testing.T) {
	set := machines(t)
	env := remoteEnv(t, set, 0)
	unit, other := "/etc/systemd/system/kubexm-dr.service", "/etc/systemd/system/kubexm-dr2.service"
	t.Cleanup(func() {
		sh(t, env, "systemctl stop kubexm-dr kubexm-dr2; rm -rf "+unit+" "+other+" "+other+".d; systemctl daemon-reload")
	})
	sh(t, env, `printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n' > `+unit+`; cp `+unit+` `+other+`; systemctl daemon-reload; systemctl start kubexm-dr2`)
	args := step.Args{"name": "kubexm-dr", "state": "started", "daemon_reload": true}
	reloaded := func(what string, want bool) {
		t.Helper()
		res, err := runBuiltin(t.Context(), env, systemdBuiltin{}, args)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Data["daemon_reloaded"] != want {
			t.Errorf("%s: daemon_reloaded %v, want %v", what, res.Data["daemon_reloaded"], want)
		}
	}
	reloaded("unit loaded, unchanged", false)
	sh(t, env, `printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/echo changed\n' > `+unit)
	reloaded("unit file rewritten", true)
	reloaded("re-run", false)
	sh(t, env, "mkdir -p "+other+".d; printf '[Service]\\nEnvironment=A=1\\n' > "+other+".d/x.conf")
	reloaded("another unit's drop-in written", true)
	reloaded("re-run after that", false)

	// What a re-run pays: the check against the reload it used to run.
	const n = 5
	var check, reload time.Duration
	for range n {
		start := time.Now()
		if _, _, err := needDaemonReload(t.Context(), env, "kubexm-dr"); err != nil {
			t.Fatal(err)
		}
		check += time.Since(start)
		start = time.Now()
		sh(t, env, "systemctl daemon-reload")
		reload += time.Since(start)
	}
	t.Logf("PERF systemd re-run: check %v, daemon-reload %v (mean of %d, same run): ratio %.2f", check/n, reload/n, n, float64(check)/float64(reload))
}
