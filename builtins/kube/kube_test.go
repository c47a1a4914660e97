package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/kube/kubefake"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefakeclient "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// host is a transport that holds files in memory (the kubeconfig and
// manifests); the builtin reads nothing else from it.
type host struct{ files map[string]string }

func (h *host) Host() string { return "m1" }
func (h *host) Close() error { return nil }

// Run answers the one command the builtin runs, find listing a directory's
// manifests (every file directly in it: the name patterns are the test's).
func (h *host) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	if len(c.Argv) < 2 || c.Argv[0] != "find" {
		return transport.Result{}, fmt.Errorf("the k8s builtin runs no %v", c.Argv)
	}
	var out []byte
	for p := range h.files {
		if dir, base := path.Split(p); dir == c.Argv[1]+"/" && (strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".json")) {
			out = append(out, p+"\x00"...)
		}
	}
	return transport.Result{Stdout: out}, nil
}
func (h *host) Put(context.Context, io.Reader, string, transport.PutOptions) error {
	return errors.New("read only")
}
func (h *host) PutFile(context.Context, string, string, transport.PutOptions) (bool, error) {
	return false, errors.New("read only")
}
func (h *host) Get(_ context.Context, src string, w io.Writer, _ bool) error {
	c, ok := h.files[src]
	if !ok {
		return fs.ErrNotExist
	}
	_, err := io.WriteString(w, c)
	return err
}
func (h *host) Stat(_ context.Context, p string, _ bool) (transport.FileInfo, error) {
	c, ok := h.files[p]
	if !ok {
		for f := range h.files {
			if strings.HasPrefix(f, p+"/") {
				return transport.FileInfo{Exists: true, IsDir: true}, nil
			}
		}
	}
	return transport.FileInfo{Exists: ok, Size: int64(len(c))}, nil
}
func (h *host) Sha256(context.Context, string, bool) (string, error) { return "", nil }

// noReset is a static mapper for the fake API server.
type noReset struct{ meta.RESTMapper }

func (noReset) Reset() {}

var (
	cmGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	nsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	dsGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	podGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// fakeServer is a dynamic fake client whose apply merges the applied
// object into the stored one (a server-side apply of fields this builtin
// owns), honouring dry run, and counts the writes.
func fakeServer(t *testing.T, objs ...runtime.Object) (*Builtin, *dynfake.FakeDynamicClient, *int) {
	t.Helper()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		cmGVR: "ConfigMapList", secretGVR: "SecretList", nsGVR: "NamespaceList", dsGVR: "DaemonSetList", podGVR: "PodList",
	}, objs...)
	writes := 0
	dyn.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		tracker := dyn.Tracker()
		cur, err := tracker.Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		exists := err == nil
		merged := map[string]any{}
		if exists {
			merged = cur.(*unstructured.Unstructured).DeepCopy().Object
		} else if pa.GetPatchType() != types.ApplyPatchType {
			return true, nil, err
		}
		var patch map[string]any
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		merge(merged, patch)
		out := &unstructured.Unstructured{Object: merged}
		if len(pa.PatchOptions.DryRun) > 0 {
			return true, out, nil
		}
		writes++
		if exists {
			err = tracker.Update(pa.GetResource(), out, pa.GetNamespace())
		} else {
			err = tracker.Create(pa.GetResource(), out, pa.GetNamespace())
		}
		return true, out, err
	})
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	b := &Builtin{}
	b.clients.connect = func([]byte, transport.Transport) (*client, error) {
		return &client{dyn: dyn, mapper: noReset{m}}, nil
	}
	return b, dyn, &writes
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

const manifest = `apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: demo}
data: {mode: fast}
---
apiVersion: v1
kind: Secret
metadata: {name: token, namespace: demo}
stringData: {token: hunter2}
`

func run(t *testing.T, b *Builtin, check, diff bool, args step.Args) step.Result {
	t.Helper()
	h := &host{files: map[string]string{"/etc/admin.conf": "kubeconfig", "/etc/m.yaml": manifest}}
	env := &step.Env{Host: "m1", Target: h, Check: check, Diff: diff}
	res, err := b.Run(context.Background(), env, b.Spec().WithDefaults(args))
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return res
}

