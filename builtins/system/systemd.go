package system

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

type systemdBuiltin struct{}

func (systemdBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "systemd",
		Summary: "Start, stop, restart, reload, enable, disable, mask a systemd unit; reload unit files.",
		Doc: "The current state is read first, in one command on the host: one `systemctl show` (the unit's active " +
			"state), with `systemctl is-enabled` only when the task enables, disables or masks (it reads the unit's " +
			"links on disk), so `started`, `stopped`, `enabled` and `masked` act only when needed. `restarted` and `reloaded` always act (they are requests, " +
			"not states): use them from handlers or with a `when:` on what changed. `daemon_reload` runs " +
			"`systemctl daemon-reload` before anything else, only when systemd says the named unit's or any " +
			"unit's under /etc/systemd/system files changed since it read them (`NeedDaemonReload=yes`) or the " +
			"named unit is not loaded; without `name` it always runs (after removing units). When the task " +
			"enables or disables the unit, `systemctl enable`/`disable` does that reload itself and no second " +
			"one runs. By itself it does " +
			"not count as a change (the result's `daemon_reloaded` says whether it ran). When a unit fails to start, the task fails with the unit's last 20 journal lines. " +
			"`started` on a unit that is still starting (`activating`, e.g. a Type=notify unit started with `no_block`) waits until it has started, or fails with its journal lines, and is not a change. " +
			"With `no_block` the start, stop, restart or reload is queued (`systemctl --no-block`) and the task returns at once: " +
			"a later task waits for the unit (a `started` task, or a health check), so that its start overlaps other work.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Aliases: []string{"unit", "service"}, Doc: "Unit name; `.service` is implied when no suffix is given."},
			{Name: "state", Type: step.String, Choices: []string{"started", "stopped", "restarted", "reloaded"}, Doc: "Desired run state."},
			{Name: "enabled", Type: step.Bool, Doc: "Whether the unit starts at boot."},
			{Name: "masked", Type: step.Bool, Doc: "Whether the unit is masked (cannot be started at all)."},
			{Name: "daemon_reload", Type: step.Bool, Default: false, Aliases: []string{"daemon-reload"}, Doc: "Run `systemctl daemon-reload` first when a unit file or drop-in changed on disk (after writing unit files)."},
			{Name: "no_block", Type: step.Bool, Default: false, Aliases: []string{"no-block"}, Doc: "Queue the state change and return without waiting for it; the unit's failure to start is then a later task's to find."},
		},
		Examples: []string{"systemd:\n  name: containerd\n  state: started\n  enabled: true\n  daemon_reload: true"},
	}
}

// asksEnablement says whether the task enables, disables, masks or unmasks
// the unit, and so needs is-enabled's answer.
func asksEnablement(args step.Args) bool { return args.Has("enabled") || args.Has("masked") }

// togglesEnablement says whether the task will run systemctl enable or
// disable on a unit whose is-enabled answer is enabledOut: enabled is
// given, masked is not, and the unit is installable and not as wanted.
func togglesEnablement(args step.Args, enabledOut string) bool {
	if !args.Has("enabled") || args.Has("masked") || strings.HasPrefix(enabledOut, "masked") {
		return false
	}
	if unitMissing(enabledOut) {
		return false
	}
	cur, fixed := unitIsEnabled(enabledOut)
	return !fixed && cur != args.Bool("enabled")
}

