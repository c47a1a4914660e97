package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// sudoArgv wraps argv to run as user through sudo. The wrapper shell
// announces its PID (the command's, after exec) on stderr behind the marker:
// until then stdin and stderr belong to sudo. With a password sudo reads it
// from stdin (-S) after the prompt marker; without one it never prompts (-n),
// since there may be no one to answer. Env is exported by the wrapper:
// sudo's env_reset would drop variables given to sudo itself.
func (t *Transport) sudoArgv(c transport.Command, argv []string) ([]string, error) {
	u := c.BecomeUser
	if u == "" {
		u = "root"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s%%d\\n' %s \"$$\" >&2\n", transport.ShellQuote(t.marker))
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, transport.ShellQuote(c.Env[k]))
	}
	b.WriteString(`exec "$@"`)
	out := []string{"sudo"}
	if t.becomePassword == "" {
		out = append(out, "-n")
	} else {
		out = append(out, "-S", "-p", t.prompt)
	}
	out = append(out, "-u", u, "--", "/bin/sh", "-c", b.String(), "sh")
	return append(out, argv...), nil
}

// runSudo runs argv through sudo. Stdin is held back until the command has
// announced itself, so that sudo (which reads the password from the same
// pipe) never consumes the command's input, whether or not it asks for a
// password. control marks the kill of a cancelled command, which is not
// itself killed.
func (t *Transport) runSudo(ctx context.Context, c transport.Command, argv []string, control bool) (transport.Result, error) {
	fail := transport.Result{ExitCode: -1}
	full, err := t.sudoArgv(c, argv)
	if err != nil {
		return fail, fmt.Errorf("%s: %w", t.name, err)
	}
	sr, err := t.startSudo(c, argv, full)
	if err != nil {
		return fail, err
	}
	defer sr.closeStdin()
	return t.awaitSudo(ctx, c, argv, control, sr)
}

// sudoRun is a started sudo: its output so far, the write end of its stdin
// and its become header, and where its end is reported.
type sudoRun struct {
	stdout, stderr *transport.CappedBuffer
	stdin          *os.File
	closeStdin     func()
	hdr            *transport.BecomeHeader
	waited         chan error
	pid            int
}

func (sr *sudoRun) result() transport.Result {
	return transport.Result{Stdout: sr.stdout.Bytes(), Stderr: sr.stderr.Bytes(), ExitCode: -1,
		Truncated: sr.stdout.Truncated() || sr.stderr.Truncated()}
}

// kill kills sudo's process group.
func (sr *sudoRun) kill() { syscall.Kill(-sr.pid, syscall.SIGKILL) }

// startSudo starts the sudo command line full, its stdin a pipe kubexm
// writes.
func (t *Transport) startSudo(c transport.Command, argv, full []string) (*sudoRun, error) {
	cmd := exec.Command(full[0], full[1:]...)
	// sudo leads a process group of its own: signals for it stay away from
	// kubexm, and a failed authentication is killed with its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = c.Dir
	limit := t.OutputCap
	if limit <= 0 {
		limit = transport.DefaultOutputCap
	}
	sr := &sudoRun{stdout: &transport.CappedBuffer{Cap: limit}, stderr: &transport.CappedBuffer{Cap: limit}}
	cmd.Stdout = transport.Tee(sr.stdout, c.Stdout)
	sr.hdr = transport.NewBecomeHeader(t.marker, t.prompt, transport.Tee(sr.stderr, c.Stderr))
	cmd.Stderr = sr.hdr
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("%s: start %s: %w", t.name, describe(argv), err)
	}
	pr.Close()
	var closeOnce sync.Once
	sr.stdin = pw
	sr.closeStdin = func() { closeOnce.Do(func() { pw.Close() }) }
	sr.waited = make(chan error, 1)
	go func() { sr.waited <- cmd.Wait() }()
	sr.pid = cmd.Process.Pid
	return sr, nil
}

// awaitSudo answers sudo's password prompt, forwards stdin once the
// command has started, and waits for the command's end or the context's.
func (t *Transport) awaitSudo(ctx context.Context, c transport.Command, argv []string, control bool, sr *sudoRun) (transport.Result, error) {
	fail := transport.Result{ExitCode: -1}
	hdr, waited := sr.hdr, sr.waited
	me := currentUser()
	pid := 0
	stdinFailed := make(chan error, 1)
	for {
		select {
		case pid = <-hdr.Started():
			// Authentication (if any) is over: what is on stdin now belongs
			// to the command.
			go transport.ForwardStdin(ctx, c.Stdin, sr.stdin, sr.closeStdin, stdinFailed)
		case err := <-stdinFailed:
			if ctx.Err() == nil {
				t.killCommand(pid, sr.pid, c.BecomeUser, waited, control)
				return sr.result(), fmt.Errorf("%s: %s: read stdin: %w", t.name, describe(argv), err)
			}
		case n := <-hdr.Prompted():
			if t.becomePassword == "" || n > 1 {
				// A second prompt means the password was refused; sudo
				// would keep asking until it gives up.
				sr.kill()
				sr.closeStdin()
				<-waited
				msg := "sudo asked for a password and no become password is set"
				if t.becomePassword != "" {
					msg = "sudo refused the become password (incorrect password)"
				}
				return fail, &transport.BecomeError{Host: t.name, User: me, Msg: msg, Output: hdr.Preamble()}
			}
			io.WriteString(sr.stdin, t.becomePassword+"\n")
		case err := <-waited:
			return t.sudoEnded(argv, me, sr, err)
		case <-ctx.Done():
			if control {
				sr.kill()
				<-waited
			} else {
				t.killCommand(pid, sr.pid, c.BecomeUser, waited, false)
			}
			return sr.result(), fmt.Errorf("%s: %s: %w", t.name, describe(argv), ctx.Err())
		}
	}
}

// sudoEnded turns sudo's end into the command's result.
func (t *Transport) sudoEnded(argv []string, me string, sr *sudoRun, err error) (transport.Result, error) {
	res := sr.result()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		return res, fmt.Errorf("%s: %s: %w", t.name, describe(argv), err)
	}
	if !sr.hdr.IsStarted() {
		msg := "sudo failed"
		if t.becomePassword == "" {
			msg = "sudo failed (no become password is set, so sudo ran with -n)"
		}
		return transport.Result{ExitCode: -1}, &transport.BecomeError{Host: t.name, User: me, Msg: msg, Output: sr.hdr.Preamble()}
	}
	return res, nil
}

// killCommand stops a command running as another user and waits for sudo.
// kubexm may signal sudo (it started it) but not the command, so the
// command's process group is killed through sudo; SIGTERM to sudo, which
// relays it, and SIGKILL to sudo's group are the fallback.
func (t *Transport) killCommand(pid, sudoPid int, becomeUser string, waited <-chan error, control bool) {
	if pid > 0 && !control {
		ctx, cancel := context.WithTimeout(context.Background(), transport.KillGrace+10*time.Second)
		script := transport.KillGroupScript(pid, transport.KillGrace)
		t.runSudo(ctx, transport.Command{Become: true, BecomeUser: becomeUser}, []string{"/bin/sh", "-c", script}, true)
		cancel()
	}
	syscall.Kill(-sudoPid, syscall.SIGTERM)
	select {
	case <-waited:
		return
	case <-time.After(transport.KillGrace):
	}
	syscall.Kill(-sudoPid, syscall.SIGKILL)
	<-waited
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// quote returns s as one POSIX shell word.
