// Package server opens what kubexm server and kubexm worker share (the
// data directory, the secret key, the job database, the confinement of
// jobs), and serves the API with in-process workers. The CLI only maps
// its flags onto Config and ServeConfig; another binary can run the same
// service.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
	"github.com/mensylisir/kubexm/service/worker"
)

// Config is what the server and the workers open: the flags they share.
type Config struct {
	// DB is a postgres:// URL or a SQLite file (default DataDir/kubexm.db).
	DB      string
	DataDir string
	// SecretKeyFile holds the key that encrypts cluster files (default
	// DataDir/secret.key); CreateKey makes it when missing.
	SecretKeyFile string
	CreateKey     bool
	// PlaybooksDir holds extra playbooks jobs may name; BuiltinFS the
	// built-in ones.
	PlaybooksDir string
	BuiltinFS    fs.FS
	Heartbeat    time.Duration
	TTL          time.Duration
	Poll         time.Duration
	// AllowNets are networks a cluster's hosts may be in although refused
	// by default.
	AllowNets []string
	// JobMemory is a size (4GiB; "" or 0 for no limit), JobCPU a duration.
	JobMemory string
	JobCPU    time.Duration
}

// Service is the opened service: its store must be closed.
type Service struct {
	Store    jobstore.Store
	Box      *secretbox.Box
	Playbook func(string) (string, error)
	DataDir  string
	Secrets  *confine.Secrets
	Guard    *confine.Guard
	// JobMemory is Config.JobMemory in bytes.
	JobMemory int64
	cfg       Config
}

// Open opens the data directory, the key, the confinement and the store.
func Open(ctx context.Context, cfg Config) (*Service, error) {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	box, err := openBox(cfg, dataDir)
	if err != nil {
		return nil, err
	}
	var mem int64
	if cfg.JobMemory != "" {
		if mem, err = ParseBytes(cfg.JobMemory); err != nil {
			return nil, fmt.Errorf("--job-memory: %w", err)
		}
	}
	if cfg.JobCPU < 0 {
		return nil, fmt.Errorf("--job-cpu %s: give a positive duration, or 0 for none", cfg.JobCPU)
	}
	support, err := lifecycle.SupportFromRolesPath(nil)
	if err != nil {
		return nil, err
	}
	secrets := confine.NewSecrets(dataDir, box)
	guard, err := confine.New(confine.Config{Allow: cfg.AllowNets, Support: support, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	db := cfg.DB
	if db == "" {
		db = filepath.Join(dataDir, "kubexm.db")
	}
	store, err := jobstore.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	return &Service{Store: store, Box: box, Playbook: PlaybookResolver(cfg.PlaybooksDir, cfg.BuiltinFS), DataDir: dataDir,
		Secrets: secrets, Guard: guard, JobMemory: mem, cfg: cfg}, nil
}

func openBox(cfg Config, dataDir string) (*secretbox.Box, error) {
	keyFile := cfg.SecretKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(dataDir, "secret.key")
	}
	key, err := secretbox.LoadKey(keyFile, cfg.CreateKey)
	if err != nil {
		return nil, err
	}
	return secretbox.New(key)
}

// PlaybookResolver turns a job's playbook name into what `kubexm play`
// takes: a playbook of dir, else a built-in one of builtin. Jobs name
// playbooks, never paths: an API client does not choose files on the
// workers.
func PlaybookResolver(dir string, builtin fs.FS) func(string) (string, error) {
	return func(name string) (string, error) {
		// Checked here too, not only by the API: a job row may come from
		// elsewhere, and a name with a separator would leave dir.
		if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
			return "", fmt.Errorf("playbook %q: give the name of a playbook (kubexm playbook list), not a path", name)
		}
		if dir != "" {
			for _, p := range []string{filepath.Join(dir, name, "playbook.yaml"), filepath.Join(dir, name+".yaml")} {
				if _, err := os.Stat(p); err == nil {
					abs, err := filepath.Abs(p)
					if err != nil {
						return "", err
					}
					if strings.HasSuffix(abs, string(filepath.Separator)+"playbook.yaml") {
						abs = filepath.Dir(abs)
					}
					return abs, nil
				}
			}
		}
		if builtin != nil {
			for _, p := range []string{"playbooks/" + name + "/playbook.yaml", "playbooks/" + name + ".yaml"} {
				if _, err := fs.Stat(builtin, p); err == nil {
					return name, nil
				}
			}
		}
		return "", fmt.Errorf("no playbook %q: name a built-in one (kubexm playbook list) or one of the server's --playbooks directory", name)
	}
}

// StartWorkers starts n workers on wg, each running jobs until ctx ends;
// name(i) is the i-th one's name in job rows, globalArgs the root flags
// each job's `kubexm play` child gets as set for this process (childArgs
// adds the confinement of its dials).
func (s *Service) StartWorkers(ctx context.Context, wg *sync.WaitGroup, n int, name func(int) string, globalArgs []string, m *worker.Metrics, log *slog.Logger) error {
	globalArgs = s.childArgs(globalArgs)
	for i := range n {
		w, err := worker.New(worker.Config{Store: s.Store, Box: s.Box, DataDir: s.DataDir, Playbook: s.Playbook,
			Name: name(i), Poll: s.cfg.Poll, Heartbeat: s.cfg.Heartbeat, TTL: s.cfg.TTL, Metrics: m, Log: log,
			GlobalArgs: globalArgs, Guard: s.Guard, MemoryLimit: s.JobMemory, CPULimit: s.cfg.JobCPU})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Run(ctx)
		}()
	}
	return nil
}

