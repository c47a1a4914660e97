package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/pgtest"
	"github.com/mensylisir/kubexm/service/secretbox"
	"github.com/mensylisir/kubexm/service/server"
)

var pg = pgtest.New()

// TestMain lets the test binary stand in for the kubexm binary: the service
// tests start `kubexm worker` processes (to kill -9 one), all as this binary
// with KUBEXM_TEST_MAIN=1, and the workers start `kubexm play` children,
// which get no environment of the worker's: known by their arguments (a
// test binary's begin with -test.).
func TestMain(m *testing.M) {
	if os.Getenv("KUBEXM_TEST_MAIN") == "1" || kubexmArgs(os.Args[1:]) {
		Main()
		os.Exit(0)
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

func kubexmArgs(args []string) bool {
	if len(args) == 0 {
		return false
	}
	a := args[0]
	return !strings.HasPrefix(a, "-test.") && !strings.HasPrefix(a, "--test.") && (a[0] != '-' || strings.HasPrefix(a, "--"))
}

// The secret every check greps for, and a cluster.yaml holding it.
const serviceSecret = "Zq8-unlikely-S3cret-pw"

func serviceCluster(name string) string {
	return fmt.Sprintf(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: %s}
spec:
  hosts:
  - {name: node1, address: 127.0.0.1, connection: local, password: %q}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
`, name, serviceSecret)
}

// Playbooks run on localhost: "tiny" proves no two jobs share a cluster
// (mkdir of a marker fails if another job holds it); "slow" counts how
// often its first task ran, to prove a resumed job does not redo it.
var servicePlaybooks = map[string]string{
	"tiny/playbook.yaml": `- name: tiny
  hosts: localhost
  tasks:
    - name: hold the cluster
      shell: mkdir {{ .work_dir | quote }}/busy
    - name: work
      shell: sleep 0.2; echo {{ .work_dir | quote }} >/dev/null
    - name: release the cluster
      shell: rmdir {{ .work_dir | quote }}/busy
`,
	"vars/playbook.yaml": `- name: vars
  hosts: localhost
  tasks:
    - name: write the extra var
      shell: printf %s {{ .note | quote }} > {{ .work_dir | quote }}/note.out
`,
	"fail/playbook.yaml": `- name: fail
  hosts: localhost
  tasks:
    - name: break
      shell: echo broken >&2; exit 3
`,
	"slow/playbook.yaml": `- name: slow
  hosts: localhost
  tasks:
    - name: first
      shell: echo ran >> {{ .work_dir | quote }}/first.count
    - name: long
      shell: sleep 4
    - name: last
      shell: echo ran >> {{ .work_dir | quote }}/last.count
`,
}

// recorder keeps every API response body, for the secret grep.
type recorder struct {
	mu    sync.Mutex
	base  http.RoundTripper
	token string
	seen  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.mu.Lock()
	r.seen.Write(body)
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

type serviceEnv struct {
	t        *testing.T
	dsn      string
	dataDir  string
	pbDir    string
	store    jobstore.Store
	srv      *httptest.Server
	client   *http.Client
	rec      *recorder
	log      *syncBuffer
	workers  map[string]*exec.Cmd
	logFiles []string
	allow    []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newServiceEnv(t *testing.T, dsn string) *serviceEnv {
	t.Helper()
	// The test hosts are this machine: allowed as a lab allows them.
	return newServiceEnvAllowing(t, dsn, []string{"127.0.0.0/8", "::1"})
}

// newServiceEnvAllowing is newServiceEnv with --allow-host-networks allow.
func newServiceEnvAllowing(t *testing.T, dsn string, allow []string) *serviceEnv {
	t.Helper()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	t.Setenv(secretbox.KeyEnv, key)
	t.Setenv("KUBEXM_HOME", t.TempDir())
	// The job directories of the workers a test kills stay with the test.
	t.Setenv("TMPDIR", t.TempDir())
	e := &serviceEnv{t: t, dataDir: t.TempDir(), pbDir: t.TempDir(), workers: map[string]*exec.Cmd{}, log: &syncBuffer{}}
	if dsn == "" {
		dsn = filepath.Join(e.dataDir, "kubexm.db")
	}
	e.dsn = dsn
	for name, data := range servicePlaybooks {
		p := filepath.Join(e.pbDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	e.allow = allow
	svc, err := server.Open(ctx, server.Config{DB: dsn, DataDir: e.dataDir, PlaybooksDir: e.pbDir, AllowNets: allow, BuiltinFS: kubexm.Content()})
	if err != nil {
		t.Fatal(err)
	}
	e.store = svc.Store
	t.Cleanup(func() { svc.Store.Close() })
	support, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: svc.Store, Box: svc.Box, Support: support, Playbook: svc.Playbook, Registry: prometheus.NewRegistry(),
		Log: slog.New(slog.NewTextHandler(e.log, nil)), EventPoll: 100 * time.Millisecond, DataDir: e.dataDir, Views: clusterview.Views{Support: support}, Guard: svc.Guard})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(srv)
	t.Cleanup(e.srv.Close)
	tok, _ := api.NewToken()
	if err := svc.Store.AddToken(ctx, "ops", api.HashToken(tok), api.RoleOperator, time.Time{}); err != nil {
		t.Fatal(err)
	}
	e.rec = &recorder{base: http.DefaultTransport, token: tok}
	e.client = &http.Client{Transport: e.rec, Timeout: 30 * time.Second}
	return e
}

// startWorker starts a `kubexm worker` process.
func (e *serviceEnv) startWorker(name string) {
	e.t.Helper()
	logFile := filepath.Join(e.t.TempDir(), name+".log")
	out, err := os.Create(logFile)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "worker", "--db", e.dsn, "--data-dir", e.dataDir, "--playbooks", e.pbDir, "--allow-host-networks", strings.Join(e.allow, ","),
		"--poll", "100ms", "--heartbeat", "200ms", "--heartbeat-ttl", "2s", "--name", name)
	cmd.Env = append(os.Environ(), "KUBEXM_TEST_MAIN=1")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.workers[name] = cmd
	e.logFiles = append(e.logFiles, logFile)
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
		out.Close()
	})
}

func (e *serviceEnv) do(method, path, ctype string, body []byte, v any) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func (e *serviceEnv) job(id string) jobstore.Job {
	var j jobstore.Job
	if code := e.do("GET", "/api/v1/jobs/"+id, "", nil, &j); code != 200 {
		e.t.Fatalf("get job %s: %d", id, code)
	}
	return j
}

func (e *serviceEnv) events(id string) []jobstore.Event {
	var out struct{ Events []jobstore.Event }
	e.do("GET", "/api/v1/jobs/"+id+"/events", "", nil, &out)
	return out.Events
}

// waitJob polls the job until ok says yes.
func (e *serviceEnv) waitJob(id string, d time.Duration, what string, ok func(jobstore.Job) bool) jobstore.Job {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		j := e.job(id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: not %s within %s: %+v\nworker logs:\n%s", id, what, d, j, e.workerLogs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *serviceEnv) workerLogs() string {
	var b strings.Builder
	for _, f := range e.logFiles {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "== %s\n%s\n", f, data)
	}
	return b.String()
}

func TestServiceTwoWorkersSQLite(t *testing.T) { testService(t, "") }

func TestServiceTwoWorkersPostgreSQL(t *testing.T) { testService(t, pg.DSN(t)) }

// testService: 2 worker processes, 20 jobs on 5 clusters submitted at once
// through the API; each runs once, never two on a cluster. Then a worker is
// killed with -9 in the middle of a job: the job is marked interrupted, the
// other worker resumes it, and its finished task is not run again. Last,
// no response, log line, database column or file holds the secret of the
// cluster.yaml.
func testService(t *testing.T, dsn string) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	e := newServiceEnv(t, dsn)
	e.startWorker("w1")
	e.startWorker("w2")
	clusters := []string{"c1", "c2", "c3", "c4", "c5"}
	for _, c := range clusters {
		var v jobstore.ClusterVersion
		if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(serviceCluster(c)), &v); code != 201 || v.Version != 1 {
			t.Fatalf("register %s: %d %+v", c, code, v)
		}
	}
	// 20 clients at once, 4 per cluster: a busy cluster answers 409 naming
	// its job, and the client tries again.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	conflicts := 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"cluster": clusters[i%5], "playbook": "tiny"})
			for start := time.Now(); time.Since(start) < 3*time.Minute; {
				var out struct {
					JobID string `json:"job_id"`
				}
				code := e.do("POST", "/api/v1/jobs", "application/json", body, &out)
				mu.Lock()
				switch code {
				case 202:
					ids = append(ids, out.JobID)
					mu.Unlock()
					return
				case 409:
					conflicts++
				default:
					t.Errorf("create job: HTTP %d", code)
					mu.Unlock()
					return
				}
				mu.Unlock()
				time.Sleep(200 * time.Millisecond)
			}
			t.Error("a job could not be queued in 3 minutes")
		}()
	}
	wg.Wait()
	if len(ids) != 20 || conflicts == 0 {
		t.Fatalf("%d jobs queued, %d conflicts (want 20, and some conflicts)", len(ids), conflicts)
	}
	for _, id := range ids {
		e.waitJob(id, 2*time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	}
	type span struct {
		id         string
		start, end time.Time
	}
	spans := map[string][]span{}
	byWorker := map[string]int{}
	for _, id := range ids {
		j := e.job(id)
		if j.Status != jobstore.Succeeded || j.Attempts != 1 {
			t.Fatalf("job %s: %s after %d attempts: %s\n%s", id, j.Status, j.Attempts, j.Error, e.workerLogs())
		}
		byWorker[strings.Split(j.Worker, "/")[0]]++
		n := map[string]int{}
		for _, ev := range e.events(id) {
			n[ev.Kind]++
		}
		if n["job_start"] != 1 || n["run_start"] != 1 || n["recap"] != 1 || n["job_end"] != 1 || n["task_start"] != 3 {
			t.Fatalf("job %s did not run exactly once: %v", id, n)
		}
		spans[j.Cluster] = append(spans[j.Cluster], span{id, j.StartedAt, j.FinishedAt})
	}
	for c, ss := range spans {
		sort.Slice(ss, func(i, k int) bool { return ss[i].start.Before(ss[k].start) })
		for i := 1; i < len(ss); i++ {
			if ss[i].start.Before(ss[i-1].end) {
				t.Fatalf("cluster %s: job %s started before job %s ended", c, ss[i].id, ss[i-1].id)
			}
		}
	}
	if byWorker["w1"] == 0 || byWorker["w2"] == 0 {
		t.Fatalf("one worker ran every job: %v", byWorker)
	}
	t.Logf("20 jobs on 5 clusters: %d conflicts answered, jobs per worker %v", conflicts, byWorker)

	// kill -9 the worker of a running job.
	var acc struct {
		JobID string `json:"job_id"`
	}
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(`{"cluster": "c1", "playbook": "slow"}`), &acc); code != 202 {
		t.Fatalf("queue slow: %d", code)
	}
	j := e.waitJob(acc.JobID, time.Minute, "in its long task", func(j jobstore.Job) bool { return j.CurrentTask == "long" })
	victim := strings.Split(j.Worker, "/")[0]
	if err := e.workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitJob(acc.JobID, 30*time.Second, "interrupted", func(j jobstore.Job) bool { return j.Status == jobstore.Interrupted || j.Attempts > 1 })
	j = e.waitJob(acc.JobID, time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Succeeded || j.Attempts != 2 || strings.HasPrefix(j.Worker, victim+"/") {
		t.Fatalf("after kill -9 of %s: %+v\n%s", victim, j, e.workerLogs())
	}
	evs := e.events(acc.JobID)
	kinds := map[string]int{}
	resumedFirst := false
	for _, ev := range evs {
		kinds[ev.Kind]++
		var d struct{ Resumed bool }
		if ev.Kind == "host_result" && ev.Task == "first" && json.Unmarshal(ev.Data, &d) == nil && d.Resumed {
			resumedFirst = true
		}
	}
	if kinds["job_interrupted"] != 1 || kinds["job_start"] != 2 || !resumedFirst {
		t.Fatalf("events after resume: %v (first task taken from the journal: %v)", kinds, resumedFirst)
	}
	wd := filepath.Join(e.dataDir, "clusters", "c1")
	for file, want := range map[string]int{"first.count": 1, "last.count": 1} {
		data, err := os.ReadFile(filepath.Join(wd, file))
		if err != nil || strings.Count(string(data), "ran") != want {
			t.Fatalf("%s: %q %v: the resumed job redid or skipped a task", file, data, err)
		}
	}

	// Cancel a running job: its worker stops the child as Ctrl-C would.
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(`{"cluster": "c2", "playbook": "slow"}`), &acc); code != 202 {
		t.Fatalf("queue slow on c2: %d", code)
	}
	e.waitJob(acc.JobID, time.Minute, "in its long task", func(j jobstore.Job) bool { return j.CurrentTask == "long" })
	if code := e.do("POST", "/api/v1/jobs/"+acc.JobID+"/cancel", "", nil, nil); code != 202 {
		t.Fatalf("cancel: %d", code)
	}
	j = e.waitJob(acc.JobID, 30*time.Second, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Cancelled {
		t.Fatalf("cancelled job: %+v", j)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "clusters", "c2", "last.count")); err == nil {
		t.Fatal("the cancelled job ran its last task")
	}

	// A failing playbook: the job fails, saying which task.
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(`{"cluster": "c3", "playbook": "fail"}`), &acc); code != 202 {
		t.Fatalf("queue fail on c3: %d", code)
	}
	j = e.waitJob(acc.JobID, time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Failed || j.Error == "" || j.Attempts != 1 {
		t.Fatalf("failing job: %+v", j)
	}
	t.Logf("failed job's error: %s", j.Error)
	acc.JobID = e.mustLatest("c2")

	// kubexm get jobs / get job against the server.
	out := e.cli("get", "jobs", "--server", e.srv.URL, "--token", e.rec.token, "--cluster", "c2")
	if !strings.Contains(out, acc.JobID) || !strings.Contains(out, "cancelled") || strings.Count(out, "\n") != 6 {
		t.Fatalf("get jobs --cluster c2:\n%s", out)
	}
	if out := e.cli("get", "jobs", "--server", e.srv.URL, "--token", e.rec.token, "--cluster", "c2", "-o", "yaml"); !strings.Contains(out, "- id: "+acc.JobID) && !strings.Contains(out, "id: "+acc.JobID) {
		t.Errorf("get jobs -o yaml:\n%s", out)
	}
	out = e.cli("get", "job", acc.JobID, "--server", e.srv.URL, "--token", e.rec.token)
	if !strings.Contains(out, "Status:    cancelled") || !strings.Contains(out, "Playbook:  slow") || !strings.Contains(out, "job_end") {
		t.Fatalf("get job:\n%s", out)
	}
	e.rec.mu.Lock()
	e.rec.seen.WriteString(out)
	e.rec.mu.Unlock()

	e.grepSecret()
}

// mustLatest is the id of the newest job of cluster.
func (e *serviceEnv) mustLatest(cluster string) string {
	e.t.Helper()
	var out struct{ Jobs []jobstore.Job }
	e.do("GET", "/api/v1/jobs?limit=1&cluster="+cluster, "", nil, &out)
	if len(out.Jobs) != 1 {
		e.t.Fatalf("no job on %s", cluster)
	}
	return out.Jobs[0].ID
}

// cli runs a kubexm command line in this process and returns its output.
func (e *serviceEnv) cli(args ...string) string {
	e.t.Helper()
	return runKubexm(e.t, args...)
}

func runKubexm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := execKubexm(args...)
	if err != nil {
		t.Fatalf("kubexm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// grepSecret fails when the cluster.yaml's secret shows, in clear or in an
// encoding, in an API response, a log line, a database column or a file of
// the data directory.
func (e *serviceEnv) grepSecret() {
	t := e.t
	forms := map[string]string{
		"clear":     serviceSecret,
		"base64":    base64.StdEncoding.EncodeToString([]byte(serviceSecret)),
		"base64url": base64.RawURLEncoding.EncodeToString([]byte(serviceSecret)),
		"hex":       hex.EncodeToString([]byte(serviceSecret)),
	}
	check := func(where, text string) {
		for name, f := range forms {
			// base64 of a longer text holding the secret shifts with its
			// offset; the clear prefix check covers the three alignments.
			if strings.Contains(text, f) || strings.Contains(text, f[:len(f)-4]) && name != "clear" {
				t.Errorf("the secret (%s) shows in %s", name, where)
			}
		}
	}
	var masked struct{ Config string }
	e.do("GET", "/api/v1/clusters/c1", "", nil, &masked)
	if !strings.Contains(masked.Config, schema.Mask) {
		t.Errorf("the cluster's config shows no masked password: %s", masked.Config)
	}
	e.rec.mu.Lock()
	check("API responses", e.rec.seen.String())
	e.rec.mu.Unlock()
	check("the server log", e.log.String())
	check("the worker logs", e.workerLogs())
	// Every column of every table.
	db, tables := e.rawDB()
	defer db.Close()
	rows := 0
	for _, table := range tables {
		rs, err := db.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				s := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					s = string(b)
				}
				check(fmt.Sprintf("database column %s.%s", table, cols[i]), s)
			}
			rows++
		}
		rs.Close()
	}
	if rows < 100 {
		t.Fatalf("only %d rows read from %v", rows, tables)
	}
	// Journals, PKI, anything the runs wrote, and the database files.
	err := filepath.WalkDir(e.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		check(p, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *serviceEnv) rawDB() (*sql.DB, []string) {
	var db *sql.DB
	var err error
	var q string
	if strings.HasPrefix(e.dsn, "postgres") {
		db, err = sql.Open("pgx", e.dsn)
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`
	} else {
		db, err = sql.Open("sqlite", "file:"+e.dsn)
		q = `SELECT name FROM sqlite_master WHERE type = 'table'`
	}
	if err != nil {
		e.t.Fatal(err)
	}
	rs, err := db.Query(q)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var tables []string
	for rs.Next() {
		var n string
		if err := rs.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if len(tables) < 6 {
		e.t.Fatalf("tables: %v", tables)
	}
	return db, tables
}

// TestServerAlone: `kubexm server` by itself (TLS with its self-signed
// certificate, the bootstrap token, in-process workers) runs a job queued
// through the API, and kubexm get jobs reaches it pinning the certificate.
func TestServerAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	dataDir, pbDir := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(pbDir, "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pbDir, "tiny", "playbook.yaml"), []byte(servicePlaybooks["tiny/playbook.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	bundled := `- name: bundled
  hosts: localhost
  tasks:
    - name: the bundle's kubelet
      shell: grep -q 'not really kubelet' {{ .offline_bundle_dir | quote }}/kubernetes/1.37.2/amd64/kubelet
`
	if err := os.WriteFile(filepath.Join(pbDir, "bundled.yaml"), []byte(bundled), 0o644); err != nil {
		t.Fatal(err)
	}
	reach := "- name: reach\n  hosts: all\n  gather_facts: false\n  tasks:\n    - name: anything\n      command: \"true\"\n"
	if err := os.WriteFile(filepath.Join(pbDir, "reach.yaml"), []byte(reach), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log syncBuffer
	cmd := exec.Command(os.Args[0], "server", "--listen", addr, "--data-dir", dataDir, "--playbooks", pbDir, "--poll", "100ms", "--allow-host-networks", "127.0.0.0/8,::1")
	cmd.Env = append(os.Environ(), "KUBEXM_TEST_MAIN=1", "KUBEXM_HOME="+t.TempDir(), secretbox.KeyEnv+"=")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	}()
	ca := filepath.Join(dataDir, "tls", "cert.pem")
	var tok []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		tok, _ = os.ReadFile(filepath.Join(dataDir, "admin.token"))
		if len(tok) > 0 && strings.Contains(log.String(), "listening") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start:\n%s", log.String())
		}
	}
	token := strings.TrimSpace(string(tok))
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("POST", "https://"+addr+"/api/v1/clusters?run=tiny", strings.NewReader(serviceCluster("solo")))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if resp.StatusCode != 202 || acc.JobID == "" {
		t.Fatalf("register and run: %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out := runKubexm(t, "get", "job", acc.JobID, "--server", "https://"+addr, "--token", token, "--ca", ca)
		if strings.Contains(out, "Status:    succeeded") {
			break
		}
		if time.Now().After(deadline) || strings.Contains(out, "Status:    failed") {
			t.Fatalf("job did not succeed:\n%s", out)
		}
	}
	// An offline bundle uploaded through the API reaches the job's run as
	// --offline-bundle: the playbook finds its files in offline_bundle_dir.
	bundlePath := packTestBundle(t)
	data, err := os.ReadFile(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string, v any) int {
		t.Helper()
		req, _ := http.NewRequest(method, "https://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if v != nil && json.Unmarshal(b, v) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode
	}
	var up api.Bundle
	if code := call("POST", "/api/v1/clusters/solo/bundles", string(data), &up); code != 201 {
		t.Fatalf("upload: %d %+v", code, up)
	}
	if code := call("POST", "/api/v1/jobs", fmt.Sprintf(`{"cluster": "solo", "playbook": "bundled", "options": {"offline_bundle": %q}}`, up.SHA256), &acc); code != 202 {
		t.Fatalf("job with the bundle: %d", code)
	}
	// waitEnd waits for the job to end, and wants it to end in want.
	waitEnd := func(id string, want jobstore.Status, what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			var j jobstore.Job
			call("GET", "/api/v1/jobs/"+id, "", &j)
			if !j.Status.Active() && j.Status != want || time.Now().After(deadline) {
				t.Fatalf("%s: %+v, want %s", what, j, want)
			}
			if j.Status == want {
				return
			}
		}
	}
	waitEnd(acc.JobID, jobstore.Succeeded, "job with the bundle")
	// A host nothing answers on: the job fails unreachable, and /metrics
	// counts the failed SSH dial (reported by the job's kubexm play child)
	// and the host's failure.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	ghost := fmt.Sprintf(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: ghosts}
spec:
  hosts:
  - {name: ghost, address: 127.0.0.1, port: %d, user: root, password: x}
  roleGroups: {etcd: [ghost], master: [ghost], worker: [ghost]}
`, port)
	if code := call("POST", "/api/v1/clusters?run=reach", ghost, &acc); code != 202 {
		t.Fatalf("queue reach: %d", code)
	}
	waitEnd(acc.JobID, jobstore.Failed, "job on an unreachable host")
	// /metrics names clusters and hosts: a token only.
	if resp, err = client.Get("https://" + addr + "/metrics"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("/metrics without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("GET", "https://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`kubexm_ssh_dials_total{cluster="ghosts",host="ghost",result="failed"} 1`, `kubexm_host_failures_total{cluster="ghosts",host="ghost",status="unreachable"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	if strings.Contains(log.String(), token) {
		t.Fatal("the server logged its bootstrap token")
	}
}

// packTestBundle writes a one-file offline bundle (kubernetes 1.37.2
// kubelet) as kubexm artifact export would.
func packTestBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(src, []byte("not really kubelet\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle.tar.gz")
	in := []bundle.Input{{Artifact: bundle.Artifact{Component: "kubernetes", Version: "1.37.2", Arch: "amd64", File: "kubelet", Kind: "binary"}, Src: src}}
	if _, _, err := bundle.Pack(context.Background(), out, bundle.Manifest{Cluster: "solo", KubexmVersion: "test", Created: time.Unix(1700000000, 0)}, in, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTokenCommands: kubexm server token create --ttl makes a token that
// expires, token list shows when (and which have), a negative --ttl is
// refused.
func TestTokenCommands(t *testing.T) {
	dataDir := t.TempDir()
	t.Setenv(secretbox.KeyEnv, "")
	runKubexm(t, "server", "token", "create", "forever", "--data-dir", dataDir)
	runKubexm(t, "server", "token", "create", "ci", "--role", "operator", "--ttl", "24h", "--data-dir", dataDir)
	runKubexm(t, "server", "token", "create", "brief", "--ttl", "1ms", "--data-dir", dataDir)
	time.Sleep(10 * time.Millisecond)
	out := runKubexm(t, "server", "token", "list", "--data-dir", dataDir)
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines[strings.Fields(l)[0]] = l
	}
	tomorrow := time.Now().Add(24 * time.Hour).UTC().Format("2006-01-02T15")
	if !strings.HasSuffix(lines["forever"], "never") || !strings.Contains(lines["ci"], tomorrow) || strings.Contains(lines["ci"], "expired") ||
		!strings.Contains(lines["brief"], "expired ") || !strings.Contains(lines["NAME"], "EXPIRES") {
		t.Errorf("token list:\n%s", out)
	}
	if _, err := execKubexm("server", "token", "create", "bad", "--ttl", "-1h", "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "--ttl") {
		t.Errorf("a negative --ttl: %v", err)
	}
}
