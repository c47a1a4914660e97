//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHAProxyDrainsAMaster runs haproxy with the role's configuration in
// front of masters on loopback addresses (n1 and n4 serve, n5 is gone) and
// the script of roles/loadbalancer tasks/backend.yaml against its admin
// socket, as the API server's restart does (tasks/restart-apiserver.yaml):
// out drains n1 with its checks paused, so new connections go to n4 while
// a connection open to n1 keeps being served even once n1's /readyz fails
// (a stopping API server); out again changes nothing; in makes n1 ready
// and checked again, new connections reach it; in again changes nothing.
// With CUT (lb_backend_cut) out also cuts the connections open to n1, and
// a client that held one goes on through n4.
func TestHAProxyDrainsAMaster(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed here (.ci/run installs it)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the script talks to haproxy with curl, which is not installed here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sock := filepath.Join(t.TempDir(), "admin.sock")
	ready, out, bind := startHAProxy(ctx, t, bin, sock, "[-]shutdown failed")
	ready["n1"].Store(true)
	ready["n4"].Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Server kube-apiserver/n5 is DOWN") {
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not take the gone n5 out within 30 s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	script, _ := roleTask(t, "loadbalancer", "backend.yaml", `Load balancer - {{ .lb_backend_masters | join ", " }} {{ if eq .lb_backend_state "out" }}out of{{ else }}back into{{ end }} every haproxy`)["shell"].(string)
	if script == "" {
		t.Fatal("backend.yaml's task has no shell script")
	}
	backend := func(state, want string, cut ...bool) {
		t.Helper()
		c := exec.CommandContext(ctx, "sh", "-c", script)
		c.Env = append(os.Environ(), "SOCK="+sock, "MASTERS=n1", "STATE="+state, "CUT="+map[bool]string{true: "true", false: "false"}[len(cut) > 0 && cut[0]])
		got, err := c.Output()
		if err != nil {
			t.Fatalf("backend.yaml's script, %s: %v\n%s", state, err, got)
		}
		if !regexp.MustCompile(`^` + want + `$`).MatchString(strings.TrimSpace(string(got))) {
			t.Errorf("backend.yaml's script, %s: said %q, want %q", state, got, want)
		}
	}
	px := throughProxy{bind: bind}
	get := func(c *http.Client) string {
		t.Helper()
		got, err := px.get(c)
		if err != nil {
			t.Fatalf("through haproxy: %v\n%s", err, out.String())
		}
		return got
	}
	fresh := px.fresh()
	kept := px.keptTo(t, "n1")

	backend("out", "n1 drained, checks paused")
	ready["n1"].Store(false) // n1 stopping: its /readyz fails
	seen := map[string]int{}
	for range 10 {
		seen[get(fresh)]++
	}
	if seen["n4"] != 10 {
		t.Errorf("with n1 drained, new connections reached %v, want n4 only", seen)
	}
	// Longer than lb_check_fall checks of lb_check_interval: a check would
	// have marked n1 down and cut its connections by now.
	time.Sleep(3 * time.Second)
	if got := get(kept); got != "n1" {
		t.Errorf("the connection open to n1 answered %q after n1 was drained and its /readyz failed, want n1's (not cut)", got)
	}
	backend("out", "")

	ready["n1"].Store(true)
	backend("in", "n1 ready, checked")
	seen = map[string]int{}
	for range 10 {
		seen[get(fresh)]++
	}
	if seen["n1"] == 0 || seen["n1"]+seen["n4"] != 10 {
		t.Errorf("with n1 back, new connections reached %v, want n1 and n4", seen)
	}
	backend("in", "")
	if strings.Contains(out.String(), "kube-apiserver/n1 is DOWN") {
		t.Errorf("haproxy marked n1 down:\n%s", out.String())
	}

	// lb_backend_cut (kubeadm's upgrade, whose API server hangs while its
	// etcd member restarts): out also cuts the connection open to n1, and
	// the client's next request goes through haproxy to n4.
	kept = px.keptTo(t, "n1")
	// The first kept client's connection may still be open too.
	backend("out", "n1 drained, checks paused\nn1: [12] open connections cut", true)
	if got, err := px.afterCut(kept); got != "n4" {
		t.Errorf("after the cut the kept client reached %q (%v), want n4", got, err)
	}
	backend("out", "", true)
	backend("in", "n1 ready, checked")
}

