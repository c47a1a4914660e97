package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport"
)

// keeperDials bounds the hosts a keeper dials at once, as --forks bounds a
// run's: hosts behind one bastion would otherwise meet its sshd's
// MaxStartups.
const keeperDials = 10

// ServeKeeper is a keeper process's work (kubexm ssh-keeper): it reads a
// Persist's HandOver on r, dials each host again, and serves each
// connection on its socket until the socket has gone unused for the idle
// time, the host stops answering or ctx ends. A host another keeper
// already serves is left to that keeper. What it cannot keep it says on
// log when it happens, and in its error at the end.
func ServeKeeper(ctx context.Context, r io.Reader, log io.Writer) error {
	var cfg keeperConfig
	if err := json.NewDecoder(r).Decode(&cfg); err != nil {
		return fmt.Errorf("ssh-keeper: read the configuration: %w", err)
	}
	if cfg.Idle <= 0 {
		return errors.New("ssh-keeper: no idle time in the configuration")
	}
	kh, err := NewKnownHosts(cfg.Policy, cfg.KnownHosts, cfg.KnownWrite)
	if err != nil {
		return fmt.Errorf("ssh-keeper: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	srv := &gossh.ServerConfig{NoClientAuth: true}
	srv.AddHostKey(signer)
	var logMu sync.Mutex
	var failed atomic.Int32
	dials := make(chan struct{}, keeperDials)
	var wg sync.WaitGroup
	for _, k := range cfg.Hosts {
		wg.Go(func() {
			if err := keep(ctx, srv, kh, cfg, k, dials); err != nil {
				failed.Add(1)
				logMu.Lock()
				fmt.Fprintf(log, "%s kubexm ssh-keeper[%d]: host %s not kept: %v\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), k.Host.Name, err)
				logMu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("ssh-keeper: %d of %d connections not kept", n, len(cfg.Hosts))
	}
	return nil
}

// keep dials k's host and serves the connection on k's socket; dials
// bounds the dials at once.
func keep(ctx context.Context, srv *gossh.ServerConfig, kh *KnownHosts, cfg keeperConfig, k keptHost, dials chan struct{}) error {
	sock := k.Socket
	if !filepath.IsAbs(sock) || !strings.HasSuffix(sock, ".sock") {
		return fmt.Errorf("%q is not a socket path", sock)
	}
	// The lock is held while the socket is served: one keeper per socket,
	// and a socket file left by a keeper that died is replaced safely.
	lock, err := os.OpenFile(strings.TrimSuffix(sock, ".sock")+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil // another keeper serves it
		}
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	select {
	case dials <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	tr, err := Dial(ctx, &k.Host, Options{KnownHosts: kh, AgentSocket: cfg.Agent})
	if err == nil {
		defer tr.Close()
		// sshd does most of a login's work (PAM's session, the
		// environment) in a connection's first session: done here, the
		// next run's first command does not wait for it.
		_, err = tr.Run(ctx, transport.Command{Argv: []string{"true"}})
	}
	<-dials
	if err != nil {
		return err
	}
	c, err := tr.conn(ctx)
	if err != nil {
		return err
	}
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return err
	}
	serveKept(ctx, srv, c, ln, cfg.Idle)
	return nil
}

// keptConn is a connection a keeper serves: its clients, and how long it
// waits for the next once the last has gone (the newest client's
// --ssh-persist).
type keptConn struct {
	mu      sync.Mutex
	clients map[*net.UnixConn]bool
	idle    time.Duration
	timer   *time.Timer
}

// alive answers a client's keeperAlive: the host answers, and no other
// client uses the connection (sshd's MaxSessions is one connection's,
// and each client counts on all of it: a second run dials for itself).
// The request carries the client's idle time, which the connection takes.
func (k *keptConn) alive(up *gossh.Client, payload []byte) bool {
	var want struct{ Millis uint64 }
	k.mu.Lock()
	alone := len(k.clients) == 1
	if gossh.Unmarshal(payload, &want) == nil && want.Millis > 0 {
		k.idle = time.Duration(want.Millis) * time.Millisecond
	}
	k.mu.Unlock()
	return alone && answers(up, keeperAliveLimit)
}

// serveKept proxies the clients of ln to c until ln has had none for the
// idle time, c is gone or ctx ends; it closes ln, which removes the socket.
func serveKept(ctx context.Context, srv *gossh.ServerConfig, c *conn, ln *net.UnixListener, idle time.Duration) {
	defer ln.Close()
	k := &keptConn{clients: map[*net.UnixConn]bool{}, idle: idle}
	k.timer = time.AfterFunc(idle, func() { ln.Close() })
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-c.dead:
		case <-ctx.Done():
		case <-stop:
			return
		}
		ln.Close()
		k.mu.Lock()
		for nc := range k.clients {
			nc.Close()
		}
		k.mu.Unlock()
	}()
	var wg sync.WaitGroup
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			break
		}
		if !peerIsMe(nc) {
			nc.Close()
			continue
		}
		k.mu.Lock()
		k.clients[nc] = true
		k.timer.Stop()
		k.mu.Unlock()
		wg.Go(func() {
			serveClient(srv, c.client, nc, func(payload []byte) bool { return k.alive(c.client, payload) })
			k.mu.Lock()
			delete(k.clients, nc)
			last := len(k.clients) == 0
			if last {
				k.timer.Reset(k.idle)
			}
			k.mu.Unlock()
			if last {
				// A run's uploads pass through here; what they took is
				// garbage once the run is gone, and the keeper waits
				// for minutes: give it back (tens of MB after a fresh run).
				debug.FreeOSMemory()
			}
		})
	}
	k.timer.Stop()
	wg.Wait()
}

// keeperHandshake bounds a client's SSH handshake with the keeper.
const keeperHandshake = 10 * time.Second

// serveClient is one client of a kept connection: each channel it opens is
// opened on up and relayed, and its global requests (keepalives) are
// answered by up.
func serveClient(srv *gossh.ServerConfig, up *gossh.Client, nc net.Conn, alive func(payload []byte) bool) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(keeperHandshake))
	sc, chans, reqs, err := gossh.NewServerConn(nc, srv)
	if err != nil {
		return
	}
	_ = nc.SetDeadline(time.Time{})
	defer sc.Close()
	go func() {
		for r := range reqs {
			if r.Type == keeperAlive {
				_ = r.Reply(alive(r.Payload), nil)
				continue
			}
			ok, payload, err := up.SendRequest(r.Type, r.WantReply, r.Payload)
			if r.WantReply {
				_ = r.Reply(ok && err == nil, payload)
			}
		}
	}()
	var wg sync.WaitGroup
	for nch := range chans {
		wg.Go(func() { relayChannel(up, nch) })
	}
	wg.Wait()
}

