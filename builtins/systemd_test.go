package builtins

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// fakeSystemd models one unit's enabled and active state.
func fakeSystemd(enabled, active string, startFails bool) *fakeHost {
	return newFake(func(cmd string) (transport.Result, bool) {
		switch cmd {
		case "systemctl daemon-reload":
			return ok("")
		case "systemctl is-enabled svc":
			return rc(map[bool]int{true: 0, false: 1}[enabled == "enabled"], enabled+"\n", "")
		case "systemctl is-active svc":
			return rc(map[bool]int{true: 0, false: 3}[active == "active"], active+"\n", "")
		case "systemctl enable svc":
			enabled = "enabled"
			return ok("")
		case "systemctl disable svc":
			enabled = "disabled"
			return ok("")
		case "systemctl mask svc":
			enabled = "masked"
			return ok("")
		case "systemctl unmask svc":
			enabled = "disabled"
			return ok("")
		case "systemctl start svc", "systemctl restart svc":
			if startFails {
				active = "failed"
				return rc(1, "", "Job for svc.service failed.")
			}
			active = "active"
			return ok("")
		case "systemctl stop svc":
			active = "inactive"
			return ok("")
		case "journalctl -u svc -n 20 --no-pager -o short-iso":
			return ok("line1\nsvc: bad config at line 3\n")
		}
		return transport.Result{}, false
	})
}

func TestSystemdConverges(t *testing.T) {
	h := fakeSystemd("disabled", "inactive", false)
	env := fakeEnv(h)
	args := step.Args{"name": "svc", "state": "started", "enabled": true, "daemon_reload": true}
	env.Check = true
	if res := runB(t, systemdBuiltin{}, env, args); !res.Changed || !strings.Contains(res.Msg, "would enable svc, start svc") {
		t.Fatalf("check: %+v", res)
	}
	if got := h.ran("systemctl enable", "systemctl start", "systemctl daemon-reload"); len(got) != 0 {
		t.Fatalf("check mode ran %v", got)
	}
	env.Check = false
	if res := runB(t, systemdBuiltin{}, env, args); !res.Changed {
		t.Fatalf("first: %+v", res)
	}
	if res := runB(t, systemdBuiltin{}, env, args); res.Changed {
		t.Fatalf("second: %+v", res)
	}
	if got := h.ran("systemctl enable", "systemctl start"); len(got) != 2 {
		t.Errorf("ran %v", got)
	}
	stop := step.Args{"name": "svc", "state": "stopped", "enabled": false, "masked": true}
	if res := runB(t, systemdBuiltin{}, env, stop); !res.Changed {
		t.Fatalf("stop: %+v", res)
	}
	if res := runB(t, systemdBuiltin{}, env, stop); res.Changed {
		t.Fatalf("stop again: %+v", res)
	}
	if res := runB(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "restarted", "masked": false}); !res.Changed {
		t.Fatalf("restart: %+v", res)
	}
}

func TestSystemdFailureShowsJournal(t *testing.T) {
	env := fakeEnv(fakeSystemd("enabled", "inactive", true))
	_, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "svc", "state": "started"})
	if err == nil || !strings.Contains(err.Error(), "bad config at line 3") || !strings.Contains(err.Error(), "Job for svc.service failed") {
		t.Fatalf("want journal lines in error, got %v", err)
	}
}

func TestSystemdErrors(t *testing.T) {
	env := fakeEnv(fakeSystemd("", "", false))
	if _, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "svc", "state": "started"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing unit: %v", err)
	}
	if _, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"state": "started"}); err == nil {
		t.Error("no name: want error")
	}
	masked := fakeEnv(fakeSystemd("masked", "inactive", false))
	if _, err := runBuiltin(t.Context(), masked, systemdBuiltin{}, step.Args{"name": "svc", "enabled": true}); err == nil || !strings.Contains(err.Error(), "masked") {
		t.Errorf("masked: %v", err)
	}
}

// TestSystemdDaemonReloadOnlyWhenNeeded: daemon_reload: true reloads only
// when systemd says a unit changed on disk or the named unit is not loaded
// (or cannot tell); without a name it always reloads.
func TestSystemdDaemonReloadOnlyWhenNeeded(t *testing.T) {
	for _, c := range []struct {
		name, probe string
		probeRC     int
		args        step.Args
		want        bool
	}{
		{"unchanged", "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=no\n\nId=other.service\nLoadState=loaded\nNeedDaemonReload=no\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, false},
		{"named unit changed", "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=yes\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, true},
		{"another unit under /etc changed", "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=no\n\nId=kube-proxy.service\nLoadState=loaded\nNeedDaemonReload=yes\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, true},
		{"not loaded yet", "Id=svc.service\nLoadState=not-found\nNeedDaemonReload=no\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, true},
		{"new drop-in systemd has not read", "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=no\nDropInPaths=\n\nDropIn=/etc/systemd/system/svc.service.d/x.conf\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, true},
		{"drop-in systemd has read", "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=no\nDropInPaths=/etc/systemd/system/svc.service.d/x.conf\n\nDropIn=/etc/systemd/system/svc.service.d/x.conf\n", 0,
			step.Args{"name": "svc", "state": "started", "daemon_reload": true}, false},
		{"systemd cannot tell", "", 1, step.Args{"name": "svc", "state": "started", "daemon_reload": true}, true},
		{"no name", "", 0, step.Args{"daemon_reload": true}, true},
		{"not asked", "Id=svc.service\nLoadState=not-found\nNeedDaemonReload=yes\n", 0, step.Args{"name": "svc", "state": "started"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			units := fakeSystemd("enabled", "active", false)
			h := newFake(func(cmd string) (transport.Result, bool) {
				if strings.HasPrefix(cmd, "/bin/sh -c "+reloadProbe[:10]) {
					return rc(c.probeRC, c.probe, "")
				}
				return units.answer(cmd)
			})
			res := runB(t, systemdBuiltin{}, fakeEnv(h), c.args)
			got := len(h.ran("systemctl daemon-reload")) == 1
			if got != c.want || res.Data["daemon_reloaded"] != c.want || res.Changed {
				t.Errorf("daemon-reload ran %v (data %v, changed %v), want %v; ran %v", got, res.Data["daemon_reloaded"], res.Changed, c.want, h.cmds)
			}
		})
	}
}
