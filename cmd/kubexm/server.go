package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
	"github.com/mensylisir/kubexm/service/worker"
)

// serviceFlags are shared by kubexm server and kubexm worker.
type serviceFlags struct {
	db            string
	dataDir       string
	secretKeyFile string
	playbooksDir  string
	heartbeat     time.Duration
	ttl           time.Duration
	poll          time.Duration
	allowNets     []string
	jobMemory     string
	jobCPU        time.Duration
}

func defaultDataDir() string {
	if d := os.Getenv("KUBEXM_HOME"); d != "" {
		return filepath.Join(d, "server")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kubexm", "server")
	}
	return "kubexm-server"
}

func addServiceFlags(cmd *cobra.Command, f *serviceFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "directory of the clusters' work directories (journals, PKI, kubeconfigs), the SQLite database and the secret key; every worker must reach the same one")
	fl.StringVar(&f.db, "db", "", "job database: a postgres://user@host/db URL, or a SQLite file (default DATA-DIR/kubexm.db)")
	fl.StringVar(&f.secretKeyFile, "secret-key-file", "", "file with the AES-256 key (base64) that encrypts the cluster.yaml files in the database (default DATA-DIR/secret.key; $"+secretbox.KeyEnv+" wins)")
	fl.StringVar(&f.playbooksDir, "playbooks", "", "directory of extra playbooks (NAME/playbook.yaml or NAME.yaml) jobs may name, found before the built-in ones")
	fl.DurationVar(&f.poll, "poll", time.Second, "how often an idle worker looks for a queued job")
	fl.DurationVar(&f.heartbeat, "heartbeat", 5*time.Second, "how often a worker records that it still runs its job")
	fl.DurationVar(&f.ttl, "heartbeat-ttl", 30*time.Second, "how long a job's worker may stay silent before the job is marked interrupted and resumed by another worker")
	fl.StringVar(&f.jobMemory, "job-memory", "4GiB", "address space of a job's run and of each process it starts (RLIMIT_AS; 0: unlimited); its Go runtime collects harder from a quarter of it")
	fl.DurationVar(&f.jobCPU, "job-cpu", 2*time.Hour, "CPU time of a job's run and of each process it starts (RLIMIT_CPU; 0: unlimited)")
	fl.StringSliceVar(&f.allowNets, "allow-host-networks", nil, "networks (CIDR,...) a cluster's hosts may be in although they are refused by default: loopback, link-local, this machine's own addresses, and connection: local hosts with an address in them; each lets jobs run commands on this machine")
}

// service is what the server and worker commands open.
type service struct {
	store    jobstore.Store
	box      *secretbox.Box
	playbook func(string) (string, error)
	dataDir  string
	secrets  *confine.Secrets
	guard    *confine.Guard
	// jobMemory is --job-memory in bytes.
	jobMemory int64
}

func (a *app) openService(ctx context.Context, f *serviceFlags, createKey bool) (*service, error) {
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	keyFile := f.secretKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(dataDir, "secret.key")
	}
	key, err := secretbox.LoadKey(keyFile, createKey)
	if err != nil {
		return nil, err
	}
	box, err := secretbox.New(key)
	if err != nil {
		return nil, err
	}
	db := f.db
	if db == "" {
		db = filepath.Join(dataDir, "kubexm.db")
	}
	var mem int64
	if f.jobMemory != "" {
		if mem, err = parseBytes(f.jobMemory); err != nil {
			return nil, fmt.Errorf("--job-memory: %w", err)
		}
	}
	if f.jobCPU < 0 {
		return nil, fmt.Errorf("--job-cpu %s: give a positive duration, or 0 for none", f.jobCPU)
	}
	support, err := supportFromRolesPath(nil)
	if err != nil {
		return nil, err
	}
	secrets := confine.NewSecrets(dataDir, box)
	guard, err := confine.New(confine.Config{Allow: f.allowNets, Support: support, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	store, err := jobstore.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	return &service{store: store, box: box, playbook: a.playbookResolver(f.playbooksDir), dataDir: dataDir, secrets: secrets, guard: guard, jobMemory: mem}, nil
}

// playbookResolver turns a job's playbook name into what `kubexm play`
// takes: a playbook of dir, else a built-in one. Jobs name playbooks, never
// paths: an API client does not choose files on the workers.
func (a *app) playbookResolver(dir string) func(string) (string, error) {
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
		if a.builtinFS != nil {
			for _, p := range []string{"playbooks/" + name + "/playbook.yaml", "playbooks/" + name + ".yaml"} {
				if _, err := fs.Stat(a.builtinFS, p); err == nil {
					return name, nil
				}
			}
		}
		return "", fmt.Errorf("no playbook %q: name a built-in one (kubexm playbook list) or one of the server's --playbooks directory", name)
	}
}

