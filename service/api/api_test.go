package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
)

const testCluster = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  hosts:
  - {name: node1, address: 127.0.0.1, connection: local, password: "pw-Sekr1t-xyz"}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
`

type fixture struct {
	t        *testing.T
	s        *Server
	store    jobstore.Store
	srv      *httptest.Server
	operator string
	reader   string
}

func newFixture(t testing.TB) *fixture {
	return newFixtureOn(t, filepath.Join(t.TempDir(), "db"), t.TempDir(), nil)
}

// newFixtureOn serves the database dsn and the data directory dataDir; a
// second server on the ones of first (another process on the same
// database) takes first's tokens.
func newFixtureOn(t testing.TB, dsn, dataDir string, first *fixture) *fixture {
	ctx := context.Background()
	store, err := jobstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	box, _ := secretbox.New(bytes.Repeat([]byte{3}, 32))
	support, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	guard, err := confine.New(confine.Config{Allow: []string{"127.0.0.0/8"}, Support: support, Secrets: confine.NewSecrets(dataDir, box)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: store, Box: box, Support: support, Registry: prometheus.NewRegistry(), EventPoll: 20 * time.Millisecond, DataDir: dataDir, MaxBundle: 4 << 20, Views: fakeViews{}, Guard: guard,
		Playbook: func(name string) (string, error) {
			if name != "create-cluster" && name != "upgrade" && name != "restore" {
				return "", fmt.Errorf("no playbook %q", name)
			}
			return name, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{s: s, store: store, srv: httptest.NewServer(s)}
	t.Cleanup(f.srv.Close)
	if first != nil {
		f.operator, f.reader = first.operator, first.reader
		return f
	}
	f.operator, _ = NewToken()
	f.reader, _ = NewToken()
	if err := store.AddToken(ctx, "ops", HashToken(f.operator), RoleOperator, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := store.AddToken(ctx, "viewer", HashToken(f.reader), RoleReadOnly, time.Time{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) call(t testing.TB, method, path, token string, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// callOversized sends a body the server refuses before reading it, over a
// connection of its own: the server may answer and close while the body is
// still being written, which http.Client reports as a reset instead of the
// answer (a flake under load), so the body goes out beside the read.
func (f *fixture) callOversized(t testing.TB, method, path, token, body string) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", method, path, token, len(body), body)
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s with a %d-byte body: %v", method, path, len(body), err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func TestAuthAndRoles(t *testing.T) {
	f := newFixture(t)
	mutations := [][2]string{{"POST", "/api/v1/clusters"}, {"POST", "/api/v1/jobs"}, {"POST", "/api/v1/jobs/x/cancel"}, {"POST", "/api/v1/jobs/x/resume"}, {"POST", "/api/v1/clusters/c1/bundles"},
		{"DELETE", "/api/v1/clusters/c1/bundles/" + strings.Repeat("a", 64)}, {"GET", "/api/v1/clusters/c1/backups/c1-1.tar.gz"}}
	for _, m := range mutations {
		if code, _ := f.call(t, m[0], m[1], "", testCluster); code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d", m[0], m[1], code)
		}
		if code, _ := f.call(t, m[0], m[1], "kxm_wrong", testCluster); code != http.StatusUnauthorized {
			t.Errorf("%s %s with an unknown token: %d", m[0], m[1], code)
		}
		if code, body := f.call(t, m[0], m[1], f.reader, testCluster); code != http.StatusForbidden || !strings.Contains(string(body), "operator") {
			t.Errorf("%s %s with a read-only token: %d %s", m[0], m[1], code, body)
		}
	}
	if code, _ := f.call(t, "GET", "/api/v1/jobs", "", ""); code != http.StatusUnauthorized {
		t.Errorf("read without a token: %d", code)
	}
	if code, _ := f.call(t, "GET", "/api/v1/jobs", f.reader, ""); code != http.StatusOK {
		t.Errorf("read with a read-only token: %d", code)
	}
	if code, _ := f.call(t, "GET", "/api/v1/audit", f.reader, ""); code != http.StatusForbidden {
		t.Errorf("audit with a read-only token: %d", code)
	}
	// An expired token is refused as unknown ones are, saying so; one that
	// expires later works.
	expired, _ := NewToken()
	later, _ := NewToken()
	if err := f.store.AddToken(context.Background(), "old", HashToken(expired), RoleOperator, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.store.AddToken(context.Background(), "later", HashToken(later), RoleReadOnly, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(mutations, [2]string{"GET", "/api/v1/jobs"}) {
		if code, body := f.call(t, m[0], m[1], expired, testCluster); code != http.StatusUnauthorized || !strings.Contains(string(body), "token old expired at") {
			t.Errorf("%s %s with an expired token: %d %s", m[0], m[1], code, body)
		}
	}
	if code, body := f.call(t, "GET", "/api/v1/jobs", later, ""); code != http.StatusOK {
		t.Errorf("a token that expires in an hour: %d %s", code, body)
	}
	// Nothing was registered by the refused requests.
	if cs, _ := f.store.Clusters(context.Background()); len(cs) != 0 {
		t.Fatalf("refused requests changed the store: %+v", cs)
	}
}

func TestClustersAndJobs(t *testing.T) {
	f := newFixture(t)
	code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, "metadata: {name: c1}\nspec:\n  hosts: 3\n")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "cluster.yaml:") {
		t.Fatalf("bad cluster.yaml: %d %s", code, body)
	}
	// Role variables are checked as spec fields are (issue 45, item 6).
	code, body = f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster+"  roleGroupVars: {all: {os_packages_deb: [curl, '-o APT::Get::AllowUnauthenticated=true']}}\n")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "cluster.yaml:8:") || !strings.Contains(string(body), "is an option, not a package name") {
		t.Fatalf("an apt option as a package: %d %s", code, body)
	}
	code, body = f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster+"  roleGroupVars: {all: {images_local_dir: /var/lib/kubexm-server}}\n")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "cluster.yaml:8:") || !strings.Contains(string(body), "names a path on the control machine") {
		t.Fatalf("a path on the server's machine: %d %s", code, body)
	}
	if code, body = f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body = f.call(t, "POST", "/api/v1/clusters?run=create-cluster", f.operator, strings.ReplaceAll(testCluster, "node1", "n1"))
	var acc struct {
		JobID string `json:"job_id"`
	}
	if code != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.JobID == "" {
		t.Fatalf("register and run: %d %s", code, body)
	}
	if code, body = f.call(t, "GET", "/api/v1/clusters/c1/versions", f.reader, ""); code != 200 || !strings.Contains(string(body), `"version": 2`) || strings.Contains(string(body), "pw-Sekr1t") {
		t.Fatalf("versions: %d %s", code, body)
	}
	if code, body = f.call(t, "GET", "/api/v1/clusters/c1/versions/1", f.reader, ""); code != 200 || !strings.Contains(string(body), schema.Mask) || strings.Contains(string(body), "pw-Sekr1t") {
		t.Fatalf("version 1: %d %s", code, body)
	}
	// A second job on the busy cluster names the first.
	code, body = f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "upgrade"}`)
	if code != http.StatusConflict || !strings.Contains(string(body), acc.JobID) {
		t.Fatalf("second job: %d %s", code, body)
	}
	for _, bad := range []string{`{"cluster": "c1", "playbook": "../etc"}`, `{"cluster": "c1", "playbook": "nope"}`,
		`{"cluster": "c1", "playbook": "upgrade", "options": {"extra_vars": ["@/etc/shadow"]}}`, `{"cluster": "c1", "playbook": "upgrade", "x": 1}`} {
		if code, body = f.call(t, "POST", "/api/v1/jobs", f.operator, bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	for _, c := range [][2]string{
		{"etcd_data_dir=/etc", "/etc is a system directory"},
		{"etcd_local_dir=/root", "names a path on the control machine, which is the server's"},
	} {
		code, body = f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "upgrade", "options": {"extra_vars": ["`+c[0]+`"]}}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), c[1]) {
			t.Errorf("extra var %s: %d %s", c[0], code, body)
		}
	}
	if code, _ = f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "zz", "playbook": "upgrade"}`); code != http.StatusNotFound {
		t.Errorf("job on an unknown cluster: %d", code)
	}
	// The stream of a queued job ends once it is cancelled.
	streamed := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/jobs/"+acc.JobID+"/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+f.reader)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			streamed <- err.Error()
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		streamed <- b.String()
	}()
	time.Sleep(100 * time.Millisecond)
	if code, body = f.call(t, "POST", "/api/v1/jobs/"+acc.JobID+"/cancel", f.operator, ""); code != http.StatusAccepted || !strings.Contains(string(body), `"cancelled"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	select {
	case s := <-streamed:
		if !strings.Contains(s, "event: end") || !strings.Contains(s, `"status":"cancelled"`) {
			t.Fatalf("stream: %s", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
	if code, body = f.call(t, "GET", "/api/v1/audit", f.operator, ""); code != 200 || !strings.Contains(string(body), `"cancel job"`) || !strings.Contains(string(body), `"register cluster"`) {
		t.Fatalf("audit: %d %s", code, body)
	}
	if code, _ = f.call(t, "GET", "/metrics", "", ""); code != 401 {
		t.Fatalf("metrics without a token: %d", code)
	}
	code, body = f.call(t, "GET", "/metrics", f.reader, "")
	if code != 200 || !strings.Contains(string(body), `kubexm_jobs{state="cancelled"} 1`) || !strings.Contains(string(body), `kubexm_jobs{state="queued"} 0`) {
		t.Fatalf("metrics: %d %s", code, body)
	}
}

// TestOpenAPICoversTheMux: every operation of /openapi.json is served by
// the mux under that very pattern, and every pattern the server registers
// is in the document.
func TestOpenAPICoversTheMux(t *testing.T) {
	f := newFixture(t)
	code, body := f.call(t, "GET", "/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("openapi.json: %d", code)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %v %s", err, doc.OpenAPI)
	}
	inDoc := map[string]bool{}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for path, ops := range doc.Paths {
		for method, o := range ops {
			pattern := strings.ToUpper(method) + " " + path
			inDoc[pattern] = true
			if _, ok := o["responses"]; !ok {
				t.Errorf("%s: no responses", pattern)
			}
			// A request to the path with its parameters filled in must
			// reach the handler of this pattern.
			req := httptest.NewRequest(strings.ToUpper(method), param.ReplaceAllString(path, "1"), nil)
			if _, got := f.s.mux.Handler(req); got != pattern {
				t.Errorf("the document has %s; the mux serves that request with %q", pattern, got)
			}
		}
	}
	registered := []string{"GET /openapi.json", "GET /healthz"}
	for _, rt := range f.s.routes() {
		registered = append(registered, rt.method+" "+rt.path)
	}
	for _, p := range registered {
		if !inDoc[p] {
			t.Errorf("the mux serves %s; the document lacks it", p)
		}
	}
	if len(inDoc) != len(registered) {
		t.Errorf("document has %d operations, the mux %d", len(inDoc), len(registered))
	}
}

// TestLoadPolling is the load measurement of docs/perf.md: 200 clients
// polling a job's status over loopback. KUBEXM_LOADTEST=60s runs it.
func TestLoadPolling(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("KUBEXM_LOADTEST"))
	if err != nil {
		t.Skip("KUBEXM_LOADTEST=DURATION runs the load test (docs/perf.md)")
	}
	f := newFixture(t)
	if code, body := f.call(t, "POST", "/api/v1/clusters?run=create-cluster", f.operator, testCluster); code != http.StatusAccepted {
		t.Fatalf("queue: %d %s", code, body)
	}
	jobs, _ := f.store.Jobs(context.Background(), jobstore.JobFilter{})
	url := f.srv.URL + "/api/v1/jobs/" + jobs[0].ID
	const clients = 200
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(end) {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+f.reader)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("HTTP %d", resp.StatusCode)
					}
				}
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		t.Fatalf("no request succeeded (%d errors)", errs)
	}
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	t.Logf("%d clients for %s: %d requests (%.0f/s), %d errors, p50 %s, p99 %s, max %s", clients, d, len(lat),
		float64(len(lat))/d.Seconds(), errs, pct(0.5), pct(0.99), lat[len(lat)-1])
	if errs > 0 {
		t.Errorf("%d requests failed", errs)
	}
}