func TestApplyChangesOnceAndRedactsSecrets(t *testing.T) {
	b, _, writes := fakeServer(t)
	args := step.Args{"kubeconfig": "/etc/admin.conf", "src": "/etc/m.yaml"}

	res := run(t, b, true, true, args)
	if !res.Changed || *writes != 0 {
		t.Fatalf("check on an empty cluster: changed %v, %d writes; want a change and no write", res.Changed, *writes)
	}
	if strings.Contains(res.Diff, "hunter2") {
		t.Fatalf("the check diff shows a Secret's value:\n%s", res.Diff)
	}

	res = run(t, b, false, true, args)
	if !res.Changed || *writes != 3 {
		t.Fatalf("first apply: changed %v, %d writes; want 3", res.Changed, *writes)
	}
	if strings.Contains(res.Diff, "hunter2") || !strings.Contains(res.Diff, "token: "+redactedChanged) || !strings.Contains(res.Diff, "mode: fast") {
		t.Fatalf("first apply's diff: want the ConfigMap's data and the Secret's key redacted:\n%s", res.Diff)
	}
	if got := res.Data["changed_objects"].([]string); len(got) != 3 || got[1] != "demo/configmap/settings" {
		t.Errorf("changed_objects %v", got)
	}

	res = run(t, b, false, true, args)
	if res.Changed || res.Diff != "" {
		t.Fatalf("re-run: changed %v, diff %q; want nothing", res.Changed, res.Diff)
	}
	res = run(t, b, true, false, args)
	if res.Changed {
		t.Fatalf("check after the apply: changed")
	}

	res = run(t, b, false, true, step.Args{"kubeconfig": "/etc/admin.conf",
		"definition": map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "token", "namespace": "demo"},
			"stringData": map[string]any{"token": "correct-horse"}}})
	if !res.Changed || strings.Contains(res.Diff, "correct-horse") || strings.Contains(res.Diff, "hunter2") {
		t.Fatalf("a Secret's new value: changed %v, diff:\n%s", res.Changed, res.Diff)
	}
}

func TestCheckWithoutCluster(t *testing.T) {
	b := &Builtin{}
	env := &step.Env{Host: "m1", Target: &host{files: map[string]string{}}, Check: true}
	res, err := b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "src": "/etc/m.yaml"}))
	if err != nil || !res.Changed {
		t.Fatalf("present under --check with no kubeconfig: %+v, %v; want a change", res, err)
	}
	res, err = b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "kind": "Node"}))
	if err != nil || !res.Skipped {
		t.Fatalf("get under --check with no kubeconfig: %+v, %v; want skipped", res, err)
	}
	env.Check = false
	if _, err := b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "src": "/etc/m.yaml"})); !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("present with no kubeconfig: %v; want an error", err)
	}
}

func TestGetPatchAbsent(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "demo"}, "data": map[string]any{"mode": "fast"}}}
	b, _, writes := fakeServer(t, cm)
	res := run(t, b, false, false, step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "kind": "ConfigMap", "namespace": "demo", "name": "settings"})
	got := res.Data["resources"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["data"].(map[string]any)["mode"] != "fast" {
		t.Fatalf("get: %v", got)
	}
	res = run(t, b, false, false, step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "kind": "ConfigMap", "namespace": "demo"})
	if len(res.Data["resources"].([]any)) != 1 {
		t.Fatalf("list: %v", res.Data)
	}
	res = run(t, b, false, false, step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "kind": "ConfigMap", "namespace": "demo", "name": "other"})
	if len(res.Data["resources"].([]any)) != 0 || res.Failed {
		t.Fatalf("get of a missing object: %+v", res)
	}

	patch := step.Args{"kubeconfig": "/etc/admin.conf", "state": "patched", "kind": "ConfigMap", "namespace": "demo", "name": "settings",
		"patch": `{"data": {"mode": "slow"}}`}
	if res = run(t, b, true, false, patch); !res.Changed || *writes != 0 {
		t.Fatalf("patch under --check: changed %v, %d writes", res.Changed, *writes)
	}
	if res = run(t, b, false, false, patch); !res.Changed || *writes != 1 {
		t.Fatalf("patch: changed %v, %d writes", res.Changed, *writes)
	}
	if res = run(t, b, false, false, patch); res.Changed {
		t.Fatal("the same patch again: changed")
	}

	del := step.Args{"kubeconfig": "/etc/admin.conf", "state": "absent", "kind": "ConfigMap", "namespace": "demo", "name": "settings"}
	if res = run(t, b, true, false, del); !res.Changed {
		t.Fatal("delete under --check: no change reported")
	}
	if res = run(t, b, false, false, del); !res.Changed {
		t.Fatal("delete: no change reported")
	}
	if res = run(t, b, false, false, del); res.Changed {
		t.Fatal("delete of what is gone: changed")
	}
}

