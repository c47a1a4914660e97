package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport"
)

// killGrace is how long a cancelled command gets between SIGTERM and SIGKILL.
const killGrace = 3 * time.Second

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

	stdout := &transport.CappedBuffer{Cap: t.opts.OutputCap}
	stderr := &transport.CappedBuffer{Cap: t.opts.OutputCap}
	switch {
	case mode.capture:
		sess.Stdout = transport.Tee(stdout, c.Stdout)
	case c.Stdout != nil:
		sess.Stdout = c.Stdout
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return fail, fmt.Errorf("%s: %w", t.name, err)
	}
	hdr := &header{marker: []byte(t.marker), prompt: []byte(t.prompt), out: transport.Tee(stderr, c.Stderr),
		started: make(chan int, 1), prompted: make(chan int, 4)}
	sess.Stderr = hdr
	if err := sess.Start(cmdline); err != nil {
		if !cn.alive() {
			t.drop(cn)
		}
		return fail, fmt.Errorf("host %s (%s): start %s: %w", t.name, t.addr, describe(c), err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()

	result := func() transport.Result {
		return transport.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1,
			Truncated: stdout.Truncated() || stderr.Truncated()}
	}
	pid := 0
	stdinFailed := make(chan error, 1)
	for {
		select {
		case pid = <-hdr.started:
			// Authentication (if any) is over: what is on stdin now belongs
			// to the command.
			go func() {
				if c.Stdin != nil {
					src := &readErr{r: transport.ContextReader(ctx, c.Stdin)}
					io.Copy(stdin, src)
					if src.err != nil {
						// A clean EOF would let the command act on
						// truncated input: leave stdin open and have
						// the command killed instead.
						stdinFailed <- src.err
						return
					}
				}
				stdin.Close()
			}()
		case err := <-stdinFailed:
			if ctx.Err() == nil {
				t.kill(pid, sudo, c.BecomeUser)
				sess.Close()
				<-waited
				return result(), fmt.Errorf("%s: %s: read stdin: %w", t.name, describe(c), err)
			}
		case n := <-hdr.prompted:
			pw := t.becomePassword()
			if pw == "" || n > 1 {
				sess.Close()
				<-waited
				msg := "sudo asked for a password and no become password is set"
				if pw != "" {
					msg = "sudo refused the become password (incorrect password)"
				}
				return fail, &BecomeError{Host: t.name, User: t.user, Msg: msg, Output: hdr.preamble()}
			}
			io.WriteString(stdin, pw+"\n")
		case err := <-waited:
			res := result()
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
			if !hdr.isStarted() {
				if sudo {
					return fail, &BecomeError{Host: t.name, User: t.user, Msg: "sudo failed", Output: hdr.preamble()}
				}
				return res, fmt.Errorf("host %s: %s did not start: %s", t.name, describe(c), hdr.preamble())
			}
			return res, nil
		case <-ctx.Done():
			if pid > 0 && !mode.control {
				t.kill(pid, sudo, c.BecomeUser)
			}
			sess.Close()
			<-waited
			return result(), t.ctxError(ctx, c)
		}
	}
}

func (t *Transport) ctxError(ctx context.Context, c transport.Command) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.Timeout > 0 {
		return fmt.Errorf("%s: %s: timed out after %s: %w", t.name, describe(c), c.Timeout, ctx.Err())
	}
	return fmt.Errorf("%s: %s: %w", t.name, describe(c), ctx.Err())
}

// kill stops the process group of a cancelled command over a separate
// session (closing a session without a pty leaves the process running).
// The group of the announced PID is looked up at kill time: under sudo it
// is sudo's group or the session sudo created. (dash's kill takes no "--".)
func (t *Transport) kill(pid int, sudo bool, becomeUser string) {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace+10*time.Second)
	defer cancel()
	script := fmt.Sprintf(`p=%d
s=$(cat /proc/$p/stat 2>/dev/null) || exit 0
s=${s##*) }; set -- $s; g=$3
kill -TERM -$g 2>/dev/null || kill -TERM $p 2>/dev/null
i=0
while kill -0 -$g 2>/dev/null; do
  [ $i -ge %d ] && { kill -KILL -$g 2>/dev/null; exit 0; }
  sleep 0.1 2>/dev/null || sleep 1; i=$((i+1))
done
exit 0`, pid, int(killGrace/(100*time.Millisecond)))
	t.run(ctx, transport.Command{Script: script, Become: sudo, BecomeUser: becomeUser}, runMode{capture: true, control: true})
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

// BecomeError is a failure of sudo itself, before the command ran.
type BecomeError struct {
	Host   string
	User   string
	Msg    string
	Output string // what sudo printed
}

func (e *BecomeError) Error() string {
	msg := fmt.Sprintf("host %s: become: %s", e.Host, e.Msg)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg + fmt.Sprintf("\n  hint: sudo failed; make sure user %s may use sudo (NOPASSWD, or set sudoPassword or password for the host in cluster.yaml)", e.User)
}

// header is the stderr writer of a wrapped command. Until the PID line
// arrives everything is sudo's (prompts, lecture, errors); after it the
// bytes are the command's own stderr.
type header struct {
	marker, prompt []byte
	out            io.Writer

	mu       sync.Mutex
	buf      []byte
	pre      []byte
	done     bool
	prompts  int
	started  chan int
	prompted chan int
}

func (h *header) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return h.out.Write(p)
	}
	h.buf = append(h.buf, p...)
	for {
		if i := bytes.Index(h.buf, h.prompt); i >= 0 {
			h.pre = append(h.pre, h.buf[:i]...)
			h.buf = append(h.buf[:0:0], h.buf[i+len(h.prompt):]...)
			h.prompts++
			select {
			case h.prompted <- h.prompts:
			default:
			}
			continue
		}
		i := bytes.Index(h.buf, h.marker)
		if i < 0 {
			break
		}
		nl := bytes.IndexByte(h.buf[i:], '\n')
		if nl < 0 {
			break
		}
		pid, _ := strconv.Atoi(string(h.buf[i+len(h.marker) : i+nl]))
		h.pre = append(h.pre, h.buf[:i]...)
		rest := h.buf[i+nl+1:]
		h.buf = nil
		h.done = true
		h.started <- pid
		if len(rest) > 0 {
			h.out.Write(rest)
		}
		return len(p), nil
	}
	return len(p), nil
}

func (h *header) isStarted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

// preamble is what came before the command started (sudo's messages).
func (h *header) preamble() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := string(h.pre) + string(h.buf)
	return strings.TrimSpace(s)
}

// readErr remembers the reader's failure, which io.Copy would not tell
// apart from a failure to write.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
