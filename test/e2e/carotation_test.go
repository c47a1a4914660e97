//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// caRotation is issue 22's CA rotation on the HA suite's cluster (3 masters
// and etcd members, 2 workers behind haproxy), with a pod on every node:
//
//   - before: a service-account token is issued; a client on a worker asks
//     the API through the endpoint every 200 ms with that token, trusting
//     the worker's /etc/kubernetes/pki/ca.crt as it is at each request;
//   - rotate-ca replaces the cluster, front-proxy and etcd CAs;
//   - the token is never refused (no 401 or 403), the longest gap between
//     two answers stays within one API server restart behind haproxy, and
//     the last answers all succeed;
//   - with the registry kubexm deploys (caLayout.registry), after each
//     phase the push's trust bundle and every node verify it and a pod of
//     its image starts on every node (hooks of an --overlay);
//   - afterwards every trust file on every host, and the CA of every
//     kubeconfig, is the new CA alone; every leaf certificate and kubeconfig
//     (the certs check's list) chains to the new CAs and not to the old
//     ones; the API servers and etcd serve certificates of the new CAs;
//     kube-root-ca.crt holds the new CA; the nodes are Ready and the pods
//     kept their UIDs and restart counts.
func caRotation(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, masters, workers []testhosts.Host, root, work, name, bundle string, l caLayout) {
	t.Helper()
	pkiDir := filepath.Join(work, ".kubexm", name, "certs")
	// Before, on the first master: the trust files are each one CA outside a rotation.
	hostCAs := []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/etcd/ca.crt"}
	var oldCAs []*x509.Certificate
	for _, path := range hostCAs {
		out, err := set.SSH(ctx, masters[0].Name, "cat "+shellQuote(path))
		if err != nil {
			t.Fatalf("read %s on %s: %v", path, masters[0].Name, err)
		}
		c, err := pki.ParseCert([]byte(out))
		if err != nil {
			t.Fatalf("%s on %s: %v", path, masters[0].Name, err)
		}
		oldCAs = append(oldCAs, c)
	}
	// After: the CAs kubexm keeps in the work directory.
	readCAs := func() []*x509.Certificate {
		var out []*x509.Certificate
		for _, a := range l.workCAs {
			data, err := os.ReadFile(filepath.Join(pkiDir, a))
			if err != nil {
				t.Fatal(err)
			}
			c, err := pki.ParseCert(data)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			out = append(out, c)
		}
		return out
	}
	pods := startPods(ctx, t, k, set)
	token, err := k.run(ctx, "", "create", "token", "default", "-n", "default", "--duration=2h")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, token)
	}
	token = strings.TrimSpace(token)

	poller := workers[0]
	// Cleared before the poller starts: a rotation that fails at once
	// stops it, however late its script starts.
	if out, err := set.SSH(ctx, poller.Name, "rm -f /tmp/kubexm-stop-poll"); err != nil {
		t.Fatalf("%s: %v\n%s", poller.Name, err, out)
	}
	polled := make(chan sshResult, 1)
	go func() {
		out, err := set.SSH(ctx, poller.Name, tokenPollScript(token, 9000, 200*time.Millisecond))
		polled <- sshResult{out, err}
	}()
	start := time.Now()
	args := []string{"--offline-bundle", bundle}
	if l.registry != nil {
		args = append(args, "--overlay", l.registry.overlay)
	}
	res := kx.play(ctx, filepath.Join(root, "playbooks", "rotate-ca"), args...)
	wall := time.Since(start)
	if out, err := set.SSH(ctx, poller.Name, "touch /tmp/kubexm-stop-poll"); err != nil {
		t.Errorf("stopping the poller: %v\n%s", err, out)
	}
	p := <-polled
	if res.err != nil {
		t.Fatalf("rotate-ca failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	if p.err != nil {
		t.Fatalf("the poller on %s: %v\n%s", poller.Name, p.err, tail(p.out, 20))
	}
	stats, err := parsePoll(p.out, start)
	if err != nil {
		t.Fatal(err)
	}
	refused, starting := refusals(p.out, 5*time.Second)
	t.Logf("PERF rotate-ca (%s; cluster, front-proxy and etcd CAs; %d masters, %d workers): %s (%d changed); a client on %s with a token issued before polled %s every 200 ms: %d requests, %d failed, longest gap %s, %d refused; slowest tasks:%s",
		l.desc, len(masters), len(workers), wall.Round(time.Second), len(res.changed()), poller.Name, haEndpoint, stats.total, stats.failed, stats.longestGap, refused, res.slowest(15))
	if l.oneAPIServer {
		// With one API server and no load balancer that checks /readyz, the
		// client meets it while it starts: it answers 401 or 403 until its
		// authenticators and RBAC caches have synced. That is the restart,
		// not the rotation; a refusal away from any outage is the rotation's.
		t.Logf("%d refusals within 5 s of an outage (the only API server starting)", starting)
	} else {
		refused += starting
	}
	if refused > 0 {
		t.Errorf("the service-account token issued before the rotation was refused %d times during it", refused)
	}
	if stats.longestGap > l.maxGap {
		t.Errorf("the API was away for %s through the endpoint during the rotation, want under %s", stats.longestGap, l.maxGap)
	}
	if stats.tailFailed > 0 {
		t.Errorf("%d of the last 25 requests failed after the rotation", stats.tailFailed)
	}

	newCAs := readCAs()
	for i, a := range l.workCAs {
		if newCAs[i].Equal(oldCAs[i]) {
			t.Fatalf("%s is the same CA after the rotation", a)
		}
	}
	newPool, oldPool := x509.NewCertPool(), x509.NewCertPool()
	for i := range newCAs {
		newPool.AddCert(newCAs[i])
		oldPool.AddCert(oldCAs[i])
	}
	onlyNew := func(where string, pemData []byte, want *x509.Certificate) {
		certs, err := pki.ParseCerts(pemData)
		if err != nil || len(certs) != 1 || !certs[0].Equal(want) {
			t.Errorf("%s: want the new CA %q alone, have %d certificates (%v)", where, want.Subject.CommonName, len(certs), err)
		}
	}
	chainsToNew := func(where string, c *x509.Certificate) {
		opts := func(pool *x509.CertPool) x509.VerifyOptions {
			return x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		}
		if _, err := c.Verify(opts(newPool)); err != nil {
			t.Errorf("%s (%s) does not chain to a new CA: %v", where, c.Subject.CommonName, err)
		}
		if _, err := c.Verify(opts(oldPool)); err == nil {
			t.Errorf("%s (%s) still chains to an old CA", where, c.Subject.CommonName)
		}
	}

	// The trust files.
	for _, h := range set.Hosts {
		files := map[string]*x509.Certificate{"/etc/kubernetes/pki/ca.crt": newCAs[0]}
		if hostIn(h, masters) {
			files["/etc/kubernetes/pki/front-proxy-ca.crt"] = newCAs[1]
			files["/etc/kubernetes/pki/etcd/ca.crt"] = newCAs[2]
			if l.kubeadm {
				// kubeadm signs with the first certificate of these files.
				files["/etc/kubernetes/pki/ca.crt"] = newCAs[0]
			} else {
				files["/etc/kubernetes/pki/ca-signer.crt"] = newCAs[0]
				files["/etc/kubexm/etcd/ssl/ca.pem"] = newCAs[2]
			}
		}
		for path, want := range files {
			out, err := set.SSH(ctx, h.Name, "cat "+shellQuote(path))
			if err != nil {
				t.Fatalf("read %s on %s: %v", path, h.Name, err)
			}
			onlyNew(h.Name+" "+path, []byte(out), want)
		}
	}

	// Every leaf and kubeconfig the certs check lists.
	report := certsCheck(ctx, t, kx)
	leaves := 0
	for _, c := range report.Certificates {
		if c.Kind == "public-key" || c.IsCA {
			continue
		}
		var data []byte
		if c.Host == "localhost" {
			if data, err = os.ReadFile(c.Path); err != nil {
				t.Fatal(err)
			}
		} else {
			out, err := set.SSH(ctx, c.Host, "cat "+shellQuote(c.Path))
			if err != nil {
				t.Fatalf("read %s on %s: %v", c.Path, c.Host, err)
			}
			data = []byte(out)
		}
		where := c.Host + " " + c.Path
		if c.Kind == "kubeconfig" {
			kc, err := pki.ParseKubeConfig(data)
			if err != nil || len(kc.Users) != 1 || len(kc.Clusters) != 1 {
				t.Fatalf("%s: %v", where, err)
			}
			caData, err := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CertificateAuthorityData)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			onlyNew(where+" (its CA)", caData, newCAs[0])
			if data, err = base64.StdEncoding.DecodeString(kc.Users[0].User.ClientCertificateData); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		cert, err := pki.ParseCert(data)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		chainsToNew(where, cert)
		leaves++
	}
	if leaves < l.minLeaves {
		t.Errorf("the certs check listed %d leaves and kubeconfigs, too few for %d hosts", leaves, len(set.Hosts))
	}

	// What the servers present.
	for _, m := range masters {
		for _, port := range []string{"6443", "2379", "2380"} {
			if c := servedCert(t, m.Address+":"+port); c != nil {
				chainsToNew(fmt.Sprintf("%s:%s serves a certificate that", m.Name, port), c)
			}
		}
	}

	if l.registry != nil {
		checkRegistryAfterRotation(ctx, t, set, kx, l.registry, bundle, res, chainsToNew, onlyNew, newCAs[0])
	}

	if l.kubeadm {
		kubeadmAfterRotation(ctx, t, k, set, masters, newCAs, filepath.Join(pkiDir, "kubeadm", "ca.key"), chainsToNew, onlyNew)
	}

	rootCA, err := k.run(ctx, "", "get", "configmap", "kube-root-ca.crt", "-n", "default", "-o", `jsonpath={.data.ca\.crt}`)
	if err != nil {
		t.Fatalf("kube-root-ca.crt: %v\n%s", err, rootCA)
	}
	onlyNew("kube-root-ca.crt in default", []byte(rootCA), newCAs[0])
	if out, err := k.run(ctx, "", "wait", "--for=condition=Ready", "node", "--all", "--timeout=120s"); err != nil {
		t.Errorf("nodes not Ready after the rotation: %v\n%s", err, out)
	}
	checkPodsKept(ctx, t, k, pods)
	if out, err := k.run(ctx, "", "delete", "pod", "--all", "-n", "default", "--wait=false"); err != nil {
		t.Errorf("kubectl delete pods: %v\n%s", err, out)
	}
}

