package run

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// hostLockScript holds an flock on the host for as long as its stdin stays
// open: until the run ends, or until the connection is lost and sshd ends
// the session, so a lock is never left behind by a run that died. It waits
// a little for the lock ($2 seconds): sshd may not yet have ended the
// session of a run killed a moment ago. With $3 = 1 (--break-lock) a lock
// still held after that is broken: the holder's shell and its children are
// killed (a holder whose control machine froze or vanished keeps its
// session until TCP gives up). Its first line is "locked" once it holds the
// lock ("locked, broke: <holder>" when it broke one), or "busy: <holder>"
// before it exits 1. The holder's files are created anew under the lock
// with noclobber (O_EXCL), so a link planted beside the lock file (in
// /run/lock, which every user may write) is never followed; a user without
// root who cannot write a lock file root made still takes it (flock needs
// only a read descriptor), without the holder's files.
const hostLockScript = `f=${4:-/run/lock/kubexm.lock}
[ -n "$4" ] || [ -d /run/lock ] || f=/var/lock/kubexm.lock
command -v flock >/dev/null 2>&1 || { echo "flock(1) is not installed"; exit 3; }
[ -L "$f" ] && { echo "$f is a symbolic link: refusing to use it as kubexm's lock"; exit 2; }
if [ -e "$f" ] && [ ! -w "$f" ]; then exec 9<"$f" || exit 2; else exec 9>>"$f" || exit 2; fi
broke=
if ! flock -w "$2" 9; then
  held=$(cat "$f.holder" 2>/dev/null)
  pid=$(cat "$f.pid" 2>/dev/null)
  if [ "$3" != 1 ]; then echo "busy: $held"; exit 1; fi
  case $pid in ''|*[!0-9]*) echo "busy: $held (no holder process to end)"; exit 1;; esac
  kids=$(pgrep -P "$pid" 2>/dev/null)
  kill -9 "$pid" $kids 2>/dev/null
  flock -w 10 9 || { echo "busy: $held (still held after ending process $pid)"; exit 1; }
  broke=", broke: $held"
fi
rm -f "$f.holder" "$f.pid" 2>/dev/null
set -C
printf '%s\n' "$1" 2>/dev/null >"$f.holder"
echo $$ 2>/dev/null >"$f.pid"
set +C
echo "locked$broke"
cat >/dev/null
rm -f "$f.holder" "$f.pid"`

// hostLockWait is how long a run waits for a host's lock unless told
// (RunOptions.LockWait); hostLockSlack is what the exchange may take beyond
// it (the connection, breaking a lock).
const (
	hostLockWait  = 15 * time.Second
	hostLockSlack = 40 * time.Second
)

// errHostBusy says that another run holds a host's lock; busyError, which
// the refusal is, matches it without adding its words to the message.
var errHostBusy = errors.New("the host's kubexm lock is held")

type busyError struct{ msg string }

func (e busyError) Error() string      { return e.msg }
func (busyError) Is(target error) bool { return target == errHostBusy }

// lockHost takes the host's kubexm lock for a run that changes it, and
// returns the function that releases it.
func (r *runner) lockHost(ctx context.Context, name string, t transport.Transport) (func(), error) {
	return r.lockHostAs(ctx, name, t, true)
}

// lockHostAs is lockHost with or without become: this machine's lock is
// taken as the user kubexm runs as, since a user without root runs
// connection: local hosts without sudo, and sudo -n would fail the run.
func (r *runner) lockHostAs(ctx context.Context, name string, t transport.Transport, become bool) (func(), error) {
	ctl, _ := os.Hostname()
	holder := fmt.Sprintf("kubexm run %s (playbook %s) from %s pid %d, since %s",
		r.runID, r.pb.Name, ctl, os.Getpid(), r.startTime.UTC().Format(time.RFC3339))
	breakArg := "0"
	if r.opts.BreakLock {
		breakArg = "1"
	}
	stdin, hold := io.Pipe()
	answered := make(chan struct{})
	out := &lineWatch{seen: answered}
	done := make(chan struct{})
	var res transport.Result
	var err error
	go func() {
		defer close(done)
		res, err = t.Run(context.WithoutCancel(ctx), transport.Command{
			Argv:   []string{"/bin/sh", "-c", hostLockScript, "sh", holder, strconv.Itoa(int(cmp.Or(r.opts.LockWait, hostLockWait).Seconds())), breakArg, r.opts.LockFile},
			Become: become, Stdin: stdin, Stdout: out})
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
		if l := out.line(); l == "locked" || strings.HasPrefix(l, "locked, broke: ") {
			if held, broke := strings.CutPrefix(l, "locked, broke: "); broke {
				r.warn("", "%s: --break-lock ended the run that held the kubexm lock of the host (%s)", name, cmp.Or(held, "holder unknown"))
			}
			return release, nil
		}
		release()
	case <-done:
		hold.Close()
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	case <-time.After(cmp.Or(r.opts.LockWait, hostLockWait) + hostLockSlack):
		release()
		return nil, fmt.Errorf("%s: taking the kubexm lock on the host took over %s", name, cmp.Or(r.opts.LockWait, hostLockWait)+hostLockSlack)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: taking the kubexm lock: %w", name, err)
	}
	if h, busy := strings.CutPrefix(out.line(), "busy: "); busy {
		return nil, busyError{fmt.Sprintf("%s is in use by another kubexm run (%s); wait for it to finish, or stop it; if its control machine is gone, --break-lock ends it", name, cmp.Or(h, "holder unknown"))}
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

// localLock is a run's lock of the machine it runs on. Every inventory host
// with connection: local is that machine, and its lock file is the same for
// all of them: a second flock of it from the same run would wait for the
// first and refuse the run, so it is taken once, by the first local host
// the run reaches, and released once.
type localLock struct {
	once    sync.Once
	first   string // the host that took it
	release func()
	err     error
}

// localConn is the transport of a connection: local host (localhost too,
// when the inventory lists it as a host), holding the machine's lock when
// the run takes locks. A host named localhost runs on the control
// machine's transport, as delegate_to: localhost does.
func (r *runner) localConn(ctx context.Context, h *hostState) connResult {
	become := local.WithBecomePassword(cmp.Or(h.host.BecomePassword, h.host.Password))
	var t transport.Transport
	if h.name == inventory.Localhost {
		t = r.control
	} else {
		t = local.New(h.name, become)
	}
	if !r.opts.HostLock {
		return connResult{t: t}
	}
	ll := &r.localLock
	ll.once.Do(func() {
		ll.first = h.name
		// The lock's own transport: the control machine's may be closed
		// with the run's other local work, and a test's is not a shell.
		release, err := r.lockHostAs(ctx, h.name, local.New(h.name, become), false)
		ll.err = err
		if release != nil {
			ll.release = sync.OnceFunc(release)
		}
	})
	if ll.err != nil {
		if t != r.control {
			_ = t.Close()
		}
		if ll.first != h.name {
			return connResult{err: fmt.Errorf("%s runs on this machine, as %s does: %w", h.name, ll.first, ll.err)}
		}
		return connResult{err: ll.err}
	}
	return connResult{t: t, unlock: ll.release}
}
