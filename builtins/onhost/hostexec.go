// Package onhost holds what the builtins do on a target host alike: run a
// command (argv or a script, with the task's become and environment), read a
// file, write one with its owner and mode (compared first, backed up, diffed,
// left alone in check mode), remove a path, and report the outcome.
package onhost

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// Run starts argv on the target with the task's become setting.
func Run(ctx context.Context, env *step.Env, argv ...string) (transport.Result, error) {
	return env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Env: env.Environment})
}

// RunScript starts a /bin/sh script on the target; args become $1, $2, ...
// so values never need shell quoting.
func RunScript(ctx context.Context, env *step.Env, script string, args ...string) (transport.Result, error) {
	argv := append([]string{"/bin/sh", "-c", script, "sh"}, args...)
	return env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Env: env.Environment})
}

// MustRun is run for commands whose failure fails the task: a non-zero exit
// becomes an error naming the host, the command and its stderr.
func MustRun(ctx context.Context, env *step.Env, argv ...string) (transport.Result, error) {
	res, err := Run(ctx, env, argv...)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, CmdError(env, argv, res)
	}
	return res, nil
}

// CmdError is the error of a command that exited non-zero: the host, the
// command and the last lines of what it said.
func CmdError(env *step.Env, argv []string, res transport.Result) error {
	msg := strings.TrimSpace(string(res.Stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(res.Stdout))
	}
	return fmt.Errorf("%s: %s exited %d: %s", env.Target.Host(), strings.Join(argv, " "), res.ExitCode, LastLines(msg, 10))
}

// ReadFile returns a file's content on the target; exists is false when it
// is absent.
func ReadFile(ctx context.Context, env *step.Env, path string) (data []byte, exists bool, err error) {
	fi, err := env.Target.Stat(ctx, path, env.Become)
	if err != nil {
		return nil, false, err
	}
	if !fi.Exists {
		return nil, false, nil
	}
	if fi.IsDir {
		return nil, true, fmt.Errorf("%s: %s is a directory", env.Target.Host(), path)
	}
	var buf bytes.Buffer
	if err := env.Target.Get(ctx, path, &buf, env.Become); err != nil {
		return nil, true, err
	}
	return buf.Bytes(), true, nil
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SplitLines splits a command's output into lines (none for empty output).
func SplitLines(b []byte) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

// Logf writes to the task's log, when it has one.
func Logf(env *step.Env, format string, args ...any) {
	if env.Logf != nil {
		env.Logf(format, args...)
	}
}

// CheckChoice validates a string argument against its allowed values; the
// engine validates too, but builtins are also called from Go.
func CheckChoice(name, v string, choices ...string) error {
	for _, c := range choices {
		if v == c {
			return nil
		}
	}
	return fmt.Errorf("%s: %q is not one of %s", name, v, strings.Join(choices, ", "))
}
