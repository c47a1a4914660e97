package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
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

// TokenExpiry checks a token's role and time to live (0: forever) before
// anything is opened, and says when it expires (zero: never).
func TokenExpiry(role string, ttl time.Duration) (time.Time, error) {
	if !api.ValidRole(role) {
		return time.Time{}, fmt.Errorf("--role must be %s or %s, not %q", api.RoleReadOnly, api.RoleOperator, role)
	}
	if ttl < 0 {
		return time.Time{}, fmt.Errorf("--ttl %s: give a positive duration (24h, 30m), or 0 for a token that does not expire", ttl)
	}
	if ttl == 0 {
		return time.Time{}, nil
	}
	return time.Now().Add(ttl), nil
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

// WriteTokens prints the tokens: name, role, created, expires.
func (s *Service) WriteTokens(ctx context.Context, w io.Writer) error {
	toks, err := s.Store.Tokens(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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

// ReadSecret reads a secret's value from fromFile, else from in (at most
// 1 MiB).
func ReadSecret(in io.Reader, fromFile string) ([]byte, error) {
	if fromFile != "" {
		return os.ReadFile(fromFile)
	}
	data, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return nil, err
	}
	// A password piped with echo ends with a newline that is not part of
	// it; a key keeps its own.
	return []byte(strings.TrimRight(string(data), "\r\n")), nil
}

// CheckSecretScope checks the clusters a new secret is for before anything
// is read or opened: some (--cluster) or all (--all-clusters), one of
// them.
func CheckSecretScope(name string, clusters []string, all bool) error {
	if len(clusters) == 0 && !all {
		return fmt.Errorf("secret %s: give the clusters whose files may name it (--cluster NAME, repeated or a list), or --all-clusters", name)
	}
	if len(clusters) > 0 && all {
		return fmt.Errorf("secret %s: --cluster and --all-clusters exclude each other", name)
	}
	return nil
}

// WriteSecrets prints the secrets' names and the clusters each is for.
func (s *Service) WriteSecrets(w io.Writer) error {
	secrets, err := s.Secrets.List()
	if err != nil {
		return err
	}
	for _, sec := range secrets {
		fmt.Fprintf(w, "%s\t%s\n", sec.Name, sec.Scope())
	}
	return nil
}
