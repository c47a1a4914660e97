package engine_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// simHost answers like a converged Linux host with systemd, after a round
// trip of rtt ± 25 %: every path exists as a root-owned 0755 directory,
// commands succeed, units are enabled and active and need no reload. It is
// what a re-run of a play meets on every host.
type simHost struct {
	name  string
	rtt   time.Duration
	trips *atomic.Int64
}

func (s simHost) wait(ctx context.Context) error {
	s.trips.Add(1)
	d := s.rtt*3/4 + time.Duration(rand.Int64N(int64(s.rtt/2)+1))
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s simHost) Host() string { return s.name }
func (s simHost) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	if err := s.wait(ctx); err != nil {
		return transport.Result{}, err
	}
	line := strings.Join(c.Argv, " ")
	switch {
	case strings.HasPrefix(line, "systemctl is-enabled"):
		return transport.Result{Stdout: []byte("enabled\n")}, nil
	case strings.HasPrefix(line, "systemctl is-active"):
		return transport.Result{Stdout: []byte("active\n")}, nil
	case strings.Contains(line, "systemctl show --property=Id,LoadState"):
		name := c.Argv[len(c.Argv)-1]
		return transport.Result{Stdout: []byte("Id=" + name + ".service\nLoadState=loaded\nNeedDaemonReload=no\nDropInPaths=\n")}, nil
	}
	return transport.Result{Stdout: []byte("ok\n")}, nil
}
func (s simHost) Put(ctx context.Context, _ io.Reader, _ string, _ transport.PutOptions) error {
	return s.wait(ctx)
}
func (s simHost) PutFile(ctx context.Context, _, _ string, _ transport.PutOptions) (bool, error) {
	return false, s.wait(ctx)
}
func (s simHost) Get(ctx context.Context, _ string, _ io.Writer, _ bool) error { return s.wait(ctx) }
func (s simHost) Stat(ctx context.Context, _ string, _ bool) (transport.FileInfo, error) {
	return simDir, s.wait(ctx)
}

// StatMany is concurrent SFTP requests on a real host: one round trip.
func (s simHost) StatMany(ctx context.Context, paths []string, _ bool) ([]transport.StatEntry, error) {
	out := make([]transport.StatEntry, len(paths))
	for i, p := range paths {
		out[i] = transport.StatEntry{Info: simDir, Real: p}
	}
	return out, s.wait(ctx)
}
func (s simHost) Sha256(ctx context.Context, _ string, _ bool) (string, error) {
	return "", s.wait(ctx)
}
func (simHost) Close() error { return nil }

var simDir = transport.FileInfo{Exists: true, IsDir: true, Mode: 0o755, Owner: "root", Group: "root"}

func simInventory(n int) *inventory.Inventory {
	inv := &inventory.Inventory{Groups: map[string][]string{}}
	for i := range n {
		name := fmt.Sprintf("node%04d", i)
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: name, Address: "192.0.2.1", Vars: map[string]any{"internal_address": "10.0.0.1"}})
		inv.Groups["nodes"] = append(inv.Groups["nodes"], name)
	}
	return inv
}

// BenchmarkSimulatedFleet runs the 20-task re-run play on 10, 100 and 1000
// simulated hosts 5 ms away (forks 50) with the real builtins and reports
// per host: wall time, engine CPU, bytes allocated and the heap in use at
// the end, and the round trips. Linear means the per-host figures stay
// flat as hosts grow.
func BenchmarkSimulatedFleet(b *testing.B) {
	// 20 tasks of the kinds a node's preparation has: directories (one a
	// 5-item loop, batched), commands with register, changed_when and
	// when, units started with daemon_reload, a fact.
	var sb strings.Builder
	sb.WriteString(`- hosts: nodes
  tasks:
    - name: directories
      file: {path: "{{ .item }}", state: directory, mode: "0755"}
      loop: [/etc/kubernetes, /etc/kubernetes/pki, /var/lib/kubelet, /etc/cni/net.d, /opt/cni/bin]
`)
	for i := range 6 {
		fmt.Fprintf(&sb, `    - name: probe %[1]d
      command: uname -r
      register: p%[1]d
      changed_when: false
    - name: dir %[1]d
      file: {path: "/etc/kubexm/d%[1]d", state: directory, mode: "0755"}
      when: p%[1]d.rc == 0
    - name: unit %[1]d
      systemd: {name: "svc%[1]d", state: started, enabled: true, daemon_reload: true}
`, i)
	}
	sb.WriteString("    - name: fact\n      set_fact: {done: true}\n")
	reg := map[string]step.Builtin{}
	for _, bi := range builtins.All() {
		reg[bi.Spec().Name] = bi
	}
	pb, err := engine.LoadBytes(context.Background(), "sim.yaml", []byte(sb.String()), engine.LoadOptions{Builtins: reg})
	if err != nil {
		b.Fatal(err)
	}
	for _, hosts := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			inv := simInventory(hosts)
			var trips atomic.Int64
			opts := engine.RunOptions{WorkDir: b.TempDir(), Output: model.SinkFunc(func(model.Event) {}),
				Connect: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
					return simHost{name: h.Name, rtt: 5 * time.Millisecond, trips: &trips}, nil
				}}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0 := simCPU()
			for b.Loop() {
				rc, err := engine.Run(context.Background(), pb, inv, opts)
				if err != nil {
					b.Fatal(err)
				}
				if h := rc.Hosts["node0000"]; h.Failed > 0 || h.Changed > 0 {
					b.Fatalf("node0000: %+v", *h)
				}
			}
			runtime.ReadMemStats(&m1)
			n := float64(b.N * hosts)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/n/1000, "ms/host")
			b.ReportMetric(float64((simCPU()-cpu0).Microseconds())/n/1000, "cpu-ms/host")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n/1024, "alloc-KiB/host")
			b.ReportMetric(float64(m1.HeapInuse)/float64(hosts)/1024, "heap-KiB/host")
			b.ReportMetric(float64(trips.Load())/n, "trips/host")
		})
	}
}

func simCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
