package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// condition judges one object: done, or not yet with why; an error ends
// the wait (a Deployment past its progress deadline). obj is nil when the
// object does not exist.
type condition func(obj *unstructured.Unstructured) (done bool, why string, err error)

// parseWait turns wait_for into a condition: condition=TYPE[=STATUS]
// (STATUS defaults to True), rollout (a Deployment's, DaemonSet's or
// StatefulSet's, as kubectl rollout status judges it), exists, or deleted.
func parseWait(s string) (condition, error) {
	switch {
	case s == "rollout":
		return rolledOut, nil
	case s == "exists":
		return func(obj *unstructured.Unstructured) (bool, string, error) {
			return obj != nil, "it does not exist", nil
		}, nil
	case s == "deleted":
		return func(obj *unstructured.Unstructured) (bool, string, error) {
			return obj == nil, "it still exists", nil
		}, nil
	case strings.HasPrefix(s, "condition="):
		typ, status, _ := strings.Cut(strings.TrimPrefix(s, "condition="), "=")
		if typ == "" {
			break
		}
		if status == "" {
			status = "True"
		}
		return func(obj *unstructured.Unstructured) (bool, string, error) {
			if obj == nil {
				return false, "it does not exist", nil
			}
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == typ {
					if m["status"] == status {
						return true, "", nil
					}
					return false, fmt.Sprintf("condition %s is %v (%v)", typ, m["status"], m["message"]), nil
				}
			}
			return false, fmt.Sprintf("it has no condition %s yet", typ), nil
		}, nil
	}
	return nil, fmt.Errorf("wait_for %q: give condition=TYPE[=STATUS], rollout, exists or deleted", s)
}

// rolledOut is kubectl rollout status's judgement of a workload.
func rolledOut(obj *unstructured.Unstructured) (bool, string, error) {
	if obj == nil {
		return false, "it does not exist", nil
	}
	n := func(path ...string) int64 {
		v, _, _ := unstructured.NestedInt64(obj.Object, path...)
		return v
	}
	if obj.GetGeneration() > n("status", "observedGeneration") {
		return false, "waiting for the spec update to be observed", nil
	}
	switch obj.GetKind() {
	case "Deployment":
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Progressing" && m["reason"] == "ProgressDeadlineExceeded" {
				return false, "", fmt.Errorf("deployment %q exceeded its progress deadline", obj.GetName())
			}
		}
		want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		updated := n("status", "updatedReplicas")
		switch {
		case updated < want:
			return false, fmt.Sprintf("%d of %d new replicas updated", updated, want), nil
		case n("status", "replicas") > updated:
			return false, fmt.Sprintf("%d old replicas pending termination", n("status", "replicas")-updated), nil
		case n("status", "availableReplicas") < updated:
			return false, fmt.Sprintf("%d of %d updated replicas available", n("status", "availableReplicas"), updated), nil
		}
		return true, "", nil
	case "DaemonSet":
		if t, _, _ := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type"); t == "OnDelete" {
			return false, "", fmt.Errorf("daemonset %q updates OnDelete: it has no rollout to wait for", obj.GetName())
		}
		want := n("status", "desiredNumberScheduled")
		switch {
		case n("status", "updatedNumberScheduled") < want:
			return false, fmt.Sprintf("%d of %d updated pods scheduled", n("status", "updatedNumberScheduled"), want), nil
		case n("status", "numberAvailable") < want:
			return false, fmt.Sprintf("%d of %d updated pods available", n("status", "numberAvailable"), want), nil
		}
		return true, "", nil
	case "StatefulSet":
		want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		switch {
		case n("status", "readyReplicas") < want:
			return false, fmt.Sprintf("%d of %d pods ready", n("status", "readyReplicas"), want), nil
		case n("status", "updatedReplicas") < want:
			return false, fmt.Sprintf("%d of %d pods updated", n("status", "updatedReplicas"), want), nil
		}
		return true, "", nil
	}
	return false, "", fmt.Errorf("rollout: %s is not a Deployment, DaemonSet or StatefulSet", obj.GetKind())
}

// waitFor returns when cond holds for the object name of ri, watching it
// between reads rather than polling. It fails after timeout with the last
// reason the condition gave.
func waitFor(ctx context.Context, ri dynamic.ResourceInterface, name string, cond condition, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	why := "not read yet"
	for {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, err = nil, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("not done after %s: %s", timeout, why)
			}
			return err
		}
		done, w, err := cond(obj)
		if err != nil || done {
			return err
		}
		why = w
		rv := ""
		if obj != nil {
			rv = obj.GetResourceVersion()
		}
		w2, err := watchOnce(ctx, ri, name, rv, cond)
		if w2 != "" {
			why = w2
		}
		switch {
		case errors.Is(err, errDone):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("not done after %s: %s", timeout, why)
		case err != nil && !errors.Is(err, errWatchEnded):
			return err
		}
	}
}

