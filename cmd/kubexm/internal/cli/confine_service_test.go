package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/datadir"
	"github.com/mensylisir/kubexm/service/server"

	"github.com/mensylisir/kubexm/service/jobstore"
)

func TestServiceConfinedSQLite(t *testing.T) { testServiceConfined(t, "") }

func TestServiceConfinedPostgreSQL(t *testing.T) { testServiceConfined(t, pg.DSN(t)) }

func confinedCluster(name, hosts string) string {
	return fmt.Sprintf(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: %s}
spec:
  hosts:
%s
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
`, name, hosts)
}

// ownAddress is a non-loopback address of this machine, "" when it has
// none.
func ownAddress() string {
	as, _ := net.InterfaceAddrs()
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// testServiceConfined sends the requests of issue 45's audit to a server
// allowing no network: a cluster whose host is the server (by every name),
// a command job on localhost, the server's files and variables named in a
// cluster.yaml, a hook playbook by server path; each is refused. A config
// stored before these rules (put in the database directly) is refused at
// job creation, and a job queued past the API fails at its worker without
// running. A server secret named as ${secret:NAME} registers, masked.
func testServiceConfined(t *testing.T, dsn string) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	e := newServiceEnvAllowing(t, dsn, nil)
	hosts := map[string]string{
		"localhost":        `  - {name: node1, address: localhost, password: x}`,
		"loopback":         `  - {name: node1, address: 127.0.0.1, password: x}`,
		"ipv6 loopback":    `  - {name: node1, address: "::1", password: x}`,
		"link-local":       `  - {name: node1, address: 169.254.169.254, password: x}`,
		"unspecified":      `  - {name: node1, address: 0.0.0.0, password: x}`,
		"connection local": `  - {name: node1, address: 10.0.0.5, connection: local}`,
		"bastion":          `  - {name: node1, address: 10.0.0.5, password: x, bastion: {address: 127.0.0.1, password: y}}`,
	}
	if own := ownAddress(); own != "" {
		hosts["own address "+own] = `  - {name: node1, address: ` + own + `, password: x}`
	}
	for what, h := range hosts {
		var out struct{ Error string }
		if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(confinedCluster("bad", h)), &out); code != 400 || !strings.Contains(out.Error, "refused in service mode") {
			t.Errorf("register a cluster on %s: %d %s", what, code, out.Error)
		}
	}
	secretFile := filepath.Join(e.dataDir, "secret.key")
	for what, h := range map[string]string{
		"passwordFile":   `  - {name: node1, address: 10.0.0.5, passwordFile: ` + secretFile + `}`,
		"privateKeyPath": `  - {name: node1, address: 10.0.0.5, privateKeyPath: ` + secretFile + `}`,
		"${ENV}":         `  - {name: node1, address: 10.0.0.5, password: "${KUBEXM_SECRET_KEY}"}`,
		"hook":           `  - {name: node1, address: 10.0.0.5, password: x}` + "\n  hooks: [{playbook: create-cluster, phase: network, when: before, file: " + secretFile + "}]",
	} {
		var out struct{ Error string }
		if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(confinedCluster("bad", h)), &out); code != 400 || !strings.Contains(out.Error, "not allowed through the API") {
			t.Errorf("register with %s: %d %s", what, code, out.Error)
		}
	}
	// A good cluster: a command job may name its hosts, not localhost.
	good := confinedCluster("good", `  - {name: node1, address: 10.0.0.5, password: x}`)
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(good), nil); code != 201 {
		t.Fatalf("register good: %d", code)
	}
	for _, nodes := range []string{`["localhost"]`, `["node1", "localhost"]`, `["127.0.0.1"]`} {
		var out struct{ Error string }
		body := `{"cluster": "good", "playbook": "run-command", "options": {"command": {"argv": ["id"], "nodes": ` + nodes + `}}}`
		if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(body), &out); code != 400 || !strings.Contains(out.Error, "no host of cluster good") {
			t.Errorf("run command on %s: %d %s", nodes, code, out.Error)
		}
	}
	// Stored before the rules: refused when a job names it.
	ctx := context.Background()
	svc, err := server.Open(ctx, server.Config{DB: e.dsn, DataDir: e.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Store.Close()
	old := []byte(confinedCluster("old", `  - {name: node1, address: 127.0.0.1, connection: local}`))
	sealed, err := svc.Box.Seal(old, datadir.ConfigAAD("old"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutCluster(ctx, "old", sealed, "masked", "before"); err != nil {
		t.Fatal(err)
	}
	var out struct{ Error string }
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(`{"cluster": "old", "playbook": "tiny"}`), &out); code != 400 || !strings.Contains(out.Error, "refused in service mode") {
		t.Errorf("job on a config stored before: %d %s", code, out.Error)
	}
	// Queued past the API (another server, an old one): its worker
	// refuses it before the child starts.
	if _, err := e.store.CreateJob(ctx, jobstore.Job{ID: "job-past", Cluster: "old", ConfigVersion: 1, Playbook: "tiny"}, nil); err != nil {
		t.Fatal(err)
	}
	e.startWorker("w1")
	j := e.waitJob("job-past", time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Failed || !strings.Contains(j.Error, "refused in service mode") {
		t.Fatalf("job queued past the API: %+v\n%s", j, e.workerLogs())
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "clusters", "old", "busy")); err == nil {
		t.Fatal("the refused job ran its playbook")
	}
	// A server secret, made by the server's admin.
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("Zq8-server-held-pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := execKubexm("server", "secret", "create", "pw", "--from-file", pwFile, "--data-dir", e.dataDir, "--db", e.dsn); err == nil || !strings.Contains(err.Error()+out, "--cluster NAME") {
		t.Fatalf("a secret for no cluster: %v %s", err, out)
	}
	runKubexm(t, "server", "secret", "create", "pw", "--cluster", "refs", "--from-file", pwFile, "--data-dir", e.dataDir, "--db", e.dsn)
	if got := strings.TrimSpace(runKubexm(t, "server", "secret", "list", "--data-dir", e.dataDir, "--db", e.dsn)); got != "pw\tcluster refs" {
		t.Fatalf("secret list: %q", got)
	}
	ref := confinedCluster("refs", `  - {name: node1, address: 10.0.0.5, password: "${secret:pw}"}`)
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(ref), nil); code != 201 {
		t.Fatalf("register with a server secret: %d", code)
	}
	// Another cluster's file naming refs' secret is refused as if it did
	// not exist: registration tells nothing of other clusters' secrets.
	var scoped, unknown struct{ Error string }
	other := strings.Replace(ref, "name: refs", "name: other", 1)
	codeScoped := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(other), &scoped)
	codeUnknown := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(strings.ReplaceAll(other, "secret:pw", "secret:nope")), &unknown)
	if codeScoped != 400 || codeUnknown != 400 || !strings.Contains(scoped.Error, `no server secret "pw" for cluster other`) ||
		strings.ReplaceAll(scoped.Error, `"pw"`, `"NAME"`) != strings.ReplaceAll(unknown.Error, `"nope"`, `"NAME"`) {
		t.Errorf("cluster other naming refs' secret: %d %s; an unknown secret: %d %s", codeScoped, scoped.Error, codeUnknown, unknown.Error)
	}
	if code := e.do("GET", "/api/v1/clusters/other", "", nil, nil); code != 404 {
		t.Errorf("cluster other was registered: %d", code)
	}
	// --all-clusters: every cluster's file may name it.
	runKubexm(t, "server", "secret", "create", "shared", "--all-clusters", "--from-file", pwFile, "--data-dir", e.dataDir, "--db", e.dsn)
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(strings.ReplaceAll(other, "secret:pw", "secret:shared")), nil); code != 201 {
		t.Errorf("cluster other naming a secret for every cluster: %d", code)
	}
	// Re-scoped away from refs: refs' registered file is refused at its
	// next job, by the API and by the worker of a job queued past it.
	runKubexm(t, "server", "secret", "create", "pw", "--cluster", "lab", "--from-file", pwFile, "--data-dir", e.dataDir, "--db", e.dsn)
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(`{"cluster": "refs", "playbook": "tiny"}`), &out); code != 400 || !strings.Contains(out.Error, `no server secret "pw" for cluster refs`) {
		t.Errorf("a job of refs once its secret is for lab only: %d %s", code, out.Error)
	}
	if _, err := e.store.CreateJob(ctx, jobstore.Job{ID: "job-rescoped", Cluster: "refs", ConfigVersion: 1, Playbook: "tiny"}, nil); err != nil {
		t.Fatal(err)
	}
	if j := e.waitJob("job-rescoped", time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() }); j.Status != jobstore.Failed || !strings.Contains(j.Error, `no server secret "pw" for cluster refs`) {
		t.Errorf("a job of refs queued past the API once its secret is for lab only: %+v", j)
	}
	var got struct{ Config string }
	e.do("GET", "/api/v1/clusters/refs", "", nil, &got)
	if strings.Contains(got.Config, "secret:pw") || !strings.Contains(got.Config, "******") {
		t.Errorf("masked config of refs:\n%s", got.Config)
	}
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(strings.ReplaceAll(ref, "secret:pw", "secret:nope")), &out); code != 400 || !strings.Contains(out.Error, `no server secret "nope"`) {
		t.Errorf("an unknown server secret: %d %s", code, out.Error)
	}
	data, _ := json.Marshal(e.events("job-past"))
	if strings.Contains(string(data), "uid=") {
		t.Errorf("the refused job ran something: %s", data)
	}
}

// TestServiceInsecureHTTPListensOnLoopback: plain HTTP binds every
// interface only when --listen says so.
func TestServiceInsecureHTTPListensOnLoopback(t *testing.T) {
	cmd := newServerCmd(newApp(lifecycle.Runner{}))
	if err := cmd.ParseFlags([]string{"--insecure-http"}); err != nil {
		t.Fatal(err)
	}
	c := server.ServeConfig{InsecureHTTP: true, Listen: server.DefaultListen, ListenSet: cmd.Flags().Changed("listen")}
	if got := c.ListenAddr(); got != "127.0.0.1:8443" {
		t.Errorf("--insecure-http alone listens on %s", got)
	}
	if got := (server.ServeConfig{InsecureHTTP: true, Listen: ":9000", ListenSet: true}).ListenAddr(); got != ":9000" {
		t.Errorf("--insecure-http --listen :9000 listens on %s", got)
	}
	if got := (server.ServeConfig{Listen: server.DefaultListen}).ListenAddr(); got != server.DefaultListen {
		t.Errorf("TLS listens on %s", got)
	}
}

func TestServiceExtraVarsSealedSQLite(t *testing.T) { testServiceExtraVarsSealed(t, "") }

func TestServiceExtraVarsSealedPostgreSQL(t *testing.T) { testServiceExtraVarsSealed(t, pg.DSN(t)) }

// testServiceExtraVarsSealed: a job's extra var values reach its run, and
// neither its record (GET /api/v1/jobs/{id}, the jobs table) nor the
// worker's log of the child's arguments (every user of the machine reads
// a command line) holds them.
func testServiceExtraVarsSealed(t *testing.T, dsn string) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	const value = "Zq8-extra-var-value"
	e := newServiceEnv(t, dsn)
	e.startWorker("w1")
	if code := e.do("POST", "/api/v1/clusters", "application/yaml", []byte(serviceCluster("c1")), nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	body := `{"cluster": "c1", "playbook": "vars", "options": {"extra_vars": ["note=` + value + `", "{\"other\": {\"deep\": \"` + value + `\"}}"]}}`
	if code := e.do("POST", "/api/v1/jobs", "application/json", []byte(body), &acc); code != 202 {
		t.Fatalf("queue: %d", code)
	}
	j := e.waitJob(acc.JobID, time.Minute, "ended", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Succeeded {
		t.Fatalf("job: %+v\n%s", j, e.workerLogs())
	}
	if got, _ := os.ReadFile(filepath.Join(e.dataDir, "clusters", "c1", "note.out")); string(got) != value {
		t.Fatalf("the run got note=%q", got)
	}
	rec, _ := json.Marshal(j)
	if strings.Contains(string(rec), value) || !strings.Contains(string(rec), `note=******`) || !strings.Contains(string(rec), `other`) {
		t.Errorf("the job's record: %s", rec)
	}
	if strings.Contains(e.workerLogs(), value) {
		t.Errorf("the worker logged the value:\n%s", e.workerLogs())
	}
	db, _ := e.rawDB()
	defer db.Close()
	var opts string
	if err := db.QueryRow(`SELECT options FROM jobs WHERE id = '` + acc.JobID + `'`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(opts, value) {
		t.Errorf("jobs.options: %s", opts)
	}
}
