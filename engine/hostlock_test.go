package engine

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// Two runs that change the same host do not overlap: the second is refused
// naming the first; once the first ends, the host is free again.
func TestHostLockRefusesASecondRun(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: r1
  tasks:
    - shell: "sleep {{ .nap }}"
`})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "r1", Address: "192.0.2.1"}}, Groups: map[string][]string{}}
	run := func(nap string) (*Recap, error) {
		return Run(context.Background(), pb, inv, RunOptions{HostLock: true, LockWait: time.Second, ExtraVars: map[string]any{"nap": nap},
			Connect: func(_ context.Context, h *inventory.Host) (transport.Transport, error) { return local.New(h.Name), nil }})
	}
	first := make(chan error, 1)
	go func() { _, err := run("4"); first <- err }()
	time.Sleep(700 * time.Millisecond)
	rc, err := run("0")
	if err == nil || !strings.Contains(rc.Hosts["r1"].Error, "in use by another kubexm run (kubexm run ") {
		t.Fatalf("second run: %v, recap %+v", err, rc.Hosts["r1"])
	}
	if err := <-first; err != nil {
		t.Fatalf("first run: %v", err)
	}
	if _, err := run("0"); err != nil {
		t.Fatalf("after the first run ended: %v", err)
	}
}

// LockFirst: the second run is refused before its first play, and
// BreakLock takes a lock whose holder is still there (a frozen control
// machine keeps its sessions), ending the holder's lock process.
func TestHostLockFirstAndBreak(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	c := &calls{}
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - shell: "sleep {{ .nap }}"
`})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "r1", Address: "192.0.2.1"}}, Groups: map[string][]string{}}
	run := func(nap string, breakLock bool) (*Recap, error) {
		return Run(context.Background(), pb, inv, RunOptions{HostLock: true, LockFirst: "r1", LockWait: time.Second, BreakLock: breakLock,
			ExtraVars: map[string]any{"nap": nap},
			Connect:   func(_ context.Context, h *inventory.Host) (transport.Transport, error) { return local.New(h.Name), nil }})
	}
	first := make(chan error, 1)
	go func() { _, err := run("6", false); first <- err }()
	time.Sleep(700 * time.Millisecond)
	rc, err := run("0", false)
	if err == nil || rc != nil || !strings.Contains(err.Error(), "the lock of the cluster: r1 is in use by another kubexm run") || !strings.Contains(err.Error(), "--break-lock") {
		t.Fatalf("second run: %v, recap %+v", err, rc)
	}
	start := time.Now()
	if _, err := run("0", true); err != nil {
		t.Fatalf("--break-lock: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("--break-lock took %s: it waited for the holder instead of ending it", took)
	}
	<-first
}
