// Package system provides the builtins that keep a host's system state:
// systemd units, sysctl settings, kernel modules, the hostname and time zone,
// users and groups, and packages (apt, dnf, yum, from a repository or a
// bundle's files).
package system

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/mensylisir/kubexm/builtins/files"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

type modprobeBuiltin struct{}

func (modprobeBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "modprobe",
		Summary: "Load or unload a kernel module and persist it in /etc/modules-load.d.",
		Doc: "A module counts as loaded when /sys/module/<name> exists or the kernel lists it as built in. " +
			"`persistent: present` writes /etc/modules-load.d/<name>.conf (and /etc/modprobe.d/<name>.conf for " +
			"params) so it loads at boot. Kernels without loadable modules (containers) cannot load anything: " +
			"`ignore_load_errors: true` still persists and reports ok with a warning.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Required: true, Doc: "Module name, such as br_netfilter."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "Loaded or not."},
			{Name: "params", Type: step.String, Default: "", Doc: "Module parameters, such as \"nf_conntrack_max=131072\"."},
			{Name: "persistent", Type: step.String, Default: "present", Choices: []string{"present", "absent", "disabled"}, Doc: "Whether to load at boot (disabled: leave boot config alone)."},
			{Name: "modules_load_file", Type: step.String, Doc: "File listing modules for boot, shared with other modules: only this module's line is added or removed. Default: /etc/modules-load.d/<name>.conf, holding this module alone."},
			{Name: "ignore_load_errors", Type: step.Bool, Default: false, Doc: "Do not fail when the module cannot be loaded (no /lib/modules in containers)."},
		},
		Examples: []string{"modprobe:\n  name: br_netfilter"},
	}
}

var moduleName = regexp.MustCompile(`^[A-Za-z0-9_\-]+$`)

func (modprobeBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !moduleName.MatchString(name) {
		return step.Result{}, fmt.Errorf("modprobe: %q is not a module name", name)
	}
	state := args.String("state")
	if state == "" {
		state = "present"
	}
	persistent := args.String("persistent")
	if persistent == "" {
		persistent = "present"
	}
	if err := onhost.CheckChoice("persistent", persistent, "present", "absent", "disabled"); err != nil {
		return step.Result{}, fmt.Errorf("modprobe: %w", err)
	}
	params := strings.TrimSpace(args.String("params"))
	data := map[string]any{"name": name, "state": state}
	var changes []string
	var diffs []string

	loaded, err := moduleLoaded(ctx, env, name)
	if err != nil {
		return step.Result{}, err
	}
	var warning string
	switch {
	case state == "present" && !loaded:
		changes = append(changes, "load "+name)
		if !env.Check {
			argv := append([]string{"modprobe", name}, strings.Fields(params)...)
			res, err := onhost.Run(ctx, env, argv...)
			if err != nil {
				return step.Result{}, err
			}
			if res.ExitCode != 0 {
				why := strings.TrimSpace(string(res.Stderr))
				if !args.Bool("ignore_load_errors") {
					return step.Result{}, fmt.Errorf("%s: modprobe %s failed: %s (ignore_load_errors: true accepts kernels without loadable modules)", env.Target.Host(), name, why)
				}
				changes = changes[:len(changes)-1]
				warning = fmt.Sprintf("warning: could not load %s: %s", name, why)
				onhost.Logf(env, "%s: %s", env.Target.Host(), warning)
			}
		}
	case state == "absent" && loaded:
		changes = append(changes, "unload "+name)
		if !env.Check {
			if _, err := onhost.MustRun(ctx, env, "modprobe", "-r", name); err != nil {
				return step.Result{}, err
			}
		}
	}

	if persistent != "disabled" {
		want := persistent == "present" && state == "present"
		var r step.Result
		var err error
		if loadFile := args.String("modules_load_file"); loadFile != "" {
			// A file shared by several modules: manage this module's line only.
			lineState := "absent"
			if want {
				lineState = "present"
			}
			r, err = runBuiltin(ctx, env, files.LineInFile{}, step.Args{"path": loadFile, "line": name,
				"regexp": "^" + regexp.QuoteMeta(name) + "$", "state": lineState, "create": true})
		} else {
			r, err = ensureFile(ctx, env, "/etc/modules-load.d/"+name+".conf", name+"\n", want)
		}
		if err != nil {
			return step.Result{}, err
		}
		if r.Changed {
			changes = append(changes, "boot config: "+r.Msg)
			diffs = append(diffs, r.Diff)
		}
		optFile := "/etc/modprobe.d/" + name + ".conf"
		r, err = ensureFile(ctx, env, optFile, "options "+name+" "+params+"\n", want && params != "")
		if err != nil {
			return step.Result{}, err
		}
		if r.Changed {
			changes = append(changes, "options "+optFile)
			diffs = append(diffs, r.Diff)
		}
	}
	out := onhost.Done(env, changes, data, strings.Join(diffs, ""))
	if warning != "" {
		data["warning"] = warning
		out.Msg = strings.TrimPrefix(out.Msg+"; "+warning, "; ")
	}
	return out, nil
}

// ensureFile makes path hold exactly content (present) or not exist.
func ensureFile(ctx context.Context, env *step.Env, p, content string, present bool) (step.Result, error) {
	if present {
		return onhost.WriteContent(ctx, env, p, []byte(content), onhost.WriteOpts{})
	}
	return runBuiltin(ctx, env, files.File{}, step.Args{"path": p, "state": "absent"})
}

