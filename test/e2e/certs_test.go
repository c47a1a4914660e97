//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// certsLifecycle is issue 22's certificate acceptance (binary mode) on
// TestKubernetesCluster's running cluster (n1 master and etcd, the others
// workers):
//
//   - `kubexm certs check -o json` lists every certificate, kubeconfig and
//     the service-account key on every host, each with the serial and expiry
//     of the file on the host, and marks the leaves within --warn-within;
//   - a pod on every node; certs-renew while a client polls the API every
//     200 ms: every leaf's serial differs afterwards and the CAs and sa.pub
//     are the same, etcd serves its new certificate without a restart, no
//     outage is longer than the API server's restart, the pods keep their
//     UIDs and restart counts.
//
// The suite's re-run afterwards shows the renewed files fit (nothing to
// change). PERF lines give the wall times and the outage.
func certsLifecycle(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, root, work, name, bundle string) {
	t.Helper()
	start := time.Now()
	before := certsCheck(ctx, t, kx, "--warn-within", "400d")
	t.Logf("PERF kubexm certs check: %s, %d files", time.Since(start).Round(time.Millisecond), len(before.Certificates))
	want := expectedCertFiles(set, filepath.Join(work, ".kubexm", name, "kubeconfig"))
	if got := before.files(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("certs check listed:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if before.WarnWithinDays != 400 {
		t.Errorf("warn_within_days %d, want 400", before.WarnWithinDays)
	}
	problems := 0
	for _, c := range before.Certificates {
		// Leaves live a year: within 400 days; CAs ten years; a key never expires.
		wantStatus := "warn"
		if c.IsCA || c.Kind == "public-key" {
			wantStatus = "ok"
		}
		if c.Status != wantStatus {
			t.Errorf("%s %s: status %q, want %q", c.Host, c.Path, c.Status, wantStatus)
		}
		if c.Status != "ok" {
			problems++
		}
		if c.Kind != "public-key" && (c.Issuer == "" || c.NotAfter == "" || c.DaysLeft == nil) {
			t.Errorf("%s %s: no issuer or expiry: %+v", c.Host, c.Path, c)
		}
		// The serial and expiry are those of the file on the host.
		serial, notAfter := fileCert(ctx, t, set, c)
		if c.Serial != serial || c.NotAfter != notAfter {
			t.Errorf("%s %s: reported serial %s until %s, the file holds %s until %s", c.Host, c.Path, c.Serial, c.NotAfter, serial, notAfter)
		}
	}
	if before.Problems != problems {
		t.Errorf("problems %d, counted %d", before.Problems, problems)
	}
	if apiserver := before.find(set.Hosts[0].Name, "/etc/kubernetes/pki/apiserver.crt"); apiserver == nil || !slices.Contains(apiserver.SANs.IPs, set.Hosts[0].Address) || !slices.Contains(apiserver.SANs.DNS, "kubernetes.default") {
		t.Errorf("the API server's SANs are not reported: %+v", apiserver)
	}

	// --- renew under load ----------------------------------------------------
	pods := startPods(ctx, t, k, set)
	poller := pollAPI(t, filepath.Join(work, ".kubexm", name, "kubeconfig"))
	res := kx.play(ctx, filepath.Join(root, "playbooks", "certs-renew"), "--offline-bundle", bundle)
	outages, requests := poller.stop()
	if res.err != nil {
		t.Fatalf("certs-renew failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF certs-renew (1 master, %d workers): %s (%d changed)", len(set.Hosts)-1, res.wall.Round(time.Millisecond), len(res.changed()))
	var restart time.Duration
	for _, e := range res.events {
		if e.Kind == "host_result" && e.Status == "changed" && strings.Contains(e.Task, "restart the API server of ") {
			restart = max(restart, time.Duration(e.DurationMS)*time.Millisecond)
		}
		if e.Kind == "host_result" && e.Status == "changed" && strings.Contains(e.Task, "etcd - restart") {
			t.Errorf("certs-renew restarted etcd on %s: etcd reads renewed files itself", e.Host)
		}
	}
	if restart == 0 {
		t.Error("certs-renew did not restart the API server")
	}
	longest := time.Duration(0)
	for _, o := range outages {
		longest = max(longest, o)
	}
	t.Logf("PERF API polled every 200 ms during certs-renew: %d requests, %d outages %v, longest %s; the API server's restart (systemctl restart until /readyz) took %s",
		requests, len(outages), outages, longest.Round(time.Millisecond), restart.Round(time.Millisecond))
	// One restart per master, plus one polling interval and the client's
	// timeout on each side.
	if limit := restart + 3*time.Second; longest > limit {
		t.Errorf("the API was unavailable for %s, longer than one restart of the API server (%s)", longest, restart)
	}

	after := certsCheck(ctx, t, kx)
	if after.Problems != 0 || after.WarnWithinDays != 90 {
		t.Errorf("after renew: %d problems within %d days", after.Problems, after.WarnWithinDays)
	}
	for _, b := range before.Certificates {
		a := after.find(b.Host, b.Path)
		if a == nil {
			t.Errorf("%s %s is gone after renew", b.Host, b.Path)
			continue
		}
		same := a.Serial == b.Serial && a.Fingerprint == b.Fingerprint
		if keep := b.IsCA || b.Kind == "public-key"; keep != same {
			t.Errorf("%s %s: serial %s -> %s (a CA and the service-account key stay, every leaf is reissued)", b.Host, b.Path, b.Serial, a.Serial)
		}
		if !b.IsCA && b.Kind != "public-key" && a.Issuer != b.Issuer {
			t.Errorf("%s %s: issuer %s -> %s", b.Host, b.Path, b.Issuer, a.Issuer)
		}
	}
	// etcd serves the new member certificate without having restarted.
	if served, file := etcdServedSerial(t, set.Hosts[0].Address), after.find(set.Hosts[0].Name, "/etc/kubexm/etcd/ssl/member-"+set.Hosts[0].Name+".pem"); file == nil || served != file.Serial {
		t.Errorf("etcd serves certificate %s, the renewed file is %+v", served, file)
	}
	checkPodsKept(ctx, t, k, pods)
}

// certsReport is the part of `kubexm certs check -o json` the test reads.
type certsReport struct {
	WarnWithinDays int          `json:"warn_within_days"`
	Problems       int          `json:"problems"`
	Certificates   []certsEntry `json:"certificates"`
}

type certsEntry struct {
	Host        string `json:"host"`
	Path        string `json:"path"`
	Status      string `json:"status"`
	Kind        string `json:"kind"`
	Issuer      string `json:"issuer"`
	NotAfter    string `json:"not_after"`
	DaysLeft    *int   `json:"days_left"`
	IsCA        bool   `json:"is_ca"`
	Serial      string `json:"serial"`
	Fingerprint string `json:"fingerprint"`
	SANs        struct {
		DNS []string `json:"dns"`
		IPs []string `json:"ips"`
	} `json:"sans"`
}

func (r *certsReport) files() []string {
	var out []string
	for _, c := range r.Certificates {
		out = append(out, c.Host+" "+c.Path)
	}
	sort.Strings(out)
	return out
}

func (r *certsReport) find(host, path string) *certsEntry {
	for i := range r.Certificates {
		if r.Certificates[i].Host == host && r.Certificates[i].Path == path {
			return &r.Certificates[i]
		}
	}
	return nil
}

func certsCheck(ctx context.Context, t *testing.T, kx kubexm, args ...string) *certsReport {
	t.Helper()
	argv := append([]string{"certs", "check", "-i", kx.inventory, "-o", "json"}, args...)
	for _, e := range kx.extra {
		argv = append(argv, "-e", e)
	}
	cmd := exec.CommandContext(ctx, kx.bin, argv...)
	cmd.Dir = kx.dir
	cmd.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(kx.dir, ".kubexm"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubexm certs check: %v\n%s", err, tail(stderr.String(), 40))
	}
	var r certsReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("kubexm certs check -o json: %v\n%s", err, tail(string(out), 20))
	}
	return &r
}

// expectedCertFiles is every file the check must list for a cluster of one
// master and etcd member (the first machine) and workers.
func expectedCertFiles(set *testhosts.Set, adminKubeconfig string) []string {
	var out []string
	for i, h := range set.Hosts {
		files := []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/kubelet.crt", "/etc/kubernetes/kubelet.kubeconfig", "/etc/kubernetes/kube-proxy.kubeconfig"}
		if i == 0 {
			for _, f := range []string{"front-proxy-ca.crt", "ca-signer.crt", "apiserver.crt", "apiserver-kubelet-client.crt", "front-proxy-client.crt", "admin.crt", "sa.pub", "etcd/ca.crt", "apiserver-etcd-client.crt"} {
				files = append(files, "/etc/kubernetes/pki/"+f)
			}
			for _, f := range []string{"admin", "controller-manager", "scheduler"} {
				files = append(files, "/etc/kubernetes/"+f+".kubeconfig")
			}
			for _, f := range []string{"ca", "member-" + h.Name, "admin-" + h.Name, "node-" + h.Name} {
				files = append(files, "/etc/kubexm/etcd/ssl/"+f+".pem")
			}
		}
		for _, f := range files {
			out = append(out, h.Name+" "+f)
		}
	}
	out = append(out, "localhost "+adminKubeconfig)
	sort.Strings(out)
	return out
}

// fileCert reads the certificate of a reported file where it is (on the host,
// or the control machine's kubeconfig) and returns its serial and expiry as
// the report writes them.
func fileCert(ctx context.Context, t *testing.T, set *testhosts.Set, c certsEntry) (string, string) {
	t.Helper()
	if c.Kind == "public-key" {
		return c.Serial, c.NotAfter
	}
	var data []byte
	if c.Host == "localhost" {
		b, err := os.ReadFile(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		data = b
	} else {
		out, err := set.SSH(ctx, c.Host, "cat "+shellQuote(c.Path))
		if err != nil {
			t.Fatalf("read %s on %s: %v", c.Path, c.Host, err)
		}
		data = []byte(out)
	}
	if c.Kind == "kubeconfig" {
		kc, err := pki.ParseKubeConfig(data)
		if err != nil || len(kc.Users) != 1 {
			t.Fatalf("%s on %s: %v", c.Path, c.Host, err)
		}
		if data, err = base64.StdEncoding.DecodeString(kc.Users[0].User.ClientCertificateData); err != nil {
			t.Fatalf("%s on %s: %v", c.Path, c.Host, err)
		}
	}
	cert, err := pki.ParseCert(data)
	if err != nil {
		t.Fatalf("%s on %s: %v", c.Path, c.Host, err)
	}
	return strings.ToUpper(cert.SerialNumber.Text(16)), cert.NotAfter.UTC().Format(time.RFC3339)
}

// etcdServedSerial is the serial of the certificate etcd presents on its
// client port.
func etcdServedSerial(t *testing.T, address string) string {
	t.Helper()
	return servedSerial(t, address+":2379")
}

// servedSerial is the serial of the certificate a TLS server presents at
// hostport.
func servedSerial(t *testing.T, hostport string) string {
	t.Helper()
	if c := servedCert(t, hostport); c != nil {
		return strings.ToUpper(c.SerialNumber.Text(16))
	}
	return ""
}

// servedCert is the certificate a TLS server presents at hostport (read
// during the handshake, which may then fail for want of a client
// certificate), or nil with an error reported.
func servedCert(t *testing.T, hostport string) *x509.Certificate {
	t.Helper()
	var served *x509.Certificate
	conf := &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
		if c, err := x509.ParseCertificate(raw[0]); err == nil {
			served = c
		}
		return nil
	}}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", hostport, conf)
	if err == nil {
		conn.Close()
	}
	if served == nil {
		t.Errorf("no certificate from %s: %v", hostport, err)
	}
	return served
}

