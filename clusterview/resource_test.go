package clusterview

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfigFor writes a work directory's admin kubeconfig naming server.
func kubeconfigFor(t *testing.T, dir, server string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", server)
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// get clusters and describe cluster show the Cluster resource's status:
// its phase (with an unobserved generation and the pause marked), "-" for
// a cluster without the resource or a kubeconfig, "no answer" for an API
// server that does not answer; describe prints the conditions and the
// last run, or why there is nothing to show.
func TestClusterResource(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/kubexm.mensylisir.io/v1alpha1/clusters/ready":
			fmt.Fprint(w, `{"apiVersion":"kubexm.mensylisir.io/v1alpha1","kind":"Cluster","metadata":{"name":"ready","generation":3},
"status":{"observedGeneration":3,"phase":"Ready","readyNodes":"3/3","kubernetesVersion":"v1.37.2",
"conditions":[{"type":"Ready","status":"True","reason":"NodesReady","message":"3/3 nodes Ready"}],
"lastRun":{"id":"20261204-031500","playbook":"add-nodes","result":"Succeeded","finishedAt":"2026-12-04T03:16:00Z"},
"certificates":{"earliestExpiry":"2027-12-04T03:00:00Z","caExpiry":"2036-12-02T03:00:00Z"}}}`)
		case "/apis/kubexm.mensylisir.io/v1alpha1/clusters/moving":
			fmt.Fprint(w, `{"apiVersion":"kubexm.mensylisir.io/v1alpha1","kind":"Cluster","metadata":{"name":"moving","generation":5,"annotations":{"kubexm.mensylisir.io/paused":"true"}},"status":{"observedGeneration":4,"phase":"Progressing"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer api.Close()
	// An address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := "http://" + l.Addr().String()
	l.Close()

	dir := t.TempDir()
	kubeconfigFor(t, filepath.Join(dir, "ready"), api.URL)
	kubeconfigFor(t, filepath.Join(dir, "moving"), api.URL)
	kubeconfigFor(t, filepath.Join(dir, "older"), api.URL)
	kubeconfigFor(t, filepath.Join(dir, "gone"), silent)
	states, err := Clusters(dir)
	if err != nil {
		t.Fatal(err)
	}
	states = append(states, State{Name: "fresh", WorkDir: filepath.Join(dir, "fresh")})
	AskResources(context.Background(), states)
	want := map[string]string{"ready": "Ready", "moving": "Progressing,Paused (generation 5 not observed)", "older": "-", "gone": "no answer", "fresh": "-"}
	for _, s := range states {
		if s.Resource != want[s.Name] {
			t.Errorf("%s: resource %q, want %q", s.Name, s.Resource, want[s.Name])
		}
	}
	var b strings.Builder
	if err := WriteClusters(&b, states, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "CLUSTER RESOURCE") || !strings.Contains(b.String(), "Progressing,Paused") {
		t.Errorf("get clusters:\n%s", b.String())
	}
	b.Reset()
	if err := WriteClusters(&b, []State{{Name: "remote"}}, ""); err != nil || strings.Contains(b.String(), "CLUSTER RESOURCE") {
		t.Errorf("states nobody asked about have a resource column: %v\n%s", err, b.String())
	}

	d := &Description{Name: "ready"}
	if d.Resource, err = askResource(context.Background(), filepath.Join(dir, "ready", "kubeconfig"), "ready"); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := d.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Cluster resource: Ready, generation 3 (observed 3), 3/3 nodes Ready, Kubernetes v1.37.2", "NodesReady", "add-nodes", "20261204-031500", "API server until 2027-12-04T03:00:00Z"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("describe has no %q:\n%s", s, b.String())
		}
	}
	if _, err := askResource(context.Background(), filepath.Join(dir, "older", "kubeconfig"), "older"); err != errNoResource {
		t.Errorf("a cluster without the resource: %v, want %v", err, errNoResource)
	}
}
