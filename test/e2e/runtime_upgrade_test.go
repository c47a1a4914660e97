//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// The runtime releases TestNodes' cluster is created at before `kubexm play
// upgrade` takes it to the suite's defaults (containerd) or to a newer
// docker (issues 53 and 54). Both are built by test/artifacts beside the
// defaults. cri-dockerd exists at one version only (../shared/sources), so
// its upgrade path is reviewed and template-tested, not run.
const (
	containerdPreviousVersion = "2.3.7"
	dockerUpgradeVersion      = "29.10.0"
)

// runtimeUpgrade is the container runtime's version a TestNodes cluster is
// created at and the one the upgrade takes it to.
type runtimeUpgrade struct{ from, to string }

func nodesRuntimeUpgrade(runtime string) runtimeUpgrade {
	if runtime == "docker" {
		return runtimeUpgrade{from: dockerVersion, to: dockerUpgradeVersion}
	}
	return runtimeUpgrade{from: containerdPreviousVersion, to: containerdVersion}
}

// runtimeUpgradeArtifacts builds (or finds cached) the release beside the
// suite's defaults: containerd 2.3.7, or docker's static release 29.10.0
// (the CLI of that version; dockerd of the newest moby module the proxy
// serves, as for 29.9.3).
func runtimeUpgradeArtifacts(ctx context.Context, t *testing.T, root, runtime string) {
	t.Helper()
	if runtime == "docker" {
		buildArtifact(ctx, t, root, []string{"DOCKER_VERSION=" + dockerUpgradeVersion, "GOARCH=amd64"}, "docker.sh")
		return
	}
	buildArtifact(ctx, t, root, []string{"CONTAINERD_VERSION=" + containerdPreviousVersion, "GOARCH=amd64"}, "containerd.sh")
}

// runtimeAtSources are kubexm artifact export's flags for the runtime at
// version from the file server at server: docker's and cri-dockerd's
// mirrors (docker's directory holds every version), or containerd's
// release directory of version (artifactSources names the default's).
func runtimeAtSources(server, runtime, version string) []string {
	if runtime == "docker" {
		return []string{"-e", dockerSources(server)}
	}
	return []string{"-e", `{"containerd_mirrors": ["` + server + `/containerd/containerd/releases/download/v` + version + `"]}`}
}

// nodeRuntimes maps each node to "<binary version> <the Node's
// containerRuntimeVersion>": containerd --version's, or docker --version's
// (the CLI, whose version names docker's static release).
func nodeRuntimes(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, runtime string, nodes []string) map[string]string {
	t.Helper()
	cmd := "/usr/local/bin/containerd --version"
	if runtime == "docker" {
		cmd = "/usr/local/bin/docker --version"
	}
	semver := regexp.MustCompile(`[0-9]+\.[0-9]+\.[0-9]+[-.0-9A-Za-z]*`)
	got := map[string]string{}
	for _, n := range nodes {
		out, err := set.SSH(ctx, n, cmd)
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", n, cmd, err, out)
		}
		// containerd's package path holds no x.y.z; its version comes first.
		v := semver.FindString(out)
		rt, err := k.run(ctx, "", "get", "node", n, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}")
		if err != nil {
			t.Fatalf("node %s: %v\n%s", n, err, rt)
		}
		got[n] = v + " " + rt
	}
	return got
}

// wantRuntimes wants every node at version: the binary's, and for
// containerd the kubelet's report of it (docker's dockerd is built from
// the moby module and reports that module's version, so only its scheme).
func wantRuntimes(t *testing.T, got map[string]string, runtime, version string) {
	t.Helper()
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(version) + ` containerd://v?` + regexp.QuoteMeta(version) + `$`)
	if runtime == "docker" {
		want = regexp.MustCompile(`^` + regexp.QuoteMeta(version) + ` docker://\S+$`)
	}
	for n, v := range got {
		if !want.MatchString(v) {
			t.Errorf("node %s: %s version and the Node's containerRuntimeVersion %q, want %s", n, runtime, v, version)
		}
	}
}

