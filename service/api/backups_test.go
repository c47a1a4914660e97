package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/service/jobstore"
)

// fakeViews stand in for the verbs' views (the main package's verbViews,
// tested there): they quote the config they get, to show that the API
// masks its secrets in answers and errors.
type fakeViews struct{}

func (fakeViews) State(_ context.Context, dir string) (any, error) {
	return map[string]string{"dir": filepath.Base(dir)}, nil
}

func (fakeViews) Nodes(_ context.Context, config []byte, _ string) (any, error) {
	return nil, errors.New("no admin kubeconfig; the config was " + string(config))
}

func (fakeViews) Describe(_ context.Context, config []byte, dir string) (any, error) {
	return map[string]string{"config": string(config), "dir": filepath.Base(dir)}, nil
}

// TestBackupsAndRestore: the backups in a cluster's work directory are
// listed to read-only tokens, downloaded (with Content-Length, sha256 and
// Range) by operators only, and a restore job names one.
func TestBackupsAndRestore(t *testing.T) {
	f := newFixture(t)
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/backups", f.reader, ""); code != http.StatusNotFound || !isJSONError(body) {
		t.Fatalf("backups of an unregistered cluster: %d %s", code, body)
	}
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/backups", f.reader, ""); code != 200 || !strings.Contains(string(body), `"backups": []`) {
		t.Fatalf("no backups yet: %d %s", code, body)
	}
	dir := filepath.Join(f.s.c.DataDir, "clusters", "c1", "backups")
	if err := os.MkdirAll(filepath.Join(dir, ".staging-x"), 0o700); err != nil {
		t.Fatal(err)
	}
	archive := strings.Repeat("backup data ", 10000)
	sum := sha256.Sum256([]byte(archive))
	hexSum := hex.EncodeToString(sum[:])
	files := map[string]string{
		"c1-20260101-000000.tar.gz":        archive,
		"c1-20260101-000000.tar.gz.sha256": hexSum + "  c1-20260101-000000.tar.gz\n",
		"c1-20260102-000000.tar.gz":        "no sum recorded",
		"notes.txt":                        "not a backup",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "c1-20260101-000000.tar.gz"), old, old); err != nil {
		t.Fatal(err)
	}
	code, body := f.call(t, "GET", "/api/v1/clusters/c1/backups", f.reader, "")
	var list struct{ Backups []Backup }
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Backups) != 2 ||
		list.Backups[0].Name != "c1-20260102-000000.tar.gz" || list.Backups[1].SHA256 != hexSum || list.Backups[1].Size != int64(len(archive)) {
		t.Fatalf("list: %d %s", code, body)
	}

	get := func(path, token, rng string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	path := "/api/v1/clusters/c1/backups/c1-20260101-000000.tar.gz"
	if resp := get(path, f.reader, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("download with a read-only token: %d", resp.StatusCode)
	}
	resp := get(path, f.operator, "")
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(data) != archive || resp.ContentLength != int64(len(archive)) || resp.Header.Get("X-Kubexm-Sha256") != hexSum {
		t.Fatalf("download: %d, %d bytes (Content-Length %d), sha256 header %q", resp.StatusCode, len(data), resp.ContentLength, resp.Header.Get("X-Kubexm-Sha256"))
	}
	resp = get(path, f.operator, "bytes=12-23")
	if data, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusPartialContent || string(data) != "backup data " {
		t.Errorf("range: %d %q", resp.StatusCode, data)
	}
	// No sum recorded: computed.
	resp = get("/api/v1/clusters/c1/backups/c1-20260102-000000.tar.gz", f.operator, "")
	if s := sha256.Sum256([]byte("no sum recorded")); resp.Header.Get("X-Kubexm-Sha256") != hex.EncodeToString(s[:]) {
		t.Errorf("computed sha256: %q", resp.Header.Get("X-Kubexm-Sha256"))
	}
	for p, want := range map[string]int{
		"/api/v1/clusters/c1/backups/notes.txt":                 http.StatusBadRequest,
		"/api/v1/clusters/c1/backups/.staging-x":                http.StatusBadRequest,
		"/api/v1/clusters/c1/backups/c1-1999.tar.gz":            http.StatusNotFound,
		"/api/v1/clusters/c9/backups/c1-20260101-000000.tar.gz": http.StatusNotFound,
	} {
		resp := get(p, f.operator, "")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want || !isJSONError(body) {
			t.Errorf("GET %s: %d %s, want %d and a JSON error", p, resp.StatusCode, body, want)
		}
	}
	if _, body := f.call(t, "GET", "/api/v1/audit", f.operator, ""); !strings.Contains(string(body), "download backup") || !strings.Contains(string(body), hexSum) {
		t.Errorf("downloads are not audited: %s", body)
	}

	// A restore job names a backup of the server, never a path.
	for opts, want := range map[string]string{
		`{"backup": "../../../etc/shadow.tar.gz"}`: "not a path",
		`{"backup": "c1-1999.tar.gz"}`:             "no such backup",
	} {
		code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "restore", "options": `+opts+`}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("restore with %s: %d %s", opts, code, body)
		}
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "upgrade", "options": {"backup": "c1-20260101-000000.tar.gz"}}`); code != http.StatusBadRequest || !strings.Contains(string(body), "restore playbook") {
		t.Errorf("backup on an upgrade: %d %s", code, body)
	}
	code, body = f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "restore", "options": {"backup": "c1-20260101-000000.tar.gz"}}`)
	var acc struct{ Job jobstore.Job }
	if code != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.Job.Options.Backup != "c1-20260101-000000.tar.gz" {
		t.Fatalf("restore job: %d %s", code, body)
	}
	if _, body := f.call(t, "GET", "/api/v1/audit", f.operator, ""); !strings.Contains(string(body), "backup c1-20260101-000000.tar.gz") {
		t.Errorf("the restore's backup is not in the audit: %s", body)
	}
}

