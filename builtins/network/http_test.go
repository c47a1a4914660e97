package network

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func TestURI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/health":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"health":"true","method":%q,"body":%q,"x":%q}`, r.Method, b, r.Header.Get("X-Test"))
		case "/moved":
			http.Redirect(w, r, "/health", http.StatusFound)
		default:
			http.Error(w, "nope", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	env, _ := steptest.Env(t)
	res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/health", "method": "POST", "body": map[string]any{"a": 1}, "body_format": "json", "headers": map[string]any{"X-Test": "y"}})
	j, _ := res.Data["json"].(map[string]any)
	if res.Failed || res.Changed || res.Data["status"] != 200 || j["method"] != "POST" || j["body"] != `{"a":1}` || j["x"] != "y" {
		t.Fatalf("%+v", res)
	}
	res = steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/down", "return_content": true})
	if !res.Failed || res.Data["status"] != 503 || !strings.Contains(res.Msg, "503") || !strings.Contains(res.Data["content"].(string), "nope") {
		t.Fatalf("%+v", res)
	}
	res = steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/down", "status_code": []any{503}})
	if res.Failed {
		t.Fatalf("%+v", res)
	}
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/moved", "status_code": []any{302}}); res.Failed || res.Data["status"] != 302 {
		t.Errorf("a redirect is not followed by default: %+v", res)
	}
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/moved", "follow_redirects": true}); res.Failed || res.Data["status"] != 200 {
		t.Errorf("follow_redirects: %+v", res)
	}
	env.Check = true
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/health", "method": "DELETE"}); !res.Skipped {
		t.Errorf("check mode DELETE: %+v", res)
	}
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL + "/health", "method": "HEAD"}); res.Skipped || res.Data["status"] != 200 {
		t.Errorf("check mode HEAD: %+v", res)
	}
}

func TestURIClientCert(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	env, root := steptest.Env(t)
	// Without the CA the server certificate is rejected; with validate_certs
	// false it is accepted; with the CA file it is verified.
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL}); !res.Failed {
		t.Errorf("unverified server accepted: %+v", res)
	}
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL, "validate_certs": false}); res.Failed {
		t.Errorf("%+v", res)
	}
	ca := filepath.Join(root, "ca.pem")
	steptest.MustWrite(t, ca, string(pemCert(srv.Certificate().Raw)))
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": strings.Replace(srv.URL, "127.0.0.1", "example.com", 1) + "/", "ca_path": ca}); !res.Failed {
		t.Errorf("wrong host name accepted: %+v", res)
	}
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL, "ca_path": ca}); res.Failed {
		t.Errorf("%+v", res)
	}
}

