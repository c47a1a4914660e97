//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// haRegistry is the HA suite's registry mode (KUBEXM_E2E_HA_REGISTRY=1,
// make e2e-ha-registry): registry.type registry on the second worker, from
// which every node pulls every image the cluster runs, the test pods' too.
type haRegistry struct {
	host testhosts.Host
	// name is privateRegistry: the host's address and port.
	name string
	// image is the test pods' busybox as the registry names it.
	image string
	// overlay holds rotate-ca's hooks: after each phase, the push's trust
	// and every node verify the registry, and a pod of its image starts
	// on every node (registryPhaseHook).
	overlay string
	// unit is the registry's systemd service on host.
	unit string
	// external, for a registry kubexm did not deploy, is the registry the
	// test runs (withExternalRegistry) and pwFile the file cluster.yaml's
	// auths read its account's password from.
	external *testRegistry
	pwFile   string
}

// withDeployedRegistry adds roleGroups.registry (host, a worker) and
// registry.type registry with an account whose password is in a file of
// work to a suite's cluster.yaml: the HA suite's (its last worker) or the
// kubeadm suite's (KUBEXM_E2E_KUBEADM_REGISTRY=1, its first worker).
func withDeployedRegistry(t *testing.T, clusterYAML string, host testhosts.Host, work string) (string, haRegistry) {
	t.Helper()
	reg := haRegistry{host: host, name: host.Address + ":5443", overlay: filepath.Join(work, "registry-hooks"), unit: "kubexm-registry.service"}
	reg.image = reg.name + "/library/busybox:1.35.0"
	pwFile := filepath.Join(work, "registry-password")
	if err := os.WriteFile(pwFile, []byte("e2e-HA-Registry-5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := regexp.MustCompile(`(?m)^    worker: \[.*\]\n`).ReplaceAllStringFunc(clusterYAML, func(line string) string {
		return line + "    registry: [" + host.Name + "]\n"
	})
	if y == clusterYAML {
		t.Fatal("the cluster.yaml has no worker group to add the registry after")
	}
	y = strings.TrimRight(y, "\n") + fmt.Sprintf(`
  registry:
    type: registry
    privateRegistry: %q
    auths:
      %q: {username: puller, passwordFile: %q}
`, reg.name, reg.name, pwFile)
	dir := filepath.Join(reg.overlay, "hooks", "rotate-ca")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, phase := range []string{"trust", "reissue", "retire"} {
		if err := os.WriteFile(filepath.Join(dir, "after-"+phase+".yaml"), []byte(registryPhaseHook(phase, reg.image)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return y, reg
}

// withExternalRegistry is the HA suite with a registry kubexm did not
// deploy (KUBEXM_E2E_HA_REGISTRY=external, make e2e-ha-registry-external):
// the test runs the CNCF distribution registry on the last worker
// (startRegistryOn: its own CA, htpasswd) with a robot-style account whose
// name holds $ (Harbor's robot$<name>) and a password with $ and a quote,
// and cluster.yaml names it registry.type external with a project path
// (Harbor's host:port/project) in privateRegistry and, under the host,
// certsPath and the account with its password in a file of work.
func withExternalRegistry(ctx context.Context, t *testing.T, clusterYAML string, set *testhosts.Set, root, work string) (string, haRegistry) {
	t.Helper()
	host := set.Hosts[len(set.Hosts)-1]
	dir := filepath.Join(work, "external-registry")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ext := startRegistryOn(ctx, t, set, host, root, dir, "robot$kubexm", "e2e-$Robot'50")
	reg := haRegistry{host: host, name: ext.host + "/kubexm", unit: "e2e-registry.service", external: &ext, pwFile: filepath.Join(work, "registry-password")}
	reg.image = reg.name + "/library/busybox:1.35.0"
	reg.setPassword(t, ext.passwd)
	y := strings.TrimRight(clusterYAML, "\n") + fmt.Sprintf(`
  registry:
    type: external
    privateRegistry: %q
    auths:
      %q: {username: %q, passwordFile: %q, certsPath: %q}
`, reg.name, ext.host, ext.user, reg.pwFile, ext.caDir)
	return y, reg
}

// haRegistryName names the cluster's registry in PERF lines.
func haRegistryName(reg *haRegistry) string {
	switch {
	case reg == nil:
		return ""
	case reg.external != nil:
		return ", every image pulled from an existing registry on " + reg.host.Name
	default:
		return ", every image pulled from the registry kubexm deployed on " + reg.host.Name
	}
}

// setPassword writes the password cluster.yaml's auths read.
func (r haRegistry) setPassword(t *testing.T, pw string) {
	t.Helper()
	if err := os.WriteFile(r.pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fillExternalRegistry is the external registry's part before the create: a
// wrong password is refused by the push and by create-cluster's preflight
// before any host changes; with the right one `kubexm artifact images push
// --offline-bundle` fills the empty registry (PERF: MiB/s) and a second
// push sends nothing.
func fillExternalRegistry(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, reg haRegistry, create, bundle string) {
	t.Helper()
	reg.setPassword(t, "not-the-password-9")
	if out, err := registryPush(ctx, kx, bundle); err == nil || !strings.Contains(out, "registry "+reg.external.host) || !strings.Contains(out, "username or password is wrong") {
		t.Errorf("push with a wrong password: %v\n%s", err, tail(out, 20))
	}
	res := kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err == nil || !strings.Contains(res.failures(), "username or password is wrong") {
		t.Errorf("create-cluster with a wrong registry password: %v%s", res.err, res.failures())
	}
	for _, c := range res.changed() {
		if !strings.HasPrefix(c, "localhost: ") {
			t.Errorf("create-cluster refused at preflight changed a host: %s", c)
		}
	}
	reg.setPassword(t, reg.external.passwd)

	re := regexp.MustCompile(`(?m)^([0-9]+) images in ` + regexp.QuoteMeta(reg.name) + `: ([0-9.]+) MiB sent, ([0-9.]+) MiB already there, in (.+)$`)
	for _, round := range []string{"into the empty registry", "again (nothing to send)"} {
		load := loadAverage()
		regCPU := serviceCPU(ctx, set, reg.host.Name, reg.unit)
		start := time.Now()
		out, cpu, err := registryPushCPU(ctx, kx, bundle)
		wall := time.Since(start)
		if after := serviceCPU(ctx, set, reg.host.Name, reg.unit); regCPU >= 0 && after >= 0 {
			regCPU = after - regCPU
		} else {
			regCPU = -1
		}
		m := re.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("kubexm artifact images push %s: %v\n%s", round, err, tail(out, 30))
		}
		sent, _ := strconv.ParseFloat(m[2], 64)
		if round != "into the empty registry" && sent != 0 {
			t.Errorf("the second push sent %s MiB, want 0", m[2])
		}
		if round == "into the empty registry" && sent == 0 {
			t.Errorf("the first push into the empty registry sent nothing:\n%s", tail(out, 30))
		}
		t.Logf("PERF kubexm artifact images push --offline-bundle %s on %s (%s images, TLS, htpasswd, link rate %s, load average %s): %s MiB sent, %s MiB already there, "+
			"in %s (the push's own clock %s): %.1f MiB/s; CPU: kubexm %s, the registry %s", round, reg.name, m[1], linkRate(), load, m[2], m[3], wall.Round(time.Millisecond), m[4], sent/wall.Seconds(),
			cpu.Round(10*time.Millisecond), regCPU)
	}
}

// externalRegistryKept: after delete the registry the test runs (not
// kubexm's to remove) still runs and serves every image of the bundle.
func externalRegistryKept(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, reg haRegistry, bundle string) {
	t.Helper()
	if out, err := set.SSH(ctx, reg.host.Name, "systemctl is-active "+reg.unit); err != nil || strings.TrimSpace(out) != "active" {
		t.Errorf("%s: %s after the delete: %v\n%s", reg.host.Name, reg.unit, err, out)
	}
	if out, err := registryPush(ctx, kx, bundle); err != nil || !regexp.MustCompile(`(?m)^[0-9]+ images in `+regexp.QuoteMeta(reg.name)+`: 0\.0 MiB sent`).MatchString(out) {
		t.Errorf("kubexm artifact images push after the delete: %v\n%s", err, tail(out, 20))
	}
}

// linkRate is the test machines' link rate (test/hosts/up.sh's LINK_RATE),
// or "unlimited" (veth pairs on one bridge).
func linkRate() string {
	if r := os.Getenv("KUBEXM_TEST_LINK_RATE"); r != "" {
		return r
	}
	if r := os.Getenv("LINK_RATE"); r != "" {
		return r
	}
	return "unlimited"
}

// registryPhaseHook is a hook after a phase of rotate-ca (either mode): the
// work directory's trust bundle (what `kubexm artifact images push` trusts)
// verifies the registry and finds the image; every node pulls it through
// the CRI plugin (a pull asks the registry even when the node has it); a
// pod of it with imagePullPolicy Always runs to completion on every node.
func registryPhaseHook(phase, image string) string {
	return fmt.Sprintf(`# A suite's registry mode (test/e2e/ha_registry_test.go): after
# rotate-ca's %[1]s phase the registry kubexm deployed verifies everywhere.
- name: e2e - the registry after the %[1]s phase
  hosts: k8s_cluster
  tasks:
    - name: e2e - the push's trust bundle verifies the registry after %[1]s
      registry_check:
        registry: "{{ .spec.registry.privateRegistry }}"
        auths: "{{ .registry_auths }}"
        ca_file: "{{ .registry_ca_dir }}/ca-bundle.crt"
        images: [%[2]q]
      run_once: true

    - name: e2e - every node pulls from the registry after %[1]s
      command:
        argv: [/usr/local/bin/crictl, pull, %[2]q]
      changed_when: false

    - name: e2e - a pod of the registry's image on every node after %[1]s
      shell:
        cmd: |
          set -eu
          cache=$(mktemp -d)
          trap 'rm -rf "$cache"' EXIT
          k() { /usr/local/bin/kubectl --kubeconfig="$KUBECONFIG_FILE" --cache-dir="$cache" "$@"; }
          for n in $NODES; do
            printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: registry-%%s-%%s, namespace: default, labels: {e2e: registry-%%s}}\nspec:\n  nodeName: %%s\n  restartPolicy: Never\n  containers:\n  - {name: c, image: "%%s", imagePullPolicy: Always, command: [/bin/busybox, "true"]}\n' \
              "$PHASE" "$n" "$PHASE" "$n" "$IMAGE" | k apply -f -
          done
          for n in $NODES; do
            if ! k wait --for=jsonpath='{.status.phase}'=Succeeded "pod/registry-$PHASE-$n" -n default --timeout=240s; then
              k describe pod "registry-$PHASE-$n" -n default | tail -20
              exit 1
            fi
          done
          k delete pod -n default -l "e2e=registry-$PHASE" --wait=true
      environment:
        NODES: '{{ .groups.k8s_cluster | join " " }}'
        PHASE: %[1]s
        IMAGE: %[2]q
        KUBECONFIG_FILE: "{{ .kubernetes_admin_kubeconfig }}"
      changed_when: false
      run_once: true
      delegate_to: "{{ index .groups.master 0 }}"
`, phase, image)
}

// checkPulledFromRegistry: the registry runs on its host; no node got an
// image tarball, every image in a node's CRI namespace has the registry's
// name and was pulled (its content carries containerd's distribution
// source label, which an import does not set); every node pulled the
// pause and flannel images, some node CoreDNS's; `kubexm artifact images
// push` with the bundle finds every image there (0 bytes sent), trusting
// the work directory's bundle of the cluster CA.
func checkPulledFromRegistry(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, reg haRegistry, bundle string) {
	t.Helper()
	if out, err := set.SSH(ctx, reg.host.Name, "systemctl is-active "+reg.unit); err != nil || strings.TrimSpace(out) != "active" {
		t.Fatalf("%s: %s: %v\n%s", reg.host.Name, reg.unit, err, out)
	}
	seen := map[string]bool{}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, fmt.Sprintf(`set -eu
reg=%s
[ ! -e /var/lib/kubexm/images ] || echo "tarballs: $(ls -A /var/lib/kubexm/images | tr '\n' ' ')"
content=$(ctr -n k8s.io content ls)
ctr -n k8s.io images ls | awk 'NR > 1 && $1 !~ /^sha256:/ {print $1, $3}' | while read -r ref digest; do
  case $ref in
  "$reg"/*) ;;
  *) echo "not the registry's: $ref"; continue ;;
  esac
  if printf '%%s\n' "$content" | awk -v d="$digest" '$1 == d' | grep -q 'containerd.io/distribution.source\.'; then
    echo "pulled: $ref"
  else
    echo "not pulled: $ref"
  fi
done`, shellQuote(reg.name)))
		if err != nil {
			t.Fatalf("%s: the images in containerd: %v\n%s", h.Name, err, out)
		}
		var pulled []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			ref, ok := strings.CutPrefix(line, "pulled: ")
			if !ok {
				t.Errorf("%s: %s", h.Name, line)
				continue
			}
			pulled = append(pulled, ref)
			seen[regexp.MustCompile(`:[^:/]+$`).ReplaceAllString(strings.TrimPrefix(ref, reg.name+"/"), "")] = true
		}
		for _, want := range []string{"/pause:", "flannel"} {
			if !strings.Contains(strings.Join(pulled, " "), want) {
				t.Errorf("%s did not pull an image %q from %s; it has %v", h.Name, want, reg.name, pulled)
			}
		}
	}
	if !seen["coredns/coredns"] {
		t.Errorf("no node pulled CoreDNS from %s; the nodes pulled %v", reg.name, seen)
	}
	t.Logf("the nodes pulled from %s (none side-loaded): %v", reg.name, seen)

	start := time.Now()
	out, err := registryPush(ctx, kx, bundle)
	if err != nil || !regexp.MustCompile(`(?m)^[0-9]+ images in `+regexp.QuoteMeta(reg.name)+`: 0\.0 MiB sent`).MatchString(out) {
		t.Errorf("kubexm artifact images push after the create: %v\n%s", err, tail(out, 20))
	}
	t.Logf("PERF kubexm artifact images push --offline-bundle to the registry create-cluster filled (nothing to send): %s", time.Since(start).Round(time.Millisecond))
}

// registryPush runs `kubexm artifact images push` of the bundle's images
// to the cluster's registry, in the cluster's work directory.
func registryPush(ctx context.Context, kx kubexm, bundle string) (string, error) {
	out, _, err := registryPushCPU(ctx, kx, bundle)
	return out, err
}

// registryPushCPU is registryPush that also says how much CPU (user and
// system) the push took.
func registryPushCPU(ctx context.Context, kx kubexm, bundle string) (string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", kx.inventory, "--offline-bundle", bundle)
	cmd.Dir = kx.dir
	out, err := cmd.CombinedOutput()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return string(out), cpu, err
}

// serviceCPU is the CPU time (user and system) the main process of a
// systemd unit on host has used, from /proc/<pid>/stat in clock ticks of
// 10 ms; -1 when it cannot be read.
func serviceCPU(ctx context.Context, set *testhosts.Set, host, unit string) time.Duration {
	out, err := set.SSH(ctx, host, "pid=$(systemctl show -p MainPID --value "+shellQuote(unit)+") && awk '{print $14 + $15}' /proc/$pid/stat")
	if err != nil {
		return -1
	}
	ticks, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return -1
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// checkRegistryAfterRotation is caRotation's part for the registry: each
// phase's hook ran on every node, every node trusts the new cluster CA
// alone for the registry (newCA), the registry serves a certificate that
// chains to the new CAs and not to the old ones, and the push still
// verifies the registry (0 bytes sent).
func checkRegistryAfterRotation(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, reg *haRegistry, bundle string, res runResult,
	chainsToNew func(string, *x509.Certificate), onlyNew func(string, []byte, *x509.Certificate), newCA *x509.Certificate) {
	t.Helper()
	for _, phase := range []string{"trust", "reissue", "retire"} {
		if n := succeeded(res, "e2e - every node pulls from the registry after "+phase); n != len(set.Hosts) {
			t.Errorf("after rotate-ca's %s phase %d of %d nodes pulled from the registry", phase, n, len(set.Hosts))
		}
		if n := succeeded(res, "e2e - a pod of the registry's image on every node after "+phase); n == 0 {
			t.Errorf("after rotate-ca's %s phase no pod of the registry's image ran", phase)
		}
	}
	for _, h := range set.Hosts {
		path := "/etc/containerd/certs.d/" + reg.name + "/ca.crt"
		out, err := set.SSH(ctx, h.Name, "cat "+shellQuote(path))
		if err != nil {
			t.Fatalf("read %s on %s: %v", path, h.Name, err)
		}
		onlyNew(h.Name+" "+path, []byte(out), newCA)
	}
	if c := servedCert(t, reg.name); c != nil {
		chainsToNew(reg.name+" serves a certificate that", c)
	}
	start := time.Now()
	out, err := registryPush(ctx, kx, bundle)
	if err != nil || !regexp.MustCompile(`(?m)^[0-9]+ images in `+regexp.QuoteMeta(reg.name)+`: 0\.0 MiB sent`).MatchString(out) {
		t.Errorf("kubexm artifact images push after the rotation: %v\n%s", err, tail(out, 20))
	}
	t.Logf("PERF kubexm artifact images push after the rotation (nothing to send, the registry verified with the new CA): %s", time.Since(start).Round(time.Millisecond))
}

// succeeded counts the hosts on which a task of the run succeeded.
func succeeded(r runResult, task string) int {
	n := 0
	for _, e := range r.events {
		if e.Kind == "host_result" && e.Task == task && (e.Status == "ok" || e.Status == "changed") {
			n++
		}
	}
	return n
}

// registryOutage is one way the registry goes away while a Deployment
// scales: the service is stopped before the scale and started down later,
// or restarted (systemctl restart) the moment the scale is asked for.
type registryOutage struct {
	name     string
	replicas int
	down     time.Duration // 0: systemctl restart
}

// registryRestartWhileScaling: a Deployment of the registry's busybox with
// imagePullPolicy Always (every pod start asks the registry, though the
// nodes have the image), spread over every node, scales up while
// kubexm-registry.service on the registry host is stopped and started again,
// then again while it restarts; kubelet's pulls fail meanwhile
// (ErrImagePull) and its retries must start every pod. Each pod's time from
// its creation to its container's start and the ErrImagePull events are
// PERF lines.
func registryRestartWhileScaling(ctx context.Context, t *testing.T, set *testhosts.Set, k kubectlRunner, reg haRegistry) {
	t.Helper()
	const name = "registry-scale"
	deploy := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      tolerations: [{operator: Exists}]
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: %[1]s}}}
      containers:
      - name: main
        image: %[2]s
        imagePullPolicy: Always
        command: [/bin/busybox, sleep, "3600"]
