//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// TestCalicoNodeParts runs, on one test machine, the parts of calico that
// need no cluster (the kubeadm suite runs calico itself: checkCalico):
//
//   - preflight refuses ipipMode Always on the test kernel, which has no
//     ipip module, naming the node and the setting; vxlan passes;
//   - the MTU probe reads the node's interface (1500) and calico_veth_mtu
//     takes vxlan's 50 bytes off;
//   - the role's delete removes what calico-node leaves on a node (made here
//     by hand as felix makes it: vxlan.calico, a cali* veth, protocol-80
//     routes, cali-* chains in every table with the jumps into them, the
//     CNI plugins, conflist, kubeconfig and state directories) and nothing
//     else (another chain, route and CNI plugin stay); a second delete
//     changes nothing.
//
// The playbooks run from a fork whose matrix has every calico mode
// supported, since the built-in one refuses the modes no suite has run
// (ipip among them).
func TestCalicoNodeParts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	root := moduleRoot(t)
	work := t.TempDir()
	bin := buildKubexm(ctx, t, root, work)
	set, _ := suiteMachines(ctx, t, 1, "cal")
	node := set.Hosts[0].Name

	fork := filepath.Join(work, "fork")
	if err := os.MkdirAll(filepath.Join(fork, "roles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fork, "roles", "support.yaml"), calicoSupportedMatrix(t, root), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := `name: calico-parts
defaults_files: [` + filepath.Join(root, "roles", "artifacts", "defaults", "main.yaml") + `]
plays:
  - {name: preflight, hosts: all, become: true, roles: [preflight]}
  - {name: calico MTU, hosts: k8s_cluster, become: true, tags: [calico-parts], roles: [{role: cni/calico, tasks_from: mtu}]}
  - {name: remove calico, hosts: k8s_cluster, become: true, tags: [calico-parts], roles: [{role: cni/calico, tasks_from: delete}]}
`
	if err := os.WriteFile(filepath.Join(fork, "playbook.yaml"), []byte(pb), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name, calico string) runResult {
		t.Helper()
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		inv := filepath.Join(dir, "cluster.yaml")
		y := clusterYAML("calico", set) + "  network:\n    plugin: calico\n" + calico
		if err := os.WriteFile(inv, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		k := kubexm{bin: bin, dir: dir, inventory: inv}
		return k.play(ctx, fork, "--tags", "check-kernel,calico-parts")
	}
	ssh := func(script string) string {
		t.Helper()
		out, err := set.SSH(ctx, node, script)
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return strings.TrimSpace(out)
	}

	// ipip on a kernel without it: refused before anything is changed.
	res := run("ipip", "    calico: {ipipMode: Always}\n")
	if res.err == nil {
		t.Fatalf("ipipMode Always passed preflight on a kernel without ipip")
	}
	if f := res.failures(); !strings.Contains(f, "[ipip]") || !strings.Contains(f, "has no ipip module") ||
		!strings.Contains(f, "ipipMode Always") || !strings.Contains(f, node) {
		t.Errorf("preflight's refusal does not name the check, node and setting:%s", f)
	}
	if got := ssh("ip -o link show | grep -c calico || true"); got != "0" {
		t.Errorf("the refused run changed the node: %s calico links", got)
	}

	// What felix and install-cni leave on a node, and what is not calico's.
	ssh(`set -e
ip link add vxlan.calico type vxlan id 4096 dstport 4789 dev eth0
ip addr add 10.233.64.0/32 dev vxlan.calico
ip link set vxlan.calico up
ip link add cali0123456789a type veth peer name kxm-peer
ip route add blackhole 10.233.64.0/26 proto 80
ip route add 10.233.65.0/26 via 10.233.65.0 dev vxlan.calico onlink proto 80
ip route add blackhole 192.0.2.0/24 proto static
iptables -t filter -N cali-INPUT
iptables -t filter -N cali-from-wl-dispatch
iptables -t filter -A cali-INPUT -j cali-from-wl-dispatch
iptables -t filter -A INPUT -m comment --comment "cali:Cz_u1IQiXIMmKD4c" -j cali-INPUT
iptables -t nat -N cali-POSTROUTING
iptables -t nat -N cali-nat-outgoing
iptables -t nat -A cali-POSTROUTING -j cali-nat-outgoing
iptables -t nat -A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING
iptables -t raw -N cali-PREROUTING
iptables -t raw -A PREROUTING -m comment --comment "cali:6gwbT8clXdHdC1b1" -j cali-PREROUTING
iptables -t mangle -N cali-PREROUTING
iptables -t mangle -A PREROUTING -m comment --comment "cali:6gwbT8clXdHdC1b1" -j cali-PREROUTING
iptables -t filter -N KXM-KEEP
iptables -t filter -A FORWARD -j KXM-KEEP
mkdir -p /etc/cni/net.d /opt/cni/bin /var/lib/calico /var/run/calico /var/log/calico/cni /var/run/nodeagent
echo '{}' > /etc/cni/net.d/10-calico.conflist
echo kubeconfig > /etc/cni/net.d/calico-kubeconfig
echo calico > /opt/cni/bin/calico
echo calico-ipam > /opt/cni/bin/calico-ipam
echo portmap > /opt/cni/bin/portmap
echo ` + node + ` > /var/lib/calico/nodename
echo log > /var/log/calico/cni/cni.log`)

	res = run("vxlan", "")
	if res.err != nil {
		t.Fatalf("vxlan: %v%s", res.err, res.failures())
	}
	mtu := ""
	for _, e := range res.events {
		if strings.HasPrefix(e.Message, "calico MTU ") {
			mtu = e.Message
		}
	}
	if want := fmt.Sprintf("calico MTU %d (vxlan)", 1500-50); mtu != want {
		t.Errorf("MTU message %q, want %q", mtu, want)
	}
	left := ssh(`ip -o link show | awk -F': ' '{print $2}' | grep -E '^(vxlan[.-]|cali|kxm-peer)' || true
ip route show proto 80
iptables-save | grep -E '^(:cali-|-A .*cali-)' || true
for f in /etc/cni/net.d/10-calico.conflist /etc/cni/net.d/calico-kubeconfig /opt/cni/bin/calico /opt/cni/bin/calico-ipam \
         /var/lib/calico /var/run/calico /var/log/calico /var/run/nodeagent; do
  if [ -e "$f" ]; then echo "left: $f"; fi
done`)
	if left != "" {
		t.Errorf("delete left calico behind:\n%s", left)
	}
	kept := ssh(`ip route show proto static | grep -c 192.0.2.0/24; iptables -S FORWARD | grep -c KXM-KEEP; cat /opt/cni/bin/portmap`)
	if kept != "1\n1\nportmap" {
		t.Errorf("delete removed what is not calico's (route, chain jump, portmap plugin): %q", kept)
	}
	removed := 0
	for _, c := range res.changed() {
		if strings.Contains(c, "calico - remove") {
			removed++
		}
	}
	if removed != 4 {
		t.Errorf("%d of the 4 removal tasks changed something: %v", removed, res.changed())
	}

	res = run("again", "")
	if res.err != nil {
		t.Fatalf("second run: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) != 0 {
		t.Errorf("a second delete changed %v", c)
	}
	t.Logf("TestCalicoNodeParts took %s", time.Since(start).Round(time.Second))
}

// calicoSupportedMatrix is roles/support.yaml with every value of
// spec.network.calico.* supported (calico itself, vxlanMode Always and
// Never and ipipMode Never are already).
func calicoSupportedMatrix(t *testing.T, root string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "roles", "support.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const supported = `{status: supported, tested: "TestCalicoNodeParts' fork"}`
	var b strings.Builder
	field := ""
	flipped := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			field = strings.TrimSuffix(strings.TrimSpace(line), ":")
		}
		value, _, ok := strings.Cut(strings.TrimSpace(line), ": {status: not supported yet")
		if ok && strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") &&
			((field == "spec.network.plugin" && value == "calico") || strings.HasPrefix(field, "spec.network.calico.")) {
			line = "    " + value + ": " + supported
			flipped++
		}
		b.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if flipped != 3 {
		t.Fatalf("flipped %d entries of roles/support.yaml for calico, want 3 (ipipMode Always and CrossSubnet, vxlanMode CrossSubnet)", flipped)
	}
	return []byte(b.String())
}

// checkCalico checks a calico cluster the kubeadm suite or the HA suite made
// (issue 49): calico-node Ready on every machine and calico-kube-controllers
// available; the pool calico-node made is the cluster's kubePodsCIDR (the
// default, 10.233.64.0/18) in /26 blocks with encap's encapsulation. With
// vxlan each node's vxlan.calico has its interface's MTU less 50; with none
// (BGP without encapsulation) no node has vxlan.calico, BIRD runs on each
// and has given it a route (protocol bird) to every other node's block
// through that node's own address. It logs, as PERF, the time from the
// DaemonSet's creation until the last calico-node became Ready.
func checkCalico(ctx context.Context, t *testing.T, set *testhosts.Set, k kubectlRunner, encap string) {
	t.Helper()
	dsCreated, err := k.run(ctx, "", "-n", "kube-system", "get", "daemonset/calico-node", "-o", "jsonpath={.metadata.creationTimestamp}")
	if err != nil {
		t.Fatalf("calico-node's DaemonSet: %v\n%s", err, dsCreated)
	}
	created, err := time.Parse(time.RFC3339, strings.TrimSpace(dsCreated))
	if err != nil {
		t.Fatalf("calico-node's DaemonSet created %q: %v", dsCreated, err)
	}
	out, err := k.run(ctx, "", "-n", "kube-system", "get", "pods", "-l", "k8s-app=calico-node", "-o", "json")
	if err != nil {
		t.Fatalf("calico-node: %v\n%s", err, out)
	}
	var list struct {
		Items []struct {
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Conditions []struct {
					Type   string    `json:"type"`
					Status string    `json:"status"`
					Since  time.Time `json:"lastTransitionTime"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("calico-node: %v\n%s", err, out)
	}
	var lastReady time.Time
	ready := map[string]bool{}
	for _, it := range list.Items {
		for _, c := range it.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready[it.Spec.NodeName] = true
				if c.Since.After(lastReady) {
					lastReady = c.Since
				}
			}
		}
	}
	for _, h := range set.Hosts {
		if !ready[h.Name] {
			t.Errorf("calico-node is not Ready on %s", h.Name)
		}
	}
	t.Logf("PERF calico-node Ready on all %d nodes %s after its DaemonSet was created", len(ready), lastReady.Sub(created).Round(time.Second))
	if out, err := k.run(ctx, "", "-n", "kube-system", "rollout", "status", "deployment/calico-kube-controllers", "--timeout=60s"); err != nil {
		t.Errorf("calico-kube-controllers: %v\n%s", err, out)
	}

	wantPool := map[string]string{"vxlan": "10.233.64.0/18 26 Always Never true", "none": "10.233.64.0/18 26 Never Never true"}[encap]
	if wantPool == "" {
		t.Fatalf("checkCalico: encapsulation %q, want vxlan or none", encap)
	}
	pool, err := k.run(ctx, "", "get", "ippools.crd.projectcalico.org", "default-ipv4-ippool", "-o",
		"jsonpath={.spec.cidr} {.spec.blockSize} {.spec.vxlanMode} {.spec.ipipMode} {.spec.natOutgoing}")
	if err != nil || strings.TrimSpace(pool) != wantPool {
		t.Errorf("calico's pool: %v %q, want %s", err, pool, wantPool)
	}
	if encap == "none" {
		checkCalicoBGPRoutes(ctx, t, set, k)
		return
	}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, `dev=$(ip -o addr show to `+h.Address+` | awk '{print $2; exit}')
echo $(cat /sys/class/net/$dev/mtu) $(cat /sys/class/net/vxlan.calico/mtu)`)
		f := strings.Fields(out)
		mtu := 0
		if len(f) == 2 {
			mtu, _ = strconv.Atoi(f[0])
		}
		if err != nil || len(f) != 2 || strconv.Itoa(mtu-50) != f[1] {
			t.Errorf("%s: interface and vxlan.calico MTUs %q (%v), want the second 50 less", h.Name, strings.TrimSpace(out), err)
		}
	}
}

