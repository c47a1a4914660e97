package transfer

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
)

// countingHost counts the bytes the control machine uploads to a host
// (PutFile of content that is not there yet).
type countingHost struct {
	transport.Transport
	uplink *atomic.Int64
}

func (c countingHost) PutFile(ctx context.Context, src, dst string, o transport.PutOptions) (bool, error) {
	changed, err := c.Transport.PutFile(ctx, src, dst, o)
	if changed {
		if fi, serr := os.Stat(src); serr == nil {
			c.uplink.Add(fi.Size())
		}
	}
	return changed, err
}

// relayHosts runs distribute of src on n local "hosts", each with its own
// dest directory under root, reachable at addr(i), all at once, and
// returns each host's result and error and the bytes uploaded.
func relayHosts(t *testing.T, d distributeBuiltin, root, src string, n int, addr func(int) string) ([]step.Result, []error, int64) {
	t.Helper()
	var uplink atomic.Int64
	results, errs := make([]step.Result, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		env, _ := steptest.Env(t)
		name := fmt.Sprintf("h%d", i)
		env.Host = name
		env.Target = countingHost{Transport: local.New(name), uplink: &uplink}
		env.Vars = map[string]any{"internal_address": addr(i)}
		wg.Go(func() {
			results[i], errs[i] = steptest.RunBuiltin(t.Context(), env, d, step.Args{"src": src, "dest": filepath.Join(root, name, "bin", "big"), "mode": "0755"})
		})
	}
	wg.Wait()
	return results, errs, uplink.Load()
}

func bigFile(t *testing.T, dir string, size int) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestDistributeRelay: 7 hosts get a large file with two uploads from the
// control machine, the rest from each other, byte for byte and with the
// mode asked for; a second run sends nothing.
func TestDistributeRelay(t *testing.T) {
	root := t.TempDir()
	src, content := bigFile(t, t.TempDir(), relayMinSize+1)
	d := newDistribute()
	const n = 7
	loopback := func(int) string { return "127.0.0.1" }
	results, errs, uplink := relayHosts(t, d, root, src, n, loopback)
	peers := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("h%d: %v", i, errs[i])
		}
		got, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("h%d", i), "bin", "big"))
		if err != nil || string(got) != string(content) {
			t.Fatalf("h%d: content differs (%v)", i, err)
		}
		if fi, _ := os.Stat(filepath.Join(root, fmt.Sprintf("h%d", i), "bin", "big")); fi.Mode().Perm() != 0o755 {
			t.Errorf("h%d: mode %v", i, fi.Mode())
		}
		if !results[i].Changed {
			t.Errorf("h%d: not changed", i)
		}
		if results[i].Data["from"] != "the control machine" {
			peers++
		}
	}
	if uplink != int64(relaySeeds*len(content)) || peers != n-relaySeeds {
		t.Errorf("uploaded %d bytes (%d × the file), %d hosts from peers; want %d uploads", uplink, uplink/int64(len(content)), peers, relaySeeds)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "*", "bin", "*.kubexm-relay.*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	results, errs, uplink = relayHosts(t, d, root, src, n, loopback)
	for i := range n {
		if errs[i] != nil || results[i].Changed {
			t.Errorf("second run h%d: %v %v", i, results[i].Changed, errs[i])
		}
	}
	if uplink != 0 {
		t.Errorf("second run uploaded %d bytes", uplink)
	}
}

// TestDistributeRelayFallsBack: hosts that cannot reach each other (an
// address nothing answers at) get direct uploads, and a holder whose copy
// went bad is not believed: its receiver discards the bytes and gets the
// file elsewhere.
func TestDistributeRelayFallsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for connections that time out")
	}
	root := t.TempDir()
	src, content := bigFile(t, t.TempDir(), relayMinSize+1)
	const n = 4
	// 198.51.100.1 (TEST-NET-2) does not answer.
	_, errs, uplink := relayHosts(t, newDistribute(), root, src, n, func(int) string { return "198.51.100.1" })
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("h%d: %v", i, errs[i])
		}
		if got, _ := os.ReadFile(filepath.Join(root, fmt.Sprintf("h%d", i), "bin", "big")); string(got) != string(content) {
			t.Fatalf("h%d: content differs", i)
		}
	}
	if uplink != int64(n*len(content)) {
		t.Errorf("unreachable peers: uploaded %d × the file, want %d", uplink/int64(len(content)), n)
	}

	// A holder with other bytes at its path than the sum it claims.
	d := newDistribute()
	sum, err := transport.FileSha256(src)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	steptest.MustWrite(t, bad, "not the file")
	d.relay.hold(sum, &holder{host: "liar", addr: "127.0.0.1", path: bad, t: local.New("liar")})
	d.relay.hold(sum, &holder{host: "liar2", addr: "127.0.0.1", path: bad, t: local.New("liar2")})
	root2 := t.TempDir()
	_, errs, _ = relayHosts(t, d, root2, src, 1, func(int) string { return "127.0.0.1" })
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got, _ := os.ReadFile(filepath.Join(root2, "h0", "bin", "big")); string(got) != string(content) {
		t.Fatal("h0 got the liar's bytes")
	}
}
