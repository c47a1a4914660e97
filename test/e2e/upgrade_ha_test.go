//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// upgradeHAPollPeriod is how often each client of TestUpgradeHA asks.
const upgradeHAPollPeriod = 200 * time.Millisecond

// TestUpgradeHA is issue 53's acceptance for highly available control
// planes, in binary mode with internalLoadbalancer haproxy (the HA suite's
// shape): n1-n3 masters and etcd members, n4 and n5 workers, flannel,
// haproxy from an offline bundle (the machines have no package mirror):
//
//   - create-cluster at lifecycleFromVersion;
//   - under the two pollers below, an upgrade made to fail on the second
//     master (its new kubelet cannot start), then `kubexm play rollback`:
//     every node and API server back at lifecycleFromVersion, the pods
//     kept, a re-run changes nothing (upgradeHARollback; not in the
//     kube-vip and controller variants below);
//   - `kubexm play upgrade` to kubernetesVersion, and etcd from
//     etcdPreviousVersion (the cluster's etcd since the create) to
//     etcdVersion member by member, the leader last, while a client on n4 asks
//     the API through its haproxy (the endpoint) every 200 ms with a token,
//     and a client on n1 asks a ClusterIP Service of a 3-replica Deployment
//     with a PodDisruptionBudget (polledWeb) every 200 ms: each answered
//     >= 99.9 % of its requests, the longest gap between answers a PERF line
//     with the tasks that ran during each outage;
//   - each master was taken out of both workers' haproxy before its API
//     server restarted and put back after /readyz (the upgrade's events),
//     and every master is a ready, checked backend of both afterwards;
//   - every node Ready at kubernetesVersion, none cordoned, the API server
//     at it, every etcd member healthy at etcdVersion; a re-run changes
//     nothing; delete.
//
// The kube-vip, kubeadm and controller variants below keep etcd at
// etcdVersion (kubeadm's stacked etcd at the image the tests build).
//
// It needs Kubernetes lifecycleFromVersion built too (test/artifacts, a
// second full build), so CI does not run it: `make e2e-upgrade-ha`.
//
// With KUBEXM_E2E_UPGRADE_HA_LB=kube-vip (`make e2e-upgrade-ha-kube-vip`,
// issue 51's "upgrade keeps the VIP up") the masters hold lb_address with
// kube-vip instead (kube-vip's image in the bundle, no haproxy): the client
// on n4 asks the API through the VIP, and each master holding the VIP when
// its API server restarts steps down first (roles/loadbalancer
// tasks/backend.yaml parks its static pod) and is a candidate again after;
// afterwards kube-vip runs on every master, one of them holds the VIP and
// no manifest is left parked.
//
// With KUBEXM_E2E_UPGRADE_HA_TYPE=kubeadm (`make e2e-upgrade-ha-kubeadm`,
// issue 53's HA upgrade in the other mode) the cluster is kubernetes.type
// kubeadm with the stacked etcd behind the same haproxy: kubeadm upgrade
// apply on n1, upgrade node on n2 and n3, each master out of every haproxy
// around it, under the same pollers; no failed upgrade first, and
// afterwards kubexm play rollback is refused (kubeadm mode has none).
//
// With KUBEXM_E2E_UPGRADE_HA_BY=controller (`make
// e2e-upgrade-ha-controller`, issue 52's "version bump through the Cluster
// resource") the upgrade is not `kubexm play upgrade`: kubexm controller
// runs on the control machine bare, as the in-cluster pod does (no program
// beside kubexm), with an empty work directory of its own and
// the target's offline bundle, the Cluster at the new version is applied
// as a GitOps tool would, and the controller's upgrade run (its journal in
// its work directory) must converge the resource: observed, Ready, every
// node at the target, the last run an upgrade that succeeded; the pollers
// run throughout.
func TestUpgradeHA(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()

	from, to := lifecycleFromVersion, kubernetesVersion
	releaseRoot := clusterArtifacts(ctx, t, root)
	lifecycleArtifacts(ctx, t, root, from)
	for _, v := range []string{from, to} {
		kubeadmArtifacts(ctx, t, root, v)
	}
	kubeVIP := os.Getenv("KUBEXM_E2E_UPGRADE_HA_LB") == "kube-vip"
	nginx := os.Getenv("KUBEXM_E2E_UPGRADE_HA_LB") == "nginx"
	if lb := os.Getenv("KUBEXM_E2E_UPGRADE_HA_LB"); lb != "" && !kubeVIP && !nginx {
		t.Fatalf("KUBEXM_E2E_UPGRADE_HA_LB=%q: want kube-vip, nginx (with KUBEXM_E2E_UPGRADE_HA_TYPE=kubeadm) or nothing (haproxy)", lb)
	}
	kubeadmMode := os.Getenv("KUBEXM_E2E_UPGRADE_HA_TYPE") == "kubeadm"
	if typ := os.Getenv("KUBEXM_E2E_UPGRADE_HA_TYPE"); typ != "" && !kubeadmMode {
		t.Fatalf("KUBEXM_E2E_UPGRADE_HA_TYPE=%q: want kubeadm or nothing (binary mode)", typ)
	}
	if nginx && !kubeadmMode {
		t.Fatalf("KUBEXM_E2E_UPGRADE_HA_LB=nginx is the kubeadm variant: add KUBEXM_E2E_UPGRADE_HA_TYPE=kubeadm")
	}
	mode := "binary mode"
	if kubeadmMode {
		mode = "kubeadm, stacked etcd"
	}
	byController := os.Getenv("KUBEXM_E2E_UPGRADE_HA_BY") == "controller"
	if by := os.Getenv("KUBEXM_E2E_UPGRADE_HA_BY"); by != "" && !byController {
		t.Fatalf("KUBEXM_E2E_UPGRADE_HA_BY=%q: want controller or nothing (kubexm play upgrade)", by)
	}
	// The rollback variant (binary mode, haproxy, the CLI) creates etcd at
	// the previous minor: the failed upgrade and its rollback leave it
	// there, and the upgrade moves it member by member under the pollers
	// with Kubernetes (issue 53's etcd v3.6 -> v3.7 on 3 members).
	etcdFrom := etcdVersion
	if !kubeVIP && !byController && !kubeadmMode {
		etcdFrom = etcdPreviousVersion
		if r := etcdRelease(ctx, t, root, etcdFrom); r != releaseRoot {
			t.Fatalf("etcd %s's release is laid out under %s, the cluster's artifacts under %s: want one root", etcdFrom, r, releaseRoot)
		}
	}
	etcdAt := etcdFrom
	lbName := "internal haproxy"
	if nginx {
		lbName = "internal nginx"
	}
	if kubeVIP {
		lbName = "kube-vip"
		kubeVIPArtifacts(ctx, t, root)
	}
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	const machines = 5
	set, diag := suiteMachines(ctx, t, machines, "g", "KUBELET=1")
	if len(set.Hosts) != machines {
		t.Fatalf("want %d machines, have %d", machines, len(set.Hosts))
	}
	masters, workers := set.Hosts[:3], set.Hosts[3:]
	server := serveDir(t, set.Gateway, releaseRoot)
	vip := set.Gateway[:strings.LastIndex(set.Gateway, ".")] + ".250"

	const name = "e2e-upha"
	inventory := filepath.Join(work, "cluster.yaml")
	writeHAAt := func(version string) {
		t.Helper()
		text := haClusterYAML(name, set)
		if kubeadmMode {
			text = kubeadmHAClusterYAML(name, set, map[bool]string{true: "nginx", false: "haproxy"}[nginx], "")
		}
		if kubeVIP {
			text = withKubeVIP(text, vip)
		}
		at := strings.Replace(text, "version: "+kubernetesVersion+"\n", "version: "+version+"\n", 1)
		if version != kubernetesVersion && at == text {
			t.Fatalf("haClusterYAML names no version %s:\n%s", kubernetesVersion, text)
		}
		if etcdAt != etcdVersion {
			const etcdKubexm = "  etcd:\n    type: kubexm\n"
			if !strings.Contains(at, etcdKubexm) {
				t.Fatalf("haClusterYAML has no etcd of type kubexm:\n%s", at)
			}
			at = strings.Replace(at, etcdKubexm, etcdKubexm+"    version: "+etcdAt+"\n", 1)
		}
		if err := os.WriteFile(inventory, []byte(at), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeHAAt(from)
	// The download mirrors for a Kubernetes version, etcd's at etcdAt.
	sources := func(version string) string {
		s := lifecycleSources(server, version)
		mirror := "/etcd-io/etcd/releases/download/" + etcdVersion + `"`
		if !strings.Contains(s, mirror) {
			t.Fatalf("the download sources name no etcd mirror %s: %s", mirror, s)
		}
		return strings.Replace(s, mirror, "/etcd-io/etcd/releases/download/"+etcdAt+`"`, 1)
	}
	suiteVars := clusterTestVars()
	if kubeadmMode {
		// The etcd image the tests build, for both versions: the upgrade
		// leaves the stacked etcd at it (systemd-nspawn machines: no
		// kernel configuration for kubeadm's SystemVerification).
		suiteVars = append(suiteVars, fmt.Sprintf(`{"kubeadm_etcd_image_version": %q}`, kubeadmEtcdImageTag),
			`{"kubeadm_ignore_preflight_errors": ["SystemVerification"]}`)
	}
	kx := kubexm{bin: bin, dir: work, inventory: inventory, observe: diag.observe,
		extra: extraVars(append(suiteVars, sources(from))...)}
	k := kubectlRunner{bin: kubectl, kubeconfig: filepath.Join(work, ".kubexm", name, "kubeconfig")}
	diag.cluster(k)

	// haproxy (or kube-vip's image) comes from the bundle; the rest of it
	// is the v1.36 release.
	bundle := exportBundle(ctx, t, kx, server, " ("+mode+", "+lbName+", Kubernetes "+from+")")

	create := filepath.Join(root, "playbooks", "create-cluster")
	res := kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster %s failed after %s: %v%s", from, res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster %s (%s, 3 masters, 2 workers, %s, flannel, offline bundle): %s (%d changed)",
		from, mode, lbName, res.wall.Round(time.Millisecond), len(res.changed()))
	waitNodesAt(ctx, t, k, set, from)
	var etcdEndpoints []string
	for _, m := range masters {
		etcdEndpoints = append(etcdEndpoints, "https://"+net.JoinHostPort(m.Address, "2379"))
	}
	if etcdFrom != etcdVersion {
		if v := etcdVersions(ctx, t, set, masters[0].Name, etcdEndpoints); !allAt(v, etcdFrom, len(masters)) {
			t.Fatalf("after the create the etcd members run %v, want %s on each", v, etcdFrom)
		}
	}
	checkLB := func() {
		t.Helper()
		if nginx {
			// No master left marked down (kubeadm's upgrade, lb_backend_cut).
			for _, w := range workers {
				if out, err := set.SSH(ctx, w.Name, "grep -c ' down;' /etc/kubexm/nginx/nginx.conf || true"); err != nil || strings.TrimSpace(out) != "0" {
					t.Errorf("%s: nginx.conf marks a master down: %v\n%s", w.Name, err, out)
				}
			}
			return
		}
		if !kubeVIP {
			checkHAProxyBackends(ctx, t, set, masters, workers)
			return
		}
		t.Logf("the VIP %s is on %s", vip, kubeVIPHolder(ctx, t, set, masters, vip).Name)
		for _, m := range masters {
			if out, err := set.SSH(ctx, m.Name, "ls /etc/kubernetes/kube-vip.parked.yaml 2>&1 || true"); err != nil || !strings.Contains(out, "No such file") {
				t.Errorf("%s: a parked kube-vip manifest is left: %v\n%s", m.Name, err, out)
			}
		}
	}
	checkLB()

	// The workload behind the Service, and a token for the API client.
	if out, err := k.run(ctx, polledWeb("avail", busyboxRef(t)), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the polled workload: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "-n", "avail", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Fatalf("deployment avail/web: %v\n%s", err, out)
	}
	ip, err := k.run(ctx, "", "-n", "avail", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatalf("service avail/web: %v\n%s", err, ip)
	}
	token, err := k.run(ctx, "", "create", "token", "default", "-n", "default", "--duration=3h")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, token)
	}

	// Up to an hour of requests each; both stop once the upgrade (or the
	// failed upgrade and its rollback) is done.
	const most = int(time.Hour / upgradeHAPollPeriod)
	newPollers := func() []*upgradePoller {
		return []*upgradePoller{
			{label: "API through " + workers[0].Name + "'s " + lbName + " (" + haEndpoint + "/api, a token)", host: workers[0].Name,
				script: endpointPollScript("/api", strings.TrimSpace(token), most, upgradeHAPollPeriod, 5*time.Second)},
			{label: "ClusterIP Service avail/web from " + masters[0].Name, host: masters[0].Name,
				script: servicePollScript(strings.TrimSpace(ip), "avail/web", most, upgradeHAPollPeriod, 5*time.Second)},
		}
	}
	lbStep := " every haproxy"
	if nginx {
		lbStep = " every nginx"
	}
	if kubeVIP {
		lbStep = " kube-vip's election"
	}

	// Issue 53's rollback of an HA upgrade, proven with haproxy and the
	// CLI: the kube-vip and controller variants go straight to the upgrade.
	switch {
	case kubeVIP:
		t.Logf("KUBEXM_E2E_UPGRADE_HA_LB=kube-vip: no failed upgrade and rollback here (make e2e-upgrade-ha has them)")
	case byController:
		t.Logf("KUBEXM_E2E_UPGRADE_HA_BY=controller: no failed upgrade and rollback here (make e2e-upgrade-ha has them)")
	case kubeadmMode:
		t.Logf("KUBEXM_E2E_UPGRADE_HA_TYPE=kubeadm: no failed upgrade and rollback here (kubeadm mode has no rollback: refused after the upgrade)")
	default:
		upgradeHARollback(ctx, t, haRollbackRun{kx: kx, k: k, set: set, server: server, root: root, from: from, to: to,
			writeAt: writeHAAt, sources: sources, pollers: newPollers(), lbStep: lbStep})
	}

	pollers := newPollers()
	for _, p := range pollers {
		p.start(ctx, t, set)
	}
	pollStart := time.Now()
	timeline, err := recordTimeline(ctx, k.kubeconfig, "avail", "web")
	if err != nil {
		t.Fatal(err)
	}

	etcdAt = etcdVersion
	writeHAAt(to)
	target := kx
	target.extra = extraVars(append(suiteVars, sources(to))...)
	up := filepath.Join(root, "playbooks", "upgrade")
	if byController {
		res = upgradeByController(ctx, t, k, target, set, server, name, to)
	} else {
		res = target.play(ctx, up)
	}
	for _, p := range pollers {
		p.stop(ctx, t, set)
	}
	timeline.stop()
	if res.err != nil {
		t.Fatalf("upgrade %s -> %s failed after %s: %v%s", from, to, res.wall, res.err, res.failures())
	}
	// The controller's run is read from its journal, which has no plays
	// nor task timings: no breakdown for it.
	breakdown := "; by play:" + playWalls(res) + "; slowest tasks:" + res.slowest(12)
	if byController {
		breakdown = ""
	}
	etcdMove := ""
	if etcdFrom != etcdVersion {
		etcdMove = ", etcd " + etcdFrom + " -> " + etcdVersion + " member by member"
	}
	t.Logf("PERF upgrade %s -> %s (%s, 3 masters one at a time, 2 workers in batches of 1, %s%s%s): %s (%d changed)%s",
		from, to, mode, lbName, etcdMove, map[bool]string{true: ", by kubexm controller through the Cluster resource"}[byController],
		res.wall.Round(time.Millisecond), len(res.changed()), breakdown)
	reportPolls(t, pollers, pollStart, "the upgrade", res)
	// A worker's kubelet held on a master's hanging API server shows here
	// first (kubeadm's etcd restart before lb_backend_cut).
	t.Logf("nodes not Ready during the upgrade, as the API said every second:\n    %s", strings.Join(timeline.of("nodes not Ready"), "\n    "))
	if outages := pollers[1].stats(t, pollStart).outages; len(outages) > 0 {
		out, err := set.SSH(ctx, masters[0].Name, "cat /tmp/kubexm-poll-diag")
		t.Logf("kube-proxy on %s where the Service's outages began and ended: %v\n%s", masters[0].Name, err, out)
	}
	for _, o := range pollers[1].stats(t, pollStart).outages {
		t.Logf("the cluster around the Service's outage from %s (its endpoints, the kube-controller-manager Lease, nodes not Ready):\n    %s",
			o.from.UTC().Format("15:04:05.000"), strings.Join(timeline.around(o.from, o.to, 20*time.Second), "\n    "))
	}
	if kubeadmMode {
		// kubeadm upgrade apply rolls kube-proxy's DaemonSet, one node at
		// a time: when each pod started and was Ready, to line up with a
		// Service poller's outage, and the Service's pods.
		out, err := k.run(ctx, "", "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy", "--no-headers", "-o",
			`custom-columns=NODE:.spec.nodeName,STARTED:.status.startTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,RESTARTS:.status.containerStatuses[0].restartCount`)
		t.Logf("kube-proxy's pods after the upgrade (node, started, Ready since, restarts): %v\n%s", err, out)
		out, err = k.run(ctx, "", "-n", "avail", "get", "pods", "--no-headers", "-o",
			`custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime`)
		t.Logf("the Service's pods after the upgrade (name, node, Ready since): %v\n%s", err, out)
	}

	// Each master out of the load balancer before its restart, back after:
	// every haproxy; with kube-vip the masters that held the VIP then.
	moved := lbMoves(res, masters, lbStep)
	steppedDown := 0
	for _, m := range masters {
		got := strings.Join(moved[m.Name], ", ")
		if kubeVIP && got == "" {
			continue // not the VIP's holder when its API server restarted
		}
		steppedDown++
		if got != "out of, back into" {
			t.Errorf("master %s in the load balancer during the upgrade: %q, want \"out of, back into\" (once each, in that order)", m.Name, got)
		}
	}
	if kubeVIP {
		t.Logf("PERF masters that stepped down as the VIP's holder before their API server restarted: %d", steppedDown)
		if steppedDown == 0 {
			t.Errorf("no master stepped down as kube-vip's VIP holder during the upgrade, yet one of them held it at its restart")
		}
	}
	checkLB()

	waitNodesAt(ctx, t, k, set, to)
	if etcdFrom != etcdVersion {
		if v := etcdVersions(ctx, t, set, masters[0].Name, etcdEndpoints); !allAt(v, etcdVersion, len(masters)) {
			t.Errorf("after the upgrade the etcd members run %v, want %s on each", v, etcdVersion)
		} else {
			t.Logf("every etcd member runs %s after the upgrade (was %s)", etcdVersion, etcdFrom)
		}
		checkMasterEtcd(ctx, t, set, etcdctl, masters, masters[0])
	}
	if out, err := k.run(ctx, "", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); err != nil || strings.Contains(out, "true") {
		t.Errorf("a node is left cordoned: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "version", "-o", "json"); err != nil || !strings.Contains(out, `"gitVersion": "`+to+`"`) {
		t.Errorf("the API server is not at %s: %v\n%s", to, err, out)
	}
	if out, err := k.run(ctx, "", "-n", "avail", "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		t.Errorf("deployment avail/web after the upgrade: %v\n%s", err, out)
	}

	res = target.play(ctx, up)
	if res.err != nil {
		t.Fatalf("upgrade re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF upgrade re-run (5 nodes at %s, nothing to change): %s", to, res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	if kubeadmMode {
		// No rollback in kubeadm mode: refused before any task, naming
		// the field and what to do instead.
		res = target.play(ctx, filepath.Join(root, "playbooks", "rollback"))
		if res.err == nil || !strings.Contains(res.stderr, "spec.kubernetes.type") {
			t.Errorf("kubexm play rollback in kubeadm mode: %v, want a refusal naming spec.kubernetes.type:\n%s", res.err, tail(res.stderr, 20))
		} else if c := res.changed(); len(c) > 0 {
			t.Errorf("the refused rollback changed %d things", len(c))
		}
	}

	res = target.play(ctx, filepath.Join(root, "playbooks", "delete"))
	if res.err != nil {
		t.Fatalf("delete failed: %v%s", res.err, res.failures())
	}
	for _, m := range masters {
		if out, err := set.SSH(ctx, m.Name, "ip -o addr show; ls /etc/kubernetes/kube-vip.parked.yaml 2>&1 || true"); err != nil ||
			(kubeVIP && strings.Contains(out, " "+vip+"/")) || !strings.Contains(out, "No such file") {
			t.Errorf("%s after the delete: the VIP or a parked kube-vip manifest is left: %v\n%s", m.Name, err, out)
		}
	}
	t.Logf("PERF delete: %s; by play:%s; slowest tasks:%s", res.wall.Round(time.Millisecond), playWalls(res), res.slowest(5))
	t.Logf("PERF TestUpgradeHA wall time: %s", time.Since(suiteStart).Round(time.Second))
}

// reportPolls: each poller's requests since start, a PERF line with the
// longest gap between answers and each outage with the tasks of res that
// ran during it; an error below 99.9 % answered.
func reportPolls(t *testing.T, pollers []*upgradePoller, start time.Time, during string, res runResult) {
	t.Helper()
	for _, p := range pollers {
		st := p.stats(t, start)
		share := 100 * float64(st.total-st.failed) / float64(st.total)
		t.Logf("PERF during %s, %s every %s: %d requests, %d failed (%.2f %% answered), longest gap between answers %s",
			during, p.label, upgradeHAPollPeriod, st.total, st.failed, share, st.longestGap.Round(time.Millisecond))
		for _, o := range st.outages {
			t.Logf("  outage %s; tasks meanwhile:\n    %s", o, strings.Join(res.during(o.from, o.to), "\n    "))
		}
		if share < 99.9 {
			t.Errorf("%s answered %.2f %% of the requests during %s, want >= 99.9 %%", p.label, share, during)
		}
	}
}

// lbMoves is what a run did with each master in the load balancer
// (lbStep: " every haproxy" or " kube-vip's election"): "out of" and "back
// into", in order, one entry per step (its events come per worker or host).
func lbMoves(res runResult, masters []testhosts.Host, lbStep string) map[string][]string {
	moved := map[string][]string{}
	for _, e := range res.events {
		if e.Kind != "host_result" || e.Status != "changed" || !strings.HasPrefix(e.Task, "Load balancer - ") {
			continue
		}
		for _, m := range masters {
			for _, way := range []string{"out of", "back into"} {
				if strings.HasPrefix(e.Task, "Load balancer - "+m.Name+" "+way+lbStep) &&
					(len(moved[m.Name]) == 0 || moved[m.Name][len(moved[m.Name])-1] != way) {
					moved[m.Name] = append(moved[m.Name], way)
				}
			}
		}
	}
	return moved
}

// upgradePoller is a client on a machine (endpointPollScript or
// servicePollScript: they stop at /tmp/kubexm-stop-poll, one per host).
type upgradePoller struct {
	label, host, script string
	done                chan sshResult
	out                 string
}

func (p *upgradePoller) start(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	if out, err := set.SSH(ctx, p.host, "rm -f /tmp/kubexm-stop-poll"); err != nil {
		t.Fatalf("%s: %v\n%s", p.host, err, out)
	}
	p.done = make(chan sshResult, 1)
	go func() {
		out, err := set.SSH(ctx, p.host, p.script)
		p.done <- sshResult{out, err}
	}()
}

func (p *upgradePoller) stop(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	if out, err := set.SSH(ctx, p.host, "touch /tmp/kubexm-stop-poll"); err != nil {
		t.Errorf("stopping the poller on %s: %v\n%s", p.host, err, out)
	}
	r := <-p.done
	if r.err != nil {
		t.Fatalf("the poller on %s (%s): %v\n%s", p.host, p.label, r.err, tail(r.out, 20))
	}
	p.out = r.out
}

func (p *upgradePoller) stats(t *testing.T, start time.Time) pollStats {
	t.Helper()
	st, err := parsePoll(p.out, start)
	if err != nil {
		t.Fatalf("%s: %v", p.label, err)
	}
	return st
}

// checkHAProxyBackends: every master is a ready backend with its health
// checks on (not drained, not in maintenance: what the upgrade leaves) in
// every worker's haproxy, asked through its admin socket.
func checkHAProxyBackends(ctx context.Context, t *testing.T, set *testhosts.Set, masters, workers []testhosts.Host) {
	t.Helper()
	for _, w := range workers {
		out, err := set.SSH(ctx, w.Name, `curl -fsS --max-time 10 --unix-socket /run/kubexm-haproxy.sock 'http://localhost/;csv' | awk -F, '$1 == "kube-apiserver" && $2 != "BACKEND" { print $2, $18, ($37 == "" ? "unchecked" : $37) }'`)
		if err != nil {
			t.Errorf("haproxy's backends on %s: %v\n%s", w.Name, err, out)
			continue
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) >= 3 {
				got[f[0]] = f[1] + " " + strings.TrimPrefix(f[2], "* ")
			}
		}
		for _, m := range masters {
			if s := got[m.Name]; !strings.HasPrefix(s, "UP ") || strings.HasSuffix(s, "unchecked") {
				t.Errorf("haproxy on %s: master %s is %q, want UP and checked:\n%s", w.Name, m.Name, s, out)
			}
		}
	}
}

// playWalls is each play's wall time in a run (from its first event to its
// last), in the order the plays ran.
func playWalls(r runResult) string {
	type span struct{ first, last time.Time }
	spans := map[string]*span{}
	var order []string
	for _, e := range r.events {
		if e.Play == "" || e.Time.IsZero() {
			continue
		}
		s, ok := spans[e.Play]
		if !ok {
			s = &span{first: e.Time}
			spans[e.Play] = s
			order = append(order, e.Play)
		}
		s.last = e.Time
	}
	sort.SliceStable(order, func(i, j int) bool { return spans[order[i]].first.Before(spans[order[j]].first) })
	var b strings.Builder
	for _, p := range order {
		fmt.Fprintf(&b, "\n    %8s  %s", spans[p].last.Sub(spans[p].first).Round(100*time.Millisecond), p)
	}
	return b.String()
}

// upgradeByController upgrades the cluster to version through its Cluster
// resource: kubexm controller on the control machine as the in-cluster
// pod runs it (bare: no program beside kubexm; a work directory of its own,
// empty as the pod's emptyDir is; an offline bundle of the target exported
// by kx, which names the target's sources), kx.inventory
// (already at version) applied as the resource, and the controller left
// to converge it. The result is the controller's upgrade run, read from
// its journal, with the events the CLI's run would have printed.
func upgradeByController(ctx context.Context, t *testing.T, k kubectlRunner, kx kubexm, set *testhosts.Set, server, name, version string) runResult {
	t.Helper()
	bundle := exportBundleAs(ctx, t, kx, server, " (the upgrade's target, "+version+")", "bundle-target.tar.gz")
	ctlRoot := filepath.Join(kx.dir, "controller-work")
	ctl := startController(ctx, t, k, kx, set, k.kubeconfig, ctlRoot, name, bundle, true)
	defer ctl.stop()
	ctl.waitFor(ctx, t, "the applied spec recorded", 3*time.Minute, func(_ clusterStatus, raw string) bool {
		return strings.Contains(raw, "kubexm.mensylisir.io/applied-spec")
	})
	view, err := exec.CommandContext(ctx, kx.bin, "config", "view", "--resource", "-f", kx.inventory).Output()
	if err != nil {
		t.Fatalf("kubexm config view --resource: %v", err)
	}
	begin := time.Now()
	if out, err := k.run(ctx, string(view), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the Cluster at %s: %v\n%s", version, err, out)
	}
	c, raw := ctl.waitFor(ctx, t, "the upgrade through the Cluster", 30*time.Minute, func(c clusterStatus, _ string) bool {
		st := c.Status
		return st.LastRun != nil && st.LastRun.Playbook == "upgrade" && st.LastRun.Result == "Succeeded" && st.Phase == "Ready" &&
			st.ObservedGeneration == c.Metadata.Generation && st.KubernetesVersion == version
	})
	for _, n := range c.Status.Nodes {
		if n.KubernetesVersion != version || !n.Ready {
			t.Errorf("the Cluster's status after the upgrade: node %s at %q, Ready %v, want %s and Ready:\n%s", n.Name, n.KubernetesVersion, n.Ready, version, raw)
		}
	}
	t.Logf("PERF operator mode: the Cluster applied at %s to the resource converged (observed, Ready, every node at it): %s", version, time.Since(begin).Round(time.Millisecond))
	runs, err := journal.Runs(filepath.Join(ctlRoot, name))
	if err != nil {
		t.Fatalf("the controller's runs: %v", err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r.Playbook == "upgrade" && r.Outcome == "ok" && !r.Start.Before(begin) {
			return journalRunResult(t, filepath.Join(ctlRoot, name), r)
		}
	}
	t.Fatalf("no upgrade run that succeeded in the controller's journal (%s) since the apply", filepath.Join(ctlRoot, name))
	return runResult{}
}

// journalRunResult is the run r of workDir as a runResult: its wall time
// and, from its journal, a host_result event per result (task, host,
// status, time; a journal has no plays nor task timings).
func journalRunResult(t *testing.T, workDir string, r journal.RunInfo) runResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(workDir, "runs", r.ID, journal.File))
	if err != nil {
		t.Fatalf("the controller's run %s: %v", r.ID, err)
	}
	_, recs := parseJournal(data)
	res := runResult{wall: r.End.Sub(r.Start)}
	for _, rec := range recs.results {
		at, _ := time.Parse(time.RFC3339Nano, rec.Time)
		res.events = append(res.events, event{Time: at, Kind: "host_result", Task: rec.Task, Host: rec.Host, Status: string(rec.Status)})
	}
	return res
}
