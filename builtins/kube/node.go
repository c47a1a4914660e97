package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/textdiff"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/yaml"
)

// evictRetryDelay is how long a drain waits before it asks again to evict
// a pod a PodDisruptionBudget protects (kubectl drain's 5 s).
const evictRetryDelay = 5 * time.Second

// drainer is kubectl drain's helper with the task's options: DaemonSet pods
// are left alone (as --ignore-daemonsets), pods end with their own grace
// period, and the drain stops after wait_timeout.
func (b *Builtin) drainer(ctx context.Context, c *client, r *request) *drain.Helper {
	return &drain.Helper{
		Ctx:                  ctx,
		Client:               c.kube,
		Force:                r.drainForce,
		GracePeriodSeconds:   -1,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   r.deleteEmptyDir,
		DisableEviction:      r.disableEviction,
		Timeout:              r.waitTimeout,
		EvictErrorRetryDelay: cmpDuration(b.evictRetry, evictRetryDelay),
		Out:                  io.Discard,
		ErrOut:               io.Discard,
		AdditionalFilters:    []drain.PodFilter{keepPod(r.drainKeep)},
	}
}

// keepPod leaves the pod named namespace/name ("" none) where it is, as
// the drain leaves a DaemonSet's.
func keepPod(name string) drain.PodFilter {
	return func(p corev1.Pod) drain.PodDeleteStatus {
		if name != "" && p.Namespace+"/"+p.Name == name {
			return drain.MakePodDeleteStatusSkip()
		}
		return drain.MakePodDeleteStatusOkay()
	}
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// node runs cordoned, uncordoned and drained on the Node name: the cordon
// is a merge patch of spec.unschedulable (as kubectl cordon), the drain
// kubectl drain's own library (evictions, which respect
// PodDisruptionBudgets, unless disable_eviction).
func (b *Builtin) node(ctx context.Context, env *step.Env, c *client, r *request) (step.Result, error) {
	if c.kube == nil {
		return step.Result{}, errors.New("no typed client for this API server")
	}
	node, err := c.kube.CoreV1().Nodes().Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return step.Result{}, fmt.Errorf("read node/%s: %w", r.name, err)
	}
	want := r.state != "uncordoned"
	res := step.Result{Data: map[string]any{"evicted_pods": []string{}}}
	word := map[bool]string{true: "cordoned", false: "uncordoned"}[want]
	_, marked := node.Annotations[r.mark]
	after := node.Spec.Unschedulable
	switch {
	case r.mark != "" && want && node.Spec.Unschedulable && !marked:
		res.Msg = fmt.Sprintf("node/%s cordoned already by someone else (no %s): left so", r.name, r.mark)
	case r.mark != "" && !want && !marked:
		res.Msg = fmt.Sprintf("node/%s not cordoned by kubexm (no %s): left so", r.name, r.mark)
	case node.Spec.Unschedulable == want && (r.mark == "" || marked == want):
		res.Msg = fmt.Sprintf("node/%s %s", r.name, word)
	default:
		res.Changed, after = true, want
		res.Msg = fmt.Sprintf("node/%s %s", r.name, word)
		if env.Check {
			res.Msg = fmt.Sprintf("node/%s would be %s", r.name, word)
		} else if err := cordon(ctx, c, r.name, want, r.mark); err != nil {
			return step.Result{}, err
		}
	}
	d := b.drainer(ctx, c, r)
	var pods []string
	if r.state == "drained" {
		if pods, err = b.drain(env, d, r.name); err != nil {
			return step.Result{}, err
		}
		res.Data["evicted_pods"] = pods
		res.Changed = res.Changed || len(pods) > 0
		how := map[bool]string{true: "deleted", false: "evicted"}[r.disableEviction]
		res.Msg += fmt.Sprintf(", %d pods %s%s", len(pods), map[bool]string{true: "would be ", false: ""}[env.Check], how)
		if len(pods) > 0 {
			res.Msg += ": " + strings.Join(pods, ", ")
		}
	}
	if env.Diff && res.Changed {
		res.Diff = nodeDiff(r.name, node.Spec.Unschedulable, after, pods)
	}
	return res, nil
}

// cordon sets spec.unschedulable as kubectl cordon and uncordon do (a
// merge patch), and with mark sets that annotation (cordon) or removes it
// (uncordon) in the same patch.
func cordon(ctx context.Context, c *client, name string, want bool, mark string) error {
	patch := map[string]any{"spec": map[string]any{"unschedulable": want}}
	if mark != "" {
		var v any
		if want {
			v = "true"
		}
		patch["metadata"] = map[string]any{"annotations": map[string]any{mark: v}}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("%s node/%s: %w", map[bool]string{true: "cordon", false: "uncordon"}[want], name, err)
	}
	return nil
}

// drain evicts (or deletes) the pods of the node that a drain takes, and
// returns their names; under --check it only lists them. A drain that does
// not finish names the pods still there.
func (b *Builtin) drain(env *step.Env, d *drain.Helper, name string) ([]string, error) {
	list, errs := d.GetPodsForDeletion(name)
	if len(errs) > 0 {
		return nil, fmt.Errorf("drain node/%s: %w", name, errors.Join(errs...))
	}
	pods := podNames(list)
	if env.Check || len(pods) == 0 {
		return pods, nil
	}
	if err := d.DeleteOrEvictPods(list.Pods()); err != nil {
		left := "(not read)"
		if now, errs := d.GetPodsForDeletion(name); len(errs) == 0 {
			left = strings.Join(podNames(now), ", ")
		}
		return nil, fmt.Errorf("drain node/%s (timeout %s): %w; pods still on it: %s", name, d.Timeout, err, left)
	}
	return pods, nil
}

// podNames are namespace/name of the pods a drain takes.
func podNames(list *drain.PodDeleteList) []string {
	names := []string{}
	for _, p := range list.Pods() {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names
}

// nodeDiff shows a cordon change and the pods a drain takes.
func nodeDiff(name string, before, after bool, pods []string) string {
	type state struct {
		Unschedulable bool     `json:"unschedulable"`
		Pods          []string `json:"pods,omitempty"`
	}
	b, _ := yaml.Marshal(state{Unschedulable: before, Pods: pods})
	a, _ := yaml.Marshal(state{Unschedulable: after})
	return textdiff.Unified("node/"+name, b, a, true)
}

// raw GETs a path of the API server (/readyz?verbose, /livez): its body is
// content; a status other than 2xx fails the task with the body.
func (b *Builtin) raw(ctx context.Context, c *client, r *request) (step.Result, error) {
	if c.kube == nil {
		return step.Result{}, errors.New("no typed client for this API server")
	}
	u, err := url.Parse(r.path)
	if err != nil || !strings.HasPrefix(u.Path, "/") {
		return step.Result{}, fmt.Errorf("path %q: give an absolute path such as /readyz?verbose", r.path)
	}
	req := c.kube.Discovery().RESTClient().Get().AbsPath(u.Path)
	for k, vs := range u.Query() {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	var status int
	body, err := req.Do(ctx).StatusCode(&status).Raw()
	res := step.Result{Data: map[string]any{"content": string(body), "status": status}}
	if err != nil {
		if status == 0 {
			return step.Result{}, fmt.Errorf("GET %s: %w", r.path, err)
		}
		res.Failed = true
		res.Msg = fmt.Sprintf("GET %s: %d: %s", r.path, status, strings.TrimSpace(string(body)))
		return res, nil
	}
	res.Msg = fmt.Sprintf("GET %s: %d", r.path, status)
	return res, nil
}
