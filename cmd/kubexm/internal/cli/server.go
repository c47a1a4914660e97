package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/datadir"
	"github.com/mensylisir/kubexm/service/secretbox"
	"github.com/mensylisir/kubexm/service/server"
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

func addServiceFlags(cmd *cobra.Command, f *serviceFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", datadir.Default(), "directory of the clusters' work directories (journals, PKI, kubeconfigs), the SQLite database and the secret key; every worker must reach the same one")
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

// config is the service configuration the flags say.
func (a *app) config(f *serviceFlags, createKey bool) server.Config {
	return server.Config{DB: f.db, DataDir: f.dataDir, SecretKeyFile: f.secretKeyFile, CreateKey: createKey, PlaybooksDir: f.playbooksDir,
		BuiltinFS: a.builtinFS, Heartbeat: f.heartbeat, TTL: f.ttl, Poll: f.poll, AllowNets: f.allowNets, JobMemory: f.jobMemory, JobCPU: f.jobCPU}
}

func (a *app) openService(ctx context.Context, f *serviceFlags, createKey bool) (*server.Service, error) {
	return server.Open(ctx, a.config(f, createKey))
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
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serve(cmd.Context(), cmd, &f)
		},
	}
	addServiceFlags(cmd, &f.serviceFlags)
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", server.DefaultListen, "address to listen on (with --insecure-http and no --listen: 127.0.0.1:8443)")
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
	c := server.ServeConfig{Listen: f.listen, ListenSet: cmd.Flags().Changed("listen"), MaxConns: f.maxConns, Workers: f.workers,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, TLSHosts: f.tlsHosts, InsecureHTTP: f.insecureHTTP, GlobalArgs: globalArgs(cmd, f.allowNets)}
	if err := c.Check(); err != nil {
		return err
	}
	svc, err := a.openService(ctx, &f.serviceFlags, true)
	if err != nil {
		return err
	}
	defer svc.Store.Close()
	return svc.Serve(ctx, c, newLogger(cmd))
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

func newTokenCmd(a *app) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{Use: "token", Short: "Create, list and delete API tokens (stored hashed)"}
	list := &cobra.Command{
		Use: "list", Short: "List the tokens: name, role, created, expires", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withService(cmd, &f, func(svc *server.Service) error { return listTokens(cmd, svc) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withService(cmd, &f, func(svc *server.Service) error { return svc.Store.DeleteToken(cmd.Context(), args[0]) })
		},
	}
	for _, c := range []*cobra.Command{newTokenCreateCmd(a, &f), list, del} {
		addServiceFlags(c, &f)
		cmd.AddCommand(c)
	}
	return cmd
}

// withService runs fn with the service the flags open, and closes it.
func (a *app) withService(cmd *cobra.Command, f *serviceFlags, fn func(*server.Service) error) error {
	svc, err := a.openService(cmd.Context(), f, true)
	if err != nil {
		return err
	}
	defer svc.Store.Close()
	return fn(svc)
}

func newTokenCreateCmd(a *app, f *serviceFlags) *cobra.Command {
	var role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token and print it (once: only its SHA-256 is kept)",
		Args:  cobra.ExactArgs(1),
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
			return a.withService(cmd, f, func(svc *server.Service) error {
				tok, err := svc.CreateToken(cmd.Context(), args[0], role, expires)
				if err != nil {
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

func listTokens(cmd *cobra.Command, svc *server.Service) error {
	toks, err := svc.Store.Tokens(cmd.Context())
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
			return a.withService(cmd, &f, func(svc *server.Service) error {
				secrets, err := svc.Secrets.List()
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
			return a.withService(cmd, &f, func(svc *server.Service) error { return svc.Secrets.Delete(args[0]) })
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
		Args:  cobra.ExactArgs(1),
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
			return a.withService(cmd, f, func(svc *server.Service) error {
				if err := svc.Secrets.Put(args[0], data, clusters); err != nil {
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
