package cli

import (
	"github.com/mensylisir/kubexm/service/server"
	"github.com/spf13/cobra"
)

func newWorkerCmd(a *app) *cobra.Command {
	var f serviceFlags
	var n int
	var name, metrics string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the jobs queued through kubexm server, from its database (docs/server.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := newLogger(cmd)
			svc, err := a.openService(ctx, &f, false)
			if err != nil {
				return err
			}
			defer svc.Store.Close()
			return svc.RunWorkers(ctx, server.WorkerOptions{N: n, Name: name, MetricsListen: metrics, GlobalArgs: globalArgs(cmd, f.allowNets)}, log)
		},
	}
	addServiceFlags(cmd, &f)
	cmd.Flags().IntVar(&n, "concurrency", 1, "how many jobs this worker runs at once")
	cmd.Flags().StringVar(&name, "name", "", "the worker's name in job rows (default host:pid)")
	cmd.Flags().StringVar(&metrics, "metrics-listen", "", "serve this worker's Prometheus metrics (task durations, failures by host) on this address")
	return cmd
}
