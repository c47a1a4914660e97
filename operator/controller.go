package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	kxschema "github.com/mensylisir/kubexm/schema"
)

// GVK is the Cluster resource's group, version and kind.
var GVK = schema.GroupVersionKind{Group: strings.Split(kxschema.APIVersion, "/")[0], Version: strings.Split(kxschema.APIVersion, "/")[1], Kind: kxschema.Kind}

// NewCluster is an empty Cluster object for the client.
func NewCluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	return u
}

// Reconciler reconciles Cluster objects: it decides (Decide), runs the
// playbook through Runner as `kubexm play` does, and writes the status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Runner is the CLI's; its LoadInventory is given the credentials of
	// the object's Secret for each run.
	Runner lifecycle.Runner
	// WorkDir holds each cluster's work directory (WorkDir/<name>), as the
	// CLI's .kubexm does: the same directory means the same lock.
	WorkDir string
	// OfflineBundle is the bundle the runs install from ("" for none).
	OfflineBundle string
	// ExtraVars are -e values for every run (the site's).
	ExtraVars []string
	// LockWait is how long a run waits for the cluster's lock (a CLI run).
	LockWait time.Duration
	// Out receives each run's output.
	Out io.Writer
	// Metrics measures the runs and the statuses written (nil: nothing).
	Metrics *Metrics
	Now     func() time.Time
}

// SetupWithManager registers the reconciler for Cluster objects.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A change of the spec or of the annotations is reconciled; the
	// status, which the controller and the runs write, is not.
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).For(NewCluster(), builder.WithPredicates(changed)).Named("kubexm-cluster").Complete(r)
}

// refresh is how often a cluster with nothing to run is looked at again:
// its nodes' readiness and versions in the status, a node gone.
const refresh = 5 * time.Minute

// Reconcile makes one step towards the spec of one Cluster: it runs at most
// one playbook, then asks to be called again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := NewCluster()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	dir := filepath.Join(r.WorkDir, obj.GetName())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ctrl.Result{}, fmt.Errorf("work directory: %w", err)
	}
	st, err := StatusOf(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	in, file, err := r.input(ctx, obj, dir, st)
	if err != nil {
		var spec *specError
		if errors.As(err, &spec) {
			return ctrl.Result{}, r.finish(ctx, obj, Plan{Action: Refuse, Reason: "InvalidSpec", Message: spec.Error()}, Input{})
		}
		return ctrl.Result{}, err
	}
	plan := Decide(in)
	// A run an earlier leader left unfinished is finished first, unless
	// the cluster is paused or its spec refused (resume.go).
	var prev *interrupted
	if plan.Action != Paused && plan.Action != Refuse {
		if prev, err = r.readInterrupted(ctx, credentialsNamespace(obj), obj.GetName()); err != nil {
			r.logf("%s: %v; the run starts from the beginning", obj.GetName(), err)
		}
		// Decide's own plan of that playbook stands (current -e values; a
		// run from the beginning when the journal is of another inventory).
		if p, ok := prev.resumePlan(); ok && (plan.Action != Run || plan.Playbook != p.Playbook) {
			plan = p
		}
	}
	switch plan.Action {
	case Paused, Refuse:
		return ctrl.Result{RequeueAfter: refresh}, r.finish(ctx, obj, plan, in)
	case Converged:
		if err := r.setAppliedSpec(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: refresh}, r.finish(ctx, obj, plan, in)
	}
	if plan.OnApplied {
		file = in.appliedFile
	}
	return r.run(ctx, obj, plan, file, in, prev)
}

// specError is a spec the schema refuses.
type specError struct{ err error }

func (e *specError) Error() string { return e.err.Error() }

// input gathers what Decide needs: the spec loaded as a cluster.yaml
// (written to dir/controller-cluster.yaml, the file the runs read), the applied spec,
// the status and the API server's nodes.
func (r *Reconciler) input(ctx context.Context, obj *unstructured.Unstructured, dir string, st kxschema.ClusterStatus) (Input, string, error) {
	specRaw, _, _ := unstructured.NestedMap(obj.Object, "spec")
	file, err := writeClusterFile(dir, "controller-cluster.yaml", obj.GetName(), specRaw)
	if err != nil {
		return Input{}, "", err
	}
	c, groups, err := loadCluster(file)
	if err != nil {
		return Input{}, "", &specError{err}
	}
	in := Input{Spec: &c.Spec, Groups: groups, Annotations: obj.GetAnnotations(), Generation: obj.GetGeneration(), Status: st, Now: r.now()}
	if raw := obj.GetAnnotations()[AnnotationAppliedSpec]; raw != "" {
		var applied map[string]any
		if err := json.Unmarshal([]byte(raw), &applied); err != nil {
			return Input{}, "", &specError{fmt.Errorf("annotation %s: %w", AnnotationAppliedSpec, err)}
		}
		f, err := writeClusterFile(dir, "controller-applied.yaml", obj.GetName(), applied)
		if err != nil {
			return Input{}, "", err
		}
		a, ag, err := loadCluster(f)
		if err != nil {
			return Input{}, "", &specError{fmt.Errorf("annotation %s: %w", AnnotationAppliedSpec, err)}
		}
		in.Applied, in.AppliedGroups, in.appliedFile = &a.Spec, ag, f
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return Input{}, "", fmt.Errorf("list nodes: %w", err)
	}
	in.Nodes = map[string]Node{}
	for _, n := range nodes.Items {
		node := Node{KubeletVersion: n.Status.NodeInfo.KubeletVersion}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				node.Ready = true
			}
		}
		in.Nodes[n.Name] = node
	}
	return in, file, nil
}

