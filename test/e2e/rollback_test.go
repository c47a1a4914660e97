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
	if out, err := set.SSH(ctx, broken, "mkdir -p "+filepath.Dir(onlyFromPath)+" && cat > "+onlyFromPath+" <<'EOF'\n"+onlyFromUnit(from)+"EOF\nsystemctl daemon-reload"); err != nil {
		t.Fatalf("the kubelet drop-in on %s: %v\n%s", broken, err, out)
	}
	t.Cleanup(func() {
		_, _ = set.SSH(context.Background(), broken, "rm -f "+onlyFromPath+" && systemctl daemon-reload")
	})

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

	pods := func() string {
		out, err := k.run(ctx, "", "-n", "kept", "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)
		if err != nil {
			t.Fatalf("pods of kept/web: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	before := pods()

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
	if out, err := k.run(ctx, "", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); err != nil || strings.Contains(out, "true") {
		t.Errorf("a node is left cordoned: %v\n%s", err, out)
	}
	if after := pods(); after != before {
		t.Errorf("the workload's pods changed in the rollback:\nbefore\n%s\nafter\n%s", before, after)
	} else {
		t.Logf("the workload's pods kept (name, UID, node, restarts):\n%s", after)
	}
	if out, err := k.run(ctx, "", "-n", "kept", "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		t.Errorf("deployment kept/web after the rollback: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "get", "--raw", "/readyz"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("/readyz after the rollback: %v %s", err, out)
	}

	res = target.play(ctx, rollback)
	if res.err != nil {
		t.Fatalf("rollback re-run failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the rollback re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	t.Logf("PERF rollback re-run (nothing to change): %s", res.wall.Round(time.Millisecond))

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
