// Package kube is the k8s builtin: objects applied (server-side apply),
// read, patched, waited for and deleted through the Kubernetes API with
// client-go, from the host that holds the kubeconfig, never with kubectl.
//
// It is a package of its own, as helm is, so that only what registers the
// builtins (builtins.All) compiles client-go. It knows the API's generic
// verbs and kubectl's notion of a rolled-out workload, nothing of what a
// cluster needs: the roles say what to apply.
package kube

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// FieldManager is the field manager of every apply and patch: the fields
// kubexm set are kubexm's in each object's managedFields.
const FieldManager = "kubexm"

// Builtins returns the builtins of this package, sharing one client cache
// for the run.
func Builtins() []step.Builtin { return []step.Builtin{&Builtin{}} }

// Builtin is the k8s step type.
type Builtin struct {
	clients clients
	// evictRetry is the pause before an eviction a PodDisruptionBudget
	// refused is asked again (evictRetryDelay; tests shorten it).
	evictRetry time.Duration
}

// Spec documents the builtin.
func (*Builtin) Spec() step.Spec {
	return step.Spec{
		Name:    "k8s",
		Summary: "Apply, read, patch, wait for or delete Kubernetes objects through the API server (client-go), from the host with the kubeconfig",
		Doc: `Talks to the API server of ` + "`kubeconfig`" + `, a kubeconfig on the host the
task runs on (read as root; usually delegated to the first master), with
client-go inside kubexm: no kubectl. Every connection to the API server is
opened by that host through the run's SSH connection, so the server needs to
be reachable from the host only. One client per host and kubeconfig serves
the whole run.

state present server-side applies each object of ` + "`src`" + ` (a manifest on the
host) or ` + "`definition`" + ` (YAML text, a mapping or a list of them; a kind ending
in List gives its items) with field manager ` + "`" + FieldManager + "`" + `, taking over
conflicting fields when force_conflicts: CustomResourceDefinitions first
(each new or changed one waited for until Established), then Namespaces,
then the rest in the manifest's order. An object is changed only when the
apply changed it (its content without the server's bookkeeping: managedFields,
resourceVersion, generation, status), so a re-run reports 0 changed. state
absent deletes the objects named by src, definition or api_version/kind/name,
and only those (one missing is no change). state patched merges ` + "`patch`" + `
into one object (its status with subresource status). state get reads one
object (name), a list (label_selector), or the objects of src or definition
(those that exist), registered as resources; with path, get is a raw GET of
that path of the API server (/readyz?verbose), its body registered as
content and its HTTP status as status, failed unless 2xx.

state cordoned marks the Node name unschedulable, uncordoned schedulable
again (as kubectl cordon and uncordon: changed only when it was not so).
drained cordons it and drains it with kubectl drain's own library
(k8s.io/kubectl/pkg/drain): each pod is evicted through the eviction API,
which respects PodDisruptionBudgets (an eviction refused for a budget is
asked again every 5 s), or deleted with disable_eviction; DaemonSet pods
stay (kubectl drain --ignore-daemonsets); a pod with emptyDir data is
refused unless delete_emptydir_data, a pod no controller manages unless
drain_force. It waits until the pods are gone, at most wait_timeout, and
fails naming the pods still on the node. Changed when the cordon changed
or a pod was taken; evicted_pods names them. With mark (an annotation), a
cordon is kubexm's own: cordoned sets the annotation with it, a node found
cordoned without it (someone else's cordon) is left so, and uncordoned
uncordons only a node that has it, removing it, so that an interrupted run
uncordons on its re-run what it cordoned and nothing else.

wait_for waits, after the apply or on the object read, until condition=TYPE
(or condition=TYPE=STATUS) holds, the workload has rolled out as kubectl
rollout status judges it (rollout: Deployment, DaemonSet, StatefulSet), the
object exists, or it is deleted; it watches the object rather than polling,
and fails after wait_timeout with the last reason; a rollout's failure adds
a line for each of the workload's pods: its node, phase, and why each
container that is not ready waits or ended (ErrImageNeverPull,
CrashLoopBackOff, not scheduled and why), and with failure_logs the last
lines of such a container's log.

Under --check nothing is written: applies and patches are server-side dry
runs and report what would change, deletes report what exists, a drain
lists the pods it would take (and fails as the drain would on pods it may
not take), nothing is
waited for (a get with wait_for is skipped), and with no kubeconfig on the
host yet (no cluster) present reports a change and get is skipped. --diff
shows each object as YAML before and after, without the server's
bookkeeping; a Secret's values are never shown (each key says whether it
changed). Results: ` + "`objects`, `changed_objects`" + ` (present, absent), ` + "`resources`" + `
(get, patched), ` + "`ready`" + ` (with wait_for), ` + "`content`, `status`" + ` (get with
path), ` + "`evicted_pods`" + ` (drained).`,
		Args: []step.Arg{
			{Name: "kubeconfig", Type: step.String, Required: true, Doc: "The kubeconfig on the host (read as root), e.g. the admin kubeconfig on a master."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent", "patched", "get", "cordoned", "uncordoned", "drained"}, Doc: "present applies, absent deletes, patched merges patch into one object, get reads; cordoned, uncordoned and drained act on the Node name."},
			{Name: "src", Type: step.String, Doc: "A manifest on the host (YAML documents or JSON), or a directory of them (its *.yaml, *.yml and *.json files, as kubectl -f DIR): the objects to apply, delete or read."},
			{Name: "definition", Type: step.Any, Doc: "The objects themselves: YAML text, a mapping or a list of mappings (as src)."},
			{Name: "api_version", Type: step.String, Default: "v1", Doc: "The object's apiVersion (get, patched, absent by name)."},
			{Name: "kind", Type: step.String, Doc: "The object's kind (get, patched, absent by name)."},
			{Name: "name", Type: step.String, Doc: "The object's name; get without it lists."},
			{Name: "namespace", Type: step.String, Doc: "The namespace of a namespaced object that does not name its own (default: default)."},
			{Name: "label_selector", Type: step.String, Doc: "get without name: only the objects these labels select."},
			{Name: "patch", Type: step.Any, Doc: "patched: a JSON merge patch, as a mapping or JSON/YAML text."},
			{Name: "subresource", Type: step.String, Doc: "patched: the subresource written, e.g. status."},
			{Name: "force_conflicts", Type: step.Bool, Default: true, Doc: "present: take fields another manager set (kubectl apply --server-side --force-conflicts)."},
			{Name: "wait_for", Type: step.String, Doc: "condition=TYPE[=STATUS], rollout, exists or deleted: on every object applied or deleted, or the object read."},
			{Name: "wait_timeout", Type: step.Duration, Default: "60s", Doc: "How long wait_for or a drain may take."},
			{Name: "path", Type: step.String, Doc: "get: a raw GET of this path of the API server, e.g. /readyz?verbose."},
			{Name: "delete_emptydir_data", Type: step.Bool, Default: false, Doc: "drained: take pods with emptyDir volumes too, their data lost (kubectl drain --delete-emptydir-data)."},
			{Name: "drain_force", Type: step.Bool, Default: false, Doc: "drained: take pods no controller manages too (kubectl drain --force)."},
			{Name: "mark", Type: step.String, Doc: "cordoned, drained, uncordoned: an annotation that says this task's cordon is kubexm's: set with the cordon (a node someone else cordoned is left as it is, and still drained), and an uncordon only touches a node that has it, removing it."},
			{Name: "failure_logs", Type: step.Int, Default: 0, Doc: "wait_for rollout: when the rollout fails, the last this many lines of the log of each container that is not ready follow its pod's line (the previous run's for a container waiting to restart), for at most 3 pods (kubectl logs --tail)."},
			{Name: "disable_eviction", Type: step.Bool, Default: false, Doc: "drained: delete the pods instead of evicting them, PodDisruptionBudgets not asked (kubectl drain --disable-eviction)."},
			{Name: "drain_keep", Type: step.String, Doc: "drained: namespace/name of a pod the drain leaves on the node: the in-cluster controller's own pod, whose run drains the node it runs on and would otherwise end itself (after kubectl drain's own checks: a kept pod with emptyDir data still needs delete_emptydir_data)."},
		},
		Examples: []string{`k8s:
  kubeconfig: /etc/kubernetes/admin.conf
  src: /etc/kubernetes/addons/kube-flannel.yaml
delegate_to: "{{ index .groups.master 0 }}"
run_once: true`, `k8s:
  kubeconfig: /etc/kubernetes/admin.conf
  state: get
  api_version: apps/v1
  kind: Deployment
  namespace: kube-system
  name: coredns
  wait_for: rollout
  wait_timeout: 5m
register: coredns_rollout`},
	}
}

// request is one task's arguments.
type request struct {
	state, src, kubeconfig    string
	definition                any
	gvk                       schema.GroupVersionKind
	name, namespace, selector string
	patch                     any
	subresource               string
	force                     bool
	waitFor                   condition
	waitSpec                  string
	waitTimeout               time.Duration
	path                      string
	deleteEmptyDir            bool
	drainForce                bool
	disableEviction           bool
	mark                      string
	failureLogs               int
	drainKeep                 string // namespace/name
}

func parse(args step.Args) (*request, error) {
	r := &request{
		state: args.String("state"), src: args.String("src"), kubeconfig: args.String("kubeconfig"),
		definition: args["definition"], name: args.String("name"), namespace: args.String("namespace"),
		selector: args.String("label_selector"), patch: args["patch"], subresource: args.String("subresource"),
		force: args.Bool("force_conflicts"), waitSpec: args.String("wait_for"), waitTimeout: args.Duration("wait_timeout"),
		path: args.String("path"), deleteEmptyDir: args.Bool("delete_emptydir_data"),
		drainForce: args.Bool("drain_force"), disableEviction: args.Bool("disable_eviction"), mark: args.String("mark"),
		failureLogs: args.Int("failure_logs"), drainKeep: args.String("drain_keep"),
	}
	if k := r.drainKeep; k != "" {
		if ns, name, ok := strings.Cut(k, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("drain_keep %q: want namespace/name of a pod", k)
		}
	}
	if r.failureLogs < 0 {
		return nil, fmt.Errorf("failure_logs %d: want a number of lines, 0 for none", r.failureLogs)
	}
	if r.failureLogs > 0 && r.waitSpec != "rollout" {
		return nil, errors.New("failure_logs goes with wait_for: rollout (the logs of the pods that did not roll out)")
	}
	gv, err := schema.ParseGroupVersion(args.String("api_version"))
	if err != nil {
		return nil, fmt.Errorf("api_version: %w", err)
	}
	r.gvk = gv.WithKind(args.String("kind"))
	if r.waitSpec != "" {
		if r.waitFor, err = parseWait(r.waitSpec); err != nil {
			return nil, err
		}
	}
	byObjects := r.src != "" || r.definition != nil
	switch r.state {
	case "present":
		if !byObjects {
			return nil, errors.New("state present needs src or definition")
		}
	case "absent":
		if !byObjects && (r.gvk.Kind == "" || r.name == "") {
			return nil, errors.New("state absent needs src, definition, or kind and name")
		}
	case "patched":
		if r.gvk.Kind == "" || r.name == "" || r.patch == nil {
			return nil, errors.New("state patched needs kind, name and patch")
		}
	case "cordoned", "uncordoned", "drained":
		if r.name == "" {
			return nil, fmt.Errorf("state %s needs name (the Node)", r.state)
		}
	case "get":
		if r.path != "" && (byObjects || r.gvk.Kind != "" || r.waitFor != nil) {
			return nil, errors.New("get with path reads that path only: no kind, src, definition or wait_for")
		}
		if r.gvk.Kind == "" && !byObjects && r.path == "" {
			return nil, errors.New("state get needs kind, src, definition or path")
		}
		if r.waitFor != nil && r.name == "" && !byObjects {
			return nil, errors.New("wait_for on a get needs name, src or definition")
		}
	}
	if r.src != "" && r.definition != nil {
		return nil, errors.New("give src or definition, not both")
	}
	return r, nil
}

// Run does the task on one host.
func (b *Builtin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	r, err := parse(args)
	if err != nil {
		return step.Result{}, err
	}
	if env.Check && r.state == "get" && r.waitFor != nil {
		return step.Result{Skipped: true, Msg: "not waited for under --check"}, nil
	}
	c, err := b.clients.get(ctx, env.Target, r.kubeconfig)
	if errors.Is(err, errNoKubeconfig) && env.Check {
		switch r.state {
		case "present", "patched", "cordoned", "uncordoned", "drained":
			return step.Result{Changed: true, Msg: fmt.Sprintf("would %s (%v: the cluster is not there yet)", verb(r.state), err)}, nil
		case "get":
			return step.Result{Skipped: true, Msg: err.Error()}, nil
		}
	}
	if errors.Is(err, errNoKubeconfig) && r.state == "absent" {
		return step.Result{Msg: fmt.Sprintf("%v: no cluster to delete from", err), Data: map[string]any{"changed_objects": []string{}}}, nil
	}
	if err != nil {
		return step.Result{}, err
	}
	switch {
	case r.state == "get" && r.path != "":
		return b.raw(ctx, c, r)
	case r.state == "cordoned" || r.state == "uncordoned" || r.state == "drained":
		return b.node(ctx, env, c, r)
	case r.state == "get" && r.src == "" && r.definition == nil:
		return b.get(ctx, c, r)
	case r.state == "patched":
		return b.patched(ctx, env, c, r)
	}
	objs, err := b.objects(ctx, env, r)
	if err != nil || objs == nil {
		if errors.Is(err, errNoManifest) && env.Check && r.state == "get" {
			return step.Result{Skipped: true, Msg: err.Error()}, nil
		}
		if errors.Is(err, errNoManifest) && env.Check {
			return step.Result{Changed: true, Msg: fmt.Sprintf("would %s %s (not on the host yet)", verb(r.state), r.src)}, nil
		}
		return step.Result{}, err
	}
	switch r.state {
	case "absent":
		return b.absent(ctx, env, c, r, objs)
	case "get":
		return b.getObjects(ctx, c, r, objs)
	}
	return b.present(ctx, env, c, r, objs)
}

func verb(state string) string {
	return map[string]string{"present": "apply", "patched": "patch", "absent": "delete", "cordoned": "cordon", "uncordoned": "uncordon", "drained": "drain"}[state]
}

var errNoManifest = errors.New("manifest not found")

// objects are the objects a task names: its manifest on the host, its
// definition, or the one object of api_version/kind/name.
func (b *Builtin) objects(ctx context.Context, env *step.Env, r *request) ([]*unstructured.Unstructured, error) {
	switch {
	case r.src != "":
		info, err := env.Target.Stat(ctx, r.src, true)
		if err != nil {
			return nil, err
		}
		if !info.Exists {
			return nil, fmt.Errorf("%w: %s on %s", errNoManifest, r.src, env.Host)
		}
		files := []string{r.src}
		if info.IsDir {
			if files, err = manifestsIn(ctx, env.Target, r.src); err != nil {
				return nil, err
			}
		}
		var out []*unstructured.Unstructured
		for _, f := range files {
			var buf bytes.Buffer
			if err := env.Target.Get(ctx, f, &buf, true); err != nil {
				return nil, err
			}
			objs, err := decode(buf.Bytes(), f)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	case r.definition != nil:
		switch d := r.definition.(type) {
		case string:
			return decode([]byte(d), "definition")
		case map[string]any:
			return fromMap(d, "definition")
		case []any:
			var out []*unstructured.Unstructured
			for i, item := range d {
				m, ok := item.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("definition: item %d is not a mapping", i+1)
				}
				objs, err := fromMap(m, fmt.Sprintf("definition: item %d", i+1))
				if err != nil {
					return nil, err
				}
				out = append(out, objs...)
			}
			return out, nil
		}
		return nil, fmt.Errorf("definition: give YAML text, a mapping or a list of mappings, not %T", r.definition)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	u.SetName(r.name)
	u.SetNamespace(r.namespace)
	return []*unstructured.Unstructured{u}, nil
}

// manifestsIn lists the manifests of a directory on the host as kubectl -f
// DIR reads them: its files named *.yaml, *.yml or *.json (not those of its
// subdirectories), in the order of their names.
func manifestsIn(ctx context.Context, t transport.Transport, dir string) ([]string, error) {
	res, err := t.Run(ctx, transport.Command{Become: true, Argv: []string{"find", dir, "-mindepth", "1", "-maxdepth", "1", "-type", "f",
		"(", "-name", "*.yaml", "-o", "-name", "*.yml", "-o", "-name", "*.json", ")", "-print0"}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return nil, fmt.Errorf("list the manifests of %s: %w", dir, err)
	}
	var files []string
	for f := range strings.SplitSeq(string(res.Stdout), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}

// objectResource is one object's resource client, its namespace filled in.
func (c *client) objectResource(obj *unstructured.Unstructured, defaultNS string) (dynamic.ResourceInterface, error) {
	ns := cmp.Or(obj.GetNamespace(), defaultNS, "default")
	ri, namespaced, err := c.resource(obj.GroupVersionKind(), ns)
	if err != nil {
		return nil, err
	}
	if namespaced {
		obj.SetNamespace(ns)
	}
	return ri, nil
}

// present applies each object and waits for it when asked.
func (b *Builtin) present(ctx context.Context, env *step.Env, c *client, r *request, objs []*unstructured.Unstructured) (step.Result, error) {
	res := step.Result{}
	names, changed := []string{}, []string{}
	var diffs []string
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: r.force}
	if env.Check {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	objs = applyOrder(objs)
	var newCRDs []*unstructured.Unstructured
	for _, obj := range objs {
		if len(newCRDs) > 0 && !isCRD(obj) {
			if err := establish(ctx, c, newCRDs); err != nil {
				return step.Result{}, err
			}
			newCRDs = nil
		}
		ri, err := c.objectResource(obj, r.namespace)
		name := describe(obj)
		names = append(names, name)
		if err != nil && env.Check && meta.IsNoMatchError(err) {
			// Its CRD is in this manifest or an earlier task, not applied
			// under --check.
			changed = append(changed, name)
			continue
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("%s: %w", name, err)
		}
		before, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			before, err = nil, nil
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("read %s: %w", name, err)
		}
		after, err := ri.Apply(ctx, obj.GetName(), obj, opts)
		if err != nil && env.Check && before == nil && apierrors.IsNotFound(err) {
			// Its namespace is in this manifest, not created under --check.
			changed = append(changed, name)
			continue
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("apply %s: %w", name, err)
		}
		bc, ac := comparable(before, false), comparable(after, false)
		if same(bc, ac) {
			continue
		}
		changed = append(changed, name)
		if isCRD(obj) && !env.Check {
			newCRDs = append(newCRDs, obj)
		}
		if env.Diff {
			diffs = append(diffs, diff(name, bc, ac))
		}
	}
	res.Changed = len(changed) > 0
	res.Diff = strings.Join(diffs, "")
	res.Data = map[string]any{"objects": names, "changed_objects": changed}
	res.Msg = fmt.Sprintf("%d of %d objects %s", len(changed), len(objs), map[bool]string{true: "would change", false: "changed"}[env.Check])
	return b.waited(ctx, env, c, r, objs, res), nil
}

// applyOrder is the order objects are applied in, as kubectl's and Helm's
// install orders go: CustomResourceDefinitions first, then Namespaces, then
// the rest as the manifest gives them, so that an object never comes before
// the kind or the namespace it needs.
func applyOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		switch {
		case isCRD(o):
			return 0
		case o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}):
			return 1
		}
		return 2
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return out
}

