// Package api is the HTTP API of `kubexm server`: clusters, jobs and their
// events over the job store, behind bearer tokens.
package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
)

// Roles a token may have.
const (
	RoleReadOnly = "read-only"
	RoleOperator = "operator"
)

// Config is what the API needs.
type Config struct {
	Store jobstore.Store
	Box   *secretbox.Box
	// Support is the matrix a registered cluster.yaml is checked against.
	Support *matrix.Support
	// Playbook checks that a job's playbook exists.
	Playbook func(name string) (string, error)
	// Registry holds the metrics /metrics serves; the API adds the jobs
	// by state to it.
	Registry *prometheus.Registry
	Log      *slog.Logger
	// DataDir is the data directory the workers share: uploaded offline
	// bundles go to the cluster's work directory in it.
	DataDir string
	// MaxBundle bounds an uploaded offline bundle (default 32 GiB).
	MaxBundle int64
	// Views answer get clusters (with ?state=true), get nodes and
	// describe cluster; nil answers those 501.
	Views Views
	// EventPoll is how often an event stream looks for new events.
	EventPoll time.Duration
	// Guard reads a registered cluster.yaml without the server's files
	// and environment, and refuses hosts that are the server's machine.
	Guard *confine.Guard
	// FreeSpace is the space left on the file system of a directory
	// (bundle.FreeBytes; a field for tests).
	FreeSpace func(dir string) (uint64, error)
}

// Server serves the API.
type Server struct {
	c   Config
	mux *http.ServeMux
	// tokens caches the tokens found, by hash, for tokenTTL: a client
	// polling a job costs one query, not two. A deleted token stops
	// working within tokenTTL.
	tokens         sync.Map // string -> cachedToken
	metricsHandler http.Handler
	// reserved is the space the uploads in progress take (or will: a
	// Content-Length), which the free space of the file system does not
	// show yet.
	uploadMu sync.Mutex
	reserved uint64
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	s.metricsHandler.ServeHTTP(w, r)
}

// Limits of a request body: what a route reads, and no more. A route that
// reads none takes a small one.
const (
	maxJobRequest = 1 << 20
	maxNoBody     = 4 << 10
)

// bodyLimit is how large a body rt takes.
func (s *Server) bodyLimit(rt route) int64 {
	switch {
	case rt.method == http.MethodPost && rt.path == "/api/v1/clusters/{name}/bundles":
		return s.c.MaxBundle
	case rt.method == http.MethodPost && rt.path == "/api/v1/clusters":
		return maxConfig
	case rt.method == http.MethodPost && rt.path == "/api/v1/jobs":
		return maxJobRequest
	}
	return maxNoBody
}

// Timeouts of HTTPServer. A request's headers and body are read within
// readTimeout, its answer written within writeTimeout; the routes that
// stream (an upload, the event stream, a download) lift them once their
// token is checked.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = 2 * time.Minute
	idleTimeout       = 2 * time.Minute
)

// HTTPServer is the http.Server to serve s with: bounded in time per
// request, so that connections that send slowly or never end are dropped.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(s.c.Log.Handler(), slog.LevelWarn),
		// LimitListener's view of each connection: which completed a
		// request, which wait idle.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc := limited(c); lc != nil {
				return context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if lc := limited(c); lc != nil {
				lc.state(st)
			}
		},
	}
}

// refuse answers a request refused before its body was read, and ends
// its connection at once: the server would otherwise read what is left of
// the body (up to 256 KiB) before the next request, as slowly as the
// client sends it.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	writeError(w, code, msg)
}

// streams says which limits rt lifts: reading (an upload) and writing
// (an event stream, a download).
func streams(rt route) (read, write bool) {
	switch rt.path {
	case "/api/v1/clusters/{name}/bundles":
		return rt.method == http.MethodPost, false
	case "/api/v1/jobs/{id}/events/stream", "/api/v1/clusters/{name}/backups/{backup}":
		return false, true
	}
	return false, false
}

type cachedToken struct {
	tok     jobstore.Token
	expires time.Time
}

const tokenTTL = 5 * time.Second

