package run

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/hostlock"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

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
	return hostlock.Take(ctx, t, hostlock.Lock{Name: name, Holder: holder, Wait: r.opts.LockWait, Break: r.opts.BreakLock, File: r.opts.LockFile, Become: become},
		func(format string, args ...any) { r.warn("", format, args...) })
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