// answers says whether up's server answers a keepalive within limit.
func answers(up *gossh.Client, limit time.Duration) bool {
	select {
	case r := <-sendRequest(up, "keepalive@openssh.com", nil):
		return r.err == nil
	case <-time.After(limit):
		return false
	}
}

// relayChannel opens nch's channel on up and relays data, EOFs, requests
// (exec, subsystem, signals, exit status) and the close between the two.
// The client's data is sent on before its EOF; the host's EOF and close
// reach the client only after all the host's output has.
func relayChannel(up *gossh.Client, nch gossh.NewChannel) {
	uch, ureqs, err := up.OpenChannel(nch.ChannelType(), nch.ExtraData())
	if err != nil {
		var oce *gossh.OpenChannelError
		if errors.As(err, &oce) {
			_ = nch.Reject(oce.Reason, oce.Message)
			return
		}
		// Not the host's refusal: the connection is gone. Closing it
		// ends the clients' connections, which then dial for
		// themselves, where a refusal would have them retry here.
		_ = nch.Reject(gossh.ConnectionFailed, err.Error())
		up.Close()
		return
	}
	dch, dreqs, err := nch.Accept()
	if err != nil {
		uch.Close()
		gossh.DiscardRequests(ureqs)
		return
	}
	var out sync.WaitGroup
	out.Add(2)
	go func() { defer out.Done(); _, _ = io.Copy(dch, uch) }()
	go func() { defer out.Done(); _, _ = io.Copy(dch.Stderr(), uch.Stderr()) }()
	go func() { _, _ = io.Copy(uch, dch); _ = uch.CloseWrite() }()
	go func() { _, _ = io.Copy(uch.Stderr(), dch.Stderr()) }()
	outDone := make(chan struct{})
	go func() { out.Wait(); _ = dch.CloseWrite(); close(outDone) }()
	// The host answers a request (exec) before it closes the channel, but
	// the answer is relayed by another goroutine than the close: the close
	// waits for the request in flight, or the client would see its channel
	// gone before the answer (an EOF for its exec).
	var inFlight sync.Mutex
	// The client closed its channel (or its connection): close the host's.
	go func() { relayRequests(dreqs, uch, &inFlight); uch.Close() }()
	relayRequests(ureqs, dch, nil)
	<-outDone
	inFlight.Lock()
	dch.Close()
	inFlight.Unlock()
}

// relayRequests sends each request of in on to ch, and ch's answer back,
// holding inFlight (when given) from a request until its answer.
func relayRequests(in <-chan *gossh.Request, ch gossh.Channel, inFlight *sync.Mutex) {
	for r := range in {
		if inFlight != nil {
			inFlight.Lock()
		}
		ok, err := ch.SendRequest(r.Type, r.WantReply, r.Payload)
		if r.WantReply {
			_ = r.Reply(ok && err == nil, nil)
		}
		if inFlight != nil {
			inFlight.Unlock()
		}
	}
}