// testBundle packs a small offline bundle with bundle.Pack, as kubexm
// artifact export does.
func testBundle(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(src, bytes.Repeat([]byte("k"), 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle.tar.gz")
	in := []bundle.Input{{Artifact: bundle.Artifact{Component: "kubernetes", Version: "1.37.2", Arch: "amd64", File: "kubelet", Kind: "binary"}, Src: src}}
	if _, _, err := bundle.Pack(context.Background(), out, bundle.Manifest{Cluster: "c1", KubexmVersion: "test", Created: time.Unix(1700000000, 0)}, in, nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestBundles: an offline bundle is uploaded for a registered cluster,
// verified and unpacked in its work directory at once, listed, and named
// by its sha256 in a job's options; a broken or unknown one is refused.
func TestBundles(t *testing.T) {
	f := newFixture(t)
	good := testBundle(t)
	if code, body := f.call(t, "POST", "/api/v1/clusters/c1/bundles", f.operator, string(good)); code != http.StatusNotFound {
		t.Fatalf("bundle for an unregistered cluster: %d %s", code, body)
	}
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	broken := bytes.Clone(good)
	broken[len(broken)/2] ^= 0xff
	for name, body := range map[string]string{"empty": "", "not a bundle": "hello", "corrupted": string(broken)} {
		if code, resp := f.call(t, "POST", "/api/v1/clusters/c1/bundles", f.operator, body); code != http.StatusBadRequest {
			t.Errorf("%s bundle: %d %s", name, code, resp)
		}
	}
	if code, body := f.call(t, "POST", "/api/v1/clusters/c1/bundles", f.operator, strings.Repeat("x", 5<<20)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("bundle over the limit: %d %s", code, body)
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/bundles", f.reader, ""); code != 200 || !strings.Contains(string(body), `"bundles": []`) {
		t.Fatalf("refused uploads were kept: %d %s", code, body)
	}
	code, body := f.call(t, "POST", "/api/v1/clusters/c1/bundles", f.operator, string(good))
	var b Bundle
	if code != http.StatusCreated || json.Unmarshal(body, &b) != nil || b.Artifacts != 1 || b.Size != int64(len(good)) {
		t.Fatalf("upload: %d %s", code, body)
	}
	sum := sha256.Sum256(good)
	if b.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload answered sha256 %s, the bundle has %x", b.SHA256, sum)
	}
	// Unpacked and verified where kubexm play --offline-bundle looks.
	if _, err := os.Stat(filepath.Join(f.s.c.DataDir, "clusters", "c1", "bundle", b.SHA256, "kubernetes", "1.37.2", "amd64", "kubelet")); err != nil {
		t.Fatalf("bundle not unpacked in the work directory: %v", err)
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/bundles", f.reader, ""); code != 200 || !strings.Contains(string(body), b.SHA256) {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, bad := range []string{"../../../etc/passwd", strings.Repeat("0", 64)} {
		req := fmt.Sprintf(`{"cluster": "c1", "playbook": "upgrade", "options": {"offline_bundle": %q}}`, bad)
		if code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, req); code != http.StatusBadRequest || !strings.Contains(string(body), "bundles") {
			t.Errorf("job with offline_bundle %q: %d %s", bad, code, body)
		}
	}
	code, body = f.call(t, "POST", "/api/v1/jobs", f.operator, fmt.Sprintf(`{"cluster": "c1", "playbook": "create-cluster", "options": {"offline_bundle": %q}}`, b.SHA256))
	var acc struct {
		Job jobstore.Job `json:"job"`
	}
	if code != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.Job.Options.OfflineBundle != b.SHA256 {
		t.Fatalf("job with the bundle: %d %s", code, body)
	}
	if code, body := f.call(t, "GET", "/api/v1/audit", f.operator, ""); code != 200 || !strings.Contains(string(body), "upload bundle") || !strings.Contains(string(body), "offline bundle "+b.SHA256) {
		t.Fatalf("audit: %d %s", code, body)
	}

	// Delete: refused while the queued job names the bundle, then done,
	// with the unpacked copy.
	del := "/api/v1/clusters/c1/bundles/" + b.SHA256
	if code, body := f.call(t, "DELETE", del, f.operator, ""); code != http.StatusConflict || !strings.Contains(string(body), acc.Job.ID) || !isJSONError(body) {
		t.Fatalf("delete of a bundle a queued job uses: %d %s", code, body)
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs/"+acc.Job.ID+"/cancel", f.operator, ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	for _, bad := range []struct {
		path string
		code int
	}{{"/api/v1/clusters/c1/bundles/nothex", http.StatusBadRequest}, {"/api/v1/clusters/c1/bundles/" + strings.Repeat("0", 64), http.StatusNotFound}, {"/api/v1/clusters/c9/bundles/" + b.SHA256, http.StatusNotFound}} {
		if code, body := f.call(t, "DELETE", bad.path, f.operator, ""); code != bad.code || !isJSONError(body) {
			t.Errorf("DELETE %s: %d %s, want %d and a JSON error", bad.path, code, body, bad.code)
		}
	}
	if code, body := f.call(t, "DELETE", del, f.operator, ""); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	for _, p := range []string{filepath.Join("bundles", b.SHA256+".tar.gz"), filepath.Join("bundle", b.SHA256)} {
		if _, err := os.Stat(filepath.Join(f.s.c.DataDir, "clusters", "c1", p)); err == nil {
			t.Errorf("%s is left after the delete", p)
		}
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/bundles", f.reader, ""); code != 200 || strings.Contains(string(body), b.SHA256) {
		t.Errorf("the deleted bundle is listed: %s", body)
	}
	if code, _ := f.call(t, "DELETE", del, f.operator, ""); code != http.StatusNotFound {
		t.Errorf("a second delete: %d", code)
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, fmt.Sprintf(`{"cluster": "c1", "playbook": "create-cluster", "options": {"offline_bundle": %q}}`, b.SHA256)); code != http.StatusBadRequest {
		t.Errorf("a job naming the deleted bundle: %d %s", code, body)
	}
	if _, body := f.call(t, "GET", "/api/v1/audit", f.operator, ""); !strings.Contains(string(body), "delete bundle") {
		t.Errorf("the delete is not audited: %s", body)
	}
}

func isJSONError(body []byte) bool {
	var e struct{ Error string }
	return json.Unmarshal(body, &e) == nil && e.Error != ""
}

// TestServiceRequestLimits: each route reads a body of its own size at
// most (413 beyond it, before reading), a client without a token is
// answered before it sends its body, /healthz names no database error, and
// HTTPServer bounds every phase of a request.
func TestServiceRequestLimits(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat(" ", 2<<20) + "{}"
	if code, body := f.callOversized(t, "POST", "/api/v1/jobs", f.operator, big); code != 413 {
		t.Errorf("a 2 MiB job request: %d %s", code, body)
	}
	if code, body := f.callOversized(t, "POST", "/api/v1/jobs/job-x/cancel", f.operator, strings.Repeat("x", 64<<10)); code != 413 {
		t.Errorf("a 64 KiB body to cancel: %d %s", code, body)
	}
	if code, body := f.callOversized(t, "POST", "/api/v1/clusters", f.operator, strings.Repeat("#", 2<<20)); code != 413 {
		t.Errorf("a 2 MiB cluster.yaml: %d %s", code, body)
	}
	// Headers announcing 1 GiB, and no byte of it: the 401 comes anyway.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/clusters/c1/bundles HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<30)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 401 {
		t.Errorf("unauthenticated upload, body not sent: %v %v", resp, err)
	}
	hs := f.s.HTTPServer()
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.WriteTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Errorf("HTTPServer leaves a phase unbounded: %+v", hs)
	}
	// A closed database: /healthz says so without its error.
	f.store.Close()
	code, body := f.call(t, "GET", "/healthz", "", "")
	if code != 503 || strings.Contains(string(body), "sql") || strings.Contains(string(body), "closed") {
		t.Errorf("healthz on a closed database: %d %s", code, body)
	}
}

