package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mensylisir/kubexm/operator"
)

func newControllerCmd(a *app) *cobra.Command {
	var kubeconfig, workDir, bundle, leaderNS, metricsAddr, probeAddr string
	var extra []string
	var leaderElect bool
	var lockWait time.Duration
	leaseDuration, renewDeadline, retryPeriod := 3*time.Minute, 2*time.Minute, 10*time.Second
	cmd := &cobra.Command{
		Use:          "controller",
		Short:        "Reconcile Cluster resources (operator mode): run the playbooks their changes need",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				return err
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  scheme,
				LeaderElection:          leaderElect,
				LeaderElectionID:        "kubexm-controller",
				LeaderElectionNamespace: leaderNS,
				// A leader that stops leading ends the process, so a run
				// never goes on beside the new leader's.
				LeaderElectionReleaseOnCancel: true,
				// Long enough to outlast the API server's restarts a run
				// makes (certs-renew, upgrade: a single master's API server
				// is away for tens of seconds): the default 10 s renewal
				// deadline ended the leader, and its run, in the middle.
				LeaseDuration: &leaseDuration, RenewDeadline: &renewDeadline, RetryPeriod: &retryPeriod,
				Metrics:                metricsserver.Options{BindAddress: metricsAddr},
				HealthProbeBindAddress: probeAddr,
				// Secrets are read when a run starts, never cached: the
				// controller needs only the one each Cluster names.
				Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
			})
			if err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			r := &operator.Reconciler{
				Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("kubexm-controller"),
				Runner: a.runner(), WorkDir: workDir, OfflineBundle: bundle, LockWait: lockWait, Out: cmd.OutOrStdout(),
				ExtraVars: extra,
			}
			if err := setupController(mgr, r, probeAddr != "0"); err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster whose Cluster resources to reconcile (default: the pod's service account, in the cluster)")
	f.StringVar(&workDir, "workdir", ".kubexm", "the directory of the clusters' work directories (<workdir>/<cluster name>, as kubexm play's: the same directory shares the runs' lock and the cluster's PKI)")
	f.StringVar(&bundle, "offline-bundle", "", "the offline bundle the runs install from (kubexm artifact export)")
	f.BoolVar(&leaderElect, "leader-elect", true, "run only while holding the kubexm-controller Lease, so that one controller runs at a time")
	f.StringVar(&leaderNS, "leader-election-namespace", "kube-system", "the namespace of the Lease")
	f.StringVar(&metricsAddr, "metrics-bind-address", "0", "the address of the metrics endpoint (0: none)")
	f.StringVar(&probeAddr, "health-probe-bind-address", "0", "the address of /healthz and /readyz (0: none; the in-cluster Deployment's probes use it)")
	f.StringArrayVarP(&extra, "extra-vars", "e", nil, "variables for every run, as kubexm play -e takes them (key=value, JSON or @file): the site's, which cluster.yaml does not hold")
	f.DurationVar(&lockWait, "lock-wait", 10*time.Minute, "how long a run waits for the cluster's lock held by another run (a kubexm play of the CLI)")
	return cmd
}

// setupController registers the reconciler and, with probes, the health
// checks the kubelet probes in the in-cluster Deployment
// (roles/kubexm-controller): the process serves.
func setupController(mgr ctrl.Manager, r *operator.Reconciler, probes bool) error {
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if !probes {
		return nil
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}
