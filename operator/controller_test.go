package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	kxschema "github.com/mensylisir/kubexm/schema"
)

const clusterYAML = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata:
  name: c1
  generation: 2
spec:
  hosts:
  - {name: n1, address: 10.0.0.1, user: root, privateKeyPath: /nowhere/id_rsa}
  - {name: n2, address: 10.0.0.2, user: root, privateKeyPath: /nowhere/id_rsa}
  roleGroups:
    etcd: [n1]
    master: [n1]
    worker: [n2]
  kubernetes:
    version: v1.37.2
status:
  observedGeneration: 2
  settings:
    kubernetes.type: kubexm
    network.kubePodsCIDR: 10.233.64.0/18
`

func node(name, version string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: version},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
	}}
}

// harness is a Reconciler on controller-runtime's fake client holding the
// Cluster (clusterYAML edited), nodes n1 and n2 at v1.37.2, and a Runner
// whose playbooks (fakePlaybooks) only log on localhost.
type harness struct {
	r      *Reconciler
	c      client.Client
	events *events.FakeRecorder
	out    *bytes.Buffer
	loads  *int
}

// fakePlaybooks stand for the built-in ones: each says its name on the
// control machine; "failing" fails.
var fakePlaybooks = fstest.MapFS{}

func init() {
	for _, name := range []string{"certs-renew", "add-nodes", "upgrade", "delete-nodes", "create-cluster"} {
		fakePlaybooks["playbooks/"+name+"/playbook.yaml"] = &fstest.MapFile{Data: []byte("name: " + name +
			"\nplays:\n  - name: p\n    hosts: localhost\n    gather_facts: false\n    tasks:\n      - debug: {msg: \"ran " + name +
			" nodes={{ .nodes | default \\\"\\\" }} by_controller={{ .cluster_resource_by_controller }}\"}\n" +
			"      - fail: {msg: broken}\n        when: fail_it ?? false\n")}
	}
}

func newHarness(t *testing.T, edit func(string) string, objs ...client.Object) *harness {
	t.Helper()
	text := clusterYAML
	if edit != nil {
		text = edit(text)
	}
	u := NewCluster()
	if err := sigsyaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(GVK, meta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	objs = append(objs, u, node("n1", "v1.37.2", true), node("n2", "v1.37.2", true))
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).WithStatusSubresource(NewCluster()).Build()
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	loads := 0
	h := &harness{c: c, events: events.NewFakeRecorder(20), out: &bytes.Buffer{}, loads: &loads}
	h.r = &Reconciler{
		Client: c, Recorder: h.events, WorkDir: t.TempDir(), Out: h.out,
		Now: func() time.Time { return time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC) },
		Runner: lifecycle.Runner{
			Builtins: reg, BuiltinFS: fakePlaybooks, Version: "0.1.0",
			LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
				path := f.Path
				loads++
				c, _, err := validate.Load(path)
				if err != nil {
					return nil, err
				}
				return kxschema.Inventory(c, path)
			},
		},
	}
	return h
}

func (h *harness) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "c1"}})
	if err != nil {
		t.Fatalf("Reconcile: %v\n%s", err, h.out)
	}
	return res
}

func (h *harness) get(t *testing.T) (*unstructured.Unstructured, kxschema.ClusterStatus) {
	t.Helper()
	u := NewCluster()
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: "c1"}, u); err != nil {
		t.Fatal(err)
	}
	st, err := StatusOf(u)
	if err != nil {
		t.Fatal(err)
	}
	return u, st
}

func (h *harness) eventList() string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A spec the cluster is already as: the generation is observed, the nodes
// listed from the API server, the spec recorded as applied; nothing runs.
func TestReconcileConverged(t *testing.T) {
	h := newHarness(t, nil)
	if res := h.reconcile(t); res.RequeueAfter != refresh {
		t.Errorf("requeue %v after converging, want the refresh %v", res.RequeueAfter, refresh)
	}
	u, st := h.get(t)
	if st.ObservedGeneration != 2 || st.Phase != "Ready" || st.ReadyNodes != "2/2" || st.KubernetesVersion != "v1.37.2" || len(st.Nodes) != 2 {
		t.Errorf("status %+v", st)
	}
	if st.Nodes[0].Name != "n1" || strings.Join(st.Nodes[0].Roles, ",") != "etcd,master" || !st.Nodes[0].Ready {
		t.Errorf("node n1: %+v", st.Nodes[0])
	}
	if c := conditionOf(st, "Ready"); c.Status != "True" || c.ObservedGeneration != 2 {
		t.Errorf("Ready: %+v", c)
	}
	if c := conditionOf(st, "Degraded"); c.Status != "False" {
		t.Errorf("Degraded: %+v", c)
	}
	var applied map[string]any
	if err := json.Unmarshal([]byte(u.GetAnnotations()[AnnotationAppliedSpec]), &applied); err != nil || applied["kubernetes"] == nil {
		t.Errorf("applied spec annotation: %v %v", err, u.GetAnnotations())
	}
	if st.Settings["kubernetes.type"] != "kubexm" {
		t.Errorf("the settings a run wrote are lost: %v", st.Settings)
	}
	if *h.loads != 0 {
		t.Errorf("a run loaded the inventory %d times", *h.loads)
	}
}

// An immutable field changed: Degraded with the field and both values,
// a Warning Event, no run.
func TestReconcileImmutable(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  kubernetes:\n", "  network:\n    kubePodsCIDR: 10.244.0.0/16\n  kubernetes:\n", 1)
	})
	h.reconcile(t)
	_, st := h.get(t)
	c := conditionOf(st, "Degraded")
	if st.Phase != "Degraded" || st.ObservedGeneration != 2 || c.Status != "True" || c.Reason != "ImmutableFieldChanged" ||
		!strings.Contains(c.Message, "network.kubePodsCIDR is 10.233.64.0/18, the spec asks 10.244.0.0/16") {
		t.Errorf("status %+v", st)
	}
	if ev := h.eventList(); !strings.Contains(ev, "Warning ImmutableFieldChanged") {
		t.Errorf("events: %q", ev)
	}
	// Looked at again: the same refusal is no new Event.
	h.reconcile(t)
	if ev := h.eventList(); ev != "" {
		t.Errorf("a second Event for the same refusal: %q", ev)
	}
	if *h.loads != 0 || st.LastRun != nil {
		t.Errorf("a run for an immutable change: %d loads, last run %+v", *h.loads, st.LastRun)
	}
	// Put back: Ready again, Degraded False with a new transition time.
	h2 := newHarness(t, nil)
	h2.reconcile(t)
	if _, st := h2.get(t); conditionOf(st, "Degraded").Status != "False" || st.Phase != "Ready" {
		t.Errorf("after putting the value back: %+v", st)
	}
}

// The pause annotation: nothing runs, Progressing says why.
func TestReconcilePaused(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationPaused+": \"true\"\n", 1), "v1.37.2", "v1.37.3", 1)
	})
	h.reconcile(t)
	_, st := h.get(t)
	if c := conditionOf(st, "Progressing"); c.Reason != "Paused" || *h.loads != 0 || st.ObservedGeneration != 2 || st.LastRun != nil {
		t.Errorf("paused: %+v, %d loads", st, *h.loads)
	}
}

func credentialsSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ssh"}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("not-a-real-key\n")}}
}

// The renewal annotation: certs-renew runs through the Runner with the
// Secret's key in the inventory (never in the cluster file), the
// annotation is removed, the run is in the status and the Events.
func TestReconcileRenewal(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n    "+
			AnnotationCredentials+": kube-system/ssh\n", 1)
	}, credentialsSecret())
	base := h.r.Runner.LoadInventory
	h.r.Runner.LoadInventory = func(f *lifecycle.ClusterFile, s *matrix.Support) (*inventory.Inventory, error) {
		data, _ := os.ReadFile(f.Path)
		if strings.Contains(string(data), "privateKeyPath") || strings.Contains(string(data), "not-a-real-key") {
			t.Errorf("the run's cluster file holds a key or its path:\n%s", data)
		}
		return base(f, s)
	}
	res := h.reconcile(t)
	if res.RequeueAfter == 0 {
		t.Error("no requeue after a run: the next step would wait for another change")
	}
	if !strings.Contains(h.out.String(), "ran certs-renew") || !strings.Contains(h.out.String(), "by_controller=true") {
		t.Errorf("the run's output:\n%s", h.out)
	}
	u, st := h.get(t)
	if _, ok := u.GetAnnotations()[AnnotationRenewCertificates]; ok {
		t.Errorf("the renewal annotation is still there after the run")
	}
	if st.LastRun == nil || st.LastRun.Playbook != "certs-renew" || st.LastRun.Result != "Succeeded" || st.LastRun.ID == "" || st.LastRun.StartedAt == "" {
		t.Errorf("last run: %+v", st.LastRun)
	}
	if c := conditionOf(st, "Progressing"); c.Status != "False" || c.Reason != "RunSucceeded" {
		t.Errorf("Progressing: %+v", c)
	}
	ev := h.eventList()
	if !strings.Contains(ev, "Normal RunStarted") || !strings.Contains(ev, "Normal RunSucceeded") {
		t.Errorf("events: %q", ev)
	}
	// The next reconcile: nothing left to do.
	h.reconcile(t)
	if _, st := h.get(t); st.Phase != "Ready" || st.ObservedGeneration != 2 {
		t.Errorf("after the run: %+v", st)
	}
}

// A host removed from the spec: delete-nodes runs against the applied spec
// (which still has it) with nodes=<host>.
func TestReconcileRemoval(t *testing.T) {
	h := newHarness(t, nil, credentialsSecret())
	h.reconcile(t) // records the applied spec
	u, _ := h.get(t)
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	spec["hosts"] = spec["hosts"].([]any)[:1]
	delete(spec["roleGroups"].(map[string]any), "worker")
	if err := unstructured.SetNestedMap(u.Object, spec, "spec"); err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{AnnotationCredentials: "kube-system/ssh", AnnotationAppliedSpec: u.GetAnnotations()[AnnotationAppliedSpec]})
	u.SetGeneration(3)
	if err := h.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	h.reconcile(t)
	if !strings.Contains(h.out.String(), "ran delete-nodes nodes=n2") {
		t.Errorf("the run's output:\n%s", h.out)
	}
	data, err := os.ReadFile(filepath.Join(h.r.WorkDir, "c1", "controller-applied.yaml"))
	if err != nil || !strings.Contains(string(data), "n2") {
		t.Errorf("delete-nodes did not run on the applied spec: %v\n%s", err, data)
	}
}

// No credentials: Degraded, saying what to annotate; nothing runs.
func TestReconcileNoCredentials(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n", 1)
	})
	h.reconcile(t)
	_, st := h.get(t)
	if c := conditionOf(st, "Degraded"); c.Reason != "CredentialsMissing" || !strings.Contains(c.Message, AnnotationCredentials) || *h.loads != 0 {
		t.Errorf("Degraded: %+v, %d loads", c, *h.loads)
	}
}

// A failed run: Degraded RunFailed, the last run Failed, a Warning Event.
func TestReconcileRunFails(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationRenewCertificates+": now\n    "+
			AnnotationCredentials+": kube-system/ssh\n", 1)
	}, credentialsSecret())
	h.r.ExtraVars = []string{"fail_it=true"}
	h.reconcile(t)
	u, st := h.get(t)
	if c := conditionOf(st, "Degraded"); c.Status != "True" || c.Reason != "RunFailed" || st.LastRun == nil || st.LastRun.Result != "Failed" {
		t.Errorf("status after a failed run: %+v", st)
	}
	if _, ok := u.GetAnnotations()[AnnotationRenewCertificates]; !ok {
		t.Error("the renewal annotation was removed although the run failed")
	}
	if ev := h.eventList(); !strings.Contains(ev, "Warning RunFailed") {
		t.Errorf("events: %q", ev)
	}
}

// The status writer keeps a condition's transition time while its status
// stays, and the status survives the trip through the object.
func TestStatusWriter(t *testing.T) {
	var st kxschema.ClusterStatus
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	setCondition(&st, 1, t0, "Ready", "True", "NodesReady", "2/2")
	setCondition(&st, 2, t0.Add(time.Hour), "Ready", "True", "NodesReady", "3/3")
	if c := conditionOf(st, "Ready"); c.LastTransitionTime != "2026-01-01T00:00:00Z" || c.Message != "3/3" || c.ObservedGeneration != 2 {
		t.Errorf("same status: %+v", c)
	}
	setCondition(&st, 3, t0.Add(2*time.Hour), "Ready", "False", "NodesNotReady", "2/3")
	if c := conditionOf(st, "Ready"); c.LastTransitionTime != "2026-01-01T02:00:00Z" || len(st.Conditions) != 1 {
		t.Errorf("changed status: %+v", st.Conditions)
	}
	st.ObservedGeneration = 3
	st.Nodes = []kxschema.NodeStatus{{Name: "n1", Ready: true, KubernetesVersion: "v1.37.2"}}
	st.Settings = map[string]string{"etcd.type": "kubexm"}
	u := NewCluster()
	if err := SetStatus(u, st); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(u.DeepCopy().Object)
	if err != nil {
		t.Fatal(err)
	}
	// Strings stay strings on the way through YAML ("False" is no bool).
	if !strings.Contains(string(js), `"status":"False"`) || !strings.Contains(string(js), `"observedGeneration":3`) {
		t.Errorf("the status as the API server gets it: %s", js)
	}
	back, err := StatusOf(u)
	if err != nil || back.ObservedGeneration != 3 || back.Nodes[0].Name != "n1" || back.Settings["etcd.type"] != "kubexm" || conditionOf(back, "Ready").Reason != "NodesNotReady" {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// The Secret's key and password reach every remote host of the run's
// inventory, and the key's file is gone after the run.
func TestCredentials(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  generation: 2\n", "  generation: 2\n  annotations:\n    "+AnnotationCredentials+": kube-system/ssh\n", 1)
	}, credentialsSecret())
	u, _ := h.get(t)
	c, err := h.r.credentials(context.Background(), u, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.password = "pw"
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "n1", PrivateKeyPath: "/nowhere"}, {Name: "local", Local: true}}}
	c.apply(inv)
	key, err := os.ReadFile(inv.Hosts[0].PrivateKeyPath)
	if err != nil || string(key) != "not-a-real-key\n" || inv.Hosts[0].Password != "pw" || inv.Hosts[0].BecomePassword != "pw" || inv.Hosts[1].PrivateKeyPath != "" {
		t.Errorf("hosts %+v, key %q %v", inv.Hosts, key, err)
	}
	if st, err := os.Stat(inv.Hosts[0].PrivateKeyPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
	c.remove()
	if _, err := os.Stat(inv.Hosts[0].PrivateKeyPath); !os.IsNotExist(err) {
		t.Errorf("the key file is left after the run: %v", err)
	}
}

// A Cluster made with spec.operator.enabled (the controller in the cluster,
// whose spec names key files of the control machine): the controller's
// cluster file has neither, so the spec loads and converges instead of
// failing the key check of spec.operator.
func TestReconcileOperatorEnabled(t *testing.T) {
	h := newHarness(t, func(s string) string {
		return strings.Replace(s, "  kubernetes:\n    version:", "  operator: {enabled: true}\n  kubernetes:\n    version:", 1)
	})
	h.reconcile(t)
	if _, st := h.get(t); st.Phase != "Ready" || conditionOf(st, "Progressing").Reason != "AsSpecified" {
		t.Errorf("status %+v", st)
	}
}
