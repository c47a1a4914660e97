package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/operator"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/datadir"
	"github.com/mensylisir/kubexm/service/secretbox"
	"github.com/mensylisir/kubexm/service/server"
)

// kubexm server and kubexm worker (service mode, service/server) and
// kubexm controller (operator mode, operator) wired to flags. The flags
// server and worker share bind into the service's configuration.

func addServiceFlags(cmd *cobra.Command, f *server.Config) {
	fl := cmd.Flags()
	fl.StringVar(&f.DataDir, "data-dir", datadir.Default(), "directory of the clusters' work directories (journals, PKI, kubeconfigs), the SQLite database and the secret key; every worker must reach the same one")
	fl.StringVar(&f.DB, "db", "", "job database: a postgres://user@host/db URL, or a SQLite file (default DATA-DIR/kubexm.db)")
	fl.StringVar(&f.SecretKeyFile, "secret-key-file", "", "file with the AES-256 key (base64) that encrypts the cluster.yaml files in the database (default DATA-DIR/secret.key; $"+secretbox.KeyEnv+" wins)")
	fl.StringVar(&f.PlaybooksDir, "playbooks", "", "directory of extra playbooks (NAME/playbook.yaml or NAME.yaml) jobs may name, found before the built-in ones")
	fl.DurationVar(&f.Poll, "poll", time.Second, "how often an idle worker looks for a queued job")
	fl.DurationVar(&f.Heartbeat, "heartbeat", 5*time.Second, "how often a worker records that it still runs its job")
	fl.DurationVar(&f.TTL, "heartbeat-ttl", 30*time.Second, "how long a job's worker may stay silent before the job is marked interrupted and resumed by another worker")
	fl.StringVar(&f.JobMemory, "job-memory", "4GiB", "address space of a job's run and of each process it starts (RLIMIT_AS; 0: unlimited); its Go runtime collects harder from a quarter of it")
	fl.DurationVar(&f.JobCPU, "job-cpu", 2*time.Hour, "CPU time of a job's run and of each process it starts (RLIMIT_CPU; 0: unlimited)")
	fl.StringSliceVar(&f.AllowNets, "allow-host-networks", nil, "networks (CIDR,...) a cluster's hosts may be in although they are refused by default: loopback, link-local, this machine's own addresses, and connection: local hosts with an address in them; each lets jobs run commands on this machine")
}

// withService runs fn with the service the flags of f open, and closes it;
// createKey makes the secret key when there is none (the server does, a
// worker does not).
func (a *app) withService(cmd *cobra.Command, f *server.Config, createKey bool, fn func(*server.Service) error) error {
	c := *f
	c.CreateKey, c.BuiltinFS = createKey, a.BuiltinFS
	svc, err := server.Open(cmd.Context(), c)
	if err != nil {
		return err
	}
	defer svc.Store.Close()
	return fn(svc)
}

func newServerCmd(a *app) *cobra.Command {
	var f server.Config
	var s server.ServeConfig
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the kubexm API: register clusters, queue playbook runs as jobs, run them (docs/server.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s.ListenSet, s.GlobalArgs = cmd.Flags().Changed("listen"), globalArgs(cmd)
			if err := s.Check(); err != nil {
				return err
			}
			return a.withService(cmd, &f, true, func(svc *server.Service) error { return svc.Serve(cmd.Context(), s, newLogger(cmd)) })
		},
	}
	addServiceFlags(cmd, &f)
	fl := cmd.Flags()
	fl.StringVar(&s.Listen, "listen", server.DefaultListen, "address to listen on (with --insecure-http and no --listen: 127.0.0.1:8443)")
	fl.IntVar(&s.MaxConns, "max-connections", 1000, "connections served at once; more wait until one ends")
	fl.IntVar(&s.Workers, "workers", 2, "in-process workers: how many jobs this process runs at once (0: only kubexm worker processes run jobs)")
	fl.StringVar(&s.TLSCert, "tls-cert", "", "TLS certificate (PEM); without it a self-signed one is made and kept in DATA-DIR/tls")
	fl.StringVar(&s.TLSKey, "tls-key", "", "TLS private key (PEM) of --tls-cert")
	fl.StringSliceVar(&s.TLSHosts, "tls-host", nil, "names and addresses the self-signed certificate is for (besides localhost)")
	fl.BoolVar(&s.InsecureHTTP, "insecure-http", false, "serve plain HTTP: tokens and cluster files then cross the network in clear; only behind a TLS proxy or on loopback")
	cmd.AddCommand(newTokenCmd(a), newSecretCmd(a))
	return cmd
}

func newWorkerCmd(a *app) *cobra.Command {
	var f server.Config
	var o server.WorkerOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the jobs queued through kubexm server, from its database (docs/server.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.GlobalArgs = globalArgs(cmd)
			return a.withService(cmd, &f, false, func(svc *server.Service) error { return svc.RunWorkers(cmd.Context(), o, newLogger(cmd)) })
		},
	}
	addServiceFlags(cmd, &f)
	cmd.Flags().IntVar(&o.N, "concurrency", 1, "how many jobs this worker runs at once")
	cmd.Flags().StringVar(&o.Name, "name", "", "the worker's name in job rows (default host:pid)")
	cmd.Flags().StringVar(&o.MetricsListen, "metrics-listen", "", "serve this worker's Prometheus metrics (task durations, failures by host) on this address")
	return cmd
}

func newLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
}

// globalArgs are the root flags a job's `kubexm play` child gets as set for
// this process (the service adds the confinement of its dials).
func globalArgs(cmd *cobra.Command) []string {
	var out []string
	for _, name := range []string{"ssh-host-key-checking", "upload-forks"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			out = append(out, "--"+name+"="+fl.Value.String())
		}
	}
	return out
}

// serviceCmds are the list, delete and create commands of a noun of the
// service's data (token, secret), with the service flags each.
func serviceCmds(parent *cobra.Command, f *server.Config, cmds ...*cobra.Command) *cobra.Command {
	for _, c := range cmds {
		addServiceFlags(c, f)
		parent.AddCommand(c)
	}
	return parent
}

func newTokenCmd(a *app) *cobra.Command {
	var f server.Config
	var role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token and print it (once: only its SHA-256 is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			expires, err := server.TokenExpiry(role, ttl)
			if err != nil {
				return err
			}
			return a.withService(cmd, &f, true, func(svc *server.Service) error {
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
	list := &cobra.Command{
		Use: "list", Short: "List the tokens: name, role, created, expires", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withService(cmd, &f, true, func(svc *server.Service) error { return svc.WriteTokens(cmd.Context(), cmd.OutOrStdout()) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withService(cmd, &f, true, func(svc *server.Service) error { return svc.Store.DeleteToken(cmd.Context(), args[0]) })
		},
	}
	return serviceCmds(&cobra.Command{Use: "token", Short: "Create, list and delete API tokens (stored hashed)"}, &f, create, list, del)
}

// newSecretCmd is `kubexm server secret`: the secrets a cluster.yaml sent
// through the API names as ${secret:NAME}, made by whoever runs the server
// (they read the data dir), never through the API.
func newSecretCmd(a *app) *cobra.Command {
	var f server.Config
	var fromFile string
	var clusters []string
	var allClusters bool
	create := &cobra.Command{
		Use:   "create NAME --cluster CLUSTER...",
		Short: "Store a secret (from --from-file, else standard input) for the clusters named, replacing one of the same name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := server.CheckSecretScope(args[0], clusters, allClusters); err != nil {
				return err
			}
			data, err := server.ReadSecret(cmd.InOrStdin(), fromFile)
			if err != nil {
				return fmt.Errorf("secret %s: %w", args[0], err)
			}
			return a.withService(cmd, &f, true, func(svc *server.Service) error {
				if err := svc.Secrets.Put(args[0], data, clusters); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "secret %s stored for %s; a cluster file names it as ${secret:%s}\n", args[0], confine.Secret{Clusters: clusters}.Scope(), args[0])
				return nil
			})
		},
	}
	create.Flags().StringVar(&fromFile, "from-file", "", "read the secret from this file (a private key); default: standard input")
	create.Flags().StringSliceVar(&clusters, "cluster", nil, "the cluster (metadata.name) whose files may name the secret; repeat it or give a list")
	create.Flags().BoolVar(&allClusters, "all-clusters", false, "let every cluster's file name the secret")
	list := &cobra.Command{
		Use: "list", Short: "List the secrets' names and the clusters each is for", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withService(cmd, &f, true, func(svc *server.Service) error { return svc.WriteSecrets(cmd.OutOrStdout()) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a secret (jobs of clusters naming it then fail)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withService(cmd, &f, true, func(svc *server.Service) error { return svc.Secrets.Delete(args[0]) })
		},
	}
	return serviceCmds(&cobra.Command{Use: "secret", Short: "Create, list and delete the server secrets cluster files name as ${secret:NAME} (stored encrypted)"}, &f, create, list, del)
}

// newControllerCmd is operator mode: operator.Manage with the CLI's runner.
func newControllerCmd(a *app) *cobra.Command {
	var o operator.ManagerOptions
	r := &operator.Reconciler{}
	cmd := &cobra.Command{
		Use:          "controller",
		Short:        "Reconcile Cluster resources (operator mode): run the playbooks their changes need",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r.Runner, r.Out = a.Runner, cmd.OutOrStdout()
			return operator.Manage(cmd.Context(), o, r, slog.NewTextHandler(cmd.ErrOrStderr(), nil))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster whose Cluster resources to reconcile (default: the pod's service account, in the cluster)")
	f.StringVar(&r.WorkDir, "workdir", ".kubexm", "the directory of the clusters' work directories (<workdir>/<cluster name>, as kubexm play's: the same directory shares the runs' lock and the cluster's PKI)")
	f.StringVar(&r.OfflineBundle, "offline-bundle", "", "the offline bundle the runs install from (kubexm artifact export)")
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "run only while holding the kubexm-controller Lease, so that one controller runs at a time")
	f.StringVar(&o.LeaderNamespace, "leader-election-namespace", "kube-system", "the namespace of the Lease")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "the address of the metrics endpoint (0: none)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", "0", "the address of /healthz and /readyz (0: none; the in-cluster Deployment's probes use it)")
	f.StringArrayVarP(&r.ExtraVars, "extra-vars", "e", nil, "variables for every run, as kubexm play -e takes them (key=value, JSON or @file): the site's, which cluster.yaml does not hold")
	f.DurationVar(&r.LockWait, "lock-wait", 10*time.Minute, "how long a run waits for the cluster's lock held by another run (a kubexm play of the CLI)")
	return cmd
}
