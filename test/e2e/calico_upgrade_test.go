//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// calicoPrevious is the calico the upgrade starts from: the minor before
// the default, whose release source test/artifacts/calico.sh builds too.
const calicoPrevious = "v3.31.7"

// calicoVersionVar is the -e that sets calico_version.
func calicoVersionVar(version string) string {
	b, _ := json.Marshal(map[string]string{"calico_version": version})
	return string(b)
}

// withVars is k with more -e arguments for every run.
func (k kubexm) withVars(vars ...string) kubexm {
	k.extra = append(slices.Clone(k.extra), vars...)
	return k
}

// calicoUpgrade is issue 49's upgrade on the kubeadm suite's calico
// cluster, created at v.calicoFrom from v.fromBundle; v.kx and v.bundle
// carry kubexm's default calico (roles/artifacts calico_version):
//
//   - create-cluster with the default is refused before calico's manifests
//     are applied, naming both versions and `kubexm play upgrade`, and
//     calico-node still runs v.calicoFrom;
//   - a web pod on n3 behind a Service, and a client pod on n2 asking the
//     Service for the page every 200 ms (startServicePoller);
//   - `upgrade --check` passes and changes nothing of calico;
//   - `upgrade`: the new images imported on every node, the CRDs, then
//     calico-node node by node, then calico-kube-controllers; afterwards
//     every calico-node and calico-kube-controllers runs the new images and
//     is Ready, every node's calico CNI plugin is the new version, and the
//     client and web pods were not restarted;
//   - the client's longest gap between two answers and its failed share
//     during the upgrade (and 10 s after), as a PERF line; over 5 s fails;
//   - a second upgrade changes nothing.
func calicoUpgrade(ctx context.Context, t *testing.T, root string, set *testhosts.Set, v kubeadmVariant) {
	t.Helper()
	create := filepath.Join(root, "playbooks", "create-cluster")
	upgrade := filepath.Join(root, "playbooks", "upgrade")
	from, target := v.calicoFrom, calicoDefaultVersion(t, root)
	if from == target {
		t.Fatalf("calicoUpgrade: the cluster runs calico %s, kubexm's default", from)
	}
	checkCalicoImages(ctx, t, v.k, from)
	if t.Failed() {
		return
	}

	res := v.kx.play(ctx, create, "--offline-bundle", v.bundle)
	if res.err == nil {
		t.Errorf("create-cluster with calico %s on a cluster running %s passed; want it refused, naming kubexm play upgrade", target, from)
	} else if f := res.failures(); !strings.Contains(f, "the cluster runs calico "+from+" and calico_version is "+target) ||
		!strings.Contains(f, "kubexm play upgrade -i cluster.yaml") {
		t.Errorf("create-cluster's refusal of calico %s -> %s does not name both versions and the upgrade:%s", from, target, f)
	} else {
		t.Logf("PERF create-cluster with calico %s on a cluster running %s: refused after %s:%s", target, from, res.wall.Round(time.Millisecond), f)
	}
	for _, c := range res.changed() {
		if strings.Contains(c, ": calico - ") {
			t.Errorf("the refused create-cluster changed %s", c)
		}
	}
	checkCalicoImages(ctx, t, v.k, from)

	poller := startServicePoller(ctx, t, v.k, set.Hosts[1].Name, set.Hosts[2].Name)

	res = v.kx.play(ctx, upgrade, "--offline-bundle", v.bundle, "--check")
	if res.err != nil {
		t.Fatalf("upgrade --check (calico %s -> %s) failed: %v%s", from, target, res.err, res.failures())
	}
	t.Logf("PERF upgrade --check (kubeadm, calico %s -> %s): %s", from, target, res.wall.Round(time.Millisecond))
	checkCalicoImages(ctx, t, v.k, from)

	start := time.Now()
	res = v.kx.play(ctx, upgrade, "--offline-bundle", v.bundle)
	if res.err != nil {
		t.Fatalf("upgrade (calico %s -> %s) failed after %s: %v%s", from, target, res.wall, res.err, res.failures())
	}
	applied, rolled := taskEnd(res, "calico - kubectl apply calico.yaml"), taskEnd(res, "calico - calico-node runs on every node")
	t.Logf("PERF upgrade (kubeadm, calico %s -> %s, Kubernetes unchanged, offline bundle): %s (%d changed); calico-node rolled out on %d nodes %s after the manifest's apply;%s",
		from, target, res.wall.Round(time.Millisecond), len(res.changed()), len(set.Hosts), rolled.Sub(applied).Round(100*time.Millisecond), res.slowest(6))
	checkCalicoImages(ctx, t, v.k, target)
	if out, err := v.k.run(ctx, "", "-n", "kube-system", "rollout", "status", "daemonset/calico-node", "--timeout=60s"); err != nil {
		t.Errorf("calico-node after the upgrade: %v\n%s", err, out)
	}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, "/opt/cni/bin/calico -v")
		if err != nil || !strings.Contains(out, target) {
			t.Errorf("%s: the calico CNI plugin after the upgrade: %v %q, want %s", h.Name, err, strings.TrimSpace(out), target)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	st := poller.stats(ctx, t, start, time.Now())
	t.Logf("PERF calico %s -> %s: a client pod on %s asked service %s (its pod on %s) every 200 ms during the upgrade and 10 s after: longest gap %s, %d of %d requests failed (%.1f%%)",
		from, target, set.Hosts[1].Name, poller.service, set.Hosts[2].Name, st.longestGap.Round(10*time.Millisecond), st.failed, st.total, 100*float64(st.failed)/float64(max(st.total, 1)))
	if st.total < 20 || st.longestGap > 5*time.Second {
		t.Errorf("during the calico upgrade the client's longest gap was %s (%d of %d requests failed), want a few seconds at most; failed runs: %s",
			st.longestGap, st.failed, st.total, strings.Join(st.outages, ", "))
	}
	poller.stop(ctx, t)

	res = v.kx.play(ctx, upgrade, "--offline-bundle", v.bundle)
	if res.err != nil {
		t.Fatalf("upgrade re-run (calico %s) failed: %v%s", target, res.err, res.failures())
	}
	t.Logf("PERF upgrade re-run (kubeadm, calico %s, nothing to change): %s", target, res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("upgrade re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}

// calicoDefaultVersion is calico_version of roles/artifacts.
func calicoDefaultVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "roles", "artifacts", "defaults", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^calico_version: (v\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("roles/artifacts/defaults/main.yaml sets no calico_version")
	}
	return string(m[1])
}

// checkCalicoImages wants the calico-node DaemonSet and each of its pods,
// and calico-kube-controllers, at calico version.
func checkCalicoImages(ctx context.Context, t *testing.T, k kubectlRunner, version string) {
	t.Helper()
	for _, q := range [][]string{
		{"daemonset/calico-node", "jsonpath={.spec.template.spec.containers[*].image} {.spec.template.spec.initContainers[*].image}"},
		{"deployment/calico-kube-controllers", "jsonpath={.spec.template.spec.containers[*].image}"},
		{"pods", "jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}", "-l", "k8s-app in (calico-node, calico-kube-controllers)"},
	} {
		out, err := k.run(ctx, "", append([]string{"-n", "kube-system", "get", q[0], "-o", q[1]}, q[2:]...)...)
		if err != nil {
			t.Errorf("calico's %s: %v\n%s", q[0], err, out)
			continue
		}
		for _, f := range strings.Fields(out) {
			if !strings.HasSuffix(f, ":"+version) {
				t.Errorf("calico's %s: %s, want calico %s", q[0], f, version)
			}
		}
	}
}

// taskEnd is when the last task_end of a task named name came.
func taskEnd(r runResult, name string) time.Time {
	var at time.Time
	for _, e := range r.events {
		if e.Kind == "task_end" && e.Task == name {
			at = e.Time
		}
	}
	return at
}

// servicePoller is a client pod asking a Service, whose one pod is on
// another node, for its page every 200 ms, one log line per request.
type servicePoller struct {
	k        kubectlRunner
	manifest string
	service  string // the Service's name and address
}

// startServicePoller runs a busybox httpd pod on webNode behind a Service
// and, on clientNode, a pod that fetches the Service's page (by its
// ClusterIP, nc with a 1 s timeout) every 200 ms and prints "ok" or "fail";
// it returns once the client has had an answer.
func startServicePoller(ctx context.Context, t *testing.T, k kubectlRunner, clientNode, webNode string) *servicePoller {
	t.Helper()
	image := busyboxRef(t)
	web := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: calico-up-web, namespace: default, labels: {app: calico-up-web}}
spec:
  nodeName: %[1]s
  containers:
  - name: web
    image: %[2]s
    imagePullPolicy: Never
    command: [/bin/busybox, sh, -c, "mkdir -p /www && echo hello-from-web > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www"]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: calico-up-web, namespace: default}
spec:
  selector: {app: calico-up-web}
  ports: [{port: 80, targetPort: 8080}]
`, webNode, image)
	if out, err := k.run(ctx, web, "apply", "-f", "-"); err != nil {
		t.Fatalf("the upgrade's web pod and Service: %v\n%s", err, out)
	}
	ip, err := k.run(ctx, "", "get", "service", "calico-up-web", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil || ip == "" {
		t.Fatalf("the address of service calico-up-web: %v\n%s", err, ip)
	}
	// The address reaches the script as $TARGET, from the pod's env.
	client := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: calico-up-client, namespace: default}
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %[2]s
    imagePullPolicy: Never
    env: [{name: TARGET, value: %[3]q}]
    command:
    - /bin/busybox
    - sh
    - -c
    - |
      while :; do
        if printf 'GET / HTTP/1.0\r\n\r\n' | /bin/busybox nc -w 1 "$TARGET" 80 | /bin/busybox grep -q hello-from-web; then
          echo ok
        else
          echo fail
        fi
        /bin/busybox sleep 0.2 || /bin/busybox sleep 1
      done
`, clientNode, image, ip)
	if out, err := k.run(ctx, client, "apply", "-f", "-"); err != nil {
		t.Fatalf("the upgrade's client pod: %v\n%s", err, out)
	}
	p := &servicePoller{k: k, manifest: web + "---\n" + client, service: "calico-up-web (" + ip + ")"}
	if out, err := k.run(ctx, "", "wait", "--for=condition=Ready", "pod/calico-up-web", "pod/calico-up-client", "--timeout=180s"); err != nil {
		t.Fatalf("the upgrade's poller pods are not Ready: %v\n%s", err, out)
	}
	if out, err := retry(ctx, time.Minute, func() (string, error) {
		out, err := k.run(ctx, "", "logs", "calico-up-client", "--tail=5")
		if err == nil && !strings.Contains(out, "ok") {
			err = fmt.Errorf("no answer yet")
		}
		return out, err
	}); err != nil {
		t.Fatalf("the client on %s never reached service %s: %v\n%s", clientNode, p.service, err, out)
	}
	return p
}