// apiPoller asks the API for the default namespace every 200 ms and
// records each outage: from the first failed request to the next success.
type apiPoller struct {
	stopc    chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	outages  []time.Duration
	requests int
}

func pollAPI(t *testing.T, kubeconfig string) *apiPoller {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := pki.ParseKubeConfig(data)
	if err != nil || len(kc.Users) != 1 || len(kc.Clusters) != 1 {
		t.Fatalf("%s: %v", kubeconfig, err)
	}
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The kubeconfig of before the renewal: its certificate stays valid.
	pair, err := tls.X509KeyPair(dec(kc.Users[0].User.ClientCertificateData), dec(kc.Users[0].User.ClientKeyData))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(dec(kc.Clusters[0].Cluster.CertificateAuthorityData))
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		// A new connection for each request, as a client that reconnects would.
		DisableKeepAlives: true,
	}}
	url := kc.Clusters[0].Cluster.Server + "/api/v1/namespaces/default"
	p := &apiPoller{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var down time.Time
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stopc:
				if !down.IsZero() {
					p.outages = append(p.outages, time.Since(down))
				}
				return
			case <-tick.C:
			}
			ok := false
			if resp, err := client.Get(url); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			p.mu.Lock()
			p.requests++
			switch {
			case !ok && down.IsZero():
				down = time.Now()
			case ok && !down.IsZero():
				p.outages = append(p.outages, time.Since(down).Round(time.Millisecond))
				down = time.Time{}
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *apiPoller) stop() ([]time.Duration, int) {
	close(p.stopc)
	<-p.done
	return p.outages, p.requests
}