type serverFlags struct {
	serviceFlags
	listen       string
	workers      int
	tlsCert      string
	tlsKey       string
	insecureHTTP bool
	tlsHosts     []string
	maxConns     int
}

func newServerCmd(a *app) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the kubexm API: register clusters, queue playbook runs as jobs, run them (docs/server.md)",
		Long: `Serve the kubexm API (OpenAPI document at /openapi.json) with in-process
workers: kubexm server alone is a working system. Add kubexm worker processes
(same --db, --data-dir and secret key) to run more jobs at once.`,
		Example: `  kubexm server                                  # SQLite in ~/.kubexm/server, TLS self-signed on :8443
  kubexm server --db postgres://kubexm@db/kubexm --data-dir /shared/kubexm --tls-cert c.pem --tls-key k.pem
  kubexm server token create ci --role operator`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serve(cmd.Context(), cmd, &f)
		},
	}
	addServiceFlags(cmd, &f.serviceFlags)
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", defaultListen, "address to listen on (with --insecure-http and no --listen: 127.0.0.1:8443)")
	fl.IntVar(&f.maxConns, "max-connections", 1000, "connections served at once; more wait until one ends")
	fl.IntVar(&f.workers, "workers", 2, "in-process workers: how many jobs this process runs at once (0: only kubexm worker processes run jobs)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); without it a self-signed one is made and kept in DATA-DIR/tls")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM) of --tls-cert")
	fl.StringSliceVar(&f.tlsHosts, "tls-host", nil, "names and addresses the self-signed certificate is for (besides localhost)")
	fl.BoolVar(&f.insecureHTTP, "insecure-http", false, "serve plain HTTP: tokens and cluster files then cross the network in clear; only behind a TLS proxy or on loopback")
	cmd.AddCommand(newTokenCmd(a), newSecretCmd(a))
	return cmd
}

func newLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
}

func (a *app) serve(ctx context.Context, cmd *cobra.Command, f *serverFlags) error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	log := newLogger(cmd)
	svc, err := a.openService(ctx, &f.serviceFlags, true)
	if err != nil {
		return err
	}
	defer svc.store.Close()
	if err := bootstrapToken(ctx, svc, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	support, err := supportFromRolesPath(nil)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{Store: svc.store, Box: svc.box, Support: support, Playbook: svc.playbook, Registry: reg, Log: log, DataDir: svc.dataDir, Views: clusterview.Views{Support: support}, Guard: svc.guard})
	if err != nil {
		return err
	}
	if f.maxConns < 1 {
		return fmt.Errorf("--max-connections %d: give at least 1", f.maxConns)
	}
	ln, scheme, err := serverListener(cmd, f, svc, log)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var wg sync.WaitGroup
	if err := startWorkers(wctx, &wg, cmd, f, svc, reg, log); err != nil {
		ln.Close()
		return err
	}
	log.Info("kubexm server listening", "url", scheme+"://"+ln.Addr().String(), "db", svc.store.Dialect(), "data_dir", svc.dataDir, "workers", f.workers)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("stopping: running jobs are handed back as interrupted")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
	}
	stopWorkers()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// serverListener listens where --listen says, with TLS unless
// --insecure-http: the given certificate, else a self-signed one kept in
// the data directory.
func serverListener(cmd *cobra.Command, f *serverFlags, svc *service, log *slog.Logger) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", listenAddr(f, cmd.Flags().Changed("listen")))
	if err != nil {
		return nil, "", err
	}
	ln = api.LimitListener(ln, f.maxConns)
	scheme := "https"
	if f.insecureHTTP {
		scheme = "http"
	} else {
		var cert tls.Certificate
		if f.tlsCert != "" {
			cert, err = tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		} else {
			var fp string
			cert, fp, err = api.SelfSigned(filepath.Join(svc.dataDir, "tls"), f.tlsHosts)
			if err == nil {
				log.Info("self-signed TLS certificate: give clients --ca "+filepath.Join(svc.dataDir, "tls", "cert.pem"), "sha256", fp)
			}
		}
		if err != nil {
			ln.Close()
			return nil, "", err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return ln, scheme, nil
}

// startWorkers starts --workers workers on wg, each running jobs until wctx
// ends.
func startWorkers(wctx context.Context, wg *sync.WaitGroup, cmd *cobra.Command, f *serverFlags, svc *service, reg *prometheus.Registry, log *slog.Logger) error {
	if f.workers <= 0 {
		return nil
	}
	m := worker.NewMetrics(reg)
	host, _ := os.Hostname()
	for i := range f.workers {
		w, err := worker.New(worker.Config{Store: svc.store, Box: svc.box, DataDir: svc.dataDir, Playbook: svc.playbook,
			Name: fmt.Sprintf("%s:%d/%d", host, os.Getpid(), i+1), Poll: f.poll, Heartbeat: f.heartbeat, TTL: f.ttl, Metrics: m, Log: log,
			GlobalArgs: globalArgs(cmd, f.allowNets), Guard: svc.guard, MemoryLimit: svc.jobMemory, CPULimit: f.jobCPU})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Run(wctx)
		}()
	}
	return nil
}

