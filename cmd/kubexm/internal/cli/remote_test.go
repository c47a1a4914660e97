package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// execKubexm runs the CLI in this process and returns what it printed.
func execKubexm(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestVerbsThroughServer: verbs given --server run as jobs of a real server
// (the API in this process, a kubexm worker process) and show the job's
// events here: variables of the verb's flags and -e reach the playbook,
// the offline bundle is uploaded once, -o json prints the engine's events,
// a failed job exits 2, and flags a job cannot carry are refused before
// anything is sent.
func TestVerbsThroughServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	e := newServiceEnv(t, "")
	// The server's --playbooks are found before the built-in ones: these
	// stand in for the verbs' playbooks, on localhost.
	e.addPlaybooks(map[string]string{
		"create-cluster.yaml": `- name: create
  hosts: localhost
  tasks:
    - name: write the marker
      shell: echo {{ .marker | quote }} > {{ .work_dir | quote }}/marker
    - name: read the bundle
      shell: grep -q 'not really kubelet' {{ .offline_bundle_dir | quote }}/kubernetes/1.37.2/amd64/kubelet
`,
		"delete-nodes.yaml": `- name: delete nodes
  hosts: localhost
  tasks:
    - name: record the nodes
      shell: echo {{ .nodes | quote }} > {{ .work_dir | quote }}/deleted
`,
		"add-nodes.yaml": `- name: add nodes
  hosts: localhost
  tasks:
    - name: break
      shell: echo no room for nodes >&2; exit 3
`,
	})
	e.startWorker("w1")
	cluster := writeServiceCluster(t, "r1")
	bundlePath := packTestBundle(t)
	vars := filepath.Join(t.TempDir(), "vars.yaml")
	if err := os.WriteFile(vars, []byte("marker: from-a-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remote := []string{"--server", e.srv.URL, "--token", e.rec.token}
	workDir := filepath.Join(e.dataDir, "clusters", "r1")

	out, err := execKubexm(append([]string{"create", "cluster", "-f", cluster, "-e", "@" + vars, "--offline-bundle", bundlePath}, remote...)...)
	if err != nil {
		t.Fatalf("create cluster --server: %v\n%s", err, out)
	}
	for _, want := range []string{"runs create-cluster on cluster r1", "uploading", "write the marker", "read the bundle", "job start: worker w1"} {
		if !strings.Contains(out, want) {
			t.Errorf("create cluster --server printed no %q:\n%s", want, out)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(workDir, "marker")); string(data) != "from-a-file\n" {
		t.Errorf("the -e @file variable did not reach the job: marker %q", data)
	}

	// Again, as JSON: the bundle is not sent twice, stdout is the engine's
	// events as kubexm play -o json prints them.
	out, err = execKubexm(append([]string{"create", "cluster", "-f", cluster, "-e", "marker=again", "--offline-bundle", bundlePath, "-o", "json"}, remote...)...)
	if err != nil {
		t.Fatalf("create cluster --server -o json: %v\n%s", err, out)
	}
	if !strings.Contains(out, "the server has it") || strings.Contains(out, "uploading") {
		t.Errorf("the second run uploaded the bundle again:\n%s", out)
	}
	kinds := map[model.EventKind]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev model.Event
		if strings.HasPrefix(sc.Text(), "{") && json.Unmarshal(sc.Bytes(), &ev) == nil {
			kinds[ev.Kind]++
		}
	}
	if kinds[model.EventRecap] != 1 || kinds[model.EventHostResult] < 2 {
		t.Errorf("-o json: event kinds %v, want a recap and the host results:\n%s", kinds, out)
	}

	// A verb's own flags become the playbook's variables there too.
	out, err = execKubexm(append([]string{"delete", "nodes", "-f", cluster, "--nodes", "node1", "--yes"}, remote...)...)
	if err != nil {
		t.Fatalf("delete nodes --server: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(filepath.Join(workDir, "deleted")); string(data) != "node1\n" {
		t.Errorf("--nodes did not reach the job: %q", data)
	}

	// A failed job fails the command as a failed run does.
	out, err = execKubexm(append([]string{"add", "nodes", "-f", cluster}, remote...)...)
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), "failed") {
		t.Errorf("add nodes --server of a failing playbook: %v, want exit 2\n%s", err, out)
	}
	if !strings.Contains(out, "no room for nodes") {
		t.Errorf("the failed task's stderr is not shown:\n%s", out)
	}

	jobsBefore := len(e.jobs())
	for _, bad := range [][]string{
		{"create", "cluster", "-f", cluster, "--forks", "3"},
		{"create", "cluster", "-f", cluster, "--resume"},
		{"create", "cluster", "-f", cluster, "--workdir", t.TempDir()},
	} {
		out, err := execKubexm(append(bad, remote...)...)
		if err == nil || !strings.Contains(err.Error(), "does not go to a kubexm server") {
			t.Errorf("%v --server: %v, want a refusal\n%s", bad, err, out)
		}
	}
	if out, err := execKubexm("create", "cluster", "-f", cluster, "--server", e.srv.URL, "--token", "kxm_wrong"); err == nil || !strings.Contains(err.Error(), "unknown bearer token") {
		t.Errorf("a wrong token: %v\n%s", err, out)
	}
	if n := len(e.jobs()); n != jobsBefore {
		t.Errorf("refused commands queued %d jobs", n-jobsBefore)
	}
}

func (e *serviceEnv) jobs() []jobstore.Job {
	e.t.Helper()
	js, err := e.store.Jobs(context.Background(), jobstore.JobFilter{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return js
}
