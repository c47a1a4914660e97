//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// identityPaths are the PKI a binary-mode cluster runs with, and kubexm's
// copy of it on the masters.
var identityPaths = []string{"/etc/kubernetes/pki", "/etc/kubexm/etcd/ssl", "/var/lib/kubexm/pki"}

// clusterIdentity is issue 44's acceptance on a running binary-mode cluster
// created from kx's work directory (A): from an empty directory B,
// create-cluster and add-nodes adopt the cluster's PKI (nothing on any host
// changes, the CA and service-account key stay, A's admin kubeconfig, a
// service-account token and CoreDNS keep working); a directory C holding
// another CA is refused before any change, with both fingerprints; two runs
// at once from A and B: exactly one runs, the other is refused naming the
// holder. It returns B's kubexm, for the certificate renewal from there.
func clusterIdentity(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, root, name, bundle string) (kubexm, string) {
	t.Helper()
	create := filepath.Join(root, "playbooks", "create-cluster")
	master := set.Hosts[0].Name
	snapAll := func() map[string]map[string]string {
		s := map[string]map[string]string{}
		for _, h := range set.Hosts {
			s[h.Name] = snapshot(ctx, t, set, h.Name, identityPaths...)
		}
		return s
	}
	unchanged := func(what string, before map[string]map[string]string) {
		t.Helper()
		for _, h := range set.Hosts {
			if d := diffSnapshots(before[h.Name], snapshot(ctx, t, set, h.Name, identityPaths...)); len(d) > 0 {
				t.Errorf("%s changed the PKI of %s:\n  %s", what, h.Name, strings.Join(d, "\n  "))
			}
		}
	}
	caFP := hostCertFingerprint(ctx, t, set, master, "/etc/kubernetes/pki/ca-signer.crt")
	saFP := hostFileSum(ctx, t, set, master, "/etc/kubernetes/pki/sa.pub")
	token, err := k.run(ctx, "", "create", "token", "default", "-n", "default", "--duration", "1h")
	if err != nil {
		t.Fatalf("a service-account token: %v: %s", err, token)
	}
	dnsPods := func() string {
		out, err := k.run(ctx, "", "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns",
			"-o", "jsonpath={range .items[*]}{.metadata.uid}:{.status.containerStatuses[0].restartCount} {end}")
		if err != nil {
			t.Fatalf("CoreDNS pods: %v: %s", err, out)
		}
		return out
	}
	dnsBefore := dnsPods()
	before := snapAll()

	// --- B: an empty directory with the same cluster.yaml ------------------
	dirB := t.TempDir()
	kxB := kx
	kxB.dir = dirB
	res := kxB.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster from an empty directory failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster from an empty work directory (adopting the cluster's PKI): %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(8))
	// What it changed is B's own work directory (the PKI taken from the
	// masters, the artifacts of the bundle, the admin kubeconfig): the
	// snapshots below show that no host changed.
	t.Logf("create-cluster from an empty directory changed, on the control machine: %s", strings.Join(res.changed(), "; "))
	unchanged("create-cluster from an empty directory", before)
	if got := hostCertFingerprint(ctx, t, set, master, "/etc/kubernetes/pki/ca-signer.crt"); got != caFP {
		t.Errorf("the cluster CA changed: %s -> %s", caFP, got)
	}
	if got := hostFileSum(ctx, t, set, master, "/etc/kubernetes/pki/sa.pub"); got != saFP {
		t.Errorf("the service-account key changed: %s -> %s", saFP, got)
	}
	if out, err := k.run(ctx, "", "get", "nodes"); err != nil {
		t.Errorf("A's admin kubeconfig stopped working: %v: %s", err, out)
	}
	kB := kubectlRunner{bin: k.bin, kubeconfig: filepath.Join(dirB, ".kubexm", name, "kubeconfig")}
	if out, err := kB.run(ctx, "", "get", "nodes"); err != nil {
		t.Errorf("B's admin kubeconfig does not work: %v: %s", err, out)
	}
	tk := kubectlRunner{bin: k.bin, kubeconfig: os.DevNull}
	server := "https://" + set.Gateway + ":6443"
	if out, err := tk.run(ctx, "", "--server", server, "--certificate-authority", filepath.Join(dirB, ".kubexm", name, "certs", "kubernetes", "ca.crt"),
		"--token", strings.TrimSpace(token), "auth", "whoami"); err != nil || !strings.Contains(out, "system:serviceaccount:default:default") {
		t.Errorf("a service-account token made before the run from B: %v: %s", err, out)
	}
	if after := dnsPods(); after != dnsBefore {
		t.Errorf("CoreDNS's pods changed (uid:restarts): %q -> %q", dnsBefore, after)
	}

	// D: only cluster.yaml; get kubeconfig takes what it needs from the
	// cluster and changes nothing there.
	kubeconfigFromNothing(ctx, t, kx, k.bin)
	unchanged("get kubeconfig", before)

	res = kxB.play(ctx, filepath.Join(root, "playbooks", "add-nodes"), "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("add-nodes from B failed: %v%s", res.err, res.failures())
	}
	unchanged("add-nodes from B", before)

	// --- C: a directory holding another cluster's CA ------------------------
	dirC := t.TempDir()
	otherFP := writeTestCA(t, filepath.Join(dirC, ".kubexm", name, "certs", "kubernetes"), "kubernetes")
	kxC := kx
	kxC.dir = dirC
	res = kxC.play(ctx, create, "--offline-bundle", bundle)
	if res.err == nil {
		t.Fatal("create-cluster from a directory holding another CA succeeded")
	}
	if msg := res.failures(); !strings.Contains(msg, caFP) || !strings.Contains(msg, otherFP) || !strings.Contains(msg, "Nothing was changed") {
		t.Errorf("the refusal does not name both fingerprints (%s, %s):%s", caFP, otherFP, msg)
	}
	unchanged("the refused run from C", before)

	// --- a setting the running cluster cannot take is refused ----------------
	data, err := os.ReadFile(kx.inventory)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "  network:\n", "  network:\n    kubePodsCIDR: 10.1.0.0/16\n", 1)
	if changed == string(data) {
		t.Fatal("the cluster file has no network section to change")
	}
	kxP := kx
	kxP.inventory = filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(kxP.inventory, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	res = kxP.play(ctx, create, "--offline-bundle", bundle)
	if msg := res.failures(); res.err == nil || !strings.Contains(msg, "spec.network.kubePodsCIDR is 10.233.64.0/18 in the running cluster") || !strings.Contains(msg, "10.1.0.0/16 in this cluster.yaml") {
		t.Errorf("a changed pod range: %v%s", res.err, msg)
	}
	unchanged("the refused change of the pod range", before)

	// --- A and B at once: one runs, the other is refused naming the holder --
	var wg sync.WaitGroup
	results := make([]runResult, 2)
	for i, x := range []kubexm{kx, kxB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = x.play(ctx, create, "--offline-bundle", bundle, "--lock-wait", "1s")
		}()
	}
	wg.Wait()
	ok, refused := 0, ""
	for _, r := range results {
		if r.err == nil {
			ok++
		} else {
			refused = r.failures() + r.stderr
		}
	}
	if ok != 1 || !strings.Contains(refused, "in use by another kubexm run") || !strings.Contains(refused, "playbook create-cluster") {
		t.Errorf("two runs at once: %d succeeded, want exactly 1; the other said:%s", ok, refused)
	}
	unchanged("two runs at once", before)

	// --- a frozen holder (its control machine stopped, its sessions kept)
	// is reported, and --break-lock ends it -----------------------------------
	frozen := kx.command(ctx, create, "--offline-bundle", bundle)
	out, err := frozen.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := frozen.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Process.Kill(); _ = frozen.Wait() }()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Kind == "play_start" {
			break // the first play runs: the run holds the hosts' locks
		}
	}
	if err := frozen.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	res = kxB.play(ctx, create, "--offline-bundle", bundle, "--lock-wait", "1s")
	if res.err == nil || !strings.Contains(res.stderr, "in use by another kubexm run") || !strings.Contains(res.stderr, "--break-lock") {
		t.Errorf("a run beside a frozen one: %v, stderr %s", res.err, res.stderr)
	}
	res = kxB.play(ctx, create, "--offline-bundle", bundle, "--lock-wait", "1s", "--break-lock")
	if res.err != nil {
		t.Fatalf("--break-lock: %v%s", res.err, res.failures())
	}
	broke := false
	for _, e := range res.events {
		broke = broke || (e.Kind == "warning" && strings.Contains(e.Message, "--break-lock ended the run that held the kubexm lock"))
	}
	if !broke {
		t.Error("--break-lock did not say whose lock it broke")
	}
	unchanged("--break-lock's run", before)
	_ = frozen.Process.Kill()
	return kxB, dirB
}

