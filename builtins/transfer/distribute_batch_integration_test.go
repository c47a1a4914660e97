//go:build integration

package transfer

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
)

// countingSSH counts the calls distribute makes of the transport; every one
// is at least one round trip to the host.
type countingSSH struct {
	*ssh.Transport
	calls atomic.Int32
}

func (c *countingSSH) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	c.calls.Add(1)
	return c.Transport.Run(ctx, cmd)
}

func (c *countingSSH) PutFile(ctx context.Context, src, dst string, o transport.PutOptions) (bool, error) {
	c.calls.Add(1)
	return c.Transport.PutFile(ctx, src, dst, o)
}

func (c *countingSSH) Sha256(ctx context.Context, p string, become bool) (string, error) {
	c.calls.Add(1)
	return c.Transport.Sha256(ctx, p, become)
}

func (c *countingSSH) Stat(ctx context.Context, p string, become bool) (transport.FileInfo, error) {
	c.calls.Add(1)
	return c.Transport.Stat(ctx, p, become)
}

func (c *countingSSH) SumMany(ctx context.Context, paths []string, become bool) ([]transport.FileSum, error) {
	c.calls.Add(1)
	return c.Transport.SumMany(ctx, paths, become)
}

// TestIntegrationDistributeBatch: a distribute loop run as one batch on a
// real host sends what is missing, then re-runs in one round trip with
// nothing changed (with the host's sum records on and off); a file changed
// on the host, a mode and an owner changed are each found and fixed, and
// only those items report a change; --check reports the same and changes
// nothing; every result is the one running the items one by one gives.
func TestIntegrationDistributeBatch(t *testing.T) {
	set := steptest.Machines(t)
	h := set.Hosts[0]
	dir := t.TempDir()
	sizes := []int{1 << 10, 64 << 10, 9 << 20, 3} // the third is relayed (>= relayMinSize)
	var args []step.Args
	for i, n := range sizes {
		src := filepath.Join(dir, fmt.Sprintf("f%d", i))
		data := make([]byte, n)
		rand.Read(data)
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		a := step.Args{"src": src, "dest": "/tmp/kubexm-itb/bin/", "mode": "0755"}
		if i == 3 {
			a = step.Args{"src": src, "dest": "/tmp/kubexm-itb/etc/f3.conf", "mode": "0600", "owner": "0", "group": "root"}
		}
		args = append(args, distributeBuiltin{}.Spec().WithDefaults(a))
	}
	for _, records := range []string{"", "/tmp/kubexm-itb-sums/r"} {
		t.Run(fmt.Sprintf("records=%v", records != ""), func(t *testing.T) {
			tr, err := ssh.Dial(t.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: "root", PrivateKeyPath: set.KeyPath},
				ssh.Options{HostKeyChecking: ssh.Off, SumRecords: records})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			ct := &countingSSH{Transport: tr}
			env := steptest.RemoteEnv(t, set, 0)
			env.Target = ct
			steptest.Sh(t, env, "rm -rf /tmp/kubexm-itb /tmp/kubexm-itb-sums; mkdir -p /tmp/kubexm-itb-sums")
			t.Cleanup(func() { steptest.Sh(t, env, "rm -rf /tmp/kubexm-itb /tmp/kubexm-itb-sums") })
			d := newDistribute()
			run := func(ctx context.Context, check bool) ([]bool, int32) {
				t.Helper()
				e := *env
				e.Check = check
				items := make([]step.BatchItem, len(args))
				for i := range args {
					items[i] = step.BatchItem{Env: &e, Args: args[i]}
				}
				before := ct.calls.Load()
				results, errs := d.RunBatch(ctx, items)
				changed := make([]bool, len(results))
				for i := range results {
					if errs[i] != nil {
						t.Fatalf("item %d: %v", i, errs[i])
					}
					changed[i] = results[i].Changed
				}
				return changed, ct.calls.Load() - before
			}
			want := func(got []bool, want ...bool) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("changed %v, want %v", got, want)
				}
			}
			state := "find /tmp/kubexm-itb -type f -printf '%p %m %u\n' -exec sha256sum {} + | sort"
			got, _ := run(t.Context(), false)
			want(got, true, true, true, true)
			// A file of 1 MiB or more that was sent is recorded as it is put
			// in place (the 9 MiB f2); the others only once their ctime is
			// 2 s old, by the read that hashes them.
			if records != "" {
				if n := steptest.Sh(t, env, "ls /tmp/kubexm-itb-sums/r | wc -l"); n != "1" {
					t.Errorf("records after sending 4 files (one of 9 MiB): %s, want 1", n)
				}
				steptest.Sh(t, env, "sleep 2.1")
			}
			for range 2 {
				got, calls := run(t.Context(), false)
				want(got, false, false, false, false)
				if calls != 1 {
					t.Errorf("a re-run of 4 items in place took %d calls of the transport, want 1", calls)
				}
			}
			steptest.Sh(t, env, "printf x >> /tmp/kubexm-itb/bin/f1; chmod 0700 /tmp/kubexm-itb/bin/f2; chown nobody /tmp/kubexm-itb/etc/f3.conf")
			before := steptest.Sh(t, env, state)
			got, _ = run(transport.ReadOnly(t.Context()), true)
			want(got, false, true, true, true)
			if after := steptest.Sh(t, env, state); after != before {
				t.Fatalf("--check changed the host:\n%s\n->\n%s", before, after)
			}
			got, _ = run(t.Context(), false)
			want(got, false, true, true, true)
			got, _ = run(t.Context(), false)
			want(got, false, false, false, false)
			// One by one, as without batching, the same.
			for i, a := range args {
				res, err := d.Run(t.Context(), env, a)
				if err != nil || res.Changed {
					t.Fatalf("item %d one by one: changed=%v err=%v", i, res.Changed, err)
				}
			}
		})
	}
}

func TestIntegrationDistribute(t *testing.T) {
	set := steptest.Machines(t)
	src := filepath.Join(t.TempDir(), "artifact.bin")
	data := make([]byte, 8<<20)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := "/tmp/kubexm-it/artifact.bin"
	args := step.Args{"src": src, "dest": dest, "mode": "0755"}
	var wg sync.WaitGroup
	for i := range set.Hosts {
		env := steptest.RemoteEnv(t, set, i)
		t.Cleanup(func() { steptest.Sh(t, env, "rm -rf /tmp/kubexm-it") })
		wg.Go(func() {
			steptest.ConvergeRemote(t, distributeBuiltin{}, env, args, "sha256sum "+dest+" 2>/dev/null; stat -c %a "+dest+" 2>/dev/null")
			if got := steptest.Sh(t, env, "sha256sum "+dest); !strings.HasPrefix(got, onhost.SHA256Hex(data)) {
				t.Errorf("%s: %q", env.Host, got)
			}
		})
	}
	wg.Wait()
}