func isCRD(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().GroupKind() == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// crdEstablishTimeout bounds the wait for CRDs just created or changed:
// their controller sets Established within a second or two.
const crdEstablishTimeout = time.Minute

// establish waits until each CRD is Established, so that the API server
// serves its kind to the objects that follow it.
func establish(ctx context.Context, c *client, crds []*unstructured.Unstructured) error {
	established, err := parseWait("condition=Established")
	if err != nil {
		return err
	}
	for _, crd := range crds {
		ri, _, err := c.resource(crd.GroupVersionKind(), "")
		if err != nil {
			return err
		}
		if err := waitFor(ctx, ri, crd.GetName(), established, crdEstablishTimeout); err != nil {
			return fmt.Errorf("%s: %w", describe(crd), err)
		}
	}
	return nil
}

// waited is res after wait_for on objs (not under --check): failed with the
// reason when an object did not get there in time; ready says which.
func (b *Builtin) waited(ctx context.Context, env *step.Env, c *client, r *request, objs []*unstructured.Unstructured, res step.Result) step.Result {
	if r.waitFor == nil || env.Check {
		return res
	}
	if err := b.waitAll(ctx, c, r, objs); err != nil {
		res.Failed, res.Msg = true, res.Msg+"; "+err.Error()
		res.Data["ready"] = false
		return res
	}
	res.Data["ready"] = true
	return res
}

// waitAll waits for each object in turn (for rollout, the workloads only).
func (b *Builtin) waitAll(ctx context.Context, c *client, r *request, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if r.waitSpec == "rollout" && !isWorkload(obj.GetKind()) {
			continue
		}
		ri, err := c.objectResource(obj, r.namespace)
		if err != nil {
			return err
		}
		if err := waitFor(ctx, ri, obj.GetName(), r.waitFor, r.waitTimeout); err != nil {
			return fmt.Errorf("%s: %s: %w%s", describe(obj), r.waitSpec, err, r.podStates(ctx, c, ri, obj.GetName()))
		}
	}
	return nil
}