// writeClusterFile writes a spec as the cluster.yaml of the runs: the
// object's spec without its privateKeyPath fields, which name files on the
// machine the object was made on, and without spec.operator. A run's credentials are the Secret's, in
// its inventory only.
func writeClusterFile(dir, name, cluster string, spec map[string]any) (string, error) {
	spec = runtime.DeepCopyJSON(spec)
	dropKey := func(v any) {
		if m, ok := v.(map[string]any); ok {
			delete(m, "privateKeyPath")
		}
	}
	hosts, _ := spec["hosts"].([]any)
	for _, h := range hosts {
		dropKey(h)
		if hm, ok := h.(map[string]any); ok {
			dropKey(hm["bastion"])
		}
	}
	dropKey(spec["bastion"])
	// spec.operator is the CLI's to apply (Decide ignores it), and its
	// validation asks for the key files just dropped.
	delete(spec, "operator")
	doc := map[string]any{"apiVersion": kxschema.APIVersion, "kind": kxschema.Kind, "metadata": map[string]any{"name": cluster}, "spec": spec}
	data, err := sigsyaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("cluster file: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("cluster file: %w", err)
	}
	return path, nil
}

func loadCluster(path string) (*kxschema.Cluster, map[string][]string, error) {
	c, _, err := validate.Load(path)
	if err != nil {
		return nil, nil, err
	}
	inv, err := kxschema.Inventory(c, path)
	if err != nil {
		return nil, nil, err
	}
	return c, inv.Groups, nil
}

