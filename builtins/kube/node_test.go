package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefakeclient "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// pod is a pod on node n1 owned by a controller of kind owner ("" for
// none), with an emptyDir volume when emptyDir.
func pod(name, owner string, emptyDir bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	if owner != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: owner, Name: name + "-owner", Controller: &yes}}
	}
	if emptyDir {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	return p
}

// fakeNodes is an API server (the typed fake clientset) with node n1 and
// objs. It serves the eviction API; an eviction of a pod named in blocked
// is refused as a PodDisruptionBudget refuses it (429), any other deletes
// the pod. evictions counts the evictions asked.
func fakeNodes(t *testing.T, blocked []string, objs ...runtime.Object) (*Builtin, *kubefakeclient.Clientset, *int) {
	t.Helper()
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	cs := kubefakeclient.NewClientset(objs...)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"}},
	}}
	evictions := 0
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateActionImpl)
		if !ok || ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		evictions++
		if slices.Contains(blocked, ev.Name) {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		return true, nil, cs.Tracker().Delete(a.GetResource(), ev.Namespace, ev.Name)
	})
	b := &Builtin{evictRetry: 10 * time.Millisecond}
	b.clients.connect = func([]byte, transport.Transport) (*client, error) {
		return &client{kube: cs}, nil
	}
	return b, cs, &evictions
}

func unschedulable(t *testing.T, cs *kubefakeclient.Clientset) bool {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Unschedulable
}

func TestCordonUncordon(t *testing.T) {
	b, cs, _ := fakeNodes(t, nil)
	cordon := step.Args{"kubeconfig": "/etc/admin.conf", "state": "cordoned", "name": "n1"}
	if res := run(t, b, true, true, cordon); !res.Changed || unschedulable(t, cs) || !strings.Contains(res.Diff, "+unschedulable: true") {
		t.Fatalf("check: changed %v, diff %q; want a change, nothing written", res.Changed, res.Diff)
	}
	if res := run(t, b, false, false, cordon); !res.Changed || !unschedulable(t, cs) {
		t.Fatalf("cordon: changed %v; want the node unschedulable", res.Changed)
	}
	if res := run(t, b, false, false, cordon); res.Changed {
		t.Fatalf("cordon again: changed")
	}
	uncordon := step.Args{"kubeconfig": "/etc/admin.conf", "state": "uncordoned", "name": "n1"}
	if res := run(t, b, true, false, uncordon); !res.Changed || !unschedulable(t, cs) {
		t.Fatalf("check uncordon: changed %v; want a change, nothing written", res.Changed)
	}
	if res := run(t, b, false, false, uncordon); !res.Changed || unschedulable(t, cs) {
		t.Fatalf("uncordon: changed %v", res.Changed)
	}
	if res := run(t, b, false, false, uncordon); res.Changed {
		t.Fatalf("uncordon again: changed")
	}
	if _, err := b.Run(context.Background(), &step.Env{Host: "m1", Target: &host{files: map[string]string{"/etc/admin.conf": "k"}}},
		b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "state": "cordoned", "name": "gone"})); err == nil || !strings.Contains(err.Error(), "node/gone") {
		t.Fatalf("cordon of a missing node: %v", err)
	}
}