func (s *Server) token(ctx context.Context, hash string) (jobstore.Token, error) {
	if v, ok := s.tokens.Load(hash); ok {
		if c := v.(cachedToken); time.Now().Before(c.expires) {
			return c.tok, nil
		}
		s.tokens.Delete(hash)
	}
	t, err := s.c.Store.TokenByHash(ctx, hash)
	if err == nil {
		s.tokens.Store(hash, cachedToken{tok: t, expires: time.Now().Add(tokenTTL)})
	}
	return t, err
}

// route is one operation: the mux serves it and the OpenAPI document
// describes it.
type route struct {
	method, path string
	role         string // "" for no token
	handler      func(http.ResponseWriter, *http.Request, jobstore.Token)
	op           map[string]any // the OpenAPI operation
}

// New builds the server and its routes.
func New(c Config) (*Server, error) {
	if c.Store == nil || c.Box == nil || c.Playbook == nil || c.Registry == nil || c.DataDir == "" || c.Guard == nil {
		return nil, errors.New("api: store, secret key, playbook resolver, metrics registry, data dir and guard are required")
	}
	if c.MaxBundle <= 0 {
		c.MaxBundle = 32 << 30
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.EventPoll <= 0 {
		c.EventPoll = 500 * time.Millisecond
	}
	if c.FreeSpace == nil {
		c.FreeSpace = bundle.FreeBytes
	}
	s := &Server{c: c, mux: http.NewServeMux(), metricsHandler: promhttp.HandlerFor(c.Registry, promhttp.HandlerOpts{})}
	if err := c.Registry.Register(&jobsCollector{store: c.Store, desc: prometheus.NewDesc("kubexm_jobs", "Jobs in the store, per state.", []string{"state"}, nil)}); err != nil {
		return nil, err
	}
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.openAPI())
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := c.Store.JobCounts(r.Context()); err != nil {
			// Unauthenticated: the error (a DSN, a path, a host) goes to
			// the log only.
			c.Log.Error("health check: the database does not answer", "err", err)
			writeError(w, http.StatusServiceUnavailable, "the database does not answer (see the server's log)")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/openapi.json" {
		// Open routes: a client that asks them completed its headers.
		proveConn(r.Context())
	}
	s.mux.ServeHTTP(w, r)
}

// HashToken is what the store keeps of a token.
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// NewToken makes a random token.
func NewToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "kxm_" + hex.EncodeToString(b), nil
}

// ValidRole says whether role is one a token may have.
func ValidRole(role string) bool { return role == RoleReadOnly || role == RoleOperator }

func (s *Server) wrap(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var tok jobstore.Token
		if rt.role != "" {
			h := r.Header.Get("Authorization")
			v, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || v == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kubexm"`)
				refuse(w, http.StatusUnauthorized, "no bearer token: send Authorization: Bearer TOKEN (kubexm server token create)")
				return
			}
			t, err := s.token(r.Context(), HashToken(v))
			if errors.Is(err, jobstore.ErrNotFound) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kubexm", error="invalid_token"`)
				refuse(w, http.StatusUnauthorized, "unknown bearer token")
				return
			}
			if err != nil {
				s.internal(w, r, err)
				return
			}
			if t.Expired(time.Now()) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kubexm", error="invalid_token", error_description="expired"`)
				refuse(w, http.StatusUnauthorized, fmt.Sprintf("token %s expired at %s: make a new one (kubexm server token create --ttl)", t.Name, t.ExpiresAt.Format(time.RFC3339)))
				return
			}
			if rt.role == RoleOperator && t.Role != RoleOperator {
				refuse(w, http.StatusForbidden, fmt.Sprintf("token %s is %s; %s %s needs an operator token", t.Name, t.Role, rt.method, rt.path))
				return
			}
			tok = t
			proveConn(r.Context())
		}
		// After the token: nothing of the body is read for a client
		// without one.
		limit := s.bodyLimit(rt)
		if r.ContentLength > limit {
			refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s %s takes a body of at most %d bytes", rt.method, rt.path, limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if read, write := streams(rt); read || write {
			rc := http.NewResponseController(w)
			if read {
				_ = rc.SetReadDeadline(time.Time{})
			}
			if write {
				_ = rc.SetWriteDeadline(time.Time{})
			}
		}
		rt.handler(w, r, tok)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.c.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error (see the server's log)")
}

