//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
	tlsConfig := &tls.Config{InsecureSkipVerify: true}
	get := func(c *http.Client) string {
		t.Helper()
		resp, err := c.Get("https://" + bind + "/api")
		if err != nil {
			t.Fatalf("through haproxy: %v\n%s", err, out.String())
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	// A client whose one open connection goes to n1 (haproxy alternates).
	keptToN1 := func() *http.Client {
		t.Helper()
		for range 10 {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, MaxConnsPerHost: 1}}
			if get(c) == "n1" {
				return c
			}
			c.CloseIdleConnections()
		}
		t.Fatal("no connection through haproxy reached n1 in 10")
		return nil
	}
	kept := keptToN1()

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
	kept = keptToN1()
	// The first kept client's connection may still be open too.
	backend("out", "n1 drained, checks paused\nn1: [12] open connections cut", true)
	var got string
	for range 3 { // the request on the cut connection may fail once
		resp, err := kept.Get("https://" + bind + "/api")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = string(body)
		break
	}
	if got != "n4" {
		t.Errorf("after the cut the kept client reached %q, want n4", got)
	}
	backend("out", "", true)
	backend("in", "n1 ready, checked")
}
