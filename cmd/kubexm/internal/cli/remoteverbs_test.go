package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/datadir"
)

// execKubexmIn runs the CLI in this process with stdin and returns what
// it printed.
func execKubexmIn(stdin string, args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestReadVerbsThroughServer: get clusters, get nodes and describe cluster
// given --server print what they print on the machine that holds the
// work directory (the server's, copied from apiFixture's, with its Kubernetes
// API fixture), for the config registered there; no secret of it comes
// back; an unknown cluster, a wrong token and an unreachable server are
// errors naming the server and what to do.
func TestReadVerbsThroughServer(t *testing.T) {
	apiFixture(t)
	clusterYAML := strings.ReplaceAll(verbClusterYAML, "password: pw", "password: "+serviceSecret)
	if err := os.WriteFile("cluster.yaml", []byte(clusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newServiceEnv(t, "")
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(clusterYAML), nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	workDir := filepath.Join(e.dataDir, "clusters", "demo")
	if err := os.CopyFS(workDir, os.DirFS(filepath.Join(".kubexm", "demo"))); err != nil {
		t.Fatal(err)
	}
	remote := []string{"--server", e.srv.URL, "--token", e.rec.token}
	same := func(local, viaServer []string) string {
		t.Helper()
		want, err := execKubexm(local...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", local, err, want)
		}
		got, err := execKubexm(append(viaServer, remote...)...)
		if err != nil {
			t.Fatalf("%v --server: %v\n%s", viaServer, err, got)
		}
		if got != want {
			t.Errorf("%v --server printed\n%s\nlocally (%v):\n%s", viaServer, got, local, want)
		}
		if strings.Contains(got, serviceSecret) {
			t.Errorf("%v --server shows the password:\n%s", viaServer, got)
		}
		return got
	}
	for _, o := range []string{"text", "json", "yaml"} {
		out := same([]string{"get", "clusters", "--dir", filepath.Join(e.dataDir, "clusters"), "-o", o}, []string{"get", "clusters", "-o", o})
		if !strings.Contains(out, "demo") || !strings.Contains(out, "upgrade") {
			t.Errorf("get clusters --server -o %s:\n%s", o, out)
		}
		out = same([]string{"get", "nodes", "-f", "cluster.yaml", "--workdir", workDir, "-o", o}, []string{"get", "nodes", "--cluster", "demo", "-o", o})
		if !strings.Contains(out, "n7") || !strings.Contains(out, "NotJoined") {
			t.Errorf("get nodes --server -o %s:\n%s", o, out)
		}
		same([]string{"get", "nodes", "-f", "cluster.yaml", "--workdir", workDir, "-o", o}, []string{"get", "nodes", "-f", "cluster.yaml", "-o", o})
		out = same([]string{"describe", "cluster", "-f", "cluster.yaml", "--workdir", workDir, "-o", o}, []string{"describe", "cluster", "-f", "cluster.yaml", "-o", o})
		if !strings.Contains(out, "answered: 2 nodes") || !strings.Contains(out, "create-cluster") {
			t.Errorf("describe cluster --server -o %s:\n%s", o, out)
		}
	}
	// The certificate of the work directory expires in 40 days: the hint
	// names the file given.
	if out, _ := execKubexm(append([]string{"describe", "cluster", "--cluster", "demo"}, remote...)...); !strings.Contains(out, "kubexm certs renew -f cluster.yaml") {
		t.Errorf("describe cluster --cluster --server:\n%s", out)
	}

	// The cluster's API server gone: get nodes fails as locally, naming
	// the server; describe reports it.
	if err := os.Remove(filepath.Join(workDir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	out, err := execKubexm(append([]string{"get", "nodes", "--cluster", "demo"}, remote...)...)
	if err == nil || !strings.Contains(err.Error(), e.srv.URL) || !strings.Contains(err.Error(), "no admin kubeconfig") || !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("get nodes --server without the kubeconfig: %v\n%s", err, out)
	}
	for _, bad := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "nodes", "--cluster", "nope", "--server", e.srv.URL, "--token", e.rec.token}, []string{e.srv.URL, "cluster nope: not found", "HTTP 404", "kubexm get clusters --server"}},
		{[]string{"describe", "cluster", "--cluster", "demo", "--server", e.srv.URL, "--token", "kxm_wrong"}, []string{e.srv.URL, "unknown bearer token", "HTTP 401", "--token or $KUBEXM_TOKEN"}},
		{[]string{"get", "clusters", "--server", "http://127.0.0.1:1", "--token", e.rec.token}, []string{"http://127.0.0.1:1", "is kubexm server running there"}},
		{[]string{"get", "nodes", "--cluster", "demo", "--workdir", workDir, "--server", e.srv.URL}, []string{"--workdir does not go to a kubexm server"}},
		{[]string{"get", "clusters", "--dir", "x", "--server", e.srv.URL}, []string{"--dir does not go to a kubexm server"}},
		{[]string{"describe", "cluster", "--server", e.srv.URL}, []string{"no cluster: pass --cluster NAME"}},
		{[]string{"get", "nodes", "--cluster", "demo"}, []string{"--cluster names a cluster registered on a kubexm server"}},
	} {
		out, err := execKubexm(bad.args...)
		for _, w := range bad.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want an error with %q\n%s", bad.args, err, w, out)
			}
		}
	}
	if strings.Contains(e.log.String(), serviceSecret) {
		t.Errorf("the server log shows the password:\n%s", e.log.String())
	}
}

