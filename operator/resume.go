package operator

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
)

// A run of the controller resumes where the previous leader's stopped
// (its pod deleted, its node drained, the process killed), without running
// again a task that finished on its host. Two things make that work in a
// pod whose work directory is an emptyDir:
//
//   - The journal lives where every master's controller finds it: a Secret
//     (journalSecretPrefix + the cluster's name, beside the credentials
//     Secret), in the API server's etcd on the masters, written again at
//     the end of every task while the run goes on. A Secret and not a
//     ConfigMap: the journal holds what tasks registered (never a secret,
//     but the cluster's addresses, tokens' names, file lists). A new
//     leader writes it back into its work directory and runs the same
//     playbook with --resume.
//   - A resumed run takes from the journal only the tasks that finished on
//     their hosts; a task that ran on the control machine or left its
//     product there (downloads, certificates, kubeconfigs, the PKI pulled
//     from the masters) runs again (journal.Reusable), since the new pod's
//     work directory holds none of it. Those tasks are idempotent and
//     rebuild it from the offline bundle and the cluster's PKI on its
//     masters (roles/identity), as the first run of a new pod does.
//
// A shared volume for the work directory was the other way: a bare cluster
// has no storage every master reaches, and a hostPath would follow one
// master only. The journal is small (gzip'd JSON lines: a few KiB per host
// of an add-nodes); one larger than a Secret holds (mirrorLimit) is not
// mirrored, and a new leader then runs the playbook from its start, as the
// idempotent playbooks allow.

// journalSecretPrefix names the Secret of a cluster's run journal.
const journalSecretPrefix = "kubexm-journal-"

// journalKey is the Secret's key holding the gzip'd journal.
const journalKey = "journal.jsonl.gz"

// mirrorLimit keeps the Secret below the API server's 1 MiB object limit.
const mirrorLimit = 900 << 10

// journalSecret is the name of the Secret holding cluster's run journal.
func journalSecret(cluster string) string { return journalSecretPrefix + cluster }

// annotationPlan on the journal Secret is the plan of its run (playbook,
// -e values, the spec it ran on), which a new leader finishes before it
// decides anything else: a node that joined before the pod's end no
// longer asks for add-nodes, yet the run's last tasks are still to do.
const annotationPlan = "kubexm.mensylisir.io/plan"

// storedPlan is what annotationPlan holds.
type storedPlan struct {
	Playbook  string   `json:"playbook"`
	Vars      []string `json:"vars,omitempty"`
	OnApplied bool     `json:"onApplied,omitempty"`
	Message   string   `json:"message,omitempty"`
}

// interrupted is a run the journal Secret holds that did not end well: its
// id, its playbook, its plan (nil when the Secret names none) and the
// journal's lines.
type interrupted struct {
	ID, Playbook string
	Plan         *Plan
	data         []byte
}

// resumePlan is the plan that finishes the interrupted run.
func (in *interrupted) resumePlan() (Plan, bool) {
	if in == nil || in.Plan == nil || in.Plan.Playbook != in.Playbook {
		return Plan{}, false
	}
	p := *in.Plan
	p.Action, p.Reason = Run, "ResumingRun"
	p.Message = fmt.Sprintf("run %s, which an earlier controller left unfinished (%s)", in.ID, p.Message)
	return p, true
}

// readInterrupted returns the run of the cluster's journal Secret in
// namespace, if there is one that a new run of playbook may resume.
func (r *Reconciler) readInterrupted(ctx context.Context, namespace, cluster string) (*interrupted, error) {
	var s corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: journalSecret(cluster)}, &s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(s.Data[journalKey]))
	if err != nil {
		return nil, fmt.Errorf("the journal Secret %s/%s: %w", namespace, s.Name, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("the journal Secret %s/%s: %w", namespace, s.Name, err)
	}
	in := parseInterrupted(data)
	if raw := s.Annotations[annotationPlan]; in != nil && raw != "" {
		var sp storedPlan
		if err := json.Unmarshal([]byte(raw), &sp); err == nil {
			in.Plan = &Plan{Action: Run, Playbook: sp.Playbook, Vars: sp.Vars, OnApplied: sp.OnApplied, Message: sp.Message}
		}
	}
	return in, nil
}

// parseInterrupted reads a journal's header and end: nil when it has no
// header or the run ended ok (nothing to resume).
func parseInterrupted(data []byte) *interrupted {
	var in *interrupted
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		var rec journal.Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		switch rec.Type {
		case "header":
			in = &interrupted{ID: rec.Run, Playbook: rec.Playbook, data: data}
		case "end":
			if rec.Outcome == "ok" {
				return nil
			}
		}
	}
	if in == nil || in.ID == "" || filepath.Base(in.ID) != in.ID {
		return nil
	}
	return in
}

