package ssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

func TestInnerScriptQuoting(t *testing.T) {
	nasty := []string{"", "plain", "it's", `"dq"`, "$HOME", "`id`", "a b\tc\nd", `back\slash`, "*", "-n", "🙂"}
	script, err := innerScript("MARK:", transport.Command{
		Argv: append([]string{"printf", "[%s]"}, nasty...),
		Env:  map[string]string{"X_1": "v'al $x"},
		Dir:  "/",
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatal(err, errb.String())
	}
	var want strings.Builder
	for _, a := range nasty {
		fmt.Fprintf(&want, "[%s]", a)
	}
	if out.String() != want.String() {
		t.Errorf("got %q\nwant %q", out.String(), want.String())
	}
	if !strings.HasPrefix(errb.String(), "MARK:") {
		t.Errorf("no pid announcement: %q", errb.String())
	}

	script, _ = innerScript("M:", transport.Command{Script: `echo "$X_1|$(pwd)"`, Env: map[string]string{"X_1": "v'al $x"}, Dir: "/tmp"})
	got, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil || string(got) != "v'al $x|/tmp\n" {
		t.Errorf("script: %q %v", got, err)
	}
	if _, err := innerScript("M:", transport.Command{Argv: []string{"x"}, Env: map[string]string{"A;B": "1"}}); err == nil {
		t.Error("bad env name accepted")
	}
	if _, err := innerScript("M:", transport.Command{}); err == nil {
		t.Error("empty command accepted")
	}
}

func newKey(t *testing.T) gossh.PublicKey {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s.PublicKey()
}

func TestKnownHosts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "known_hosts")
	user := filepath.Join(dir, "user_known_hosts") // missing: skipped
	key, other := newKey(t), newKey(t)
	addr := "10.1.2.3:2222"
	remote := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 2222}

	strict, _ := NewKnownHosts(Strict, []string{user}, file)
	var hk *hostKeyError
	if err := strict.callback()(addr, remote, key); !errors.As(err, &hk) || hk.cause != CauseHostKeyUnknown {
		t.Fatalf("strict unknown: %v", err)
	}
	off, _ := NewKnownHosts(Off, []string{user}, file)
	if err := off.callback()(addr, remote, key); err != nil {
		t.Fatalf("off: %v", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("off recorded a key")
	}
	acc, _ := NewKnownHosts(AcceptNew, []string{user}, file)
	if err := acc.callback()(addr, remote, key); err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	data, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(data), "[10.1.2.3]:2222 ssh-ed25519 ") {
		t.Fatalf("recorded %q", data)
	}
	if err := strict.callback()(addr, remote, key); err != nil {
		t.Fatalf("strict after record: %v", err)
	}
	if algos := strict.algorithms(addr); len(algos) != 1 || algos[0] != gossh.KeyAlgoED25519 {
		t.Fatalf("algorithms %v", algos)
	}
	for _, k := range []*KnownHosts{strict, acc, off} {
		if err := k.callback()(addr, remote, other); !errors.As(err, &hk) || hk.cause != CauseHostKeyChanged {
			t.Fatalf("%s changed key: %v", k.policy, err)
		}
	}
	d := classify("n1", addr, "root", fmt.Errorf("ssh: handshake failed: %w", hk))
	if d.Cause != CauseHostKeyChanged || !strings.Contains(d.Error(), "ssh-keygen -f "+file+" -R [10.1.2.3]:2222") {
		t.Fatalf("classify: %v", d)
	}
	if _, err := NewKnownHosts("sometimes", nil, file); err == nil {
		t.Fatal("bad policy accepted")
	}
	if _, err := NewKnownHosts(AcceptNew, nil, ""); err == nil {
		t.Fatal("accept-new without a file accepted")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Cause
	}{
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, CauseRefused},
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}}, CauseNoRoute},
		{&net.DNSError{Err: "no such host", Name: "nowhere"}, CauseDNS},
		{fmt.Errorf("%w: handshake", errConnectTimeout), CauseTimeout},
		{errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none password]"), CauseAuth},
	} {
		d := classify("n1", "10.0.0.1:22", "root", tc.err)
		if d.Cause != tc.want || !strings.Contains(d.Error(), "n1") || !strings.Contains(d.Error(), "10.0.0.1:22") || d.Hint == "" {
			t.Errorf("%v: got %v (%s)", tc.err, d.Cause, d)
		}
	}
}

func TestMetaDiffers(t *testing.T) {
	m, o := metaDiffers("644 root root 0 0", transport.PutOptions{Mode: 0o644, Owner: "0"})
	if m || o {
		t.Fatal("equal meta reported different")
	}
	m, o = metaDiffers("4755 root root 0 0", transport.PutOptions{Mode: 0o755, Group: "docker"})
	if !m || !o {
		t.Fatal("different meta reported equal")
	}
}