func TestWaitWatches(t *testing.T) {
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "agent", "namespace": "kube-system", "generation": int64(2)},
		"status":   map[string]any{"observedGeneration": int64(2), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(3), "numberAvailable": int64(1)}}}
	b, dyn, _ := fakeServer(t, ds)
	go func() {
		time.Sleep(100 * time.Millisecond)
		up := ds.DeepCopy()
		_ = unstructured.SetNestedField(up.Object, int64(3), "status", "numberAvailable")
		_, _ = dyn.Resource(dsGVR).Namespace("kube-system").Update(context.Background(), up, metav1.UpdateOptions{})
	}()
	args := step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "api_version": "apps/v1", "kind": "DaemonSet",
		"namespace": "kube-system", "name": "agent", "wait_for": "rollout", "wait_timeout": "10s"}
	res := run(t, b, false, false, args)
	if res.Failed || res.Data["ready"] != true {
		t.Fatalf("rollout wait: %+v", res)
	}
	args["wait_for"], args["wait_timeout"] = "condition=Ready", "300ms"
	res = run(t, b, false, false, args)
	if !res.Failed || res.Data["ready"] != false || !strings.Contains(res.Msg, "no condition Ready") {
		t.Fatalf("a condition that never holds: %+v", res)
	}
	if res = run(t, b, true, false, args); !res.Skipped {
		t.Fatalf("a wait under --check: %+v; want skipped", res)
	}
}

// A rollout that times out names the workload's pods and why each is not
// ready; a pod of another workload is not among them.
func TestRolloutTimeoutNamesThePods(t *testing.T) {
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "agent", "namespace": "kube-system", "generation": int64(1)},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "agent"}}},
		"status":   map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(2), "updatedNumberScheduled": int64(2), "numberAvailable": int64(0)}}}
	pod := func(name, app string, status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "namespace": "kube-system", "labels": map[string]any{"app": app}},
			"spec":     map[string]any{"nodeName": "n1"}, "status": status}}
	}
	pulling := pod("agent-a", "agent", map[string]any{"phase": "Pending", "containerStatuses": []any{map[string]any{"name": "main", "ready": false,
		"restartCount": int64(0), "image": "x", "imageID": "", "state": map[string]any{"waiting": map[string]any{"reason": "ErrImageNeverPull", "message": "image x is not present"}}}}})
	crashing := pod("agent-b", "agent", map[string]any{"phase": "Running", "containerStatuses": []any{map[string]any{"name": "main", "ready": false,
		"restartCount": int64(4), "image": "x", "imageID": "", "state": map[string]any{"waiting": map[string]any{"reason": "CrashLoopBackOff"}}}}})
	other := pod("dns-c", "dns", map[string]any{"phase": "Pending"})
	b, _, _ := fakeServer(t, ds, pulling, crashing, other)
	args := step.Args{"kubeconfig": "/etc/admin.conf", "state": "get", "api_version": "apps/v1", "kind": "DaemonSet",
		"namespace": "kube-system", "name": "agent", "wait_for": "rollout", "wait_timeout": "200ms"}
	res := run(t, b, false, false, args)
	for _, want := range []string{"0 of 2 updated pods available", "its pods (app=agent)",
		"agent-a on n1: Pending; container main waiting: ErrImageNeverPull (image x is not present)",
		"agent-b on n1: Running; container main waiting: CrashLoopBackOff, 4 restarts"} {
		if !res.Failed || !strings.Contains(res.Msg, want) {
			t.Errorf("message %q does not say %q", res.Msg, want)
		}
	}
	if strings.Contains(res.Msg, "dns-c") {
		t.Errorf("message %q names a pod of another workload", res.Msg)
	}
	if strings.Contains(res.Msg, "log") {
		t.Errorf("message %q shows logs without failure_logs", res.Msg)
	}
	// Another wait than a rollout lists no pods.
	args["wait_for"] = "condition=Ready"
	if res := run(t, b, false, false, args); strings.Contains(res.Msg, "its pods") {
		t.Errorf("a condition's timeout lists the pods: %q", res.Msg)
	}
	args["failure_logs"] = 5
	h := &host{files: map[string]string{"/etc/admin.conf": "kubeconfig"}}
	if _, err := b.Run(context.Background(), &step.Env{Host: "m1", Target: h}, b.Spec().WithDefaults(args)); err == nil || !strings.Contains(err.Error(), "failure_logs goes with wait_for: rollout") {
		t.Errorf("failure_logs on another wait than a rollout: %v", err)
	}

	// With failure_logs, the crashing container's previous run's log
	// follows its pod's line; the one that never started has none.
	connect := b.clients.connect
	b.clients = clients{connect: func(k []byte, tr transport.Transport) (*client, error) {
		c, err := connect(k, tr)
		if c != nil {
			c.kube = kubefakeclient.NewClientset()
		}
		return c, err
	}}
	args["wait_for"] = "rollout"
	res = run(t, b, false, false, args)
	if want := "agent-b on n1: Running; container main waiting: CrashLoopBackOff, 4 restarts\n    main's log, its previous run:\n      fake logs"; !strings.Contains(res.Msg, want) {
		t.Errorf("message %q does not say %q", res.Msg, want)
	}
	if strings.Count(res.Msg, "'s log") != 1 {
		t.Errorf("message %q shows a log of a container that never started", res.Msg)
	}
}