// startPods runs a sleeping pod on every node and returns "name uid
// restarts" of each once all are Ready.
func startPods(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set) string {
	t.Helper()
	image, pull := k.busybox(t)
	var manifest strings.Builder
	for _, h := range set.Hosts {
		fmt.Fprintf(&manifest, `apiVersion: v1
kind: Pod
metadata: {name: sleeper-%[1]s, namespace: default}
spec:
  nodeName: %[1]s
  containers:
  - {name: sleep, image: %[2]s, imagePullPolicy: %[3]s, command: [/bin/busybox, sleep, "36000"]}
---
`, h.Name, image, pull)
	}
	if out, err := k.run(ctx, manifest.String(), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if out, err := k.run(ctx, "", "wait", "--for=condition=Ready", "pod", "--all", "-n", "default", "--timeout=300s"); err != nil {
		t.Fatalf("pods not Ready: %v\n%s", err, out)
	}
	return podState(ctx, t, k)
}

func podState(ctx context.Context, t *testing.T, k kubectlRunner) string {
	t.Helper()
	out, err := retry(ctx, time.Minute, func() (string, error) {
		return k.run(ctx, "", "get", "pods", "-n", "default", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].restartCount} {.status.phase}{"\n"}{end}`)
	})
	if err != nil {
		t.Fatalf("kubectl get pods: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

func checkPodsKept(ctx context.Context, t *testing.T, k kubectlRunner, before string) {
	t.Helper()
	if after := podState(ctx, t, k); after != before {
		t.Errorf("pods changed (name uid restarts phase):\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// autoRenewTimer is issue 22's autoRenewCerts on the master (the cluster
// suite sets it, with kube_cert_auto_renew_before longer than a leaf lives,
// so that every leaf is due, and kube_cert_auto_renew_validity longer
// still, as gen_cert requires): the timer is enabled and waiting, and one run
// of its service, as the timer starts it, reissues the master's
// certificates and kubeconfigs on the master itself with the cluster CA and
// restarts what uses them. The files change, the service succeeds, and the
// API server answers the control machine's kubeconfig (which trusts only
// the cluster CA) with its new certificate.
func autoRenewTimer(ctx context.Context, t *testing.T, set *testhosts.Set, k kubectlRunner) {
	t.Helper()
	master := set.Hosts[0].Name
	const sums = `sha256sum /etc/kubernetes/pki/apiserver.crt /etc/kubernetes/pki/admin.crt /etc/kubernetes/controller-manager.kubeconfig /etc/kubernetes/kubelet.kubeconfig`
	out, err := set.SSH(ctx, master, "set -e\nsystemctl is-enabled kubexm-certs-renew.timer\nsystemctl is-active kubexm-certs-renew.timer\n"+sums)
	if err != nil || !strings.HasPrefix(out, "enabled\nactive\n") {
		t.Fatalf("autoRenewCerts timer on %s: want enabled and active: %v\n%s", master, err, out)
	}
	before := strings.Fields(strings.TrimPrefix(out, "enabled\nactive\n"))
	start := time.Now()
	out, err = set.SSH(ctx, master, "systemctl start kubexm-certs-renew.service; systemctl show -p Result --value kubexm-certs-renew.service\n"+sums)
	if err != nil || !strings.HasPrefix(out, "success\n") {
		journal, _ := set.SSH(ctx, master, "journalctl -u kubexm-certs-renew.service -n 80 --no-pager -o cat")
		t.Fatalf("kubexm-certs-renew.service on %s: %v\n%s\njournal:\n%s", master, err, out, journal)
	}
	t.Logf("PERF autoRenewCerts: the renewal service on the master (every leaf due, restarts included): %s", time.Since(start).Round(time.Millisecond))
	after := strings.Fields(strings.TrimPrefix(out, "success\n"))
	if len(after) != len(before) || len(before) != 8 {
		t.Fatalf("sums before %v, after %v", before, after)
	}
	for i := 0; i < len(before); i += 2 {
		if before[i] == after[i] {
			t.Errorf("%s did not change: the timer renewed nothing", before[i+1])
		}
	}
	if out, err := k.run(ctx, "", "get", "--raw", "/readyz"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("the API server after the timer's renewal: %q %v", out, err)
	}
}
