//go:build integration

package pki

import (
	"bytes"
	"context"
	"fmt"
	"net"
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

const etcdVersion = "v3.7.3"

// etcdBinDir finds etcd and etcdctl built by test/artifacts/etcd.sh.
// testCache is where test/artifacts keeps what it builds.
func testCache() string {
	if dir := os.Getenv("KUBEXM_TEST_CACHE"); dir != "" {
		return dir
	}
	return "/var/cache/kubexm-test"
}

func etcdBinDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KUBEXM_TEST_ETCD_DIR")
	if dir == "" {
		dir = filepath.Join(testCache(), "artifacts", "etcd", etcdVersion, runtime.GOARCH)
	}
	for _, b := range []string{"etcd", "etcdctl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("etcd %s binaries not found in %s (%v): run test/artifacts/etcd.sh, or set KUBEXM_TEST_ETCD_DIR", etcdVersion, dir, err)
		}
	}
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestEtcdAcceptsGeneratedCertificates runs a single etcd member with the
// certificates gen_cert makes, client and peer certificate auth on, and
// checks etcdctl gets in with the admin certificate and only with it.
func TestEtcdAcceptsGeneratedCertificates(t *testing.T) {
	bin := etcdBinDir(t)
	env := testEnv(t)
	g := genCert{}
	run(t, g, env, step.Args{"path": "certs/etcd", "name": "ca", "ca": true, "common_name": "etcd-ca"})
	run(t, g, env, step.Args{"path": "certs/etcd", "name": "member-node1", "common_name": "node1",
		"usages": []any{"peer"}, "sans": []any{"localhost", "127.0.0.1", "node1"}})
	run(t, g, env, step.Args{"path": "certs/etcd", "name": "admin-node1", "common_name": "admin-node1",
		"usages": []any{"client"}, "key_type": "ecdsa-p256"})
	// A client certificate from a CA that etcd does not trust.
	run(t, g, env, step.Args{"path": "certs/rogue", "name": "ca", "ca": true, "common_name": "rogue-ca"})
	run(t, g, env, step.Args{"path": "certs/rogue", "name": "admin", "common_name": "root", "usages": []any{"client"}})
	certs := filepath.Join(env.WorkDir, "certs/etcd")
	rogue := filepath.Join(env.WorkDir, "certs/rogue")
	f := func(dir, name string) string { return filepath.Join(dir, name) }

	clientURL := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	peerURL := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	logPath := filepath.Join(env.WorkDir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	etcd := exec.Command(filepath.Join(bin, "etcd"),
		"--name", "node1",
		"--data-dir", filepath.Join(env.WorkDir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "node1="+peerURL, "--initial-cluster-state", "new",
		"--client-cert-auth", "--trusted-ca-file", f(certs, "ca.crt"),
		"--cert-file", f(certs, "member-node1.crt"), "--key-file", f(certs, "member-node1.key"),
		"--peer-client-cert-auth", "--peer-trusted-ca-file", f(certs, "ca.crt"),
		"--peer-cert-file", f(certs, "member-node1.crt"), "--peer-key-file", f(certs, "member-node1.key"),
		"--listen-metrics-urls", "")
	etcd.Stdout, etcd.Stderr = logFile, logFile
	etcd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- etcd.Wait() }()
	defer func() {
		_ = etcd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = etcd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("etcd log (last 3000 bytes):\n%s", tail(b, 3000))
		}
	}()

	etcdctl := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		full := append([]string{"--endpoints", clientURL, "--dial-timeout", "3s", "--command-timeout", "5s"}, args...)
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "etcdctl"), full...).CombinedOutput()
		return string(out), err
	}
	admin := []string{"--cacert", f(certs, "ca.crt"), "--cert", f(certs, "admin-node1.crt"), "--key", f(certs, "admin-node1.key")}

	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := etcdctl(append(admin, "endpoint", "health")...)
		if err == nil && strings.Contains(out, "is healthy") {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("etcd exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdctl endpoint health with the admin certificate: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out, err := etcdctl(append(admin, "put", "/kubexm/test", "ok")...); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	if out, err := etcdctl(append(admin, "get", "--print-value-only", "/kubexm/test")...); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("get: %v\n%s", err, out)
	}

	// Both refusals must come from the TLS handshake, not from a timeout. The
	// client does not always see the alert (under TLS 1.3 the server's refusal
	// can arrive after the client started writing: "broken pipe"), so etcd's
	// own log line for this attempt counts as well.
	refused := func(what, clientSays, serverSays string, args ...string) {
		t.Helper()
		before, _ := os.Stat(logPath)
		out, err := etcdctl(args...)
		if err == nil {
			t.Errorf("%s: accepted:\n%s", what, out)
			return
		}
		if strings.Contains(out, clientSays) {
			return
		}
		b, _ := os.ReadFile(logPath)
		if fresh := string(b[min(int(before.Size()), len(b)):]); strings.Contains(fresh, "rejected connection") && strings.Contains(fresh, serverSays) {
			return
		}
		t.Errorf("%s: want a TLS refusal (client %q or etcd log %q), got %v:\n%s", what, clientSays, serverSays, err, out)
	}
	refused("client without a certificate", "tls: certificate required", "didn't provide a certificate",
		"--cacert", f(certs, "ca.crt"), "endpoint", "health")
	refused("client certificate from an untrusted CA", "tls: unknown certificate authority", "certificate signed by unknown authority",
		"--cacert", f(certs, "ca.crt"), "--cert", f(rogue, "admin.crt"), "--key", f(rogue, "admin.key"), "endpoint", "health")

	// A reissued admin certificate (new key, same CA) is accepted too, and an
	// identical rerun keeps it.
	adminArgs := step.Args{"path": "certs/etcd", "name": "admin-node1", "common_name": "admin-node1",
		"organization": []any{"kubexm"}, "usages": []any{"client"}, "key_type": "ecdsa-p256"}
	if res := run(t, g, env, adminArgs); !res.Changed {
		t.Fatalf("organization change did not reissue: %s", res.Msg)
	}
	if out, err := etcdctl(append(admin, "endpoint", "health")...); err != nil {
		t.Errorf("reissued admin certificate refused: %v\n%s", err, out)
	}
	if res := run(t, g, env, adminArgs); res.Changed {
		t.Errorf("identical rerun reissued: %s", res.Msg)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return bytes.TrimSpace(b)
}