func TestWaitFor(t *testing.T) {
	env, root := steptest.Env(t)
	w := waitForBuiltin{firstPoll: 10 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if res := steptest.Run(t, w, env, step.Args{"port": port, "timeout": "5s"}); res.Failed || res.Changed {
		t.Fatalf("%+v", res)
	}
	ln.Close()
	if res := steptest.Run(t, w, env, step.Args{"port": port, "state": "stopped", "timeout": "5s"}); res.Failed {
		t.Fatalf("%+v", res)
	}
	res := steptest.Run(t, w, env, step.Args{"port": port, "timeout": "300ms"})
	if !res.Failed || !strings.Contains(res.Msg, "timed out") {
		t.Fatalf("%+v", res)
	}
	// A path that appears later.
	p := filepath.Join(root, "ready")
	go func() {
		time.Sleep(100 * time.Millisecond)
		os.WriteFile(p, nil, 0o644)
	}()
	if res := steptest.Run(t, w, env, step.Args{"path": p, "timeout": "5s"}); res.Failed || res.Data["tries"].(int) < 2 {
		t.Fatalf("%+v", res)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	if res := steptest.Run(t, w, env, step.Args{"url": srv.URL, "status": []any{204}, "timeout": "5s"}); res.Failed {
		t.Fatalf("%+v", res)
	}
	res = steptest.Run(t, w, env, step.Args{"url": srv.URL, "timeout": "200ms"})
	if !res.Failed || !strings.Contains(res.Msg, "status 204") {
		t.Fatalf("%+v", res)
	}
	if res := steptest.Run(t, w, env, step.Args{"command": "test -e " + p, "timeout": "1s"}); res.Failed {
		t.Fatalf("%+v", res)
	}
	env.Check = true
	if res := steptest.Run(t, w, env, step.Args{"path": p + "x"}); !res.Skipped {
		t.Fatalf("check: %+v", res)
	}
	env.Check = false
	if _, err := steptest.RunBuiltin(t.Context(), env, w, step.Args{"path": p, "port": 1}); err == nil {
		t.Error("two probes: want error")
	}
}

// TestWaitForBanner: with search_regex the port counts as up only when what
// the service sends first matches, on the control machine (kubexm dials) and
// on a host (bash and dd run the probe); a timeout registers met false.
func TestWaitForBanner(t *testing.T) {
	serve := func(greeting string) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if greeting != "" {
					c.Write([]byte(greeting))
				}
				time.AfterFunc(3*time.Second, func() { c.Close() })
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	sshd, proxy, silent := serve("SSH-2.0-OpenSSH_9.2\r\n"), serve("HTTP/1.1 400 Bad Request\r\n\r\n"), serve("")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	w := waitForBuiltin{firstPoll: 10 * time.Millisecond}
	env, _ := steptest.Env(t)
	// onHost hides the local transport's own dialing: the probe runs as a
	// command, as on a host reached over SSH.
	onHost := *env
	onHost.Target = struct{ transport.Transport }{env.Target}
	for name, e := range map[string]*step.Env{"control machine": env, "host": &onHost} {
		t.Run(name, func(t *testing.T) {
			res := steptest.Run(t, w, e, step.Args{"port": sshd, "search_regex": "^SSH-", "timeout": "5s"})
			if res.Failed || res.Data["met"] != true {
				t.Fatalf("an SSH server: %+v", res)
			}
			res = steptest.Run(t, w, e, step.Args{"port": proxy, "search_regex": "^SSH-", "timeout": "300ms"})
			if !res.Failed || res.Data["met"] != false || !strings.Contains(res.Msg, "does not match ^SSH-") || !strings.Contains(res.Msg, "HTTP/1.1 400") {
				t.Fatalf("another service: %+v", res)
			}
			res = steptest.Run(t, w, e, step.Args{"port": silent, "search_regex": "^SSH-", "timeout": "1s"})
			if !res.Failed || !strings.Contains(res.Msg, "nothing received") {
				t.Fatalf("a silent service: %+v", res)
			}
			if res := steptest.Run(t, w, e, step.Args{"port": silent, "timeout": "5s"}); res.Failed || res.Data["met"] != true {
				t.Fatalf("without search_regex a connection is enough: %+v", res)
			}
			// timeout 0s: one probe, bounded by connect_timeout; a port
			// that refuses is not waited for.
			start := time.Now()
			res = steptest.Run(t, w, e, step.Args{"port": closed, "search_regex": "^SSH-", "timeout": "0s", "connect_timeout": "3s"})
			if !res.Failed || res.Data["met"] != false || time.Since(start) > 2*time.Second {
				t.Fatalf("one probe of a closed port: %s %+v", time.Since(start), res)
			}
			if res := steptest.Run(t, w, e, step.Args{"port": sshd, "search_regex": "^SSH-", "timeout": "0s", "connect_timeout": "3s"}); res.Failed || res.Data["met"] != true {
				t.Fatalf("one probe of an SSH server: %+v", res)
			}
		})
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, w, step.Args{"path": "/", "search_regex": "x"}); err == nil || !strings.Contains(err.Error(), "search_regex is for port") {
		t.Errorf("search_regex with path: %v", err)
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, w, step.Args{"port": sshd, "search_regex": "("}); err == nil || !strings.Contains(err.Error(), "search_regex") {
		t.Errorf("a bad search_regex: %v", err)
	}
}

// TestWaitForUnit: with unit, a unit systemd gave up on ends the wait at
// once, and a timeout says what the unit was doing and what it logged last.
func TestWaitForUnit(t *testing.T) {
	w := waitForBuiltin{firstPoll: 10 * time.Millisecond}
	state := "ActiveState=activating\nSubState=auto-restart\nNRestarts=7\nExecMainStatus=1\n"
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		switch {
		case strings.Contains(cmd, "systemctl show"):
			return steptest.OK(state + "---\nE1124 kube-proxy: unknown flag: --bogus\n")
		case strings.HasPrefix(cmd, "curl"):
			return steptest.RC(7, "000", "curl: (7) Failed to connect to 127.0.0.1 port 10256")
		}
		return transport.Result{}, false
	})
	env := steptest.FakeEnv(h)
	args := step.Args{"url": "http://127.0.0.1:10256/livez", "unit": "kube-proxy", "timeout": "300ms"}
	res := steptest.Run(t, w, env, args)
	for _, want := range []string{"timed out after 300ms", "Failed to connect", "unit kube-proxy: activating (auto-restart), 7 restarts, last exit status 1",
		"its journal ends:\nE1124 kube-proxy: unknown flag: --bogus"} {
		if !res.Failed || !strings.Contains(res.Msg, want) {
			t.Errorf("want %q in the failure: %+v", want, res)
		}
	}
	state = "ActiveState=failed\nSubState=failed\nNRestarts=5\nExecMainStatus=1\n"
	args["timeout"] = "1h"
	start := time.Now()
	res = steptest.Run(t, w, env, args)
	if !res.Failed || !strings.Contains(res.Msg, "unit kube-proxy has failed") || !strings.Contains(res.Msg, "--bogus") || time.Since(start) > 10*time.Second {
		t.Errorf("a failed unit: want an early failure naming it, got after %s: %+v", time.Since(start), res)
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestURIClientCertificate checks mutual TLS: the server requires a client
// certificate signed by its CA, as etcd and the API server do.
func TestURIClientCertificate(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	clKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	clTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "admin"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	clDER, err := x509.CreateCertificate(rand.Reader, clTmpl, caCert, &clKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(clKey)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	env, root := steptest.Env(t)
	serverCA, cert, key := filepath.Join(root, "server-ca.pem"), filepath.Join(root, "admin.pem"), filepath.Join(root, "admin-key.pem")
	steptest.MustWrite(t, serverCA, string(pemCert(srv.Certificate().Raw)))
	steptest.MustWrite(t, cert, string(pemCert(clDER)))
	steptest.MustWrite(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	if res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL, "ca_path": serverCA}); !res.Failed {
		t.Fatalf("no client certificate accepted: %+v", res)
	}
	res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL, "ca_path": serverCA, "client_cert": cert, "client_key": key, "return_content": true})
	if res.Failed || res.Data["content"] != "admin" {
		t.Fatalf("%+v", res)
	}
	w := waitForBuiltin{firstPoll: 10 * time.Millisecond}
	if res := steptest.Run(t, w, env, step.Args{"url": srv.URL, "ca_path": serverCA, "client_cert": cert, "client_key": key, "timeout": "5s"}); res.Failed {
		t.Fatalf("%+v", res)
	}
}

