package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
)

// clusterPKI makes a CA, an API server certificate for 127.0.0.1 and an admin
// client certificate under certs/kubernetes.
func clusterPKI(t *testing.T, env *step.Env) string {
	t.Helper()
	g := genCert{}
	run(t, g, env, step.Args{"path": "certs/kubernetes", "name": "ca", "ca": true, "common_name": "kubernetes", "key_type": "ecdsa-p256"})
	run(t, g, env, step.Args{"path": "certs/kubernetes", "name": "apiserver", "common_name": "kube-apiserver",
		"usages": []any{"server"}, "sans": []any{"127.0.0.1", "localhost"}, "key_type": "ecdsa-p256"})
	run(t, g, env, step.Args{"path": "certs/kubernetes", "name": "admin", "common_name": "kubernetes-admin",
		"organization": []any{"system:masters"}, "usages": []any{"client"}})
	return filepath.Join(env.WorkDir, "certs/kubernetes")
}

func kubeconfigArgs(server string) step.Args {
	return step.Args{"path": "kubeconfig/admin.conf", "server": server,
		"ca": "certs/kubernetes/ca.crt", "cert": "certs/kubernetes/admin.crt", "key": "certs/kubernetes/admin.key"}
}

func decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKubeconfigRoundTripAndMutualTLS(t *testing.T) {
	env := testEnv(t)
	dir := clusterPKI(t, env)
	k := kubeconfigBuiltin{}

	// An HTTPS server with the generated certificate that requires a client
	// certificate signed by the CA: what kube-apiserver does with
	// --client-ca-file.
	serverPair, err := tls.LoadX509KeyPair(filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, "ca.crt")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := r.TLS.PeerCertificates[0]
			fmt.Fprintf(w, "%s/%s", c.Subject.CommonName, strings.Join(c.Subject.Organization, ","))
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert},
		ErrorLog:  log.New(io.Discard, "", 0), // the refused anonymous client is expected
	}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	server := "https://" + ln.Addr().String()

	res := run(t, k, env, kubeconfigArgs(server))
	path := filepath.Join(env.WorkDir, "kubeconfig/admin.conf")
	if !res.Changed || res.Data["path"] != path || res.Data["context"] != "kubernetes-admin@kubernetes" {
		t.Fatalf("first run: %+v", res)
	}
	assertMode(t, path, 0o600)
	content := readFile(t, path)
	kc, err := ParseKubeConfig(content)
	if err != nil {
		t.Fatalf("parse back: %v\n%s", err, content)
	}
	if kc.APIVersion != "v1" || kc.CurrentContext != "kubernetes-admin@kubernetes" || len(kc.Clusters) != 1 || len(kc.Users) != 1 ||
		kc.Clusters[0].Name != "kubernetes" || kc.Clusters[0].Cluster.Server != server ||
		kc.Contexts[0].Context != (Context{Cluster: "kubernetes", User: "kubernetes-admin"}) || kc.Users[0].Name != "kubernetes-admin" {
		t.Fatalf("kubeconfig content:\n%s", content)
	}
	if !bytes.Equal(decode(t, kc.Users[0].User.ClientCertificateData), readFile(t, filepath.Join(dir, "admin.crt"))) ||
		!bytes.Equal(decode(t, kc.Users[0].User.ClientKeyData), readFile(t, filepath.Join(dir, "admin.key"))) ||
		!bytes.Equal(decode(t, kc.Clusters[0].Cluster.CertificateAuthorityData), readFile(t, filepath.Join(dir, "ca.crt"))) {
		t.Error("embedded data differs from the files")
	}
	if strings.Contains(res.Msg, "warning") {
		t.Errorf("unexpected warning: %s", res.Msg)
	}

	// Use the kubeconfig the way a client does: only its embedded data.
	pair, err := tls.X509KeyPair(decode(t, kc.Users[0].User.ClientCertificateData), decode(t, kc.Users[0].User.ClientKeyData))
	if err != nil {
		t.Fatal(err)
	}
	clientRoots := x509.NewCertPool()
	if !clientRoots.AppendCertsFromPEM(decode(t, kc.Clusters[0].Cluster.CertificateAuthorityData)) {
		t.Fatal("CA data is not PEM")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: clientRoots, Certificates: []tls.Certificate{pair}}}}
	resp, err := client.Get(kc.Clusters[0].Cluster.Server)
	if err != nil {
		t.Fatalf("mutual TLS with the kubeconfig: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "kubernetes-admin/system:masters" {
		t.Errorf("server saw %q", body)
	}
	// Without the client certificate the server refuses.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: clientRoots}}}
	if resp, err := anon.Get(server); err == nil {
		resp.Body.Close()
		t.Error("server accepted a client without certificate")
	}

	// Same inputs: unchanged and untouched.
	if res := run(t, k, env, kubeconfigArgs(server)); res.Changed {
		t.Fatalf("second run changed: %s", res.Msg)
	}
	if !bytes.Equal(content, readFile(t, path)) {
		t.Error("second run rewrote the file")
	}
}

