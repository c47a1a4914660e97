package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport"
)

// Run implements transport.Transport.
func (t *Transport) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	return t.run(ctx, c, runMode{capture: true})
}

type runMode struct {
	capture bool // keep stdout in the Result (off for downloads)
	control bool // a kill: uses the reserved session and is not itself killed
}

// needSudo reports whether the command must go through sudo: becoming
// someone other than the login user.
func (t *Transport) needSudo(become bool, becomeUser string) bool {
	if !become {
		return false
	}
	if becomeUser == "" {
		becomeUser = "root"
	}
	return becomeUser != t.user
}

func (t *Transport) becomePassword() string {
	if t.host.BecomePassword != "" {
		return t.host.BecomePassword
	}
	return t.host.Password
}

func (t *Transport) run(ctx context.Context, c transport.Command, mode runMode) (transport.Result, error) {
	fail := transport.Result{ExitCode: -1}
	script, err := innerScript(t.marker, c)
	if err != nil {
		return fail, fmt.Errorf("%s: %w", t.name, err)
	}
	sudo := t.needSudo(c.Become, c.BecomeUser)
	cmdline := script
	if sudo {
		cmdline = "exec " + quoteArgv(sudoArgv(t.prompt, c.BecomeUser, script))
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	sem := t.cmdSem
	if mode.control {
		sem = t.ctlSem
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return fail, t.ctxError(ctx, c)
	}
	defer func() { <-sem }()

	sess, cn, err := t.session(ctx)
	if err != nil {
		return fail, err
	}
	defer sess.Close()

	st, err := t.start(sess, cn, c, mode, cmdline)
	if err != nil {
		return fail, err
	}
	return t.await(ctx, c, mode, sudo, sess, cn, st)
}

// started is a command started in a session: its output so far, its stdin
// and its become header, and where its end is reported.
type started struct {
	stdout, stderr *transport.CappedBuffer
	stdin          io.WriteCloser
	hdr            *transport.BecomeHeader
	waited         chan error
}

func (st *started) result() transport.Result {
	return transport.Result{Stdout: st.stdout.Bytes(), Stderr: st.stderr.Bytes(), ExitCode: -1,
		Truncated: st.stdout.Truncated() || st.stderr.Truncated()}
}

// start wires the session's output and starts cmdline in it.
func (t *Transport) start(sess *gossh.Session, cn *conn, c transport.Command, mode runMode, cmdline string) (*started, error) {
	st := &started{stdout: &transport.CappedBuffer{Cap: t.opts.OutputCap}, stderr: &transport.CappedBuffer{Cap: t.opts.OutputCap}}
	switch {
	case mode.capture:
		sess.Stdout = transport.Tee(st.stdout, c.Stdout)
	case c.Stdout != nil:
		sess.Stdout = c.Stdout
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	st.stdin = stdin
	st.hdr = transport.NewBecomeHeader(t.marker, t.prompt, transport.Tee(st.stderr, c.Stderr))
	sess.Stderr = st.hdr
	if err := sess.Start(cmdline); err != nil {
		if !cn.alive() {
			t.drop(cn)
		}
		return nil, fmt.Errorf("host %s (%s): start %s: %w", t.name, t.addr, describe(c), err)
	}
	st.waited = make(chan error, 1)
	go func() { st.waited <- sess.Wait() }()
	return st, nil
}

// await answers sudo's password prompt, forwards stdin once the command
// has started, and waits for the command's end or the context's.
func (t *Transport) await(ctx context.Context, c transport.Command, mode runMode, sudo bool, sess *gossh.Session, cn *conn, st *started) (transport.Result, error) {
	fail := transport.Result{ExitCode: -1}
	hdr, stdin, waited := st.hdr, st.stdin, st.waited
	pid := 0
	stdinFailed := make(chan error, 1)
	for {
		select {
		case pid = <-hdr.Started():
			// Authentication (if any) is over: what is on stdin now belongs
			// to the command.
			go transport.ForwardStdin(ctx, c.Stdin, stdin, func() { stdin.Close() }, stdinFailed)
		case err := <-stdinFailed:
			if ctx.Err() == nil {
				t.kill(pid, sudo, c.BecomeUser)
				sess.Close()
				<-waited
				return st.result(), fmt.Errorf("%s: %s: read stdin: %w", t.name, describe(c), err)
			}
		case n := <-hdr.Prompted():
			pw := t.becomePassword()
			if pw == "" || n > 1 {
				sess.Close()
				<-waited
				msg := "sudo asked for a password and no become password is set"
				if pw != "" {
					msg = "sudo refused the become password (incorrect password)"
				}
				return fail, &transport.BecomeError{Host: t.name, User: t.user, Msg: msg, Output: hdr.Preamble()}
			}
			io.WriteString(stdin, pw+"\n")
		case err := <-waited:
			return t.ended(c, sudo, cn, st, err)
		case <-ctx.Done():
			return st.result(), t.stop(ctx, c, pid, sudo, mode, sess, cn, waited)
		}
	}
}

// ended turns the session's end into the command's result.
func (t *Transport) ended(c transport.Command, sudo bool, cn *conn, st *started, err error) (transport.Result, error) {
	res := st.result()
	var ee *gossh.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitStatus()
	default:
		t.drop(cn)
		return res, fmt.Errorf("host %s (%s): connection lost while running %s: %w", t.name, t.addr, describe(c), err)
	}
	if !st.hdr.IsStarted() {
		if sudo {
			return transport.Result{ExitCode: -1}, &transport.BecomeError{Host: t.name, User: t.user, Msg: "sudo failed", Output: st.hdr.Preamble()}
		}
		return res, fmt.Errorf("host %s: %s did not start: %s", t.name, describe(c), st.hdr.Preamble())
	}
	return res, nil
}

// stopWait bounds how long a cancelled command's kill may take: the kill
// script's grace between SIGTERM and SIGKILL, and a little for the round
// trip. A connection that does not answer by then is given up on.
const stopWait = transport.KillGrace + 2*time.Second

// stop ends a cancelled command: it kills the command's process group on
// the host over another session and closes the session, in at most about
// stopWait even when the connection has stalled (then the connection is
// dropped, and the error says the command may still be running).
func (t *Transport) stop(ctx context.Context, c transport.Command, pid int, sudo bool, mode runMode, sess *gossh.Session, cn *conn, waited <-chan error) error {
	err := t.ctxError(ctx, c)
	killed := make(chan error, 1)
	if pid > 0 && !mode.control {
		go func() { killed <- t.kill(pid, sudo, c.BecomeUser) }()
	} else {
		killed <- nil
	}
	var kerr error
	select {
	case kerr = <-killed:
	case <-time.After(stopWait):
		kerr = fmt.Errorf("the host did not answer within %s", stopWait)
		// Nothing more can be done over this connection; dropping it also
		// ends the kill that waits for a session.
		t.drop(cn)
	}
	sess.Close()
	select {
	case <-waited:
	case <-time.After(time.Second):
		// The session cannot even be closed: the connection is stalled.
		t.drop(cn)
		if kerr == nil {
			kerr = errors.New("the connection stalled")
		}
	}
	if kerr != nil {
		return fmt.Errorf("%w; it may still be running on the host: stopping it failed: %v", err, kerr)
	}
	if pid > 0 && !mode.control {
		return fmt.Errorf("%w; stopped on the host", err)
	}
	return err
}

func (t *Transport) ctxError(ctx context.Context, c transport.Command) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.Timeout > 0 {
		return fmt.Errorf("%s: %s: timed out after %s: %w", t.name, describe(c), c.Timeout, ctx.Err())
	}
	return fmt.Errorf("%s: %s: %w", t.name, describe(c), ctx.Err())
}

// kill stops the process group of a cancelled command over a separate
// session (closing a session without a pty leaves the process running).
func (t *Transport) kill(pid int, sudo bool, becomeUser string) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	script := transport.KillGroupScript(pid, transport.KillGrace)
	res, err := t.run(ctx, transport.Command{Script: script, Become: sudo, BecomeUser: becomeUser}, runMode{capture: true, control: true})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("kill exited %d: %s", res.ExitCode, res.Stderr)
	}
	return err
}

func describe(c transport.Command) string {
	s := c.Script
	if len(c.Argv) > 0 {
		s = c.Argv[0]
		if len(c.Argv) > 1 {
			s = quoteArgv(c.Argv)
		}
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return strconv.Quote(s)
}
