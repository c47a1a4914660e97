// Package ssh is the transport for remote hosts: commands over SSH sessions
// multiplexed on one connection per host, files over SFTP on that same
// connection.
package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// Options tune a connection. The zero value is usable except that accept-new
// host key checking needs KnownHosts or KnownHostsFile.
type Options struct {
	// ConnectTimeout bounds the TCP connect and the SSH handshake; 10s when 0.
	ConnectTimeout time.Duration
	// KnownHosts is the host key checker shared by every host of a run; when
	// nil one is built from HostKeyChecking, KnownHostsPaths and KnownHostsFile.
	KnownHosts      *KnownHosts
	HostKeyChecking HostKeyChecking
	// KnownHostsPaths are read; nil means ~/.ssh/known_hosts, empty none.
	KnownHostsPaths []string
	// KnownHostsFile (the work dir's known_hosts) is read and, under
	// accept-new, receives new keys.
	KnownHostsFile string
	// MaxSessions bounds the sessions open at once on the connection; 10 when
	// 0, which is OpenSSH's default MaxSessions. One is kept for SFTP and one
	// for killing cancelled commands; further commands queue.
	MaxSessions int
	// KeepAlive is the interval of keepalive requests; 15s when 0, none when
	// negative. Three unanswered intervals close the connection.
	KeepAlive time.Duration
	// OutputCap bounds captured bytes per output stream; transport.DefaultOutputCap when 0.
	OutputCap int
	// UploadSlots, when set, bounds transfers across all hosts sharing it
	// (--upload-forks): a slot is held for the duration of each transfer.
	UploadSlots chan struct{}
	// Sums caches sha256 of local files across hosts; one per Transport when nil.
	Sums *transport.SumCache
	// SumRecords is a directory on the host where Sha256 and PutFile record
	// the sums they compute with the stat of the file they read (see
	// sumFunc), so an unchanged file is not read again; empty: none.
	SumRecords string
	// AgentSocket is the ssh-agent socket; $SSH_AUTH_SOCK when empty.
	AgentSocket string
	// Dial, when set, makes the TCP connection to a host or bastion
	// (host:port as the inventory gives it) instead of net.Dialer: service
	// mode resolves the name once, checks the addresses and connects to a
	// checked one. Host keys are still checked against the name.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Persist, when set, takes a connection that was dialled and is still up
	// when the transport closes, for a keeper to serve the next run; and a
	// dial first looks for a keeper serving the connection.
	Persist *Persist
	// Observe, when set, hears of every connection the transport makes:
	// each dial (reconnects included) and each close of a connection that
	// was up. Service mode counts them as metrics.
	Observe func(ConnEvent)
}

// ConnEvent is one thing that happened to a transport's connection.
type ConnEvent struct {
	Host string
	Kind ConnEventKind
	Err  error // why a dial failed
}

// ConnEventKind says what a ConnEvent reports.
type ConnEventKind string

const (
	ConnDialed     ConnEventKind = "dialed"
	ConnDialFailed ConnEventKind = "dial_failed"
	ConnClosed     ConnEventKind = "closed"
)

// Transport is an SSH connection to one host. It implements transport.Transport.
type Transport struct {
	name   string
	addr   string
	host   inventory.Host
	user   string
	opts   Options
	kh     *KnownHosts
	marker string // precedes the PID a wrapped command announces on stderr
	prompt string // sudo's password prompt

	cmdSem chan struct{}
	ctlSem chan struct{}

	mu     sync.Mutex
	cur    *conn
	closed bool

	names idNames
}

var _ transport.Transport = (*Transport)(nil)