// moduleLoaded checks /sys/module, then the kernel's list of built-in
// modules (which have no /sys/module entry when they take no parameters).
func moduleLoaded(ctx context.Context, env *step.Env, name string) (bool, error) {
	res, err := onhost.RunScript(ctx, env, `
m=$(printf %s "$1" | tr - _)
[ -d "/sys/module/$m" ] && exit 0
f="/lib/modules/$(uname -r)/modules.builtin"
[ -r "$f" ] && grep -Eq "/($1|$m)\.ko(\.[a-z]+)?$" "$f" && exit 0
exit 1`, name)
	if err != nil {
		return false, err
	}
	return res.ExitCode == 0, nil
}

type hostnameBuiltin struct{}

func (hostnameBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:     "hostname",
		Summary:  "Set the host name, now and persistently.",
		Doc:      "Uses `hostnamectl` when systemd's hostnamed answers, otherwise writes /etc/hostname and runs `hostname`.",
		Args:     []step.Arg{{Name: "name", Type: step.String, Required: true, Doc: "The new host name."}},
		FreeForm: "name",
		Examples: []string{"hostname:\n  name: \"{{ .inventory_hostname }}\""},
	}
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9\-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9\-]{0,62}))*$`)

func (hostnameBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !hostnameRE.MatchString(name) || len(name) > 253 {
		return step.Result{}, fmt.Errorf("hostname: %q is not a valid host name", name)
	}
	cur, err := onhost.MustRun(ctx, env, "hostname")
	if err != nil {
		return step.Result{}, err
	}
	running := strings.TrimSpace(string(cur.Stdout))
	stored, _, err := onhost.ReadFile(ctx, env, "/etc/hostname")
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"name": name, "previous": running}
	if running == name && strings.TrimSpace(string(stored)) == name {
		return step.Result{Data: data}, nil
	}
	changes := []string{fmt.Sprintf("set host name %s -> %s", running, name)}
	if env.Check {
		return onhost.Done(env, changes, data, ""), nil
	}
	if hc, err := onhost.Run(ctx, env, "hostnamectl", "set-hostname", name); err != nil {
		return step.Result{}, err
	} else if hc.ExitCode == 0 {
		return onhost.Done(env, changes, data, ""), nil
	}
	// No systemd (containers, minimal images): do hostnamectl's job by hand.
	if _, err := onhost.WriteContent(ctx, env, "/etc/hostname", []byte(name+"\n"), onhost.WriteOpts{}); err != nil {
		return step.Result{}, err
	}
	if _, err := onhost.MustRun(ctx, env, "hostname", name); err != nil {
		return step.Result{}, err
	}
	return onhost.Done(env, changes, data, ""), nil
}

type timezoneBuiltin struct{}

func (timezoneBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:     "timezone",
		Summary:  "Set the system time zone.",
		Doc:      "Uses `timedatectl` when available, otherwise links /etc/localtime to the zone under /usr/share/zoneinfo and writes /etc/timezone.",
		Args:     []step.Arg{{Name: "name", Type: step.String, Required: true, Doc: "IANA zone such as Asia/Shanghai or UTC."}},
		FreeForm: "name",
		Examples: []string{"timezone:\n  name: Asia/Shanghai"},
	}
}

var zoneRE = regexp.MustCompile(`^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$`)

const zoneinfo = "/usr/share/zoneinfo/"

func (timezoneBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !zoneRE.MatchString(name) {
		return step.Result{}, fmt.Errorf("timezone: %q is not a zone name such as Asia/Shanghai", name)
	}
	zfi, err := env.Target.Stat(ctx, zoneinfo+name, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	if !zfi.Exists {
		return step.Result{}, fmt.Errorf("%s: unknown time zone %q (no %s%s; is tzdata installed?)", env.Target.Host(), name, zoneinfo, name)
	}
	cur, err := currentZone(ctx, env)
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"name": name, "previous": cur}
	if cur == name {
		return step.Result{Data: data}, nil
	}
	changes := []string{fmt.Sprintf("set time zone %s -> %s", cur, name)}
	if env.Check {
		return onhost.Done(env, changes, data, ""), nil
	}
	if r, err := onhost.Run(ctx, env, "timedatectl", "set-timezone", name); err != nil {
		return step.Result{}, err
	} else if r.ExitCode == 0 {
		return onhost.Done(env, changes, data, ""), nil
	}
	if _, err := onhost.MustRun(ctx, env, "ln", "-sfn", zoneinfo+name, "/etc/localtime"); err != nil {
		return step.Result{}, err
	}
	if _, err := onhost.WriteContent(ctx, env, "/etc/timezone", []byte(name+"\n"), onhost.WriteOpts{}); err != nil {
		return step.Result{}, err
	}
	return onhost.Done(env, changes, data, ""), nil
}

// currentZone reads the zone from the /etc/localtime link, which both
// timedatectl and the fallback maintain.
func currentZone(ctx context.Context, env *step.Env) (string, error) {
	fi, err := env.Target.Stat(ctx, "/etc/localtime", env.Become)
	if err != nil {
		return "", err
	}
	if fi.IsLink {
		if i := strings.Index(fi.LinkTarget, "zoneinfo/"); i >= 0 {
			return path.Clean(fi.LinkTarget[i+len("zoneinfo/"):]), nil
		}
	}
	tz, _, err := onhost.ReadFile(ctx, env, "/etc/timezone")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(tz)), nil
}

// Builtins returns the system builtins.
func Builtins() []step.Builtin {
	return []step.Builtin{
		systemdBuiltin{}, sysctlBuiltin{}, modprobeBuiltin{}, hostnameBuiltin{}, timezoneBuiltin{},
		userBuiltin{}, groupBuiltin{}, packageBuiltin{},
	}
}

// runBuiltin runs b as the engine would: with its Spec's defaults for what
// args leave out.
func runBuiltin(ctx context.Context, env *step.Env, b step.Builtin, args step.Args) (step.Result, error) {
	return b.Run(ctx, env, b.Spec().WithDefaults(args))
}