func TestDialErrorsLoopback(t *testing.T) {
	// A listener that accepts and never speaks SSH: the handshake times out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	h := &inventory.Host{Name: "mute", Address: "127.0.0.1", Port: port, User: "root", Password: "x"}
	o := Options{ConnectTimeout: 300 * time.Millisecond, KnownHostsPaths: []string{}, KnownHostsFile: filepath.Join(t.TempDir(), "kh")}
	_, err = Dial(context.Background(), h, o)
	var de *DialError
	if !errors.As(err, &de) || de.Cause != CauseTimeout || !strings.Contains(err.Error(), "mute") || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Fatalf("got %v, want a timeout naming the host", err)
	}

	// Nothing listening: refused; Options.Observe hears of the failed dial.
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	h.Port = l2.Addr().(*net.TCPAddr).Port
	l2.Close()
	var seen []ConnEvent
	o.Observe = func(e ConnEvent) { seen = append(seen, e) }
	_, err = Dial(context.Background(), h, o)
	if !errors.As(err, &de) || de.Cause != CauseRefused || !strings.Contains(err.Error(), "sshd") {
		t.Fatalf("got %v, want refused with a hint", err)
	}
	if len(seen) != 1 || seen[0].Kind != ConnDialFailed || seen[0].Host != "mute" || !errors.Is(seen[0].Err, err) {
		t.Fatalf("observed %+v, want one failed dial of mute", seen)
	}
	o.Observe = nil

	h.Password = ""
	h.PrivateKeyPath = filepath.Join(t.TempDir(), "missing")
	_, err = Dial(context.Background(), h, o)
	if err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("got %v, want a private key error", err)
	}
}

// The "no credentials" hint is the inventory's own (cluster.yaml and an
// Ansible inventory name different fields), and generic without one.
func TestHintsNameClusterYAMLFields(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no default identities
	o := Options{KnownHostsPaths: []string{}, HostKeyChecking: Off, AgentSocket: filepath.Join(t.TempDir(), "no-agent")}
	for _, tc := range []struct{ hint, want string }{
		{"set privateKeyPath or password for this host in cluster.yaml", "privateKeyPath"},
		{"set ansible_ssh_private_key_file or ansible_password", "ansible_ssh_private_key_file"},
		{"", "private key or a password in the inventory"},
	} {
		h := &inventory.Host{Name: "nocreds", Address: "127.0.0.1", Port: 1, User: "root", CredentialsHint: tc.hint}
		_, err := Dial(context.Background(), h, o)
		var de *DialError
		if !errors.As(err, &de) || de.Cause != CauseAuth {
			t.Fatalf("got %v, want an auth error before connecting", err)
		}
		for _, want := range []string{tc.want, "nocreds"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
	}
	be := &transport.BecomeError{Host: "n1", User: "ops", Msg: "sudo failed"}
	for _, want := range []string{"sudoPassword", "user ops", "NOPASSWD"} {
		if !strings.Contains(be.Error(), want) {
			t.Errorf("become error lacks %q: %v", want, be)
		}
	}
	for _, field := range []string{"private_key_path", "become_password"} {
		if strings.Contains(be.Error(), field) {
			t.Errorf("hint names %s, which cluster.yaml does not have", field)
		}
	}
}

// A keepalive reply that waits behind a transfer does not kill a server
// that keeps sending; a silent one is given up on after 3 intervals. The
// interval is 100 ms: with 20 ms, a sender goroutine held off the CPU for
// 60 ms on a machine at load 20 looked silent (it failed once so).
func TestAwaitReplyTrustsAServerThatKeepsSending(t *testing.T) {
	const every = 100 * time.Millisecond
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	reads := newReadActivity(client)
	go io.Copy(io.Discard, reads)
	stopSending := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopSending:
				return
			case <-time.After(every / 4):
				if _, err := server.Write([]byte("data")); err != nil {
					return
				}
			}
		}
	}()

	reply := make(chan requestReply, 1)
	done := make(chan bool, 1)
	go func() { done <- awaitReply(reply, reads, nil, every) }()
	select {
	case ok := <-done:
		t.Fatalf("awaitReply returned %v after less than 20 intervals while the server kept sending", ok)
	case <-time.After(20 * every):
	}
	reply <- requestReply{}
	if ok := <-done; !ok {
		t.Fatal("a late reply from a busy server was taken for a dead one")
	}

	close(stopSending)
	start := time.Now()
	if awaitReply(make(chan requestReply), reads, nil, every) {
		t.Fatal("a silent server with no reply was taken for alive")
	}
	if took := time.Since(start); took > 40*every {
		t.Errorf("a silent server was given up on after %s, want about 3 intervals of %s", took, every)
	}
	if awaitReply(func() chan requestReply {
		c := make(chan requestReply, 1)
		c <- requestReply{err: errors.New("refused")}
		return c
	}(), reads, nil, every) {
		t.Error("a failed keepalive request was taken for alive")
	}
}
