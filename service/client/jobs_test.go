package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Jobs refuses what a job cannot carry before anything reaches the
// server: a flag naming this machine's state, and a certs check's
// -e certs_report_path.
func TestJobsRefuse(t *testing.T) {
	reached := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	defer srv.Close()
	j := Jobs{Options: Options{Server: srv.URL, Token: "t"}, Changed: func(name string) bool { return name == "workdir" }, Errw: io.Discard}
	err := j.Play(context.Background(), lifecycle.Request{Playbook: "create-cluster", Inventory: "cluster.yaml"})
	if err == nil || !strings.Contains(err.Error(), "--workdir does not go to a kubexm server") {
		t.Errorf("Play with --workdir: %v", err)
	}
	j.Changed = func(string) bool { return false }
	_, err = j.CertsCheck(context.Background(), lifecycle.Request{Inventory: "cluster.yaml", ExtraVars: []string{"certs_report_path=/tmp/r.json"}}, time.Hour, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "certs_report_path does not go to a kubexm server") {
		t.Errorf("CertsCheck with -e certs_report_path: %v", err)
	}
	if reached {
		t.Error("a refused run reached the server")
	}
}

// A command runs as a job carrying it; a job not followed to its end
// returns its error and no outcomes.
func TestJobsCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte("kind: Cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var queued struct {
		Playbook string           `json:"playbook"`
		Options  jobstore.Options `json:"options"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/clusters":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"cluster":"demo","version":1}`))
		case "/api/v1/jobs":
			if err := json.NewDecoder(r.Body).Decode(&queued); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"job_id":"j1"}`))
		default: // the event stream: the user stops following
			cancel()
			http.Error(w, "gone", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	j := Jobs{Options: Options{Server: srv.URL, Token: "t"}, Changed: func(string) bool { return false }, Errw: io.Discard}
	req := lifecycle.CommandRequest{Inventory: file, Argv: []string{"uptime"}, Nodes: []string{"n1"}, Timeout: time.Minute}
	results, err := j.Command(ctx, req, nil, func(lifecycle.HostRun) {})
	var ee *lifecycle.ExitError
	if results != nil || !errors.As(err, &ee) || ee.Code != 130 {
		t.Errorf("Command stopped: %v, %v", results, err)
	}
	c := queued.Options.Command
	if queued.Playbook != jobstore.CommandPlaybook || c == nil || strings.Join(c.Argv, " ") != "uptime" || c.Timeout != "1m0s" {
		t.Errorf("queued %+v (command %+v)", queued, c)
	}
}
