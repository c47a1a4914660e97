//go:build integration

package ssh

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// TestPersist hands a closed connection to a keeper and works through it:
// commands with stdin, stdout, stderr and exit codes, sudo with a password,
// files over SFTP, TCP tunnels, a remote process that ends with its client, and the
// keeper's end once it has gone unused for the idle time.
func TestPersist(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := server.userHost()
	h.BecomePassword = testPassword
	h.Vars = map[string]any{"site": "x"}
	k := keepOne(ctx, t, h, 2*time.Second)
	p, opts := k.persist, k.opts
	if kh := k.cfg.Hosts[0].Host; kh.Password != testPassword || kh.BecomePassword != "" || kh.Vars != nil {
		t.Fatalf("the keeper gets the login password only: %+v", kh)
	}
	if again, _ := p.HandOver(); again != nil {
		t.Fatal("handed twice")
	}
	sock := k.cfg.Hosts[0].Socket
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v", fi.Mode(), err)
	}

	tr, err := Dial(ctx, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.cur.kept {
		t.Fatal("the second dial did not use the keeper")
	}
	// A second client at once dials for itself: each counts on all of
	// sshd's sessions of a connection.
	second, err := Dial(ctx, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if second.cur.kept {
		t.Error("two clients share the kept connection")
	}
	second.Close()
	if again, _ := p.HandOver(); again != nil {
		t.Error("a connection made while the keeper served the login was handed over")
	}
	res, err := tr.Run(ctx, transport.Command{
		Script: `printf '%s|' "$GREETING"; cat; echo oops >&2; exit 7`,
		Env:    map[string]string{"GREETING": "hello world"},
		Stdin:  strings.NewReader("from stdin"),
	})
	if err != nil || string(res.Stdout) != "hello world|from stdin" || strings.TrimSpace(string(res.Stderr)) != "oops" || res.ExitCode != 7 {
		t.Fatalf("command through the keeper: %v stdout %q stderr %q exit %d", err, res.Stdout, res.Stderr, res.ExitCode)
	}
	res, err = tr.Run(ctx, transport.Command{Script: "id -u; cat", Become: true, Stdin: strings.NewReader("payload")})
	if err != nil || string(res.Stdout) != "0\npayload" {
		t.Fatalf("sudo through the keeper: %v %q %q", err, res.Stdout, res.Stderr)
	}
	dst := filepath.Join(userDir(t), "f")
	body := strings.Repeat("kubexm ", 300000)
	if err := tr.Put(ctx, strings.NewReader(body), dst, transport.PutOptions{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := tr.Get(ctx, dst, &got, false); err != nil || got.String() != body {
		t.Fatalf("file through the keeper: %v, %d bytes back of %d", err, got.Len(), len(body))
	}

	// A tunnel through the keeper (what kubexm's Kubernetes client rides
	// to a master's API server): the host's sshd itself answers, and a
	// port nothing listens on is refused, not hung.
	nc, err := tr.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", h.Port))
	if err != nil {
		t.Fatalf("a tunnel through the keeper: %v", err)
	}
	banner := make([]byte, 8)
	if _, err := io.ReadFull(nc, banner); err != nil || string(banner) != "SSH-2.0-" {
		t.Fatalf("through the tunnel: %q %v", banner, err)
	}
	nc.Close()
	if nc, err := tr.DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil {
		nc.Close()
		t.Fatal("a tunnel to a closed port through the keeper opened")
	}

	// A command reading its stdin sees it end when its client goes away,
	// as when the client's own connection drops: the hosts' lock holds
	// on that.
	ended := dst + ".ended"
	stdin, hold := io.Pipe()
	defer hold.Close()
	go func() {
		_, _ = tr.Run(ctx, transport.Command{Script: "cat >/dev/null; touch " + ended, Stdin: stdin})
	}()
	waitFor(t, "the remote cat", func() bool { return exec.Command("pgrep", "-u", testUser, "-x", "cat").Run() == nil })
	tr.Close()
	waitFor(t, "end of the remote cat's stdin", func() bool { _, err := os.Stat(ended); return err == nil })
	if again, _ := p.HandOver(); again != nil {
		t.Fatal("a kept connection was handed over again")
	}

	select {
	case err := <-k.served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the keeper is still up 20 s after its last client, with an idle time of 2 s")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there: %v", err)
	}
	third, err := Dial(ctx, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if third.cur.kept {
		t.Fatal("dialled through a keeper that has ended")
	}
}

// kept is a keeper started by keepOne.
type kept struct {
	persist *Persist
	opts    Options
	cfg     keeperConfig
	served  <-chan error
}

// keepOne dials h with a Persist of idle, closes the transport, and serves
// what it handed over in a keeper until the test ends; it returns once the
// keeper's socket is there.
func keepOne(ctx context.Context, t *testing.T, h *inventory.Host, idle time.Duration) kept {
	t.Helper()
	p, err := NewPersist(filepath.Join(t.TempDir(), "ssh"), idle)
	if err != nil {
		t.Fatal(err)
	}
	opts := server.opts(t)
	opts.Persist = p
	if cfg, err := p.HandOver(); err != nil || cfg != nil {
		t.Fatalf("nothing closed yet: handed %q, %v", cfg, err)
	}
	first, err := Dial(ctx, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.cur.kept {
		t.Fatal("the first dial found a keeper")
	}
	first.Close()
	raw, err := p.HandOver()
	if err != nil || raw == nil {
		t.Fatalf("handed %q, %v", raw, err)
	}
	k := kept{persist: p, opts: opts}
	if err := json.Unmarshal(raw, &k.cfg); err != nil || len(k.cfg.Hosts) != 1 {
		t.Fatalf("keeper configuration %s: %v", raw, err)
	}
	kctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	served := make(chan error, 1)
	go func() { served <- ServeKeeper(kctx, bytes.NewReader(raw), t.Output()) }()
	k.served = served
	waitFor(t, "the keeper's socket", func() bool { _, err := os.Stat(k.cfg.Hosts[0].Socket); return err == nil })
	return k
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s after 10 s", what)
}

// TestPersistConcurrentSessions: sessions and files at once through a
// keeper, as a task on one host opens them. A command that ends at once
// closes its channel right after answering the exec: the answer must reach
// the client before the close does.
func TestPersistConcurrentSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := server.keyHost("concurrent")
	opts := keepOne(ctx, t, h, 5*time.Second).opts
	tr := dialT(t, h, opts)
	if !tr.cur.kept {
		t.Fatal("not through the keeper")
	}
	dir := userDir(t)
	body := strings.Repeat("x", 100000)
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 12; i++ {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					err = tr.Put(ctx, strings.NewReader(body), filepath.Join(dir, fmt.Sprint(i)), transport.PutOptions{Mode: 0o644})
				} else {
					_, err = tr.Run(ctx, transport.Command{Argv: []string{"true"}})
				}
				if err != nil {
					t.Errorf("round %d, operation %d: %v", round, i, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
