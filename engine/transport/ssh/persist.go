package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/inventory"
)

// Persist keeps a run's SSH connections open after the run, for the next
// run on the same hosts, as OpenSSH's ControlPersist does: a keeper process
// (ServeKeeper) dials them again, warms them up and serves each on a unix
// socket in Dir until it has gone unused for Idle. A run that finds a
// host's socket works through it and skips the host's TCP, key exchange,
// authentication and sshd's first-session work; one that finds none dials
// as usual. Only the owner of Dir reaches the sockets: the directory is
// 0700 and the keeper refuses a peer of another uid.
type Persist struct {
	Dir  string
	Idle time.Duration

	mu     sync.Mutex
	handed []keptHost
	// kh and agent are the handed connections' host key checker and
	// ssh-agent: every transport of a run shares them.
	kh    *KnownHosts
	agent string
}

// maxSocketPath leaves room below Linux's 108-byte sun_path.
const maxSocketPath = 100

// socketNameLen is the length of a kept connection's file name in Dir: 24
// hex digits of a digest, ".sock".
const socketNameLen = 24 + len(".sock")

// NewPersist makes dir (0700) for the sockets of connections kept idle for
// up to idle.
func NewPersist(dir string, idle time.Duration) (*Persist, error) {
	if idle <= 0 {
		return nil, fmt.Errorf("ssh-persist: %s is not a duration to keep connections for", idle)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if n := len(dir) + 1 + socketNameLen; n > maxSocketPath {
		return nil, fmt.Errorf("ssh-persist: the socket directory %s makes paths of %d bytes, over the %d a unix socket takes; set KUBEXM_HOME to a shorter directory", dir, n, maxSocketPath)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ssh-persist: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("ssh-persist: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("ssh-persist: %s must be a directory of yours that only you can open (mode 0700); it is %s", dir, fi.Mode())
	}
	return &Persist{Dir: dir, Idle: idle}, nil
}

// keptHost is a connection handed to a keeper: what it dials, and where it
// serves it.
type keptHost struct {
	Socket string         `json:"socket"`
	Host   inventory.Host `json:"host"`
}

// keeperConfig is what a keeper reads on its standard input. It holds the
// hosts' passwords and passphrases: it travels only through that pipe.
type keeperConfig struct {
	Idle       time.Duration   `json:"idle"`
	Policy     HostKeyChecking `json:"policy"`
	KnownHosts []string        `json:"known_hosts"`
	KnownWrite string          `json:"known_hosts_write"`
	Agent      string          `json:"agent"`
	Hosts      []keptHost      `json:"hosts"`
}

// HandOver returns a keeper's configuration for the connections closed
// since the last call, or nil when there are none; the caller starts
// a keeper (kubexm ssh-keeper) with it on its standard input.
func (p *Persist) HandOver() ([]byte, error) {
	p.mu.Lock()
	handed, kh, agent := p.handed, p.kh, p.agent
	p.handed = nil
	p.mu.Unlock()
	if len(handed) == 0 {
		return nil, nil
	}
	return json.Marshal(keeperConfig{
		Idle: p.Idle, Policy: kh.policy, KnownHosts: kh.read, KnownWrite: kh.write,
		Agent: agent, Hosts: stripHosts(handed),
	})
}

// handedTo remembers t's connection for the keeper; t is closing it.
// It is called with t's lock held.
func (p *Persist) handedTo(t *Transport) {
	h := t.host
	p.mu.Lock()
	defer p.mu.Unlock()
	sock := p.socket(t)
	for _, k := range p.handed {
		if k.Socket == sock {
			return
		}
	}
	// A keeper that serves the login already (another client used it)
	// keeps it; a socket nobody listens on is a dead keeper's.
	if nc, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		nc.Close()
		return
	}
	p.handed = append(p.handed, keptHost{Socket: sock, Host: h})
	p.kh = t.kh
	p.agent = t.opts.AgentSocket
}

// socket is where t's connection is kept: named by a digest of everything
// that makes it this connection (whom it logs in as, how, through what,
// and which host keys it trusts), never of a secret.
func (p *Persist) socket(t *Transport) string {
	h := t.host
	id := struct {
		UID                    int
		Addr, User, Key        string
		Bastion                []string
		Policy                 HostKeyChecking
		KnownHosts             []string
		KnownWrite             string
		Password, AgentPresent bool
	}{
		UID: os.Geteuid(), Addr: t.addr, User: t.user, Key: h.PrivateKeyPath,
		Policy: t.kh.policy, KnownHosts: t.kh.read, KnownWrite: t.kh.write,
		Password: h.Password != "", AgentPresent: t.opts.AgentSocket != "",
	}
	if b := h.Bastion; b != nil {
		id.Bastion = []string{joinHostPort(b.Address, b.Port), b.User, b.PrivateKeyPath}
	}
	raw, _ := json.Marshal(id)
	sum := sha256.Sum256(raw)
	return filepath.Join(p.Dir, hex.EncodeToString(sum[:12])+".sock")
}

// stripHosts drops what a keeper does not need: become passwords,
// variables and hints.
func stripHosts(hs []keptHost) []keptHost {
	out := make([]keptHost, len(hs))
	for i, k := range hs {
		h := k.Host
		out[i] = keptHost{Socket: k.Socket, Host: inventory.Host{
			Name: h.Name, Address: h.Address, Port: h.Port, User: h.User,
			Password: h.Password, PrivateKeyPath: h.PrivateKeyPath, Passphrase: h.Passphrase,
			Bastion: h.Bastion,
		}}
	}
	return out
}

// keeperAlive asks a keeper whether the connection is the client's to use:
// the host behind it still answers and no other client uses it. It
// carries the client's --ssh-persist (Millis), which the keeper takes as
// its idle time. The keeper gives the host keeperAliveLimit, the client
// the keeper keeperAliveWait: a host that answers a keepalive that late is
// better dialled afresh.
const (
	keeperAlive      = "alive@kubexm"
	keeperAliveLimit = 2 * time.Second
	keeperAliveWait  = 3 * time.Second
)

// dialKept connects to t's keeper, if one serves t's connection and its
// host still answers; nil otherwise (the caller dials the host).
func (t *Transport) dialKept(ctx context.Context) *conn {
	sock := t.opts.Persist.socket(t)
	d := net.Dialer{Timeout: time.Second}
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil
	}
	if uc, ok := nc.(*net.UnixConn); !ok || !peerIsMe(uc) {
		nc.Close()
		return nil
	}
	// The socket's directory and the peer's uid vouch for the keeper; its
	// host key is made afresh each time it starts.
	cfg := &gossh.ClientConfig{User: t.user, HostKeyCallback: gossh.InsecureIgnoreHostKey()} //nolint:gosec // see above
	client, reads, err := t.connect(ctx, nc, sock, cfg)
	if err != nil {
		return nil
	}
	select {
	case r := <-sendRequest(client, keeperAlive, gossh.Marshal(struct{ Millis uint64 }{uint64(t.opts.Persist.Idle.Milliseconds())})):
		if r.ok && r.err == nil {
			break
		}
		client.Close()
		return nil
	case <-time.After(keeperAliveWait):
		client.Close()
		return nil
	}
	c := &conn{client: client, release: func() {}, dead: make(chan struct{}), kept: true}
	t.watch(c, reads)
	return c
}

// peerIsMe says the process at the other end of uc runs as this one's uid.
func peerIsMe(uc *net.UnixConn) bool {
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return false
	}
	return int(cred.Uid) == os.Geteuid()
}