// podStates are the lines on a workload's pods that follow a rollout's
// failure ("" when the wait was for something else).
func (r *request) podStates(ctx context.Context, c *client, ri dynamic.ResourceInterface, name string) string {
	if r.waitSpec != "rollout" {
		return ""
	}
	if s := c.podStates(ctx, ri, name, r.failureLogs); s != "" {
		return "\n" + s
	}
	return ""
}

func isWorkload(kind string) bool {
	return kind == "Deployment" || kind == "DaemonSet" || kind == "StatefulSet"
}

// absent deletes each object that exists.
func (b *Builtin) absent(ctx context.Context, env *step.Env, c *client, r *request, objs []*unstructured.Unstructured) (step.Result, error) {
	names, deleted := []string{}, []string{}
	var diffs []string
	for _, obj := range objs {
		ri, err := c.objectResource(obj, r.namespace)
		name := describe(obj)
		names = append(names, name)
		if meta.IsNoMatchError(err) {
			continue // its kind is not served: there is none
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("%s: %w", name, err)
		}
		before, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("read %s: %w", name, err)
		}
		if !env.Check {
			policy := metav1.DeletePropagationBackground
			err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
			if err != nil && !apierrors.IsNotFound(err) {
				return step.Result{}, fmt.Errorf("delete %s: %w", name, err)
			}
		}
		deleted = append(deleted, name)
		if env.Diff {
			diffs = append(diffs, diff(name, comparable(before, false), nil))
		}
	}
	res := step.Result{Changed: len(deleted) > 0, Diff: strings.Join(diffs, ""),
		Data: map[string]any{"objects": names, "changed_objects": deleted},
		Msg:  fmt.Sprintf("%d of %d objects %s", len(deleted), len(objs), map[bool]string{true: "would be deleted", false: "deleted"}[env.Check])}
	return b.waited(ctx, env, c, r, objs, res), nil
}

