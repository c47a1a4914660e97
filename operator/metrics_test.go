package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kxschema "github.com/mensylisir/kubexm/schema"
)

// The metrics follow the runs and the statuses: a succeeded and a failed
// certs-renew counted with their results and durations, nothing left in
// progress, the phase and nodes of the last status written, the series of
// a Cluster that is gone dropped.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering the metrics twice on one registry was not refused")
	}
	renewal := func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n    "+
			AnnotationCredentials+": kube-system/ssh\n", 1)
	}

	h := newHarness(t, renewal, credentialsSecret())
	h.r.Metrics = m
	h.reconcile(t) // certs-renew runs and succeeds
	h.reconcile(t) // converged: Ready, 2 of 2 nodes
	if got := testutil.ToFloat64(m.runs.WithLabelValues("c1", "certs-renew", "Succeeded")); got != 1 {
		t.Errorf("succeeded certs-renew runs: %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.phase.WithLabelValues("c1", "Ready")); got != 1 {
		t.Errorf("phase Ready: %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.phase.WithLabelValues("c1", "Progressing")); got != 0 {
		t.Errorf("phase Progressing: %v, want 0 once the run ended", got)
	}
	if r, n := testutil.ToFloat64(m.nodes.WithLabelValues("c1", "ready")), testutil.ToFloat64(m.nodes.WithLabelValues("c1", "total")); r != 2 || n != 2 {
		t.Errorf("nodes ready/total: %v/%v, want 2/2", r, n)
	}
	if n := testutil.CollectAndCount(m.expiry); n != 0 {
		t.Errorf("%d expiry series for a status without certificates", n)
	}
	m.status("c2", kxschema.ClusterStatus{Certificates: &kxschema.CertificateStatus{EarliestExpiry: "2027-12-02T08:00:00Z", CAExpiry: "2036-11-30T08:00:00Z"}})
	if got := testutil.ToFloat64(m.expiry.WithLabelValues("c2", "leaf")); got != float64(time.Date(2027, 12, 2, 8, 0, 0, 0, time.UTC).Unix()) {
		t.Errorf("leaf expiry: %v", got)
	}
	m.forget("c2")
	if n := testutil.CollectAndCount(m.running); n != 0 {
		t.Errorf("%d runs still in progress after the run ended", n)
	}

	f := newHarness(t, renewal, credentialsSecret())
	f.r.Metrics = m
	f.r.ExtraVars = []string{"fail_it=true"}
	f.reconcile(t)
	if got := testutil.ToFloat64(m.runs.WithLabelValues("c1", "certs-renew", "Failed")); got != 1 {
		t.Errorf("failed certs-renew runs: %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.phase.WithLabelValues("c1", "Degraded")); got != 1 {
		t.Errorf("phase Degraded after the failed run: %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.runDuration); n != 2 {
		t.Errorf("run duration series: %d, want 2 (succeeded, failed)", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}

	// The Cluster deleted: its series go.
	u, _ := f.get(t)
	if err := f.c.Delete(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "c1"}}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]prometheus.Collector{"runs": m.runs, "phase": m.phase, "nodes": m.nodes, "expiry": m.expiry} {
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("%s: %d series left for a deleted Cluster", name, n)
		}
	}
}
