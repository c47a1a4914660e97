package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema"
)

// clientCert makes a self-signed client certificate and key, PEM.
func clientCert(t *testing.T, cn string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// apiFixture serves /api/v1/nodes over TLS to clients with a certificate,
// and writes the work directory of cluster demo: the kubeconfig for it, a
// certificate under certs/ and a finished create-cluster run.
func apiFixture(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "kubernetes-admin" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		created := time.Now().Add(-50 * time.Hour).UTC().Format(time.RFC3339)
		// As the API server answers client-go: JSON, saying so.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"NodeList","apiVersion":"v1","items":[
{"metadata":{"name":"n1","creationTimestamp":%q},"status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.37.2"}}},
{"metadata":{"name":"n7","creationTimestamp":%q},"spec":{"unschedulable":true},"status":{"conditions":[{"type":"Ready","status":"False"}],"addresses":[{"type":"InternalIP","address":"192.0.2.7"}],"nodeInfo":{"kubeletVersion":"v1.36.3"}}}]}`, created, created)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cert, key := clientCert(t, "kubernetes-admin", time.Now().Add(40*24*time.Hour))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	b64 := base64.StdEncoding.EncodeToString
	kc := fmt.Sprintf(`apiVersion: v1
clusters:
- cluster: {certificate-authority-data: %s, server: %q}
  name: demo
contexts:
- context: {cluster: demo, user: kubernetes-admin}
  name: kubernetes-admin@demo
current-context: kubernetes-admin@demo
kind: Config
preferences: {}
users:
- name: kubernetes-admin
  user: {client-certificate-data: %s, client-key-data: %s}
`, b64(ca), srv.URL, b64(cert), b64(key))
	dir := filepath.Join(".kubexm", "demo")
	files := map[string]string{
		"cluster.yaml":                                   verbClusterYAML,
		filepath.Join(dir, "kubeconfig"):                 kc,
		filepath.Join(dir, "certs/kubernetes/admin.crt"): string(cert),
		filepath.Join(dir, "runs/20260101-000000.000-aaaaaa/journal.jsonl"): `{"type":"header","time":"2026-01-01T00:00:00Z","run":"20260101-000000.000-aaaaaa","playbook":"create-cluster"}
{"type":"result","key":"k","task":"t","host":"n1","status":"ok"}
{"type":"end","time":"2026-01-01T00:10:00Z","outcome":"ok"}
`,
		filepath.Join(dir, "runs/20260102-000000.000-bbbbbb/journal.jsonl"): `{"type":"header","time":"2026-01-02T00:00:00Z","run":"20260102-000000.000-bbbbbb","playbook":"upgrade"}
{"type":"result","key":"k","task":"t","host":"n1","status":"ok"}
`,
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A directory that is no work directory is not a cluster.
	if err := os.MkdirAll(filepath.Join(".kubexm", "stray"), 0o700); err != nil {
		t.Fatal(err)
	}
}

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runVerb(t, newApp(lifecycle.Runner{}), "", args...)
}

func TestGetNodes(t *testing.T) {
	apiFixture(t)
	out, err := runRoot(t, "get", "nodes", "-f", "cluster.yaml")
	if err != nil {
		t.Fatalf("get nodes: %v\n%s", err, out)
	}
	for _, want := range []string{
		"NAME   ADDRESS     ROLES                   STATUS                        AGE   VERSION",
		"n1     192.0.2.2   master,etcd             Ready                         2d    v1.37.2",
		"n2     192.0.2.3   worker                  NotJoined                     -     -",
		"n7     192.0.2.7   (not in cluster file)   NotReady,SchedulingDisabled   2d    v1.36.3",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("get nodes lacks %q:\n%s", want, out)
		}
	}
	out, err = runRoot(t, "get", "nodes", "-f", "cluster.yaml", "-o", "json")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, `"name":"n2","address":"192.0.2.3","roles":["worker"],"in_cluster_file":true,"status":"NotJoined"`) {
		t.Errorf("get nodes -o json: %v\n%s", err, out)
	}
	// No kubeconfig: a clear error, no table.
	if _, err := runRoot(t, "get", "nodes", "-f", "cluster.yaml", "--workdir", "elsewhere"); err == nil || !strings.Contains(err.Error(), "no admin kubeconfig") {
		t.Errorf("without kubeconfig: %v", err)
	}
}

func TestGetClustersAndDescribe(t *testing.T) {
	apiFixture(t)
	out, err := runRoot(t, "get", "clusters")
	if err != nil {
		t.Fatalf("get clusters: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "demo ") || !strings.Contains(lines[1], "upgrade") || !strings.Contains(lines[1], "interrupted") || !strings.Contains(lines[1], "yes") {
		t.Errorf("get clusters:\n%s", out)
	}

	// A run holding the work directory turns its open journal into running.
	lock, err := lifecycle.LockWorkDir(filepath.Join(".kubexm", "demo"), "play upgrade")
	if err != nil {
		t.Fatal(err)
	}
	out, _ = runRoot(t, "get", "clusters", "-o", "json")
	lock.Release()
	if !strings.Contains(out, `"outcome":"running"`) || !strings.Contains(out, `"running":"pid `) {
		t.Errorf("get clusters while locked: %s", out)
	}

	out, err = runRoot(t, "describe", "cluster", "-f", "cluster.yaml")
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Name:               demo\n",
		"Kubernetes:         v1.37.2 (type kubexm, proxy iptables)\n",
		"etcd:               " + schema.DefaultEtcdVersion + " (type kubexm)\n",
		"Container runtime:  containerd 2.4.2\n",
		"Control plane:      https://lb.kubexm.local:6443 (the first master)\n",
		"API server:         answered: 2 nodes\n",
		"  n2     192.0.2.3   worker ",
		"  runs: 2\n    20260102-000000.000-bbbbbb  upgrade          interrupted",
		"    20260101-000000.000-aaaaaa  create-cluster   ok",
		"  certs/kubernetes/admin.crt  kubernetes-admin",
		"renew soon: kubexm certs renew -f cluster.yaml",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "pw") {
		t.Errorf("describe shows a password:\n%s", out)
	}
}

