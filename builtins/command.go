package builtins

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func commandArgs(shell bool) []step.Arg {
	var args []step.Arg
	if shell {
		args = append(args, step.Arg{Name: "cmd", Type: step.String, Required: true, Doc: "Script run by /bin/sh -c (pipes, redirections and && work)."})
	} else {
		args = append(args,
			step.Arg{Name: "cmd", Type: step.String, Doc: "Command line, split like a shell would split words (quotes and backslashes) but never interpreted by a shell."},
			step.Arg{Name: "argv", Type: step.List, Doc: "The command as a list, each item one argument; use instead of cmd."})
	}
	return append(args,
		step.Arg{Name: "creates", Type: step.String, Doc: "Skip (ok, unchanged) when this path exists on the host."},
		step.Arg{Name: "removes", Type: step.String, Doc: "Skip (ok, unchanged) when this path does not exist on the host."},
		step.Arg{Name: "chdir", Type: step.String, Doc: "Run in this directory."},
		step.Arg{Name: "env", Type: step.Map, Doc: "Extra environment variables."},
		step.Arg{Name: "stdin", Type: step.String, Doc: "Text fed to the command's standard input."},
		step.Arg{Name: "timeout", Type: step.Duration, Doc: "Kill the command after this long (\"10m\"); unset waits as long as the run does."},
	)
}

type commandBuiltin struct{ shell bool }

func (c commandBuiltin) Spec() step.Spec {
	doc := "The result holds `rc`, `stdout`, `stderr`, `stdout_lines`, `stderr_lines`, `cmd` and `duration` (seconds). " +
		"A non-zero exit fails the task with the exit code and the last lines of stderr (use `failed_when` or " +
		"`ignore_errors` to accept it). The task reports changed unless `creates`/`removes` skipped it; use " +
		"`changed_when` to refine. In check mode it is skipped, since a command's effect cannot be predicted."
	if c.shell {
		return step.Spec{
			Name:     "shell",
			Summary:  "Run a script on the host with /bin/sh -c.",
			Doc:      doc,
			Args:     commandArgs(true),
			FreeForm: "cmd",
			Examples: []string{"shell: swapoff -a && sed -i '/ swap / s/^/#/' /etc/fstab",
				"shell:\n  cmd: kubeadm init --config /etc/kubernetes/kubeadm.yaml\n  creates: /etc/kubernetes/admin.conf"},
		}
	}
	return step.Spec{
		Name:     "command",
		Summary:  "Run a command on the host without a shell.",
		Doc:      doc,
		Args:     commandArgs(false),
		FreeForm: "cmd",
		Examples: []string{"command: systemctl restart containerd",
			"command:\n  argv: [kubeadm, token, create, --ttl, 2h]\nregister: token"},
	}
}

func (c commandBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	cmd := transport.Command{Become: env.Become, Env: env.Environment, Dir: args.String("chdir"), Timeout: args.Duration("timeout")}
	var shown string
	switch {
	case c.shell:
		cmd.Script = args.String("cmd")
		shown = cmd.Script
		if strings.TrimSpace(shown) == "" {
			return step.Result{}, fmt.Errorf("shell: cmd is empty")
		}
	case args.Has("argv"):
		if args.Has("cmd") {
			return step.Result{}, fmt.Errorf("command: give cmd or argv, not both")
		}
		cmd.Argv = args.Strings("argv")
	default:
		argv, err := splitWords(args.String("cmd"))
		if err != nil {
			return step.Result{}, fmt.Errorf("command: %w", err)
		}
		cmd.Argv = argv
	}
	if !c.shell {
		if len(cmd.Argv) == 0 {
			return step.Result{}, fmt.Errorf("command: cmd or argv is required")
		}
		shown = strings.Join(cmd.Argv, " ")
	}
	data := map[string]any{"cmd": shown}
	for _, guard := range []string{"creates", "removes"} {
		if !args.Has(guard) {
			continue
		}
		p := args.String(guard)
		fi, err := env.Target.Stat(ctx, p, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		if guard == "creates" && fi.Exists {
			return step.Result{Msg: p + " exists, skipped", Data: data}, nil
		}
		if guard == "removes" && !fi.Exists {
			return step.Result{Msg: p + " does not exist, skipped", Data: data}, nil
		}
	}
	if env.Check {
		return step.Result{Skipped: true, Msg: "skipped in check mode: " + shown, Data: data}, nil
	}
	if m := args.Map("env"); len(m) > 0 {
		cmd.Env = maps.Clone(env.Environment)
		if cmd.Env == nil {
			cmd.Env = make(map[string]string, len(m))
		}
		for k, v := range m {
			cmd.Env[k] = fmt.Sprint(v)
		}
	}
	if args.Has("stdin") {
		cmd.Stdin = strings.NewReader(args.String("stdin"))
	}
	start := time.Now()
	res, err := env.Target.Run(ctx, cmd)
	if err != nil {
		return step.Result{}, err
	}
	data["rc"] = res.ExitCode
	data["stdout"] = strings.TrimRight(string(res.Stdout), "\n")
	data["stderr"] = strings.TrimRight(string(res.Stderr), "\n")
	data["stdout_lines"] = onhost.AnyList(onhost.SplitLines(res.Stdout))
	data["stderr_lines"] = onhost.AnyList(onhost.SplitLines(res.Stderr))
	data["duration"] = time.Since(start).Seconds()
	out := step.Result{Changed: true, Data: data}
	if res.ExitCode != 0 {
		out.Failed = true
		out.Msg = fmt.Sprintf("non-zero return code %d from %s", res.ExitCode, onhost.FirstLine(shown))
		if tail := onhost.LastLines(strings.TrimSpace(string(res.Stderr)), 5); tail != "" {
			out.Msg += ":\n" + tail
		}
	}
	return out, nil
}

// splitWords splits a command line into words the way sh does for quoting
// (single quotes, double quotes with \ escapes, backslashes), without
// expanding variables or globs.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
		case ch == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case ch == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote in %q", s)
			}
		default:
			inWord = true
			cur.WriteByte(ch)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