func TestDrainEvictsWhatKubectlDrainWould(t *testing.T) {
	b, cs, evictions := fakeNodes(t, nil, pod("web", "ReplicaSet", false), pod("agent", "DaemonSet", false), pod("cache", "ReplicaSet", true),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent-owner", Namespace: "default"}})
	args := step.Args{"kubeconfig": "/etc/admin.conf", "state": "drained", "name": "n1", "wait_timeout": "10s"}
	env := &step.Env{Host: "m1", Target: &host{files: map[string]string{"/etc/admin.conf": "k"}}}
	_, err := b.Run(context.Background(), env, b.Spec().WithDefaults(args))
	if err == nil || !strings.Contains(err.Error(), "default/cache") || !strings.Contains(err.Error(), "local storage") {
		t.Fatalf("drain of a node with emptyDir data, not allowed: %v; want a failure naming the pod", err)
	}

	args["delete_emptydir_data"] = true
	res := run(t, b, true, true, args)
	if !res.Changed || *evictions != 0 || !strings.Contains(res.Diff, "default/web") {
		t.Fatalf("check: changed %v, %d evictions, diff %q", res.Changed, *evictions, res.Diff)
	}
	res = run(t, b, false, false, args)
	got := res.Data["evicted_pods"].([]string)
	if !res.Changed || !slices.Equal(got, []string{"default/cache", "default/web"}) || !unschedulable(t, cs) {
		t.Fatalf("drain: changed %v, evicted %v, cordoned %v; want web and cache evicted", res.Changed, got, unschedulable(t, cs))
	}
	if _, err := cs.CoreV1().Pods("default").Get(context.Background(), "agent", metav1.GetOptions{}); err != nil {
		t.Fatalf("the DaemonSet's pod: %v; want it left", err)
	}
	if res = run(t, b, false, false, args); res.Changed {
		t.Fatalf("drain again: changed (%s)", res.Msg)
	}
}

// The in-cluster controller's run drains the node its own pod runs on:
// drain_keep leaves that pod, the others go; a malformed name is refused.
func TestDrainKeepsThePodNamed(t *testing.T) {
	b, cs, evictions := fakeNodes(t, nil, pod("web", "ReplicaSet", false), pod("controller", "ReplicaSet", true))
	args := step.Args{"kubeconfig": "/etc/admin.conf", "state": "drained", "name": "n1", "wait_timeout": "10s", "drain_keep": "default/controller",
		"delete_emptydir_data": true}
	res := run(t, b, false, false, args)
	if got := res.Data["evicted_pods"].([]string); !slices.Equal(got, []string{"default/web"}) || *evictions != 1 {
		t.Fatalf("drain with drain_keep: evicted %v (%d evictions); want web only", got, *evictions)
	}
	if _, err := cs.CoreV1().Pods("default").Get(context.Background(), "controller", metav1.GetOptions{}); err != nil {
		t.Fatalf("the kept pod: %v", err)
	}
	if res = run(t, b, false, false, args); res.Changed {
		t.Fatalf("drain again: changed (%s)", res.Msg)
	}
	args["drain_keep"] = "controller"
	env := &step.Env{Host: "m1", Target: &host{files: map[string]string{"/etc/admin.conf": "k"}}}
	if _, err := b.Run(context.Background(), env, b.Spec().WithDefaults(args)); err == nil || !strings.Contains(err.Error(), "namespace/name") {
		t.Fatalf("drain_keep without a namespace: %v", err)
	}
}

func TestDrainNamesThePodsABudgetKeeps(t *testing.T) {
	b, _, evictions := fakeNodes(t, []string{"db"}, pod("db", "StatefulSet", false), pod("bare", "", false))
	args := step.Args{"kubeconfig": "/etc/admin.conf", "state": "drained", "name": "n1", "wait_timeout": "300ms"}
	env := &step.Env{Host: "m1", Target: &host{files: map[string]string{"/etc/admin.conf": "k"}}}
	_, err := b.Run(context.Background(), env, b.Spec().WithDefaults(args))
	if err == nil || !strings.Contains(err.Error(), "default/bare") {
		t.Fatalf("a pod no controller manages, without drain_force: %v", err)
	}
	args["drain_force"] = true
	_, err = b.Run(context.Background(), env, b.Spec().WithDefaults(args))
	if err == nil || !strings.Contains(err.Error(), "pods still on it: default/db") || *evictions < 2 {
		t.Fatalf("a pod its budget keeps: %v (%d evictions); want the drain to fail naming it, after asking again", err, *evictions)
	}
}

func TestRawGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "[-]etcd failed: reason withheld\nreadyz check failed")
			return
		}
		fmt.Fprint(w, "[+]ping ok\nreadyz check passed")
	}))
	defer srv.Close()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL)
	b := &Builtin{}
	env := &step.Env{Host: "m1", Target: &host{files: map[string]string{"/etc/admin.conf": kubeconfig}}, Check: true}
	get := func(path string) step.Result {
		t.Helper()
		res, err := b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "path": path}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := get("/readyz?verbose"); res.Failed || res.Data["status"] != 200 || !strings.Contains(res.Data["content"].(string), "[+]ping ok") {
		t.Fatalf("a passing /readyz: %+v", res)
	}
	if res := get("/readyz"); !res.Failed || res.Data["status"] != 500 || !strings.Contains(res.Msg, "[-]etcd failed") {
		t.Fatalf("a failing /readyz: %+v; want failed with the body", res)
	}
	if _, err := b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "path": "/readyz", "kind": "Node"})); err == nil {
		t.Fatal("get with path and kind: no error")
	}
}

func TestCordonMarkIsKubexmsOwn(t *testing.T) {
	const mark = "kubexm.io/cordoned"
	b, cs, _ := fakeNodes(t, nil)
	marked := func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := n.Annotations[mark]
		return ok
	}
	cordon := step.Args{"kubeconfig": "/etc/admin.conf", "state": "cordoned", "name": "n1", "mark": mark}
	uncordon := step.Args{"kubeconfig": "/etc/admin.conf", "state": "uncordoned", "name": "n1", "mark": mark}
	if res := run(t, b, false, false, cordon); !res.Changed || !unschedulable(t, cs) || !marked() {
		t.Fatalf("cordon with a mark: changed %v, marked %v", res.Changed, marked())
	}
	if res := run(t, b, false, false, cordon); res.Changed {
		t.Fatal("cordon with a mark again: changed")
	}
	if res := run(t, b, true, false, uncordon); !res.Changed || !marked() {
		t.Fatalf("check uncordon: changed %v, marked %v", res.Changed, marked())
	}
	if res := run(t, b, false, false, uncordon); !res.Changed || unschedulable(t, cs) || marked() {
		t.Fatalf("uncordon of kubexm's cordon: changed %v, unschedulable %v, marked %v", res.Changed, unschedulable(t, cs), marked())
	}

	// Someone else's cordon: kept through cordon, drain and uncordon.
	if res := run(t, b, false, false, step.Args{"kubeconfig": "/etc/admin.conf", "state": "cordoned", "name": "n1"}); !res.Changed {
		t.Fatal("a cordon without a mark: no change")
	}
	for _, args := range []step.Args{cordon, {"kubeconfig": "/etc/admin.conf", "state": "drained", "name": "n1", "mark": mark}, uncordon} {
		if res := run(t, b, false, false, args); res.Changed || marked() || !unschedulable(t, cs) {
			t.Fatalf("%s of someone else's cordon: changed %v (%s), marked %v", args["state"], res.Changed, res.Msg, marked())
		}
	}
}