func TestGetRunsAndLogs(t *testing.T) {
	apiFixture(t)
	run := filepath.Join(".kubexm", "demo", "runs", "20260103-000000.000-cccccc", "journal.jsonl")
	if err := os.MkdirAll(filepath.Dir(run), 0o700); err != nil {
		t.Fatal(err)
	}
	journal := `{"type":"header","time":"2026-01-03T00:00:00Z","run":"20260103-000000.000-cccccc","playbook":"create-cluster"}
{"type":"result","time":"2026-01-03T00:00:01Z","key":"a","task":"etcd - start","role":"etcd","pos":"roles/etcd/tasks/main.yaml:9:3","host":"n1","status":"changed","duration_ms":1500,"rc":0}
{"type":"result","time":"2026-01-03T00:00:02Z","key":"b","task":"etcd - health","role":"etcd","host":"n2","status":"failed","duration_ms":120000,"rc":1,"msg":"non-zero exit status 1\nhint: look at journalctl -u etcd","stderr_tail":"context deadline exceeded"}
{"type":"result","time":"2026-01-03T00:00:03Z","key":"c","task":"login","host":"n2","status":"failed","hidden":true}
{"type":"end","time":"2026-01-03T00:02:03Z","outcome":"failed"}
`
	if err := os.WriteFile(run, []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "get", "runs", "-f", "cluster.yaml")
	if err != nil || strings.Count(out, "\n") != 4 || !strings.Contains(out, "20260103-000000.000-cccccc  create-cluster  2026-01-03T00:00:00Z  123.0s    failed") {
		t.Errorf("get runs: %v\n%s", err, out)
	}
	out, err = runRoot(t, "logs", "last", "-f", "cluster.yaml", "--failed")
	if err != nil {
		t.Fatalf("logs: %v\n%s", err, out)
	}
	for _, want := range []string{"run 20260103-000000.000-cccccc: playbook create-cluster", "n2   failed      120.00s rc=1  etcd : etcd - health",
		"        hint: look at journalctl -u etcd\n", "      stderr:\n        context deadline exceeded\n", "output hidden"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs --failed lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "etcd - start") {
		t.Errorf("logs --failed shows a task that succeeded:\n%s", out)
	}
	out, err = runRoot(t, "logs", "20260103-000000.000-cccccc", "-f", "cluster.yaml", "--host", "n1", "-o", "json")
	if err != nil || !strings.Contains(out, `"task": "etcd - start"`) || strings.Contains(out, `"host": "n2"`) {
		t.Errorf("logs --host n1 -o json: %v\n%s", err, out)
	}
	if _, err := runRoot(t, "logs", "../../../../etc", "-f", "cluster.yaml"); err == nil {
		t.Error("logs took a path for a run id")
	}
}