// checkCalicoBGPRoutes: with BGP and no encapsulation every node runs
// BIRD, has no vxlan.calico, and routes every other node's block (from the
// BlockAffinities calico's IPAM made) through that node's address, learnt
// over BGP (protocol bird), so that a pod's packet crosses the shared L2
// network as it is.
func checkCalicoBGPRoutes(ctx context.Context, t *testing.T, set *testhosts.Set, k kubectlRunner) {
	t.Helper()
	out, err := k.run(ctx, "", "get", "blockaffinities.crd.projectcalico.org", "-o",
		`jsonpath={range .items[*]}{.spec.node} {.spec.cidr} {.spec.state}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("calico's block affinities: %v\n%s", err, out)
	}
	blocks := map[string][]string{} // node -> its confirmed blocks
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[2] == "confirmed" {
			blocks[f[0]] = append(blocks[f[0]], f[1])
		}
	}
	addr := map[string]string{}
	for _, h := range set.Hosts {
		addr[h.Name] = h.Address
	}
	for _, h := range set.Hosts {
		out, err := retry(ctx, time.Minute, func() (string, error) {
			out, err := set.SSH(ctx, h.Name, `pgrep -x bird >/dev/null && echo bird-runs
ip -o link show vxlan.calico >/dev/null 2>&1 && echo has-vxlan.calico
ip -4 route show proto bird`)
			if err != nil {
				return out, err
			}
			var missing []string
			for node, bs := range blocks {
				if node == h.Name {
					continue
				}
				for _, b := range bs {
					if !strings.Contains(out, b+" via "+addr[node]+" ") {
						missing = append(missing, b+" via "+addr[node])
					}
				}
			}
			if len(missing) > 0 {
				return out, fmt.Errorf("no BGP route %s", strings.Join(missing, ", "))
			}
			return out, nil
		})
		if err != nil || !strings.Contains(out, "bird-runs") || strings.Contains(out, "has-vxlan.calico") {
			t.Errorf("%s with BGP and no encapsulation: %v\n%s\n(blocks: %v)", h.Name, err, out, blocks)
		}
	}
	if !t.Failed() {
		t.Logf("BGP without encapsulation: BIRD on all %d nodes, each routes the other nodes' blocks through their addresses (blocks %v)", len(set.Hosts), blocks)
	}
}

// calicoImages adds calico's images (test/artifacts/calico.sh, from its
// release source in $KUBEXM_SOURCES_DIR) to the release tree's images.
func calicoImages(ctx context.Context, t *testing.T, root string) {
	t.Helper()
	buildArtifact(ctx, t, root, []string{"GOARCH=amd64"}, "calico.sh", "images")
}

// cniLeftovers prints what a CNI left on a host that delete should have
// removed: flannel's and calico's links, processes, routes (felix's
// protocol 80, BIRD's), iptables chains and directories; nothing on a clean
// host.
const cniLeftovers = `ip -o link show | grep -oE ' (flannel\.1|cni0|vxlan\.calico|cali[0-9a-f]+)[:@]' || true
pgrep -x 'flanneld|calico-node|bird|bird6' || true
ip route show proto 80
ip route show proto bird
iptables-save 2>/dev/null | grep -m1 -E '^:cali-' || true
for p in /var/lib/calico /var/run/calico /var/log/calico /var/run/nodeagent; do
  [ -e $p ] && echo "left $p"
done
`

// calicoRepair: an edit by hand of a field calico's manifest sets is a
// change the next run finds, reports and undoes (roles/cni/calico applies a
// manifest when kubectl diff finds a change): calico-config's
// typha_service_name (read by felix only when Typha runs, which it does not
// below calico_typha_threshold nodes) set to another value, then
// `create-cluster --tags cni` changes exactly the manifest's apply and puts
// the value back, and a second such run changes nothing.
func calicoRepair(ctx context.Context, t *testing.T, create, master string, v kubeadmVariant) {
	t.Helper()
	field := func() string {
		out, err := v.k.run(ctx, "", "-n", "kube-system", "get", "configmap", "calico-config", "-o", "jsonpath={.data.typha_service_name}")
		if err != nil {
			t.Fatalf("calico-config: %v\n%s", err, out)
		}
		return out
	}
	want := field()
	if out, err := v.k.run(ctx, "", "-n", "kube-system", "patch", "configmap", "calico-config", "--type", "merge",
		"-p", `{"data":{"typha_service_name":"edited-by-hand"}}`); err != nil {
		t.Fatalf("edit calico-config: %v\n%s", err, out)
	}
	res := v.kx.play(ctx, create, "--offline-bundle", v.bundle, "--tags", "cni")
	if res.err != nil {
		t.Fatalf("create-cluster --tags cni after calico-config was edited failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster --tags cni undoing an edit of calico-config: %s", res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) != 1 || c[0] != master+": calico - kubectl apply calico.yaml" {
		t.Errorf("create-cluster --tags cni after calico-config was edited changed %q, want only calico's apply of calico.yaml", c)
	}
	if got := field(); got != want {
		t.Errorf("calico-config's typha_service_name after the run: %q, want %q", got, want)
	}
	res = v.kx.play(ctx, create, "--offline-bundle", v.bundle, "--tags", "cni")
	if res.err != nil {
		t.Fatalf("create-cluster --tags cni re-run failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("create-cluster --tags cni re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}
