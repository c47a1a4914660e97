//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
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

// The endpoint every kubeconfig of the HA cluster names (the default
// controlPlaneEndpoint.domain and port).
const haEndpoint = "https://lb.kubexm.local:6443"

// TestHAControlPlane is issue 19's acceptance for binary mode with
// internalLoadbalancer haproxy, on one cluster carried through its steps:
// n1-n3 masters and etcd members, n4 and n5 workers, no network but the
// test bridge (the machines have no package mirror), on calico (issue 49:
// binary mode's calico; KUBEXM_E2E_HA_CNI: calico, the default, with vxlan;
// calico-bgp, BGP without encapsulation; flannel):
//
//   - `kubexm artifact export` puts haproxy and the os role's packages the
//     machines lack (socat, conntrack, ipset, ebtables: not in their image)
//     with their dependency closure (.deb files for the control machine's
//     Debian release, one index, each file once) into the bundle;
//   - create-cluster --offline-bundle installs the os role's packages from
//     the bundle on every machine (no network: installed proves the path),
//     recorded as kubexm's, so the delete below removes them;
//   - create-cluster --offline-bundle installs haproxy from the bundle on the
//     workers only, as kubexm-haproxy.service on 127.0.0.1:6443 with every
//     master as a health-checked backend; every kubeconfig on every node
//     names https://lb.kubexm.local:6443, which resolves to 127.0.0.1 on the
//     workers and to the master itself on the masters; etcd has 3 members;
//   - calico (checkCalico): calico-node Ready on every node, the pool, its
//     encapsulation (vxlan.calico's MTU; or BGP routes of BIRD between the
//     nodes' addresses); a pod on each of the 5 nodes reaches the pods on
//     the 4 others and a Service across nodes, and resolves through CoreDNS
//     (checkWorkloadsOn);
//   - failover: a client on a worker asks the API through the endpoint every
//     200 ms while n1, the first master, loses its power; the longest gap
//     between answers and the share of failed requests are PERF lines, and
//     the API must answer again within the gap the health checks allow;
//   - after the failover the cluster still works: n1 becomes NotReady and a
//     new Deployment schedules and its pods run;
//   - n1 is powered on again and the cluster converges by itself: n1 Ready,
//     etcd 3 healthy members, calico-node running on every node again;
//   - CA rotation (caRotation, skipped with KUBEXM_E2E_CA_ROTATION=0, and
//     =kubeadm, which CI sets: 18-21 minutes at CI's load):
//     rotate-ca replaces the cluster, front-proxy and etcd CAs while a
//     client polls the API with a token issued before;
//   - a re-run changes nothing;
//   - with KUBEXM_E2E_NGINX=1, internalLoadbalancer nginx on the same
//     cluster (checkNginxSwitch):
//     nginx from the same bundle replaces haproxy on the workers, a re-run
//     changes nothing, the API answers through nginx while a master's API
//     server is stopped;
//   - delete -e delete_packages=true leaves every host's files and package
//     set as they were before the create, and no CNI link, process, route,
//     iptables chain or directory (cniLeftovers).
//
// With KUBEXM_E2E_HA_REGISTRY=1 (make e2e-ha-registry; issue 50) the
// cluster has registry.type registry on n5, whose release comes in the
// bundle: every node pulls every image from it and none is side-loaded
// (checkPulledFromRegistry), the test pods' busybox too; the push finds
// every image there; a Deployment scales while the registry is stopped and
// started, then restarted, and every pod starts (registryRestartWhileScaling);
// the failover is left out; the CA rotation carries the
// registry (hooks after each phase, checkRegistryAfterRotation); the delete
// also removes the registry's stored images (registry_delete_data).
//
// With KUBEXM_E2E_HA_REGISTRY=external (make e2e-ha-registry-external) the
// registry is one kubexm did not deploy, which the test runs on n5
// (withExternalRegistry): refused with a wrong password before any host
// changes, filled by kubexm artifact images push (fillExternalRegistry),
// pulled from by every node; it is still there after the delete
// (externalRegistryKept), and a create-cluster side-loading the same bundle
// on the same machines is timed against the one from the registry.
func TestHAControlPlane(t *testing.T) {
	parallelSuite(t)
	// 40 minutes cut rotate-ca after 23 m 49 s beside TestNodes (10
	// machines, load average 60-74, 2026-11-27); CI's cold run took 35 in
	// all. With KUBEXM_E2E_NGINX=1 the cluster also switches to nginx
	// (checkNginxSwitch, 1 m 54 s at load 45). Both inside make e2e-ha's 60.
	withNginx := os.Getenv("KUBEXM_E2E_NGINX") == "1"
	registryMode := os.Getenv("KUBEXM_E2E_HA_REGISTRY")
	withRegistry := registryMode == "1" || registryMode == "external"
	external := registryMode == "external"
	limit := 50 * time.Minute
	if withNginx || withRegistry {
		// The registry mode leaves the failover out but pushes every image
		// and runs rotate-ca's hooks.
		limit = 55 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	suiteStart := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()

	cni, encap := haCNI(t)
	releaseRoot := clusterArtifacts(ctx, t, root)
	if cni == "calico" {
		calicoImages(ctx, t, root)
	}
	if withRegistry && !external {
		// Into the release tree the file server serves, for the bundle.
		buildArtifact(ctx, t, root, []string{"REGISTRY_VERSION=" + registryVersion}, "registry.sh")
	}
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	const machines = 5
	set, diag := suiteMachines(ctx, t, machines, "h", "KUBELET=1")
	if len(set.Hosts) != machines {
		t.Fatalf("want %d machines, have %d", machines, len(set.Hosts))
	}
	masters, workers := set.Hosts[:3], set.Hosts[3:]

	inventory := filepath.Join(work, "cluster.yaml")
	plainYAML := haNetwork(haClusterYAML("e2e-ha", set), cni, encap)
	clusterYAML := plainYAML
	var reg *haRegistry
	if withRegistry {
		var r haRegistry
		if external {
			// Before the hosts' state is taken: the registry is theirs.
			clusterYAML, r = withExternalRegistry(ctx, t, clusterYAML, set, root, work)
		} else {
			clusterYAML, r = withDeployedRegistry(t, clusterYAML, set.Hosts[len(set.Hosts)-1], work)
		}
		reg = &r
	}
	if err := os.WriteFile(inventory, []byte(clusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := kubexm{bin: bin, dir: work, inventory: inventory, extra: extraVars(clusterTestVars()...), observe: diag.observe}
	// The os role's list with packages the machines lack (issue 50): they
	// come from the bundle, beside haproxy's, with their closure.
	kx.extra = append(kx.extra, haOSPackagesVars())
	kubeconfig := filepath.Join(work, ".kubexm", "e2e-ha", "kubeconfig")
	k := kubectlRunner{bin: kubectl, kubeconfig: kubeconfig}
	if reg != nil {
		k.image = reg.image
	}
	diag.cluster(k)

	// What each host looks like before kubexm: files and installed packages.
	wide := []string{"/etc", "/usr/local", "/usr/sbin", "/opt", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/kubexm"}
	if reg != nil && !external {
		wide = append(wide, "/var/lib/kubexm-registry")
	}
	fresh := takeHostState(ctx, t, set, wide...)
	for _, h := range set.Hosts {
		for _, p := range append([]string{"haproxy", "nginx"}, haOSPackagesMissing...) {
			if strings.Contains(fresh.pkgs[h.Name], "\n"+p+" ") {
				t.Fatalf("%s has %s before the create: the test would not prove the bundle path", h.Name, p)
			}
		}
	}

	// The bundle, from the stand-ins for the download sites and Debian's
	// packages for haproxy, and with KUBEXM_E2E_NGINX=1 nginx's too (the
	// cluster then switches to internalLoadbalancer nginx at the end:
	// kxNginx, the same cluster; make e2e, and so CI, sets it);
	// then the file server goes away.
	lbPackages := []string{"haproxy"}
	if withNginx {
		lbPackages = append(lbPackages, "nginx", "libnginx-mod-stream")
	}
	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	kxExport := kx
	kxExport.extra = append(slices.Clone(kx.extra), `{"kube_control_plane_lb_bundle_packages": ["`+strings.Join(lbPackages, `", "`)+`"]}`)
	if reg != nil && !external {
		// The registry's release joins the bundle (roles/artifacts).
		kxExport.extra = append(kxExport.extra, fmt.Sprintf(`{"registry_mirrors": ["%s/distribution/distribution/releases/download/v%s"]}`, server, registryVersion))
	}
	bundle := exportBundle(ctx, t, kxExport, server, " with the packages of "+strings.Join(lbPackages, ", "))
	stop()
	kxNginx := kx
	kxNginx.inventory = filepath.Join(work, "cluster-nginx.yaml")
	if err := os.WriteFile(kxNginx.inventory, []byte(strings.Replace(clusterYAML, "internalLoadbalancer: haproxy", "internalLoadbalancer: nginx", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	list, _ := bundleEntries(t, bundle, "")
	debs := regexp.MustCompile(`(?m)^(?:\./)?packages/[a-z]+[0-9.]*/amd64/[^/]+\.deb$`).FindAllString(string(list), -1)
	for _, p := range lbPackages {
		if !regexp.MustCompile(`(?m)^(?:\./)?packages/[a-z]+[0-9.]*/amd64/` + p + `_[^/]+\.deb$`).Match(list) {
			t.Fatalf("the bundle has no %s package:\n%s", p, tail(string(list), 40))
		}
	}
	t.Logf("the bundle has %s and %d .deb files in all", strings.Join(lbPackages, ", "), len(debs))
	checkBundleOSPackages(ctx, t, bundle, string(list), append(slices.Clone(lbPackages), haOSPackagesMissing...))

	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")

	if external {
		// The nodes pull from a registry filled before the create: the
		// preflight (also --check's) finds every image there.
		fillExternalRegistry(ctx, t, set, kx, *reg, create, bundle)
	}
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--check")
	if res.err != nil {
		t.Fatalf("create-cluster --check failed: %v%s", res.err, res.failures())
	}
	createLoad := loadAverage()
	res = kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	createWall := res.wall
	t.Logf("PERF create-cluster (3 masters, 2 workers, internal haproxy, %s, offline bundle%s) on %d fresh machines: %s (%d changed; link rate %s, load average %s before it)",
		haNetworkName(cni, encap), haRegistryName(reg), machines, res.wall.Round(time.Millisecond), len(res.changed()), linkRate(), createLoad)

	checkEndpointWiring(ctx, t, set, masters, workers)
	checkOSPackagesFromBundle(ctx, t, set)
	checkNodes(ctx, t, k, set)
	checkMasterEtcd(ctx, t, set, etcdctl, masters, masters[1])
	if cni == "calico" {
		checkCalico(ctx, t, set, k, encap)
		start := time.Now()
		var nodes []string
		for _, h := range set.Hosts {
			nodes = append(nodes, h.Name)
		}
		checkWorkloadsOn(ctx, t, k, nodes)
		t.Logf("PERF pods on all %d nodes reach each other, a Service and DNS: checked in %s", machines, time.Since(start).Round(time.Second))
	}

	switch {
	case external:
		checkPulledFromRegistry(ctx, t, set, kx, *reg, bundle)
	case reg != nil:
		pushThroughput(t, res, "create-cluster's push of the bundle's images into the registry it deployed on "+reg.host.Name+" (link rate "+linkRate()+")")
		checkPulledFromRegistry(ctx, t, set, kx, *reg, bundle)
		registryRestartWhileScaling(ctx, t, set, k, *reg)
	default:
		haFailover(ctx, t, set, diag, k, kubectl, kubeconfig, work, cni, machines, masters, workers)
	}

	// The admin kubeconfig names n1 again, which is back; the rotation
	// rewrites it, and the re-run below must find the rotated cluster fit.
	if rot := os.Getenv("KUBEXM_E2E_CA_ROTATION"); rot != "0" && rot != "kubeadm" {
		desc := "binary mode"
		if reg != nil {
			desc += ", the registry kubexm deployed"
		}
		caRotation(ctx, t, kx, k, set, masters, workers, root, work, "e2e-ha", bundle, caLayout{
			desc: desc, workCAs: []string{"kubernetes/ca.crt", "kubernetes/front-proxy-ca.crt", "etcd/ca.crt"},
			maxGap: 15 * time.Second, minLeaves: 5 * len(set.Hosts), registry: reg})
	}

	// --diff: a change the re-run finds is shown, not only named.
	res = kx.play(ctx, create, "--offline-bundle", bundle, "--diff")
	if res.err != nil {
		t.Fatalf("re-run failed: %v%s", res.err, res.failures())
	}
	// Issue 55's goal for 5 machines is under 8 s quiet; the slowest tasks
	// say where a loaded run's time went.
	t.Logf("PERF create-cluster re-run (nothing to change): %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(15))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run changed %d things, want 0:\n  %s%s", len(c), strings.Join(c, "\n  "), res.changedDiffs())
	}

	if withNginx {
		checkNginxSwitch(ctx, t, set, kxNginx, create, bundle, masters, workers)
	}

	kxDelete := kx
	if reg != nil && !external {
		// The registry's stored images too: delete keeps them unless asked.
		kxDelete.extra = append(slices.Clone(kx.extra), "registry_delete_data=true")
	}
	checkDeleteRestores(ctx, t, set, kxDelete, del, fresh)
	for _, h := range set.Hosts {
		if out, err := set.SSH(ctx, h.Name, cniLeftovers+"true"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("delete left on %s (%v):\n%s", h.Name, err, out)
		}
	}
	if external {
		externalRegistryKept(ctx, t, set, kx, *reg, bundle)
		// The same machines, the same bundle, side-loading (no registry):
		// what the registry costs or saves a create.
		kxPlain := kx
		kxPlain.inventory = filepath.Join(work, "cluster-sideload.yaml")
		if err := os.WriteFile(kxPlain.inventory, []byte(plainYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		load := loadAverage()
		res = kxPlain.play(ctx, create, "--offline-bundle", bundle)
		if res.err != nil {
			t.Fatalf("create-cluster side-loading after the delete failed after %s: %v%s", res.wall, res.err, res.failures())
		}
		k.image = ""
		checkNodes(ctx, t, k, set)
		t.Logf("PERF create-cluster side-loading the bundle's images (no registry) on the same %d machines after the delete: %s (%d changed; link rate %s, load average %s before it); from the registry %s: %s",
			machines, res.wall.Round(time.Millisecond), len(res.changed()), linkRate(), load, reg.name, createWall.Round(time.Millisecond))
	}
	t.Logf("PERF the HA suite on %d machines (%s%s): %s", machines, haNetworkName(cni, encap), haRegistryName(reg), time.Since(suiteStart).Round(time.Second))
}

// haFailover: n1 loses its power while a worker's client polls the API
// through the endpoint, n1 goes NotReady, a Deployment made then runs (and
// is deleted, its pods gone before the next step), and the cluster
// converges without kubexm once n1 is back.
func haFailover(ctx context.Context, t *testing.T, set *testhosts.Set, diag *diagnostics, k kubectlRunner, kubectl, kubeconfig, work, cni string, machines int, masters, workers []testhosts.Host) {
	t.Helper()
	victim, survivor, poller := masters[0], masters[1], workers[0]
	cut := failover(ctx, t, set, victim, poller, "failover", false)

	// The control machine's kubeconfig names n1 (it has no local proxy):
	// from here on the test talks to a surviving master.
	k2 := survivorKubectl(t, kubectl, kubeconfig, work, victim, survivor)
	k2.image = k.image
	diag.cluster(k2)
	if out, err := k2.run(ctx, "", "wait", "--for=condition=Ready=Unknown", "node/"+victim.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%s not marked unreachable: %v\n%s", victim.Name, err, out)
	}
	t.Logf("PERF %s NotReady (Unknown) %s after its power-off", victim.Name, time.Since(cut).Round(time.Second))
	deployAfterFailover(ctx, t, k2, "failover")

	// --- power on: the cluster converges without kubexm ------------------
	powerOnConverges(ctx, t, set, machines, k2, etcdctl, masters, victim)
	if cni == "calico" {
		if out, err := k2.run(ctx, "", "-n", "kube-system", "rollout", "status", "daemonset/calico-node", "--timeout=180s"); err != nil {
			t.Fatalf("calico-node after %s's power-on: %v\n%s", victim.Name, err, out)
		}
	}
	// The Deployment's pods go in the background after its delete; the
	// rotation must find only pods that stay.
	if out, err := k2.run(ctx, "", "wait", "--for=delete", "pod", "-l", "app=after-failover", "-n", "default", "--timeout=180s"); err != nil {
		t.Fatalf("the pods of the deleted Deployment are still there: %v\n%s", err, out)
	}
}

// haCNI is the HA suite's network from KUBEXM_E2E_HA_CNI: calico (the
// default) with vxlan, calico-bgp (calico with BGP and no encapsulation:
// the test machines share one bridge), or flannel; and calico's
// encapsulation (vxlan or none) for checkCalico.
func haCNI(t *testing.T) (cni, encap string) {
	t.Helper()
	switch v := os.Getenv("KUBEXM_E2E_HA_CNI"); v {
	case "", "calico":
		return "calico", "vxlan"
	case "calico-bgp":
		return "calico", "none"
	case "flannel":
		return "flannel", ""
	default:
		t.Fatalf("KUBEXM_E2E_HA_CNI=%s: want calico, calico-bgp or flannel", v)
		return "", ""
	}
}

// haNetwork puts cni (and with encap none calico's vxlanMode Never) into
// haClusterYAML's network.
func haNetwork(y, cni, encap string) string {
	network := "    plugin: " + cni + "\n"
	if encap == "none" {
		network += "    calico: {vxlanMode: Never, ipipMode: Never}\n"
	}
	return strings.Replace(y, "    plugin: flannel\n", network, 1)
}

// haNetworkName names the network in PERF lines.
func haNetworkName(cni, encap string) string {
	if encap == "" {
		return cni
	}
	return cni + " " + map[string]string{"vxlan": "vxlan", "none": "BGP without encapsulation"}[encap]
}

// checkNginxSwitch changes the cluster to internalLoadbalancer nginx (the
// loadbalancer plays only): the workers' haproxy goes, nginx from the
// bundle takes its port; a second run changes nothing; a client on a worker
// polls the API through nginx while the first master's API server is
// stopped (nginx only sees failed connections: no active health checks).
func checkNginxSwitch(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, create, bundle string, masters, workers []testhosts.Host) {
	t.Helper()
	start := time.Now()
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--tags", "loadbalancer")
	if res.err != nil {
		t.Fatalf("create-cluster --tags loadbalancer with internalLoadbalancer nginx: %v%s", res.err, res.failures())
	}
	t.Logf("PERF haproxy replaced by nginx on %d workers (--tags loadbalancer): %s (%d changed)", len(workers), res.wall.Round(time.Millisecond), len(res.changed()))
	for _, w := range workers {
		out, err := set.SSH(ctx, w.Name, `systemctl is-active kubexm-nginx.service || true
test -e /etc/systemd/system/kubexm-haproxy.service && echo haproxy-unit || echo no-haproxy-unit
test -e /etc/kubexm/haproxy && echo haproxy-config || echo no-haproxy-config
ss -Hltnp 'sport = :6443' | grep -o '"[a-z]*"' | sort -u | tr '\n' ' '`)
		if err != nil {
			t.Fatalf("nginx on %s: %v\n%s", w.Name, err, out)
		}
		if got, want := strings.Fields(out), []string{"active", "no-haproxy-unit", "no-haproxy-config", `"nginx"`}; !slices.Equal(got, want) {
			t.Errorf("%s after the switch to nginx: %v, want %v", w.Name, got, want)
		}
	}
	cfg, err := set.SSH(ctx, workers[0].Name, "cat /etc/kubexm/nginx/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		if !strings.Contains(cfg, fmt.Sprintf("server %s:6443 ", m.Address)) {
			t.Errorf("nginx on %s has no backend %s:\n%s", workers[0].Name, m.Name, cfg)
		}
	}
	res = kx.play(ctx, create, "--offline-bundle", bundle, "--tags", "loadbalancer")
	if res.err != nil {
		t.Fatalf("nginx re-run: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("nginx re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	// The first master's API server stops (connections refused) while a
	// worker's client polls through nginx; it starts again afterwards.
	poller := workers[0]
	const samples, period = 100, 200 * time.Millisecond // 20 s
	stats := pollAcross(ctx, t, set, poller, samples, period, 3*time.Second, func() {
		if out, err := set.SSH(ctx, masters[0].Name, "systemctl stop kube-apiserver"); err != nil {
			t.Errorf("stopping kube-apiserver on %s: %v\n%s", masters[0].Name, err, out)
		}
	})
	if out, err := set.SSH(ctx, masters[0].Name, "systemctl start kube-apiserver"); err != nil {
		t.Errorf("starting kube-apiserver on %s: %v\n%s", masters[0].Name, err, out)
	}
	t.Logf("PERF nginx: kube-apiserver of %s stopped while a client on %s polls %s every 200 ms: longest gap %s, %d of %d requests failed (%.1f%%)",
		masters[0].Name, poller.Name, haEndpoint, stats.longestGap, stats.failed, stats.total, 100*float64(stats.failed)/float64(stats.total))
	if stats.longestGap > 5*time.Second || stats.tailFailed > 0 {
		t.Errorf("through nginx the API was away for %s, %d of the last 25 requests failed", stats.longestGap, stats.tailFailed)
	}
	t.Logf("PERF the nginx steps: %s", time.Since(start).Round(time.Second))
}

// haClusterYAML: n1-n3 masters and etcd, n4 and n5 workers, a local haproxy
// on the workers.
func haClusterYAML(name string, set *testhosts.Set) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\nspec:\n  hosts:\n", name)
	for _, h := range set.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, address: %s, internalAddress: %s, port: %d, user: root, privateKeyPath: %q}\n",
			h.Name, h.Address, h.Address, h.Port, set.KeyPath)
	}
	fmt.Fprintf(&b, "  roleGroups:\n    etcd: [n1, n2, n3]\n    master: [n1, n2, n3]\n    worker: [n4, n5]\n")
	fmt.Fprintf(&b, `  controlPlaneEndpoint:
    internalLoadbalancer: haproxy
  kubernetes:
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

// checkEndpointWiring: every kubeconfig on every node names the endpoint;
// the domain resolves to 127.0.0.1 on the workers, where kubexm's haproxy
// listens with every master as a backend, and to the master itself on the
// masters, which run no proxy.
func checkEndpointWiring(ctx context.Context, t *testing.T, set *testhosts.Set, masters, workers []testhosts.Host) {
	t.Helper()
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, `grep -h '^ *server:' /etc/kubernetes/*.kubeconfig | sort -u
getent hosts lb.kubexm.local | awk '{print "resolves", $1}'
systemctl is-active kubexm-haproxy.service 2>/dev/null || true
dpkg-query -W -f='${Status}\n' haproxy 2>/dev/null | grep -c 'install ok installed' || true`)
		if err != nil {
			t.Fatalf("endpoint wiring on %s: %v\n%s", h.Name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || strings.TrimSpace(lines[0]) != "server: "+haEndpoint {
			t.Errorf("%s: kubeconfigs and hosts entry:\n%s\nwant only server: %s", h.Name, out, haEndpoint)
			continue
		}
		isWorker := false
		for _, w := range workers {
			isWorker = isWorker || w.Name == h.Name
		}
		want := []string{"resolves " + h.Address, "inactive", "0"}
		if isWorker {
			want = []string{"resolves 127.0.0.1", "active", "1"}
		}
		if got := lines[1:]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: domain, kubexm-haproxy and the haproxy package: %v, want %v", h.Name, got, want)
		}
	}
	cfg, err := set.SSH(ctx, workers[0].Name, "cat /etc/kubexm/haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		if !strings.Contains(cfg, fmt.Sprintf("server %s %s:6443", m.Name, m.Address)) {
			t.Errorf("haproxy on %s has no backend %s:\n%s", workers[0].Name, m.Name, cfg)
		}
	}
	t.Logf("every kubeconfig names %s; the workers reach it through their haproxy, the masters directly", haEndpoint)
}

// etcdctlFunc runs etcdctl on a host against endpoints: etcdctl (etcd.type
// kubexm) or kubeadmEtcdctl (kubeadm's stacked etcd).
type etcdctlFunc func(ctx context.Context, set *testhosts.Set, host, endpoints string, args string) (string, error)

// checkMasterEtcd waits (3 minutes at most) for the masters' etcd to have
// all its members healthy, asked through from with ctl.
func checkMasterEtcd(ctx context.Context, t *testing.T, set *testhosts.Set, ctl etcdctlFunc, masters []testhosts.Host, from testhosts.Host) {
	t.Helper()
	var eps []string
	for _, m := range masters {
		eps = append(eps, "https://"+net.JoinHostPort(m.Address, "2379"))
	}
	out, err := retry(ctx, 3*time.Minute, func() (string, error) {
		out, err := ctl(ctx, set, from.Name, strings.Join(eps, ","), "endpoint health -w json")
		if err != nil {
			return out, err
		}
		var health []struct {
			Health bool `json:"health"`
		}
		if err := json.Unmarshal([]byte(out), &health); err != nil {
			return out, err
		}
		healthy := 0
		for _, h := range health {
			if h.Health {
				healthy++
			}
		}
		if healthy != len(masters) {
			return out, fmt.Errorf("%d healthy members, want %d", healthy, len(masters))
		}
		return out, nil
	})
	if err != nil {
		t.Fatalf("etcd on the masters: %v\n%s", err, out)
	}
}

// pollScript asks the API, through the endpoint, for the poller's own Node
// (with its kubelet's credentials: binary mode's kubeconfig embeds them,
// kubeadm's names the kubelet's rotated certificate and key, one file)
// every period, n times, and prints "<unix ms> <HTTP status>" per request
// (000 when none came, then curl's exit code: 000:28 timed out, 000:7 no
// connection). A request waits up to 5 s, as TestNodes' poller does: with
// two suites' clusters on 2 cores (load average 50-70) a healthy
// endpoint's answer takes over 2 s every 30 s or so, which is load, not an
// outage; a dead master behind the endpoint still costs haproxy's 2 s
// connect timeout before the retry on another, inside those 5 s.
func pollScript(n int, period time.Duration, node string) string {
	return fmt.Sprintf(`set -u
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
kc=/etc/kubernetes/kubelet.kubeconfig
if [ -e $kc ]; then
  awk '/client-certificate-data:/ {print $2}' $kc | base64 -d > "$d/c.crt"
  awk '/client-key-data:/ {print $2}' $kc | base64 -d > "$d/c.key"
else
  cp /var/lib/kubelet/pki/kubelet-client-current.pem "$d/c.crt"
  cp /var/lib/kubelet/pki/kubelet-client-current.pem "$d/c.key"
fi
start=$(date +%%s%%N)
for i in $(seq 0 %d); do
  next=$((start + i * %d))
  now=$(date +%%s%%N)
  [ "$now" -lt "$next" ] && sleep "$(awk -v ns=$((next - now)) 'BEGIN{printf "%%.3f", ns / 1e9}')"
  code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 5 --cacert /etc/kubernetes/pki/ca.crt \
    --cert "$d/c.crt" --key "$d/c.key" %s/api/v1/nodes/%s) || code="$code:$?"
  echo "$(date +%%s%%3N) $code"
done`, n-1, period.Nanoseconds(), haEndpoint, node)
}

type pollStats struct {
	total, failed, tailFailed int
	longestGap, firstAfterCut time.Duration
	// outages are the runs of failed requests, for a failure's report.
	outages []pollOutage
	// answers are the times of the successful requests.
	answers []time.Time
}

// longestGapFrom is the longest time between two answers of which the
// first came at from or later: the outages that began then.
func (s pollStats) longestGapFrom(from time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(s.answers); i++ {
		if s.answers[i-1].Before(from) {
			continue
		}
		if g := s.answers[i].Sub(s.answers[i-1]); g > longest {
			longest = g
		}
	}
	return longest
}

// longestOutageFrom is the longest outage that began at from or later
// (its last answer before it came then) with at least minFailed failed
// requests in it.
func (s pollStats) longestOutageFrom(from time.Time, minFailed int) time.Duration {
	var longest time.Duration
	for _, o := range s.outages {
		if o.from.Before(from) || len(o.codes) < minFailed {
			continue
		}
		if d := o.to.Sub(o.from); d > longest {
			longest = d
		}
	}
	return longest
}

// pollOutage is a run of failed requests: from the last answer before it
// to the next answer (or the poll's end), with the failed requests' codes.
type pollOutage struct {
	from, to time.Time
	codes    []string
}

func (o pollOutage) String() string {
	return fmt.Sprintf("%s from %s to %s, %d failed (%s)", o.to.Sub(o.from).Round(time.Millisecond),
		o.from.UTC().Format("15:04:05.000"), o.to.UTC().Format("15:04:05.000"), len(o.codes), runs(o.codes))
}

// runs writes codes with each run of one code once, counted: "000:7 x3 503".
func runs(codes []string) string {
	var out []string
	for i := 0; i < len(codes); {
		j := i
		for j < len(codes) && codes[j] == codes[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s x%d", codes[i], j-i))
		} else {
			out = append(out, codes[i])
		}
		i = j
	}
	return strings.Join(out, " ")
}

// pollMinRequests is the fewest requests a poll is judged on.
const pollMinRequests = 50

// parsePoll reads pollScript's output: the longest time between two
// successful answers, the failed requests, those among the last 25, and
// when the first answer after the cut came.
func parsePoll(out string, cut time.Time) (pollStats, error) {
	var s pollStats
	var lastOK int64
	var codes []string
	var last int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return s, fmt.Errorf("poller output line %q", line)
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return s, fmt.Errorf("poller output line %q: %w", line, err)
		}
		s.total++
		last = ms
		codes = append(codes, f[1])
		if f[1] != "200" {
			s.failed++
			if n := len(s.outages); n == 0 || !s.outages[n-1].to.IsZero() {
				from := lastOK
				if from == 0 {
					from = ms
				}
				s.outages = append(s.outages, pollOutage{from: time.UnixMilli(from)})
			}
			o := &s.outages[len(s.outages)-1]
			o.codes = append(o.codes, f[1])
			continue
		}
		if n := len(s.outages); n > 0 && s.outages[n-1].to.IsZero() {
			s.outages[n-1].to = time.UnixMilli(ms)
		}
		lastOK = ms
		s.answers = append(s.answers, time.UnixMilli(ms))
	}
	if n := len(s.outages); n > 0 && s.outages[n-1].to.IsZero() {
		s.outages[n-1].to = time.UnixMilli(last) // still out when the poll ended
	}
	if s.total < pollMinRequests {
		return s, fmt.Errorf("the poller made %d requests, want at least %d:\n%s", s.total, pollMinRequests, out)
	}
	for _, c := range codes[len(codes)-25:] {
		if c != "200" {
			s.tailFailed++
		}
	}
	s.longestGap = s.longestGapFrom(time.Time{})
	for _, at := range s.answers {
		if at.After(cut) {
			s.firstAfterCut = at.Sub(cut)
			break
		}
	}
	return s, nil
}

// installedPackages lists a host's installed packages with their versions.
func installedPackages(ctx context.Context, t *testing.T, set *testhosts.Set, host string) string {
	t.Helper()
	out, err := set.SSH(ctx, host, `dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' | awk '$1 ~ /^.i/ {print $2, $3}' | LC_ALL=C sort`)
	if err != nil {
		t.Fatalf("packages of %s: %v", host, err)
	}
	return "\n" + out
}

// packageChanges compares two installedPackages lists: changed has a line
// per package added (+), removed (-) or downgraded; upgraded names the
// packages at a newer version (dpkg --compare-versions on this machine).
func packageChanges(ctx context.Context, before, after string) (changed, upgraded []string) {
	versions := func(s string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				m[f[0]] = f[1]
			}
		}
		return m
	}
	b, a := versions(before), versions(after)
	for _, name := range slices.Sorted(maps.Keys(b)) {
		old, now := b[name], a[name]
		switch {
		case now == "":
			changed = append(changed, "- "+name+" "+old)
		case now == old:
		case exec.CommandContext(ctx, "dpkg", "--compare-versions", now, "gt", old).Run() == nil:
			upgraded = append(upgraded, name+" "+old+" -> "+now)
		default:
			changed = append(changed, "- "+name+" "+old, "+ "+name+" "+now)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a)) {
		if _, ok := b[name]; !ok {
			changed = append(changed, "+ "+name+" "+a[name])
		}
	}
	return changed, upgraded
}

// withoutPurgeSideEffects drops from a snapshot diff what Debian itself
// changes when a package is purged, not kubexm: the backup copies of the
// user and group files (passwd-, group-, shadow-, gshadow-) that adduser and
// deluser rewrite while the files themselves come back as they were, and
// the directories under /etc/systemd/system that were empty before
// (deb-systemd-helper purge removes every empty one; the test machines'
// getty.target.wants is empty, a real host's is not).
func withoutPurgeSideEffects(before map[string]string, diff []string) []string {
	var out []string
	for _, d := range diff {
		switch {
		case strings.HasPrefix(d, "changed /etc/"):
			p := strings.TrimPrefix(d, "changed ")
			p = p[:strings.IndexAny(p, ": ")]
			if slices.Contains([]string{"/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-"}, p) {
				continue
			}
		case strings.HasPrefix(d, "removed /etc/systemd/system/"):
			dir := strings.TrimPrefix(d, "removed ")
			empty := strings.HasPrefix(before[dir], " d ")
			for p := range before {
				if strings.HasPrefix(p, dir+"/") {
					empty = false
					break
				}
			}
			if empty {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

func TestWithoutPurgeSideEffects(t *testing.T) {
	before := map[string]string{
		"/etc/systemd/system/getty.target.wants":                  " d 755 root:root ",
		"/etc/systemd/system/multi-user.target.wants":             " d 755 root:root ",
		"/etc/systemd/system/multi-user.target.wants/ssh.service": " l 777 root:root /lib/systemd/system/ssh.service",
		"/etc/group-": " f 644 root:root  sha256=aa",
	}
	diff := []string{
		"changed /etc/group-: f 644 root:root  sha256=aa -> f 644 root:root  sha256=bb",
		"changed /etc/group: f 644 root:root  sha256=aa -> f 644 root:root  sha256=bb",
		"removed /etc/systemd/system/getty.target.wants",
		"removed /etc/systemd/system/multi-user.target.wants",
		"added /etc/haproxy d 755 root:root ",
	}
	got := withoutPurgeSideEffects(before, diff)
	want := []string{diff[1], diff[3], diff[4]}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// hostState is what each host looks like before kubexm: its files under
// the snapshot's directories and its installed packages.
type hostState struct {
	dirs  []string
	files map[string]map[string]string
	pkgs  map[string]string
}

func takeHostState(ctx context.Context, t *testing.T, set *testhosts.Set, dirs ...string) hostState {
	t.Helper()
	st := hostState{dirs: dirs, files: map[string]map[string]string{}, pkgs: map[string]string{}}
	for _, h := range set.Hosts {
		st.files[h.Name] = snapshot(ctx, t, set, h.Name, dirs...)
		st.pkgs[h.Name] = installedPackages(ctx, t, set, h.Name)
	}
	return st
}

// checkDeleteRestores runs delete -e delete_packages=true twice: the first
// must leave every host's files and package set as fresh had them, the
// second must change nothing.
// deleteLeavesNoVIP runs checkDeleteRestores, then wants vip (when set) on
// none of holders.
func deleteLeavesNoVIP(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, del string, fresh hostState, holders []testhosts.Host, vip string) {
	t.Helper()
	checkDeleteRestores(ctx, t, set, kx, del, fresh)
	for _, h := range holders {
		if out, err := set.SSH(ctx, h.Name, "ip -o addr show"); err != nil || (vip != "" && strings.Contains(out, " "+vip+"/")) {
			t.Errorf("%s still holds the VIP after the delete: %v\n%s", h.Name, err, out)
		}
	}
}

func checkDeleteRestores(ctx context.Context, t *testing.T, set *testhosts.Set, kx kubexm, del string, fresh hostState) {
	t.Helper()
	res := kx.play(ctx, del, "-e", "delete_packages=true")
	if res.err != nil {
		t.Fatalf("delete failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF delete (with the packages): %s", res.wall.Round(time.Millisecond))
	for _, h := range set.Hosts {
		before := fresh.files[h.Name]
		if d := withoutPurgeSideEffects(before, diffSnapshots(before, snapshot(ctx, t, set, h.Name, fresh.dirs...))); len(d) > 0 {
			t.Errorf("delete left %s different from before the create:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
		got := installedPackages(ctx, t, set, h.Name)
		changed, upgraded := packageChanges(ctx, fresh.pkgs[h.Name], got)
		if len(changed) > 0 {
			t.Errorf("delete left %s with other packages than before the create:\n%s", h.Name, strings.Join(changed, "\n"))
		}
		if len(upgraded) > 0 {
			// The offline install may upgrade a package the host had when a
			// dependency from the bundle wants that exact version
			// (roles/loadbalancer); delete keeps it, as it keeps every
			// package the host had.
			t.Logf("%s: upgraded by the offline install and kept: %s", h.Name, strings.Join(upgraded, ", "))
		}
	}
	res = kx.play(ctx, del, "-e", "delete_packages=true")
	if res.err != nil {
		t.Fatalf("second delete failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("second delete changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}

// survivorKubectl is a kubectl on a copy of the admin kubeconfig that names
// survivor's API server instead of victim's, which is powered off.
func survivorKubectl(t *testing.T, kubectl, kubeconfig, work string, victim, survivor testhosts.Host) kubectlRunner {
	t.Helper()
	k2 := kubectlRunner{bin: kubectl, kubeconfig: filepath.Join(work, "kubeconfig-"+survivor.Name)}
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	victimURL := "https://" + net.JoinHostPort(victim.Address, "6443")
	if !strings.Contains(string(data), "server: "+victimURL) {
		t.Fatalf("the admin kubeconfig does not name %s:\n%s", victimURL, tail(string(data), 5))
	}
	if err := os.WriteFile(k2.kubeconfig, []byte(strings.ReplaceAll(string(data), victimURL, "https://"+net.JoinHostPort(survivor.Address, "6443"))), 0o600); err != nil {
		t.Fatal(err)
	}
	return k2
}

// deployAfterFailover wants a Deployment of 2 pods made after the
// failover to run, then deletes it.
func deployAfterFailover(ctx context.Context, t *testing.T, k2 kubectlRunner, label string) {
	t.Helper()
	image, pull := k2.busybox(t)
	deploy := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: after-failover, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: after-failover}}
  template:
    metadata: {labels: {app: after-failover}}
    spec:
      containers:
      - name: main
        image: %s
        imagePullPolicy: %s
        command: [/bin/busybox, sleep, "3600"]
`, image, pull)
	start := time.Now()
	if out, err := k2.run(ctx, deploy, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply a Deployment after the failover: %v\n%s", err, out)
	}
	if out, err := k2.run(ctx, "", "rollout", "status", "deployment/after-failover", "-n", "default", "--timeout=240s"); err != nil {
		desc, _ := k2.run(ctx, "", "describe", "pods", "-n", "default", "-l", "app=after-failover")
		t.Fatalf("the Deployment made after the failover does not run: %v\n%s\n%s", err, out, tail(desc, 60))
	}
	t.Logf("PERF a Deployment created after the %s has its 2 pods running %s after the apply", label, time.Since(start).Round(time.Second))
	if out, err := k2.run(ctx, "", "delete", "deployment/after-failover", "-n", "default", "--wait=true"); err != nil {
		t.Errorf("kubectl delete the Deployment: %v\n%s", err, out)
	}
}

// powerOnConverges powers victim on again and wants the cluster to converge
// without kubexm: the node Ready, and etcd's 3 members healthy (asked with ctl).
func powerOnConverges(ctx context.Context, t *testing.T, set *testhosts.Set, machines int, k2 kubectlRunner, ctl etcdctlFunc, masters []testhosts.Host, victim testhosts.Host) {
	t.Helper()
	start := time.Now()
	if _, err := testhosts.Up(ctx, machines, set.Prefix, "KUBELET=1"); err != nil {
		t.Fatalf("powering %s on: %v", victim.Name, err)
	}
	if out, err := k2.run(ctx, "", "wait", "--for=condition=Ready", "node/"+victim.Name, "--timeout=300s"); err != nil {
		t.Fatalf("%s not Ready after its power-on: %v\n%s", victim.Name, err, out)
	}
	checkMasterEtcd(ctx, t, set, ctl, masters, victim)
	t.Logf("PERF %s back: node Ready and etcd 3 healthy members %s after the power-on", victim.Name, time.Since(start).Round(time.Second))
}

// failover powers victim off while a client on poller polls the endpoint
// every 200 ms for 80 s, logs the figures as PERF label, and wants the API
// back through the endpoint within 15 s: the health checks take a dead
// backend out within 2 checks of 1 s plus a connect timeout of 2 s, and
// etcd elects a new leader within seconds. With unplug its link goes down
// too (pullPlug): connections to it then time out instead of being
// refused by the network namespace's kernel, as for a machine that is
// really off (plugBack before its power-on). It returns when the power
// went.
func failover(ctx context.Context, t *testing.T, set *testhosts.Set, victim, poller testhosts.Host, label string, unplug bool) time.Time {
	t.Helper()
	const samples, period = 400, 200 * time.Millisecond // 80 s
	cut := time.Now()
	stats := pollAcross(ctx, t, set, poller, samples, period, 5*time.Second, func() {
		cut = time.Now()
		if unplug {
			pullPlug(ctx, t, set, victim)
			return
		}
		if err := testhosts.PowerOff(ctx, set.Prefix, victim.Name); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s powered off", victim.Name)
	})
	t.Logf("PERF %s (master %s powered off, a client on %s polls %s every 200 ms): longest gap %s, %d of %d requests failed (%.1f%%), the first answer after the cut %s after it; outages %v",
		label, victim.Name, poller.Name, haEndpoint, stats.longestGap, stats.failed, stats.total, 100*float64(stats.failed)/float64(stats.total), stats.firstAfterCut, stats.outages)
	if stats.longestGap > 15*time.Second {
		t.Errorf("the API was away for %s through the endpoint, want under 15 s", stats.longestGap)
	}
	if stats.tailFailed > 0 {
		t.Errorf("%d of the last 25 requests failed: the endpoint did not recover", stats.tailFailed)
	}
	return cut
}

// pollAcross has a client on poller ask the API through the endpoint
// (pollScript) n times every period, runs cut lead after the first request,
// and returns the statistics around the cut.
func pollAcross(ctx context.Context, t *testing.T, set *testhosts.Set, poller testhosts.Host, n int, period, lead time.Duration, cut func()) pollStats {
	t.Helper()
	type result struct {
		out string
		err error
	}
	polled := make(chan result, 1)
	go func() {
		out, err := set.SSH(ctx, poller.Name, pollScript(n, period, poller.Name))
		polled <- result{out, err}
	}()
	time.Sleep(lead) // answers before the cut, as the baseline
	at := time.Now()
	cut()
	p := <-polled
	if p.err != nil {
		t.Fatalf("the poller on %s: %v\n%s", poller.Name, p.err, tail(p.out, 20))
	}
	stats, err := parsePoll(p.out, at)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}
