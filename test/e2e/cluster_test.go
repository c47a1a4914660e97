//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/bundle/bundletest"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// The Kubernetes release the cluster test builds and installs, and the
// kubernetes Service's address: the first of the default service range.
const (
	kubernetesVersion   = "v1.37.2"
	kubernetesServiceIP = "10.233.0.1"
)

// TestKubernetesCluster is issue 9's acceptance on three fresh machines (n1
// master and etcd, n2 and n3 workers), with no network but the test bridge:
//
//   - `kubexm artifact export` gathers every binary and image the config
//     needs from the local stand-ins for the upstream download sites into
//     bundle.tar.gz; the file server is then shut down;
//   - create-cluster --check on the fresh machines changes nothing on them;
//   - create-cluster --offline-bundle builds a binary-mode cluster: etcd,
//     containerd, control plane, kubelet and kube-proxy, flannel (vxlan),
//     CoreDNS, labels, and the health checks, behind the user's load
//     balancer (externalLoadBalancer external: a TCP proxy in the test at
//     lb_address); every machine and the admin kubeconfig reach the API
//     through it (checkUserLoadBalancer);
//   - kubectl get nodes shows 3 Ready nodes at v1.37.2 (kubelet on cgroup v1
//     with failCgroupV1: false from the cgroup_version fact);
//   - a busybox pod on each worker resolves kubernetes.default and fetches a
//     page through a ClusterIP service backed by a pod on the other worker;
//   - issue 52's handoff: the Cluster CRD and object, with the status
//     create-cluster wrote (clusterResource); then `kubexm controller` run
//     from the control machine reconciles changes applied with kubectl
//     (operatorMode);
//   - issue 22's scheduled snapshots: the timer runs on the etcd member,
//     three runs of its service leave the two newest snapshots, each one
//     etcdutl reads (scheduledSnapshots); delete removes the timer and
//     leaves the snapshots;
//   - issue 15: kube-proxy broken on purpose on one worker makes the play fail
//     with the line of kube-proxy's journal that names the problem, and the
//     next run repairs it (brokenKubeProxy);
//   - issue 22 on the running cluster: `kubexm certs check` and certs-renew
//     under a polling client (certsLifecycle);
//   - issue 55's drift: one byte of ctr (size kept), kube-proxy's unit and
//     kubelet's configuration changed on n2 are each repaired by a re-run
//     that changes nothing else (driftRepair);
//   - a re-run reports 0 changed (the renewed files fit);
//   - issue 22's autoRenewCerts: the timer on n1 and one run of its
//     service, which renews the master's certificates there (autoRenewTimer);
//   - issue 22's backup and restore (backupRestore): a namespace is backed
//     up, deleted, damaged and foreign backups are refused, the restore
//     brings it back;
//   - playbooks/delete removes it all: no Kubernetes unit, file or process
//     is left, and a second delete changes nothing;
//   - issue 17 on the same machines: docs/examples/site-fork creates,
//     re-runs and deletes a cluster with the built-in playbooks, an overlay,
//     the site's network role, a hook and --skip-tags chrony (siteFork;
//     KUBEXM_E2E_SITEFORK_ONLY=1 runs that step alone on fresh machines,
//     KUBEXM_E2E_SITEFORK=0 leaves it out, as make e2e does for CI's time).
//
// PERF lines give the wall time of the export, the create, the re-run and
// the delete.
func TestKubernetesCluster(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	work := t.TempDir()

	releaseRoot := clusterArtifacts(ctx, t, root)
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	set, diag := suiteMachines(ctx, t, 3, "k", "KUBELET=1")
	if len(set.Hosts) != 3 {
		t.Fatalf("want 3 machines, have %d", len(set.Hosts))
	}
	if os.Getenv(envSiteForkOnly) == "1" {
		siteFork(ctx, t, bin, set, diag, kubectl, releaseRoot, root, work)
		return
	}

	const name = "e2e-k8s"
	inventory := filepath.Join(work, "cluster.yaml")
	// Scheduled etcd snapshots on n1, two kept (scheduledSnapshots).
	// autoRenewCerts' timer on n1 (autoRenewTimer).
	clusterYAML := strings.Replace(kubernetesClusterYAML(name, set), "  etcd:\n    type: kubexm\n",
		"  etcd:\n    type: kubexm\n    backupPeriod: 720\n    keepBackupNumber: 2\n    backupDir: "+e2eSnapshotDir+"\n", 1)
	clusterYAML = strings.Replace(clusterYAML, "    proxyMode: iptables\n", "    proxyMode: iptables\n    autoRenewCerts: true\n", 1)
	// externalLoadBalancer external: the user's load balancer at lb_address
	// is a TCP proxy in this test on the bridge's host side, in front of
	// n1's API server (checkUserLoadBalancer).
	userLB := startUserLoadBalancer(t, net.JoinHostPort(set.Gateway, "6443"), net.JoinHostPort(set.Hosts[0].Address, "6443"))
	clusterYAML = strings.Replace(clusterYAML, "  kubernetes:\n",
		"  controlPlaneEndpoint:\n    externalLoadBalancer: external\n    lb_address: "+set.Gateway+"\n  kubernetes:\n", 1)
	if err := os.WriteFile(inventory, []byte(clusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every leaf is due for the timer's renewal (autoRenewTimer).
	kx := kubexm{bin: bin, dir: work, inventory: inventory, extra: extraVars(append(clusterTestVars(), "kube_cert_auto_renew_before=400d", "kube_cert_auto_renew_validity=800d")...), observe: diag.observe}
	kubeconfig := filepath.Join(work, ".kubexm", name, "kubeconfig")
	k := kubectlRunner{bin: kubectl, kubeconfig: kubeconfig}
	diag.cluster(k)

	// The bundle, from the stand-ins for dl.k8s.io, github.com and the
	// registries; then the server goes away, so the install cannot use it.
	// A .tar.gz, the default name and format (the other suites' bundles
	// are zstd's).
	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	bundle := exportBundleAs(ctx, t, kx, server, "", "bundle.tar.gz")
	stop()

	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")

	// --check on the fresh machines: succeeds and changes nothing on them.
	wide := []string{"/etc", "/usr/local", "/opt", "/var/lib/kubelet", "/var/lib/etcd"}
	fresh := map[string]map[string]string{}
	for _, h := range set.Hosts {
		fresh[h.Name] = snapshot(ctx, t, set, h.Name, wide...)
	}
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--check")
	if res.err != nil {
		t.Fatalf("create-cluster --check failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster --check on 3 fresh machines: %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(8))
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("--check changed %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}

	res = kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster (binary mode, offline bundle) on 3 fresh machines: %s (%d changed); slowest tasks:%s", res.wall.Round(time.Millisecond), len(res.changed()), res.slowest(15))

	checkNodes(ctx, t, k, set)
	// crictl from the bundle on every node, listing the node's flannel pod.
	for _, h := range set.Hosts {
		checkCrictl(ctx, t, set, h.Name, "unix:///run/containerd/containerd.sock", "kube-flannel")
	}
	pinnedImages(ctx, t, kx, set, create, bundle)
	checkWorkloads(ctx, t, k, set)
	clusterResource(ctx, t, k, bin, inventory, name, set)
	operatorMode(ctx, t, k, kx, set, kubeconfig, name, bundle)
	checkUserLoadBalancer(ctx, t, set, userLB, kubeconfig)
	scheduledSnapshots(ctx, t, set)
	brokenKubeProxy(ctx, t, kx, k, set, diag, create, bundle)
	// The cluster's identity from other directories; then the renewal runs
	// from B, another operator's directory.
	kxB, dirB := clusterIdentity(ctx, t, kx, k, set, root, name, bundle)
	certsLifecycle(ctx, t, kxB, k, set, root, dirB, name, bundle)

	// A binary, a unit and a configuration changed on a worker are found
	// and put back (issue 55); the re-run below proves nothing is left.
	driftRepair(ctx, t, kx, set, create, bundle)
	// After the renewal from B: A takes the renewed files from the masters
	// (its own work directory changes, no host does) and they fit what
	// create-cluster writes.
	res = kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster re-run (nothing to change): %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(15))
	if c := hostChanges(res); len(c) > 0 {
		t.Errorf("re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	// Parts of create-cluster re-run, and the reads from a directory with
	// only cluster.yaml.
	stepStart := time.Now()
	partialRuns(ctx, t, kx, create, bundle)
	readsFromAnywhere(ctx, t, kx, set, root, name)
	t.Logf("PERF partial re-runs and reads from anywhere: %s", time.Since(stepStart).Round(time.Millisecond))

	autoRenewTimer(ctx, t, set, k)
	backupRestore(ctx, t, kx, k, root, work, name, "binary mode")

	res = kx.play(ctx, del)
	if res.err != nil {
		t.Fatalf("delete failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF delete: %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(8))
	checkDeleted(ctx, t, set, "/etc/systemd/system/kubexm-certs-renew.timer", "/var/lib/kubexm/certs-renew", "/usr/local/lib/kubexm")
	res = kx.play(ctx, del)
	if res.err != nil {
		t.Fatalf("second delete failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("second delete changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	if os.Getenv(envSiteFork) == "0" {
		t.Logf("the site fork step is left out (%s=0, as make e2e and CI do; make e2e-cluster runs it)", envSiteFork)
		return
	}
	siteFork(ctx, t, bin, set, diag, kubectl, releaseRoot, root, work)
}

// checkDeleted wants no Kubernetes unit, file, link or process left on any
// machine (nor any of the paths given).
func checkDeleted(ctx context.Context, t *testing.T, set *testhosts.Set, paths ...string) {
	t.Helper()
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, `for u in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd containerd; do
  [ -e /etc/systemd/system/$u.service ] && echo "unit $u"
done
for p in /etc/kubernetes /var/lib/kubelet /etc/cni/net.d/10-flannel.conflist /run/flannel /usr/local/bin/kubelet /usr/local/bin/kube-proxy /usr/local/bin/kube-apiserver /var/lib/etcd /usr/local/bin/crictl /etc/crictl.yaml `+strings.Join(paths, " ")+`; do
  [ -e $p ] && echo "left $p"
done
ip -o link show | grep -oE ' (flannel\.1|cni0):' || true
pgrep -x 'kubelet|kube-proxy|kube-apiserver|flanneld|coredns|containerd-shim' || true`)
		if err != nil {
			t.Fatalf("after delete on %s: %v", h.Name, err)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("delete left on %s:\n%s", h.Name, out)
		}
	}
}

// e2eSnapshotDir is where the cluster suite's etcd member keeps its
// scheduled snapshots.
const e2eSnapshotDir = "/var/backups/kubexm-e2e-etcd"

// scheduledSnapshots checks spec.etcd.backupPeriod on the etcd member: the
// timer is enabled and waiting, and three runs of its service (as the timer
// starts it) leave keepBackupNumber (2) snapshots, each readable by
// etcdutl.
func scheduledSnapshots(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	member := set.Hosts[0].Name
	out, err := set.SSH(ctx, member, `set -e
systemctl is-enabled kubexm-etcd-backup.timer
systemctl is-active kubexm-etcd-backup.timer
for i in 1 2 3; do systemctl start kubexm-etcd-backup.service; done
for f in `+e2eSnapshotDir+`/etcd-*.db; do
  echo "file $f"
  /usr/local/bin/etcdutl snapshot status "$f" -w simple >/dev/null
done
journalctl -u kubexm-etcd-backup.service -o cat --no-pager | grep -c '^etcd snapshot '`)
	if err != nil {
		t.Fatalf("scheduled snapshots on %s: %v\n%s", member, err, out)
	}
	files := strings.Count(out, "file "+e2eSnapshotDir+"/etcd-"+member+"-")
	if !strings.HasPrefix(out, "enabled\nactive\n") || files != 2 {
		t.Errorf("scheduled snapshots on %s: want the timer enabled and active and 2 snapshots kept, have %d:\n%s", member, files, out)
	}
	t.Logf("scheduled snapshots on %s:\n%s", member, out)
}

// brokenKubeProxy gives kube-proxy on the last worker a configuration it
// refuses (an unknown proxy mode): the node play must fail there, naming the
// unit's state and the journal line with kube-proxy's own complaint, instead
// of a bare timeout, and so must the suite's failure report; the next run
// without it brings kube-proxy back.
func brokenKubeProxy(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, diag *diagnostics, create, bundle string) {
	t.Helper()
	node := set.Hosts[len(set.Hosts)-1].Name
	broken := kx
	broken.extra = append(slices.Clone(kx.extra), `{"kube_proxy_extra_config": {"mode": "no-such-mode"}}`, `{"kube_node_wait_timeout": "40s"}`)
	res := broken.play(ctx, create, "--offline-bundle", bundle, "--limit", node, "--tags", "node")
	failures := res.failures()
	if res.err == nil {
		t.Fatalf("create-cluster with a broken kube-proxy configuration on %s succeeded", node)
	}
	t.Logf("PERF create-cluster --limit %s with a broken kube-proxy failed after %s:%s", node, res.wall.Round(time.Millisecond), failures)
	// kube-proxy's own line: `Invalid value: \"no-such-mode\": must be iptables, ipvs, ...`.
	for _, want := range []string{node, "kube-proxy is alive", "its journal ends", "Invalid value", "no-such-mode"} {
		if !strings.Contains(failures, want) {
			t.Errorf("the failure does not say %q:%s", want, failures)
		}
	}
	// What the suite prints when it fails here: kube-proxy's status and
	// journal on that machine, with the same line.
	if report := diag.text(ctx); !strings.Contains(report, "no-such-mode") || !strings.Contains(report, "kube-proxy.service") {
		t.Errorf("the suite's failure report does not show kube-proxy's complaint:\n%s", tail(report, 60))
	}
	res = kx.play(ctx, create, "--offline-bundle", bundle, "--limit", node, "--tags", "node")
	if res.err != nil {
		t.Fatalf("create-cluster --limit %s did not repair kube-proxy: %v%s", node, res.err, res.failures())
	}
	if out, err := k.run(ctx, "", "wait", "node", node, "--for=condition=Ready", "--timeout=120s"); err != nil {
		t.Errorf("%s after the repair: %v\n%s", node, err, out)
	}
}

// clusterArtifacts lays out every release the cluster needs under the test
// cache, built from the Go module proxy and Debian's packages on first use,
// and returns the directory the file server serves.
func clusterArtifacts(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	var dir string
	for _, script := range []string{"release.sh", "containerd.sh", "crictl.sh", "kubernetes-release.sh", "flannel.sh", "images.sh"} {
		last := buildArtifact(ctx, t, root, []string{"ETCD_VERSION=" + etcdVersion, "GOARCH=amd64"}, script)
		if script == "containerd.sh" {
			dir = last
		}
	}
	return dir
}

// kubernetesClusterYAML: n1 is the master and the only etcd member, the
// other machines are workers; binary mode, containerd, flannel, kube-proxy in iptables
// mode (the test kernel has no IP_VS).
func kubernetesClusterYAML(name string, set *testhosts.Set) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\nspec:\n  hosts:\n", name)
	for _, h := range set.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, address: %s, internalAddress: %s, port: %d, user: root, privateKeyPath: %q}\n",
			h.Name, h.Address, h.Address, h.Port, set.KeyPath)
	}
	var workers []string
	for _, h := range set.Hosts[1:] {
		workers = append(workers, h.Name)
	}
	fmt.Fprintf(&b, "  roleGroups:\n    etcd: [%s]\n    master: [%s]\n    worker: [%s]\n",
		set.Hosts[0].Name, set.Hosts[0].Name, strings.Join(workers, ", "))
	fmt.Fprintf(&b, `  kubernetes:
    type: kubexm
    version: %s
    proxyMode: iptables
    containerRuntime: {type: containerd, version: %s}
  etcd:
    type: kubexm
  network:
    plugin: flannel
`, kubernetesVersion, containerdVersion)
	return b.String()
}

// testKubeletConfig is kubelet_extra_config for the test machines (JSON,
// which YAML reads too): what kind does for kubelet in a container, the disk
// stats being the host's.
const testKubeletConfig = `{"evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}, "imageGCHighThresholdPercent": 100}`

// clusterTestVars are what the test machines need that real machines do not.
func clusterTestVars() []string {
	return []string{
		// The versions test/artifacts builds: flannel from the newest module
		// the proxy serves, its CNI plugin from containernetworking/plugins.
		`{"flannel_version": "v0.28.10", "flannel_cni_plugin_version": "v0.9.1"}`,
		// The test pods' image travels in the bundle as a site's own image would.
		`{"images_extra": [{"name": "busybox", "repo": "docker.io/library/busybox", "tag": "1.35.0"}]}`,
		// No package mirror; these are installed already. The bundle leaves
		// the os role's packages out (the HA suite carries them:
		// haOSPackagesVars), so no other suite's export waits for apt.
		`{"os_packages": ["iptables", "iproute2", "kmod", "procps", "curl"], "os_bundle_packages": []}`,
		// systemd-nspawn machines: vm.*, kernel.*, fs.* are read-only.
		"os_sysctl_ignore_readonly=true",
		// No CAP_SYS_RESOURCE: OOM scores cannot go below 0.
		"containerd_restrict_oom_score_adj=true",
		// What kind does for kubelet and kube-proxy in a container: the disk
		// stats are the host's (testKubeletConfig), conntrack limits are the host's.
		`{"kubelet_extra_config": ` + testKubeletConfig + `}`,
		`{"kube_proxy_conntrack_max_per_core": 0}`,
	}
}

// artifactSources points every download at the file server.
func artifactSources(server string) string {
	return fmt.Sprintf(`{"etcd_mirrors": ["%[1]s/etcd-io/etcd/releases/download/%[2]s"],`+
		` "containerd_mirrors": ["%[1]s/containerd/containerd/releases/download/v%[3]s"],`+
		` "runc_mirrors": ["%[1]s/opencontainers/runc/releases/download/v%[4]s"],`+
		` "cni_plugins_mirrors": ["%[1]s/containernetworking/plugins/releases/download/v%[5]s"],`+
		` "crictl_mirrors": ["%[1]s/kubernetes-sigs/cri-tools/releases/download/v%[7]s"],`+
		` "kubernetes_mirrors": ["%[1]s/kubernetes/release/%[6]s/bin/linux/amd64"],`+
		` "flannel_cni_plugin_mirrors": ["%[1]s/flannel-io/cni-plugin/releases/download/v0.9.1"],`+
		` "images_mirrors": ["%[1]s/images"]}`,
		server, etcdVersion, containerdVersion, runcVersion, cniVersion, kubernetesVersion, crictlVersion)
}

// serveDirStoppable is serveDir with a way to stop serving before the test ends.
func serveDirStoppable(t *testing.T, addr, dir string) (string, func()) {
	t.Helper()
	sub, cancel := context.WithCancel(context.Background())
	url := serveDirUntil(sub, t, addr, dir)
	return url, cancel
}

type kubectlRunner struct {
	bin, kubeconfig string
	// image, when set, is the test pods' busybox as the cluster's private
	// registry names it: the nodes pull it from there (none is
	// side-loaded). Unset, it is busyboxRef's, side-loaded on every node.
	image string
}

// busybox is the test pods' image and pull policy: the side-loaded
// busybox, never pulled, or the registry's, pulled when a node lacks it.
func (k kubectlRunner) busybox(t *testing.T) (image, pullPolicy string) {
	t.Helper()
	if k.image != "" {
		return k.image, "IfNotPresent"
	}
	return busyboxRef(t), "Never"
}

func (k kubectlRunner) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--request-timeout=30s"}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkNodes wants every machine as a Ready node at the cluster's version.
func checkNodes(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set) {
	t.Helper()
	out, err := k.run(ctx, "", "get", "nodes", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Status struct {
				NodeInfo struct {
					KubeletVersion string `json:"kubeletVersion"`
				} `json:"nodeInfo"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get nodes -o json: %v", err)
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready[n.Metadata.Name] = true
			}
		}
		if v := n.Status.NodeInfo.KubeletVersion; v != kubernetesVersion {
			t.Errorf("node %s runs kubelet %s, want %s", n.Metadata.Name, v, kubernetesVersion)
		}
	}
	for _, h := range set.Hosts {
		if !ready[h.Name] {
			t.Errorf("node %s is not Ready", h.Name)
		}
	}
	if len(list.Items) != len(set.Hosts) {
		t.Errorf("%d nodes, want %d", len(list.Items), len(set.Hosts))
	}
	if t.Failed() {
		wide, _ := k.run(ctx, "", "get", "nodes", "-o", "wide")
		t.Fatalf("nodes:\n%s", wide)
	}
	wide, _ := k.run(ctx, "", "get", "nodes", "-o", "wide")
	t.Logf("kubectl get nodes:\n%s", wide)
}

// checkWorkloads runs a web server pod behind a ClusterIP service on each
// worker and a client pod on each; each client resolves kubernetes.default
// through CoreDNS and fetches the page of the other worker's service, which
// crosses the CNI's overlay and kube-proxy's rules (checkWorkloadsOn).
func checkWorkloads(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set) {
	t.Helper()
	checkWorkloadsOn(ctx, t, k, []string{set.Hosts[1].Name, set.Hosts[2].Name})
}

// checkWorkloadsOn runs a web server pod behind a ClusterIP service and a
// client pod on each of nodes (pinned by nodeName, so masters too); each
// client resolves kubernetes.default through CoreDNS, fetches the page of
// every other node's web pod by the pod's own address and that of the next
// node's pod through its service, then the pods go.
func checkWorkloadsOn(ctx context.Context, t *testing.T, k kubectlRunner, nodes []string) {
	t.Helper()
	image, pull := k.busybox(t)
	var manifest strings.Builder
	for _, w := range nodes {
		fmt.Fprintf(&manifest, `apiVersion: v1
kind: Pod
metadata: {name: web-%[1]s, namespace: default, labels: {app: web-%[1]s}}
spec:
  nodeName: %[1]s
  containers:
  - name: web
    image: %[2]s
    imagePullPolicy: %[3]s
    command: [/bin/busybox, sh, -c, "mkdir -p /www && echo hello-from-%[1]s > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www"]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web-%[1]s, namespace: default}
spec:
  selector: {app: web-%[1]s}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client-%[1]s, namespace: default}
spec:
  nodeName: %[1]s
  containers:
  - name: client
    image: %[2]s
    imagePullPolicy: %[3]s
    command: [/bin/busybox, sleep, "3600"]
---
`, w, image, pull)
	}
	if out, err := k.run(ctx, manifest.String(), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the test workloads: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "wait", "--for=condition=Ready", "pod", "--all", "-n", "default", "--timeout=300s"); err != nil {
		desc, _ := k.run(ctx, "", "describe", "pods", "-n", "default")
		t.Fatalf("test pods not Ready: %v\n%s\n%s", err, out, tail(desc, 80))
	}
	podIP, serviceIP := map[string]string{}, map[string]string{}
	for _, w := range nodes {
		ip, err := k.run(ctx, "", "get", "pod", "web-"+w, "-o", "jsonpath={.status.podIP}")
		if err != nil || ip == "" {
			t.Fatalf("the address of pod web-%s: %v\n%s", w, err, ip)
		}
		podIP[w] = ip
		if ip, err = k.run(ctx, "", "get", "service", "web-"+w, "-o", "jsonpath={.spec.clusterIP}"); err != nil || ip == "" {
			t.Fatalf("the address of service web-%s: %v\n%s", w, err, ip)
		}
		serviceIP[w] = ip
	}
	for i, w := range nodes {
		client := "client-" + w
		// kubernetes.default is kubernetes.default.svc.<domain> through the
		// pod's search list; busybox's nslookup applies no search list to a
		// name with a dot (and the machines have no upstream DNS to answer
		// kubernetes.default. itself), so the test asks CoreDNS, through the
		// kube-dns ClusterIP in the pod's resolv.conf, for the full name and
		// checks the search list.
		resolv, err := k.run(ctx, "", "exec", client, "--", "/bin/busybox", "cat", "/etc/resolv.conf")
		if err != nil || !strings.Contains(resolv, "search default.svc.cluster.local svc.cluster.local cluster.local") {
			t.Errorf("%s: /etc/resolv.conf has not the cluster's search list: %v\n%s", client, err, resolv)
		}
		out, err := retry(ctx, 2*time.Minute, func() (string, error) {
			return k.run(ctx, "", "exec", client, "--", "/bin/busybox", "nslookup", "kubernetes.default.svc.cluster.local")
		})
		if err != nil || !strings.Contains(out, "Address: "+kubernetesServiceIP) {
			t.Errorf("%s: nslookup kubernetes.default.svc.cluster.local: %v\n%s", client, err, out)
		} else {
			t.Logf("%s resolves kubernetes.default:\n%s", client, strings.TrimSpace(out))
		}
		// Pod to pod across nodes, by each other web pod's own address, and
		// the next node's pod by its service's address, in one exec (nc, as
		// busybox's wget crashes in this static build): a line per target,
		// "<address>:<port> <the page's last line>".
		want := map[string]string{}
		for _, o := range nodes {
			if o != w {
				want[net.JoinHostPort(podIP[o], "8080")] = "hello-from-" + o
			}
		}
		next := nodes[(i+1)%len(nodes)]
		want[net.JoinHostPort(serviceIP[next], "80")] = "hello-from-" + next
		targets := slices.Sorted(maps.Keys(want))
		script := `for a in ` + strings.Join(targets, " ") + `; do
  echo "$a $(printf 'GET / HTTP/1.0\r\n\r\n' | /bin/busybox nc -w 5 ${a%:*} ${a##*:} | /bin/busybox tail -n 1)"
done`
		out, err = retry(ctx, 2*time.Minute, func() (string, error) {
			out, err := k.run(ctx, "", "exec", client, "--", "/bin/busybox", "sh", "-c", script)
			if err != nil {
				return out, err
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(l); len(f) == 2 && want[f[0]] == f[1] {
					continue
				}
				return out, fmt.Errorf("not the page expected: %q", l)
			}
			return out, nil
		})
		if err != nil || strings.Count(strings.TrimSpace(out), "\n")+1 != len(targets) {
			t.Errorf("%s on %s: the other nodes' pods %v and service web-%s (%s): %v\n%s", client, w, podIP, next, serviceIP[next], err, out)
		} else {
			t.Logf("%s reached the web pods on %d other nodes by their addresses and hello-from-%s through service web-%s (%s)",
				client, len(nodes)-1, next, next, serviceIP[next])
		}
	}
	if out, err := k.run(ctx, manifest.String(), "delete", "-f", "-", "--wait=true", "--grace-period=1"); err != nil {
		t.Errorf("kubectl delete the test workloads: %v\n%s", err, out)
	}
}

// busyboxRef is the image reference images.sh gave the busybox tarball.
func busyboxRef(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("KUBEXM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/kubexm-test"
	}
	f, err := os.Open(filepath.Join(cache, "release", "images", "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.HasPrefix(fields[0], "busybox-") {
			return fields[1]
		}
	}
	t.Fatal("images.txt names no busybox image")
	return ""
}

// retry calls f until it succeeds or the time is up, and returns its last result.
func retry(ctx context.Context, d time.Duration, f func() (string, error)) (string, error) {
	deadline := time.Now().Add(d)
	for {
		out, err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(time.Second):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exportBundle runs `kubexm artifact export` of kx's cluster.yaml (with
// flags) into bundle.tar.zst beside it (zstd: packed and unpacked faster
// than gzip), from the file server's stand-ins for the download sites, and
// logs its wall time and size as a PERF line (what says which export it
// was).
func exportBundle(ctx context.Context, t *testing.T, kx kubexm, server, what string, flags ...string) string {
	t.Helper()
	return exportBundleAs(ctx, t, kx, server, what, "bundle.tar.zst", flags...)
}

// exportBundleAs is exportBundle into kx.dir/name.
func exportBundleAs(ctx context.Context, t *testing.T, kx kubexm, server, what, name string, flags ...string) string {
	t.Helper()
	bundle := filepath.Join(kx.dir, name)
	start := time.Now()
	args := append([]string{"artifact", "export", "-f", kx.inventory, "-o", bundle, "-e", artifactSources(server)}, flags...)
	for _, e := range kx.extra {
		args = append(args, "-e", e)
	}
	export := exec.CommandContext(ctx, kx.bin, args...)
	export.Dir = kx.dir
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("kubexm artifact export%s: %v\n%s", what, err, tail(string(out), 60))
	}
	st, err := os.Stat(bundle)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PERF artifact export%s: %s, bundle %d MiB", what, time.Since(start).Round(time.Millisecond), st.Size()>>20)
	return bundle
}

// bundleEntries lists the bundle's entries as `tar -t` does, one per line,
// and returns the content of those whose name matches pattern (path.Match,
// "" for none), one after another as `tar -xO` does; gzip and zstd alike.
func bundleEntries(t *testing.T, bundle, pattern string) (list, content []byte) {
	t.Helper()
	bundletest.Each(t, bundle, func(h *tar.Header, data []byte) {
		list = append(list, h.Name...)
		list = append(list, '\n')
		if ok, _ := path.Match(pattern, strings.TrimPrefix(h.Name, "./")); ok && h.Typeflag == tar.TypeReg {
			content = append(content, data...)
		}
	})
	return list, content
}

// userLoadBalancer stands in for the user's load balancer of
// externalLoadBalancer external: a TCP proxy to one API server, which
// counts the connections of each client address.
type userLoadBalancer struct {
	mu      sync.Mutex
	clients map[string]int
	conns   map[net.Conn]bool
}

// startUserLoadBalancer listens on addr (the test bridge's host side, which
// every machine reaches) and forwards each connection to backend, until the
// test ends.
func startUserLoadBalancer(t *testing.T, addr, backend string) *userLoadBalancer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the stand-in for the user's load balancer: %v", err)
	}
	lb := &userLoadBalancer{clients: map[string]int{}, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		lb.mu.Lock()
		defer lb.mu.Unlock()
		for c := range lb.conns {
			c.Close()
		}
	})
	track := func(c net.Conn, add bool) {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		if add {
			lb.conns[c] = true
		} else {
			delete(lb.conns, c)
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			lb.mu.Lock()
			lb.clients[host]++
			lb.mu.Unlock()
			go func() {
				track(c, true)
				defer func() { track(c, false); c.Close() }()
				b, err := net.DialTimeout("tcp", backend, 10*time.Second)
				if err != nil {
					return
				}
				track(b, true)
				defer func() { track(b, false); b.Close() }()
				go func() {
					_, _ = io.Copy(b, c)
					_ = b.(*net.TCPConn).CloseWrite()
				}()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return lb
}

// checkUserLoadBalancer wants the control-plane domain to resolve to
// lb_address on every machine, every machine (its kubelet, kube-proxy,
// flannel) and the admin kubeconfig to have connected through the user's
// load balancer, and the admin kubeconfig to name it.
func checkUserLoadBalancer(ctx context.Context, t *testing.T, set *testhosts.Set, lb *userLoadBalancer, kubeconfig string) {
	t.Helper()
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, "getent hosts lb.kubexm.local")
		if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != set.Gateway {
			t.Errorf("externalLoadBalancer external: lb.kubexm.local on %s is %q, want lb_address %s (%v)", h.Name, strings.TrimSpace(out), set.Gateway, err)
		}
	}
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if want := "server: https://" + net.JoinHostPort(set.Gateway, "6443"); !strings.Contains(string(data), want) {
		t.Errorf("externalLoadBalancer external: the admin kubeconfig does not say %q", want)
	}
	lb.mu.Lock()
	clients := maps.Clone(lb.clients)
	lb.mu.Unlock()
	for _, a := range append([]string{set.Gateway}, addresses(set)...) {
		if clients[a] == 0 {
			t.Errorf("externalLoadBalancer external: no connection from %s through the load balancer at lb_address (connections by client: %v)", a, clients)
		}
	}
	t.Logf("externalLoadBalancer external: connections through lb_address %s by client: %v", set.Gateway, clients)
}

// addresses are the machines' addresses.
func addresses(set *testhosts.Set) []string {
	var a []string
	for _, h := range set.Hosts {
		a = append(a, h.Address)
	}
	return a
}

// pinnedImages: on every machine each image create-cluster imported is
// pinned for the CRI plugin (the kubelet's image garbage collection skips a
// pinned image, and a node without a registry could not pull it back); an
// image that lost its label gets it back from the images play, and nothing
// else changes.
func pinnedImages(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create, bundle string) {
	t.Helper()
	const pinnedFilter = `'labels."io.cri-containerd.pinned"==pinned'`
	unpinned := func(host string) (images, missing []string) {
		out, err := set.SSH(ctx, host, "ctr -n k8s.io images ls -q && echo --- && ctr -n k8s.io images ls -q "+pinnedFilter)
		if err != nil {
			t.Fatalf("ctr images ls on %s: %v\n%s", host, err, out)
		}
		all, pinned, _ := strings.Cut(out, "---\n")
		isPinned := map[string]bool{}
		for _, ref := range strings.Fields(pinned) {
			isPinned[ref] = true
		}
		for _, ref := range strings.Fields(all) {
			if strings.HasPrefix(ref, "sha256:") || strings.Contains(ref, "@sha256:") {
				continue
			}
			images = append(images, ref)
			if !isPinned[ref] {
				missing = append(missing, ref)
			}
		}
		return images, missing
	}
	var images []string
	for _, h := range set.Hosts {
		all, missing := unpinned(h.Name)
		if len(all) == 0 {
			t.Fatalf("containerd on %s has no image", h.Name)
		}
		if len(missing) > 0 {
			t.Errorf("images on %s without io.cri-containerd.pinned=pinned: %v", h.Name, missing)
		}
		if h.Name == set.Hosts[1].Name {
			images = all
		}
	}
	host, ref := set.Hosts[1].Name, images[0]
	if out, err := set.SSH(ctx, host, "ctr -n k8s.io images label "+shellQuote(ref)+" io.cri-containerd.pinned="); err != nil {
		t.Fatalf("taking the label off %s on %s: %v\n%s", ref, host, err, out)
	}
	if _, missing := unpinned(host); len(missing) != 1 {
		t.Fatalf("after taking the label off %s on %s, the unpinned images are %v", ref, host, missing)
	}
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--tags", "images")
	if res.err != nil {
		t.Fatalf("create-cluster --tags images failed: %v%s", res.err, res.failures())
	}
	want := host + ": images - pin the ones imported without the label"
	if c := res.changed(); len(c) != 1 || c[0] != want {
		t.Errorf("create-cluster --tags images with %s unpinned on %s changed %v, want only %q", ref, host, c, want)
	}
	if _, missing := unpinned(host); len(missing) > 0 {
		t.Errorf("after create-cluster --tags images, %s still has unpinned images %v", host, missing)
	}
	t.Logf("PERF create-cluster --tags images, pinning %s again on %s: %s", ref, host, res.wall.Round(time.Millisecond))
}
