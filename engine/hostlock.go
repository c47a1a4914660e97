package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// hostLockScript holds an flock on the host for as long as its stdin stays
// open: until the run ends, or until the connection is lost and sshd ends
// the session, so a lock is never left behind by a run that died. It waits
// a little for the lock: sshd may not yet have ended the session of a run
// killed a moment ago. Its first
// line is "locked" once it holds the lock, or "busy: <holder>" before it
// exits 1.
const hostLockScript = `f=/run/lock/kubexm.lock
[ -d /run/lock ] || f=/var/lock/kubexm.lock
command -v flock >/dev/null 2>&1 || { echo "flock(1) is not installed"; exit 3; }
exec 9>>"$f" || exit 2
if ! flock -w "$2" 9; then printf 'busy: '; cat "$f.holder" 2>/dev/null; echo; exit 1; fi
printf '%s\n' "$1" >"$f.holder"
echo locked
cat >/dev/null
rm -f "$f.holder"`

// hostLockWait is how long a run waits for a host's lock; hostLockTimeout
// bounds the whole exchange.
const (
	hostLockWait    = 15 * time.Second
	hostLockTimeout = hostLockWait + 30*time.Second
)

// lockHost takes the host's kubexm lock for a run that changes it, and
// returns the function that releases it.
func (r *runner) lockHost(ctx context.Context, name string, t transport.Transport) (func(), error) {
	ctl, _ := os.Hostname()
	holder := fmt.Sprintf("kubexm run %s (playbook %s) from %s pid %d, since %s",
		r.runID, r.pb.Name, ctl, os.Getpid(), r.startTime.UTC().Format(time.RFC3339))
	stdin, hold := io.Pipe()
	answered := make(chan struct{})
	out := &lineWatch{seen: answered}
	done := make(chan struct{})
	var res transport.Result
	var err error
	go func() {
		defer close(done)
		res, err = t.Run(context.WithoutCancel(ctx), transport.Command{
			Argv:   []string{"/bin/sh", "-c", hostLockScript, "sh", holder, strconv.Itoa(int(cmp.Or(r.opts.hostLockWait, hostLockWait).Seconds()))},
			Become: true, Stdin: stdin, Stdout: out})
	}()
	release := func() {
		hold.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // the connection is closed next anyway
		}
	}
	select {
	case <-answered:
		if out.line() == "locked" {
			return release, nil
		}
		release()
	case <-done:
		hold.Close()
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	case <-time.After(hostLockTimeout):
		release()
		return nil, fmt.Errorf("%s: taking the kubexm lock on the host took over %s", name, hostLockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: taking the kubexm lock: %w", name, err)
	}
	if h, busy := strings.CutPrefix(out.line(), "busy: "); busy {
		return nil, fmt.Errorf("%s is in use by another kubexm run (%s); wait for it to finish, or stop it", name, cmp.Or(h, "holder unknown"))
	}
	return nil, fmt.Errorf("%s: taking the kubexm lock (/run/lock/kubexm.lock) failed (exit %d): %s", name, res.ExitCode,
		strings.TrimSpace(string(res.Stdout)+" "+string(res.Stderr)))
}

// lineWatch closes seen when a first line has been written to it.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.buf.Write(p)
		if bytes.IndexByte(w.buf.Bytes(), '\n') >= 0 {
			w.done = true
			close(w.seen)
		}
	}
	return len(p), nil
}

// line is the first line written, once seen is closed.
func (w *lineWatch) line() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, _, _ := strings.Cut(w.buf.String(), "\n")
	return strings.TrimSpace(l)
}