const defaultListen = ":8443"

// parseBytes reads a size: a number of bytes, or with KiB, MiB, GiB, TiB
// (KB, MB, GB, TB and K, M, G, T as the same).
func parseBytes(s string) (int64, error) {
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

// listenAddr is where the server listens: --listen, except that plain
// HTTP (which carries tokens and cluster files in clear) is on every
// interface only when --listen says so.
func listenAddr(f *serverFlags, listenSet bool) string {
	if f.insecureHTTP && !listenSet {
		return "127.0.0.1" + defaultListen
	}
	return f.listen
}

// globalArgs are the root flags a job's `kubexm play` child gets as set for
// this process, and the confinement of its dials with the networks allow.
func globalArgs(cmd *cobra.Command, allow []string) []string {
	var out []string
	for _, name := range []string{"ssh-host-key-checking", "upload-forks"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			out = append(out, "--"+name+"="+fl.Value.String())
		}
	}
	// The child resolves each host once and connects to the address it
	// checked: the worker's check before the run resolved the names too,
	// and a DNS answer may change in between.
	return append(out, "--confine-dial="+strings.Join(allow, ","))
}

// bootstrapToken makes an operator token when there is none, written to a
// file only the server's user reads: a fresh server can be used at once,
// and the token never reaches the log.
func bootstrapToken(ctx context.Context, svc *service, log *slog.Logger) error {
	toks, err := svc.store.Tokens(ctx)
	if err != nil || len(toks) > 0 {
		return err
	}
	tok, err := api.NewToken()
	if err != nil {
		return err
	}
	p := filepath.Join(svc.dataDir, "admin.token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	if err := svc.store.AddToken(ctx, "admin", api.HashToken(tok), api.RoleOperator, time.Time{}); err != nil {
		return err
	}
	log.Info("no API token existed: made the operator token \"admin\"; it is in "+p, "file", p)
	return nil
}

func newTokenCmd(a *app) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{Use: "token", Short: "Create, list and delete API tokens (stored hashed)"}
	list := &cobra.Command{
		Use: "list", Short: "List the tokens: name, role, created, expires", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withService(cmd, &f, func(svc *service) error { return listTokens(cmd, svc) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withService(cmd, &f, func(svc *service) error { return svc.store.DeleteToken(cmd.Context(), args[0]) })
		},
	}
	for _, c := range []*cobra.Command{newTokenCreateCmd(a, &f), list, del} {
		addServiceFlags(c, &f)
		cmd.AddCommand(c)
	}
	return cmd
}

// withService runs fn with the service the flags open, and closes it.
func (a *app) withService(cmd *cobra.Command, f *serviceFlags, fn func(*service) error) error {
	svc, err := a.openService(cmd.Context(), f, true)
	if err != nil {
		return err
	}
	defer svc.store.Close()
	return fn(svc)
}

func newTokenCreateCmd(a *app, f *serviceFlags) *cobra.Command {
	var role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token and print it (once: only its SHA-256 is kept)",
		Example: `  kubexm server token create ci --role operator --ttl 24h
  kubexm server token create dashboard`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !api.ValidRole(role) {
				return fmt.Errorf("--role must be %s or %s, not %q", api.RoleReadOnly, api.RoleOperator, role)
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl %s: give a positive duration (24h, 30m), or 0 for a token that does not expire", ttl)
			}
			var expires time.Time
			if ttl > 0 {
				expires = time.Now().Add(ttl)
			}
			return a.withService(cmd, f, func(svc *service) error {
				tok, err := api.NewToken()
				if err != nil {
					return err
				}
				if err := svc.store.AddToken(cmd.Context(), args[0], api.HashToken(tok), role, expires); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				if !expires.IsZero() {
					fmt.Fprintf(cmd.ErrOrStderr(), "token %s expires at %s\n", args[0], expires.UTC().Format(time.RFC3339))
				}
				return nil
			})
		},
	}
	create.Flags().StringVar(&role, "role", api.RoleReadOnly, "read-only (GET only) or operator (may register clusters and run, cancel, resume jobs)")
	create.Flags().DurationVar(&ttl, "ttl", 0, "the token stops working after this long (24h, 90m; 0: never)")
	return create
}

