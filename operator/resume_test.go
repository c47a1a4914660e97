package operator

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mensylisir/kubexm/engine/journal"
)

// runs lists the runs journaled in the cluster's work directory.
func (h *harness) runs(t *testing.T) []journal.RunInfo {
	t.Helper()
	runs, err := journal.Runs(filepath.Join(h.r.WorkDir, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func (h *harness) journalSecret(t *testing.T) (*corev1.Secret, error) {
	t.Helper()
	var s corev1.Secret
	err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: journalSecret("c1")}, &s)
	return &s, err
}

func gunzip(t *testing.T, data []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A run that did not finish leaves its journal in a Secret beside the
// credentials; the next run of the same playbook, by a controller whose
// work directory is empty (a new pod), resumes it: Resume is the
// interrupted run, its journal written back into the work directory. The
// fake playbook's tasks run on localhost, the control side, so they run
// again (journal.Reusable). A success removes the Secret.
func TestReconcileResumesTheUnfinishedRun(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n    "+
			AnnotationCredentials+": kube-system/ssh\n", 1)
	}, credentialsSecret())
	h.r.ExtraVars = []string{"fail_it=true"}
	h.reconcile(t)
	runs := h.runs(t)
	if len(runs) != 1 || runs[0].Outcome == "ok" {
		t.Fatalf("the failed run: %+v", runs)
	}
	first := runs[0].ID
	s, err := h.journalSecret(t)
	if err != nil {
		t.Fatalf("no journal Secret after a run that did not finish: %v", err)
	}
	if j := gunzip(t, s.Data[journalKey]); !strings.Contains(j, `"run":"`+first+`"`) || !strings.Contains(j, `"playbook":"certs-renew"`) || !strings.Contains(j, `"control":true`) {
		t.Errorf("the journal Secret holds:\n%s", j)
	}
	// A new pod: nothing in its work directory.
	if err := os.RemoveAll(filepath.Join(h.r.WorkDir, "c1")); err != nil {
		t.Fatal(err)
	}
	h.eventList()
	h.r.ExtraVars = nil
	h.reconcile(t)
	runs = h.runs(t)
	if len(runs) != 2 || runs[1].ResumedFrom != first || runs[1].Outcome != "ok" || runs[0].ID != first {
		t.Fatalf("want the restored run and its resume, ok: %+v", runs)
	}
	if ev := h.eventList(); !strings.Contains(ev, "Normal RunResumed") || !strings.Contains(ev, first) {
		t.Errorf("events: %q", ev)
	}
	if n := strings.Count(h.out.String(), "ran certs-renew"); n != 2 {
		t.Errorf("the control side's task ran %d times in the two runs, want 2 (again on resume):\n%s", n, h.out)
	}
	if _, err := h.journalSecret(t); !apierrors.IsNotFound(err) {
		t.Errorf("the journal Secret after the run succeeded: %v", err)
	}
	if _, st := h.get(t); st.LastRun == nil || st.LastRun.Result != "Succeeded" || st.LastRun.ID != runs[1].ID {
		t.Errorf("last run: %+v", st.LastRun)
	}
}

// An unfinished run of another inventory (the spec changed since) is not
// resumed: the run starts from the beginning and succeeds.
func TestReconcileDoesNotResumeAnotherInventory(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n    "+
			AnnotationCredentials+": kube-system/ssh\n", 1)
	}, credentialsSecret())
	h.r.ExtraVars = []string{"fail_it=true"}
	h.reconcile(t)
	s, err := h.journalSecret(t)
	if err != nil {
		t.Fatal(err)
	}
	j := gunzip(t, s.Data[journalKey])
	i := strings.Index(j, `"inventory_hash":"`) + len(`"inventory_hash":"`)
	other := "0"
	if j[i] == '0' {
		other = "1"
	}
	j = j[:i] + other + j[i+1:]
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(j))
	_ = zw.Close()
	s.Data[journalKey] = buf.Bytes()
	if err := h.c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(h.r.WorkDir, "c1")); err != nil {
		t.Fatal(err)
	}
	h.r.ExtraVars = nil
	h.reconcile(t)
	runs := h.runs(t)
	last := runs[len(runs)-1]
	if last.ResumedFrom != "" || last.Outcome != "ok" {
		t.Errorf("want a new run from the beginning, ok: %+v", runs)
	}
	if _, st := h.get(t); st.LastRun == nil || st.LastRun.Result != "Succeeded" {
		t.Errorf("last run: %+v", st.LastRun)
	}
}

