package builtins

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
)

type systemdBuiltin struct{}

func (systemdBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "systemd",
		Summary: "Start, stop, restart, reload, enable, disable, mask a systemd unit; reload unit files.",
		Doc: "The current state is read with `systemctl is-active` and `is-enabled` first, so `started`, `stopped`, " +
			"`enabled` and `masked` act only when needed. `restarted` and `reloaded` always act (they are requests, " +
			"not states): use them from handlers or with a `when:` on what changed. `daemon_reload` runs " +
			"`systemctl daemon-reload` before anything else, only when systemd says the named unit's or any " +
			"unit's under /etc/systemd/system files changed since it read them (`NeedDaemonReload=yes`) or the " +
			"named unit is not loaded; without `name` it always runs (after removing units). By itself it does " +
			"not count as a change (the result's `daemon_reloaded` says whether it ran). When a unit fails to start, the task fails with the unit's last 20 journal lines.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Aliases: []string{"unit", "service"}, Doc: "Unit name; `.service` is implied when no suffix is given."},
			{Name: "state", Type: step.String, Choices: []string{"started", "stopped", "restarted", "reloaded"}, Doc: "Desired run state."},
			{Name: "enabled", Type: step.Bool, Doc: "Whether the unit starts at boot."},
			{Name: "masked", Type: step.Bool, Doc: "Whether the unit is masked (cannot be started at all)."},
			{Name: "daemon_reload", Type: step.Bool, Default: false, Aliases: []string{"daemon-reload"}, Doc: "Run `systemctl daemon-reload` first when a unit file or drop-in changed on disk (after writing unit files)."},
		},
		Examples: []string{"systemd:\n  name: containerd\n  state: started\n  enabled: true\n  daemon_reload: true"},
	}
}

// unitIsEnabled maps `systemctl is-enabled` output to enabled/not, and
// whether the unit can be enabled or disabled at all.
func unitIsEnabled(out string) (enabled, fixed bool) {
	switch out {
	case "enabled", "enabled-runtime", "alias", "linked", "linked-runtime":
		return true, false
	case "static", "indirect", "generated", "transient":
		// No [Install] section or managed elsewhere: enable/disable are no-ops.
		return true, true
	}
	return false, false
}

func (systemdBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	state := args.String("state")
	if state != "" {
		if err := checkChoice("state", state, "started", "stopped", "restarted", "reloaded"); err != nil {
			return step.Result{}, fmt.Errorf("systemd: %w", err)
		}
	}
	wantsUnit := state != "" || args.Has("enabled") || args.Has("masked")
	if wantsUnit && name == "" {
		return step.Result{}, fmt.Errorf("systemd: name is required with state, enabled or masked")
	}
	if !wantsUnit && !args.Bool("daemon_reload") {
		return step.Result{}, fmt.Errorf("systemd: nothing to do: give state, enabled, masked or daemon_reload")
	}
	data := map[string]any{"name": name, "daemon_reloaded": false}
	if args.Bool("daemon_reload") && !env.Check {
		need, why, err := needDaemonReload(ctx, env, name)
		if err != nil {
			return step.Result{}, err
		}
		if need {
			if _, err := mustRun(ctx, env, "systemctl", "daemon-reload"); err != nil {
				return step.Result{}, err
			}
			data["daemon_reloaded"] = true
			env.Logf("daemon-reload: %s", why)
		}
	}
	if !wantsUnit {
		return step.Result{Data: data}, nil
	}
	var changes []string
	act := func(verb string, argv ...string) error {
		changes = append(changes, verb+" "+name)
		if env.Check {
			return nil
		}
		_, err := mustRun(ctx, env, argv...)
		return err
	}
	enabledOut, err := systemctlQuery(ctx, env, "is-enabled", name)
	if err != nil {
		return step.Result{}, err
	}
	data["enabled_state"] = enabledOut
	if enabledOut == "" || strings.Contains(enabledOut, "No such file") || strings.Contains(enabledOut, "not-found") {
		if !env.Check {
			return step.Result{}, fmt.Errorf("%s: systemd unit %s not found (is the unit file installed? daemon_reload: true after writing it)", env.Target.Host(), name)
		}
		// In check mode an earlier task would have installed it.
		return step.Result{Changed: true, Msg: "would act on " + name + " (unit not installed yet)", Data: data}, nil
	}
	maskWanted := args.Has("masked") && args.Bool("masked")
	if maskWanted && args.Has("enabled") && args.Bool("enabled") {
		return step.Result{}, fmt.Errorf("systemd: a unit cannot be both masked and enabled")
	}
	if args.Has("masked") {
		masked := enabledOut == "masked" || enabledOut == "masked-runtime"
		if maskWanted != masked {
			verb := "unmask"
			if maskWanted {
				verb = "mask"
			}
			if err := act(verb, "systemctl", verb, name); err != nil {
				return step.Result{}, err
			}
			if !env.Check {
				if enabledOut, err = systemctlQuery(ctx, env, "is-enabled", name); err != nil {
					return step.Result{}, err
				}
			} else if !maskWanted {
				enabledOut = "disabled"
			}
		}
	}
	// A masked unit is as disabled as it can be; only enabling needs work.
	if args.Has("enabled") && !maskWanted {
		want := args.Bool("enabled")
		cur, fixed := unitIsEnabled(enabledOut)
		if strings.HasPrefix(enabledOut, "masked") && want {
			return step.Result{}, fmt.Errorf("%s: %s is masked; add masked: false to enable it", env.Target.Host(), name)
		}
		if !fixed && cur != want && !strings.HasPrefix(enabledOut, "masked") {
			verb := "disable"
			if want {
				verb = "enable"
			}
			if err := act(verb, "systemctl", verb, name); err != nil {
				return step.Result{}, err
			}
		}
	}
	if state != "" {
		active, err := systemctlQuery(ctx, env, "is-active", name)
		if err != nil {
			return step.Result{}, err
		}
		data["active_state"] = active
		running := active == "active" || active == "activating" || active == "reloading"
		var verb string
		switch {
		case state == "started" && !running:
			verb = "start"
		case state == "stopped" && running:
			verb = "stop"
		case state == "restarted":
			verb = "restart"
		case state == "reloaded" && running:
			verb = "reload"
		case state == "reloaded":
			verb = "start"
		}
		if verb != "" {
			changes = append(changes, verb+" "+name)
			if !env.Check {
				if err := systemctlAct(ctx, env, verb, name); err != nil {
					return step.Result{}, err
				}
			}
		}
	}
	return done(env, changes, data, ""), nil
}

