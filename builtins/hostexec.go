package builtins

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// run starts argv on the target with the task's become setting.
func run(ctx context.Context, env *step.Env, argv ...string) (transport.Result, error) {
	return env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Env: env.Environment})
}

// runScript starts a /bin/sh script on the target; args become $1, $2, ...
// so values never need shell quoting.
func runScript(ctx context.Context, env *step.Env, script string, args ...string) (transport.Result, error) {
	argv := append([]string{"/bin/sh", "-c", script, "sh"}, args...)
	return env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Env: env.Environment})
}

// mustRun is run for commands whose failure fails the task: a non-zero exit
// becomes an error naming the host, the command and its stderr.
func mustRun(ctx context.Context, env *step.Env, argv ...string) (transport.Result, error) {
	res, err := run(ctx, env, argv...)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, cmdError(env, argv, res)
	}
	return res, nil
}

func cmdError(env *step.Env, argv []string, res transport.Result) error {
	msg := strings.TrimSpace(string(res.Stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(res.Stdout))
	}
	return fmt.Errorf("%s: %s exited %d: %s", env.Target.Host(), strings.Join(argv, " "), res.ExitCode, lastLines(msg, 10))
}

// readFile returns a file's content on the target; exists is false when it
// is absent.
func readFile(ctx context.Context, env *step.Env, path string) (data []byte, exists bool, err error) {
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func splitLines(b []byte) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

func logf(env *step.Env, format string, args ...any) {
	if env.Logf != nil {
		env.Logf(format, args...)
	}
}

// checkChoice validates a string argument against its allowed values; the
// engine validates too, but builtins are also called from Go.
func checkChoice(name, v string, choices ...string) error {
	for _, c := range choices {
		if v == c {
			return nil
		}
	}
	return fmt.Errorf("%s: %q is not one of %s", name, v, strings.Join(choices, ", "))
}
