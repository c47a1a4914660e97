package system

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// answerProbes answers probeUnit's one-command probes of unit svc from
// the answers answer gives to the single commands they stand for
// (`systemctl is-enabled svc`, `systemctl is-active svc` and reloadProbe):
// systemctl show's ActiveState is is-active's answer, its UnitFileState
// is-enabled's, and a unit is-enabled knows nothing of is not-found.
func answerProbes(answer func(cmd string) (transport.Result, bool)) func(cmd string) (transport.Result, bool) {
	word := func(q string) string {
		res, _ := answer("systemctl " + q + " svc")
		o := strings.TrimSpace(string(res.Stdout))
		if o == "" {
			o = strings.TrimSpace(string(res.Stderr))
		}
		return o
	}
	return func(cmd string) (transport.Result, bool) {
		reload := strings.Contains(cmd, reloadProbe)
		if !strings.HasPrefix(cmd, "/bin/sh -c ") || !reload && !strings.Contains(cmd, unitShow) {
			return answer(cmd)
		}
		enabled, active := word("is-enabled"), word("is-active")
		load := "loaded"
		if unitMissing(enabled) {
			load, enabled = "not-found", ""
		}
		props, rc := "Id=svc.service\nLoadState="+load+"\n", 0
		if res, ok := answer("/bin/sh -c " + reloadProbe + " sh svc"); reload && ok {
			props, rc = string(res.Stdout), res.ExitCode
		}
		if rc == 0 {
			first, rest, _ := strings.Cut(props, "\n\n")
			props = strings.TrimRight(first, "\n") + "\nActiveState=" + active + "\nUnitFileState=" + enabled + "\n"
			if rest != "" {
				props += "\n" + rest
			}
		}
		out := fmt.Sprintf("%s\n\037%d\n", props, rc)
		if strings.Contains(cmd, isEnabledProbe) {
			out += word("is-enabled") + "\n"
		}
		return steptest.OK(out)
	}
}

// fakeSystemd models one unit's enabled and active state.
func fakeSystemd(enabled, active string, startFails bool) *steptest.FakeHost {
	return steptest.NewFake(answerProbes(func(cmd string) (transport.Result, bool) {
		switch cmd {
		case "systemctl daemon-reload":
			return steptest.OK("")
		case "systemctl is-enabled svc":
			return steptest.RC(map[bool]int{true: 0, false: 1}[enabled == "enabled"], enabled+"\n", "")
		case "systemctl is-active svc":
			return steptest.RC(map[bool]int{true: 0, false: 3}[active == "active"], active+"\n", "")
		case "systemctl enable svc":
			enabled = "enabled"
			return steptest.OK("")
		case "systemctl disable svc":
			enabled = "disabled"
			return steptest.OK("")
		case "systemctl mask svc":
			enabled = "masked"
			return steptest.OK("")
		case "systemctl unmask svc":
			enabled = "disabled"
			return steptest.OK("")
		case "systemctl start svc", "systemctl restart svc":
			if startFails {
				active = "failed"
				return steptest.RC(1, "", "Job for svc.service failed.")
			}
			active = "active"
			return steptest.OK("")
		case "systemctl --no-block start svc":
			active = "activating"
			return steptest.OK("")
		case "systemctl stop svc":
			active = "inactive"
			return steptest.OK("")
		case "journalctl -u svc -n 20 --no-pager -o short-iso":
			return steptest.OK("line1\nsvc: bad config at line 3\n")
		}
		return transport.Result{}, false
	}))
}

func TestSystemdConverges(t *testing.T) {
	h := fakeSystemd("disabled", "inactive", false)
	env := steptest.FakeEnv(h)
	args := step.Args{"name": "svc", "state": "started", "enabled": true, "daemon_reload": true}
	env.Check = true
	if res := steptest.Run(t, systemdBuiltin{}, env, args); !res.Changed || !strings.Contains(res.Msg, "would enable svc, start svc") {
		t.Fatalf("check: %+v", res)
	}
	if got := h.Ran("systemctl enable", "systemctl start", "systemctl daemon-reload"); len(got) != 0 {
		t.Fatalf("check mode ran %v", got)
	}
	env.Check = false
	if res := steptest.Run(t, systemdBuiltin{}, env, args); !res.Changed {
		t.Fatalf("first: %+v", res)
	}
	if res := steptest.Run(t, systemdBuiltin{}, env, args); res.Changed {
		t.Fatalf("second: %+v", res)
	}
	if got := h.Ran("systemctl enable", "systemctl start"); len(got) != 2 {
		t.Errorf("ran %v", got)
	}
	stop := step.Args{"name": "svc", "state": "stopped", "enabled": false, "masked": true}
	if res := steptest.Run(t, systemdBuiltin{}, env, stop); !res.Changed {
		t.Fatalf("stop: %+v", res)
	}
	if res := steptest.Run(t, systemdBuiltin{}, env, stop); res.Changed {
		t.Fatalf("stop again: %+v", res)
	}
	if res := steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "restarted", "masked": false}); !res.Changed {
		t.Fatalf("restart: %+v", res)
	}
}

