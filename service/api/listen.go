package api

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// LimitListener serves at most n connections at once, so that connections
// never take every descriptor of the process (accept4: too many open
// files), which the database and the jobs need too. When n are open, a new
// connection takes the place of the oldest one that never completed a
// request's headers (a client sending them slowly, or nothing), else of the
// one idle the longest; only when every connection is busy in a handler
// does it wait. A client that sends a request at once therefore gets in
// however many connections others hold open; HTTPServer's hooks tell the
// listener which connections did.
func LimitListener(l net.Listener, n int) net.Listener {
	ll := &limitListener{Listener: l, n: n, unproven: list.New(), idle: list.New()}
	ll.cond = sync.NewCond(&ll.mu)
	return ll
}

type limitListener struct {
	net.Listener
	n  int
	mu sync.Mutex
	// cond is signalled when a place frees or the listener closes.
	cond   *sync.Cond
	open   int
	closed bool
	// unproven are the connections that reached no handler yet, oldest
	// first; idle the proven ones between requests, longest idle first.
	unproven, idle *list.List
}

type limitConn struct {
	net.Conn
	l *limitListener
	// Under l.mu: counted while it holds a place; el is its element in
	// l.unproven or l.idle, or nil.
	counted bool
	proven  bool
	el      *list.Element
	inList  *list.List
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	var victims []net.Conn
	l.mu.Lock()
	for l.open >= l.n && !l.closed {
		if v := l.victim(); v != nil {
			victims = append(victims, v.Conn)
			continue
		}
		l.cond.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	l.open++
	lc.counted = true
	lc.moveTo(l.unproven)
	l.mu.Unlock()
	// Closed under nobody's lock: the server's goroutine of each then
	// fails its read and ends.
	for _, v := range victims {
		v.Close()
	}
	return lc, nil
}

// victim takes the place of the connection to drop for a new one; nil
// when each is busy. Under l.mu.
func (l *limitListener) victim() *limitConn {
	e := l.unproven.Front()
	if e == nil {
		e = l.idle.Front()
	}
	if e == nil {
		return nil
	}
	v := e.Value.(*limitConn)
	v.uncount()
	return v
}

// moveTo puts c at the back of to (nil: in no list). Under l.mu.
func (c *limitConn) moveTo(to *list.List) {
	if c.inList != nil {
		c.inList.Remove(c.el)
		c.el, c.inList = nil, nil
	}
	if to != nil {
		c.el, c.inList = to.PushBack(c), to
	}
}

// uncount gives c's place back. Under l.mu.
func (c *limitConn) uncount() {
	if !c.counted {
		return
	}
	c.moveTo(nil)
	c.counted = false
	c.l.open--
	c.l.cond.Signal()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.uncount()
	c.l.mu.Unlock()
	return err
}

// prove marks c as a client that completes its requests' headers.
func (c *limitConn) prove() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.counted && !c.proven {
		c.proven = true
		c.moveTo(nil)
	}
}

// state follows the server's view of c: idle between requests, or busy.
func (c *limitConn) state(st http.ConnState) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if !c.counted || !c.proven {
		return
	}
	switch st {
	case http.StateIdle:
		c.moveTo(c.l.idle)
	case http.StateActive:
		c.moveTo(nil)
	}
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return err
}

// limited is the limitConn under c (which may be a TLS connection over
// one), or nil.
func limited(c net.Conn) *limitConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitConn)
	return lc
}

type connKey struct{}

// proveConn tells the listener that the request's connection completed a
// request's headers (and, for an /api route, showed a valid token).
func proveConn(ctx context.Context) {
	if lc, ok := ctx.Value(connKey{}).(*limitConn); ok {
		lc.prove()
	}
}