// storeError answers for an error of the store.
// refusal is a request refused by a check the store ran (CreateJob's,
// Resume's): the status and message to answer with.
type refusal struct {
	code int
	msg  string
}

func (e *refusal) Error() string { return e.msg }

func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var ce *jobstore.ConflictError
	var ref *refusal
	var inUse *jobstore.BundleInUseError
	switch {
	case errors.As(err, &ref):
		writeError(w, ref.code, ref.msg)
	case errors.As(err, &inUse):
		writeJSON(w, http.StatusConflict, map[string]string{"error": inUse.Error(), "job_id": inUse.JobID, "status": string(inUse.Status)})
	case errors.As(err, &ce):
		writeJSON(w, http.StatusConflict, map[string]string{"error": ce.Error(), "job_id": ce.JobID, "status": string(ce.Status)})
	case errors.Is(err, jobstore.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, jobstore.ErrState):
		writeError(w, http.StatusConflict, err.Error())
	default:
		s.internal(w, r, err)
	}
}

// audit records a mutation: a row and a log line, naming no secret (extra
// vars by name only).
func (s *Server) audit(r *http.Request, tok jobstore.Token, action, target, detail string) {
	e := jobstore.AuditEntry{Actor: tok.Name, Action: action, Target: target, Detail: detail}
	s.c.Log.Info("audit", "actor", e.Actor, "action", action, "target", target, "detail", detail, "remote", r.RemoteAddr)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := s.c.Store.Audit(ctx, e); err != nil {
		s.c.Log.Error("audit log", "err", err)
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

const maxConfig = 1 << 20

// registerCluster stores a new version of a cluster.yaml, checked as
// `kubexm config validate` checks it.
func (s *Server) registerCluster(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfig))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "cluster.yaml: "+err.Error())
		return
	}
	c, err := s.c.Guard.Register(r.Context(), data)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := c.Metadata.Name
	if !nameRE.MatchString(name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("cluster.yaml: metadata.name %q: the service needs a lower-case name of letters, digits, '.', '_' and '-' (it names a work directory)", name))
		return
	}
	masked, err := schema.Marshal(c.Masked())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	sealed, err := s.c.Box.Seal(data, datadir.ConfigAAD(name))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	v, err := s.c.Store.PutCluster(r.Context(), name, sealed, string(masked), tok.Name)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, tok, "register cluster", name, fmt.Sprintf("version %d", v.Version))
	pb := r.URL.Query().Get("run")
	if pb == "" {
		writeJSON(w, http.StatusCreated, v)
		return
	}
	// POST /api/v1/clusters?run=create-cluster: register and queue in one
	// request, as the seeds describe.
	s.queue(w, r, tok, jobRequest{Cluster: name, Playbook: pb, ConfigVersion: v.Version})
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	cv, err := s.c.Store.ClusterConfig(r.Context(), r.PathValue("name"), 0)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	c, err := s.c.Store.Cluster(r.Context(), cv.Cluster)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"cluster": c, "config": cv.Masked})
}

func (s *Server) clusterVersions(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	vs, err := s.c.Store.ClusterVersions(r.Context(), r.PathValue("name"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": nonNil(vs)})
}

func (s *Server) clusterVersion(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	n, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, "version must be a number from 1")
		return
	}
	cv, err := s.c.Store.ClusterConfig(r.Context(), r.PathValue("name"), n)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	cv.Sealed = nil
	writeJSON(w, http.StatusOK, cv)
}

type jobRequest struct {
	Cluster       string           `json:"cluster"`
	Playbook      string           `json:"playbook"`
	ConfigVersion int              `json:"config_version,omitempty"`
	Options       jobstore.Options `json:"options"`
}

