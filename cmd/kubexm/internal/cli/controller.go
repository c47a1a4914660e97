package cli

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/operator"
)

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
			r.Runner, r.Out = a.runner(), cmd.OutOrStdout()
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
