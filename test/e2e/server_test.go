//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// apiServer is a `kubexm server` a suite started on loopback: TLS with its
// self-signed certificate, its bootstrap operator token, SQLite and one
// in-process worker in a data directory of the suite's work directory.
type apiServer struct {
	url, token, dataDir, logPath string
	// flags are the service flags beside --data-dir (a shared database
	// and key), for the server and its secret commands alike.
	flags  []string
	client *http.Client
	cmd    *exec.Cmd
}

// startServer starts `kubexm server` with dataDir. Its jobs' `kubexm play`
// children trust host keys in kx's KUBEXM_HOME, as the suite's own runs do.
func startServer(ctx context.Context, t *testing.T, kx kubexm, dataDir string) *apiServer {
	return startServerShared(ctx, t, kx, dataDir, nil)
}

// startServerShared starts `kubexm server` with dataDir; with shared, on
// shared's database and secret key (a second server of the same service
// with a data directory of its own), taking its operator token.
func startServerShared(ctx context.Context, t *testing.T, kx kubexm, dataDir string, shared *apiServer) *apiServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &apiServer{url: "https://" + addr, dataDir: dataDir, logPath: dataDir + ".log"}
	if shared != nil {
		s.flags = []string{"--db", filepath.Join(shared.dataDir, "kubexm.db"), "--secret-key-file", filepath.Join(shared.dataDir, "secret.key")}
		s.token = shared.token
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(kx.bin, append([]string{"server", "--listen", addr, "--data-dir", dataDir, "--workers", "1", "--poll", "200ms"}, s.flags...)...)
	s.cmd.Dir = kx.dir
	s.cmd.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(kx.dir, ".kubexm"), "KUBEXM_SECRET_KEY=")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("kubexm server: %v", err)
	}
	t.Cleanup(func() { s.stop(t) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if s.token == "" {
			tok, _ := os.ReadFile(filepath.Join(dataDir, "admin.token"))
			s.token = strings.TrimSpace(string(tok))
		}
		if log, _ := os.ReadFile(s.logPath); s.token != "" && bytes.Contains(log, []byte("kubexm server listening")) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(s.logPath)
			t.Fatalf("kubexm server did not start:\n%s", log)
		}
	}
	pem, err := os.ReadFile(filepath.Join(dataDir, "tls", "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("the server's tls/cert.pem holds no certificate")
	}
	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return s
}

// stop ends the server as a service manager would (SIGTERM).
func (s *apiServer) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("kubexm server stopped with %v; its log: %s", err, s.logPath)
	}
}

// workDir is the work directory the server's jobs give cluster: where its
// journals, PKI and kubeconfig are, for the suite's later kubexm play runs.
func (s *apiServer) workDir(cluster string) string {
	return filepath.Join(s.dataDir, "clusters", cluster)
}

// call sends a request to the API and decodes the answer into v; an
// answer other than want is an error naming the server's message.
func (s *apiServer) call(ctx context.Context, method, path string, body io.Reader, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: HTTP %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if v != nil {
		return json.Unmarshal(data, v)
	}
	return nil
}

// play is kx.play through the API: POST the cluster.yaml, upload the
// offline bundle (when one is given), queue the playbook with kx's extra
// vars, and follow the job's Server-Sent Events to the end. The engine's
// events of the stream make the result, as kubexm play -o json's lines do.
func (s *apiServer) play(ctx context.Context, t *testing.T, kx kubexm, cluster, playbook, bundlePath string) runResult {
	t.Helper()
	start := time.Now()
	var res runResult
	fail := func(err error) runResult {
		res.err = err
		res.wall = time.Since(start)
		log, _ := os.ReadFile(s.logPath)
		res.stderr = tail(string(log), 40)
		if kx.observe != nil {
			kx.observe(res)
		}
		return res
	}
	config, err := os.ReadFile(kx.inventory)
	if err != nil {
		t.Fatal(err)
	}
	if config, err = s.keysAsSecrets(ctx, kx, cluster, config); err != nil {
		return fail(err)
	}
	if err := s.call(ctx, "POST", "/api/v1/clusters", bytes.NewReader(config), http.StatusCreated, nil); err != nil {
		return fail(err)
	}
	opts := map[string]any{"extra_vars": kx.extra}
	if bundlePath != "" {
		f, err := os.Open(bundlePath)
		if err != nil {
			t.Fatal(err)
		}
		var up struct {
			SHA256    string `json:"sha256"`
			Size      int64  `json:"size"`
			Artifacts int    `json:"artifacts"`
		}
		// The sum export wrote beside the bundle: the server checks the
		// body against it before it keeps or unpacks anything.
		sum, err := os.ReadFile(bundlePath + ".sha256")
		if err != nil || len(strings.Fields(string(sum))) == 0 {
			t.Fatalf("the bundle's .sha256: %v", err)
		}
		t0 := time.Now()
		err = s.call(ctx, "POST", "/api/v1/clusters/"+cluster+"/bundles?sha256="+strings.Fields(string(sum))[0], f, http.StatusCreated, &up)
		f.Close()
		if err != nil {
			return fail(err)
		}
		t.Logf("PERF offline bundle uploaded to kubexm server, verified and unpacked: %s (%d MiB, %d artifacts)", time.Since(t0).Round(time.Millisecond), up.Size>>20, up.Artifacts)
		opts["offline_bundle"] = up.SHA256
	}
	req, _ := json.Marshal(map[string]any{"cluster": cluster, "playbook": playbook, "options": opts})
	var acc struct {
		JobID string `json:"job_id"`
	}
	if err := s.call(ctx, "POST", "/api/v1/jobs", bytes.NewReader(req), http.StatusAccepted, &acc); err != nil {
		return fail(err)
	}
	t.Logf("kubexm server: job %s runs %s on cluster %s", acc.JobID, playbook, cluster)
	final, err := s.follow(ctx, t, acc.JobID, &res)
	if err != nil {
		return fail(err)
	}
	if final.Status != "succeeded" {
		return fail(fmt.Errorf("job %s ended %s: %s", acc.JobID, final.Status, final.Error))
	}
	res.wall = time.Since(start)
	if kx.observe != nil {
		kx.observe(res)
	}
	s.checkSSHMetrics(ctx, t, cluster, res)
	return res
}

