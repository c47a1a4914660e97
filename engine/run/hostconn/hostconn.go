// Package hostconn holds a run's connections to its hosts: each host's
// transport opened once, when a task first reaches it, under the host's
// kubexm lock when the run takes locks (engine/hostlock), this machine's
// lock taken once for all its connection: local hosts, and all of them
// closed at the end. It knows the inventory and the transports, nothing of
// plays or tasks.
package hostconn

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/hostlock"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// Options say how a run reaches its hosts and whether it locks them.
type Options struct {
	// Connect opens a transport to a remote host. Hosts marked Local and
	// localhost use the local transport instead.
	Connect func(ctx context.Context, h *inventory.Host) (transport.Transport, error)
	// Control is the control machine's transport, which localhost runs on.
	Control transport.Transport
	// Lock takes every host's lock for the whole run (RunOptions.HostLock).
	Lock bool
	// Holder says who holds the locks, to a run that finds one held.
	Holder string
	// Wait, Break and File are hostlock.Lock's.
	Wait  time.Duration
	Break bool
	File  string
	// Warn reports a lock that --break-lock broke.
	Warn func(format string, args ...any)
}

// Pool is a run's connections, one per host of the inventory (and
// localhost, listed or not).
type Pool struct {
	opts  Options
	hosts map[string]*conn
	order []*conn
	local localLock
}

// conn is one host's connection, opened once.
type conn struct {
	name string
	host *inventory.Host // nil for localhost when the inventory does not list it
	once sync.Once
	t    transport.Transport
	err  error
	// unlock releases the host's lock, if the run holds it.
	unlock func()
}

// New returns the pool of inv's hosts; nothing is opened yet.
func New(inv *inventory.Inventory, opts Options) *Pool {
	p := &Pool{opts: opts, hosts: map[string]*conn{}}
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		c := &conn{name: h.Name, host: h}
		p.hosts[h.Name] = c
		p.order = append(p.order, c)
	}
	if _, ok := p.hosts[inventory.Localhost]; !ok {
		c := &conn{name: inventory.Localhost}
		p.hosts[inventory.Localhost] = c
		p.order = append(p.order, c)
	}
	return p
}

// Get returns the transport of a host, opening it (once per run) and
// taking its lock on first use.
func (p *Pool) Get(ctx context.Context, name string) (transport.Transport, error) {
	c, ok := p.hosts[name]
	if !ok {
		return nil, fmt.Errorf("host %q is not in the inventory", name)
	}
	c.once.Do(func() { p.open(ctx, c) })
	return c.t, c.err
}

func (p *Pool) open(ctx context.Context, c *conn) {
	if c.host != nil && c.host.Local {
		p.localConn(ctx, c)
		return
	}
	if c.name == inventory.Localhost && c.host == nil {
		c.t = p.opts.Control
		return
	}
	if p.opts.Connect == nil {
		c.err = fmt.Errorf("no way to reach %s: the engine was given no remote transport", c.name)
		return
	}
	t, err := p.opts.Connect(ctx, c.host)
	if err == nil && t == nil {
		err = fmt.Errorf("connecting to %s gave no transport", c.name)
	}
	if err != nil {
		// Whatever the connector returned beside the error is unusable,
		// and may be a nil pointer in a non-nil interface.
		t = nil
	}
	var unlock func()
	if err == nil && p.opts.Lock {
		if unlock, err = p.lock(ctx, c.name, t, true); err != nil {
			_ = t.Close()
			t = nil
		}
	}
	c.t, c.err, c.unlock = t, err, unlock
}

// Close closes every connection the run opened and releases the locks;
// the control machine's transport stays open. The hosts are released at
// once: each release waits for its host's lock holder to end (up to 5 s
// for a host that stopped answering), which one host after another would
// add up over the run's hosts.
func (p *Pool) Close() {
	var wg sync.WaitGroup
	for _, c := range p.order {
		wg.Go(func() {
			if c.t != nil && c.t != p.opts.Control {
				if c.unlock != nil {
					c.unlock()
				}
				_ = c.t.Close()
			} else if c.unlock != nil {
				// localhost as a host: the control machine's transport
				// stays open, the machine's lock (released once) does not.
				c.unlock()
			}
		})
	}
	wg.Wait()
}

// lock takes the host's kubexm lock for a run that changes it, and returns
// the function that releases it. This machine's lock is taken without
// become, as the user kubexm runs as, since a user without root runs
// connection: local hosts without sudo, and sudo -n would fail the run.
func (p *Pool) lock(ctx context.Context, name string, t transport.Transport, become bool) (func(), error) {
	return hostlock.Take(ctx, t, hostlock.Lock{Name: name, Holder: p.opts.Holder, Wait: p.opts.Wait, Break: p.opts.Break, File: p.opts.File, Become: become}, p.opts.Warn)
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

// localConn opens the transport of a connection: local host (localhost
// too, when the inventory lists it as a host), holding the machine's lock
// when the run takes locks. A host named localhost runs on the control
// machine's transport, as delegate_to: localhost does.
func (p *Pool) localConn(ctx context.Context, c *conn) {
	become := local.WithBecomePassword(cmp.Or(c.host.BecomePassword, c.host.Password))
	var t transport.Transport
	if c.name == inventory.Localhost {
		t = p.opts.Control
	} else {
		t = local.New(c.name, become)
	}
	if !p.opts.Lock {
		c.t = t
		return
	}
	ll := &p.local
	ll.once.Do(func() {
		ll.first = c.name
		// The lock's own transport: the control machine's may be closed
		// with the run's other local work, and a test's is not a shell.
		release, err := p.lock(ctx, c.name, local.New(c.name, become), false)
		ll.err = err
		if release != nil {
			ll.release = sync.OnceFunc(release)
		}
	})
	switch {
	case ll.err == nil:
		c.t, c.unlock = t, ll.release
		return
	case ll.first != c.name:
		c.err = fmt.Errorf("%s runs on this machine, as %s does: %w", c.name, ll.first, ll.err)
	default:
		c.err = ll.err
	}
	if t != p.opts.Control {
		_ = t.Close()
	}
}