func TestSystemdFailureShowsJournal(t *testing.T) {
	env := steptest.FakeEnv(fakeSystemd("enabled", "inactive", true))
	_, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "svc", "state": "started"})
	if err == nil || !strings.Contains(err.Error(), "bad config at line 3") || !strings.Contains(err.Error(), "Job for svc.service failed") {
		t.Fatalf("want journal lines in error, got %v", err)
	}
}

// TestSystemdNoBlockThenWait: no_block queues the start and returns; a
// later started task waits for the unit still starting (systemctl start
// joins the queued job) without calling it a change, and reports the
// journal when the start fails.
func TestSystemdNoBlockThenWait(t *testing.T) {
	h := fakeSystemd("enabled", "inactive", false)
	env := steptest.FakeEnv(h)
	res := steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "started", "no_block": true})
	if !res.Changed || len(h.Ran("systemctl --no-block start svc")) != 1 || len(h.Ran("systemctl start svc")) != 0 {
		t.Fatalf("no_block: %+v, ran %q", res, h.Cmds)
	}
	// Still starting: a no_block task again leaves it alone.
	if res := steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "started", "no_block": true}); res.Changed || len(h.Ran("systemctl --no-block start svc")) != 1 {
		t.Fatalf("no_block on a starting unit: %+v, ran %q", res, h.Cmds)
	}
	env.Check = true
	if res := steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "started"}); res.Changed || len(h.Ran("systemctl start svc")) != 0 {
		t.Fatalf("check mode waited: %+v, ran %q", res, h.Cmds)
	}
	env.Check = false
	res = steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "started"})
	if res.Changed || !strings.Contains(res.Msg, "waited for svc") || len(h.Ran("systemctl start svc")) != 1 {
		t.Fatalf("wait: %+v, ran %q", res, h.Cmds)
	}
	if res := steptest.Run(t, systemdBuiltin{}, env, step.Args{"name": "svc", "state": "started"}); res.Changed || res.Msg != "" || len(h.Ran("systemctl start svc")) != 1 {
		t.Fatalf("started already: %+v, ran %q", res, h.Cmds)
	}

	failing := steptest.FakeEnv(fakeSystemd("enabled", "activating", true))
	_, err := runBuiltin(t.Context(), failing, systemdBuiltin{}, step.Args{"name": "svc", "state": "started"})
	if err == nil || !strings.Contains(err.Error(), "bad config at line 3") {
		t.Fatalf("a start that fails while waited for: want the journal, got %v", err)
	}
}

func TestSystemdErrors(t *testing.T) {
	env := steptest.FakeEnv(fakeSystemd("", "", false))
	if _, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "svc", "state": "started"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing unit: %v", err)
	}
	if _, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"state": "started"}); err == nil {
		t.Error("no name: want error")
	}
	masked := steptest.FakeEnv(fakeSystemd("masked", "inactive", false))
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
			h := steptest.NewFake(answerProbes(func(cmd string) (transport.Result, bool) {
				if strings.HasPrefix(cmd, "/bin/sh -c "+reloadProbe[:10]) {
					return steptest.RC(c.probeRC, c.probe, "")
				}
				return units.Answer(cmd)
			}))
			res := steptest.Run(t, systemdBuiltin{}, steptest.FakeEnv(h), c.args)
			got := len(h.Ran("systemctl daemon-reload")) == 1
			if got != c.want || res.Data["daemon_reloaded"] != c.want || res.Changed {
				t.Errorf("daemon-reload ran %v (data %v, changed %v), want %v; ran %v", got, res.Data["daemon_reloaded"], res.Changed, c.want, h.Cmds)
			}
			// Nothing to do is one command: the probes share it.
			if !c.want && len(h.Cmds) != 1 {
				t.Errorf("a unit with nothing to do took %d commands, want 1: %q", len(h.Cmds), h.Cmds)
			}
		})
	}
}