// TestViewsAndCertsReport: get clusters' state, get nodes, describe and
// the certificate report are served to read-only tokens, and no secret of
// the cluster.yaml comes back, in an answer or in an error.
func TestViewsAndCertsReport(t *testing.T) {
	f := newFixture(t)
	const secret = "pw-Sekr1t-xyz"
	for _, p := range []string{"/api/v1/clusters/c1/nodes", "/api/v1/clusters/c1/describe", "/api/v1/clusters/c1/certs-report", "/api/v1/clusters?state=true"} {
		if code, _ := f.call(t, "GET", p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/describe", f.reader, ""); code != http.StatusNotFound || !isJSONError(body) {
		t.Errorf("describe of an unregistered cluster: %d %s", code, body)
	}
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body := f.call(t, "GET", "/api/v1/clusters?state=true", f.reader, "")
	if code != 200 || !strings.Contains(string(body), `"state": {`) || !strings.Contains(string(body), `"dir": "c1"`) {
		t.Errorf("clusters with state: %d %s", code, body)
	}
	if code, body := f.call(t, "GET", "/api/v1/clusters", f.reader, ""); code != 200 || strings.Contains(string(body), "state") {
		t.Errorf("clusters without ?state: %d %s", code, body)
	}
	code, body = f.call(t, "GET", "/api/v1/clusters/c1/nodes", f.reader, "")
	if code != http.StatusBadGateway || !isJSONError(body) || !strings.Contains(string(body), "no admin kubeconfig") || strings.Contains(string(body), secret) {
		t.Errorf("nodes: %d %s", code, body)
	}
	code, body = f.call(t, "GET", "/api/v1/clusters/c1/describe", f.reader, "")
	if code != 200 || !strings.Contains(string(body), "******") || strings.Contains(string(body), secret) || !strings.Contains(string(body), `"dir": "c1"`) {
		t.Errorf("describe: %d %s", code, body)
	}

	if code, body := f.call(t, "GET", "/api/v1/clusters/c1/certs-report", f.reader, ""); code != http.StatusNotFound || !strings.Contains(string(body), "certs-check") {
		t.Errorf("report before any check: %d %s", code, body)
	}
	report := `{"cluster": "c1", "warn_within_days": 30, "problems": 0, "certificates": []}`
	if err := os.MkdirAll(filepath.Join(f.s.c.DataDir, "clusters", "c1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.s.c.DataDir, "clusters", "c1", "certs-check.json"), []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/clusters/c1/certs-report", nil)
	req.Header.Set("Authorization", "Bearer "+f.reader)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	written, err := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Kubexm-Report-Time"))
	if resp.StatusCode != 200 || string(data) != report || err != nil || time.Since(written) > time.Minute {
		t.Errorf("report: %d %s, written %q", resp.StatusCode, data, resp.Header.Get("X-Kubexm-Report-Time"))
	}
}

// TestCommandJobs: a command job (playbook run-command) carries its
// command alone, is checked before it is queued, is audited without its
// arguments and is never resumed.
func TestCommandJobs(t *testing.T) {
	f := newFixture(t)
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	for opts, want := range map[string]string{
		`{}`: "runs options.command",
		`{"command": {"argv": [], "nodes": ["node1"]}}`:                             "argv",
		`{"command": {"argv": ["uptime"]}}`:                                         "choose the hosts",
		`{"command": {"argv": ["a", "b"], "shell": true, "nodes": ["all"]}}`:        "one argument",
		`{"command": {"argv": ["uptime"], "nodes": ["all"]}, "tags": ["x"]}`:        "options.command only",
		`{"command": {"argv": ["uptime"], "nodes": ["--forks=0"]}}`:                 "not a host",
		`{"command": {"argv": ["uptime"], "nodes": ["all"], "timeout": "soon"}}`:    "timeout",
		`{"command": {"argv": ["uptime"], "nodes": ["all"], "forks": -1}}`:          "forks",
		`{"command": {"argv": ["uptime"], "nodes": ["all"], "become_user": "-r"}}`:  "not a host, group or user",
		`{"command": {"argv": ["uptime"], "nodes": ["all"], "limit": "--forks=0"}}`: "not a host, group or user",
	} {
		code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "run-command", "options": `+opts+`}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("command job %s: %d %s, want 400 with %q", opts, code, body, want)
		}
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "upgrade", "options": {"command": {"argv": ["uptime"], "nodes": ["all"]}}}`); code != http.StatusBadRequest || !strings.Contains(string(body), "not upgrade") {
		t.Errorf("a command on a playbook: %d %s", code, body)
	}
	code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, `{"cluster": "c1", "playbook": "run-command", "options": {"command": {"argv": ["echo top-secret-arg; exit 1"], "shell": true, "groups": ["master"], "timeout": "30s"}}}`)
	var acc struct{ Job jobstore.Job }
	if code != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.Job.Options.Command == nil || acc.Job.Options.Command.Timeout != "30s" {
		t.Fatalf("command job: %d %s", code, body)
	}
	if _, body := f.call(t, "GET", "/api/v1/audit", f.operator, ""); !strings.Contains(string(body), "a /bin/sh -c script of 27 bytes on master") || strings.Contains(string(body), "top-secret-arg") {
		t.Errorf("audit of a command job: %s", body)
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs/"+acc.Job.ID+"/cancel", f.operator, ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if code, body := f.call(t, "POST", "/api/v1/jobs/"+acc.Job.ID+"/resume", f.operator, ""); code != http.StatusConflict || !strings.Contains(string(body), "not run twice") {
		t.Errorf("resume of a command job: %d %s", code, body)
	}
}