// caLayout is what differs between the modes a CA rotation runs in.
type caLayout struct {
	desc string
	// The cluster, front-proxy and etcd CAs in the work directory's certs/.
	workCAs []string
	kubeadm bool
	// One API server, reached without a load balancer's health check.
	oneAPIServer bool
	// The longest the API may be away through the endpoint: one API server
	// restart behind the load balancer with several masters, one restart of
	// the only one otherwise.
	maxGap time.Duration
	// Fewer leaves and kubeconfigs in the certs check means some were missed.
	minLeaves int
	// registry, when set, is the registry kubexm deployed (either mode),
	// which the rotation carries along: its phase hooks run, and the nodes,
	// the registry and the push are checked afterwards.
	registry *haRegistry
}

// refusals counts the poller's 401 and 403 answers: those with no outage
// (no answer, or a 5xx) within window of them, and those near one.
func refusals(out string, window time.Duration) (isolated, nearOutage int) {
	type answer struct {
		ms   int64
		code string
	}
	var all []answer
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		all = append(all, answer{ms, f[1]})
	}
	for _, a := range all {
		if a.code != "401" && a.code != "403" {
			continue
		}
		near := false
		for _, b := range all {
			if d := time.Duration(b.ms-a.ms) * time.Millisecond; d > -window && d < window && (strings.HasPrefix(b.code, "000") || b.code[0] == '5') {
				near = true
				break
			}
		}
		if near {
			nearOutage++
		} else {
			isolated++
		}
	}
	return isolated, nearOutage
}