// childArgs are the root flags given, and the confinement of a job
// child's dials to the networks --allow-host-networks lets in. The child
// resolves each host once and connects to the address it checked: the
// worker's check before the run resolved the names too, and a DNS answer
// may change in between.
func (s *Service) childArgs(given []string) []string {
	return append(slices.Clone(given), "--confine-dial="+strings.Join(s.cfg.AllowNets, ","))
}

// DefaultListen is where the server listens unless told.
const DefaultListen = ":8443"

// ServeConfig is how the API is served.
type ServeConfig struct {
	// Listen is the address; ListenSet says it was given (plain HTTP is
	// on every interface only then).
	Listen       string
	ListenSet    bool
	MaxConns     int
	Workers      int
	TLSCert      string
	TLSKey       string
	TLSHosts     []string
	InsecureHTTP bool
	GlobalArgs   []string
}

// Check refuses a configuration that cannot be served, before anything
// is opened.
func (c ServeConfig) Check() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	return nil
}

// ListenAddr is where the server listens: Listen, except that plain HTTP
// (which carries tokens and cluster files in clear) is on every interface
// only when Listen was given.
func (c ServeConfig) ListenAddr() string {
	if c.InsecureHTTP && !c.ListenSet {
		return "127.0.0.1" + DefaultListen
	}
	return c.Listen
}

// Serve serves the API with c.Workers in-process workers until ctx ends;
// running jobs are then handed back as interrupted.
func (s *Service) Serve(ctx context.Context, c ServeConfig, log *slog.Logger) error {
	if err := c.Check(); err != nil {
		return err
	}
	if err := s.BootstrapToken(ctx, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	support, err := lifecycle.SupportFromRolesPath(nil)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{Store: s.Store, Box: s.Box, Support: support, Playbook: s.Playbook, Registry: reg, Log: log,
		DataDir: s.DataDir, Views: clusterview.Views{Support: support}, Guard: s.Guard})
	if err != nil {
		return err
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("--max-connections %d: give at least 1", c.MaxConns)
	}
	ln, scheme, err := s.listener(c, log)
	if err != nil {
		return err
	}
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var wg sync.WaitGroup
	host, _ := os.Hostname()
	name := func(i int) string { return fmt.Sprintf("%s:%d/%d", host, os.Getpid(), i+1) }
	if err := s.StartWorkers(wctx, &wg, c.Workers, name, c.GlobalArgs, worker.NewMetrics(reg), log); err != nil {
		ln.Close()
		return err
	}
	log.Info("kubexm server listening", "url", scheme+"://"+ln.Addr().String(), "db", s.Store.Dialect(), "data_dir", s.DataDir, "workers", c.Workers)
	err = serveUntil(ctx, srv.HTTPServer(), ln, log)
	stopWorkers()
	wg.Wait()
	return err
}

// serveUntil serves hs on ln until ctx ends.
func serveUntil(ctx context.Context, hs *http.Server, ln net.Listener, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("stopping: running jobs are handed back as interrupted")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// listener listens where c says, with TLS unless InsecureHTTP: the given
// certificate, else a self-signed one kept in the data directory.
func (s *Service) listener(c ServeConfig, log *slog.Logger) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", c.ListenAddr())
	if err != nil {
		return nil, "", err
	}
	ln = api.LimitListener(ln, c.MaxConns)
	if c.InsecureHTTP {
		return ln, "http", nil
	}
	var cert tls.Certificate
	if c.TLSCert != "" {
		cert, err = tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	} else {
		var fp string
		cert, fp, err = api.SelfSigned(filepath.Join(s.DataDir, "tls"), c.TLSHosts)
		if err == nil {
			log.Info("self-signed TLS certificate: give clients --ca "+filepath.Join(s.DataDir, "tls", "cert.pem"), "sha256", fp)
		}
	}
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https", nil
}

// BootstrapToken makes an operator token when there is none, written to a
// file only the server's user reads: a fresh server can be used at once,
// and the token never reaches the log.
func (s *Service) BootstrapToken(ctx context.Context, log *slog.Logger) error {
	toks, err := s.Store.Tokens(ctx)
	if err != nil || len(toks) > 0 {
		return err
	}
	tok, err := api.NewToken()
	if err != nil {
		return err
	}
	p := filepath.Join(s.DataDir, "admin.token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	if err := s.Store.AddToken(ctx, "admin", api.HashToken(tok), api.RoleOperator, time.Time{}); err != nil {
		return err
	}
	log.Info("no API token existed: made the operator token \"admin\"; it is in "+p, "file", p)
	return nil
}

// ParseBytes reads a size: a number of bytes, or with KiB, MiB, GiB, TiB
// (KB, MB, GB, TB and K, M, G, T as the same).
func ParseBytes(s string) (int64, error) {
	v, mult := strings.TrimSpace(s), int64(1)
	for i, u := range []string{"K", "M", "G", "T"} {
		if n, ok := cutAny(v, u+"iB", u+"B", u); ok {
			v, mult = strings.TrimSpace(n), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q: want a size such as 4GiB or 512MiB", s)
	}
	return n * mult, nil
}

func cutAny(s string, suffixes ...string) (string, bool) {
	for _, suf := range suffixes {
		if v, ok := strings.CutSuffix(s, suf); ok {
			return v, true
		}
	}
	return s, false
}
