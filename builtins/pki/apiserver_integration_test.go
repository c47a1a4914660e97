//go:build integration

package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

const kubeVersion = "v1.37.2"

// kubeBinDir finds kube-apiserver built by test/artifacts/kubernetes.sh.
func kubeBinDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KUBEXM_TEST_K8S_DIR")
	if dir == "" {
		dir = filepath.Join(testCache(), "artifacts", "kubernetes", kubeVersion, runtime.GOARCH)
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		t.Fatalf("kube-apiserver %s not found in %s (%v): run test/artifacts/kubernetes.sh kube-apiserver, or set KUBEXM_TEST_K8S_DIR", kubeVersion, dir, err)
	}
	return dir
}

// daemon is a process the test started and must leave stopped.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	exited  chan error
	logPath string
}

func startDaemon(t *testing.T, name, logPath string, bin string, args ...string) *daemon {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with the test binary even if the test itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, exited: make(chan error, 1), logPath: logPath}
	go func() {
		d.exited <- cmd.Wait()
		logFile.Close()
	}()
	return d
}

// stop sends SIGTERM, waits (SIGKILL after 20s) and checks the process is
// gone; on a failed test it logs the end of the process's log.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not stop within 20s of SIGTERM; killing it", d.name)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	if err := syscall.Kill(d.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("%s (pid %d) still exists after stopping: kill -0 gave %v", d.name, d.cmd.Process.Pid, err)
	}
	if t.Failed() {
		b, _ := os.ReadFile(d.logPath)
		t.Logf("%s log (last 4000 bytes):\n%s", d.name, tail(b, 4000))
	}
}

// failIfExited ends the test when the process has died while being waited for.
func (d *daemon) failIfExited(t *testing.T) {
	t.Helper()
	select {
	case err := <-d.exited:
		d.exited <- err // stop reads it again, and logs the log
		t.Fatalf("%s exited early: %v", d.name, err)
	default:
	}
}

// tlsClient trusts only ca and presents cert whatever CAs the server asks
// for: Go's client would otherwise send no certificate when the server's
// acceptable-CA list does not name its issuer, and the rogue-CA check would
// test anonymous access instead of certificate rejection.
func tlsClient(ca *x509.CertPool, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func filesClient(t *testing.T, caPath, certPath, keyPath string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(readFile(t, caPath)) {
		t.Fatalf("%s: no PEM certificate", caPath)
	}
	var cert *tls.Certificate
	if certPath != "" {
		c, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			t.Fatal(err)
		}
		cert = &c
	}
	return tlsClient(pool, cert)
}

