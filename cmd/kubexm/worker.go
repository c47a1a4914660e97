package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/service/worker"
)

func newWorkerCmd(a *app) *cobra.Command {
	var f serviceFlags
	var n int
	var name, metrics string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the jobs queued through kubexm server, from its database (docs/server.md)",
		Long: `Claim and run jobs from the job database of kubexm server. Give it the same
--db (PostgreSQL, for workers on other machines), --data-dir (a directory
every worker reaches: a job interrupted on one worker resumes from its journal
there on another) and secret key as the server.`,
		Example: `  KUBEXM_SECRET_KEY=... kubexm worker --db postgres://kubexm@db/kubexm --data-dir /shared/kubexm`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := newLogger(cmd)
			svc, err := a.openService(ctx, &f, false)
			if err != nil {
				return err
			}
			defer svc.Store.Close()
			reg := prometheus.NewRegistry()
			m := worker.NewMetrics(reg)
			if metrics != "" {
				hs := &http.Server{Addr: metrics, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
				go func() {
					if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
						log.Error("metrics listener", "err", err)
					}
				}()
				defer hs.Close()
			}
			if name == "" {
				host, _ := os.Hostname()
				name = fmt.Sprintf("%s:%d", host, os.Getpid())
			}
			var wg sync.WaitGroup
			workerName := func(i int) string { return fmt.Sprintf("%s/%d", name, i+1) }
			if err := svc.StartWorkers(ctx, &wg, n, workerName, globalArgs(cmd, f.allowNets), m, log); err != nil {
				return err
			}
			wg.Wait()
			return nil
		},
	}
	addServiceFlags(cmd, &f)
	cmd.Flags().IntVar(&n, "concurrency", 1, "how many jobs this worker runs at once")
	cmd.Flags().StringVar(&name, "name", "", "the worker's name in job rows (default host:pid)")
	cmd.Flags().StringVar(&metrics, "metrics-listen", "", "serve this worker's Prometheus metrics (task durations, failures by host) on this address")
	return cmd
}
