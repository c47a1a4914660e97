package system

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mensylisir/kubexm/builtins/files"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

type sysctlBuiltin struct{}

func (sysctlBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "sysctl",
		Summary: "Set a kernel parameter now (sysctl -w) and persist it in a file under /etc/sysctl.d.",
		Doc: "The running value is read from /proc/sys and compared with whitespace normalised, so a second run " +
			"changes nothing. `state: absent` removes the setting from the file and leaves the running value. " +
			"Inside containers some keys are read-only: `ignore_apply_errors: true` keeps the file and reports " +
			"ok with a warning instead of failing.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Required: true, Aliases: []string{"key"}, Doc: "Dotted key, such as net.ipv4.ip_forward."},
			{Name: "value", Type: step.String, Aliases: []string{"val"}, Doc: "Value; required for state: present."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "Whether the setting is persisted."},
			{Name: "sysctl_file", Type: step.String, Default: "/etc/sysctl.d/99-kubexm.conf", Doc: "File holding the persistent setting."},
			{Name: "reload", Type: step.Bool, Default: true, Doc: "Apply the value to the running kernel as well."},
			{Name: "ignore_apply_errors", Type: step.Bool, Default: false, Doc: "Do not fail when the running kernel refuses the value (read-only keys in containers)."},
		},
		Examples: []string{"sysctl:\n  name: net.ipv4.ip_forward\n  value: \"1\""},
	}
}

var sysctlKey = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-/*]*$`)

func normalizeSysctl(v string) string { return strings.Join(strings.Fields(v), " ") }

func (sysctlBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !sysctlKey.MatchString(name) {
		return step.Result{}, fmt.Errorf("sysctl: %q is not a sysctl key such as net.ipv4.ip_forward", name)
	}
	value := normalizeSysctl(args.String("value"))
	absent := args.String("state") == "absent"
	if !absent && !args.Has("value") {
		return step.Result{}, fmt.Errorf("sysctl: value is required for state: present")
	}
	file := args.String("sysctl_file")
	fileArgs := step.Args{"path": file, "create": true, "state": "present"}
	if absent {
		fileArgs["state"] = "absent"
	}
	re := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(name) + `\s*=`)
	res, err := files.EditFile(ctx, env, fileArgs, func(lines []string) ([]string, error) {
		return files.EditLine(lines, name+" = "+value, re, absent, "", "")
	})
	if err != nil {
		return step.Result{}, err
	}
	var changes []string
	if res.Changed {
		changes = append(changes, "persist in "+file)
	}
	data := map[string]any{"name": name, "value": value, "sysctl_file": file}
	var warning string
	if !absent && args.Bool("reload") {
		procPath := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
		cur, exists, err := onhost.ReadFile(ctx, env, procPath)
		if err != nil {
			return step.Result{}, err
		}
		if !exists {
			return step.Result{}, fmt.Errorf("%s: sysctl %s does not exist in this kernel (%s missing; is its module loaded?)", env.Target.Host(), name, procPath)
		}
		data["previous"] = normalizeSysctl(string(cur))
		if normalizeSysctl(string(cur)) != value {
			if env.Check {
				changes = append(changes, fmt.Sprintf("set %s = %s (now %s)", name, value, normalizeSysctl(string(cur))))
			} else {
				r, err := onhost.Run(ctx, env, "sysctl", "-w", name+"="+value)
				if err != nil {
					return step.Result{}, err
				}
				// procps sysctl may exit 0 after a refused write: believe /proc.
				after, _, err := onhost.ReadFile(ctx, env, procPath)
				if err != nil {
					return step.Result{}, err
				}
				why := strings.TrimSpace(string(r.Stderr))
				if why == "" {
					why = fmt.Sprintf("the value reads back as %q", normalizeSysctl(string(after)))
				}
				switch {
				case r.ExitCode == 0 && normalizeSysctl(string(after)) == value:
					changes = append(changes, fmt.Sprintf("set %s = %s", name, value))
				case args.Bool("ignore_apply_errors"):
					warning = fmt.Sprintf("warning: the running kernel refused %s=%s: %s", name, value, why)
					onhost.Logf(env, "%s: %s", env.Target.Host(), warning)
				default:
					return step.Result{}, fmt.Errorf("%s: sysctl -w %s=%s failed: %s (ignore_apply_errors: true accepts read-only keys)", env.Target.Host(), name, value, why)
				}
			}
		}
	}
	out := onhost.Done(env, changes, data, res.Diff)
	if warning != "" {
		data["warning"] = warning
		out.Msg = strings.TrimPrefix(strings.Join([]string{out.Msg, warning}, "; "), "; ")
	}
	return out, nil
}
