package operator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	kxschema "github.com/mensylisir/kubexm/schema"
)

// Metrics are what the controller measures of its clusters and their runs,
// served on the manager's /metrics beside controller-runtime's own
// (reconciles, work queue, leader election). A nil *Metrics measures
// nothing.
type Metrics struct {
	runs        *prometheus.CounterVec
	runDuration *prometheus.HistogramVec
	running     *prometheus.GaugeVec
	phase       *prometheus.GaugeVec
	nodes       *prometheus.GaugeVec
	expiry      *prometheus.GaugeVec
}

// phases are the values of status.phase, each a series of
// kubexm_cluster_phase, 1 for the cluster's current one.
var phases = []string{"Pending", "Progressing", "Ready", "Degraded"}

// NewMetrics registers the controller's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubexm_controller_runs_total",
			Help: "Playbook runs the controller ended, per cluster, playbook and result (Succeeded, Failed, Interrupted).",
		}, []string{"cluster", "playbook", "result"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubexm_controller_run_duration_seconds",
			Help:    "How long the controller's playbook runs took, per playbook and result.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}, []string{"playbook", "result"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubexm_controller_run_in_progress",
			Help: "1 while the controller runs a playbook against the cluster.",
		}, []string{"cluster", "playbook"}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubexm_cluster_phase",
			Help: "The Cluster's status.phase as last written: 1 for the current phase, 0 for the others.",
		}, []string{"cluster", "phase"}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubexm_cluster_nodes",
			Help: "The nodes the Cluster's spec names (state total) and those Ready (state ready), as its status last said.",
		}, []string{"cluster", "state"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubexm_cluster_certificate_expiry_timestamp_seconds",
			Help: "When the cluster's certificates expire (Unix time), as its status last said: the API server's (kind leaf) and the cluster CA's (kind ca).",
		}, []string{"cluster", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.runDuration, m.running, m.phase, m.nodes, m.expiry} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) runStarted(cluster, playbook string) {
	if m == nil {
		return
	}
	m.running.WithLabelValues(cluster, playbook).Set(1)
}

// runStopped ends the in-progress series, whether the run ended or never
// began (a journal that could not be resumed).
func (m *Metrics) runStopped(cluster, playbook string) {
	if m == nil {
		return
	}
	m.running.DeleteLabelValues(cluster, playbook)
}

func (m *Metrics) runEnded(cluster, playbook, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(cluster, playbook, result).Inc()
	m.runDuration.WithLabelValues(playbook, result).Observe(took.Seconds())
}

// status records what a status written for cluster says.
func (m *Metrics) status(cluster string, st kxschema.ClusterStatus) {
	if m == nil {
		return
	}
	for _, p := range phases {
		v := 0.0
		if st.Phase == p || st.Phase == "" && p == "Pending" {
			v = 1
		}
		m.phase.WithLabelValues(cluster, p).Set(v)
	}
	ready := 0
	for _, n := range st.Nodes {
		if n.Ready {
			ready++
		}
	}
	m.nodes.WithLabelValues(cluster, "total").Set(float64(len(st.Nodes)))
	m.nodes.WithLabelValues(cluster, "ready").Set(float64(ready))
	var certs kxschema.CertificateStatus
	if st.Certificates != nil {
		certs = *st.Certificates
	}
	for kind, at := range map[string]string{"leaf": certs.EarliestExpiry, "ca": certs.CAExpiry} {
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			m.expiry.WithLabelValues(cluster, kind).Set(float64(t.Unix()))
		} else {
			m.expiry.DeleteLabelValues(cluster, kind)
		}
	}
}

// forget drops the series of a Cluster that is gone.
func (m *Metrics) forget(cluster string) {
	if m == nil {
		return
	}
	for _, v := range []*prometheus.MetricVec{m.runs.MetricVec, m.running.MetricVec, m.phase.MetricVec, m.nodes.MetricVec, m.expiry.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	}
}
