//go:build integration

package system

import (
	"fmt"
	"strings"
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

// TestIntegrationSystemdNoBlockThenWait: on a real systemd, no_block
// returns while a Type=notify unit is still starting, and a later started
// task waits until it is ready; a unit that fails while starting fails the
// waiting task with its journal.
func TestIntegrationSystemdNoBlockThenWait(t *testing.T) {
	set := steptest.Machines(t)
	env := steptest.RemoteEnv(t, set, 0)
	unit := "/etc/systemd/system/kubexm-nb.service"
	t.Cleanup(func() {
		steptest.Sh(t, env, "systemctl stop kubexm-nb; rm -f "+unit+" /run/kubexm-nb.go /run/kubexm-nb.fail; systemctl daemon-reload")
	})
	// Ready once /run/kubexm-nb.go exists; exits 1 once .fail does.
	steptest.Sh(t, env, `cat > `+unit+` <<'U'
[Service]
Type=notify
NotifyAccess=all
ExecStart=/bin/sh -c 'while [ ! -e /run/kubexm-nb.go ]; do [ -e /run/kubexm-nb.fail ] && { echo kubexm-nb gave up; exit 1; }; sleep 0.1; done; systemd-notify --ready; exec sleep infinity'
U
rm -f /run/kubexm-nb.go /run/kubexm-nb.fail; systemctl daemon-reload`)

	start := time.Now()
	res, err := steptest.RunBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "kubexm-nb", "state": "started", "no_block": true})
	if err != nil || !res.Changed {
		t.Fatalf("no_block start: %+v, %v", res, err)
	}
	if got := steptest.Sh(t, env, "systemctl is-active kubexm-nb || true"); got != "activating" {
		t.Fatalf("after no_block the unit is %q, want activating", got)
	}
	done := make(chan error, 1)
	go func() {
		res, err := steptest.RunBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "kubexm-nb", "state": "started"})
		if err == nil && res.Changed {
			err = fmt.Errorf("the wait counted as a change: %+v", res)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the started task returned before the unit was ready: %v", err)
	case <-time.After(time.Second):
	}
	steptest.Sh(t, env, "touch /run/kubexm-nb.go")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := steptest.Sh(t, env, "systemctl is-active kubexm-nb || true"); got != "active" {
		t.Fatalf("after the wait the unit is %q, want active", got)
	}
	t.Logf("no_block start and wait: %v", time.Since(start))

	steptest.Sh(t, env, "systemctl stop kubexm-nb; rm -f /run/kubexm-nb.go")
	if _, err := steptest.RunBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "kubexm-nb", "state": "started", "no_block": true}); err != nil {
		t.Fatal(err)
	}
	steptest.Sh(t, env, "touch /run/kubexm-nb.fail")
	_, err = steptest.RunBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "kubexm-nb", "state": "started"})
	if err == nil || !strings.Contains(err.Error(), "kubexm-nb gave up") {
		t.Fatalf("a unit failing while waited for: want its journal, got %v", err)
	}
}
