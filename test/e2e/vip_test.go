//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// TestVIPControlPlane is issue 19's acceptance for externalLoadBalancer
// kubexm: n1-n3 masters and etcd, n4 worker, n5 and n6 loadbalancer hosts
// running haproxy and keepalived from the offline bundle, holding the
// virtual IP .250 of the test subnet (controlPlaneEndpoint.lb_address),
// every node's control-plane domain pointing at it. Not in `make e2e`
// (CI's time budget, 6 machines): `make e2e-vip`.
//
//   - create-cluster --offline-bundle: one loadbalancer host holds the VIP,
//     the other is BACKUP, both with kubexm-haproxy and kubexm-keepalived
//     active; the cluster's nodes are Ready through the VIP;
//   - failover: a client on n4 asks the API through the VIP every 200 ms
//     while the VIP holder loses its power; the VIP moves to the other
//     host; the longest gap and the failed requests are PERF lines;
//   - the holder is powered on again: its keepalived comes back BACKUP and
//     the VIP stays where it is (nopreempt: one move, not two);
//   - master n1 loses its power while n4 polls through the VIP: haproxy on
//     the VIP holder takes it out; n1 NotReady, a new Deployment runs; n1
//     powered on, Ready again and etcd 3 healthy members without kubexm;
//   - a re-run changes nothing; delete -e delete_packages=true leaves every
//     host's files and package set as they were; a second delete changes
//     nothing.
//
// KUBEXM_E2E_VIP=kube-vip runs the other VIP shape instead, kube-vip on the
// masters (kubeVIPSuite, `make e2e-vip-kube-vip`); KUBEXM_E2E_VIP=nginx
// runs these steps with nginx beside keepalived on the loadbalancer hosts
// (internalLoadbalancer nginx, `make e2e-vip-nginx`).
func TestVIPControlPlane(t *testing.T) {
	parallelSuite(t)
	proxy := os.Getenv("KUBEXM_E2E_VIP")
	switch proxy {
	case "kube-vip":
		kubeVIPSuite(t)
		return
	case "":
		proxy = "haproxy"
	case "haproxy", "nginx":
	default:
		t.Fatalf("KUBEXM_E2E_VIP=%s: want haproxy (the default), nginx or kube-vip", proxy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()

	releaseRoot := clusterArtifacts(ctx, t, root)
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	const machines = 6
	set, diag := suiteMachines(ctx, t, machines, "v", "KUBELET=1")
	if len(set.Hosts) != machines {
		t.Fatalf("want %d machines, have %d", machines, len(set.Hosts))
	}
	nodes, masters, worker, lbs := set.Hosts[:4], set.Hosts[:3], set.Hosts[3], set.Hosts[4:]
	vip := set.Gateway[:strings.LastIndex(set.Gateway, ".")] + ".250"

	inventory := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(vipClusterYAML("e2e-vip", set, vip, proxy)), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := kubexm{bin: bin, dir: work, inventory: inventory, extra: extraVars(clusterTestVars()...), observe: diag.observe}
	kubeconfig := filepath.Join(work, ".kubexm", "e2e-vip", "kubeconfig")
	k := kubectlRunner{bin: kubectl, kubeconfig: kubeconfig}
	diag.cluster(k)

	wide := []string{"/etc", "/usr/local", "/usr/sbin", "/opt", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/kubexm"}
	fresh := takeHostState(ctx, t, set, wide...)

	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	bundle := exportBundle(ctx, t, kx, server, " with keepalived's and "+proxy+"'s packages")
	stop()
	list, _ := bundleEntries(t, bundle, "")
	pkgs := []string{"keepalived", "haproxy"}
	if proxy == "nginx" {
		pkgs = []string{"keepalived", "nginx", "libnginx-mod-stream"}
	}
	for _, p := range pkgs {
		if !regexp.MustCompile(`(?m)^(?:\./)?packages/[a-z]+[0-9.]*/amd64/` + p + `_[^/]+\.deb$`).Match(list) {
			t.Fatalf("the bundle has no %s package:\n%s", p, tail(string(list), 40))
		}
	}

	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")
	res := kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster (3 masters, 1 worker, 2 loadbalancer hosts with keepalived and %s, offline bundle) on %d fresh machines: %s (%d changed)",
		proxy, machines, res.wall.Round(time.Millisecond), len(res.changed()))

	// The admin kubeconfig on the control machine names the VIP too.
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if want := "server: https://" + vip + ":6443"; !strings.Contains(string(data), want) {
		t.Fatalf("the admin kubeconfig does not name the VIP (%s):\n%s", want, tail(string(data), 5))
	}
	for _, n := range nodes {
		if out, err := k.run(ctx, "", "wait", "--for=condition=Ready", "node/"+n.Name, "--timeout=180s"); err != nil {
			t.Fatalf("node %s not Ready through the VIP: %v\n%s", n.Name, err, out)
		}
		out, err := set.SSH(ctx, n.Name, `grep -h '^ *server:' /etc/kubernetes/*.kubeconfig | sort -u; getent hosts lb.kubexm.local | awk '{print $1}'`)
		if err != nil || strings.Join(strings.Fields(out), " ") != "server: "+haEndpoint+" "+vip {
			t.Errorf("%s: kubeconfigs and the domain: %v\n%s\nwant only server: %s, the domain at %s", n.Name, err, out, haEndpoint, vip)
		}
	}
	holder, backup := vipHolder(ctx, t, set, lbs, vip, proxy)
	t.Logf("%s holds the VIP %s, %s is its backup", holder.Name, vip, backup.Name)
	mastered := vrrpMastered(ctx, t, set, []string{holder.Name, backup.Name}, nil, "after create-cluster")

	checkMasterEtcd(ctx, t, set, etcdctl, masters, masters[1])

	// --- failover: the VIP holder loses its power while n4 polls ----------
	poller := worker
	const samples, period = 300, 200 * time.Millisecond // 60 s
	// poweroff.sh keeps the machine's network namespace, whose kernel would
	// still answer ARP for the VIP (and refuse connections to it): a pulled
	// plug takes the link down too.
	cut := time.Now()
	stats := pollAcross(ctx, t, set, poller, samples, period, 5*time.Second, func() {
		cut = time.Now()
		pullPlug(ctx, t, set, holder)
		moved, err := retry(ctx, 30*time.Second, func() (string, error) {
			out, err := set.SSH(ctx, backup.Name, "ip -o addr show")
			if err == nil && !strings.Contains(out, " "+vip+"/") {
				err = fmt.Errorf("%s does not hold %s yet", backup.Name, vip)
			}
			return out, err
		})
		if err != nil {
			t.Fatalf("the VIP did not move: %v\n%s", err, moved)
		}
		t.Logf("PERF the VIP on %s %s after %s's power-off (seen over ssh)", backup.Name, time.Since(cut).Round(100*time.Millisecond), holder.Name)
	})
	// VRRP declares the master dead after 3 adverts (lb_vrrp_advert_int,
	// 0.5 s) plus the skew, about 1.7 s, then the new holder announces the
	// VIP by gratuitous ARP.
	checkVIPGap(t, stats, "VIP failover (loadbalancer host "+holder.Name+" powered off", poller)

	// --- power on: keepalived comes back BACKUP, the VIP stays -------------
	// A reboot starts without the addresses keepalived had added; the link
	// comes back with the power, and with it the default route, which the
	// kernel dropped with the link (the nodes' name server is behind it).
	plugBack(ctx, t, set, holder, vip)
	start := time.Now()
	if _, err := testhosts.Up(ctx, machines, set.Prefix, "KUBELET=1"); err != nil {
		t.Fatalf("powering %s on: %v", holder.Name, err)
	}
	out, err := retry(ctx, 2*time.Minute, func() (string, error) {
		out, err := set.SSH(ctx, holder.Name, "journalctl -b -u kubexm-keepalived --no-pager | grep -c 'Entering BACKUP STATE' || true")
		if err == nil && strings.TrimSpace(out) == "0" {
			err = fmt.Errorf("keepalived on %s is not BACKUP yet", holder.Name)
		}
		return out, err
	})
	if err != nil {
		t.Fatalf("%s after its power-on: %v\n%s", holder.Name, err, out)
	}
	if h, _ := vipHolder(ctx, t, set, lbs, vip, proxy); h.Name != backup.Name {
		t.Errorf("the VIP went back to %s after its power-on (nopreempt)", h.Name)
	}
	t.Logf("PERF %s back: keepalived BACKUP %s after the power-on, the VIP stays on %s", holder.Name, time.Since(start).Round(time.Second), backup.Name)

	// --- failover: master n1 loses its power while n4 polls the VIP -------
	// The admin kubeconfig names the VIP, so it needs no survivor's copy.
	// nginx has passive health checks only: with nginx the master is
	// unplugged too, so that nginx meets connect timeouts, as for a
	// machine that is really off, not refusals from its namespace's kernel.
	victim := masters[0]
	cut = failover(ctx, t, set, victim, poller, "master failover behind the VIP ("+proxy+")", proxy == "nginx")
	if out, err := k.run(ctx, "", "wait", "--for=condition=Ready=Unknown", "node/"+victim.Name, "--timeout=180s"); err != nil {
		t.Fatalf("%s not marked unreachable: %v\n%s", victim.Name, err, out)
	}
	t.Logf("PERF %s NotReady (Unknown) %s after its power-off", victim.Name, time.Since(cut).Round(time.Second))
	deployAfterFailover(ctx, t, k, "master failover behind the VIP")
	if proxy == "nginx" {
		plugBack(ctx, t, set, victim, "")
	}
	powerOnConverges(ctx, t, set, machines, k, etcdctl, masters, victim)
	// The backup took the VIP once more; the old holder, since its
	// power-on, never.
	vrrpMastered(ctx, t, set, []string{holder.Name, backup.Name}, map[string]int{holder.Name: 0, backup.Name: mastered[backup.Name] + 1}, "after the failovers")

	rerun(ctx, t, kx, "create-cluster", create, "--offline-bundle", bundle)
	deleteLeavesNoVIP(ctx, t, set, kx, del, fresh, lbs, vip)
	t.Logf("PERF the VIP suite on %d machines: %s", machines, time.Since(suiteStart).Round(time.Second))
}

// vrrpMastered counts how often each of hosts' keepalived became MASTER
// since the host's boot, logs it as a PERF line and, with want, wants
// those counts: more is a flap (a holder whose adverts stalled for the
// master-down interval on a loaded host, a backup taking the VIP and
// yielding it back), which a client sees as a gap too.
func vrrpMastered(ctx context.Context, t *testing.T, set *testhosts.Set, hosts []string, want map[string]int, when string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, h := range hosts {
		// keepalived logs each line twice, through syslog (Keepalived_vrrp[pid])
		// and on its console (keepalived[pid], --log-console): the syslog one
		// is counted.
		out, err := set.SSH(ctx, h, `journalctl -b -u kubexm-keepalived --no-pager | grep -c 'Keepalived_vrrp\[[0-9]*\]: .*Entering MASTER STATE' || true`)
		if err != nil {
			t.Fatalf("keepalived's journal on %s: %v\n%s", h, err, out)
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("keepalived's MASTER count on %s: %q", h, out)
		}
		got[h] = n
	}
	t.Logf("PERF keepalived became MASTER (since each host's boot) %v %s", got, when)
	if want != nil && !maps.Equal(got, want) {
		t.Errorf("keepalived became MASTER %v times %s, want %v: the VIP flapped", got, when, want)
	}
	return got
}

// vipClusterYAML: the HA suite's (n1-n3 masters and etcd) with n4 the only
// worker and n5, n6 loadbalancer hosts holding vip instead of a local
// proxy on the workers, with proxy (haproxy or nginx) beside keepalived.
func vipClusterYAML(name string, set *testhosts.Set, vip, proxy string) string {
	y := haClusterYAML(name, set)
	y = strings.Replace(y, "    worker: [n4, n5]\n", "    worker: [n4]\n    loadbalancer: [n5, n6]\n", 1)
	cpe := "  controlPlaneEndpoint:\n    externalLoadBalancer: kubexm\n    lb_address: " + vip + "\n"
	if proxy == "nginx" {
		cpe += "    internalLoadbalancer: nginx\n"
	}
	return strings.Replace(y, "  controlPlaneEndpoint:\n    internalLoadbalancer: haproxy\n", cpe, 1)
}

// vipHolder says which of the loadbalancer hosts holds vip (exactly one
// must), and the other; kubexm's proxy (kubexm-haproxy or kubexm-nginx)
// and keepalived must be active on both.
func vipHolder(ctx context.Context, t *testing.T, set *testhosts.Set, lbs []testhosts.Host, vip, proxy string) (holder, other testhosts.Host) {
	t.Helper()
	var holders []testhosts.Host
	for _, h := range lbs {
		out, err := set.SSH(ctx, h.Name, "systemctl is-active kubexm-"+proxy+" kubexm-keepalived; ip -o addr show")
		if err != nil {
			t.Fatalf("%s: %v\n%s", h.Name, err, out)
		}
		if f := strings.Fields(out); len(f) < 2 || f[0] != "active" || f[1] != "active" {
			t.Errorf("%s: kubexm-%s and kubexm-keepalived are not both active:\n%s", h.Name, proxy, out)
		}
		if strings.Contains(out, " "+vip+"/") {
			holders = append(holders, h)
		}
	}
	if len(holders) != 1 {
		t.Fatalf("%d loadbalancer hosts hold %s, want 1: %v", len(holders), vip, holders)
	}
	for _, h := range lbs {
		if h.Name != holders[0].Name {
			other = h
		}
	}
	return holders[0], other
}