func TestApplyOrder(t *testing.T) {
	obj := func(apiVersion, kind, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	}
	in := []*unstructured.Unstructured{obj("v1", "ConfigMap", "a"), obj("example.com/v1", "Widget", "w"), obj("v1", "Namespace", "ns"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"), obj("v1", "ConfigMap", "b")}
	var got []string
	for _, o := range applyOrder(in) {
		got = append(got, o.GetName())
	}
	if want := []string{"widgets.example.com", "ns", "a", "w", "b"}; !slices.Equal(got, want) {
		t.Errorf("apply order %v, want %v", got, want)
	}
	if in[0].GetName() != "a" {
		t.Error("applyOrder reordered its argument")
	}
}

func TestRolledOut(t *testing.T) {
	dep := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment",
			"metadata": map[string]any{"name": "dns", "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(2)}, "status": status}}
	}
	for _, tc := range []struct {
		status map[string]any
		done   bool
		why    string
		fails  bool
	}{
		{map[string]any{}, false, "spec update", false},
		{map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(1)}, false, "1 of 2 new replicas", false},
		{map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(2), "replicas": int64(3)}, false, "1 old replicas", false},
		{map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(2), "replicas": int64(2), "availableReplicas": int64(1)}, false, "1 of 2 updated replicas available", false},
		{map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(2), "replicas": int64(2), "availableReplicas": int64(2)}, true, "", false},
		{map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}}}, false, "", true},
	} {
		done, why, err := rolledOut(dep(tc.status))
		if done != tc.done || !strings.Contains(why, tc.why) || (err != nil) != tc.fails {
			t.Errorf("%v: done %v why %q err %v", tc.status, done, why, err)
		}
	}
	if _, _, err := rolledOut(&unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "p"}}}); err == nil {
		t.Error("rollout of a Pod: no error")
	}
}

