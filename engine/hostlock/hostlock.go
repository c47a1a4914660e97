// Package hostlock is a run's lock of a host: one kubexm run changes a
// host at a time, and a run that died leaves no lock behind.
package hostlock

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
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

// ErrBusy says that another run holds a host's lock; busyError, which
// the refusal is, matches it without adding its words to the message.
var ErrBusy = errors.New("the host's kubexm lock is held")

type busyError struct{ msg string }

func (e busyError) Error() string      { return e.msg }
func (busyError) Is(target error) bool { return target == ErrBusy }

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

// Lock says which lock a run takes on a host, and as whom.
type Lock struct {
	// Name is the host's, for messages.
	Name string
	// Holder says who holds the lock, to a run that finds it held.
	Holder string
	// Wait is how long to wait for a held lock (0: hostLockWait).
	Wait time.Duration
	// Break ends the run that holds the lock (--break-lock).
	Break bool
	// File is the lock file ("": /run/lock/kubexm.lock).
	File string
	// Become takes it as root.
	Become bool
}

// Take takes the host's kubexm lock through t, and returns the function
// that releases it; warn reports a lock it broke.
func Take(ctx context.Context, t transport.Transport, l Lock, warn func(format string, args ...any)) (func(), error) {
	breakArg := "0"
	if l.Break {
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
			Argv:   []string{"/bin/sh", "-c", hostLockScript, "sh", l.Holder, strconv.Itoa(int(cmp.Or(l.Wait, hostLockWait).Seconds())), breakArg, l.File},
			Become: l.Become, Stdin: stdin, Stdout: out})
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
		if line := out.line(); line == "locked" || strings.HasPrefix(line, "locked, broke: ") {
			if held, broke := strings.CutPrefix(line, "locked, broke: "); broke {
				warn("%s: --break-lock ended the run that held the kubexm lock of the host (%s)", l.Name, cmp.Or(held, "holder unknown"))
			}
			return release, nil
		}
		release()
	case <-done:
		hold.Close()
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	case <-time.After(cmp.Or(l.Wait, hostLockWait) + hostLockSlack):
		release()
		return nil, fmt.Errorf("%s: taking the kubexm lock on the host took over %s", l.Name, cmp.Or(l.Wait, hostLockWait)+hostLockSlack)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: taking the kubexm lock: %w", l.Name, err)
	}
	if h, busy := strings.CutPrefix(out.line(), "busy: "); busy {
		return nil, busyError{fmt.Sprintf("%s is in use by another kubexm run (%s); wait for it to finish, or stop it; if its control machine is gone, --break-lock ends it", l.Name, cmp.Or(h, "holder unknown"))}
	}
	return nil, fmt.Errorf("%s: taking the kubexm lock (/run/lock/kubexm.lock) failed (exit %d): %s", l.Name, res.ExitCode,
		strings.TrimSpace(string(res.Stdout)+" "+string(res.Stderr)))
}
