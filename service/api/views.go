package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Views compute what the read-only verbs (get clusters, get nodes,
// describe cluster) show, from a cluster's work directory on the server
// and its registered cluster.yaml, as those verbs do on a machine that
// ran the cluster's playbooks. clusterview.Views is the one the verbs
// print from (an interface here so that the API does not import it).
type Views interface {
	// State is what get clusters shows of one work directory (it may ask
	// the cluster's API server, bounded).
	State(ctx context.Context, workDir string) (any, error)
	// Nodes is get nodes: the hosts of config beside the API server's
	// Node objects (asked with the work directory's admin kubeconfig).
	Nodes(ctx context.Context, config []byte, workDir string) (any, error)
	// Describe is describe cluster.
	Describe(ctx context.Context, config []byte, workDir string) (any, error)
}

// listClusters lists the clusters; with ?state=true each with what get
// clusters shows of its work directory.
func (s *Server) listClusters(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	cs, err := s.c.Store.Clusters(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if r.URL.Query().Get("state") != "true" {
		writeJSON(w, http.StatusOK, map[string]any{"clusters": nonNil(cs)})
		return
	}
	if s.c.Views == nil {
		writeError(w, http.StatusNotImplemented, "this server computes no work directory state")
		return
	}
	type withState struct {
		jobstore.Cluster
		State any `json:"state"`
	}
	// All at once: a state may wait on its cluster's API server.
	out := make([]withState, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			out[i].Cluster = c
			out[i].State, errs[i] = s.c.Views.State(r.Context(), datadir.WorkDir(s.c.DataDir, c.Name))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s.internal(w, r, fmt.Errorf("cluster %s: %w", cs[i].Name, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"clusters": out})
}

// view answers with one of the Views of a cluster's newest config. The
// answer is masked with the config's secrets, as the worker masks a job's
// events: a view that quoted one (an error naming a password) shows
// ******.
func (s *Server) view(w http.ResponseWriter, r *http.Request, what string, fn func(context.Context, []byte, string) (any, error)) {
	if s.c.Views == nil {
		writeError(w, http.StatusNotImplemented, "this server computes no "+what)
		return
	}
	name := r.PathValue("name")
	cv, err := s.c.Store.ClusterConfig(r.Context(), name, 0)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	plain, err := s.c.Box.Open(cv.Sealed, datadir.ConfigAAD(name))
	if err != nil {
		s.internal(w, r, fmt.Errorf("cluster %s version %d: %w", name, cv.Version, err))
		return
	}
	// The view's code reads the file as kubexm does, which would resolve
	// references to the server's files and environment: a config that
	// holds one is refused, and server secrets are left out.
	plain, err = s.c.Guard.ForView(r.Context(), plain)
	if err != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("cluster %s version %d: %v: register it again", name, cv.Version, err))
		return
	}
	mask, err := s.masker(plain)
	if err != nil {
		s.internal(w, r, fmt.Errorf("cluster %s version %d: %w", name, cv.Version, err))
		return
	}
	v, err := fn(r.Context(), plain, datadir.WorkDir(s.c.DataDir, name))
	if err != nil {
		// What failed is the cluster's API server or work directory, not
		// this request.
		writeError(w, http.StatusBadGateway, fmt.Sprintf("cluster %s: %s", name, mask(err.Error())))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(mask(buf.String())))
}

// masker replaces every secret of a cluster.yaml, as it is and as it looks
// inside a JSON string, with ******.
func (s *Server) masker(config []byte) (func(string) string, error) {
	c, _, err := validate.ParseConfined(config, s.c.Support, nil)
	if err != nil {
		return nil, err
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		return nil, err
	}
	var secrets []string
	for _, sec := range inv.Secrets() {
		secrets = append(secrets, sec)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(sec); err == nil {
			if q := strings.TrimSuffix(strings.TrimSpace(b.String()), `"`); len(q) > 1 && q[1:] != sec {
				secrets = append(secrets, q[1:])
			}
		}
	}
	return engine.Redactor(secrets), nil
}

func (s *Server) clusterNodes(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	s.view(w, r, "nodes", func(ctx context.Context, config []byte, dir string) (any, error) {
		return s.c.Views.Nodes(ctx, config, dir)
	})
}

func (s *Server) describeCluster(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	s.view(w, r, "description", func(ctx context.Context, config []byte, dir string) (any, error) {
		return s.c.Views.Describe(ctx, config, dir)
	})
}

// certsReport serves the report the certs-check playbook writes into the
// cluster's work directory (certs_report_path's default), with the time it
// was written in Last-Modified: a client that ran a certs-check job knows
// the report is its job's.
func (s *Server) certsReport(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	name := r.PathValue("name")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	p := filepath.Join(datadir.WorkDir(s.c.DataDir, name), "certs-check.json")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("cluster %s has no certificate report yet: queue the certs-check playbook (kubexm certs check --server)", name))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !json.Valid(data) {
		s.internal(w, r, fmt.Errorf("%s: not JSON", p))
		return
	}
	if info, err := os.Stat(p); err == nil {
		w.Header().Set("Last-Modified", info.ModTime().UTC().Format(http.TimeFormat))
		w.Header().Set("X-Kubexm-Report-Time", info.ModTime().UTC().Format(time.RFC3339Nano))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