// servicePollScript asks the ClusterIP Service svc ("namespace/name") at
// ip port 80 every period, n times or until /tmp/kubexm-stop-poll exists
// once pollMinRequests were made, and prints "<unix ms> <HTTP status>" per
// request (parsePoll reads it). A request without an answer reads
// "000:<curl's exit code>:<why>:reject=<r>:sep=<s>": why is the kernel's
// word for a fresh connect (curl 7 is both a refusal and no route), r the
// host's iptables REJECT rules for svc (kube-proxy's "has no endpoints"),
// s its endpoint chains, so that an outage says whose it was. Where an
// outage begins and ends, kube-proxy's log lines of the last minute go to
// /tmp/kubexm-poll-diag.
func servicePollScript(ip, svc string, n int, period, maxTime time.Duration) string {
	return fmt.Sprintf(`set -u
ip=%s svc=%s
rm -f /tmp/kubexm-poll-diag
start=$(date +%%s%%N)
for i in $(seq 0 %d); do
  [ -e /tmp/kubexm-stop-poll ] && [ "$i" -ge %d ] && break
  next=$((start + i * %d))
  now=$(date +%%s%%N)
  [ "$now" -lt "$next" ] && sleep "$(awk -v ns=$((next - now)) 'BEGIN{printf "%%.3f", ns / 1e9}')"
  rc=0
  code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time %s "http://$ip/") || rc=$?
  if [ "$rc" != 0 ]; then
    code="$code:$rc"
    why=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/80"' _ "$ip" 2>&1 | sed -n 's/.*connect: //p' | head -n 1 | tr -c 'A-Za-z0-9\n' -)
    rules=$(iptables-save 2>/dev/null | grep -F -- "$svc" || true)
    code="$code:${why:-connected}:reject=$(printf '%%s\n' "$rules" | grep -c -- '-j REJECT'):sep=$(printf '%%s\n' "$rules" | grep -c -- '-j KUBE-SEP-')"
  fi
  if [ "$rc" != "${lastrc:-0}" ] && command -v crictl >/dev/null; then
    { echo "== $(date -u +%%T.%%3N) rc $rc: kube-proxy's last lines"; crictl logs --since 60s --tail 20 "$(crictl ps -q --name kube-proxy | head -n 1)" 2>&1; } >> /tmp/kubexm-poll-diag
  fi
  lastrc=$rc
  echo "$(date +%%s%%3N) $code"
done
rm -f /tmp/kubexm-stop-poll`, shellQuote(ip), shellQuote(svc), n-1, pollMinRequests, period.Nanoseconds(), strconv.FormatFloat(maxTime.Seconds(), 'f', -1, 64))
}

// runtimeNotReadyBound is the longest a node may be NotReady during the
// runtime upgrade: its runtime's restart (seconds) and the kubelet's next
// status report after it (10 s apart), with room for a loaded machine.
const runtimeNotReadyBound = 60 * time.Second

