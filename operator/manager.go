package operator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions are how `kubexm controller` runs: the API server, the
// leader election and the endpoints of the process.
type ManagerOptions struct {
	// Kubeconfig names the API server ("" for the pod's service account).
	Kubeconfig string
	// LeaderElect runs only while holding the kubexm-controller Lease in
	// LeaderNamespace, so that one controller runs at a time.
	LeaderElect     bool
	LeaderNamespace string
	// MetricsAddr and ProbeAddr are the addresses of the metrics and of
	// /healthz and /readyz ("0" for none).
	MetricsAddr, ProbeAddr string
}

// Manage reconciles Cluster resources with r until ctx ends: it builds the
// manager of o (logging to log), registers r and, with a probe address,
// the health checks the in-cluster Deployment's kubelet probes
// (roles/kubexm-controller). r's Client and Recorder are the manager's.
func Manage(ctx context.Context, o ManagerOptions, r *Reconciler, log slog.Handler) error {
	ctrl.SetLogger(logr.FromSlogHandler(log))
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	leaseDuration, renewDeadline, retryPeriod := 3*time.Minute, 2*time.Minute, 10*time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "kubexm-controller",
		LeaderElectionNamespace: o.LeaderNamespace,
		// A leader that stops leading ends the process, so a run never
		// goes on beside the new leader's.
		LeaderElectionReleaseOnCancel: true,
		// Long enough to outlast the API server's restarts a run makes
		// (certs-renew, upgrade: a single master's API server is away for
		// tens of seconds): the default 10 s renewal deadline ended the
		// leader, and its run, in the middle.
		LeaseDuration: &leaseDuration, RenewDeadline: &renewDeadline, RetryPeriod: &retryPeriod,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.ProbeAddr,
		// Secrets are read when a run starts, never cached: the controller
		// needs only the one each Cluster names.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	r.Client, r.Recorder = mgr.GetClient(), mgr.GetEventRecorder("kubexm-controller")
	if r.Metrics == nil && o.MetricsAddr != "0" {
		// The registry the manager's /metrics serves.
		if r.Metrics, err = NewMetrics(ctrlmetrics.Registry); err != nil {
			return fmt.Errorf("controller metrics: %w", err)
		}
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if o.ProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	return mgr.Start(ctx)
}