// get reads one object or a list, and waits on the one when asked.
func (b *Builtin) get(ctx context.Context, c *client, r *request) (step.Result, error) {
	ri, _, err := c.resource(r.gvk, r.namespace)
	if err != nil {
		return step.Result{}, err
	}
	what := strings.ToLower(r.gvk.Kind)
	if r.name == "" {
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: r.selector})
		if err != nil {
			return step.Result{}, fmt.Errorf("list %s: %w", what, err)
		}
		items := make([]any, len(list.Items))
		for i := range list.Items {
			items[i] = list.Items[i].Object
		}
		return step.Result{Msg: fmt.Sprintf("%d %s", len(items), what), Data: map[string]any{"resources": items}}, nil
	}
	res := step.Result{Data: map[string]any{"resources": []any{}}}
	if r.waitFor != nil {
		werr := waitFor(ctx, ri, r.name, r.waitFor, r.waitTimeout)
		res.Data["ready"] = werr == nil
		if werr != nil {
			res.Failed, res.Msg = true, fmt.Sprintf("%s/%s: %s: %v%s", what, r.name, r.waitSpec, werr, r.podStates(ctx, c, ri, r.name))
		} else {
			res.Msg = fmt.Sprintf("%s/%s: %s", what, r.name, r.waitSpec)
		}
	}
	obj, err := ri.Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if res.Msg == "" {
			res.Msg = fmt.Sprintf("%s/%s does not exist", what, r.name)
		}
		return res, nil
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("read %s/%s: %w", what, r.name, err)
	}
	res.Data["resources"] = []any{obj.Object}
	if res.Msg == "" {
		res.Msg = fmt.Sprintf("%s/%s", what, r.name)
	}
	return res, nil
}

