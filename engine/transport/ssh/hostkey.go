package ssh

import (
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyChecking is the policy for host keys not yet in known_hosts. A key
// that contradicts a known_hosts entry is refused under every policy.
type HostKeyChecking string

// The policies of --ssh-host-key-checking.
const (
	// Strict refuses hosts not in known_hosts.
	Strict HostKeyChecking = "strict"
	// AcceptNew records unknown hosts in the kubexm known_hosts file.
	AcceptNew HostKeyChecking = "accept-new"
	// Off accepts unknown hosts without recording them.
	Off HostKeyChecking = "off"
)

// ParseHostKeyChecking validates a --ssh-host-key-checking value.
func ParseHostKeyChecking(s string) (HostKeyChecking, error) {
	switch HostKeyChecking(s) {
	case Strict, AcceptNew, Off:
		return HostKeyChecking(s), nil
	case "":
		return AcceptNew, nil
	}
	return "", fmt.Errorf("invalid host key checking %q: want strict, accept-new or off", s)
}

// KnownHosts checks host keys against known_hosts files and appends newly
// accepted keys to one of them. One value is shared by all hosts of a run so
// concurrent appends are serialised.
type KnownHosts struct {
	policy HostKeyChecking
	read   []string // files consulted, missing ones skipped
	write  string   // appended to under AcceptNew; also read

	mu sync.Mutex
}

// NewKnownHosts returns a checker. readPaths are consulted (typically
// ~/.ssh/known_hosts); writePath (the work dir's known_hosts) is consulted
// too and receives keys accepted under AcceptNew.
func NewKnownHosts(policy HostKeyChecking, readPaths []string, writePath string) (*KnownHosts, error) {
	if policy == "" {
		policy = AcceptNew
	}
	if _, err := ParseHostKeyChecking(string(policy)); err != nil {
		return nil, err
	}
	if policy == AcceptNew && writePath == "" {
		return nil, errors.New("accept-new host key checking needs a known_hosts file to write")
	}
	return &KnownHosts{policy: policy, read: readPaths, write: writePath}, nil
}

func (k *KnownHosts) files() []string {
	var out []string
	for _, p := range append(append([]string(nil), k.read...), k.write) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// lookup checks key for addr against the files: nil when known, a
// *knownhosts.KeyError otherwise (Want empty when the host is unknown).
func (k *KnownHosts) lookup(addr string, remote net.Addr, key gossh.PublicKey) error {
	files := k.files()
	if len(files) == 0 {
		return &knownhosts.KeyError{}
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return fmt.Errorf("read known_hosts: %w", err)
	}
	return cb(addr, remote, key)
}

// algorithms returns the host key algorithms of the keys known for addr, so
// the server is asked for a key type we can verify (as OpenSSH does);
// nil when the host is unknown.
func (k *KnownHosts) algorithms(addr string) []string {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil
	}
	probe, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if !errors.As(k.lookup(addr, &net.TCPAddr{}, probe.PublicKey()), &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, w := range ke.Want {
		t := w.Key.Type()
		if seen[t] {
			continue
		}
		seen[t] = true
		if t == gossh.KeyAlgoRSA {
			algos = append(algos, gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256)
		}
		algos = append(algos, t)
	}
	return algos
}

// callback returns the HostKeyCallback for one host.
func (k *KnownHosts) callback() gossh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := k.lookup(hostname, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		if len(ke.Want) > 0 {
			return &hostKeyError{cause: CauseHostKeyChanged, file: ke.Want[0].Filename, msg: fmt.Sprintf(
				"REMOTE HOST KEY CHANGED: %s presents %s %s, known_hosts (%s:%d) has a different key",
				hostname, key.Type(), gossh.FingerprintSHA256(key), ke.Want[0].Filename, ke.Want[0].Line)}
		}
		switch k.policy {
		case Strict:
			return &hostKeyError{cause: CauseHostKeyUnknown, file: cmp.Or(k.write, "~/.ssh/known_hosts"), msg: fmt.Sprintf(
				"host key %s %s of %s is not in known_hosts", key.Type(), gossh.FingerprintSHA256(key), hostname)}
		case Off:
			return nil
		}
		return k.record(hostname, key)
	}
}

func (k *KnownHosts) record(hostname string, key gossh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// Another host sharing this address may have recorded it meanwhile.
	if err := k.lookup(hostname, &net.TCPAddr{}, key); err == nil {
		return nil
	}
	f, err := os.OpenFile(k.write, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("record host key: %w", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("record host key in %s: %w", k.write, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record host key in %s: %w", k.write, err)
	}
	return nil
}

// knownHostsName is how addr appears in known_hosts ([host]:port unless 22).
func knownHostsName(addr string) string {
	return knownhosts.Normalize(addr)
}

func joinHostPort(host string, port int) string {
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}