// hostCertFingerprint is the SHA-256 of the DER form of the first
// certificate in a file on a host.
func hostCertFingerprint(ctx context.Context, t *testing.T, set *testhosts.Set, host, path string) string {
	t.Helper()
	out, err := set.SSH(ctx, host, "cat "+path)
	if err != nil {
		t.Fatalf("%s:%s: %v", host, path, err)
	}
	block, _ := pem.Decode([]byte(out))
	if block == nil {
		t.Fatalf("%s:%s holds no PEM block", host, path)
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}

func hostFileSum(ctx context.Context, t *testing.T, set *testhosts.Set, host, path string) string {
	t.Helper()
	out, err := set.SSH(ctx, host, "sha256sum "+path)
	if err != nil {
		t.Fatalf("%s:%s: %v", host, path, err)
	}
	return strings.Fields(out)[0]
}

// hostChanges is what a run changed but its own work directory: the copy of
// the cluster's PKI a directory that was behind takes from the masters, and
// the admin kubeconfig it then writes from the renewed admin certificate.
func hostChanges(res runResult) []string {
	var out []string
	for _, c := range res.changed() {
		if !strings.Contains(c, ": Cluster identity - what changed in the cluster's PKI") && !strings.HasSuffix(c, ": Kubernetes PKI - admin kubeconfig on the control machine") {
			out = append(out, c)
		}
	}
	return out
}

// kubeadmIdentity: in kubeadm mode, a create-cluster from an empty directory
// changes no PKI file on any host (kubeadm's own on the masters, etcd's with
// etcd.type kubexm), and every host's record names the cluster and
// kubeadm's CA as the first master holds it. It returns the variant run
// from that directory (B), for add-nodes and certs-renew from there.
func kubeadmIdentity(ctx context.Context, t *testing.T, create string, set *testhosts.Set, v kubeadmVariant) kubeadmVariant {
	t.Helper()
	paths := []string{"/etc/kubernetes/pki", "/etc/kubexm/etcd/ssl", "/var/lib/kubexm/pki"}
	before := map[string]map[string]string{}
	for _, h := range set.Hosts {
		before[h.Name] = snapshot(ctx, t, set, h.Name, paths...)
	}
	kxB := v.kx
	kxB.dir = t.TempDir()
	res := kxB.play(ctx, create, "--offline-bundle", v.bundle)
	if res.err != nil {
		t.Fatalf("create-cluster (kubeadm, %s) from an empty directory failed: %v%s", v.desc, res.err, res.failures())
	}
	t.Logf("PERF create-cluster (kubeadm, %s) from an empty work directory: %s", v.desc, res.wall.Round(time.Millisecond))
	for _, h := range set.Hosts {
		if d := diffSnapshots(before[h.Name], snapshot(ctx, t, set, h.Name, paths...)); len(d) > 0 {
			t.Errorf("create-cluster from an empty directory changed the PKI of %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}
	kubeconfigFromNothing(ctx, t, v.kx, v.k.bin)
	for _, h := range set.Hosts {
		if d := diffSnapshots(before[h.Name], snapshot(ctx, t, set, h.Name, paths...)); len(d) > 0 {
			t.Errorf("get kubeconfig changed the PKI of %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}
	ca := hostCertFingerprint(ctx, t, set, set.Hosts[0].Name, "/etc/kubernetes/pki/ca.crt")
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, "cat /var/lib/kubexm/cluster.json")
		var rec struct {
			Cluster     string            `json:"cluster"`
			Type        string            `json:"kubernetes_type"`
			Authorities map[string]string `json:"authorities"`
		}
		if err != nil || json.Unmarshal([]byte(out), &rec) != nil {
			t.Errorf("%s's cluster record: %v: %s", h.Name, err, out)
			continue
		}
		if rec.Type != "kubeadm" || rec.Authorities["Kubernetes cluster CA"] != ca || rec.Cluster == "" {
			t.Errorf("%s's cluster record %+v, want kubeadm mode and the CA %s", h.Name, rec, ca)
		}
	}
	vB := v
	vB.kx = kxB
	vB.dir = kxB.dir
	vB.k.kubeconfig = filepath.Join(kxB.dir, ".kubexm", filepath.Base(filepath.Dir(v.k.kubeconfig)), "kubeconfig")
	return vB
}

// kxArgs are the -e arguments of every run of k.
func kxArgs(k kubexm) []string {
	var out []string
	for _, e := range k.extra {
		out = append(out, "-e", e)
	}
	return out
}

// kubeconfigFromNothing runs get kubeconfig in an empty directory and asks
// the API server for its nodes with what it wrote.
func kubeconfigFromNothing(ctx context.Context, t *testing.T, kx kubexm, kubectl string) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "admin.conf")
	get := exec.CommandContext(ctx, kx.bin, append([]string{"get", "kubeconfig", "-f", kx.inventory, "--to", kc}, kxArgs(kx)...)...)
	get.Dir = dir
	get.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(dir, ".kubexm"))
	start := time.Now()
	if out, err := get.CombinedOutput(); err != nil {
		t.Errorf("get kubeconfig from an empty directory: %v: %s", err, out)
		return
	}
	t.Logf("PERF kubexm get kubeconfig from an empty directory: %s", time.Since(start).Round(time.Millisecond))
	if out, err := (kubectlRunner{bin: kubectl, kubeconfig: kc}).run(ctx, "", "get", "nodes"); err != nil {
		t.Errorf("the kubeconfig of get kubeconfig: %v: %s", err, out)
	}
	// get nodes from another empty directory takes the kubeconfig itself.
	other := t.TempDir()
	nodes := exec.CommandContext(ctx, kx.bin, "get", "nodes", "-f", kx.inventory)
	nodes.Dir = other
	nodes.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(other, ".kubexm"))
	if out, err := nodes.CombinedOutput(); err != nil || !strings.Contains(string(out), " Ready ") {
		t.Errorf("get nodes from a directory with only cluster.yaml: %v:\n%s", err, out)
	}
}
