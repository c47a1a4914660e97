//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// onlyFromUnit is a kubelet drop-in that lets the kubelet start only when
// its binary is version: with it on a node, the upgrade's new kubelet
// cannot start there, as a target kubelet that rejects the node's setup
// would not.
func onlyFromUnit(version string) string {
	return "[Service]\nExecStartPre=/bin/sh -c '/usr/local/bin/kubelet --version | grep -qx \"Kubernetes " + version + "\"'\n"
}

const onlyFromPath = "/etc/systemd/system/kubelet.service.d/50-e2e-only-from.conf"

// upgradeRollback is issue 53's rollback on TestUpgrade's binary-mode
// cluster at from (1 master and etcd, 2 workers: the failure the acceptance
// puts on the second master is on the second worker, the last node the
// upgrade reaches):
//
//   - a rollback before any upgrade is refused: no record;
//   - the upgrade to to fails on the last worker (its new kubelet cannot
//     start), the master and the first worker already at to;
//   - rollback --check changes nothing on the nodes;
//   - rollback: every node Ready at from, the API server at from, no node
//     cordoned, the workload's pods the same (UIDs, restart counts);
//   - a re-run changes nothing; a cluster.yaml naming another version is
//     refused with its reason.
//
// The cluster is at from afterwards, for TestUpgrade's upgrade.
func upgradeRollback(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, server, root string, mode lifecycleMode, from, to string) {
	t.Helper()
	rollback := filepath.Join(root, "playbooks", "rollback")
	up := filepath.Join(root, "playbooks", "upgrade")

	res := kx.play(ctx, rollback)
	if res.err == nil || !strings.Contains(res.failures(), "no rollback record") {
		t.Fatalf("rollback before any upgrade: err %v, want the no-record refusal;%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused rollback changed %d things:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	t.Logf("refused before any change:%s", res.failures())

	image := busyboxRef(t)
	if out, err := k.run(ctx, polledWeb("kept", image), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the workload: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "-n", "kept", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Fatalf("deployment kept/web: %v\n%s", err, out)
	}

	broken := set.Hosts[len(set.Hosts)-1].Name
	onlyFrom(ctx, t, set, broken, from)

	target := kx
	target.extra = extraVars(append(mode.baseVars(), lifecycleSources(server, to))...)
	writeLifecycleCluster(t, kx.inventory, mode, set, to)
	res = target.play(ctx, up)
	if res.err == nil || !strings.Contains(res.failures(), broken) {
		t.Fatalf("the upgrade with %s's kubelet unable to start: err %v, want a failure on %s;%s", broken, res.err, broken, res.failures())
	}
	t.Logf("PERF upgrade %s -> %s failing on %s (%s): %s%s", from, to, broken, mode.typ, res.wall.Round(time.Millisecond), res.failures())
	versions, _ := k.run(ctx, "", "get", "nodes", "--no-headers", "-o",
		`custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,VERSION:.status.nodeInfo.kubeletVersion,UNSCHEDULABLE:.spec.unschedulable`)
	t.Logf("after the failed upgrade:\n%s", versions)

	before := webPods(ctx, t, k, "kept")

	res = target.play(ctx, rollback, "--check")
	if res.err != nil {
		t.Fatalf("rollback --check failed: %v%s", res.err, res.failures())
	}
	if out, _ := set.SSH(ctx, broken, "/usr/local/bin/kubelet --version"); !strings.Contains(out, to) {
		t.Errorf("rollback --check changed %s's kubelet: %s", broken, out)
	}

	res = target.play(ctx, rollback)
	if res.err != nil {
		t.Fatalf("rollback failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF rollback %s -> %s (%s, %d changes): %s", to, from, mode.typ, len(res.changed()), res.wall.Round(time.Millisecond))
	waitNodesAt(ctx, t, k, set, from)
	if out, err := k.run(ctx, "", "version", "-o", "json"); err != nil || !strings.Contains(out, `"gitVersion": "`+from+`"`) {
		t.Errorf("the API server is not at %s after the rollback: %v\n%s", from, err, out)
	}
	rolledBack(ctx, t, k, "kept", before)
	t.Logf("PERF rollback re-run (nothing to change): %s", rollbackRerun(ctx, t, target, rollback).Round(time.Millisecond))

	other := kx
	other.inventory = filepath.Join(filepath.Dir(kx.inventory), "other-version.yaml")
	writeLifecycleCluster(t, other.inventory, mode, set, "v1.35.4")
	res = other.play(ctx, rollback)
	if res.err == nil || !strings.Contains(res.failures(), "it is not the upgrade this cluster came from") {
		t.Fatalf("rollback with cluster.yaml at v1.35.4: err %v, want the refusal;%s", res.err, res.failures())
	}
	t.Logf("refused before any change:%s", res.failures())

	if out, err := set.SSH(ctx, broken, "rm -f "+onlyFromPath+" && systemctl daemon-reload"); err != nil {
		t.Fatalf("remove the kubelet drop-in on %s: %v\n%s", broken, err, out)
	}
	if out, err := k.run(ctx, "", "delete", "namespace", "kept", "--wait=false"); err != nil {
		t.Errorf("delete namespace kept: %v\n%s", err, out)
	}
	writeLifecycleCluster(t, kx.inventory, mode, set, from)
}

// haRollbackRun is what upgradeHARollback works on: TestUpgradeHA's
// cluster at from (n1-n3 masters and etcd members, n4 and n5 workers,
// haproxy on the workers, avail/web behind its Service), its cluster.yaml
// written at a version by writeAt, and the suite's two pollers (not
// started).
type haRollbackRun struct {
	kx                     kubexm
	k                      kubectlRunner
	set                    *testhosts.Set
	server, root, from, to string
	writeAt                func(version string)
	// sources are the download mirrors for a Kubernetes version (the
	// etcd mirror at the version cluster.yaml names meanwhile).
	sources func(version string) string
	pollers []*upgradePoller
	lbStep  string
}

// upgradeHARollback is issue 53's rollback of a highly available control
// plane, under the API and Service pollers:
//
//   - the upgrade to to fails on the second master, n2 (its new kubelet
//     cannot start: onlyFromUnit), n1 already at to, n2's API server too;
//   - rollback --check changes nothing on n2;
//   - rollback: each master whose API server goes back is out of every
//     haproxy before its restart and back in after /readyz, as in the
//     upgrade; every node Ready at from, every master's API server at from,
//     no node cordoned, every master a ready, checked backend of every
//     haproxy, avail/web's pods the same (UIDs, nodes, restart counts);
//     >= 99.9 % of each poller's requests answered from the failed
//     upgrade's start to the rollback's end, the longest gap a PERF line;
//   - a re-run changes nothing.
//
// The drop-in is removed afterwards: the cluster is at from for the suite's
// upgrade.
func upgradeHARollback(ctx context.Context, t *testing.T, r haRollbackRun) {
	set, k := r.set, r.k
	masters, workers := set.Hosts[:3], set.Hosts[3:]
	rollback := filepath.Join(r.root, "playbooks", "rollback")
	up := filepath.Join(r.root, "playbooks", "upgrade")

	broken := masters[1].Name
	onlyFrom(ctx, t, set, broken, r.from)

	// The masters are tainted: avail/web runs on the workers, which the
	// failed upgrade does not reach and the rollback does not drain.
	before := webPods(ctx, t, k, "avail")
	// Each master's own API server (not the load balancer's choice).
	apiservers := func() map[string]string {
		v := map[string]string{}
		for _, m := range masters {
			out, err := set.SSH(ctx, m.Name, `curl -fsS --max-time 10 --cacert /etc/kubernetes/pki/ca.crt --cert /etc/kubernetes/pki/admin.crt --key /etc/kubernetes/pki/admin.key https://127.0.0.1:6443/version | sed -n 's/^ *"gitVersion": "\(.*\)",$/\1/p'`)
			if err != nil {
				t.Errorf("%s's API server /version: %v\n%s", m.Name, err, out)
			}
			v[m.Name] = strings.TrimSpace(out)
		}
		return v
	}

	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			for _, p := range r.pollers {
				p.stop(ctx, t, set)
			}
		}
	}
	for _, p := range r.pollers {
		p.start(ctx, t, set)
	}
	defer stop()
	pollStart := time.Now()

	target := r.kx
	target.extra = extraVars(append(clusterTestVars(), r.sources(r.to))...)
	r.writeAt(r.to)
	res := target.play(ctx, up)
	if res.err == nil || !strings.Contains(res.failures(), broken) {
		t.Fatalf("the upgrade with %s's kubelet unable to start: err %v, want a failure on %s;%s", broken, res.err, broken, res.failures())
	}
	failed := res
	t.Logf("PERF upgrade %s -> %s failing on the second master %s (binary mode, 3 masters): %s%s", r.from, r.to, broken, res.wall.Round(time.Millisecond), res.failures())
	versions, _ := k.run(ctx, "", "get", "nodes", "--no-headers", "-o",
		`custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,VERSION:.status.nodeInfo.kubeletVersion,UNSCHEDULABLE:.spec.unschedulable`)
	api := apiservers()
	t.Logf("after the failed upgrade (API servers %v):\n%s", api, versions)
	first := masters[0].Name
	if f := strings.Fields(lineOf(versions, first)); api[first] != r.to || len(f) < 3 || f[2] != r.to {
		t.Fatalf("the failed upgrade left the first master %s short of %s (API server %q):\n%s", first, r.to, api[first], versions)
	}

	res = target.play(ctx, rollback, "--check")
	if res.err != nil {
		t.Fatalf("rollback --check failed: %v%s", res.err, res.failures())
	}
	if out, _ := set.SSH(ctx, broken, "/usr/local/bin/kubelet --version"); !strings.Contains(out, r.to) {
		t.Errorf("rollback --check changed %s's kubelet: %s", broken, out)
	}

	rbStart := time.Now()
	res = target.play(ctx, rollback)
	stop()
	if res.err != nil {
		t.Fatalf("rollback failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF rollback %s -> %s (binary mode, 3 masters one at a time, failed on the second; %d changes): %s; by play:%s; slowest tasks:%s",
		r.to, r.from, len(res.changed()), res.wall.Round(time.Millisecond), playWalls(res), res.slowest(8))
	// One report for both runs: the tasks of the failed upgrade, then of
	// the rollback, name what ran during an outage.
	during := runResult{events: append(append([]event(nil), failed.events...), res.events...)}
	reportPolls(t, r.pollers, pollStart, "the failed upgrade and its rollback", during)
	for _, p := range r.pollers {
		st := p.stats(t, pollStart)
		t.Logf("PERF during the rollback alone, %s: longest gap between answers %s", p.label, st.longestGapFrom(rbStart).Round(time.Millisecond))
	}

	// The masters whose API server went back (n1 and n2, at to) stepped
	// out of every haproxy and back in; n3 never left from.
	moved := lbMoves(res, masters, r.lbStep)
	for _, m := range masters {
		got, want := strings.Join(moved[m.Name], ", "), "out of, back into"
		if api[m.Name] == r.from {
			want = ""
		}
		if got != want {
			t.Errorf("master %s in the load balancer during the rollback: %q, want %q (its API server was at %s)", m.Name, got, want, api[m.Name])
		}
	}

	waitNodesAt(ctx, t, k, set, r.from)
	for m, v := range apiservers() {
		if v != r.from {
			t.Errorf("%s's API server runs %q after the rollback, want %s", m, v, r.from)
		}
	}
	checkHAProxyBackends(ctx, t, set, masters, workers)
	rolledBack(ctx, t, k, "avail", before)
	t.Logf("PERF rollback re-run (5 nodes at %s, nothing to change): %s", r.from, rollbackRerun(ctx, t, target, rollback).Round(time.Millisecond))

	if out, err := set.SSH(ctx, broken, "rm -f "+onlyFromPath+" && systemctl daemon-reload"); err != nil {
		t.Fatalf("remove the kubelet drop-in on %s: %v\n%s", broken, err, out)
	}
	r.writeAt(r.from)
}

// lineOf is the line of text that starts with name and a space.
func lineOf(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// onlyFrom puts onlyFromUnit(version) on host, removed when the test ends
// (the test removes it itself before going on).
func onlyFrom(ctx context.Context, t *testing.T, set *testhosts.Set, host, version string) {
	t.Helper()
	if out, err := set.SSH(ctx, host, "mkdir -p "+filepath.Dir(onlyFromPath)+" && cat > "+onlyFromPath+" <<'EOF'\n"+onlyFromUnit(version)+"EOF\nsystemctl daemon-reload"); err != nil {
		t.Fatalf("the kubelet drop-in on %s: %v\n%s", host, err, out)
	}
	t.Cleanup(func() {
		_, _ = set.SSH(context.Background(), host, "rm -f "+onlyFromPath+" && systemctl daemon-reload")
	})
}

// webPods is each pod of ns/web (polledWeb): name, UID, node, restarts.
func webPods(ctx context.Context, t *testing.T, k kubectlRunner, ns string) string {
	t.Helper()
	out, err := k.run(ctx, "", "-n", ns, "get", "pods", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("pods of %s/web: %v\n%s", ns, err, out)
	}
	return strings.TrimSpace(out)
}

// rolledBack checks the cluster after a rollback: no node cordoned, ns/web's
// pods those of before (webPods), its Deployment rolled out, /readyz ok.
func rolledBack(ctx context.Context, t *testing.T, k kubectlRunner, ns, before string) {
	t.Helper()
	if out, err := k.run(ctx, "", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); err != nil || strings.Contains(out, "true") {
		t.Errorf("a node is left cordoned: %v\n%s", err, out)
	}
	if after := webPods(ctx, t, k, ns); after != before {
		t.Errorf("%s/web's pods changed in the failed upgrade and its rollback:\nbefore\n%s\nafter\n%s", ns, before, after)
	} else {
		t.Logf("%s/web's pods kept (name, UID, node, restarts):\n%s", ns, after)
	}
	if out, err := k.run(ctx, "", "-n", ns, "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		t.Errorf("deployment %s/web after the rollback: %v\n%s", ns, err, out)
	}
	if out, err := k.run(ctx, "", "get", "--raw", "/readyz"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("/readyz after the rollback: %v %s", err, out)
	}
}

// rollbackRerun runs the rollback again: it must change nothing. Its wall
// time.
func rollbackRerun(ctx context.Context, t *testing.T, target kubexm, rollback string) time.Duration {
	t.Helper()
	res := target.play(ctx, rollback)
	if res.err != nil {
		t.Fatalf("rollback re-run failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the rollback re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	return res.wall
}
