//go:build integration

package system

import (
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// TestIntegrationSystemdDaemonReload: on a real systemd, daemon_reload:
// true reloads after a unit file is written or a drop-in of another unit
// under /etc/systemd/system changes, and not on a re-run. It logs what the
// re-run's check costs against the daemon-reload it saves.
func TestIntegrationSystemdDaemonReload(t *testing.T) {
	set := steptest.Machines(t)
	env := steptest.RemoteEnv(t, set, 0)
	unit, other := "/etc/systemd/system/kubexm-dr.service", "/etc/systemd/system/kubexm-dr2.service"
	t.Cleanup(func() {
		steptest.Sh(t, env, "systemctl stop kubexm-dr kubexm-dr2; rm -rf "+unit+" "+other+" "+other+".d; systemctl daemon-reload")
	})
	steptest.Sh(t, env, `printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n' > `+unit+`; cp `+unit+` `+other+`; systemctl daemon-reload; systemctl start kubexm-dr2`)
	args := step.Args{"name": "kubexm-dr", "state": "started", "daemon_reload": true}
	reloaded := func(what string, want bool) {
		t.Helper()
		res, err := steptest.RunBuiltin(t.Context(), env, systemdBuiltin{}, args)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Data["daemon_reloaded"] != want {
			t.Errorf("%s: daemon_reloaded %v, want %v", what, res.Data["daemon_reloaded"], want)
		}
	}
	reloaded("unit loaded, unchanged", false)
	steptest.Sh(t, env, `printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/echo changed\n' > `+unit)
	reloaded("unit file rewritten", true)
	reloaded("re-run", false)
	steptest.Sh(t, env, "mkdir -p "+other+".d; printf '[Service]\\nEnvironment=A=1\\n' > "+other+".d/x.conf")
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
		steptest.Sh(t, env, "systemctl daemon-reload")
		reload += time.Since(start)
	}
	t.Logf("PERF systemd re-run: check %v, daemon-reload %v (mean of %d, same run): ratio %.2f", check/n, reload/n, n, float64(check)/float64(reload))
}