// upgradeRuntime is TestNodes' container runtime upgrade (issues 53 and
// 54): the cluster was created at rt.from; cluster.yaml (kx.inventory) now
// names rt.to and bundle carries it. A Deployment of 3 replicas with a
// PodDisruptionBudget behind a ClusterIP Service is polled every 200 ms
// from poller while `kubexm play upgrade` (Kubernetes' version unchanged)
// drains each node, installs the new runtime and restarts it, and uncordons
// it Ready. Then every node runs rt.to (the binary and the kubelet's
// report), each was drained once, none NotReady longer than
// runtimeNotReadyBound, the Service answered >= 99 % of the requests, none
// is cordoned; a re-run changes nothing, and asking for rt.from again (a
// downgrade) is refused by the pre-checks.
func upgradeRuntime(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, up, runtime, bundle, poller string, rt runtimeUpgrade, nodes []string) {
	t.Helper()
	wantRuntimes(t, nodeRuntimes(ctx, t, k, set, runtime, nodes), runtime, rt.from)
	if t.Failed() {
		t.FailNow()
	}
	workload := polledWeb("rtup", busyboxRef(t))
	if out, err := k.run(ctx, workload, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the polled workload: %v\n%s", err, out)
	}
	defer func() {
		if out, err := k.run(ctx, "", "delete", "namespace", "rtup", "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("kubectl delete namespace rtup: %v\n%s", err, out)
		}
	}()
	if out, err := k.run(ctx, "", "-n", "rtup", "rollout", "status", "deployment/web", "--timeout=300s"); err != nil {
		t.Fatalf("deployment rtup/web: %v\n%s", err, out)
	}
	ip, err := k.run(ctx, "", "-n", "rtup", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatalf("service rtup/web: %v\n%s", err, ip)
	}
	podsBefore, err := k.run(ctx, "", "get", "pods", "-A", "--field-selector=status.phase=Running", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\"\\n\"}{end}")
	if err != nil {
		t.Fatalf("pods before the upgrade: %v\n%s", err, podsBefore)
	}

	timeline, err := recordTimeline(ctx, k.kubeconfig, "rtup", "web")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := set.SSH(ctx, poller, "rm -f /tmp/kubexm-stop-poll"); err != nil {
		t.Fatalf("%s: %v\n%s", poller, err, out)
	}
	pollDone := make(chan sshResult, 1)
	pollStart := time.Now()
	go func() {
		out, err := set.SSH(ctx, poller, servicePollScript(ip, "rtup/web", 9000, readyzPollPeriod, 2*time.Second))
		pollDone <- sshResult{out, err}
	}()
	res := kx.play(ctx, up, "--offline-bundle", bundle)
	timeline.stop()
	notReady := timeline.longestNotReady()
	if out, err := set.SSH(ctx, poller, "touch /tmp/kubexm-stop-poll"); err != nil {
		t.Errorf("stopping the poller: %v\n%s", err, out)
	}
	pr := <-pollDone
	if res.err != nil {
		t.Fatalf("upgrade of the container runtime (%s %s -> %s) failed after %s: %v%s", runtime, rt.from, rt.to, res.wall, res.err, res.failures())
	}
	if pr.err != nil {
		t.Fatalf("the Service poller on %s: %v\n%s", poller, pr.err, tail(pr.out, 20))
	}
	stats, err := parsePoll(pr.out, pollStart)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PERF upgrade of the container runtime, Kubernetes unchanged (%s %s -> %s, %d nodes one at a time: drain, install, restart, Ready, uncordon): %s (%d changed); slowest: %s",
		runtime, rt.from, rt.to, len(nodes), res.wall.Round(time.Millisecond), len(res.changed()), res.slowest(5))
	t.Logf("what the runtime upgrade changed:\n  %s", strings.Join(res.changed(), "\n  "))
	share := 100 * float64(stats.total-stats.failed) / float64(stats.total)
	t.Logf("PERF a client on %s polled a ClusterIP Service (3 replicas, PodDisruptionBudget minAvailable 2) every %s during the runtime upgrade: %d requests, %d failed (%.2f %% answered), longest gap between answers %s",
		poller, readyzPollPeriod, stats.total, stats.failed, share, stats.longestGap.Round(time.Millisecond))
	if share < 99 {
		t.Errorf("the Service answered %.2f %% of the requests during the runtime upgrade, want >= 99 %%; outages: %v", share, stats.outages)
		for _, o := range stats.outages {
			t.Logf("what the cluster said around the outage at %s:\n  %s", o.from.UTC().Format("15:04:05.000"), strings.Join(timeline.around(o.from, o.to, 5*time.Second), "\n  "))
		}
	}
	read := false
	for _, e := range timeline.of("nodes not Ready") {
		read = read || !strings.Contains(e, "(unread")
	}
	if !read {
		t.Errorf("the API never answered the timeline's reads of the nodes during the runtime upgrade: their NotReady runs are unknown\n  %s", strings.Join(timeline.of("nodes not Ready"), "\n  "))
	}
	var nr []string
	for _, n := range nodes {
		nr = append(nr, fmt.Sprintf("%s %s", n, notReady[n].Round(time.Second)))
		if notReady[n] > runtimeNotReadyBound {
			t.Errorf("node %s was NotReady for %s during the runtime upgrade, want under %s (its runtime's restart)", n, notReady[n].Round(time.Second), runtimeNotReadyBound)
		}
	}
	sort.Strings(nr)
	t.Logf("PERF longest NotReady per node during the runtime upgrade (the API read about every second): %s", strings.Join(nr, ", "))

	wantRuntimes(t, nodeRuntimes(ctx, t, k, set, runtime, nodes), runtime, rt.to)
	// Each node drained once (cordoned by kubexm, its pods evicted).
	cordoned := map[string]int{}
	for _, e := range res.events {
		if e.Kind == "host_result" && strings.HasPrefix(e.Task, "upgrade - cordon") && e.Status == "changed" {
			cordoned[e.Host]++
		}
	}
	for _, n := range nodes {
		if cordoned[n] != 1 {
			t.Errorf("node %s was cordoned %d times by the runtime upgrade, want once: %v", n, cordoned[n], cordoned)
		}
	}
	if out, err := k.run(ctx, "", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable}{\"\\n\"}{end}"); err != nil || strings.Contains(out, "true") {
		t.Errorf("a node is left cordoned: %v\n%s", err, out)
	}
	podsAfter, err := k.run(ctx, "", "get", "pods", "-A", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\"\\n\"}{end}")
	if err != nil {
		t.Fatalf("pods after the upgrade: %v\n%s", err, podsAfter)
	}
	evicted := 0
	for _, uid := range strings.Fields(podsBefore) {
		if !strings.Contains(podsAfter, uid) {
			evicted++
		}
	}
	t.Logf("%d of the %d pods running before the runtime upgrade were evicted and replaced", evicted, len(strings.Fields(podsBefore)))
	if evicted == 0 {
		t.Errorf("no pod was evicted: the nodes were not drained")
	}
	if out, err := k.run(ctx, "", "-n", "rtup", "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		t.Errorf("deployment rtup/web after the runtime upgrade: %v\n%s", err, out)
	}

	res = kx.play(ctx, up, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("runtime upgrade re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF upgrade re-run, every runtime at %s %s (nothing to change): %s", runtime, rt.to, res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	// Back to rt.from: refused before anything changes.
	text, err := os.ReadFile(kx.inventory)
	if err != nil {
		t.Fatal(err)
	}
	down := kx
	down.inventory = filepath.Join(filepath.Dir(kx.inventory), "runtime-down.yaml")
	downText := strings.Replace(string(text), runtimeYAMLAt(runtime, rt.to), runtimeYAMLAt(runtime, rt.from), 1)
	if downText == string(text) {
		t.Fatalf("cluster.yaml names no %s", runtimeYAMLAt(runtime, rt.to))
	}
	if err := os.WriteFile(down.inventory, []byte(downText), 0o600); err != nil {
		t.Fatal(err)
	}
	res = down.play(ctx, up, "--tags", "precheck")
	if want := fmt.Sprintf("downgrade refused: node %s runs %s %s, cluster.yaml asks for %s", nodes[0], runtime, rt.to, rt.from); res.err == nil || !strings.Contains(res.failures(), want) {
		t.Errorf("upgrade back to %s %s: err %v, want %q;%s", runtime, rt.from, res.err, want, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused downgrade changed %d things:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}
