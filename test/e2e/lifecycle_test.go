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

	"github.com/mensylisir/kubexm/test/testhosts"
)

// lifecycleFromVersion is the version TestUpgrade creates before it
// upgrades to kubernetesVersion.
const lifecycleFromVersion = "v1.36.3"

// TestUpgrade is issue 21's acceptance on one small cluster (n1 master and
// etcd, n2 and n3 workers), in binary mode, then in kubeadm mode (stacked
// etcd) on the same machines once the first cluster is deleted:
//
//   - create-cluster at lifecycleFromVersion;
//   - the upgrade's pre-checks refuse a downgrade and a NotReady node (binary
//     mode; the checks are the same playbook plays in both modes);
//   - the upgrade to kubernetesVersion, SIGKILLed once the first worker is
//     cordoned and resumed, keeps a polled Service answering, leaves every
//     node Ready at the target and none cordoned; a re-run changes nothing.
//
// KUBEXM_E2E_UPGRADE_FROM=v1.35.4 (`make e2e-upgrade-chain`) creates the
// cluster at v1.35.4 instead, checks that the pre-checks refuse the jump
// to kubernetesVersion (two minors), and upgrades one minor at a time
// through v1.36.3, each hop as above.
//
// It needs Kubernetes lifecycleFromVersion built too (test/artifacts, a
// second full build), so CI does not run it: `make e2e-upgrade`. Backup and
// restore (issue 22) run on TestKubernetesCluster's cluster (backupRestore, below).
// PERF lines give the wall time of each step.
func TestUpgrade(t *testing.T) {
	parallelSuite(t)
	path := upgradePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(35*len(path))*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()

	from := path[0]
	releaseRoot := clusterArtifacts(ctx, t, root)
	for _, v := range path[:len(path)-1] {
		lifecycleArtifacts(ctx, t, root, v)
	}
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	for _, v := range path {
		kubeadmArtifacts(ctx, t, root, v)
	}

	set, diag := suiteMachines(ctx, t, 3, "u", "KUBELET=1")
	server := serveDir(t, set.Gateway, releaseRoot)

	for _, mode := range []lifecycleMode{
		{name: "e2e-life", typ: "kubexm", refusals: true},
		{name: "e2e-life-kubeadm", typ: "kubeadm", vars: []string{
			fmt.Sprintf(`{"kubeadm_etcd_image_version": %q}`, kubeadmEtcdImageTag),
			`{"kubeadm_ignore_preflight_errors": ["SystemVerification"]}`}},
	} {
		// KUBEXM_E2E_UPGRADE_ONLY=kubeadm (or kubexm) runs one mode.
		if only := os.Getenv("KUBEXM_E2E_UPGRADE_ONLY"); only != "" && only != mode.typ {
			continue
		}
		dir := filepath.Join(work, mode.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		inventory := filepath.Join(dir, "cluster.yaml")
		writeLifecycleCluster(t, inventory, mode, set, from)
		kx := kubexm{bin: bin, dir: dir, inventory: inventory, observe: diag.observe,
			extra: extraVars(append(mode.baseVars(), lifecycleSources(server, from))...)}
		k := kubectlRunner{bin: kubectl, kubeconfig: filepath.Join(dir, ".kubexm", mode.name, "kubeconfig")}
		diag.cluster(k)

		res := kx.play(ctx, filepath.Join(root, "playbooks", "create-cluster"))
		if res.err != nil {
			t.Fatalf("create-cluster %s (%s) failed after %s: %v%s", from, mode.typ, res.wall, res.err, res.failures())
		}
		t.Logf("PERF create-cluster %s (%s, 1 master + 2 workers): %s", from, mode.typ, res.wall.Round(time.Millisecond))
		waitNodesAt(ctx, t, k, set, from)

		// Issue 53's rollback (binary mode, on the default path): the
		// cluster is at from again afterwards.
		if mode.typ == "kubexm" && len(path) == 2 {
			upgradeRollback(ctx, t, kx, k, set, server, root, mode, from, path[1])
			if t.Failed() {
				return
			}
		}
		if len(path) > 2 {
			skipMinorRefused(ctx, t, kx, set, root, mode, from, path[len(path)-1])
		}
		for i := 1; i < len(path); i++ {
			kx = upgrade(ctx, t, kx, k, set, server, root, mode, path[i-1], path[i])
			if t.Failed() {
				return
			}
		}
		res = kx.play(ctx, filepath.Join(root, "playbooks", "delete"))
		if res.err != nil {
			t.Fatalf("delete (%s) failed: %v%s", mode.typ, res.err, res.failures())
		}
		t.Logf("PERF delete (%s): %s", mode.typ, res.wall.Round(time.Millisecond))
	}

	t.Logf("PERF TestUpgrade wall time: %s", time.Since(suiteStart).Round(time.Second))
}

// backupRestore is issue 22's backup and restore on a running cluster
// (TestKubernetesCluster's in binary mode, TestKubeadmCluster's with
// kubeadm's stacked etcd; mode names it in the PERF lines). It returns the
// archive.
func backupRestore(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, root, work, name, mode string) string {
	t.Helper()
	image, pull := k.busybox(t)
	workload := `apiVersion: v1
kind: Namespace
metadata: {name: keep}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: keep}
data: {colour: blue}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: keep}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: ` + image + `
        imagePullPolicy: ` + pull + `
        command: [/bin/busybox, httpd, -f, -p, "8080", -h, /]
`
	if out, err := k.run(ctx, workload, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the workload to keep: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "-n", "keep", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Fatalf("deployment keep/web: %v\n%s", err, out)
	}

	res := kx.play(ctx, filepath.Join(root, "playbooks", "backup"))
	if res.err != nil {
		t.Fatalf("backup failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF backup (%s): %s", mode, res.wall.Round(time.Millisecond))
	archives, _ := filepath.Glob(filepath.Join(work, ".kubexm", name, "backups", name+"-*.tar.gz"))
	if len(archives) != 1 {
		t.Fatalf("backups: %v, want one archive", archives)
	}
	archive := archives[0]
	if st, err := os.Stat(archive); err == nil {
		t.Logf("backup %s: %d KiB", filepath.Base(archive), st.Size()>>10)
	}

	if out, err := k.run(ctx, "", "delete", "namespace", "keep", "--wait=true", "--timeout=180s"); err != nil {
		t.Fatalf("kubectl delete namespace keep: %v\n%s", err, out)
	}

	// One changed byte: refused before anything changes.
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x01
	bad := filepath.Join(work, "changed.tar.gz")
	sum, err := os.ReadFile(archive + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad+".sha256", sum, 0o600); err != nil {
		t.Fatal(err)
	}
	restore := filepath.Join(root, "playbooks", "restore")
	res = kx.play(ctx, restore, "--backup", bad)
	if res.err == nil || !strings.Contains(res.failures(), "is damaged or was changed") {
		t.Fatalf("restore of a changed archive: err %v, want the checksum refusal;%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused restore changed %d things:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	t.Logf("a backup with one changed byte is refused:%s", res.failures())

	// Another cluster's backup: the same machines under another name.
	other := filepath.Join(work, "other.yaml")
	text, err := os.ReadFile(kx.inventory)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(text), "name: "+name, "name: other", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ko := kx
	ko.inventory = other
	res = ko.play(ctx, restore, "--backup", archive, "--check")
	if res.err == nil || !strings.Contains(res.failures(), `is a backup of cluster "`+name+`", not of "other"`) {
		t.Fatalf("restore into another cluster: err %v, want the cluster refusal;%s", res.err, res.failures())
	}

	// A snapshot of an etcd minor the cluster's etcd cannot read back.
	res = kx.play(ctx, restore, "--backup", archive, "--check", "-e", "etcd_version=v3.5.21")
	if res.err == nil || !strings.Contains(res.failures(), "holds a snapshot of etcd "+strings.TrimPrefix(etcdVersion, "v")+", and this cluster runs etcd v3.5.21") {
		t.Fatalf("restore into an older etcd: err %v, want the etcd refusal;%s", res.err, res.failures())
	}

	res = kx.play(ctx, restore, "--backup", archive)
	if res.err != nil {
		t.Fatalf("restore failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF restore (%s, 1 etcd member, health checks included): %s", mode, res.wall.Round(time.Millisecond))
	out, err := k.run(ctx, "", "-n", "keep", "get", "configmap", "settings", "-o", "jsonpath={.data.colour}")
	if err != nil || out != "blue" {
		t.Errorf("configmap keep/settings after the restore: %q, %v", out, err)
	}
	if out, err := k.run(ctx, "", "-n", "keep", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Errorf("deployment keep/web after the restore: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "wait", "node", "--all", "--for=condition=Ready", "--timeout=300s"); err != nil {
		t.Errorf("nodes after the restore: %v\n%s", err, out)
	}
	return archive
}

// upgradePath is the versions TestUpgrade goes through: lifecycleFromVersion
// to kubernetesVersion, or from KUBEXM_E2E_UPGRADE_FROM one minor at a time.
func upgradePath(t *testing.T) []string {
	t.Helper()
	from := os.Getenv("KUBEXM_E2E_UPGRADE_FROM")
	if from == "" {
		return []string{lifecycleFromVersion, kubernetesVersion}
	}
	var path []string
	for _, m := range supportedMinors {
		if m.version == from || len(path) > 0 {
			path = append(path, m.version)
		}
	}
	if len(path) < 2 || path[len(path)-1] != kubernetesVersion {
		var known []string
		for _, m := range supportedMinors[:len(supportedMinors)-1] {
			known = append(known, m.version)
		}
		t.Fatalf("KUBEXM_E2E_UPGRADE_FROM=%s: want one of %s", from, strings.Join(known, ", "))
	}
	return path
}

// skipMinorRefused: the pre-checks refuse an upgrade that skips a minor.
func skipMinorRefused(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, root string, mode lifecycleMode, from, to string) {
	t.Helper()
	jump := kx
	jump.inventory = filepath.Join(filepath.Dir(kx.inventory), "jump.yaml")
	writeLifecycleCluster(t, jump.inventory, mode, set, to)
	res := jump.play(ctx, filepath.Join(root, "playbooks", "upgrade"), "--tags", "precheck")
	if res.err == nil || !strings.Contains(res.failures(), from+" to "+to+" skips a minor") {
		t.Fatalf("upgrade %s to %s: err %v, want the skipped-minor refusal;%s", from, to, res.err, res.failures())
	}
	t.Logf("refused before any change:%s", res.failures())
}

// upgrade is one hop of TestUpgrade, from to to: refusals checked with the
// pre-checks alone (on the hop from lifecycleFromVersion), then the upgrade
// with a Deployment (3 replicas, a PodDisruptionBudget) behind a ClusterIP
// Service polled every 100 ms from the master, SIGKILLed in the worker phase
// and resumed; then a re-run changes nothing. It returns kubexm set for to.
func upgrade(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, server, root string, mode lifecycleMode, from, to string) kubexm {
	t.Helper()
	up := filepath.Join(root, "playbooks", "upgrade")
	target := kx
	target.extra = extraVars(append(mode.baseVars(), lifecycleSources(server, to))...)
	writeLifecycleCluster(t, kx.inventory, mode, set, to)
	if mode.refusals && from == lifecycleFromVersion {
		upgradeRefusals(ctx, t, kx, target, k, set, up, mode)
	}
	upgradeServing(ctx, t, target, k, set, up, mode, from, to)
	return target
}

// upgradeRefusals: the pre-checks refuse a downgrade and a NotReady node.
func upgradeRefusals(ctx context.Context, t *testing.T, kx, target kubexm, k kubectlRunner, set *testhosts.Set, up string, mode lifecycleMode) {
	t.Helper()
	down := kx
	down.inventory = filepath.Join(filepath.Dir(kx.inventory), "down.yaml")
	writeLifecycleCluster(t, down.inventory, mode, set, "v1.35.4")
	res := down.play(ctx, up, "--tags", "precheck")
	if res.err == nil || !strings.Contains(res.failures(), "downgrade refused: the API server runs "+lifecycleFromVersion) {
		t.Fatalf("upgrade to v1.35.4: err %v, want the downgrade refusal;%s", res.err, res.failures())
	}

	// A NotReady node, refused by the pre-checks.
	worker := set.Hosts[2].Name
	if out, err := set.SSH(ctx, worker, "systemctl stop kubelet"); err != nil {
		t.Fatalf("stop kubelet on %s: %v\n%s", worker, err, out)
	}
	if out, err := k.run(ctx, "", "wait", "node", worker, "--for=condition=Ready=Unknown", "--timeout=180s"); err != nil {
		t.Fatalf("node %s did not become NotReady: %v\n%s", worker, err, out)
	}
	res = target.play(ctx, up, "--tags", "precheck")
	if res.err == nil || !strings.Contains(res.failures(), "node "+worker+" is not Ready") {
		t.Fatalf("upgrade with %s NotReady: err %v, want the NotReady refusal;%s", worker, res.err, res.failures())
	}
	t.Logf("refused before any change:%s", res.failures())
	if out, err := set.SSH(ctx, worker, "systemctl start kubelet"); err != nil {
		t.Fatalf("start kubelet on %s: %v\n%s", worker, err, out)
	}
	if out, err := k.run(ctx, "", "wait", "node", worker, "--for=condition=Ready", "--timeout=180s"); err != nil {
		t.Fatalf("node %s not Ready again: %v\n%s", worker, err, out)
	}
}

// upgradeServing upgrades from from to to while a client on the master
// polls a ClusterIP Service of a 3-replica Deployment with a PDB every
// 100 ms: SIGKILLed once the first worker is cordoned, resumed, then every
// node at the target, none cordoned, >= 99 % of the requests answered, and
// a re-run that changes nothing.
func upgradeServing(ctx context.Context, t *testing.T, target kubexm, k kubectlRunner, set *testhosts.Set, up string, mode lifecycleMode, from, to string) {
	t.Helper()
	image := busyboxRef(t)
	workload := polledWeb("avail", image)
	if out, err := k.run(ctx, workload, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the polled workload: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "-n", "avail", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Fatalf("deployment avail/web: %v\n%s", err, out)
	}
	ip, err := k.run(ctx, "", "-n", "avail", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatalf("service avail/web: %v\n%s", err, ip)
	}
	master := set.Hosts[0].Name
	poll := `nohup sh -c 'while :; do if curl -fsS -o /dev/null -m 1 http://` + ip + `/; then echo ok; else echo fail; fi; sleep 0.1; done' > /root/poll.log 2>&1 &
echo $! > /root/poll.pid`
	if out, err := set.SSH(ctx, master, poll); err != nil {
		t.Fatalf("start the poller on %s: %v\n%s", master, err, out)
	}

	// SIGKILL once the first worker is cordoned; --resume finishes.
	killed := false
	res := target.playUntil(ctx, func(e event) bool {
		if e.Kind == "host_result" && strings.HasPrefix(e.Play, "Workers, in batches") && strings.HasPrefix(e.Task, "upgrade - cordon") && e.Status == "changed" {
			killed = true
			return true
		}
		return false
	}, up)
	if res.err != nil {
		t.Fatalf("upgrade failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	first := res.wall
	if !killed {
		t.Fatalf("the upgrade was not in its worker phase: nothing was cordoned")
	}
	t.Logf("PERF upgrade %s -> %s (%s) up to the SIGKILL in the worker phase: %s", from, to, mode.typ, first.Round(time.Millisecond))
	res = target.play(ctx, up, "--resume")
	if res.err != nil {
		t.Fatalf("upgrade --resume failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF upgrade --resume (%s): %s (total %s)", mode.typ, res.wall.Round(time.Millisecond), (first + res.wall).Round(time.Millisecond))
	// The backup before the upgrade (both modes: kubeadm's stacked etcd too).
	if archives, _ := filepath.Glob(filepath.Join(target.dir, ".kubexm", mode.name, "backups", mode.name+"-*.tar.gz")); len(archives) == 0 {
		t.Errorf("the upgrade (%s) took no backup: no %s-*.tar.gz in the work directory's backups/", mode.typ, mode.name)
	}

	out, err := set.SSH(ctx, master, `kill "$(cat /root/poll.pid)"; ok=$(grep -c '^ok$' /root/poll.log); fail=$(grep -c '^fail$' /root/poll.log); echo "$ok $fail"`)
	if err != nil {
		t.Fatalf("stop the poller: %v\n%s", err, out)
	}
	var ok, fail int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "%d %d", &ok, &fail); err != nil || ok+fail == 0 {
		t.Fatalf("poller counts %q: %v", out, err)
	}
	share := 100 * float64(ok) / float64(ok+fail)
	t.Logf("PERF availability during the upgrade (%s): %d of %d requests to the ClusterIP Service succeeded (%.2f %%)", mode.typ, ok, ok+fail, share)
	if share < 99 {
		t.Errorf("availability %.2f %% < 99 %%", share)
	}

	waitNodesAt(ctx, t, k, set, to)
	if out, err := k.run(ctx, "", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); err != nil || strings.Contains(out, "true") {
		t.Errorf("a node is left cordoned: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "version", "-o", "json"); err != nil || !strings.Contains(out, `"gitVersion": "`+to+`"`) {
		t.Errorf("the API server is not at %s: %v\n%s", to, err, out)
	}

	res = target.play(ctx, up)
	if res.err != nil {
		t.Fatalf("upgrade re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF upgrade re-run (%s, nothing to change): %s", mode.typ, res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}

// lifecycleMode is one cluster of TestUpgrade: its name, kubernetes.type,
// the extra variables it needs, and whether the refusals run on it.
type lifecycleMode struct {
	name, typ string
	vars      []string
	refusals  bool
}

func (m lifecycleMode) baseVars() []string {
	return append(clusterTestVars(), m.vars...)
}

// writeLifecycleCluster writes the suite's cluster.yaml: the cluster
// suite's layout at a version, in the mode's kubernetes.type (kubeadm:
// stacked etcd).
func writeLifecycleCluster(t *testing.T, path string, mode lifecycleMode, set *testhosts.Set, version string) {
	t.Helper()
	text := kubernetesClusterYAML(mode.name, set)
	if mode.typ == "kubeadm" {
		text = kubeadmClusterYAML(mode.name, set, "kubeadm")
	}
	if !strings.Contains(text, "version: "+kubernetesVersion+"\n") {
		t.Fatalf("kubernetesClusterYAML names no version %s:\n%s", kubernetesVersion, text)
	}
	text = strings.Replace(text, "version: "+kubernetesVersion+"\n", "version: "+version+"\n", 1)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lifecycleArtifacts lays out the Kubernetes release of another version
// beside the cluster suite's (test/artifacts/kubernetes-release.sh builds
// it on first use, or waits for a build already running).
func lifecycleArtifacts(ctx context.Context, t *testing.T, root, version string) {
	t.Helper()
	buildArtifact(ctx, t, root, []string{"KUBE_VERSION=" + version, "GOARCH=amd64"}, "kubernetes-release.sh")
}

// lifecycleSources points every download at the file server, Kubernetes at
// version. pause and CoreDNS are the minor's own pins (kubeadmArtifacts
// builds them), so an upgrade also moves them, as a user's does: kubeadm
// refuses to upgrade a CoreDNS newer than the one it pins.
func lifecycleSources(server, version string) string {
	s := artifactSources(server)
	return strings.Replace(s, "/kubernetes/release/"+kubernetesVersion+"/", "/kubernetes/release/"+version+"/", 1)
}

// waitNodesAt waits until every machine is a Ready node whose kubelet runs version.
func waitNodesAt(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, version string) {
	t.Helper()
	var out string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var err error
		out, err = k.run(ctx, "", "get", "nodes", "--no-headers", "-o",
			`custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,VERSION:.status.nodeInfo.kubeletVersion`)
		good := 0
		if err == nil {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) == 3 && f[1] == "True" && f[2] == version {
					good++
				}
			}
		}
		if good == len(set.Hosts) {
			t.Logf("%d nodes Ready at %s", good, version)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("not every node is Ready at %s:\n%s", version, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// polledWeb is the workload an upgrade test polls while nodes are drained:
// in namespace ns, 3 busybox httpd replicas of image spread over the nodes,
// a PodDisruptionBudget keeping 2, a ClusterIP Service, and a preStop pause
// so that a pod serves on while the endpoints drop it.
func polledWeb(ns, image string) string {
	return `apiVersion: v1
kind: Namespace
metadata: {name: ` + ns + `}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ` + ns + `}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 15
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: ` + image + `
        imagePullPolicy: Never
        command: [/bin/busybox, sh, -c, "mkdir -p /www && echo up > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www"]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
        # Serving on while the endpoints drop the pod.
        lifecycle: {preStop: {exec: {command: [/bin/busybox, sleep, "5"]}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: ` + ns + `}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ` + ns + `}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`
}
