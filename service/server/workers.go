package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/worker"
)

// WorkerOptions are a `kubexm worker` process: how many jobs it runs at
// once, its name in job rows (default host:pid; the workers are NAME/1,
// NAME/2, ...), where it serves its Prometheus metrics ("" for nowhere)
// and the root flags each job's `kubexm play` child gets.
type WorkerOptions struct {
	N             int
	Name          string
	MetricsListen string
	GlobalArgs    []string
}

// RunWorkers runs the workers of o until ctx ends.
func (s *Service) RunWorkers(ctx context.Context, o WorkerOptions, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	if o.MetricsListen != "" {
		hs := &http.Server{Addr: o.MetricsListen, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics listener", "err", err)
			}
		}()
		defer hs.Close()
	}
	name := o.Name
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	var wg sync.WaitGroup
	workerName := func(i int) string { return fmt.Sprintf("%s/%d", name, i+1) }
	if err := s.StartWorkers(ctx, &wg, o.N, workerName, o.GlobalArgs, m, log); err != nil {
		return err
	}
	wg.Wait()
	return nil
}

// CreateToken makes an API token of role, stores its hash under name and
// returns it: the only time it is seen. A zero expires never expires.
func (s *Service) CreateToken(ctx context.Context, name, role string, expires time.Time) (string, error) {
	tok, err := api.NewToken()
	if err != nil {
		return "", err
	}
	if err := s.Store.AddToken(ctx, name, api.HashToken(tok), role, expires); err != nil {
		return "", err
	}
	return tok, nil
}