// checkSSHMetrics wants /metrics to count, for every host the job's run
// reached over SSH, its dialed connections, and none left open once the
// job has ended.
func (s *apiServer) checkSSHMetrics(ctx context.Context, t *testing.T, cluster string, res runResult) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	value := func(series string) (float64, bool) {
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	hosts := map[string]bool{}
	for _, e := range res.events {
		if e.Kind == "host_result" && e.Host != "" && e.Host != "localhost" {
			hosts[e.Host] = true
		}
	}
	var seen []string
	for h := range hosts {
		dials, ok := value(fmt.Sprintf(`kubexm_ssh_dials_total{cluster=%q,host=%q,result="ok"}`, cluster, h))
		open, _ := value(fmt.Sprintf(`kubexm_ssh_connections_open{cluster=%q,host=%q}`, cluster, h))
		if !ok || dials < 1 || open != 0 {
			t.Errorf("/metrics of %s: %v SSH dials (present %v), %v connections open after the job; want at least 1 and 0", h, dials, ok, open)
		}
		seen = append(seen, fmt.Sprintf("%s %v", h, dials))
	}
	if len(hosts) == 0 {
		t.Errorf("the job's events name no host")
	}
	t.Logf("kubexm server /metrics: SSH connections dialed per host: %s; none open after the job", strings.Join(seen, ", "))
}

// serverJob is the part of a job the suite reads.
type serverJob struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// follow reads the job's event stream until its end event, reconnecting
// with Last-Event-ID when the connection drops, and appends the engine's
// events to res.
func (s *apiServer) follow(ctx context.Context, t *testing.T, id string, res *runResult) (serverJob, error) {
	t.Helper()
	var last int64
	for attempt := 0; ; attempt++ {
		job, ended, err := s.stream(ctx, id, &last, res)
		if ended {
			return job, err
		}
		if ctx.Err() != nil || attempt == 5 {
			return job, fmt.Errorf("event stream of job %s: %w", id, errors.Join(err, ctx.Err()))
		}
		t.Logf("event stream of job %s broke after event %d (%v); following on", id, last, err)
		time.Sleep(time.Second)
	}
}

// stream reads one connection of the event stream; ended says whether the
// end event came.
func (s *apiServer) stream(ctx context.Context, id string, last *int64, res *runResult) (serverJob, bool, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/jobs/"+id+"/events/stream", nil)
	if err != nil {
		return serverJob{}, false, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return serverJob{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return serverJob{}, false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var kind, data string
	var evID int64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			evID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && kind != "":
			if kind == "end" {
				var j serverJob
				err := json.Unmarshal([]byte(data), &j)
				return j, true, err
			}
			var stored struct {
				Data json.RawMessage `json:"data"`
			}
			var e event
			if json.Unmarshal([]byte(data), &stored) == nil && json.Unmarshal(stored.Data, &e) == nil && e.Kind != "" {
				res.events = append(res.events, e)
			}
			*last = evID
			kind, data = "", ""
		}
	}
	return serverJob{}, false, errors.Join(sc.Err(), io.ErrUnexpectedEOF)
}

