package worker

import (
	"bufio"
	"encoding/json"
	"io"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mensylisir/kubexm/service/jobstore"
)

// Metrics are what a worker measures of the jobs it runs. A nil *Metrics
// measures nothing.
type Metrics struct {
	taskDuration *prometheus.HistogramVec
	hostFailures *prometheus.CounterVec
	jobsFinished *prometheus.CounterVec
	sshDials     *prometheus.CounterVec
	sshOpen      *prometheus.GaugeVec
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
	m.sshDials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubexm_ssh_dials_total",
		Help: "SSH connections the jobs' runs dialed (reconnects included), per cluster, host and result (ok, failed).",
	}, []string{"cluster", "host", "result"})
	m.sshOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubexm_ssh_connections_open",
		Help: "SSH connections the running jobs hold, per cluster and host.",
	}, []string{"cluster", "host"})
	reg.MustRegister(m.taskDuration, m.hostFailures, m.jobsFinished, m.sshDials, m.sshOpen)
	return m
}

func (m *Metrics) event(j *jobstore.Job, e model.Event) {
	if m == nil {
		return
	}
	switch {
	case e.Kind == model.EventTaskEnd:
		m.taskDuration.WithLabelValues(j.Playbook).Observe(float64(e.DurationMS) / 1000)
	case e.Kind == model.EventHostResult && (e.Status == model.StatusFailed || e.Status == model.StatusUnreachable):
		m.hostFailures.WithLabelValues(j.Cluster, e.Host, string(e.Status)).Inc()
	}
}

func (m *Metrics) finished(_ *jobstore.Job, st jobstore.Status) {
	if m == nil {
		return
	}
	m.jobsFinished.WithLabelValues(string(st)).Inc()
}

// followConns counts the SSH connection events a job's child writes to r
// (one JSON line each, --conn-events-fd) until r ends; the connections
// still open then went with the child.
func (m *Metrics) followConns(j *jobstore.Job, r io.Reader) {
	open := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var e struct{ Host, Event string }
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Host == "" || m == nil {
			continue
		}
		switch e.Event {
		case "dialed":
			m.sshDials.WithLabelValues(j.Cluster, e.Host, "ok").Inc()
			m.sshOpen.WithLabelValues(j.Cluster, e.Host).Inc()
			open[e.Host]++
		case "dial_failed":
			m.sshDials.WithLabelValues(j.Cluster, e.Host, "failed").Inc()
		case "closed":
			m.sshOpen.WithLabelValues(j.Cluster, e.Host).Dec()
			open[e.Host]--
		}
	}
	for host, n := range open {
		if n > 0 {
			m.sshOpen.WithLabelValues(j.Cluster, host).Sub(float64(n))
		}
	}
}