// reloadProbe prints Id, LoadState, NeedDaemonReload and DropInPaths of the
// unit named in $1 and of every unit with a file or drop-in directory
// directly under /etc/systemd/system (where roles write units), in blocks
// separated by empty lines, then a line DropIn=<path> for each drop-in file
// there. Asking systemd about these few units costs a fraction of a
// daemon-reload, which re-reads every unit file and re-runs the generators;
// asking about every loaded unit ('*') costs about as much as the reload.
const reloadProbe = `[ -n "$1" ] || shift
for f in /etc/systemd/system/*; do
  b=${f##*/}
  case $b in *.wants|*.requires|*.upholds) continue ;; *.d) b=${b%.d} ;; esac
  case $b in
    *@.*) continue ;;
    *.service|*.socket|*.timer|*.mount|*.path|*.target|*.slice|*.automount|*.swap) set -- "$@" "$b" ;;
  esac
done
[ "$#" -gt 0 ] || exit 0
systemctl show --property=Id,LoadState,NeedDaemonReload,DropInPaths -- "$@" || exit
printf '\n'
for f in /etc/systemd/system/*.d/*.conf; do
  [ -e "$f" ] && printf 'DropIn=%s\n' "$f"
done
exit 0`

// needDaemonReload says whether systemd has to re-read its unit files: the
// named unit or a unit under /etc/systemd/system changed on disk since
// systemd read it (NeedDaemonReload=yes), got a drop-in systemd does not
// know of (systemd 252 reports no NeedDaemonReload for a new drop-in
// directory), or the named unit is not loaded. Without a name (after
// removing units) it is always yes: a removed unit's file is no longer there
// to be found. When systemd cannot answer, yes.
func needDaemonReload(ctx context.Context, env *step.Env, name string) (bool, string, error) {
	if name == "" {
		return true, "requested without a unit name", nil
	}
	res, err := runScript(ctx, env, reloadProbe, name)
	if err != nil {
		return false, "", err
	}
	if res.ExitCode != 0 {
		return true, "systemctl show failed, reloading to be safe: " + strings.TrimSpace(string(res.Stderr)), nil
	}
	want := name
	if !strings.Contains(want, ".") {
		want += ".service"
	}
	dropins := map[string]map[string]bool{} // unit -> drop-in paths systemd read
	var onDisk []string
	for block := range strings.SplitSeq(strings.TrimSpace(string(res.Stdout)), "\n\n") {
		props := map[string]string{}
		for line := range strings.Lines(block) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			switch {
			case !ok:
			case k == "DropIn":
				onDisk = append(onDisk, v)
			default:
				props[k] = v
			}
		}
		if props["NeedDaemonReload"] == "yes" {
			return true, props["Id"] + " changed on disk", nil
		}
		if props["Id"] == want && props["LoadState"] != "loaded" && props["LoadState"] != "masked" {
			return true, want + " is " + props["LoadState"], nil
		}
		if id := props["Id"]; id != "" && props["LoadState"] == "loaded" {
			dropins[id] = map[string]bool{}
			for _, p := range strings.Fields(props["DropInPaths"]) {
				dropins[id][p] = true
			}
		}
	}
	for _, p := range onDisk {
		unit := strings.TrimSuffix(path.Base(path.Dir(p)), ".d")
		if known, ok := dropins[unit]; ok && !known[p] {
			return true, "new drop-in " + p, nil
		}
	}
	return false, "", nil
}

// systemctlQuery returns the one-word answer of is-active/is-enabled, whose
// exit status only says "not active/enabled".
func systemctlQuery(ctx context.Context, env *step.Env, query, name string) (string, error) {
	res, err := run(ctx, env, "systemctl", query, name)
	if err != nil {
		return "", err
	}
	out := strings.TrimSpace(string(res.Stdout))
	if out == "" {
		out = strings.TrimSpace(string(res.Stderr))
	}
	if res.ExitCode == 127 {
		return "", fmt.Errorf("%s: systemctl not found: the host does not run systemd", env.Target.Host())
	}
	return out, nil
}

// systemctlAct runs start/stop/restart/reload and, when it fails, reports
// the unit's last journal lines: "see journalctl" is no help in a log.
func systemctlAct(ctx context.Context, env *step.Env, verb, name string) error {
	res, err := run(ctx, env, "systemctl", verb, name)
	if err != nil {
		return err
	}
	if res.ExitCode == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: systemctl %s %s failed (rc %d): %s", env.Target.Host(), verb, name, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	j, jerr := run(ctx, env, "journalctl", "-u", name, "-n", "20", "--no-pager", "-o", "short-iso")
	if jerr == nil && j.ExitCode == 0 && len(j.Stdout) > 0 {
		msg += "\nlast journal lines of " + name + ":\n" + strings.TrimRight(string(j.Stdout), "\n")
	}
	return fmt.Errorf("%s", msg)
}