func (s *Server) createJob(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	var req jobRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("job request: larger than %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, "job request: "+err.Error()+` (want {"cluster": NAME, "playbook": NAME, "options": {...}})`)
		return
	}
	s.queue(w, r, tok, req)
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request, tok jobstore.Token, req jobRequest) {
	if req.Cluster == "" || req.Playbook == "" {
		writeError(w, http.StatusBadRequest, "a job needs a cluster and a playbook")
		return
	}
	if !nameRE.MatchString(req.Playbook) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("playbook %q: give the name of a playbook (kubexm playbook list), not a path", req.Playbook))
		return
	}
	if msg := checkCommand(req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if req.Options.Command == nil {
		if _, err := s.c.Playbook(req.Playbook); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	for _, e := range req.Options.ExtraVars {
		if strings.HasPrefix(strings.TrimSpace(e), "@") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("extra var %q: @file reads a file on the worker; pass the values themselves", e))
			return
		}
	}
	extra, err := engine.ParseExtraVars(req.Options.ExtraVars)
	if err != nil {
		writeError(w, http.StatusBadRequest, "extra vars: "+err.Error())
		return
	}
	if err := s.checkRoleVars(extra); err != nil {
		writeError(w, http.StatusBadRequest, "extra vars: "+err.Error())
		return
	}
	if b := req.Options.Backup; b != "" {
		if req.Playbook != "restore" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("options.backup is for the restore playbook, not %s", req.Playbook))
			return
		}
		p := datadir.BackupPath(s.c.DataDir, req.Cluster, b)
		if p == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("backup %q: give the name of a backup of the cluster (GET /api/v1/clusters/%s/backups), not a path", b, req.Cluster))
			return
		}
		if _, err := os.Stat(p); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("backup %s: cluster %s has no such backup on the server (GET /api/v1/clusters/%s/backups lists them; a backup job makes one)", b, req.Cluster, req.Cluster))
			return
		}
	}
	var check func() error
	if b := req.Options.OfflineBundle; b != "" {
		p := datadir.BundlePath(s.c.DataDir, req.Cluster, b)
		if p == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("offline_bundle %q: give the sha256 an upload answered with (POST /api/v1/clusters/%s/bundles)", b, req.Cluster))
			return
		}
		// The store runs it holding the cluster, as a bundle's delete
		// does (in this server or another on the database): the bundle
		// is not removed between this look and the job's queueing.
		check = func() error {
			if _, err := os.Stat(p); err != nil {
				return &refusal{code: http.StatusBadRequest, msg: fmt.Sprintf("offline_bundle %s: cluster %s has no such bundle; upload it first (POST /api/v1/clusters/%s/bundles)", b, req.Cluster, req.Cluster)}
			}
			return nil
		}
	}
	cv, err := s.c.Store.ClusterConfig(r.Context(), req.Cluster, req.ConfigVersion)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	// Again for the job: the version may predate the rules, and a
	// command's nodes must be hosts of the cluster.
	plain, err := s.c.Box.Open(cv.Sealed, datadir.ConfigAAD(req.Cluster))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	var nodes, groups []string
	if c := req.Options.Command; c != nil {
		nodes, groups = c.Nodes, c.Groups
	}
	if _, err := s.c.Guard.CheckJob(r.Context(), plain, nodes, groups); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("cluster %s version %d: %v", req.Cluster, cv.Version, err))
		return
	}
	id, err := newJobID()
	if err != nil {
		s.internal(w, r, err)
		return
	}
	job := jobstore.Job{ID: id, Cluster: req.Cluster, ConfigVersion: cv.Version, Playbook: req.Playbook, Options: req.Options, CreatedBy: tok.Name}
	if len(req.Options.ExtraVars) > 0 {
		// Sealed for the worker; the job's record (the database, the
		// API, kubexm get job) keeps names only.
		plainVars, err := json.Marshal(req.Options.ExtraVars)
		if err != nil {
			s.internal(w, r, err)
			return
		}
		if job.SealedVars, err = s.c.Box.Seal(plainVars, datadir.VarsAAD(id)); err != nil {
			s.internal(w, r, err)
			return
		}
		job.Options.ExtraVars = maskExtraVars(req.Options.ExtraVars)
	}
	j, err := s.c.Store.CreateJob(r.Context(), job, check)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, tok, "create job", j.ID, fmt.Sprintf("playbook %s on cluster %s (config version %d)%s", j.Playbook, j.Cluster, j.ConfigVersion, describeOptions(j.Options)))
	w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{"job_id": j.ID, "job": j})
}

