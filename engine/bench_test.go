package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// nullTransport stands for a remote host in benchmarks: the no-op builtin
// never uses it, so what is measured is the engine alone.
type nullTransport struct{ name string }

func (n nullTransport) Host() string { return n.name }
func (nullTransport) Run(context.Context, transport.Command) (transport.Result, error) {
	return transport.Result{}, nil
}
func (nullTransport) Put(context.Context, io.Reader, string, transport.PutOptions) error { return nil }
func (nullTransport) PutFile(context.Context, string, string, transport.PutOptions) (bool, error) {
	return false, nil
}
func (nullTransport) Get(context.Context, string, io.Writer, bool) error { return nil }
func (nullTransport) Stat(context.Context, string, bool) (transport.FileInfo, error) {
	return transport.FileInfo{}, nil
}
func (nullTransport) Sha256(context.Context, string, bool) (string, error) { return "", nil }
func (nullTransport) Close() error                                         { return nil }

const benchTasks = 20

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchInventory(n int) *inventory.Inventory {
	inv := &inventory.Inventory{Groups: map[string][]string{}, GroupVars: map[string]map[string]any{"nodes": {"port": 6443}},
		Vars: map[string]any{"spec": map[string]any{"kubernetes": map[string]any{"version": "v1.33.0"}, "etcd": map[string]any{"type": "kubexm"}}}}
	for i := range n {
		name := fmt.Sprintf("node%04d", i)
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: name, Address: "192.0.2.1", Vars: map[string]any{"internal_address": "10.0.0.1"}})
		inv.Groups["nodes"] = append(inv.Groups["nodes"], name)
	}
	return inv
}

// BenchmarkEngineOverhead runs benchTasks no-op tasks (with a when, a
// template argument and a register, as real tasks have) on N hosts and
// reports the engine's cost per task-host.
func BenchmarkEngineOverhead(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("- hosts: nodes\n  tasks:\n")
	for i := range benchTasks {
		fmt.Fprintf(&sb, "    - name: task %d\n      probe: {id: \"{{ .inventory_hostname }}\", msg: \"{{ .spec.kubernetes.version }}\"}\n      when: spec.etcd.type == \"kubexm\"\n      register: r%d\n", i, i)
	}
	reg := testRegistry(&calls{})
	reg["probe"] = fakeBuiltin{spec: reg["probe"].Spec(), run: func(context.Context, *stepEnv, stepArgs) (stepResult, error) {
		return stepResult{}, nil
	}}
	pb, err := LoadBytes(context.Background(), "bench.yaml", []byte(sb.String()), LoadOptions{Builtins: reg})
	if err != nil {
		b.Fatal(err)
	}
	for _, hosts := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			inv := benchInventory(hosts)
			opts := RunOptions{Connect: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
				return nullTransport{h.Name}, nil
			}}
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := Run(context.Background(), pb, inv, opts); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * hosts * benchTasks)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n/1000, "µs/task-host")
			// CPU time is what the engine costs whatever else runs on the
			// machine; wall time also counts waiting for a shared CPU.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n/1000, "cpu-µs/task-host")
		})
	}
}