// pollerStats are the client's requests logged from..to.
type pollerStats struct {
	total, failed int
	longestGap    time.Duration // between two answers, or from..to's ends and an answer
	outages       []string      // each run of failed requests: its start and length
}

// stats reads the client's log with the runtime's timestamps, and wants
// the client and web pods never restarted.
func (p *servicePoller) stats(ctx context.Context, t *testing.T, from, to time.Time) pollerStats {
	t.Helper()
	out, err := p.k.run(ctx, "", "logs", "calico-up-client", "--timestamps")
	if err != nil {
		t.Fatalf("the client's log: %v\n%s", err, tail(out, 20))
	}
	var st pollerStats
	last := from
	var failSince time.Time
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		ts, word, ok := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil || at.Before(from) || at.After(to) {
			continue
		}
		st.total++
		if word != "ok" {
			st.failed++
			if failSince.IsZero() {
				failSince = at
			}
			continue
		}
		if !failSince.IsZero() {
			st.outages = append(st.outages, fmt.Sprintf("%s for %s", failSince.UTC().Format("15:04:05.000"), at.Sub(failSince).Round(10*time.Millisecond)))
			failSince = time.Time{}
		}
		st.longestGap = max(st.longestGap, at.Sub(last))
		last = at
	}
	st.longestGap = max(st.longestGap, to.Sub(last))
	restarts, err := p.k.run(ctx, "", "get", "pod", "calico-up-web", "calico-up-client", "-o", "jsonpath={.items[*].status.containerStatuses[0].restartCount}")
	if err != nil || strings.Fields(restarts) == nil || strings.Trim(restarts, "0 ") != "" {
		t.Errorf("the poller's pods restarted during the calico upgrade: %v %q", err, restarts)
	}
	return st
}

func (p *servicePoller) stop(ctx context.Context, t *testing.T) {
	t.Helper()
	if out, err := p.k.run(ctx, p.manifest, "delete", "-f", "-", "--wait=true", "--grace-period=1"); err != nil {
		t.Errorf("delete the upgrade's poller: %v\n%s", err, out)
	}
}