// maskExtraVars is how a job's record shows its extra vars: each -e value
// with its names and every value ******.
func maskExtraVars(list []string) []string {
	out := make([]string, len(list))
	for i, e := range list {
		vars, err := engine.ParseExtraVars([]string{e})
		if err != nil {
			out[i] = schema.Mask
			continue
		}
		if name, _, ok := strings.Cut(e, "="); ok && len(vars) == 1 && vars[strings.TrimSpace(name)] != nil {
			out[i] = strings.TrimSpace(name) + "=" + schema.Mask
			continue
		}
		m := make(map[string]string, len(vars))
		for k := range vars {
			m[k] = schema.Mask
		}
		data, _ := json.Marshal(m)
		out[i] = string(data)
	}
	return out
}

// describeOptions is the audit's view of a job's options: extra vars by
// name only, as their values may be secrets.
func describeOptions(o jobstore.Options) string {
	var parts []string
	if len(o.Tags) > 0 {
		parts = append(parts, "tags "+strings.Join(o.Tags, ","))
	}
	if len(o.SkipTags) > 0 {
		parts = append(parts, "skip-tags "+strings.Join(o.SkipTags, ","))
	}
	if o.Limit != "" {
		parts = append(parts, "limit "+o.Limit)
	}
	if o.Check {
		parts = append(parts, "check")
	}
	if o.OfflineBundle != "" {
		parts = append(parts, "offline bundle "+o.OfflineBundle)
	}
	if o.Backup != "" {
		parts = append(parts, "backup "+o.Backup)
	}
	if c := o.Command; c != nil {
		// The program, not its arguments or a script: they may quote
		// anything.
		what := fmt.Sprintf("a /bin/sh -c script of %d bytes", len(c.Argv[0]))
		if !c.Shell {
			what = fmt.Sprintf("command %s with %d arguments", c.Argv[0], len(c.Argv)-1)
			if strings.ContainsAny(c.Argv[0], " \t\n") {
				what = fmt.Sprintf("a command of %d arguments", len(c.Argv))
			}
		}
		on := what + " on " + strings.Join(append(append([]string{}, c.Nodes...), c.Groups...), ",")
		if c.Limit != "" {
			on += " limited to " + c.Limit
		}
		parts = append(parts, on)
	}
	if len(o.ExtraVars) > 0 {
		if vars, err := engine.ParseExtraVars(o.ExtraVars); err == nil {
			var names []string
			for k := range vars {
				names = append(names, k)
			}
			parts = append(parts, "extra vars "+strings.Join(names, ","))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

func newJobID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "job-" + hex.EncodeToString(b), nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	q := r.URL.Query()
	f := jobstore.JobFilter{Cluster: q.Get("cluster"), Status: jobstore.Status(q.Get("status")), Limit: 100}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "limit must be 1 to 1000")
			return
		}
		f.Limit = n
	}
	jobs, err := s.c.Store.Jobs(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": nonNil(jobs)})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	j, err := s.c.Store.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	j, err := s.c.Store.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, tok, "cancel job", j.ID, string(j.Status))
	writeJSON(w, http.StatusAccepted, j)
}

// checkCommand says what is wrong with the command of a command job, or
// with a command given to a playbook's job; "" when nothing is.
func checkCommand(req jobRequest) string {
	c, o := req.Options.Command, req.Options
	switch {
	case c == nil && req.Playbook == jobstore.CommandPlaybook:
		return fmt.Sprintf("playbook %s runs options.command: give it", jobstore.CommandPlaybook)
	case c == nil:
		return ""
	case req.Playbook != jobstore.CommandPlaybook:
		return fmt.Sprintf("options.command is for playbook %s, not %s", jobstore.CommandPlaybook, req.Playbook)
	case len(c.Argv) == 0:
		return "options.command.argv: the command and its arguments"
	case len(c.Nodes) == 0 && len(c.Groups) == 0:
		return "options.command: choose the hosts with nodes (names or patterns, or all) or groups"
	case c.Shell && len(c.Argv) != 1:
		return "options.command.shell runs one argument with /bin/sh -c"
	case c.Forks < 0:
		return "options.command.forks must not be negative"
	case len(o.Tags)+len(o.SkipTags)+len(o.ExtraVars) > 0 || o.Limit != "" || o.Check || o.Diff || o.OfflineBundle != "" || o.Backup != "":
		return "a command job takes options.command only (no tags, limit, check, diff, extra vars, bundle or backup)"
	}
	if c.Timeout != "" {
		if d, err := time.ParseDuration(c.Timeout); err != nil || d < 0 {
			return fmt.Sprintf("options.command.timeout %q: want a duration such as 30s", c.Timeout)
		}
	}
	for _, a := range append(append(append([]string{}, c.Nodes...), c.Groups...), c.BecomeUser, c.Limit) {
		if strings.HasPrefix(a, "-") {
			return fmt.Sprintf("options.command: %q is not a host, group or user name", a)
		}
	}
	return ""
}

