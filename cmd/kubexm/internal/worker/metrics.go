package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mensylisir/kubexm/cmd/kubexm/internal/jobstore"
	"github.com/mensylisir/kubexm/engine"
)

// Metrics are what a worker measures of the jobs it runs. A nil *Metrics
// measures nothing.
type Metrics struct {
	taskDuration *prometheus.HistogramVec
	hostFailures *prometheus.CounterVec
	jobsFinished *prometheus.CounterVec
}

// NewMetrics registers the worker's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubexm_task_duration_seconds",
			Help:    "How long a task took on all its hosts, per playbook.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"playbook"}),
		hostFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubexm_host_failures_total",
			Help: "Task results that failed or found the host unreachable, per cluster and host.",
		}, []string{"cluster", "host", "status"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubexm_jobs_finished_total",
			Help: "Jobs this process's workers ended, per end state.",
		}, []string{"status"}),
	}
	reg.MustRegister(m.taskDuration, m.hostFailures, m.jobsFinished)
	return m
}

func (m *Metrics) event(j *jobstore.Job, e engine.Event) {
	if m == nil {
		return
	}
	switch {
	case e.Kind == engine.EventTaskEnd:
		m.taskDuration.WithLabelValues(j.Playbook).Observe(float64(e.DurationMS) / 1000)
	case e.Kind == engine.EventHostResult && (e.Status == engine.StatusFailed || e.Status == engine.StatusUnreachable):
		m.hostFailures.WithLabelValues(j.Cluster, e.Host, string(e.Status)).Inc()
	}
}

func (m *Metrics) finished(_ *jobstore.Job, st jobstore.Status) {
	if m == nil {
		return
	}
	m.jobsFinished.WithLabelValues(string(st)).Inc()
}