// parseInterrupted: a journal without a header, or whose run ended ok, is
// nothing to resume; a run id that is not a plain name is refused.
func TestParseInterrupted(t *testing.T) {
	for _, tc := range []struct {
		journal, want string
	}{
		{`{"type":"header","run":"r1","playbook":"add-nodes"}` + "\n" + `{"type":"result","key":"k"}`, "r1 add-nodes"},
		{`{"type":"header","run":"r1","playbook":"add-nodes"}` + "\n" + `{"type":"end","outcome":"cancelled"}`, "r1 add-nodes"},
		{`{"type":"header","run":"r1","playbook":"add-nodes"}` + "\n" + `{"type":"end","outcome":"ok"}`, ""},
		{`{"type":"result","key":"k"}`, ""},
		{`{"type":"header","run":"../r1","playbook":"add-nodes"}`, ""},
	} {
		got := ""
		if in := parseInterrupted([]byte(tc.journal)); in != nil {
			got = in.ID + " " + in.Playbook
		}
		if got != tc.want {
			t.Errorf("parseInterrupted(%q) = %q, want %q", tc.journal, got, tc.want)
		}
	}
}

// The unfinished run's own plan comes first: add-nodes stopped after the
// new node joined (nothing left for Decide to add) is still resumed to its
// end, with its -e values.
func TestReconcileFinishesTheUnfinishedPlan(t *testing.T) {
	h := newHarness(t, func(s string) string {
		s = strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationCredentials+": kube-system/ssh\n", 1)
		s = strings.Replace(s, "  roleGroups:\n", "  - {name: n3, address: 10.0.0.3, user: root, privateKeyPath: /nowhere/id_rsa}\n  roleGroups:\n", 1)
		return strings.Replace(s, "    worker: [n2]\n", "    worker: [n2, n3]\n", 1)
	}, credentialsSecret())
	h.r.ExtraVars = []string{"fail_it=true"}
	h.reconcile(t)
	runs := h.runs(t)
	if len(runs) != 1 || runs[0].Playbook != "add-nodes" || runs[0].Outcome == "ok" {
		t.Fatalf("the failed add-nodes: %+v\n%s", runs, h.out)
	}
	s, err := h.journalSecret(t)
	if err != nil || !strings.Contains(s.Annotations[annotationPlan], `"playbook":"add-nodes"`) {
		t.Fatalf("the journal Secret's plan: %v %v", err, s.Annotations)
	}
	// n3 joined before the controller's end: Decide alone would run nothing.
	if err := h.c.Create(context.Background(), node("n3", "v1.37.2", true)); err != nil {
		t.Fatal(err)
	}
	h.r.ExtraVars = nil
	h.reconcile(t)
	runs = h.runs(t)
	if len(runs) != 2 || runs[1].Playbook != "add-nodes" || runs[1].ResumedFrom != runs[0].ID || runs[1].Outcome != "ok" {
		t.Fatalf("want add-nodes resumed to its end: %+v\n%s", runs, h.out)
	}
	// Then nothing is left.
	h.reconcile(t)
	if runs := h.runs(t); len(runs) != 2 {
		t.Errorf("another run after the resumed one: %+v", runs)
	}
	if _, st := h.get(t); st.Phase != "Ready" || st.ReadyNodes != "3/3" {
		t.Errorf("status: %+v", st)
	}
}