type sshResult struct {
	out string
	err error
}

func hostIn(h testhosts.Host, hs []testhosts.Host) bool {
	for _, x := range hs {
		if x.Name == h.Name {
			return true
		}
	}
	return false
}

// tokenPollScript asks the API's discovery (/api: authenticated users
// only) through the endpoint with a bearer token every period, up to n
// times or until /tmp/kubexm-stop-poll exists (endpointPollScript).
func tokenPollScript(token string, n int, period time.Duration) string {
	return endpointPollScript("/api", token, n, period, 2*time.Second)
}

// endpointPollScript asks path through the endpoint every period, with a bearer
// token unless token is empty, up to n times or until
// /tmp/kubexm-stop-poll exists once pollMinRequests were made, trusting the host's
// /etc/kubernetes/pki/ca.crt as it is at each request; it prints
// "<unix ms> <HTTP status>" per request (000 when none came within
// maxTime, then curl's exit code: 000:28 timed out, 000:7 no connection).
func endpointPollScript(path, token string, n int, period, maxTime time.Duration) string {
	header, auth := ":", ""
	if token != "" {
		header, auth = "printf 'Authorization: Bearer %s\\n' "+shellQuote(token), `-H @"$d/h"`
	}
	return fmt.Sprintf(`set -u
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
%s > "$d/h"
start=$(date +%%s%%N)
for i in $(seq 0 %d); do
  [ -e /tmp/kubexm-stop-poll ] && [ "$i" -ge %d ] && break
  next=$((start + i * %d))
  now=$(date +%%s%%N)
  [ "$now" -lt "$next" ] && sleep "$(awk -v ns=$((next - now)) 'BEGIN{printf "%%.3f", ns / 1e9}')"
  code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time %s --cacert /etc/kubernetes/pki/ca.crt %s %s) || code="$code:$?"
  echo "$(date +%%s%%3N) $code"
done
rm -f /tmp/kubexm-stop-poll`, header, n-1, pollMinRequests, period.Nanoseconds(), strconv.FormatFloat(maxTime.Seconds(), 'f', -1, 64), auth, shellQuote(haEndpoint+path))
}

// TestRefusalsNearAnOutage: a 401 or 403 within the window of a request
// that got no answer (000, with or without curl's exit code) or a 5xx is the
// API server starting; one far from any is the rotation refusing the token.
func TestRefusalsNearAnOutage(t *testing.T) {
	out := strings.Join([]string{
		"10000 200", "11000 000:7", "12000 401", "13000 200", // near a refused connect
		"30000 503", "31000 403", // near a 5xx
		"50000 000", "51000 401", // near a bare 000
		"60000 000:28", "90000 401", "91000 200", // far from the timeout
	}, "\n")
	isolated, near := refusals(out, 5*time.Second)
	if isolated != 1 || near != 3 {
		t.Errorf("refusals: %d isolated and %d near an outage, want 1 and 3", isolated, near)
	}
}