`, name, reg.image)
	if out, err := k.run(ctx, deploy, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the Deployment %s: %v\n%s", name, err, out)
	}
	defer func() {
		if out, err := k.run(ctx, "", "delete", "deployment/"+name, "-n", "default", "--wait=true"); err != nil {
			t.Errorf("kubectl delete the Deployment %s: %v\n%s", name, err, out)
		}
		if out, err := k.run(ctx, "", "wait", "--for=delete", "pod", "-l", "app="+name, "-n", "default", "--timeout=120s"); err != nil {
			t.Errorf("the pods of %s are not gone: %v\n%s", name, err, out)
		}
	}()
	unit := "kubexm-registry.service"
	systemctl := func(verb string) {
		t.Helper()
		if out, err := set.SSH(ctx, reg.host.Name, "systemctl "+verb+" "+unit); err != nil {
			t.Fatalf("%s: systemctl %s %s: %v\n%s", reg.host.Name, verb, unit, err, out)
		}
	}
	seen := map[string]bool{}
	for _, o := range []registryOutage{
		{name: "stopped 10 s across the scale", replicas: 2 * len(set.Hosts), down: 10 * time.Second},
		{name: "restarted at the scale", replicas: 4 * len(set.Hosts)},
	} {
		start := time.Now()
		if o.down > 0 {
			systemctl("stop")
		}
		if out, err := k.run(ctx, "", "scale", "deployment/"+name, "-n", "default", fmt.Sprintf("--replicas=%d", o.replicas)); err != nil {
			t.Fatalf("kubectl scale %s to %d: %v\n%s", name, o.replicas, err, out)
		}
		if o.down > 0 {
			time.Sleep(o.down - time.Since(start))
			systemctl("start")
		} else {
			systemctl("restart")
		}
		if out, err := k.run(ctx, "", "rollout", "status", "deployment/"+name, "-n", "default", "--timeout=300s"); err != nil {
			desc, _ := k.run(ctx, "", "describe", "pods", "-n", "default", "-l", "app="+name)
			t.Fatalf("registry %s: the Deployment's %d pods do not all run: %v\n%s\n%s", o.name, o.replicas, err, out, tail(desc, 60))
		}
		wall := time.Since(start)
		pods, nodes, pullErrs := scaledPods(ctx, t, k, name, seen)
		if len(nodes) != len(set.Hosts) {
			t.Errorf("registry %s: the Deployment's pods ran on %d nodes, want all %d: %v", o.name, len(nodes), len(set.Hosts), nodes)
		}
		slices.Sort(pods)
		if len(pods) == 0 {
			t.Fatalf("registry %s: no new pod of %s", o.name, name)
		}
		t.Logf("PERF registry %s (%s on %s): %d new pods of a Deployment (imagePullPolicy Always) on %d nodes all Running %s after the scale; "+
			"a pod's creation to its container's start: median %s, slowest %s; ErrImagePull events %d",
			o.name, unit, reg.host.Name, len(pods), len(nodes), wall.Round(100*time.Millisecond),
			pods[len(pods)/2].Round(100*time.Millisecond), pods[len(pods)-1].Round(100*time.Millisecond), pullErrs)
		if o.down > 0 && pullErrs == 0 {
			t.Errorf("registry %s: no pull failed while the registry was down: the step did not test kubelet's retries", o.name)
		}
	}
}

// scaledPods reads the Deployment's pods not in seen (which it extends):
// each one's time from its creation to its container's start, the nodes
// they run on, and the ErrImagePull events of those pods.
func scaledPods(ctx context.Context, t *testing.T, k kubectlRunner, app string, seen map[string]bool) (startup []time.Duration, nodes map[string]int, pullErrs int) {
	t.Helper()
	out, err := k.run(ctx, "", "get", "pods", "-n", "default", "-l", "app="+app, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get pods -l app=%s: %v\n%s", app, err, out)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name     string    `json:"name"`
				Created  time.Time `json:"creationTimestamp"`
				Deleting *string   `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Containers []struct {
					State struct {
						Running *struct {
							StartedAt time.Time `json:"startedAt"`
						} `json:"running"`
					} `json:"state"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatalf("kubectl get pods -l app=%s: %v", app, err)
	}
	fresh := map[string]bool{}
	nodes = map[string]int{}
	for _, p := range pods.Items {
		if p.Metadata.Deleting != nil {
			continue
		}
		nodes[p.Spec.NodeName]++
		if seen[p.Metadata.Name] {
			continue
		}
		seen[p.Metadata.Name], fresh[p.Metadata.Name] = true, true
		if len(p.Status.Containers) != 1 || p.Status.Containers[0].State.Running == nil {
			t.Errorf("pod %s on %s is not running", p.Metadata.Name, p.Spec.NodeName)
			continue
		}
		startup = append(startup, p.Status.Containers[0].State.Running.StartedAt.Sub(p.Metadata.Created))
	}
	out, err = k.run(ctx, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.kind=Pod,reason=Failed", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get events: %v\n%s", err, out)
	}
	var events struct {
		Items []struct {
			Object struct {
				Name string `json:"name"`
			} `json:"involvedObject"`
			Message string `json:"message"`
			Count   int    `json:"count"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatalf("kubectl get events: %v", err)
	}
	for _, e := range events.Items {
		if fresh[e.Object.Name] && strings.Contains(e.Message, "ErrImagePull") {
			pullErrs += max(e.Count, 1)
		}
	}
	return startup, nodes, pullErrs
}

// pushThroughput logs the create's push of every image into the registry
// (image_push, roles/images) as a PERF line: bytes sent, the task's wall
// time and the rate.
func pushThroughput(t *testing.T, res runResult, label string) {
	t.Helper()
	const task = "images - pushed to the private registry"
	var msg string
	var ms int64
	for _, e := range res.events {
		switch {
		case e.Task != task:
		case e.Kind == "host_result" && e.Status == "changed":
			msg = e.Message
		case e.Kind == "task_end":
			ms = e.DurationMS
		}
	}
	m := regexp.MustCompile(`\(([0-9.]+) MiB sent, ([0-9.]+) MiB already there\)`).FindStringSubmatch(msg)
	if m == nil || ms == 0 {
		t.Errorf("create-cluster's push (%q) sent nothing or was not timed: %q, %d ms", task, msg, ms)
		return
	}
	sent, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("PERF %s: %s MiB sent (%s MiB already there) in %s: %.1f MiB/s", label, m[1], m[2], time.Duration(ms)*time.Millisecond, sent/(float64(ms)/1000))
}