// conn is one established connection; a reconnect replaces it.
type conn struct {
	client  *gossh.Client
	bastion *gossh.Client
	release func()
	dead    chan struct{}
	// kept: the connection is a keeper's (Persist), not dialled here.
	kept bool
	// closed tells Options.Observe, once, that the connection is gone.
	closed func()

	sftpMu  sync.Mutex
	sftp    *sftp.Client
	sftpErr error
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

func (c *conn) close() {
	c.sftpMu.Lock()
	if c.sftp != nil {
		c.sftp.Close()
	}
	c.sftpMu.Unlock()
	c.client.Close()
	if c.bastion != nil {
		c.bastion.Close()
	}
	c.release()
	if c.closed != nil {
		c.closed()
	}
}

// Dial connects to h and keeps the connection for later commands.
func Dial(ctx context.Context, h *inventory.Host, opts Options) (*Transport, error) {
	if h == nil {
		return nil, errors.New("ssh: nil host")
	}
	if h.Address == "" {
		return nil, fmt.Errorf("host %s: no address", h.Name)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.OutputCap <= 0 {
		opts.OutputCap = transport.DefaultOutputCap
	}
	if opts.Sums == nil {
		opts.Sums = &transport.SumCache{}
	}
	if opts.AgentSocket == "" {
		opts.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	kh := opts.KnownHosts
	if kh == nil {
		paths := opts.KnownHostsPaths
		if paths == nil {
			if home, err := os.UserHomeDir(); err == nil {
				paths = []string{filepath.Join(home, ".ssh", "known_hosts")}
			}
		}
		var err error
		if kh, err = NewKnownHosts(opts.HostKeyChecking, paths, opts.KnownHostsFile); err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	user := h.User
	if user == "" {
		user = "root"
	}
	token, err := randomHex(8)
	if err != nil {
		return nil, err
	}
	cmdSlots := opts.MaxSessions - 2
	if cmdSlots < 1 {
		cmdSlots = 1
	}
	t := &Transport{
		name:   h.Name,
		addr:   joinHostPort(h.Address, h.Port),
		host:   *h,
		user:   user,
		opts:   opts,
		kh:     kh,
		marker: "KXM:" + token + ":pid=",
		prompt: "KXM:" + token + ":sudo-password:",
		cmdSem: make(chan struct{}, cmdSlots),
		ctlSem: make(chan struct{}, 1),
	}
	if _, err := t.conn(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Host implements transport.Transport.
func (t *Transport) Host() string { return t.name }

// Address is host:port as dialled.
func (t *Transport) Address() string { return t.addr }

// Close implements transport.Transport.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.cur != nil {
		if p := t.opts.Persist; p != nil && !t.cur.kept && t.cur.alive() {
			p.handedTo(t)
		}
		t.cur.close()
		t.cur = nil
	}
	return nil
}

// conn returns the live connection, dialling when there is none or the
// previous one dropped.
func (t *Transport) conn(ctx context.Context) (*conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("host %s: transport closed", t.name)
	}
	if t.cur != nil && t.cur.alive() {
		return t.cur, nil
	}
	if t.cur != nil {
		t.cur.close()
		t.cur = nil
	}
	c, err := t.dial(ctx)
	if obs := t.opts.Observe; obs != nil {
		if err != nil {
			obs(ConnEvent{Host: t.name, Kind: ConnDialFailed, Err: err})
		} else {
			obs(ConnEvent{Host: t.name, Kind: ConnDialed})
			c.closed = sync.OnceFunc(func() { obs(ConnEvent{Host: t.name, Kind: ConnClosed}) })
		}
	}
	if err != nil {
		return nil, err
	}
	t.cur = c
	return c, nil
}

// drop closes c if it is still the current connection, so the next call
// reconnects.
func (t *Transport) drop(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.client.Close()
	if t.cur == c {
		t.cur.close()
		t.cur = nil
	}
}

func (t *Transport) dial(ctx context.Context) (*conn, error) {
	if t.opts.Persist != nil {
		if c := t.dialKept(ctx); c != nil {
			return c, nil
		}
	}
	h := &t.host
	methods, release, err := authMethods(credentials{
		user: t.user, password: h.Password, keyPath: h.PrivateKeyPath, passphrase: h.Passphrase,
	}, t.opts.AgentSocket)
	if err != nil {
		hint := h.CredentialsHint
		if hint == "" {
			hint = "give this host a private key or a password in the inventory, or run an ssh-agent"
		}
		return nil, &DialError{Host: t.name, Addr: t.addr, Cause: CauseAuth, Err: err, Hint: hint}
	}
	cfg := &gossh.ClientConfig{
		User:              t.user,
		Auth:              methods,
		HostKeyCallback:   t.kh.callback(),
		HostKeyAlgorithms: t.kh.algorithms(t.addr),
	}
	c := &conn{release: release, dead: make(chan struct{})}
	var nc net.Conn
	if b := h.Bastion; b != nil {
		baddr := joinHostPort(b.Address, b.Port)
		buser := b.User
		if buser == "" {
			buser = t.user
		}
		bmethods, brelease, err := authMethods(credentials{user: buser, password: b.Password, keyPath: b.PrivateKeyPath, passphrase: b.Passphrase}, t.opts.AgentSocket)
		if err != nil {
			release()
			return nil, &DialError{Host: t.name, Addr: baddr, Cause: CauseBastion, Err: fmt.Errorf("bastion: %w", err)}
		}
		c.release = func() { release(); brelease() }
		bcfg := &gossh.ClientConfig{User: buser, Auth: bmethods, HostKeyCallback: t.kh.callback(), HostKeyAlgorithms: t.kh.algorithms(baddr)}
		bc, _, err := t.connect(ctx, nil, baddr, bcfg)
		if err != nil {
			c.release()
			d := classify(t.name, baddr, buser, err)
			d.Err = fmt.Errorf("bastion %s: %w", baddr, d.Err)
			return nil, d
		}
		c.bastion = bc
		dctx, cancel := context.WithTimeout(ctx, t.opts.ConnectTimeout)
		nc, err = bc.DialContext(dctx, "tcp", t.addr)
		cancel()
		if err != nil {
			c.abandon()
			return nil, classify(t.name, t.addr, t.user, fmt.Errorf("through bastion %s: %w", baddr, err))
		}
	}
	client, reads, err := t.connect(ctx, nc, t.addr, cfg)
	if err != nil {
		c.abandon()
		return nil, classify(t.name, t.addr, t.user, err)
	}
	c.client = client
	t.watch(c, reads)
	return c, nil
}

// watch closes c.dead when c's client ends, and keeps the client alive
// (Options.KeepAlive) while it is up.
func (t *Transport) watch(c *conn, reads *readActivity) {
	go func() {
		c.client.Wait()
		close(c.dead)
	}()
	if t.opts.KeepAlive > 0 {
		go keepAlive(c.client, reads, c.dead, t.opts.KeepAlive)
	}
}

// abandon releases a half-built conn (no client yet).
func (c *conn) abandon() {
	if c.bastion != nil {
		c.bastion.Close()
	}
	c.release()
}

// connect performs TCP connect (unless nc is given) and the SSH handshake
// within ConnectTimeout; ctx cancellation aborts both. The returned
// readActivity tells when the server last sent anything.
func (t *Transport) connect(ctx context.Context, nc net.Conn, addr string, cfg *gossh.ClientConfig) (*gossh.Client, *readActivity, error) {
	if nc == nil {
		var err error
		if t.opts.Dial != nil {
			dctx, cancel := context.WithTimeout(ctx, t.opts.ConnectTimeout)
			nc, err = t.opts.Dial(dctx, "tcp", addr)
			cancel()
		} else {
			d := net.Dialer{Timeout: t.opts.ConnectTimeout, KeepAlive: 30 * time.Second}
			nc, err = d.DialContext(ctx, "tcp", addr)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	reads := newReadActivity(nc)
	nc = reads
	var timedOut atomic.Bool
	timer := time.AfterFunc(t.opts.ConnectTimeout, func() { timedOut.Store(true); nc.Close() })
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	cc, chans, reqs, err := gossh.NewClientConn(nc, addr, cfg)
	timer.Stop()
	stop()
	if err != nil {
		nc.Close()
		switch {
		case timedOut.Load():
			return nil, nil, fmt.Errorf("%w: ssh handshake not finished after %s", errConnectTimeout, t.opts.ConnectTimeout)
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		}
		return nil, nil, err
	}
	return gossh.NewClient(cc, chans, reqs), reads, nil
}

// readActivity is a connection that remembers when it last read a byte.
type readActivity struct {
	net.Conn
	last atomic.Int64 // unix nanoseconds
}

func newReadActivity(nc net.Conn) *readActivity {
	r := &readActivity{Conn: nc}
	r.last.Store(time.Now().UnixNano())
	return r
}

func (r *readActivity) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if n > 0 {
		r.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// quiet is how long the server has sent nothing.
func (r *readActivity) quiet() time.Duration {
	return time.Since(time.Unix(0, r.last.Load()))
}

// keepAlive closes the client when the server stops answering, so a dead
// link is noticed while no command is running. A server that keeps sending
// is alive: on a saturated link a keepalive request waits in the same TCP
// stream behind megabytes of upload, and its reply can take longer than any
// fixed timeout while the transfer is making progress. So the connection
// is closed only after the server has been silent for 3 intervals.
func keepAlive(client *gossh.Client, reads *readActivity, dead <-chan struct{}, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-dead:
			return
		case <-tick.C:
		}
		if reads.quiet() < every {
			continue
		}
		if !awaitReply(sendRequest(client, "keepalive@openssh.com", nil), reads, dead, every) {
			client.Close()
			return
		}
	}
}

// requestReply is the answer to a global request: ok is the server's
// verdict; err says no answer came (the connection is gone).
type requestReply struct {
	ok  bool
	err error
}

// sendRequest sends a global request that wants a reply on client, and
// returns where the reply arrives, so a caller can bound its wait.
func sendRequest(client *gossh.Client, name string, payload []byte) <-chan requestReply {
	reply := make(chan requestReply, 1)
	go func() {
		ok, _, err := client.SendRequest(name, true, payload)
		reply <- requestReply{ok, err}
	}()
	return reply
}

// awaitReply waits for a keepalive reply; false when the request failed or
// the server has been silent for 3 intervals.
func awaitReply(reply <-chan requestReply, reads *readActivity, dead <-chan struct{}, every time.Duration) bool {
	check := time.NewTicker(every)
	defer check.Stop()
	for {
		select {
		case r := <-reply:
			return r.err == nil
		case <-dead:
			return true
		case <-check.C:
			if reads.quiet() >= 3*every {
				return false
			}
		}
	}
}

// session opens a session, reconnecting once when the connection turns out
// to have dropped.
func (t *Transport) session(ctx context.Context) (*gossh.Session, *conn, error) {
	reconnected := false
	for attempt := 0; ; attempt++ {
		c, err := t.conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := c.client.NewSession()
		if err == nil {
			return s, c, nil
		}
		var oce *gossh.OpenChannelError
		if errors.As(err, &oce) {
			// sshd frees a session slot only once it has processed our
			// close, so right after a session ends it may still refuse
			// a new one ("no more sessions"): wait a little and retry.
			if attempt < 50 {
				select {
				case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
					continue
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return nil, nil, fmt.Errorf("host %s (%s): open session: %w", t.name, t.addr, err)
		}
		if reconnected {
			return nil, nil, fmt.Errorf("host %s (%s): open session: %w", t.name, t.addr, err)
		}
		reconnected = true
		t.drop(c)
	}
}

// sftpClient returns the connection's SFTP client, started on first use.
func (t *Transport) sftpClient(ctx context.Context) (*sftp.Client, *conn, error) {
	for attempt := 0; ; attempt++ {
		c, err := t.conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		c.sftpMu.Lock()
		if c.sftp == nil && c.sftpErr == nil {
			c.sftp, c.sftpErr = sftp.NewClient(c.client,
				sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true),
				sftp.MaxConcurrentRequestsPerFile(64))
		}
		s, err := c.sftp, c.sftpErr
		c.sftpMu.Unlock()
		if err == nil {
			return s, c, nil
		}
		if attempt == 0 && (!c.alive() || errors.Is(err, io.EOF)) {
			t.drop(c)
			continue
		}
		return nil, nil, fmt.Errorf("host %s (%s): start sftp (is the sftp subsystem enabled in sshd_config?): %w", t.name, t.addr, err)
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// DialContext implements transport.Dialer: a TCP connection opened by the
// host's sshd (a direct-tcpip channel of the run's connection).
func (t *Transport) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := t.conn(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := c.client.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("host %s: dial %s through ssh: %w", t.name, addr, err)
	}
	return nc, nil
}
