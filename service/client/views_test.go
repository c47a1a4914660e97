package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The server's view of a registered cluster: its answers, with the hints'
// file the one named here.
func TestView(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/clusters/demo/nodes":
			_, _ = w.Write([]byte(`[{"name":"n1"}]`))
		case "/api/v1/clusters/demo/describe":
			_, _ = w.Write([]byte(`{"file":"/srv/kubexm/demo/cluster.yaml"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New(Options{Server: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	v := View{Client: c, Cluster: "demo", File: "site/cluster.yaml"}
	rows, err := v.Nodes(context.Background())
	if err != nil || len(rows) != 1 || rows[0].Name != "n1" {
		t.Errorf("Nodes = %+v, %v", rows, err)
	}
	d, err := v.Describe(context.Background())
	if err != nil || d.File != "site/cluster.yaml" {
		t.Errorf("Describe = %+v, %v", d, err)
	}
}

// The clusters registered on the server, and what to say when there are
// none: the server, without the token.
func TestClusterList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/clusters" || r.URL.Query().Get("state") != "true" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"clusters":[{"state":{"name":"demo"}}]}`))
	}))
	defer srv.Close()
	c, err := New(Options{Server: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	l := ClusterList{Client: c}
	states, err := l.Clusters(context.Background())
	if err != nil || len(states) != 1 || states[0].Name != "demo" {
		t.Errorf("Clusters = %+v, %v", states, err)
	}
	if none := l.None(); !strings.HasPrefix(none, "no clusters registered on "+srv.URL+" ") {
		t.Errorf("None = %q", none)
	}
}