func (s *Server) resumeJob(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	if j, err := s.c.Store.Job(r.Context(), r.PathValue("id")); err == nil && j.Options.Command != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %s runs a command, which is not run twice: queue it again if you mean it", j.ID))
		return
	}
	// A job that names a bundle deleted since it ran would only fail at
	// its worker: refused here, holding the cluster as createJob does.
	j, err := s.c.Store.Resume(r.Context(), r.PathValue("id"), func(j jobstore.Job) error {
		if b := j.Options.OfflineBundle; b != "" {
			if _, err := os.Stat(datadir.BundlePath(s.c.DataDir, j.Cluster, b)); err != nil {
				return &refusal{code: http.StatusConflict, msg: fmt.Sprintf("job %s installs from offline bundle %s, which cluster %s no longer has (GET /api/v1/clusters/%s/bundles): upload it again to resume the job", j.ID, b, j.Cluster, j.Cluster)}
			}
		}
		return nil
	})
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, tok, "resume job", j.ID, "run "+j.RunID)
	writeJSON(w, http.StatusAccepted, j)
}

func after(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	id := r.PathValue("id")
	if _, err := s.c.Store.Job(r.Context(), id); err != nil {
		s.storeError(w, r, err)
		return
	}
	a, err := after(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "after must be an event id")
		return
	}
	evs, err := s.c.Store.Events(r.Context(), id, a, 1000)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": nonNil(evs)})
}

// streamEvents sends a job's events as Server-Sent Events until the job has
// ended and every event was sent. The store is polled: the events come
// from workers in other processes.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	id := r.PathValue("id")
	if _, err := s.c.Store.Job(r.Context(), id); err != nil {
		s.storeError(w, r, err)
		return
	}
	last, err := after(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "after / Last-Event-ID must be an event id")
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		s.internal(w, r, errors.New("response cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	t := time.NewTicker(s.c.EventPoll)
	defer t.Stop()
	idle := 0
	for {
		// Read the job before its events: an end seen here comes with
		// every event written before it.
		j, err := s.c.Store.Job(r.Context(), id)
		if err != nil {
			return
		}
		evs, err := s.c.Store.Events(r.Context(), id, last, 500)
		if err != nil {
			return
		}
		for _, e := range evs {
			data, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Kind, data)
			last = e.ID
		}
		if len(evs) > 0 {
			idle = 0
			fl.Flush()
			if len(evs) == 500 {
				continue
			}
		}
		if !j.Status.Active() {
			data, _ := json.Marshal(j)
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", data)
			fl.Flush()
			return
		}
		if idle++; idle*int(s.c.EventPoll/time.Millisecond) >= 15000 {
			idle = 0
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	es, err := s.c.Store.AuditLog(r.Context(), 500)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"audit": nonNil(es)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// jobsCollector reads the jobs per state from the store at each scrape:
// right whichever process's workers changed them.
type jobsCollector struct {
	store jobstore.Store
	desc  *prometheus.Desc
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.JobCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, st := range jobstore.Statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// checkRoleVars checks a job's extra vars against the role variables'
// declarations before the job is queued (its run checks them again).
func (s *Server) checkRoleVars(vars map[string]any) error {
	m := s.c.Support
	if m == nil {
		var err error
		if m, err = matrix.BuiltinSupport(); err != nil {
			return err
		}
	}
	rv, err := m.RoleVars()
	if err != nil {
		return err
	}
	return rv.CheckJobVars(vars)
}