// TestJobVerbsThroughServer: plan cluster and certs check run their
// playbooks as jobs and print what they print locally; a backup made by a
// job is listed, downloaded (checked, 0600, never over a file) and
// restored by name with the restore verb's confirmation.
func TestJobVerbsThroughServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	e := newServiceEnv(t, "")
	e.addPlaybooks(map[string]string{
		"create-cluster.yaml": `- name: create
  hosts: localhost
  tasks:
    - name: write the config
      copy:
        content: "planned\n"
        dest: "{{ .work_dir }}/planned.conf"
`,
		"certs-check.yaml": `- name: certs
  hosts: localhost
  tasks:
    - name: write the report
      copy:
        content: '{"cluster": "r1", "warn_within_days": {{ .certs_warn_days }}, "problems": 1, "certificates": [{"host": "node1", "path": "/etc/kubernetes/pki/apiserver.crt", "status": "warn", "exists": true, "kind": "certificate", "common_name": "kube-apiserver", "issuer": "kubernetes", "not_after": "2027-01-01T00:00:00Z", "days_left": 12, "sans": {"dns": ["kubernetes"], "ips": []}}]}'
        dest: "{{ .work_dir }}/certs-check.json"
      check_mode: false
`,
		"backup.yaml": `- name: backup
  hosts: localhost
  tasks:
    - name: pack
      shell: |
        mkdir -p {{ .work_dir | quote }}/backups && cd {{ .work_dir | quote }}/backups &&
        printf 'etcd and pki' > r1-20260101-000000.tar.gz && sha256sum r1-20260101-000000.tar.gz > r1-20260101-000000.tar.gz.sha256
`,
		"restore.yaml": `- name: restore
  hosts: localhost
  tasks:
    - name: record the backup
      shell: echo {{ .backup_file | quote }} > {{ .work_dir | quote }}/restored
`,
	})
	e.startWorker("w1")
	cluster := writeServiceCluster(t, "r1")
	remote := []string{"--server", e.srv.URL, "--token", e.rec.token}
	workDir := filepath.Join(e.dataDir, "clusters", "r1")
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := execKubexmIn(stdin, append(args, remote...)...)
		if err != nil {
			t.Fatalf("%v --server: %v\n%s", args, err, out)
		}
		if strings.Contains(out, serviceSecret) {
			t.Errorf("%v --server shows the password:\n%s", args, out)
		}
		return out
	}

	out := run("", "plan", "cluster", "-f", cluster)
	for _, want := range []string{"localhost: 1 to change, 0 unchanged", "~ write the config", "+planned", "Plan: 1 to change, 0 unchanged."} {
		if !strings.Contains(out, want) {
			t.Errorf("plan cluster --server printed no %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(workDir, "planned.conf")); err == nil {
		t.Errorf("plan cluster --server changed the work directory")
	}
	if out, err := execKubexm(append([]string{"plan", "cluster", "-f", cluster, "--workdir", "x"}, remote...)...); err == nil || !strings.Contains(err.Error(), "--workdir does not go") {
		t.Errorf("plan --workdir --server: %v\n%s", err, out)
	}

	out = run("", "certs", "check", "-f", cluster, "--warn-within", "30d")
	for _, want := range []string{"node1  /etc/kubernetes/pki/apiserver.crt  kube-apiserver", "12d", "WARN", "1 files on the hosts of cluster r1; 1 expire within 30 days"} {
		if !strings.Contains(out, want) {
			t.Errorf("certs check --server printed no %q:\n%s", want, out)
		}
	}
	if out := run("", "certs", "check", "-f", cluster, "-o", "json"); !strings.Contains(out, `"warn_within_days": 90`) {
		t.Errorf("certs check --server -o json:\n%s", out)
	}
	if out, err := execKubexm(append([]string{"certs", "check", "-f", cluster, "-e", "certs_report_path=/tmp/x"}, remote...)...); err == nil || !strings.Contains(err.Error(), "certs_report_path") {
		t.Errorf("certs check -e certs_report_path --server: %v\n%s", err, out)
	}

	run("", "backup", "cluster", "-f", cluster)
	const name = "r1-20260101-000000.tar.gz"
	if out := run("", "backup", "list", "--cluster", "r1"); !strings.Contains(out, name) {
		t.Errorf("backup list:\n%s", out)
	}
	to := filepath.Join(t.TempDir(), "b.tar.gz")
	run("", "backup", "download", name, "--cluster", "r1", "--to", to)
	if data, err := os.ReadFile(to); err != nil || string(data) != "etcd and pki" {
		t.Errorf("downloaded %q, %v", data, err)
	}
	if st, err := os.Stat(to); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("downloaded file mode: %v %v", st.Mode(), err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "download", name, "--cluster", "r1", "--to", to}, "exists"},
		{[]string{"backup", "download", "r1-1999.tar.gz", "--cluster", "r1", "--to", to + ".2"}, "has no backup r1-1999.tar.gz"},
		{[]string{"restore", "cluster", "-f", cluster, "--backup", name}, "no answer on standard input"},
		{[]string{"restore", "cluster", "-f", cluster, "--backup", "./" + name, "--yes"}, "names a backup the server made"},
		{[]string{"restore", "cluster", "-f", cluster, "--backup", "r1-1999.tar.gz", "--yes"}, "no such backup on the server"},
	} {
		out, err := execKubexmIn("", append(bad.args, remote...)...)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q\n%s", bad.args, err, bad.want, out)
		}
	}
	if _, err := os.Stat(to + ".2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed download left a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(workDir, "restored")); err == nil {
		t.Fatal("a refused restore ran")
	}
	out = run("yes\n", "restore", "cluster", "-f", cluster, "--backup", name)
	if !strings.Contains(out, "Type yes to continue") {
		t.Errorf("restore --server asked nothing:\n%s", out)
	}
	if data, _ := os.ReadFile(filepath.Join(workDir, "restored")); strings.TrimSpace(string(data)) != filepath.Join(workDir, "backups", name) {
		t.Errorf("the restore job read backup_file %q", data)
	}
}