// TestSystemdProbeScripts runs the one-command probes in a real shell with
// a stand-in systemctl: the unit's state (is-enabled's answer only when
// asked, its stderr for a unit systemd does not know) and, with
// daemon_reload, the reload probe's verdict come back from one command, and
// a host without systemctl is named as such.
func TestSystemdProbeScripts(t *testing.T) {
	env, root := steptest.Env(t)
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := `#!/bin/sh
echo "$*" >> "$LOG"
case "$1 $2" in
"is-enabled svc") echo enabled ;;
"is-enabled gone") echo "Failed to get unit file state for gone.service: No such file or directory" >&2; exit 1 ;;
"show --property=Id,LoadState,ActiveState,UnitFileState")
  case "$4" in
  svc) printf 'Id=svc.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n' ;;
  *) printf 'Id=%s.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n' "$4" ;;
  esac ;;
show*) [ "$NDR" = fail ] && { echo "Failed to connect to bus" >&2; exit 1; }
  printf 'Id=svc.service\nLoadState=loaded\nNeedDaemonReload=%s\nDropInPaths=\nActiveState=active\nUnitFileState=enabled\n' "$NDR" ;;
*) echo "unexpected $*" >&2; exit 9 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "calls")
	for _, c := range []struct {
		unit              string
		reload, isEnabled bool
		ndr               string
		want              unitAnswers
		need              bool
		whyPart           string
		calls             int
	}{
		{"svc", false, false, "no", unitAnswers{"enabled", "active", "loaded", false}, false, "", 1},
		{"svc", false, true, "no", unitAnswers{"enabled", "active", "loaded", true}, false, "", 2},
		{"gone", false, false, "no", unitAnswers{"", "inactive", "not-found", false}, false, "", 1},
		{"gone", false, true, "no", unitAnswers{"Failed to get unit file state for gone.service: No such file or directory", "inactive", "not-found", true}, false, "", 3},
		{"svc", true, false, "no", unitAnswers{"enabled", "active", "loaded", false}, false, "", 1},
		{"svc", true, true, "yes", unitAnswers{"enabled", "active", "loaded", true}, true, "svc.service changed on disk", 2},
		{"svc", true, true, "fail", unitAnswers{enabled: "enabled", isEnabled: true}, true, "Failed to connect to bus", 2},
	} {
		env.Environment = map[string]string{"PATH": bin + ":/usr/bin:/bin", "NDR": c.ndr, "LOG": log}
		_ = os.Remove(log)
		need, why, got, err := probeUnit(t.Context(), env, c.unit, c.reload, c.isEnabled)
		if err != nil || got != c.want || need != c.need || !strings.Contains(why, c.whyPart) {
			t.Errorf("%s reload=%v is-enabled=%v NeedDaemonReload=%s: need %v (%q), %+v, %v; want need %v (%q), %+v", c.unit, c.reload, c.isEnabled, c.ndr, need, why, got, err, c.need, c.whyPart, c.want)
		}
		if calls, _ := os.ReadFile(log); strings.Count(string(calls), "\n") != c.calls {
			t.Errorf("%s reload=%v is-enabled=%v: systemctl ran %q, want %d calls", c.unit, c.reload, c.isEnabled, calls, c.calls)
		}
		if got.missing() != (c.unit == "gone") {
			t.Errorf("%s: missing() = %v", c.unit, got.missing())
		}
	}
	env.Environment = map[string]string{"PATH": root}
	if _, _, _, err := probeUnit(t.Context(), env, "svc", true, true); err == nil || !strings.Contains(err.Error(), "systemctl not found") {
		t.Errorf("without systemctl: %v", err)
	}
}

// A unit that changed on disk and is to be enabled is reloaded by systemctl
// enable itself: no daemon-reload before it, one command less and half a
// second less on busy machines. A unit already enabled still gets the
// reload; so does one that is to be disabled and already is.
func TestSystemdEnableReloads(t *testing.T) {
	changed := "Id=svc.service\nLoadState=loaded\nNeedDaemonReload=yes\n"
	for _, c := range []struct {
		name, enabled string
		args          step.Args
		reload        bool
		ran           string
	}{
		{"to enable", "disabled", step.Args{"name": "svc", "state": "started", "enabled": true, "daemon_reload": true}, false, "systemctl enable svc"},
		{"to disable", "enabled", step.Args{"name": "svc", "enabled": false, "daemon_reload": true}, false, "systemctl disable svc"},
		{"enabled already", "enabled", step.Args{"name": "svc", "state": "started", "enabled": true, "daemon_reload": true}, true, ""},
		{"disabled already", "disabled", step.Args{"name": "svc", "enabled": false, "daemon_reload": true}, true, ""},
		{"masked asked", "disabled", step.Args{"name": "svc", "enabled": true, "masked": false, "daemon_reload": true}, true, "systemctl enable svc"},
		// A new unit file systemd has not loaded: is-enabled finds it on
		// disk, and enable's reload loads it.
		{"new unit to enable", "disabled", step.Args{"name": "svc", "state": "started", "enabled": true, "daemon_reload": true}, false, "systemctl start svc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			units := fakeSystemd(c.enabled, "inactive", false)
			h := steptest.NewFake(answerProbes(func(cmd string) (transport.Result, bool) {
				if strings.HasPrefix(cmd, "/bin/sh -c "+reloadProbe[:10]) {
					if strings.HasPrefix(c.name, "new unit") {
						return steptest.OK("Id=svc.service\nLoadState=not-found\nNeedDaemonReload=no\n")
					}
					return steptest.OK(changed)
				}
				return units.Answer(cmd)
			}))
			res := steptest.Run(t, systemdBuiltin{}, steptest.FakeEnv(h), c.args)
			if got := len(h.Ran("systemctl daemon-reload")) == 1; got != c.reload {
				t.Errorf("daemon-reload ran %v, want %v; ran %q", got, c.reload, h.Cmds)
			}
			if res.Data["daemon_reloaded"] != true {
				t.Errorf("daemon_reloaded %v, want true (systemd read the changed unit)", res.Data["daemon_reloaded"])
			}
			if c.ran != "" && len(h.Ran(c.ran)) != 1 {
				t.Errorf("%s not run; ran %q", c.ran, h.Cmds)
			}
		})
	}
}
