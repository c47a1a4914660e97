//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// TestKubeadmHA is issue 19's acceptance for kubeadm mode with
// internalLoadbalancer haproxy and issue 20's master steps in that mode, on
// one cluster carried through them: n1-n3 masters with kubeadm's stacked
// etcd, n4 and n5 workers.
//
//   - create-cluster --offline-bundle: `kubeadm init` on n1 with
//     controlPlaneEndpoint lb.kubexm.local:6443, `kubeadm join
//     --control-plane` on n2 and n3 (the domain points at n1 while each
//     joins, at the master itself afterwards), haproxy from the bundle on
//     n4 and n5 before each joins through it; kubelet.conf names the endpoint on
//     every node, the domain resolves to 127.0.0.1 on the workers and to each master
//     itself on the masters; etcd has 3 healthy members;
//   - failover: a client on n4 asks the API through its haproxy every
//     200 ms while n1 loses its power; PERF lines give the longest gap and
//     the failed share; n1 NotReady, a new Deployment runs; n1 powered on,
//     Ready again and etcd 3 healthy members without kubexm;
//   - delete-nodes -e nodes=n3: n3 leaves the workers' haproxy backends, is drained,
//     its Node deleted, its stacked member removed through n1, kubeadm reset
//     on it; 2 members and 4 nodes stay, the API answers through n4's
//     proxy; a re-run changes nothing;
//   - add-nodes: n3 joins again with --control-plane (kubeadm adds its
//     member), the workers' haproxy gets it back; a re-run changes nothing;
//   - a re-run of create-cluster changes nothing; delete -e
//     delete_packages=true leaves every host as it was.
//
// KUBEXM_E2E_KUBEADM_LB=kube-vip runs the same steps with
// internalLoadbalancer kube-vip instead (`make e2e-kubeadm-ha-kube-vip`):
// kube-vip's static pod on the masters holding the VIP .250, which the
// workers' domain names; the failover powers off the VIP holder (its link
// down too); delete-nodes takes n3 out of the election first.
// KUBEXM_E2E_KUBEADM_LB=nginx runs them with internalLoadbalancer nginx
// (`make e2e-kubeadm-ha-nginx`): nginx and its stream module from the
// bundle on the workers instead of haproxy, every step the same (nginx
// has passive health checks only: a powered-off master costs a connect
// timeout per try until it is marked failed).
func TestKubeadmHA(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()

	lb := os.Getenv("KUBEXM_E2E_KUBEADM_LB")
	switch lb {
	case "":
		lb = "haproxy"
	case "haproxy", "nginx", "kube-vip":
	default:
		t.Fatalf("KUBEXM_E2E_KUBEADM_LB=%s: want haproxy (the default), nginx or kube-vip", lb)
	}
	kubeVIP := lb == "kube-vip"
	releaseRoot := clusterArtifacts(ctx, t, root)
	kubeadmArtifacts(ctx, t, root, kubernetesVersion)
	if kubeVIP {
		kubeVIPArtifacts(ctx, t, root)
	}
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	const machines = 5
	set, diag := suiteMachines(ctx, t, machines, "k", "KUBELET=1")
	if len(set.Hosts) != machines {
		t.Fatalf("want %d machines, have %d", machines, len(set.Hosts))
	}
	masters, workers := set.Hosts[:3], set.Hosts[3:]
	vip := "" // the workers' haproxy or nginx
	if kubeVIP {
		vip = set.Gateway[:strings.LastIndex(set.Gateway, ".")] + ".250"
	}

	const name = "e2e-kubeadm-ha"
	inventory := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(kubeadmHAClusterYAML(name, set, lb, vip)), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := append(clusterTestVars(),
		fmt.Sprintf(`{"kubeadm_etcd_image_version": %q}`, kubeadmEtcdImageTag),
		// systemd-nspawn machines: kubeadm cannot read the kernel's
		// configuration and the hosts run cgroup v1 (SystemVerification).
		`{"kubeadm_ignore_preflight_errors": ["SystemVerification"]}`)
	kx := kubexm{bin: bin, dir: work, inventory: inventory, extra: extraVars(vars...), observe: diag.observe}
	k := kubectlRunner{bin: kubectl, kubeconfig: filepath.Join(work, ".kubexm", name, "kubeconfig")}
	diag.cluster(k)

	wide := []string{"/etc", "/usr/local", "/usr/sbin", "/opt", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/kubexm"}
	fresh := takeHostState(ctx, t, set, wide...)
	for _, h := range set.Hosts {
		for _, p := range []string{"haproxy", "nginx"} {
			if strings.Contains(fresh.pkgs[h.Name], "\n"+p+" ") {
				t.Fatalf("%s has %s before the create: the test would not prove the bundle path", h.Name, p)
			}
		}
	}

	// The bundle holds the mode's packages (haproxy, or nginx and its
	// stream module) with their closure.
	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	lbName := "internal " + lb
	if kubeVIP {
		lbName = "kube-vip"
	}
	bundle := exportBundle(ctx, t, kx, server, " (kubeadm, stacked etcd, "+lbName+")")
	stop()

	pb := func(p string) string { return filepath.Join(root, "playbooks", p) }
	res := kx.play(ctx, pb("create-cluster"), "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	createdAt := time.Now()
	t.Logf("PERF create-cluster (kubeadm, 3 masters with stacked etcd, 2 workers, %s, offline bundle) on %d fresh machines: %s (%d changed)",
		lbName, machines, res.wall.Round(time.Millisecond), len(res.changed()))

	checkKubeadmEndpointWiring(ctx, t, set, masters, masters, workers, lb, vip)
	checkNodes(ctx, t, k, set)
	checkMasterEtcd(ctx, t, set, kubeadmEtcdctl, masters, masters[1])

	// --- failover: n1 (the VIP holder with kube-vip) loses its power while
	// the worker's client polls --------------------------------------------
	victim, survivor, poller := masters[0], masters[1], workers[0]
	var cut time.Time
	var moved testhosts.Host
	k2 := k // with kube-vip the control machine's kubeconfig names the VIP
	if kubeVIP {
		victim = kubeVIPHolder(ctx, t, set, masters, vip)
		// kubexm keeps etcd's leader off the VIP holder (with kubeadm's
		// etcd: its healthcheck client certificate, the tools beside it):
		// a power-off then waits for the Lease, not for etcd's election
		// first. Handed to the holder, the leadership goes on again.
		etcdLeaderLeaves(ctx, t, set, kubeadmEtcdctl, masters, victim, createdAt, "the create")
		handed := time.Now()
		etcdMoveLeader(ctx, t, set, kubeadmEtcdctl, masters, victim, false)
		etcdLeaderLeaves(ctx, t, set, kubeadmEtcdctl, masters, victim, handed, "etcd's leadership was handed to it")
		cut, moved = kubeVIPFailover(ctx, t, set, masters, victim, poller, vip)
	} else {
		// nginx has passive health checks only: its master is unplugged
		// too, so that nginx meets connect timeouts, not refusals.
		cut = failover(ctx, t, set, victim, poller, "kubeadm failover ("+lb+")", lb == "nginx")
		// The control machine's kubeconfig names n1: talk to a survivor.
		k2 = survivorKubectl(t, kubectl, k.kubeconfig, work, victim, survivor)
		diag.cluster(k2)
	}
	if out, err := k2.run(ctx, "", "wait", "--for=condition=Ready=Unknown", "node/"+victim.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%s not marked unreachable: %v\n%s", victim.Name, err, out)
	}
	t.Logf("PERF %s NotReady (Unknown) %s after its power-off", victim.Name, time.Since(cut).Round(time.Second))
	deployAfterFailover(ctx, t, k2, "kubeadm failover")

	if kubeVIP || lb == "nginx" {
		plugBack(ctx, t, set, victim, vip)
	}
	powerOnConverges(ctx, t, set, machines, k2, kubeadmEtcdctl, masters, victim)
	if kubeVIP {
		kubeVIPBack(ctx, t, set, k, masters, victim, moved, vip)
	}
	if out, err := k.run(ctx, "", "wait", "--for=delete", "pod", "-l", "app=after-failover", "-n", "default", "--timeout=180s"); err != nil {
		t.Fatalf("the pods of the deleted Deployment are still there: %v\n%s", err, out)
	}

	// --- a master removed, then added back ----------------------------------
	gone := masters[2]
	staying := masters[:2]
	res = kx.play(ctx, pb("delete-nodes"), "-e", "nodes="+gone.Name)
	if res.err != nil {
		t.Fatalf("delete-nodes %s failed after %s: %v%s", gone.Name, res.wall, res.err, res.failures())
	}
	t.Logf("PERF delete-nodes, 1 kubeadm master with its stacked etcd member: %s", res.wall.Round(time.Millisecond))
	checkKubeadmMembers(ctx, t, k, set, staying, workers)
	checkKubeadmEndpointWiring(ctx, t, set, staying, staying, workers, lb, vip)
	if kubeVIP {
		kubeVIPHolder(ctx, t, set, staying, vip)
		if out, err := set.SSH(ctx, gone.Name, "test ! -e /etc/kubernetes/manifests/kube-vip.yaml && ! pgrep -x kube-vip && ! ip -o addr show | grep -F ' "+vip+"/'"); err != nil {
			t.Errorf("%s still takes part in kube-vip's election after delete-nodes: %v\n%s", gone.Name, err, out)
		}
	}
	out, err := set.SSH(ctx, gone.Name, `test -e /etc/kubernetes/kubelet.conf && echo kubelet.conf; test -d /var/lib/etcd && echo etcd-data; systemctl is-active kubelet || true`)
	if err != nil || strings.TrimSpace(out) != "inactive" {
		t.Errorf("%s after delete-nodes: %v\n%s\nwant no kubelet.conf, no etcd data, kubelet inactive", gone.Name, err, out)
	}
	rerun(ctx, t, kx, "delete-nodes (kubeadm master)", pb("delete-nodes"), "-e", "nodes="+gone.Name)

	res = kx.play(ctx, pb("add-nodes"), "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("add-nodes of master %s failed after %s: %v%s", gone.Name, res.wall, res.err, res.failures())
	}
	t.Logf("PERF add-nodes, 1 kubeadm master (join --control-plane, stacked etcd member): %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	checkKubeadmMembers(ctx, t, k, set, masters, workers)
	checkKubeadmEndpointWiring(ctx, t, set, masters, masters, workers, lb, vip)
	checkMasterEtcd(ctx, t, set, kubeadmEtcdctl, masters, gone)
	if kubeVIP {
		kubeVIPHolder(ctx, t, set, masters, vip)
	}
	rerun(ctx, t, kx, "add-nodes (kubeadm master)", pb("add-nodes"), "--offline-bundle", bundle)

	rerun(ctx, t, kx, "create-cluster (kubeadm HA)", pb("create-cluster"), "--offline-bundle", bundle)
	deleteLeavesNoVIP(ctx, t, set, kx, pb("delete"), fresh, masters, vip)
	t.Logf("PERF the kubeadm HA suite on %d machines: %s", machines, time.Since(suiteStart).Round(time.Second))
}

// kubeadmHAClusterYAML: haClusterYAML's cluster in kubeadm mode with the
// stacked etcd: n1-n3 masters, n4 and n5 workers; behind the workers'
// haproxy or nginx (lb), or with lb kube-vip on the masters holding vip.
func kubeadmHAClusterYAML(name string, set *testhosts.Set, lb, vip string) string {
	y := haClusterYAML(name, set)
	y = strings.Replace(y, "    type: kubexm\n    version:", "    type: kubeadm\n    version:", 1)
	if lb == "kube-vip" {
		y = strings.Replace(y, "  controlPlaneEndpoint:\n    internalLoadbalancer: haproxy\n",
			"  controlPlaneEndpoint:\n    internalLoadbalancer: kube-vip\n    lb_address: "+vip+"\n", 1)
	} else {
		y = strings.Replace(y, "    internalLoadbalancer: haproxy\n", "    internalLoadbalancer: "+lb+"\n", 1)
	}
	return strings.Replace(y, "  etcd:\n    type: kubexm\n", "  etcd:\n    type: kubeadm\n", 1)
}

// kubeadmEtcdctl runs the etcdctl kubexm puts beside kubeadm's stacked etcd
// on a master, with kubeadm's etcd healthcheck client certificate.
func kubeadmEtcdctl(ctx context.Context, set *testhosts.Set, host, endpoints string, args string) (string, error) {
	pki := "/etc/kubernetes/pki/etcd"
	return set.SSH(ctx, host, fmt.Sprintf("ETCDCTL_API=3 /usr/local/lib/kubexm/etcd/etcdctl --endpoints=%s --cacert=%s/ca.crt --cert=%s/healthcheck-client.crt --key=%s/healthcheck-client.key %s",
		endpoints, pki, pki, pki, args))
}

// checkKubeadmEndpointWiring: every worker's kubelet.conf and every
// master's admin.conf names the endpoint; the domain resolves to 127.0.0.1 on the
// workers, where kubexm's proxy lb (haproxy or nginx) listens with exactly
// backends as its backends (with kube-vip, vip not "": to the VIP, no
// proxy), and to the master itself on the masters, which run no proxy.
func checkKubeadmEndpointWiring(ctx context.Context, t *testing.T, set *testhosts.Set, masters, backends, workers []testhosts.Host, lb, vip string) {
	t.Helper()
	unit := "kubexm-haproxy"
	if lb == "nginx" {
		unit = "kubexm-nginx"
	}
	check := func(h testhosts.Host, files string, want []string) {
		out, err := set.SSH(ctx, h.Name, `grep -h '^ *server:' `+files+` | sort -u
getent hosts lb.kubexm.local | awk '{print "resolves", $1}'
systemctl is-active `+unit+`.service 2>/dev/null || true`)
		if err != nil {
			t.Fatalf("endpoint wiring on %s: %v\n%s", h.Name, err, out)
		}
		got := strings.Split(strings.TrimSpace(out), "\n")
		for i := range got {
			got[i] = strings.TrimSpace(got[i])
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: kubeconfigs, domain and %s: %v, want %v", h.Name, unit, got, want)
		}
	}
	// A master's kubelet.conf names its own API server's address (kubeadm's
	// ControlPlaneKubeletLocalMode), its admin.conf the endpoint.
	for _, m := range masters {
		check(m, "/etc/kubernetes/kubelet.conf /etc/kubernetes/admin.conf", []string{"server: https://" + net.JoinHostPort(m.Address, "6443"), "server: " + haEndpoint, "resolves " + m.Address, "inactive"})
	}
	for _, w := range workers {
		if vip != "" {
			check(w, "/etc/kubernetes/kubelet.conf", []string{"server: " + haEndpoint, "resolves " + vip, "inactive"})
			continue
		}
		check(w, "/etc/kubernetes/kubelet.conf", []string{"server: " + haEndpoint, "resolves 127.0.0.1", "active"})
		cfgFile := "/etc/kubexm/haproxy/haproxy.cfg"
		if lb == "nginx" {
			cfgFile = "/etc/kubexm/nginx/nginx.conf"
		}
		cfg, err := set.SSH(ctx, w.Name, "cat "+cfgFile)
		if err != nil {
			t.Fatalf("%s backends on %s: %v\n%s", lb, w.Name, err, cfg)
		}
		var servers, want []string
		for _, b := range backends {
			if lb == "nginx" {
				want = append(want, fmt.Sprintf("server %s:6443", b.Address))
			} else {
				want = append(want, fmt.Sprintf("server %s %s:6443", b.Name, b.Address))
			}
		}
		if lb == "nginx" {
			servers = nginxServers(cfg, "kube_apiserver")
		} else {
			servers = haproxyServers(cfg, "kube-apiserver")
		}
		if len(servers) != len(backends) {
			t.Errorf("%s on %s has %d backends, want %d:\n%s", lb, w.Name, len(servers), len(backends), cfg)
		}
		for _, b := range want {
			if !slices.ContainsFunc(servers, func(s string) bool { return s == b || strings.HasPrefix(s, b+" ") }) {
				t.Errorf("%s on %s has no backend %q:\n%s", lb, w.Name, b, cfg)
			}
		}
	}
}

// checkKubeadmMembers wants the Ready nodes to be exactly masters and
// workers, the stacked etcd's members exactly the masters (started voters,
// asked through the first), and the API to answer through the first
// worker's proxy.
func checkKubeadmMembers(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, masters, workers []testhosts.Host) {
	t.Helper()
	var hosts []int
	var l nodesLayout
	for i, h := range set.Hosts {
		for _, m := range masters {
			if m.Name == h.Name {
				hosts = append(hosts, i)
				l.master = append(l.master, i)
				l.etcd = append(l.etcd, i)
			}
		}
		for _, w := range workers {
			if w.Name == h.Name {
				hosts = append(hosts, i)
				l.worker = append(l.worker, i)
			}
		}
	}
	l.hosts = hosts
	checkMembershipWith(ctx, t, k, set, kubeadmEtcdctl, l)
	out, err := retry(ctx, time.Minute, func() (string, error) {
		return set.SSH(ctx, workers[0].Name, fmt.Sprintf(`curl -sS -o /dev/null -w '%%{http_code}' --max-time 5 --cacert /etc/kubernetes/pki/ca.crt \
  --cert /var/lib/kubelet/pki/kubelet-client-current.pem --key /var/lib/kubelet/pki/kubelet-client-current.pem %s/api/v1/nodes/%s | grep -x 200`, haEndpoint, workers[0].Name))
	})
	if err != nil {
		t.Errorf("the API through %s's proxy: %v\n%s", workers[0].Name, err, out)
	}
}