func TestKubeconfigDiffMasksKeysAndCheckMode(t *testing.T) {
	env := testEnv(t)
	clusterPKI(t, env)
	k := kubeconfigBuiltin{}
	run(t, k, env, kubeconfigArgs("https://10.0.0.10:6443"))
	path := filepath.Join(env.WorkDir, "kubeconfig/admin.conf")
	before := readFile(t, path)
	kc, _ := ParseKubeConfig(before)
	keyData := kc.Users[0].User.ClientKeyData

	env.Check, env.Diff = true, true
	res := run(t, k, env, kubeconfigArgs("https://10.0.0.11:6443"))
	if !res.Changed || !strings.HasPrefix(res.Msg, "would update") {
		t.Fatalf("check: %+v", res)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("check mode wrote the kubeconfig")
	}
	if !strings.Contains(res.Diff, "-    server: https://10.0.0.10:6443\n") || !strings.Contains(res.Diff, "+    server: https://10.0.0.11:6443\n") {
		t.Errorf("diff does not show the server change:\n%s", res.Diff)
	}
	if strings.Contains(res.Diff, keyData) || strings.Contains(res.Diff, keyData[:40]) || !strings.Contains(res.Diff, "certificate-authority-data: <") {
		t.Errorf("diff shows key material:\n%s", res.Diff)
	}

	// A new client key shows up as a changed digest, still masked.
	env.Check = false
	run(t, genCert{}, env, step.Args{"path": "certs/kubernetes", "name": "admin", "common_name": "kubernetes-admin",
		"organization": []any{"system:masters", "extra"}, "usages": []any{"client"}})
	res = run(t, k, env, kubeconfigArgs("https://10.0.0.10:6443"))
	if !res.Changed || !strings.Contains(res.Diff, "-    client-key-data: <") || !strings.Contains(res.Diff, "+    client-key-data: <") {
		t.Errorf("key change diff:\n%s", res.Diff)
	}
	kc, _ = ParseKubeConfig(readFile(t, path))
	if strings.Contains(res.Diff, kc.Users[0].User.ClientKeyData[:40]) {
		t.Error("diff shows the new key")
	}

	// A mode change alone is a change too.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := run(t, k, env, kubeconfigArgs("https://10.0.0.10:6443")); !res.Changed || !strings.Contains(res.Msg, "mode 0644 -> 0600") {
		t.Errorf("mode change: %+v", res)
	}
	assertMode(t, path, 0o600)
}

func TestKubeconfigNamesAndErrors(t *testing.T) {
	env := testEnv(t)
	clusterPKI(t, env)
	k := kubeconfigBuiltin{}
	args := kubeconfigArgs("https://lb.example:6443")
	args["cluster_name"], args["user"], args["context"] = "prod", "system:kube-scheduler", "sched"
	run(t, k, env, args)
	kc, err := ParseKubeConfig(readFile(t, filepath.Join(env.WorkDir, "kubeconfig/admin.conf")))
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != "sched" || kc.Contexts[0].Context != (Context{Cluster: "prod", User: "system:kube-scheduler"}) {
		t.Errorf("names: %+v", kc)
	}

	// A client certificate from another CA is written but called out.
	run(t, genCert{}, env, step.Args{"path": "other", "name": "ca", "ca": true, "common_name": "other"})
	args = kubeconfigArgs("https://lb.example:6443")
	args["ca"] = "other/ca.crt"
	if res := run(t, k, env, args); !strings.Contains(res.Msg, "does not verify against CA") {
		t.Errorf("foreign CA not reported: %s", res.Msg)
	}

	for _, tc := range []struct {
		key, value, want string
	}{
		{"server", "10.0.0.1:6443", "is not a URL"},
		{"key", "certs/kubernetes/apiserver.key", "does not belong"},
		{"cert", "certs/kubernetes/none.crt", "no such file"},
		{"ca", "certs/kubernetes/admin.key", "no PEM CERTIFICATE"},
	} {
		a := kubeconfigArgs("https://lb.example:6443")
		a[tc.key] = tc.value
		if _, err := call(k, env, a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}