// argvRecorder is a transport that remembers every command line it runs.
type argvRecorder struct {
	transport.Transport
	argv [][]string
}

func (r *argvRecorder) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	r.argv = append(r.argv, append(c.Argv, c.Script))
	return r.Transport.Run(ctx, c)
}

// TestURIHeadersNotOnCommandLine: request headers (tokens) and the body
// reach the server intact but never curl's argv, which ps shows to every
// user of the host.
func TestURIHeadersNotOnCommandLine(t *testing.T) {
	type got struct{ auth, other, body string }
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Get("Authorization"), r.Header.Get("X-Odd"), string(b)}
	}))
	defer srv.Close()
	env, _ := steptest.Env(t)
	rec := &argvRecorder{Transport: env.Target}
	env.Target = rec
	const token = `Bearer s3cr3t-"quoted"\back`
	const odd = "tab\there $(touch PWNED) 'single'"
	body := "@/etc/passwd\nline \"two\"\\end\t\r\v"
	res := steptest.Run(t, uriBuiltin{}, env, step.Args{"url": srv.URL, "method": "POST", "body": body,
		"headers": map[string]any{"Authorization": token, "X-Odd": odd}})
	if res.Failed {
		t.Fatalf("%+v", res)
	}
	g := <-seen
	if g.auth != token || g.other != odd || g.body != body {
		t.Errorf("server saw %+v", g)
	}
	for _, argv := range rec.argv {
		line := strings.Join(argv, " ")
		if strings.Contains(line, "s3cr3t") || strings.Contains(line, "X-Odd") || strings.Contains(line, "two") {
			t.Errorf("a header or the body is on the command line: %s", line)
		}
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, uriBuiltin{}, step.Args{"url": srv.URL, "headers": map[string]any{"X": "a\r\nInjected: 1"}}); err == nil {
		t.Error("a header with a line break: want an error")
	}
}