// TestServiceLimitListener: past its limit, a new connection takes the
// place of the oldest that never completed a request, then of the one idle
// the longest; it waits only while every connection is busy.
func TestServiceLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitListener(inner, 2)
	defer l.Close()
	accepted := make(chan *limitConn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*limitConn)
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}
	c1, c2 := dial(), dial()
	s1, s2 := <-accepted, <-accepted
	// c1 never sends a request; c2 completed one and is idle.
	s2.prove()
	s2.state(http.StateIdle)
	dial()
	s3 := <-accepted
	if !closedByServer(c1) {
		t.Fatal("the connection that never completed a request kept its place")
	}
	_ = s1
	// s3 busy in a handler, s2 idle: the next takes s2's place.
	s3.prove()
	s3.state(http.StateActive)
	dial()
	s4 := <-accepted
	if !closedByServer(c2) {
		t.Fatal("the idle connection kept its place")
	}
	s4.prove()
	s4.state(http.StateActive)
	// Both busy: the next waits for one to end.
	dial()
	select {
	case <-accepted:
		t.Fatal("a connection was accepted while every place was busy")
	case <-time.After(200 * time.Millisecond):
	}
	s3.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not accepted when one ended")
	}
}

// TestServiceSlowClientsDoNotLockOut: 300 connections sending their
// headers a byte at a time and 300 sending a body they never finish hold
// a server of 50 places; a client polling /healthz and GET /api/v1/jobs is
// answered within a second each time.
func TestServiceSlowClientsDoNotLockOut(t *testing.T) {
	if testing.Short() {
		t.Skip("600 connections")
	}
	f := newFixture(t)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := f.s.HTTPServer()
	go func() { _ = hs.Serve(LimitListener(inner, 50)) }()
	defer hs.Close()
	addr := inner.Addr().String()
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for i := range 600 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
		if i%2 == 0 {
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		} else {
			fmt.Fprint(c, "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var worst time.Duration
	for i := range 40 {
		path := "/healthz"
		if i%2 == 1 {
			path = "/api/v1/jobs"
		}
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.reader)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s while slow clients hold the server: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > worst {
			worst = d
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		// More slow clients arrive meanwhile.
		for range 10 {
			if c, err := net.Dial("tcp", addr); err == nil {
				fmt.Fprint(c, "GET / HTTP/1.1\r\n")
				slow = append(slow, c)
			}
		}
	}
	if worst > time.Second {
		t.Errorf("slowest answer %s, want under 1 s", worst)
	}
	t.Logf("slowest of 40 answers with %d slow connections on 50 places: %s", len(slow), worst)
}

// TestServiceSelfSignedIsALeaf: the server's own certificate is no CA
// (issue 45: it was CA:TRUE with keyCertSign, so its key could sign any
// name); it chains to a CA whose key is nowhere, and cert.pem as a
// client's pinned roots verifies it.
func TestServiceSelfSignedIsALeaf(t *testing.T) {
	dir := t.TempDir()
	c, _, err := SelfSigned(dir, []string{"kubexm.example"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatalf("server certificate: CA %v, key usage %v, ext %v", leaf.IsCA, leaf.KeyUsage, leaf.ExtKeyUsage)
	}
	pemData, err := os.ReadFile(filepath.Join(dir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemData)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "kubexm.example"}); err != nil {
		t.Fatalf("cert.pem as the roots: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "PRIVATE KEY") && filepath.Base(f) != "key.pem" {
			t.Errorf("%s holds a private key: the CA's key must not be kept", f)
		}
	}
	if len(files) != 3 {
		t.Errorf("tls dir: %v, want cert.pem, key.pem, ca.pem", files)
	}
}