func listTokens(cmd *cobra.Command, svc *service) error {
	toks, err := svc.store.Tokens(cmd.Context())
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tEXPIRES")
	now := time.Now()
	for _, t := range toks {
		exp := "never"
		switch {
		case t.Expired(now):
			exp = "expired " + t.ExpiresAt.Format(time.RFC3339)
		case !t.ExpiresAt.IsZero():
			exp = t.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Role, t.CreatedAt.Format(time.RFC3339), exp)
	}
	return tw.Flush()
}

// secretScope says which clusters' files may name sec.
func secretScope(sec confine.Secret) string {
	switch {
	case sec.Unscoped:
		return "every cluster (unscoped: made before secrets were scoped; create it again with --cluster)"
	case len(sec.Clusters) == 0:
		return "every cluster"
	}
	return "cluster " + strings.Join(sec.Clusters, ", ")
}

// newSecretCmd is `kubexm server secret`: the secrets a cluster.yaml sent
// through the API names as ${secret:NAME}, made by whoever runs the server
// (they read the data dir), never through the API.
func newSecretCmd(a *app) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{Use: "secret", Short: "Create, list and delete the server secrets cluster files name as ${secret:NAME} (stored encrypted)"}
	list := &cobra.Command{
		Use: "list", Short: "List the secrets' names and the clusters each is for", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withService(cmd, &f, func(svc *service) error {
				secrets, err := svc.secrets.List()
				if err != nil {
					return err
				}
				for _, sec := range secrets {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", sec.Name, secretScope(sec))
				}
				return nil
			})
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a secret (jobs of clusters naming it then fail)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withService(cmd, &f, func(svc *service) error { return svc.secrets.Delete(args[0]) })
		},
	}
	for _, c := range []*cobra.Command{newSecretCreateCmd(a, &f), list, del} {
		addServiceFlags(c, &f)
		cmd.AddCommand(c)
	}
	return cmd
}

func newSecretCreateCmd(a *app, f *serviceFlags) *cobra.Command {
	var fromFile string
	var clusters []string
	var allClusters bool
	create := &cobra.Command{
		Use:   "create NAME --cluster CLUSTER...",
		Short: "Store a secret (from --from-file, else standard input) for the clusters named, replacing one of the same name",
		Long: `Store a secret for the cluster files of the clusters named by --cluster (their
metadata.name; repeat it or give a list): a cluster file of another cluster that names it is
refused as if it did not exist. --all-clusters makes one every cluster file may name. A secret
made before secrets were scoped stays usable by every cluster: secret list shows it as
"every cluster (unscoped)"; create it again with --cluster to scope it.`,
		Example: `  kubexm server secret create lab-key --cluster lab --from-file ~/.ssh/id_ed25519   # privateKeyPath: ${secret:lab-key}
  printf %s "$PW" | kubexm server secret create lab-pw --cluster lab,lab2            # password: ${secret:lab-pw}`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(clusters) == 0 && !allClusters {
				return fmt.Errorf("secret %s: give the clusters whose files may name it (--cluster NAME, repeated or a list), or --all-clusters", args[0])
			}
			if len(clusters) > 0 && allClusters {
				return fmt.Errorf("secret %s: --cluster and --all-clusters exclude each other", args[0])
			}
			data, err := readSecret(cmd, fromFile)
			if err != nil {
				return fmt.Errorf("secret %s: %w", args[0], err)
			}
			return a.withService(cmd, f, func(svc *service) error {
				if err := svc.secrets.Put(args[0], data, clusters); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "secret %s stored for %s; a cluster file names it as ${secret:%s}\n", args[0], secretScope(confine.Secret{Clusters: clusters}), args[0])
				return nil
			})
		},
	}
	create.Flags().StringVar(&fromFile, "from-file", "", "read the secret from this file (a private key); default: standard input")
	create.Flags().StringSliceVar(&clusters, "cluster", nil, "the cluster (metadata.name) whose files may name the secret; repeat it or give a list")
	create.Flags().BoolVar(&allClusters, "all-clusters", false, "let every cluster's file name the secret")
	return create
}

// readSecret reads a secret from fromFile, else from standard input.
func readSecret(cmd *cobra.Command, fromFile string) ([]byte, error) {
	if fromFile != "" {
		return os.ReadFile(fromFile)
	}
	data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	if err != nil {
		return nil, err
	}
	// A password piped with echo ends with a newline that is not part of
	// it; a key keeps its own.
	return []byte(strings.TrimRight(string(data), "\r\n")), nil
}
