package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/confine"
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
	c := &lifecycle.Connector{Policy: ssh.AcceptNew}
	if tr, err := c.Connect(context.Background(), h); err == nil {
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
	c2 := &lifecycle.Connector{Policy: ssh.AcceptNew}
	_, err = c2.Connect(context.Background(), h)
	var de *ssh.DialError
	if !errors.As(err, &de) || de.Cause != ssh.CauseHostKeyChanged {
		t.Fatalf("changed key from another directory: %v, want refused as changed", err)
	}
	if !strings.Contains(de.Hint, kh) {
		t.Errorf("hint does not name %s: %s", kh, de.Hint)
	}
}

// TestConfinedDialPinsTheCheckedAddress: a job's child (--confine-dial)
// connects through the confinement's dial: the host's name is resolved
// once and the connection goes to the checked address, while the host key
// is recorded and checked under the name; a name that resolves to the
// server's machine when the run connects (DNS rebinding after the job's
// check) is refused.
func TestConfinedDialPinsTheCheckedAddress(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBEXM_HOME", "")
	_, key, _ := ed25519.GenerateKey(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	sshServer(t, l, key)
	var lookups atomic.Int32
	loopback := func(context.Context, string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	h := &inventory.Host{Name: "n1", Address: "lab.example", Port: port, User: "root", Password: "x"}

	// A lab allowing loopback: connected to the checked address, the key
	// known under the name.
	lab, err := confine.New(confine.Config{Allow: []string{"127.0.0.1/32"}, Lookup: loopback})
	if err != nil {
		t.Fatal(err)
	}
	c := &lifecycle.Connector{Policy: ssh.AcceptNew, Dial: lab.Dial}
	tr, err := c.Connect(context.Background(), h)
	if err != nil {
		t.Fatalf("connect through the confined dial: %v", err)
	}
	tr.Close()
	kh, _ := os.ReadFile(filepath.Join(home, ".kubexm", "known_hosts"))
	if !strings.Contains(string(kh), fmt.Sprintf("[lab.example]:%d ssh-ed25519", port)) || strings.Contains(string(kh), "127.0.0.1") {
		t.Errorf("known_hosts after the dial:\n%s\nwant the key under [lab.example]:%d only", kh, port)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("the name was resolved %d times for one connection", n)
	}

	// The server's rules: the same name now answering 127.0.0.1 is
	// refused when the run connects.
	strict, err := confine.New(confine.Config{Lookup: loopback})
	if err != nil {
		t.Fatal(err)
	}
	c = &lifecycle.Connector{Policy: ssh.AcceptNew, Dial: strict.Dial}
	_, err = c.Connect(context.Background(), h)
	var r *confine.Refused
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "resolved to 127.0.0.1 when the run connected") {
		t.Fatalf("a name resolving to loopback at the dial: %v, want refused", err)
	}
}

// TestJobChildrenDialConfined: --confine-dial (which a worker's job
// children get: service/server's TestChildArgs) sets the dial.
func TestJobChildrenDialConfined(t *testing.T) {
	// The flag gives the run the confined dial: a host on loopback is
	// refused when the run connects, before any connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer l.Close()
	t.Setenv("KUBEXM_HOME", t.TempDir())
	t.Chdir(t.TempDir())
	inv := confinedCluster("c1", fmt.Sprintf("  - {name: node1, address: 127.0.0.1, port: %d, user: root, password: x}", l.Addr().(*net.TCPAddr).Port))
	if err := os.WriteFile("cluster.yaml", []byte(inv), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := execKubexm("--confine-dial=", "run", "command", "-f", "cluster.yaml", "--nodes", "node1", "--", "true")
	if err == nil || !strings.Contains(out, "resolved to 127.0.0.1 when the run connected") {
		t.Errorf("run command --confine-dial= on a loopback host: %v\n%s", err, out)
	}
}
