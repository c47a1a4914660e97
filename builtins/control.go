package builtins

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

// AnyArgs is the argument name by which a Spec accepts arbitrary keys
// (set_fact): the engine must not reject unknown arguments of such a builtin.
const AnyArgs = "*"

type assertBuiltin struct{}

func (assertBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "assert",
		Summary: "Fail unless every expression in `that` is true.",
		Doc:     "Each expression is evaluated like a `when:` condition, in order; the first false one fails the task with `fail_msg`.",
		Args: []step.Arg{
			{Name: "that", Type: step.List, Required: true, Doc: "Expressions that must all be true."},
			{Name: "fail_msg", Type: step.String, Aliases: []string{"msg"}, Doc: "Message when an expression is false."},
			{Name: "success_msg", Type: step.String, Default: "All assertions passed", Doc: "Message when all are true."},
			{Name: "quiet", Type: step.Bool, Default: false, Doc: "Leave the message empty on success."},
		},
		FreeForm: "that",
		Examples: []string{"assert:\n  that:\n    - facts.memory_mb >= 1700\n    - facts.cpus >= 2\n  fail_msg: \"control-plane nodes need 2 CPUs and 1.7 GiB\""},
	}
}

func (assertBuiltin) Run(_ context.Context, env *step.Env, args step.Args) (step.Result, error) {
	if env.Eval == nil {
		return step.Result{}, fmt.Errorf("assert: no expression evaluator in the environment")
	}
	that := args.Strings("that")
	if len(that) == 0 {
		return step.Result{}, fmt.Errorf("assert: that is empty")
	}
	for _, expr := range that {
		v, err := env.Eval(expr, env.Vars)
		if err != nil {
			return step.Result{}, fmt.Errorf("assert: %s: %w", expr, err)
		}
		b, ok := v.(bool)
		if !ok {
			return step.Result{}, fmt.Errorf("assert: %s is %T (%v), not true or false", expr, v, v)
		}
		if !b {
			msg := args.String("fail_msg")
			if msg == "" {
				msg = "Assertion failed"
			}
			return step.Result{Failed: true, Msg: msg + " (" + expr + ")", Data: map[string]any{"assertion": expr, "evaluated_to": false}}, nil
		}
	}
	msg := args.String("success_msg")
	if args.Bool("quiet") {
		msg = ""
	}
	return step.Result{Msg: msg}, nil
}

type failBuiltin struct{}

func (failBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:     "fail",
		Summary:  "Fail the task with a message (usually with `when:`).",
		Args:     []step.Arg{{Name: "msg", Type: step.String, Default: "Failed as requested from task", Doc: "The failure message."}},
		FreeForm: "msg",
		Examples: []string{"fail:\n  msg: \"unsupported OS {{ .facts.os_id }}\"\nwhen: facts.os_id not in ['debian', 'ubuntu', 'centos', 'rocky']"},
	}
}

func (failBuiltin) Run(_ context.Context, _ *step.Env, args step.Args) (step.Result, error) {
	return step.Result{Failed: true, Msg: args.String("msg")}, nil
}

type debugBuiltin struct{}

func (debugBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "debug",
		Summary: "Print a message or the value of an expression.",
		Doc:     "The message is shown at the default verbosity, one line per host, as in Ansible.",
		Report:  true,
		Args: []step.Arg{
			{Name: "msg", Type: step.Any, Doc: "Text (templated as usual) or any value to print."},
			{Name: "var", Type: step.String, Doc: "Expression whose value is printed, such as `facts.os_id`."},
			{Name: "verbosity", Type: step.Int, Default: 0, Doc: "Print only when the run has at least this many -v; below it the task is skipped, as in Ansible."},
		},
		FreeForm: "msg",
		Examples: []string{"debug:\n  var: join_command.stdout"},
	}
}

func (debugBuiltin) Run(_ context.Context, env *step.Env, args step.Args) (step.Result, error) {
	if n := args.Int("verbosity"); n > env.Verbosity {
		return step.Result{Skipped: true, Msg: fmt.Sprintf("verbosity %d needs -%s", n, strings.Repeat("v", n))}, nil
	}
	if args.Has("var") {
		if env.Eval == nil {
			return step.Result{}, fmt.Errorf("debug: no expression evaluator in the environment")
		}
		expr := args.String("var")
		v, err := env.Eval(expr, env.Vars)
		if err != nil {
			return step.Result{}, fmt.Errorf("debug: var %s: %w", expr, err)
		}
		return step.Result{Msg: expr + ": " + show(v), Data: map[string]any{expr: v}}, nil
	}
	v := args["msg"]
	if v == nil {
		v = "Hello world!"
	}
	return step.Result{Msg: show(v), Data: map[string]any{"msg": v}}, nil
}

// show prints strings as they are and structures as indented JSON.
func show(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

type setFactBuiltin struct{}

func (setFactBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "set_fact",
		Summary: "Set variables on the host for the rest of the run.",
		Doc: "Every key becomes a host variable with its (templated) value. It accepts any argument names " +
			"(its Spec declares the single argument `*`).",
		Args: []step.Arg{
			{Name: AnyArgs, Type: step.Any, Doc: "Any name: the variable to set, with its value."},
			{Name: "cacheable", Type: step.Bool, Doc: "Accepted as in Ansible and not a variable; kubexm has no fact cache " +
				"between runs (a resumed run restores set_fact values from its journal), so it changes nothing."},
		},
		Examples: []string{"set_fact:\n  etcd_endpoint: \"https://{{ .internal_address }}:2379\"\n  etcd_members: \"{{ len .groups.etcd }}\""},
	}
}

func (setFactBuiltin) Run(_ context.Context, _ *step.Env, args step.Args) (step.Result, error) {
	args = maps.Clone(args)
	delete(args, "cacheable")
	if len(args) == 0 {
		return step.Result{}, fmt.Errorf("set_fact: give at least one name: value")
	}
	for k := range args {
		if !identRE.MatchString(k) {
			return step.Result{}, fmt.Errorf("set_fact: %q is not a valid variable name (letters, digits, _)", k)
		}
	}
	return step.Result{Facts: maps.Clone(map[string]any(args))}, nil
}

type pauseBuiltin struct{}

func (pauseBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "pause",
		Summary: "Wait a fixed time (interrupted by cancellation). Skipped in check mode.",
		Doc:     "Prefer `wait_for` for anything that can be checked; pause is for settling times that cannot.",
		Args: []step.Arg{
			{Name: "seconds", Type: step.Duration, Doc: "Seconds to wait (or a duration such as \"1m30s\")."},
			{Name: "minutes", Type: step.Int, Doc: "Minutes to wait."},
		},
		Examples: []string{"pause:\n  seconds: 5"},
	}
}

func (pauseBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	d := args.Duration("seconds") + time.Duration(args.Int("minutes"))*time.Minute
	if d < 0 {
		return step.Result{}, fmt.Errorf("pause: negative duration %s", d)
	}
	if env.Check {
		return step.Result{Skipped: true, Msg: "skipped in check mode: pause " + d.String()}, nil
	}
	start := time.Now()
	if err := onhost.Sleep(ctx, d); err != nil {
		return step.Result{}, fmt.Errorf("pause interrupted after %s: %w", time.Since(start).Round(time.Second), err)
	}
	return step.Result{Msg: "paused " + d.String(), Data: map[string]any{"elapsed": time.Since(start).Seconds()}}, nil
}