// TestNginxCutsAMaster runs nginx with roles/loadbalancer's configuration in
// front of masters on loopback addresses (n1 and n4 serve, n5 is gone) and
// the nginx script of tasks/backend.yaml against it, as kubeadm's upgrade
// does (lb_backend_cut): out without the cut leaves nginx alone; out with it
// marks n1 down and ends nginx's old worker, so that a connection open to
// n1 is cut and its client goes on through n4, as do new connections; out
// again changes nothing; in takes the mark off, and new connections reach n1
// again; in again changes nothing.
func TestNginxCutsAMaster(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed here (.ci/run installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ready, v := startMasters(t, "nginx", "[-]shutdown failed")
	ready["n1"].Store(true)
	ready["n4"].Store(true)
	dir := t.TempDir()
	v["lb_nginx_pid_file"] = filepath.Join(dir, "nginx.pid")
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(renderRoleTemplate(t, "loadbalancer", "nginx.conf.tmpl", v)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-e", "stderr", "-c", conf, "-g", "daemon off;")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// SIGTERM: nginx's master ends its workers, which hold the log's pipe.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	bind := v["lb_bind"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", bind)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s: %v\n%s", bind, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	script, _ := roleTask(t, "loadbalancer", "backend.yaml", `Load balancer - {{ .lb_backend_masters | join ", " }} {{ if eq .lb_backend_state "out" }}out of{{ else }}back into{{ end }} every nginx`)["shell"].(string)
	if script == "" {
		t.Fatal("backend.yaml's nginx task has no shell script")
	}
	n1 := net.JoinHostPort("127.0.0.11", fmt.Sprint(v["kube_apiserver_port"]))
	backend := func(state string, cut bool, want string) {
		t.Helper()
		c := exec.CommandContext(ctx, "sh", "-c", script)
		c.Env = append(os.Environ(), "CONF="+conf, "NGINX_BIN="+bin, "PIDFILE="+v["lb_nginx_pid_file"].(string),
			"MASTERS=n1", "ENDPOINTS="+n1, "STATE="+state, "CUT="+map[bool]string{true: "true", false: "false"}[cut])
		got, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("backend.yaml's nginx script, %s (cut %v): %v\n%s\n%s", state, cut, err, got, logs.String())
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("backend.yaml's nginx script, %s (cut %v): said %q, want %q", state, cut, got, want)
		}
	}
	px := throughProxy{bind: bind}
	fresh := px.fresh()
	freshAnswers := func() map[string]int {
		t.Helper()
		seen := map[string]int{}
		for range 10 {
			got, err := px.get(fresh)
			if err != nil {
				t.Fatalf("through nginx: %v\n%s", err, logs.String())
			}
			seen[got]++
		}
		return seen
	}
	kept := px.keptTo(t, "n1")

	backend("out", false, "")
	if got, err := px.get(kept); err != nil || got != "n1" {
		t.Errorf("without the cut the connection open to n1 answered %q, %v; want n1's", got, err)
	}
	backend("out", true, "n1 marked down, the connections open through nginx cut")
	if data, _ := os.ReadFile(conf); !strings.Contains(string(data), n1+" ") || !strings.Contains(string(data), " down;") {
		t.Errorf("nginx.conf does not mark %s down:\n%s", n1, data)
	}
	if got, err := px.afterCut(kept); got != "n4" {
		t.Errorf("after the cut the kept client reached %q (%v), want n4", got, err)
	}
	if seen := freshAnswers(); seen["n4"] != 10 {
		t.Errorf("with n1 marked down, new connections reached %v, want n4 only", seen)
	}
	backend("out", true, "")

	backend("in", false, "n1 back in")
	deadline = time.Now().Add(10 * time.Second)
	for freshAnswers()["n1"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("with n1 back in, no new connection reached it in 10 s\n%s", logs.String())
		}
	}
	backend("in", false, "")
}

// throughProxy is a client's view of a proxy listening on bind in front of
// startMasters' masters (TLS not verified): each answer is a master's name.
type throughProxy struct{ bind string }

func (p throughProxy) transport(keep bool) *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: !keep, MaxConnsPerHost: 1}
}

// get asks /api through the proxy on one of c's connections.
func (p throughProxy) get(c *http.Client) (string, error) {
	resp, err := c.Get("https://" + p.bind + "/api")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// fresh is a client that opens a connection for each request.
func (p throughProxy) fresh() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: p.transport(false)}
}

// keptTo is a client whose one open connection goes to master (the proxy
// alternates; ten tries).
func (p throughProxy) keptTo(t *testing.T, master string) *http.Client {
	t.Helper()
	for range 10 {
		c := &http.Client{Timeout: 5 * time.Second, Transport: p.transport(true)}
		if got, err := p.get(c); err == nil && got == master {
			return c
		}
		c.CloseIdleConnections()
	}
	t.Fatalf("no connection through the proxy at %s reached %s in 10", p.bind, master)
	return nil
}

// afterCut asks through c after its connection was cut: the request on the
// cut connection may fail once, the next goes on a new one.
func (p throughProxy) afterCut(c *http.Client) (got string, err error) {
	for range 3 {
		if got, err = p.get(c); err == nil {
			return got, nil
		}
	}
	return got, err
}