// keysAsSecrets turns the private key files of config into server secrets,
// made as the server's administrator makes them (kubexm server secret
// create), for cluster only: the API takes no path of the server's files.
func (s *apiServer) keysAsSecrets(ctx context.Context, kx kubexm, cluster string, config []byte) ([]byte, error) {
	re := regexp.MustCompile(`privateKeyPath: "([^"]+)"`)
	names := map[string]string{}
	var ferr error
	out := re.ReplaceAllFunc(config, func(m []byte) []byte {
		path := string(re.FindSubmatch(m)[1])
		name, ok := names[path]
		if !ok {
			name = fmt.Sprintf("e2e-key-%d", len(names)+1)
			names[path] = name
			cmd := exec.CommandContext(ctx, kx.bin, append([]string{"server", "secret", "create", name, "--cluster", cluster, "--from-file", path, "--data-dir", s.dataDir}, s.flags...)...)
			cmd.Env = append(os.Environ(), "KUBEXM_SECRET_KEY=")
			if out, err := cmd.CombinedOutput(); err != nil && ferr == nil {
				ferr = fmt.Errorf("kubexm server secret create %s: %w: %s", name, err, out)
			}
		}
		return []byte(`privateKeyPath: "${secret:` + name + `}"`)
	})
	return out, ferr
}

// secondServerAdopts is issue 44's acceptance for the service: a second
// kubexm server with its own data directory (dataDir) on first's database
// and key runs create-cluster on the running cluster. Its work directory
// of the cluster starts empty, so the job adopts the cluster's PKI from
// the masters: no PKI file on any host changes, the CA and the
// service-account key keep their fingerprints, and the second data
// directory holds the cluster's CA, not one of its own.
func secondServerAdopts(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, first *apiServer, cluster, bundle string, hosts []string, dataDir string) {
	t.Helper()
	master := hosts[0]
	before := map[string]map[string]string{}
	for _, h := range hosts {
		before[h] = snapshot(ctx, t, set, h, identityPaths...)
	}
	caFP := hostCertFingerprint(ctx, t, set, master, "/etc/kubernetes/pki/ca-signer.crt")
	saFP := hostFileSum(ctx, t, set, master, "/etc/kubernetes/pki/sa.pub")
	firstCA, err := os.ReadFile(filepath.Join(first.workDir(cluster), "certs", "kubernetes", "ca.crt"))
	if err != nil {
		t.Fatalf("the first server's copy of the cluster CA: %v", err)
	}
	second := startServerShared(ctx, t, kx, dataDir, first)
	res := second.play(ctx, t, kx, cluster, "create-cluster", bundle)
	second.stop(t)
	if res.err != nil {
		t.Fatalf("create-cluster through a second kubexm server (data directory %s, the first's database) failed after %s: %v%s", dataDir, res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster through a second kubexm server with an empty data directory on the same database (adopting the cluster's PKI): %s; slowest tasks:%s", res.wall.Round(time.Millisecond), res.slowest(6))
	for _, h := range hosts {
		if d := diffSnapshots(before[h], snapshot(ctx, t, set, h, identityPaths...)); len(d) > 0 {
			t.Errorf("create-cluster through the second server changed the PKI of %s:\n  %s", h, strings.Join(d, "\n  "))
		}
	}
	if got := hostCertFingerprint(ctx, t, set, master, "/etc/kubernetes/pki/ca-signer.crt"); got != caFP {
		t.Errorf("the cluster CA changed under the second server: %s -> %s", caFP, got)
	}
	if got := hostFileSum(ctx, t, set, master, "/etc/kubernetes/pki/sa.pub"); got != saFP {
		t.Errorf("the service-account key changed under the second server: %s -> %s", saFP, got)
	}
	secondCA, err := os.ReadFile(filepath.Join(second.workDir(cluster), "certs", "kubernetes", "ca.crt"))
	if err != nil {
		t.Fatalf("the second server's work directory has no cluster CA: %v", err)
	}
	if !bytes.Equal(firstCA, secondCA) {
		t.Errorf("the second server's work directory holds another CA than the first's")
	}
	// The cluster is as cluster.yaml says: only the tasks that fill the new
	// work directory on the control machine (besides those hostChanges
	// leaves out) may report a change.
	workDirTasks := []string{
		"Cluster identity - the cluster's PKI into a new work directory", // roles/identity, from the first master
		"Download - the file, with its sha256 checked",                   // roles/download, each artifact from the bundle, unpacked
	}
	filled, more := map[string]int{}, []string(nil)
	for _, c := range hostChanges(res) {
		if _, task, _ := strings.Cut(c, ": "); slices.Contains(workDirTasks, task) {
			filled[task]++
		} else {
			more = append(more, c)
		}
	}
	if len(more) > 0 {
		t.Errorf("create-cluster through the second server changed more than its own work directory (want changed only %q): %s", workDirTasks, strings.Join(more, "; "))
	}
	t.Logf("a second kubexm server on the same database, data directory %s: CA %s and sa.pub %s unchanged, no PKI file changed on %s; changed only its work directory %v", dataDir, caFP[:16], saFP[:16], strings.Join(hosts, ", "), filled)
}