// getObjects reads the objects a manifest names (those that exist), and
// waits on each when asked.
func (b *Builtin) getObjects(ctx context.Context, c *client, r *request, objs []*unstructured.Unstructured) (step.Result, error) {
	res := step.Result{Data: map[string]any{}}
	if r.waitFor != nil {
		err := b.waitAll(ctx, c, r, objs)
		res.Data["ready"] = err == nil
		if err != nil {
			res.Failed, res.Msg = true, err.Error()
		} else {
			res.Msg = fmt.Sprintf("%d objects: %s", len(objs), r.waitSpec)
		}
	}
	items := []any{}
	for _, obj := range objs {
		ri, err := c.objectResource(obj, r.namespace)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("%s: %w", describe(obj), err)
		}
		cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return step.Result{}, fmt.Errorf("read %s: %w", describe(obj), err)
		}
		items = append(items, cur.Object)
	}
	res.Data["resources"] = items
	if res.Msg == "" {
		res.Msg = fmt.Sprintf("%d of %d objects exist", len(items), len(objs))
	}
	return res, nil
}

// patched merges the patch into one object (or its subresource).
func (b *Builtin) patched(ctx context.Context, env *step.Env, c *client, r *request) (step.Result, error) {
	ri, _, err := c.resource(r.gvk, r.namespace)
	if err != nil {
		return step.Result{}, err
	}
	name := strings.ToLower(r.gvk.Kind) + "/" + r.name
	body, err := patchJSON(r.patch)
	if err != nil {
		return step.Result{}, err
	}
	before, err := ri.Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return step.Result{}, fmt.Errorf("read %s: %w", name, err)
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if env.Check {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var sub []string
	if r.subresource != "" {
		sub = []string{r.subresource}
	}
	after, err := ri.Patch(ctx, r.name, types.MergePatchType, body, opts, sub...)
	if err != nil {
		return step.Result{}, fmt.Errorf("patch %s: %w", name, err)
	}
	withStatus := r.subresource == "status"
	bc, ac := comparable(before, withStatus), comparable(after, withStatus)
	res := step.Result{Data: map[string]any{"resources": []any{after.Object}}, Msg: name + " as patched"}
	if !same(bc, ac) {
		res.Changed = true
		if env.Diff {
			res.Diff = diff(name, bc, ac)
		}
	}
	return res, nil
}

// patchJSON is the patch as JSON: a mapping, or JSON or YAML text.
func patchJSON(p any) ([]byte, error) {
	if s, ok := p.(string); ok {
		j, err := yaml.YAMLToJSON([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("patch: %w", err)
		}
		return j, nil
	}
	j, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return j, nil
}
