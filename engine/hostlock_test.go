package engine

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// Two runs that change the same host do not overlap: the second is refused
// naming the first; once the first ends, the host is free again.
func TestHostLockRefusesASecondRun(t *testing.T) {
	pb := napPlaybook(t, "r1")
	// A lock file of the test's own: other packages' tests lock this machine.
	lockFile := filepath.Join(t.TempDir(), "kubexm.lock")
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "r1", Address: "192.0.2.1"}}, Groups: map[string][]string{}}
	run := func(nap string) (*model.Recap, error) {
		return Run(context.Background(), pb, inv, RunOptions{HostLock: true, LockWait: time.Second, LockFile: lockFile, ExtraVars: map[string]any{"nap": nap},
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
	lockFile := filepath.Join(t.TempDir(), "kubexm.lock")
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
	run := func(nap string, breakLock bool) (*model.Recap, error) {
		return Run(context.Background(), pb, inv, RunOptions{HostLock: true, LockFirst: "r1", LockWait: time.Second, LockFile: lockFile, BreakLock: breakLock,
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

// napPlaybook is a play sleeping {{ .nap }} seconds on hosts, for the lock
// tests (which need flock(1)).
func napPlaybook(t *testing.T, hosts string) *Playbook {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	dir := writeFiles(t, map[string]string{"playbook.yaml": "- hosts: " + hosts + "\n  tasks:\n    - shell: \"sleep {{ .nap }}\"\n"})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// connection: local hosts are covered by the lock too (issue 45): they are
// this machine, locked once for all of them, so a run whose hosts are all
// local does not wait for itself, and a second run with any local host is
// refused. localhost as a host releases the lock at the end as well.
func TestHostLockCoversLocalHosts(t *testing.T) {
	pb := napPlaybook(t, "all")
	lockFile := filepath.Join(t.TempDir(), "kubexm.lock")
	three := &inventory.Inventory{Hosts: []inventory.Host{{Name: "l1", Local: true}, {Name: "l2", Local: true}, {Name: "localhost", Local: true}},
		Groups: map[string][]string{}}
	other := &inventory.Inventory{Hosts: []inventory.Host{{Name: "l9", Local: true}}, Groups: map[string][]string{}}
	run := func(inv *inventory.Inventory, nap string) (*model.Recap, error) {
		return Run(context.Background(), pb, inv, RunOptions{HostLock: true, LockWait: time.Second, LockFile: lockFile, ExtraVars: map[string]any{"nap": nap}})
	}
	first := make(chan error, 1)
	start := time.Now()
	go func() { _, err := run(three, "3"); first <- err }()
	time.Sleep(1200 * time.Millisecond)
	rc, err := run(other, "0")
	if err == nil || !strings.Contains(rc.Hosts["l9"].Error, "in use by another kubexm run (kubexm run ") {
		t.Errorf("a second run on this machine: %v, recap %+v", err, rc.Hosts["l9"])
	}
	if err := <-first; err != nil {
		t.Fatalf("a run of three local hosts: %v", err)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("the run of three local hosts took %s: its hosts waited for each other's lock", took)
	}
	for _, inv := range []*inventory.Inventory{other, {Hosts: []inventory.Host{{Name: "localhost", Local: true}}, Groups: map[string][]string{}}, other} {
		if _, err := run(inv, "0"); err != nil {
			t.Fatalf("after the first run ended (%s): %v", inv.Hosts[0].Name, err)
		}
	}
}
