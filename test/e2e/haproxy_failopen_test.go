//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHAProxyFailsOpenToListeningMasters runs haproxy with the role's
// configuration in front of three masters on loopback addresses: n1 and n4
// serve but fail /readyz (etcd electing a leader, or too loaded to answer
// the check in time), n5 is gone. Every connection must reach n1 or n4 at
// the first attempt, never the gone n5 (whose connects cost a timeout when
// a host is powered off); once n1 is ready, the checked backend has it.
func TestHAProxyFailsOpenToListeningMasters(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed here (.ci/run installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ready, out, bind := startHAProxy(ctx, t, bin, filepath.Join(t.TempDir(), "admin.sock"), "[-]etcd-readiness failed")

	waitLogged := func(what string, lines ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			missing := false
			for _, l := range lines {
				missing = missing || !strings.Contains(out.String(), l)
			}
			if !missing {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("haproxy did not log %s within 30 s (%q):\n%s", what, lines, out.String())
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
	}}
	ask := func(n int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for range n {
			resp, err := client.Get("https://" + bind + "/api")
			if err != nil {
				t.Fatalf("through haproxy: %v\n%s", err, out.String())
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen[string(body)]++
		}
		return seen
	}
	connections := regexp.MustCompile(`kube-apiserver (\S+)/(\S+) \S+ \d+ \S+ \d+/\d+/\d+/\d+/(\+?\d+) `)
	// servedBy waits for n connection lines after the log's offset from
	// (haproxy writes one when a connection closes) and counts them by
	// backend, server and retries.
	servedBy := func(from, n int) map[string]int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, total := map[string]int{}, 0
			for _, m := range connections.FindAllStringSubmatch(out.String()[from:], -1) {
				got[m[1]+"/"+m[2]+" retries "+m[3]]++
				total++
			}
			if total >= n || time.Now().After(deadline) {
				if total != n {
					t.Errorf("haproxy logged %d connections, want %d:\n%s", total, n, out.String()[from:])
				}
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	waitLogged("every checked master down and n5 gone",
		"backend kube-apiserver has no server available!", "Server kube-apiserver-listening/n5 is DOWN")
	mark := len(out.String())
	if seen := ask(30); seen["n1"]+seen["n4"] != 30 || seen["n1"] == 0 || seen["n4"] == 0 {
		t.Errorf("with no master ready, 30 requests were answered by %v, want n1 and n4 only, both", seen)
	}
	want := map[string]bool{"kube-apiserver-listening/n1 retries 0": true, "kube-apiserver-listening/n4 retries 0": true}
	for k, n := range servedBy(mark, 30) {
		if !want[k] {
			t.Errorf("%d connections went to %s, want kube-apiserver-listening's n1 or n4 without a retry", n, k)
		}
	}

	ready["n1"].Store(true)
	waitLogged("n1 ready again", "Server kube-apiserver/n1 is UP")
	mark = len(out.String())
	if seen := ask(10); seen["n1"] != 10 {
		t.Errorf("with n1 ready, 10 requests were answered by %v, want n1 only", seen)
	}
	if got := servedBy(mark, 10); got["kube-apiserver/n1 retries 0"] != 10 {
		t.Errorf("with n1 ready, connections went to %v, want 10 to kube-apiserver/n1 without a retry\n%s", got, out.String()[mark:])
	}
}

// startHAProxy runs haproxy (bin) with roles/loadbalancer's configuration of
// worker n2, its admin socket at sock, in front of startMasters' masters.
// Its log names every connection (local0 info); it is stopped when the test
// ends.
func startHAProxy(ctx context.Context, t *testing.T, bin, sock, failMsg string) (ready map[string]*atomic.Bool, out haproxyLog, bind string) {
	t.Helper()
	ready, v := startMasters(t, "haproxy", failMsg)
	v["lb_haproxy_admin_socket"] = sock
	cfg := renderRoleTemplate(t, "loadbalancer", "haproxy.cfg.tmpl", v)
	// Each connection's log line names the server that took it and the
	// retries it cost: the test's copy logs connections, not only warnings.
	logged := strings.Replace(cfg, "local0 warning", "local0 info", 1)
	if logged == cfg {
		t.Fatalf("haproxy.cfg has no %q to raise to info:\n%s", "local0 warning", cfg)
	}
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, []byte(logged), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.CommandContext(ctx, bin, "-db", "-f", file)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return ready, haproxyLog{logFile.Name()}, v["lb_bind"].(string)
}

// startMasters serves three masters on loopback addresses for a proxy of
// worker n2 (proxy: internalLoadbalancer): n1 and n4 served by this test on
// one port, each answering its name and failing /readyz with failMsg while
// its ready flag is false (both start false), n5 gone. It returns the flags
// and roles/loadbalancer's variables for that proxy in front of them,
// listening on a free loopback address (lb_bind).
func startMasters(t *testing.T, proxy, failMsg string) (map[string]*atomic.Bool, map[string]any) {
	t.Helper()
	addrs := map[string]string{"n1": "127.0.0.11", "n4": "127.0.0.14", "n5": "127.0.0.15"}
	first, err := net.Listen("tcp", addrs["n1"]+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := first.Addr().(*net.TCPAddr).Port
	second, err := net.Listen("tcp", net.JoinHostPort(addrs["n4"], strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]*atomic.Bool{"n1": {}, "n4": {}}
	for name, ln := range map[string]net.Listener{"n1": first, "n4": second} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" && !ready[name].Load() {
				http.Error(w, failMsg, http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, name)
		}))
		srv.Listener.Close()
		srv.Listener = ln
		srv.StartTLS()
		t.Cleanup(srv.Close)
	}
	v := lbVars(t, "n2", func(c map[string]any) { c["internalLoadbalancer"] = proxy })
	for name, a := range addrs {
		v["hostvars"].(map[string]any)[name].(map[string]any)["internal_address"] = a
	}
	v["kube_apiserver_port"] = port
	// The masters' servers follow their addresses and port.
	delete(v, "lb_apiserver_json")
	delete(v, "lb_apiserver")
	v = withDefaults(t, "loadbalancer", v)
	v["lb_bind"] = freeLoopbackAddr(t)
	return ready, v
}

// freeLoopbackAddr is a 127.0.0.1 address with a port nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// haproxyLog is what haproxy has written to its log file so far.
type haproxyLog struct{ path string }

func (l haproxyLog) String() string {
	data, _ := os.ReadFile(l.path)
	return string(data)
}
