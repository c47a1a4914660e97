//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const etcdVersion = "v3.6.16"

// TestEtcdCluster is issue 8's acceptance on three fresh test machines:
//
//   - preflight reports every problem of every host together, and stops the
//     run before anything changes;
//   - --check on fresh machines changes nothing on them;
//   - create-cluster --tags preflight,os,etcd brings up a healthy 3-member
//     etcd cluster with TLS (checked with etcdctl over ssh);
//   - running it again reports 0 changed;
//   - playbooks/delete leaves /etc/hosts, /etc/sysctl.d, /etc/modules-load.d
//     and the systemd units as they were before the install (in fact all of
//     /etc, /usr/local/bin and /var/lib, and the unit files systemd lists);
//   - a create killed during the etcd role completes with --resume.
//
// It prints the wall time of the create and of the re-run (PERF lines).
func TestEtcdCluster(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	work := t.TempDir()

	releaseRoot := etcdRelease(ctx, t, root, etcdVersion)
	bin := buildKubexm(ctx, t, root, work)

	set, diag := suiteMachines(ctx, t, 3, "e")
	server := serveDir(t, set.Gateway, releaseRoot)

	inventory := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(clusterYAML("e2e-etcd", set)), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := kubexm{
		bin: bin, dir: work, inventory: inventory, observe: diag.observe,
		extra: extraVars(
			// The artifact source: the local stand-in for github.com.
			`{"etcd_mirrors": ["`+server+`/etcd-io/etcd/releases/download/`+etcdVersion+`"]}`,
			// The machines have no package mirror; these are installed already.
			`{"os_packages": ["iptables", "iproute2", "kmod", "procps"]}`,
			// systemd-nspawn machines: vm.*, kernel.*, fs.* are read-only.
			"os_sysctl_ignore_readonly=true",
		),
	}
	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")
	tags := "--tags=preflight,os,etcd"

	// Preflight reports every problem of every host in one run and stops
	// before anything changes: too few CPUs everywhere, leftovers on two.
	for _, h := range set.Hosts[:2] {
		if _, err := set.SSH(ctx, h.Name, "mkdir /etc/kubernetes"); err != nil {
			t.Fatal(err)
		}
	}
	res := kx.play(ctx, create, tags, "-e", "preflight_min_cpus=512")
	if res.err == nil {
		t.Fatal("preflight passed with preflight_min_cpus=512 and /etc/kubernetes on two machines")
	}
	report := res.failures()
	for i, h := range set.Hosts {
		if !strings.Contains(report, fmt.Sprintf("%s [preflight] Every preflight check passed", h.Name)) ||
			!strings.Contains(report, fmt.Sprintf("Node %s (%s) lacks resources: CPU cores", h.Name, h.Address)) {
			t.Errorf("the preflight report lacks %s's hardware problem:%s", h.Name, report)
		}
		if leftovers := strings.Contains(report, fmt.Sprintf("leftovers detected on node %s (%s) (/etc/kubernetes)", h.Name, h.Address)); leftovers != (i < 2) {
			t.Errorf("%s: /etc/kubernetes reported %v, want %v:%s", h.Name, leftovers, i < 2, report)
		}
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("a run failing preflight changed things:\n  %s", strings.Join(c, "\n  "))
	}
	for _, h := range set.Hosts[:2] {
		if _, err := set.SSH(ctx, h.Name, "rmdir /etc/kubernetes"); err != nil {
			t.Fatal(err)
		}
	}

	// What a fresh machine looks like, for --check and for delete
	// (/var/lib/systemd is left out: systemd's own bookkeeping).
	wide := []string{"/etc", "/usr/local/bin", "/var/lib"}
	fresh := map[string]map[string]string{}
	freshUnits := map[string]string{}
	for _, h := range set.Hosts {
		fresh[h.Name] = snapshot(ctx, t, set, h.Name, wide...)
		freshUnits[h.Name] = unitState(ctx, t, set, h.Name)
	}

	// --check on fresh machines: succeeds and changes nothing.
	res = kx.play(ctx, create, tags, "--check")
	if res.err != nil {
		t.Fatalf("create-cluster --check failed: %v%s", res.err, res.failures())
	}
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("--check changed %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}
	t.Logf("--check on fresh machines: %d tasks would change something, nothing changed (%s)", len(res.changed()), res.wall.Round(time.Millisecond))

	// create.
	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	createWall := res.wall
	t.Logf("PERF create-cluster --tags preflight,os,etcd on 3 fresh machines: %s (%d changed)", createWall.Round(time.Millisecond), len(res.changed()))
	checkEtcd(ctx, t, set)

	// The same again: nothing to do.
	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster re-run (nothing to change): %s", res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	if rc := res.recap(); rc == nil {
		t.Error("re-run printed no recap event")
	} else {
		for h, s := range rc.Recap.Hosts {
			if s.Changed != 0 {
				t.Errorf("re-run recap: %s changed %d", h, s.Changed)
			}
		}
	}

	// delete: the hosts are as before the install.
	res = kx.play(ctx, del)
	if res.err != nil {
		t.Fatalf("delete failed: %v%s", res.err, res.failures())
	}
	t.Logf("delete: %s", res.wall.Round(time.Millisecond))
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("after delete %s differs from before the install:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
		if u := unitState(ctx, t, set, h.Name); u != freshUnits[h.Name] {
			t.Errorf("after delete the unit files of %s differ:\nbefore:\n%s\nafter:\n%s", h.Name, freshUnits[h.Name], u)
		}
	}

	// A create killed during the etcd role, then resumed.
	res = kx.playUntil(ctx, func(e event) bool {
		return e.Kind == "task_start" && e.Role == "etcd" && strings.HasPrefix(e.Task, "etcd - binaries")
	}, create, tags)
	if res.err != nil {
		t.Fatalf("the run to be killed failed on its own: %v%s", res.err, res.failures())
	}
	if res.recap() != nil {
		t.Fatal("the run finished before it reached the etcd role's distribution; nothing was killed")
	}
	res = kx.play(ctx, create, tags, "--resume")
	if res.err != nil {
		t.Fatalf("--resume failed: %v%s", res.err, res.failures())
	}
	resumed := 0
	for _, e := range res.events {
		if e.Kind == "host_result" && e.Resumed {
			resumed++
		}
	}
	if resumed == 0 {
		t.Error("--resume took no outcome from the killed run's journal")
	}
	t.Logf("killed during the etcd role, resumed in %s (%d outcomes from the journal)", res.wall.Round(time.Millisecond), resumed)
	checkEtcd(ctx, t, set)
}