// run runs the plan's playbook as `kubexm play` does, with the Secret's
// credentials, and writes what happened to the status and as Events.
func (r *Reconciler) run(ctx context.Context, obj *unstructured.Unstructured, plan Plan, file string, in Input, prev *interrupted) (ctrl.Result, error) {
	dir := filepath.Dir(file)
	creds, err := r.credentials(ctx, obj, dir)
	if err != nil {
		return ctrl.Result{}, r.finish(ctx, obj, Plan{Action: Refuse, Reason: "CredentialsMissing", Message: err.Error()}, in)
	}
	defer creds.remove()
	started := r.now()
	if err := r.writeStatus(ctx, obj, func(st *kxschema.ClusterStatus) {
		st.Phase = "Progressing"
		setCondition(st, obj.GetGeneration(), started, "Progressing", "True", plan.Reason, plan.Playbook+": "+plan.Message)
		st.LastRun = &kxschema.RunStatus{Playbook: plan.Playbook, StartedAt: started.Format(time.RFC3339)}
	}); err != nil {
		return ctrl.Result{}, err
	}
	r.event(obj, corev1.EventTypeNormal, "RunStarted", plan.Playbook, "%s: %s", plan.Playbook, plan.Message)
	r.Metrics.runStarted(obj.GetName(), plan.Playbook)
	defer r.Metrics.runStopped(obj.GetName(), plan.Playbook)
	// The run of the same playbook an earlier leader left unfinished is
	// resumed (resume.go).
	ns := credentialsNamespace(obj)
	resume := ""
	if prev != nil && prev.Playbook == plan.Playbook {
		if err := prev.restore(dir); err != nil {
			r.logf("%s: %v; the run starts from the beginning", obj.GetName(), err)
		} else {
			resume = prev.ID
			r.event(obj, corev1.EventTypeNormal, "RunResumed", plan.Playbook, "%s: resuming run %s, which an earlier controller left unfinished: the tasks that finished on their hosts are not run again", plan.Playbook, prev.ID)
		}
	}
	runner := r.Runner
	base := runner.LoadInventory
	runner.LoadInventory = func(f *lifecycle.ClusterFile, s *matrix.Support) (*inventory.Inventory, error) {
		inv, err := base(f, s)
		if err != nil {
			return nil, err
		}
		creds.apply(inv)
		return inv, nil
	}
	out := r.Out
	if out == nil {
		out = io.Discard
	}
	var text model.Sink = output.NewText(out, 0)
	if runner.TextSink != nil {
		var stop func()
		text, stop = runner.TextSink(out, 0)
		defer stop()
	}
	mirror := r.newMirror(ctx, ns, obj.GetName(), dir, plan)
	req := lifecycle.Request{
		Playbook: plan.Playbook, Inventory: file, WorkDir: dir, OfflineBundle: r.OfflineBundle,
		ExtraVars: append(append(slices.Clone(r.ExtraVars), "cluster_resource_by_controller=true"), plan.Vars...),
		Output:    "text", Stdout: out, Stderr: out, LockWait: r.LockWait, Resume: resume, Sink: mirror.sink(text),
		// The run resumed may be another pod's, whose work directory this
		// one does not have (resume.go).
		ResumeRerunsControl: true,
	}
	recap, runErr := runner.Run(ctx, req)
	if runErr != nil && recap == nil && resume != "" && !resumable(runErr) {
		// The playbook or the cluster changed since. A step Decide asks
		// for runs from the beginning; the unfinished run's own plan is
		// dropped, and the next reconcile decides on the cluster as it is.
		r.logf("%s: %v; the run starts from the beginning", obj.GetName(), runErr)
		if plan.Reason == "ResumingRun" {
			mirror.finish(ctx, true)
			r.event(obj, corev1.EventTypeNormal, "RunNotResumed", plan.Playbook, "%s: run %s is not resumed: %v", plan.Playbook, resume, runErr)
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		req.Resume = ""
		recap, runErr = runner.Run(ctx, req)
	}
	mirror.finish(ctx, runErr == nil)
	finished := r.now()
	last := &kxschema.RunStatus{Playbook: plan.Playbook, StartedAt: started.Format(time.RFC3339), FinishedAt: finished.Format(time.RFC3339), Result: "Succeeded"}
	if recap != nil {
		last.ID = recap.RunID
	}
	if runErr != nil {
		last.Result, last.Message = "Failed", runErr.Error()
		if recap != nil && recap.Cancelled {
			last.Result = "Interrupted"
		}
	}
	r.Metrics.runEnded(obj.GetName(), plan.Playbook, last.Result, finished.Sub(started))
	if runErr != nil {
		return ctrl.Result{}, r.finish(ctx, obj, Plan{Action: Refuse, Reason: "RunFailed", Message: fmt.Sprintf("%s run %s failed: %v", plan.Playbook, last.ID, runErr)}, in, last)
	}
	r.event(obj, corev1.EventTypeNormal, "RunSucceeded", plan.Playbook, "%s run %s succeeded", plan.Playbook, last.ID)
	if err := r.afterSuccess(ctx, obj, plan); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, obj, func(st *kxschema.ClusterStatus) {
		setCondition(st, obj.GetGeneration(), finished, "Progressing", "False", "RunSucceeded", fmt.Sprintf("%s run %s succeeded", plan.Playbook, last.ID))
		st.LastRun = last
	}); err != nil {
		return ctrl.Result{}, err
	}
	// The next step, if any, is decided on what the run left.
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// afterSuccess records what a run did on the object: the renewal
// annotation is done; create-cluster applied the whole spec.
func (r *Reconciler) afterSuccess(ctx context.Context, obj *unstructured.Unstructured, plan Plan) error {
	switch plan.Playbook {
	case "certs-renew":
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationRenewCertificates: nil}}})
		if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("remove the %s annotation: %w", AnnotationRenewCertificates, err)
		}
	case "create-cluster":
		return r.setAppliedSpec(ctx, obj)
	}
	return nil
}

// setAppliedSpec records the object's spec as applied (the annotation),
// unless it already is.
func (r *Reconciler) setAppliedSpec(ctx context.Context, obj *unstructured.Unstructured) error {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if obj.GetAnnotations()[AnnotationAppliedSpec] == string(raw) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationAppliedSpec: string(raw)}}})
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate the applied spec: %w", err)
	}
	return nil
}

// finish writes the status of a reconcile that runs nothing (more): the
// generation observed, the phase and the conditions of the plan, the nodes.
func (r *Reconciler) finish(ctx context.Context, obj *unstructured.Unstructured, plan Plan, in Input, last ...*kxschema.RunStatus) error {
	now := r.now()
	// Once per refusal, not at every look.
	if prev := conditionOf(in.Status, "Degraded"); plan.Action == Refuse && (prev.Status != "True" || prev.Reason != plan.Reason || prev.Message != plan.Message) {
		r.event(obj, corev1.EventTypeWarning, plan.Reason, "Reconcile", "%s", plan.Message)
	}
	return r.writeStatus(ctx, obj, func(st *kxschema.ClusterStatus) {
		ApplyPlan(st, obj, plan, in.Groups, in.Nodes, now)
		if len(last) > 0 {
			st.LastRun = last[0]
		}
	})
}