// restore writes the interrupted run's journal into workDir, where --resume
// reads it, unless the directory already holds that run (the same
// controller's work directory, whose copy is the newer).
func (in *interrupted) restore(workDir string) error {
	dir := filepath.Join(workDir, "runs", in.ID)
	path := filepath.Join(dir, journal.File)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("restore run %s: %w", in.ID, err)
	}
	if err := os.WriteFile(path, in.data, 0o600); err != nil {
		return fmt.Errorf("restore run %s: %w", in.ID, err)
	}
	return nil
}

// journalMirror copies a run's journal into the cluster's journal Secret
// at the end of every task, from a goroutine of its own: the run never
// waits for the API server.
type journalMirror struct {
	r         *Reconciler
	namespace string
	cluster   string
	workDir   string
	plan      string // annotationPlan's value

	mu      sync.Mutex
	run     string // the run's id, from its first event
	last    []byte // the journal last written
	version string // the Secret's resourceVersion after the last write
	warned  bool
	poke    chan struct{}
	done    chan struct{}
}

func (r *Reconciler) newMirror(ctx context.Context, namespace, cluster, workDir string, plan Plan) *journalMirror {
	sp, _ := json.Marshal(storedPlan{Playbook: plan.Playbook, Vars: plan.Vars, OnApplied: plan.OnApplied, Message: plan.Message})
	m := &journalMirror{r: r, namespace: namespace, cluster: cluster, workDir: workDir, plan: string(sp), poke: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-m.poke:
				if !ok {
					return
				}
				m.write(ctx)
			}
		}
	}()
	return m
}

// sink passes the run's events to next and, at the end of each task,
// has the journal written.
func (m *journalMirror) sink(next model.Sink) model.Sink {
	return model.SinkFunc(func(e model.Event) {
		next.Emit(e)
		if e.Run != "" {
			m.mu.Lock()
			m.run = e.Run
			m.mu.Unlock()
		}
		if e.Kind == model.EventTaskEnd || e.Kind == model.EventRecap {
			select {
			case m.poke <- struct{}{}:
			default:
			}
		}
	})
}

// forget removes the journal Secret: its run will not be resumed.
func (r *Reconciler) forget(ctx context.Context, namespace, cluster string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: journalSecret(cluster)}}
	if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		r.logf("the journal Secret %s/%s: %v", namespace, s.Name, err)
	}
}

// finish stops the goroutine and writes the journal as the run left it
// (also after the controller was told to stop: a bounded write of its
// own), or, after a run that succeeded, removes the Secret.
func (m *journalMirror) finish(ctx context.Context, ok bool) {
	close(m.poke)
	<-m.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if !ok {
		m.write(ctx)
		return
	}
	m.r.forget(ctx, m.namespace, m.cluster)
}

// write puts the journal into the Secret when it changed.
func (m *journalMirror) write(ctx context.Context) {
	m.mu.Lock()
	run := m.run
	m.mu.Unlock()
	if run == "" {
		return
	}
	data, err := os.ReadFile(filepath.Join(m.workDir, "runs", run, journal.File))
	if err != nil || bytes.Equal(data, m.last) {
		return
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	name := journalSecret(m.cluster)
	if buf.Len() > mirrorLimit {
		if !m.warned {
			m.warned = true
			m.r.logf("run %s: the journal (%d bytes gzip'd) is larger than the Secret %s/%s may hold: a new leader would run the playbook from its start", run, buf.Len(), m.namespace, name)
		}
		return
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: name, ResourceVersion: m.version,
			Labels:      map[string]string{"app.kubernetes.io/name": "kubexm-controller", "app.kubernetes.io/managed-by": "kubexm", "kubexm.mensylisir.io/cluster": m.cluster},
			Annotations: map[string]string{annotationPlan: m.plan}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{journalKey: buf.Bytes()},
	}
	if m.version == "" {
		err = m.r.Client.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			// An earlier run's: this run's replaces it.
			var cur corev1.Secret
			if err = m.r.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err == nil {
				s.ResourceVersion = cur.ResourceVersion
				err = m.r.Client.Update(ctx, s)
			}
		}
	} else {
		err = m.r.Client.Update(ctx, s)
	}
	if err != nil {
		m.version = ""
		m.r.logf("run %s: write the journal Secret %s/%s: %v", run, m.namespace, name, err)
		return
	}
	m.version, m.last = s.ResourceVersion, data
}

// resumable says whether err is a resume the engine refused because the
// journal is of another playbook or inventory: the run starts anew.
func resumable(err error) bool { return !errors.Is(err, journal.ErrOtherRun) }