// TestRunCommandThroughServer: run command --server runs the command from
// a worker and prints each host's outcome as a local run prints it, with
// the same exit status; the cluster's secrets are masked; bad hosts are
// refused before anything is sent; a command job is not resumed.
func TestRunCommandThroughServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	t.Chdir(t.TempDir()) // the local runs' journals go to .kubexm/r1
	e := newServiceEnv(t, "")
	e.startWorker("w1")
	cluster := writeServiceCluster(t, "r1")
	remote := []string{"--server", e.srv.URL, "--token", e.rec.token}
	// withRemote puts the server's flags before the command's --.
	withRemote := func(args []string) []string {
		i := slices.Index(args, "--")
		return append(append(append([]string{}, args[:i]...), remote...), args[i:]...)
	}
	for _, args := range [][]string{
		{"run", "command", "-f", cluster, "--nodes", "node1", "--", "echo", "hello"},
		{"run", "command", "-f", cluster, "--group", "worker", "-o", "json", "--shell", "--", "echo out; echo err >&2"},
		{"run", "command", "-f", cluster, "--nodes", "all", "--limit", "node*", "--", "echo", "limited"},
	} {
		want, err := execKubexm(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, want)
		}
		got, err := execKubexm(withRemote(args)...)
		if err != nil {
			t.Fatalf("%v --server: %v\n%s", args, err, got)
		}
		// stderr (here in the same buffer) has the job's lines too.
		if !strings.Contains(got, "runs run-command on cluster r1") || !strings.Contains(got, "job end: succeeded") {
			t.Errorf("%v --server printed no job lines:\n%s", args, got)
		}
		if strip := regexp.MustCompile(`(?m)^(kubexm server .*|job .*)\n`).ReplaceAllString(got, ""); normalize(strip) != normalize(want) {
			t.Errorf("%v --server printed\n%s\nlocally:\n%s", args, strip, want)
		}
	}
	out, err := execKubexm(withRemote([]string{"run", "command", "-f", cluster, "--nodes", "node1", "--shell", "--", "echo " + serviceSecret + "; exit 3"})...)
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(out, "node1 | FAILED | rc=3 >>") || !strings.Contains(out, "******") || strings.Contains(out, serviceSecret) {
		t.Errorf("a failing command with the secret: %v\n%s", err, out)
	}
	failed := e.mustLatest("r1")
	limited := 0
	for _, j := range e.jobs() {
		if c := j.Options.Command; c != nil && c.Limit == "node*" {
			limited++
		}
	}
	if limited != 1 {
		t.Errorf("%d jobs carry --limit node*, want 1", limited)
	}
	// The worker's runs are journaled in the cluster's work directory on
	// the server, as its playbook runs are.
	if runs, err := engine.Runs(datadir.WorkDir(e.dataDir, "r1")); err != nil || len(runs) != 4 || runs[3].Playbook != "run-command" || runs[3].Outcome != "failed" {
		t.Errorf("the server's runs of r1: %+v %v", runs, err)
	}
	if code := e.do("POST", "/api/v1/jobs/"+failed+"/resume", "", nil, nil); code != 409 {
		t.Errorf("resume of a command job: %d, want 409", code)
	}
	before := len(e.jobs())
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "command", "-f", cluster, "--nodes", "n9", "--", "true"}, "n9 matches no host"},
		{[]string{"run", "command", "-f", cluster, "--nodes", "node1", "--roles-path", t.TempDir(), "--", "true"}, "--roles-path does not go"},
		{[]string{"run", "command", "-f", cluster, "--nodes", "node1", "--", "echo hi"}, "one argument with spaces"},
	} {
		out, err := execKubexm(withRemote(bad.args)...)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v --server: %v, want %q\n%s", bad.args, err, bad.want, out)
		}
	}
	if n := len(e.jobs()); n != before {
		t.Errorf("refused commands queued %d jobs", n-before)
	}
	if strings.Contains(e.log.String(), serviceSecret) || strings.Contains(e.workerLogs(), serviceSecret) {
		t.Errorf("a log shows the secret:\n%s\n%s", e.log.String(), e.workerLogs())
	}
}

// normalize drops what differs between two runs of one command: the
// durations.
func normalize(s string) string {
	return regexp.MustCompile(`"duration_ms":\d+`).ReplaceAllString(s, `"duration_ms":0`)
}

// addPlaybooks puts playbooks (name.yaml: text) in the server's
// --playbooks directory, found before the built-in ones.
func (e *serviceEnv) addPlaybooks(pbs map[string]string) {
	e.t.Helper()
	for name, text := range pbs {
		if err := os.WriteFile(filepath.Join(e.pbDir, name), []byte(text), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}

// writeServiceCluster writes serviceCluster(name) to a cluster.yaml.
func writeServiceCluster(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(p, []byte(serviceCluster(name)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