func TestDecodeAndParse(t *testing.T) {
	objs, err := decode([]byte(manifest+"---\n# nothing\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"), "m.yaml")
	if err != nil || len(objs) != 4 || objs[3].GetName() != "a" {
		t.Fatalf("decode: %d objects, %v", len(objs), err)
	}
	if _, err := decode([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"), "m.yaml"); err == nil || !strings.Contains(err.Error(), "m.yaml: document 1") {
		t.Errorf("an object without a name: %v", err)
	}
	for _, bad := range []step.Args{
		{"state": "present"},
		{"state": "patched", "kind": "ConfigMap", "name": "x"},
		{"state": "get"},
		{"state": "present", "src": "/a", "definition": "b"},
		{"state": "get", "kind": "Node", "wait_for": "ready"},
		{"state": "get", "kind": "Node", "wait_for": "rollout"},
	} {
		b := &Builtin{}
		if _, err := parse(b.Spec().WithDefaults(bad)); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestRedactLastApplied(t *testing.T) {
	s := map[string]any{"kind": "Secret", "metadata": map[string]any{"annotations": map[string]any{lastApplied: `{"data":{"k":"c2VjcmV0"}}`}},
		"data": map[string]any{"k": "c2VjcmV0"}}
	d := diff("secret/x", nil, s)
	if bytes.Contains([]byte(d), []byte("c2VjcmV0")) {
		t.Fatalf("the diff shows the Secret:\n%s", d)
	}
}

// Through HTTP and client-go's discovery, as a run goes: a CRD and an
// object of its kind in one manifest (the kind is discovered again after
// the CRD), a status patch, a rollout read, then a re-run writes nothing.
func TestThroughTheAPI(t *testing.T) {
	srv := kubefake.New()
	defer srv.Close()
	// The Widget comes first: the CRD is applied (and Established) before it.
	const crd = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true}]
`
	h := &host{files: map[string]string{"/etc/admin.conf": string(srv.Kubeconfig()), "/etc/w.yaml": crd}}
	b := &Builtin{}
	do := func(check bool, args step.Args) step.Result {
		t.Helper()
		args["kubeconfig"] = "/etc/admin.conf"
		res, err := b.Run(context.Background(), &step.Env{Host: "m1", Target: h, Check: check}, b.Spec().WithDefaults(args))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return res
	}
	if res := do(true, step.Args{"src": "/etc/w.yaml"}); !res.Changed || len(srv.Writes()) != 0 {
		t.Fatalf("--check: changed %v, writes %v", res.Changed, srv.Writes())
	}
	if res := do(false, step.Args{"src": "/etc/w.yaml", "wait_for": "exists"}); !res.Changed || len(srv.Writes()) != 2 || res.Data["ready"] != true {
		t.Fatalf("apply: %+v, writes %v", res, srv.Writes())
	}
	if w := srv.Get(kubefake.Kind{Group: "example.com", Version: "v1", Kind: "Widget", Resource: "widgets", Namespaced: true}, "default", "w1"); w == nil {
		t.Fatal("the Widget is not stored in namespace default")
	}
	res := do(false, step.Args{"state": "get", "src": "/etc/w.yaml"})
	if got := res.Data["resources"].([]any); len(got) != 2 {
		t.Fatalf("the manifest's objects: %v", got)
	}
	res = do(false, step.Args{"state": "get", "api_version": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"name": "widgets.example.com", "wait_for": "condition=Established"})
	if res.Failed || res.Data["ready"] != true {
		t.Fatalf("the CRD's condition: %+v", res)
	}
	patch := step.Args{"state": "patched", "api_version": "example.com/v1", "kind": "Widget", "name": "w1", "subresource": "status",
		"patch": `{"status": {"phase": "Ready"}}`}
	if res := do(false, patch); !res.Changed {
		t.Fatalf("status patch: %+v", res)
	}
	changes := srv.Changes()
	for _, check := range []bool{false, true} {
		if res := do(check, step.Args{"src": "/etc/w.yaml"}); res.Changed {
			t.Errorf("re-apply (check %v): changed %v", check, res.Data["changed_objects"])
		}
	}
	if srv.Changes() != changes {
		t.Errorf("re-runs changed %d objects", srv.Changes()-changes)
	}
	if res := do(false, step.Args{"state": "absent", "src": "/etc/w.yaml"}); !res.Changed || len(res.Data["changed_objects"].([]string)) != 2 {
		t.Fatalf("delete: %+v", res)
	}
}

func TestDirectoryOfManifests(t *testing.T) {
	b, dyn, _ := fakeServer(t)
	h := &host{files: map[string]string{"/etc/admin.conf": "k",
		"/etc/addon/1.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"/etc/addon/0.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
		"/etc/addon/notes.txt":  "not a manifest",
		"/etc/addon/sub/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deeper}\n",
	}}
	do := func(check bool, state string) step.Result {
		t.Helper()
		env := &step.Env{Host: "m1", Target: h, Check: check}
		res, err := b.Run(context.Background(), env, b.Spec().WithDefaults(step.Args{"kubeconfig": "/etc/admin.conf", "state": state, "src": "/etc/addon", "namespace": "demo"}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := do(false, "present"); !slices.Equal(res.Data["objects"].([]string), []string{"demo/configmap/a", "demo/secret/s", "demo/configmap/b"}) {
		t.Fatalf("apply of a directory: objects %v; want 0.yaml's then 1.yaml's, no other file's", res.Data["objects"])
	}
	if res := do(true, "absent"); len(res.Data["changed_objects"].([]string)) != 3 {
		t.Fatalf("delete under --check: %+v", res)
	}
	if res := do(false, "absent"); !res.Changed || len(res.Data["changed_objects"].([]string)) != 3 {
		t.Fatalf("delete of a directory's objects: %+v", res)
	}
	if l, err := dyn.Resource(cmGVR).Namespace("demo").List(context.Background(), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("left after the delete: %v %v", l, err)
	}
	if res := do(false, "absent"); res.Changed {
		t.Fatalf("delete again: changed")
	}
}