// ApplyPlan sets a status from a plan that runs nothing and the API
// server's nodes: the status writer's rules.
func ApplyPlan(st *kxschema.ClusterStatus, obj *unstructured.Unstructured, plan Plan, groups map[string][]string, nodes map[string]Node, now time.Time) {
	gen := obj.GetGeneration()
	if nodes != nil {
		setNodes(st, groups, nodes)
	}
	allReady := st.ReadyNodes != "" && !strings.HasPrefix(st.ReadyNodes, "0/") && readyAll(st)
	readyStatus, readyReason := "False", "NodesNotReady"
	if allReady {
		readyStatus, readyReason = "True", "NodesReady"
	}
	setCondition(st, gen, now, "Ready", readyStatus, readyReason, st.ReadyNodes+" nodes Ready")
	switch plan.Action {
	case Paused:
		setCondition(st, gen, now, "Progressing", "False", plan.Reason, plan.Message)
		return
	case Refuse:
		// A spec that cannot be applied is observed; one whose run failed,
		// or could not start, is not yet: the next reconcile tries again.
		if plan.Reason != "RunFailed" && plan.Reason != "CredentialsMissing" {
			st.ObservedGeneration = gen
		}
		st.Phase = "Degraded"
		setCondition(st, gen, now, "Progressing", "False", plan.Reason, plan.Message)
		setCondition(st, gen, now, "Degraded", "True", plan.Reason, plan.Message)
	case Converged:
		st.ObservedGeneration = gen
		st.Phase = "Ready"
		if !allReady {
			st.Phase = "Degraded"
		}
		setCondition(st, gen, now, "Progressing", "False", plan.Reason, plan.Message)
		if allReady {
			setCondition(st, gen, now, "Degraded", "False", plan.Reason, plan.Message)
		} else {
			setCondition(st, gen, now, "Degraded", "True", "NodesNotReady", st.ReadyNodes+" nodes Ready")
		}
	}
}

func conditionOf(st kxschema.ClusterStatus, typ string) kxschema.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return kxschema.Condition{}
}

func readyAll(st *kxschema.ClusterStatus) bool {
	for _, n := range st.Nodes {
		if !n.Ready {
			return false
		}
	}
	return true
}

// setNodes lists the spec's Kubernetes hosts as the API server reports them.
func setNodes(st *kxschema.ClusterStatus, groups map[string][]string, nodes map[string]Node) {
	st.Nodes = nil
	ready, low := 0, ""
	for _, h := range groups["k8s_cluster"] {
		ns := kxschema.NodeStatus{Name: h}
		for _, g := range []string{"etcd", "master", "worker"} {
			for _, m := range groups[g] {
				if m == h {
					ns.Roles = append(ns.Roles, g)
				}
			}
		}
		if n, ok := nodes[h]; ok {
			ns.KubernetesVersion, ns.Ready = n.KubeletVersion, n.Ready
			if low == "" || versionLess(n.KubeletVersion, low) {
				low = n.KubeletVersion
			}
		}
		if ns.Ready {
			ready++
		}
		st.Nodes = append(st.Nodes, ns)
	}
	st.ReadyNodes = fmt.Sprintf("%d/%d", ready, len(st.Nodes))
	st.KubernetesVersion = low
}

// setCondition sets one condition, keeping its lastTransitionTime while its
// status stays.
func setCondition(st *kxschema.ClusterStatus, gen int64, now time.Time, typ, status, reason, msg string) {
	c := kxschema.Condition{Type: typ, Status: status, ObservedGeneration: gen, LastTransitionTime: now.UTC().Format(time.RFC3339), Reason: reason, Message: msg}
	for i, old := range st.Conditions {
		if old.Type == typ {
			if old.Status == status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// writeStatus reads the object again (a run writes its status too), changes
// its status with set and updates the status subresource.
func (r *Reconciler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, set func(*kxschema.ClusterStatus)) error {
	cur := NewCluster()
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return fmt.Errorf("read the Cluster: %w", err)
	}
	st, err := StatusOf(cur)
	if err != nil {
		return err
	}
	set(&st)
	if err := SetStatus(cur, st); err != nil {
		return err
	}
	if err := r.Client.Status().Update(ctx, cur); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("write the status (retried): %w", err)
		}
		return fmt.Errorf("write the status: %w", err)
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	r.Metrics.status(cur.GetName(), st)
	return nil
}

func (r *Reconciler) event(obj *unstructured.Unstructured, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// logf logs what the controller does beside the runs (their output is
// Out's).
func (r *Reconciler) logf(format string, args ...any) {
	ctrl.Log.WithName("kubexm-controller").Info(fmt.Sprintf(format, args...))
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}