// kubeconfigClient builds a client from the current context of a kubeconfig,
// as kubectl would: the server URL, the embedded CA and the embedded client
// certificate and key.
func kubeconfigClient(t *testing.T, path string) (*http.Client, string) {
	t.Helper()
	kc, err := ParseKubeConfig(readFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var ctx *Context
	for i := range kc.Contexts {
		if kc.Contexts[i].Name == kc.CurrentContext {
			ctx = &kc.Contexts[i].Context
		}
	}
	if ctx == nil {
		t.Fatalf("%s: current-context %q has no context entry", path, kc.CurrentContext)
	}
	var cluster *Cluster
	for i := range kc.Clusters {
		if kc.Clusters[i].Name == ctx.Cluster {
			cluster = &kc.Clusters[i].Cluster
		}
	}
	var user *User
	for i := range kc.Users {
		if kc.Users[i].Name == ctx.User {
			user = &kc.Users[i].User
		}
	}
	if cluster == nil || user == nil {
		t.Fatalf("%s: context %q names cluster %q and user %q; one has no entry", path, kc.CurrentContext, ctx.Cluster, ctx.User)
	}
	decode := func(field, s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %s is not base64 PEM: %v", path, field, err)
		}
		return b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(decode("certificate-authority-data", cluster.CertificateAuthorityData)) {
		t.Fatalf("%s: certificate-authority-data holds no PEM certificate", path)
	}
	cert, err := tls.X509KeyPair(decode("client-certificate-data", user.ClientCertificateData),
		decode("client-key-data", user.ClientKeyData))
	if err != nil {
		t.Fatalf("%s: client certificate and key: %v", path, err)
	}
	return tlsClient(pool, &cert), cluster.Server
}

func get(c *http.Client, url string) (int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// pollGet GETs url until it answers 200 or the deadline passes. Statuses in
// retry (besides connection errors) mean "not yet"; any other is final.
func pollGet(t *testing.T, c *http.Client, url string, timeout time.Duration, procs []*daemon, retry ...int) []byte {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := get(c, url)
		if err == nil && code == http.StatusOK {
			return body
		}
		transient := err != nil
		for _, r := range retry {
			transient = transient || code == r
		}
		if !transient {
			t.Fatalf("GET %s: %d %s", url, code, body)
		}
		for _, d := range procs {
			d.failIfExited(t)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: not 200 within %s: last %d %v %s", url, timeout, code, err, tail(body, 2000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestApiserverAcceptsAdminKubeconfig runs etcd and a real kube-apiserver on
// loopback with nothing but certificates and keys from gen_cert, and checks
// the admin.conf written by the kubeconfig builtin is a working cluster-admin
// login while a system:masters certificate from another CA is refused.
func TestApiserverAcceptsAdminKubeconfig(t *testing.T) {
	kubeBin := kubeBinDir(t)
	etcdBin := etcdBinDir(t)
	env := testEnv(t)
	g := genCert{}
	const k8s, etcdDir = "certs/kubernetes", "certs/etcd"
	run(t, g, env, step.Args{"path": etcdDir, "name": "ca", "ca": true, "common_name": "etcd-ca"})
	run(t, g, env, step.Args{"path": etcdDir, "name": "member-node1", "common_name": "node1",
		"usages": []any{"peer"}, "sans": []any{"localhost", "127.0.0.1"}})
	run(t, g, env, step.Args{"path": k8s, "name": "ca", "ca": true, "common_name": "kubernetes"})
	run(t, g, env, step.Args{"path": k8s, "name": "sa", "key_only": true})
	run(t, g, env, step.Args{"path": k8s, "name": "apiserver", "common_name": "kube-apiserver",
		"usages": []any{"server"}, "sans": []any{"127.0.0.1", "10.96.0.1", "localhost", "kubernetes",
			"kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}})
	run(t, g, env, step.Args{"path": k8s, "name": "apiserver-etcd-client", "ca_path": etcdDir,
		"common_name": "kube-apiserver-etcd-client", "usages": []any{"client"}})
	run(t, g, env, step.Args{"path": k8s, "name": "admin", "common_name": "kubernetes-admin",
		"organization": []any{"system:masters"}, "usages": []any{"client"}})
	run(t, g, env, step.Args{"path": "certs/rogue", "name": "ca", "ca": true, "common_name": "kubernetes"})
	run(t, g, env, step.Args{"path": "certs/rogue", "name": "admin", "common_name": "kubernetes-admin",
		"organization": []any{"system:masters"}, "usages": []any{"client"}})
	f := func(p string) string { return filepath.Join(env.WorkDir, p) }

	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	etcd := startDaemon(t, "etcd", f("etcd.log"), filepath.Join(etcdBin, "etcd"),
		"--name", "node1", "--data-dir", f("etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "node1="+peerURL, "--initial-cluster-state", "new",
		"--client-cert-auth", "--trusted-ca-file", f(etcdDir+"/ca.crt"),
		"--cert-file", f(etcdDir+"/member-node1.crt"), "--key-file", f(etcdDir+"/member-node1.key"),
		"--listen-metrics-urls", "")
	procs := []*daemon{etcd}
	// Stop in reverse start order: the API server first, then etcd.
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(t)
		}
	}()
	etcdClient := filesClient(t, f(etcdDir+"/ca.crt"), f(k8s+"/apiserver-etcd-client.crt"), f(k8s+"/apiserver-etcd-client.key"))
	pollGet(t, etcdClient, etcdURL+"/health", 30*time.Second, procs)

	apiPort := freePort(t)
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	run(t, kubeconfigBuiltin{}, env, step.Args{"path": "kubeconfig/admin.conf", "server": server,
		"ca": k8s + "/ca.crt", "cert": k8s + "/admin.crt", "key": k8s + "/admin.key"})

	start := time.Now()
	apiserver := startDaemon(t, "kube-apiserver", f("kube-apiserver.log"), filepath.Join(kubeBin, "kube-apiserver"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--etcd-servers="+etcdURL, "--etcd-cafile="+f(etcdDir+"/ca.crt"),
		"--etcd-certfile="+f(k8s+"/apiserver-etcd-client.crt"), "--etcd-keyfile="+f(k8s+"/apiserver-etcd-client.key"),
		"--client-ca-file="+f(k8s+"/ca.crt"),
		"--tls-cert-file="+f(k8s+"/apiserver.crt"), "--tls-private-key-file="+f(k8s+"/apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+f(k8s+"/sa.pub"), "--service-account-signing-key-file="+f(k8s+"/sa.key"),
		"--service-cluster-ip-range=10.96.0.0/12", "--authorization-mode=Node,RBAC",
		"--cert-dir="+f("apiserver-certs"), "--profiling=false")
	procs = append(procs, apiserver)

	// /readyz needs authentication, so 401/403 are final; 500 lists the
	// post-start hooks still running.
	admin := filesClient(t, f(k8s+"/ca.crt"), f(k8s+"/admin.crt"), f(k8s+"/admin.key"))
	pollGet(t, admin, server+"/readyz", 120*time.Second, procs, http.StatusInternalServerError)
	t.Logf("kube-apiserver ready after %s", time.Since(start).Round(time.Millisecond))

	client, kcServer := kubeconfigClient(t, f("kubeconfig/admin.conf"))
	if kcServer != server {
		t.Fatalf("admin.conf server is %q, want %q", kcServer, server)
	}
	// The default namespace is made by a controller that may lag /readyz.
	body := pollGet(t, client, server+"/api/v1/namespaces/default", 30*time.Second, procs, http.StatusNotFound)
	var ns struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &ns); err != nil || ns.Kind != "Namespace" || ns.Metadata.Name != "default" {
		t.Errorf("GET /api/v1/namespaces/default: want the Namespace default, got %v: %s", err, tail(body, 500))
	}
	code, body, err := get(client, server+"/version")
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if err == nil && code == http.StatusOK {
		err = json.Unmarshal(body, &version)
	}
	if err != nil || code != http.StatusOK || version.GitVersion != kubeVersion {
		t.Errorf("GET /version: want 200 with gitVersion %s, got %d %v: %s", kubeVersion, code, err, body)
	}

	// A system:masters certificate from another CA must be refused as an
	// authentication failure, not fall through to anonymous.
	rogue := filesClient(t, f(k8s+"/ca.crt"), f("certs/rogue/admin.crt"), f("certs/rogue/admin.key"))
	if code, body, err := get(rogue, server+"/api/v1/namespaces/default"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("rogue-CA admin certificate: want 401, got %d %v: %s", code, err, body)
	}
	// Without a certificate the request is anonymous: authenticated as
	// nobody, so RBAC forbids it, which shows the 200 above came from the
	// admin identity.
	anon := filesClient(t, f(k8s+"/ca.crt"), "", "")
	if code, body, err := get(anon, server+"/api/v1/namespaces/default"); err != nil || code != http.StatusForbidden {
		t.Errorf("no client certificate: want 403, got %d %v: %s", code, err, body)
	}

	kubectl := filepath.Join(kubeBin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Logf("kubectl not built (%v); skipping the kubectl check (test/artifacts/kubernetes.sh kubectl builds it)", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", f("kubeconfig/admin.conf"),
		"get", "ns", "-o", "name").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "namespace/default") {
		t.Errorf("kubectl --kubeconfig admin.conf get ns: %v\n%s", err, out)
	}
}