var (
	errDone       = errors.New("done")
	errWatchEnded = errors.New("watch ended")
)

// watchOnce watches one object from rv until cond holds (errDone), the
// condition fails, or the watch ends (errWatchEnded: read it again).
func watchOnce(ctx context.Context, ri dynamic.ResourceInterface, name, rv string, cond condition) (string, error) {
	w, err := ri.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		// Read it again after a pause, not in a tight loop (an API server
		// that is restarting refuses watches for a while).
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
		return "", errWatchEnded
	}
	defer w.Stop()
	why := ""
	for {
		select {
		case <-ctx.Done():
			return why, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return why, errWatchEnded
			}
			obj, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type == watch.Deleted {
				obj = nil
			}
			done, w, err := cond(obj)
			if err != nil {
				return w, err
			}
			if done {
				return "", errDone
			}
			why = w
		}
	}
}

// podStates says what the pods of a workload that did not roll out are
// doing, one line each (as kubectl get pods -o wide and describe would
// tell): where each is, its phase, and why a container waits or died. It is
// the reason a rollout failed that the workload's status does not give.
// With logLines, the last lines of the log of each container that is not
// ready follow its pod's line, for the first logPods pods that have one (as
// kubectl logs --tail would show). An error reading them is said instead:
// the message is a hint, not a result.
func (c *client) podStates(ctx context.Context, ri dynamic.ResourceInterface, name string, logLines int) string {
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	raw, _, _ := unstructured.NestedMap(obj.Object, "spec", "selector")
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return fmt.Sprintf("its pods: selector: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return fmt.Sprintf("its pods: selector: %v", err)
	}
	pods, _, err := c.resource(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, obj.GetNamespace())
	if err != nil {
		return fmt.Sprintf("its pods: %v", err)
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Sprintf("its pods (%s): %v", sel, err)
	}
	if len(list.Items) == 0 {
		return fmt.Sprintf("no pods match %s", sel)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "its pods (%s):", sel)
	logged := 0
	for i := range list.Items {
		b.WriteString("\n  " + podState(&list.Items[i]))
		if logLines > 0 && logged < logPods {
			if l := c.podLogs(ctx, &list.Items[i], logLines); l != "" {
				b.WriteString(l)
				logged++
			}
		}
	}
	return b.String()
}

// logPods is how many pods' logs a failed rollout shows: the pods of one
// workload usually fail alike, and a DaemonSet's can be hundreds.
const logPods = 3

// logBytes bounds one container's log in a message.
const logBytes = 16 << 10

// podLogs is the tail of the log of each container of p that is not ready
// and has run: the previous run's when it waits to restart (a crash loop),
// the current one's when it runs or ended. A container that never started
// (an image not pulled, a pod not scheduled) has none.
func (c *client) podLogs(ctx context.Context, p *unstructured.Unstructured, lines int) string {
	var pod corev1.Pod
	if c.kube == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(p.Object, &pod) != nil {
		return ""
	}
	var b strings.Builder
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		st := cs.State
		switch {
		case cs.Ready,
			st.Waiting != nil && cs.RestartCount == 0,
			st.Terminated != nil && st.Terminated.ExitCode == 0:
			continue
		}
		previous := st.Waiting != nil
		tail, limit := int64(lines), int64(logBytes)
		raw, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: cs.Name, TailLines: &tail, LimitBytes: &limit, Previous: previous,
		}).DoRaw(ctx)
		which := ""
		if previous {
			which = ", its previous run"
		}
		fmt.Fprintf(&b, "\n    %s's log%s:", cs.Name, which)
		if err != nil {
			fmt.Fprintf(&b, " %v", err)
			continue
		}
		for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
			b.WriteString("\n      " + l)
		}
	}
	return b.String()
}

// podState is one pod's line: name, node, phase, and each container that
// is not ready with its reason.
func podState(p *unstructured.Unstructured) string {
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Object, &pod); err != nil {
		return fmt.Sprintf("%s: %v", p.GetName(), err)
	}
	node := cmp.Or(pod.Spec.NodeName, "no node")
	parts := []string{string(pod.Status.Phase)}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("not scheduled: %s", cmp.Or(c.Message, c.Reason)))
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if cs.Ready {
			continue
		}
		s := "container " + cs.Name
		switch st := cs.State; {
		case st.Waiting != nil:
			s += " waiting: " + st.Waiting.Reason
			if st.Waiting.Message != "" {
				s += " (" + st.Waiting.Message + ")"
			}
		case st.Terminated != nil:
			s += fmt.Sprintf(" terminated: %s, exit code %d", st.Terminated.Reason, st.Terminated.ExitCode)
		default:
			s += " running, not ready"
		}
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(", %d restarts", cs.RestartCount)
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s on %s: %s", pod.Name, node, strings.Join(parts, "; "))
}
