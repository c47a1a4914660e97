package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
)

// sshServer accepts SSH handshakes on 127.0.0.1 with the given host key and
// any password, then closes the connection.
func sshServer(t *testing.T, l net.Listener, key ed25519.PrivateKey) {
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gossh.ServerConfig{PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if sc, chans, reqs, err := gossh.NewServerConn(c, cfg); err == nil {
					go gossh.DiscardRequests(reqs)
					for ch := range chans {
						ch.Reject(gossh.Prohibited, "test server")
					}
					sc.Close()
				}
			}()
		}
	}()
}

// The host keys kubexm trusts do not depend on the directory it runs from:
// a key recorded from one directory is checked from another, and the hint
// names the file to fix.
func TestHostKeysDoNotDependOnTheCurrentDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBEXM_HOME", "")
	_, key1, _ := ed25519.GenerateKey(nil)
	_, key2, _ := ed25519.GenerateKey(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	sshServer(t, l, key1)
	h := &inventory.Host{Name: "n1", Address: "127.0.0.1", Port: port, User: "root", Password: "x"}

	t.Chdir(t.TempDir())
	c := &connector{policy: ssh.AcceptNew}
	if tr, err := c.connect(context.Background(), h); err == nil {
		tr.Close()
	}
	kh := filepath.Join(home, ".kubexm", "known_hosts")
	if b, err := os.ReadFile(kh); err != nil || !strings.Contains(string(b), "ssh-ed25519") {
		t.Fatalf("host key not recorded in %s: %q %v", kh, b, err)
	}
	l.Close()

	// The machine is replaced by one with another key, at the same address;
	// kubexm now runs from another directory.
	l2, err := net.Listen("tcp", l.Addr().String())
	if err != nil {
		t.Skip("port taken again:", err)
	}
	defer l2.Close()
	sshServer(t, l2, key2)
	t.Chdir(t.TempDir())
	c2 := &connector{policy: ssh.AcceptNew}
	_, err = c2.connect(context.Background(), h)
	var de *ssh.DialError
	if !errors.As(err, &de) || de.Cause != ssh.CauseHostKeyChanged {
		t.Fatalf("changed key from another directory: %v, want refused as changed", err)
	}
	if !strings.Contains(de.Hint, kh) {
		t.Errorf("hint does not name %s: %s", kh, de.Hint)
	}
}