// unitMissing says whether is-enabled's answer enabledOut is that of a
// unit systemd does not know.
func unitMissing(enabledOut string) bool {
	return enabledOut == "" || strings.Contains(enabledOut, "No such file") || strings.Contains(enabledOut, "not-found")
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
		if err := onhost.CheckChoice("state", state, "started", "stopped", "restarted", "reloaded"); err != nil {
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
	// What the task reads of the unit (and, with daemon_reload, whether
	// systemd must re-read its files) comes back in one command: a re-run
	// that changes nothing costs one round trip.
	var st unitAnswers
	read := false
	if args.Bool("daemon_reload") && !env.Check {
		var need bool
		var why string
		var err error
		if wantsUnit {
			need, why, st, err = probeUnit(ctx, env, name, true, asksEnablement(args))
			read = true
		} else {
			need, why, err = needDaemonReload(ctx, env, name)
		}
		if err != nil {
			return step.Result{}, err
		}
		switch {
		case need && read && togglesEnablement(args, st.enabled):
			// systemctl enable and disable reload systemd themselves
			// (without --no-reload), before the start below: a second
			// reload first would cost as much again (half a second on
			// ten loaded machines).
			data["daemon_reloaded"] = true
			env.Logf("daemon-reload: %s (by systemctl enable or disable)", why)
		case need:
			if _, err := onhost.MustRun(ctx, env, "systemctl", "daemon-reload"); err != nil {
				return step.Result{}, err
			}
			data["daemon_reloaded"] = true
			env.Logf("daemon-reload: %s", why)
			// The reload may have loaded the unit: read it again.
			read = false
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
		_, err := onhost.MustRun(ctx, env, argv...)
		return err
	}
	if !read {
		var err error
		if _, _, st, err = probeUnit(ctx, env, name, false, asksEnablement(args)); err != nil {
			return step.Result{}, err
		}
	}
	enabledOut := st.enabled
	data["enabled_state"] = enabledOut
	if st.missing() {
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
				var err error
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
		// Read before enabling or masking, which do not start or stop
		// the unit.
		active := st.active
		data["active_state"] = active
		running := active == "active" || active == "activating" || active == "reloading"
		noBlock := args.Bool("no_block")
		var verb string
		switch {
		case state == "started" && active == "activating" && !noBlock && !env.Check:
			// systemctl start joins the start job already queued and
			// returns when it ends: a wait on the unit, not a change.
			if err := systemctlAct(ctx, env, "start", name, false); err != nil {
				return step.Result{}, err
			}
			res := onhost.Done(env, changes, data, "")
			if res.Msg == "" {
				res.Msg = "waited for " + name + " to finish starting"
			}
			return res, nil
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
				if err := systemctlAct(ctx, env, verb, name, noBlock); err != nil {
					return step.Result{}, err
				}
			}
		}
	}
	return onhost.Done(env, changes, data, ""), nil
}

// reloadProbe prints Id, LoadState, NeedDaemonReload, DropInPaths,
// ActiveState and UnitFileState of the unit named in $1 (the first block)
// and of every unit with a file or drop-in directory
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
systemctl show --property=Id,LoadState,NeedDaemonReload,DropInPaths,ActiveState,UnitFileState -- "$@" || exit
printf '\n'
for f in /etc/systemd/system/*.d/*.conf; do
  [ -e "$f" ] && printf 'DropIn=%s\n' "$f"
done
exit 0`

// needDaemonReload says whether systemd has to re-read its unit files: the
// named unit or a unit under /etc/systemd/system changed on disk since
// systemd read it (NeedDaemonReload=yes), got a drop-in systemd does not
// know, or the named unit is not loaded. Without a name it always does.
func needDaemonReload(ctx context.Context, env *step.Env, name string) (bool, string, error) {
	if name == "" {
		return true, "requested without a unit name", nil
	}
	res, err := onhost.RunScript(ctx, env, reloadProbe, name)
	if err != nil {
		return false, "", err
	}
	need, why := reloadNeeded(name, res.ExitCode, string(res.Stdout), string(res.Stderr))
	return need, why, nil
}

// reloadNeeded reads reloadProbe's exit status and output for unit name.
func reloadNeeded(name string, code int, stdout, stderr string) (bool, string) {
	if code != 0 {
		return true, "systemctl show failed, reloading to be safe: " + strings.TrimSpace(stderr)
	}
	want := name
	if !strings.Contains(want, ".") {
		want += ".service"
	}
	dropins := map[string]map[string]bool{} // unit -> drop-in paths systemd read
	var onDisk []string
	for block := range strings.SplitSeq(strings.TrimSpace(stdout), "\n\n") {
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
			return true, props["Id"] + " changed on disk"
		}
		if props["Id"] == want && props["LoadState"] != "loaded" && props["LoadState"] != "masked" {
			return true, want + " is " + props["LoadState"]
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
			return true, "new drop-in " + p
		}
	}
	return false, ""
}

// unitAnswers is what systemd says of a unit: its LoadState, its
// ActiveState (what is-active prints) and whether it is enabled: is-enabled's
// answer (or the message of a unit systemd does not know) where the task
// enables, disables or masks, else the UnitFileState systemd keeps.
type unitAnswers struct {
	enabled, active, load string
	// isEnabled: enabled is is-enabled's answer.
	isEnabled bool
}

// missing says whether systemd does not know the unit: by is-enabled's
// answer where it was asked (a unit file that systemd has not loaded yet
// is there for the enable, whose own reload loads it), else by LoadState.
func (u unitAnswers) missing() bool {
	if u.isEnabled {
		return unitMissing(u.enabled)
	}
	return u.load == "not-found"
}

// unitShow prints the Id, LoadState, ActiveState and UnitFileState of unit
// $1: one systemctl, which is most of a probe's time on a host.
const unitShow = `systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- "$1"`

// isEnabledProbe prints is-enabled's answer for unit $1 (its stderr when
// its stdout is empty, as for a unit that does not exist). is-enabled reads
// the unit's files on disk, where UnitFileState is what systemd last read:
// a task that enables or masks must see a link removed by hand.
const isEnabledProbe = `o=$(systemctl is-enabled "$1" 2>/dev/null)
[ -n "$o" ] || o=$(systemctl is-enabled "$1" 2>&1)
printf '%s\n' "$o"`

// probeUnit reads unit name's state in one command: with reload it runs
// reloadProbe and says whether a daemon-reload is needed, as
// needDaemonReload does; with isEnabled it also asks is-enabled.
func probeUnit(ctx context.Context, env *step.Env, name string, reload, isEnabled bool) (bool, string, unitAnswers, error) {
	show := unitShow
	if reload {
		// The probe runs in a subshell (it shifts and exits).
		show = "(\n" + reloadProbe + "\n)"
	}
	script := "command -v systemctl >/dev/null 2>&1 || exit 127\n" + show + "\nprintf '\\n\\037%s\\n' \"$?\"\n"
	if isEnabled {
		script += isEnabledProbe
	}
	res, err := onhost.RunScript(ctx, env, script, name)
	if err != nil {
		return false, "", unitAnswers{}, err
	}
	if res.ExitCode == 127 {
		return false, "", unitAnswers{}, fmt.Errorf("%s: systemctl not found: the host does not run systemd", env.Target.Host())
	}
	out := string(res.Stdout)
	props, rest, ok := strings.Cut(out, "\n\037")
	code, enabledOut, ok2 := strings.Cut(rest, "\n")
	rc, convErr := strconv.Atoi(code)
	if !ok || !ok2 || convErr != nil || res.ExitCode != 0 {
		return false, "", unitAnswers{}, fmt.Errorf("%s: reading unit %s (rc %d): %s", env.Target.Host(), name, res.ExitCode, strings.TrimSpace(string(res.Stderr)+" "+out))
	}
	need, why := false, ""
	if reload {
		need, why = reloadNeeded(name, rc, props, string(res.Stderr))
	} else if rc != 0 {
		return false, "", unitAnswers{}, fmt.Errorf("%s: systemctl show %s failed (rc %d): %s", env.Target.Host(), name, rc, strings.TrimSpace(string(res.Stderr)))
	}
	// The named unit's block comes first; a reload probe that failed has
	// none, and the reload it asks for reads the unit again.
	first, _, _ := strings.Cut(strings.TrimSpace(props), "\n\n")
	unit := map[string]string{}
	for line := range strings.Lines(first) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			unit[k] = v
		}
	}
	st := unitAnswers{enabled: unit["UnitFileState"], active: unit["ActiveState"], load: unit["LoadState"]}
	if isEnabled {
		st.enabled, st.isEnabled = strings.TrimSpace(enabledOut), true
	}
	return need, why, st, nil
}

// systemctlQuery returns the one-word answer of is-active/is-enabled, whose
// exit status only says "not active/enabled".
func systemctlQuery(ctx context.Context, env *step.Env, query, name string) (string, error) {
	res, err := onhost.Run(ctx, env, "systemctl", query, name)
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

// systemctlAct runs start/stop/restart/reload (only queued with noBlock)
// and, when it fails, reports the unit's last journal lines: "see
// journalctl" is no help in a log.
func systemctlAct(ctx context.Context, env *step.Env, verb, name string, noBlock bool) error {
	argv := []string{"systemctl", verb, name}
	if noBlock {
		argv = []string{"systemctl", "--no-block", verb, name}
	}
	res, err := onhost.Run(ctx, env, argv...)
	if err != nil {
		return err
	}
	if res.ExitCode == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: %s failed (rc %d): %s", env.Target.Host(), strings.Join(argv, " "), res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	j, jerr := onhost.Run(ctx, env, "journalctl", "-u", name, "-n", "20", "--no-pager", "-o", "short-iso")
	if jerr == nil && j.ExitCode == 0 && len(j.Stdout) > 0 {
		msg += "\nlast journal lines of " + name + ":\n" + strings.TrimRight(string(j.Stdout), "\n")
	}
	return fmt.Errorf("%s", msg)
}
