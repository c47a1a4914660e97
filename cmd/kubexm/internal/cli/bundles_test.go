package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/mensylisir/kubexm/service/api"
)

// TestBundleVerbsThroughServer: kubexm bundle list and bundle delete
// against the API handler: a bundle a queued job names is refused naming
// the job and the cluster, deleted once the job ended; an unknown sha256,
// a missing, wrong or read-only token are errors saying what to do; no
// token is printed.
func TestBundleVerbsThroughServer(t *testing.T) {
	t.Setenv("KUBEXM_TOKEN", "")
	e := newServiceEnv(t, "")
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(serviceCluster("demo")), nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	data, err := os.ReadFile(packTestBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	var up api.Bundle
	if code := e.do("POST", "/api/v1/clusters/demo/bundles", "application/gzip", data, &up); code != 201 {
		t.Fatalf("upload: %d", code)
	}
	reader, _ := api.NewToken()
	if err := e.store.AddToken(context.Background(), "viewer", api.HashToken(reader), api.RoleReadOnly, time.Time{}); err != nil {
		t.Fatal(err)
	}
	srv := []string{"--server", e.srv.URL, "--cluster", "demo"}
	ops := append(append([]string{}, srv...), "--token", e.rec.token)
	var outputs strings.Builder
	run := func(args ...string) (string, error) {
		t.Helper()
		out, err := execKubexm(args...)
		outputs.WriteString(out)
		if err != nil {
			outputs.WriteString(err.Error())
		}
		return out, err
	}

	out, err := run(append([]string{"bundle", "list"}, ops...)...)
	if err != nil || !strings.Contains(out, "SHA256") || !strings.Contains(out, up.SHA256) {
		t.Fatalf("bundle list: %v\n%s", err, out)
	}
	out, err = run(append([]string{"bundle", "list", "-o", "json", "--token", reader}, srv...)...)
	var listed []api.Bundle
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].SHA256 != up.SHA256 || listed[0].Size != int64(len(data)) {
		t.Fatalf("bundle list -o json with a read-only token: %v\n%s", err, out)
	}
	if out, err := run(append([]string{"bundle", "list", "-o", "yaml", "--token", reader}, srv...)...); err != nil || !strings.Contains(out, "sha256: "+up.SHA256) {
		t.Errorf("bundle list -o yaml: %v\n%s", err, out)
	}

	var acc struct {
		JobID string `json:"job_id"`
	}
	if code := e.do("POST", "/api/v1/jobs", "application/json", fmt.Appendf(nil, `{"cluster": "demo", "playbook": "tiny", "options": {"offline_bundle": %q}}`, up.SHA256), &acc); code != 202 {
		t.Fatalf("queue: %d", code)
	}
	unknown := strings.Repeat("0", 64)
	for _, bad := range []struct {
		args []string
		want []string
	}{
		{append([]string{"bundle", "delete", up.SHA256}, ops...), []string{e.srv.URL, "HTTP 409", "used by job " + acc.JobID + " (queued)", "cluster demo", "cancel the job", "kubexm get job " + acc.JobID + " --server"}},
		{append([]string{"bundle", "delete", unknown}, ops...), []string{"cluster demo has no bundle " + unknown, "HTTP 404", "kubexm bundle list --server " + e.srv.URL + " --cluster demo"}},
		{append([]string{"bundle", "delete", "nothex"}, ops...), []string{"HTTP 400", `bundle "nothex": give its sha256`}},
		{[]string{"bundle", "delete", up.SHA256, "--server", e.srv.URL, "--cluster", "nope", "--token", e.rec.token}, []string{"cluster nope: not found", "HTTP 404", "kubexm get clusters --server"}},
		{append([]string{"bundle", "delete", up.SHA256}, srv...), []string{"no bearer token", "HTTP 401", "--token or $KUBEXM_TOKEN"}},
		{append([]string{"bundle", "delete", up.SHA256, "--token", "kxm_wrong"}, srv...), []string{"unknown bearer token", "HTTP 401"}},
		{append([]string{"bundle", "delete", up.SHA256, "--token", reader}, srv...), []string{"token viewer is read-only", "HTTP 403", "--role operator"}},
		{[]string{"bundle", "delete", up.SHA256, "--server", e.srv.URL, "--token", e.rec.token}, []string{"--cluster is required", "kubexm get clusters --server URL"}},
		{[]string{"bundle", "list", "--server", e.srv.URL}, []string{"--cluster is required"}},
		{[]string{"bundle", "delete", "--cluster", "demo", "--server", e.srv.URL}, []string{"accepts 1 arg"}},
	} {
		out, err := run(bad.args...)
		for _, w := range bad.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want an error with %q\n%s", bad.args, err, w, out)
			}
		}
	}
	if _, err := os.Stat(datadir.BundlePath(e.dataDir, "demo", up.SHA256)); err != nil {
		t.Fatalf("a refused delete removed the bundle: %v", err)
	}

	if code := e.do("POST", "/api/v1/jobs/"+acc.JobID+"/cancel", "", nil, nil); code != 202 {
		t.Fatalf("cancel: %d", code)
	}
	out, err = run(append([]string{"bundle", "delete", up.SHA256}, ops...)...)
	if err != nil || !strings.Contains(out, "deleted offline bundle "+up.SHA256+" of cluster demo") {
		t.Fatalf("bundle delete once the job ended: %v\n%s", err, out)
	}
	if _, err := os.Stat(datadir.BundlePath(e.dataDir, "demo", up.SHA256)); err == nil {
		t.Error("the bundle is still there after the delete")
	}
	out, err = run(append([]string{"bundle", "list"}, ops...)...)
	if err != nil || !strings.Contains(out, "no offline bundles of cluster demo on "+e.srv.URL) {
		t.Errorf("bundle list after the delete: %v\n%s", err, out)
	}
	out, err = run(append([]string{"bundle", "list", "-o", "json"}, ops...)...)
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("bundle list -o json after the delete: %v\n%s", err, out)
	}
	for _, tok := range []string{e.rec.token, reader} {
		if strings.Contains(outputs.String(), tok) || strings.Contains(e.log.String(), tok) {
			t.Errorf("a token appears in the output or the server's log")
		}
	}
}
