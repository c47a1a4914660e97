package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema"
)

func TestSupportCommand(t *testing.T) {
	out, _, err := run(t, newSupportCmd())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Kubernetes: v1.35 to v1.37 (any patch); default " + schema.DefaultKubernetesVersion + "; mirrors: -e kubernetes_mirrors",
		"kubelet and kube-proxy up to 3 older",
		"checked with: v1.35.4, v1.36.3, v1.37.2 (a newer patch is accepted with a warning)",
		"feature gates removed by v1.36: ",
		"feature gates introduced by v1.37 (older minors refuse them): ",
		"containerd   2.x    default 2.",
		"spec.kubernetes.type\n    kubexm     supported\n    kubeadm    supported\n",
		"checksums: from each release's checksum file",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// The columns pad to the longest default, so only the words count.
	etcdLine := regexp.MustCompile(`(?m)^ *etcd +v3\.6\.x, v3\.7\.x +default ` + regexp.QuoteMeta(schema.DefaultEtcdVersion) + ` +mirrors: -e etcd_mirrors$`)
	if !etcdLine.MatchString(out) {
		t.Errorf("text lacks etcd's line (%s):\n%s", etcdLine, out)
	}
	out, _, err = run(t, newSupportCmd(), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s matrix.Support
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	ch := s.Choice("spec.network.plugin")
	if ch == nil || ch.Value("cilium") == nil || ch.Value("cilium").Status != matrix.StatusNotSupported || s.Kubernetes.Default != schema.DefaultKubernetesVersion {
		t.Errorf("json matrix: %+v", s)
	}
	if strings.Contains(out, `"tested"`) {
		t.Errorf("-o json without --evidence has the tests:\n%s", out)
	}
	// The evidence, only when asked for; users read no test names else.
	plain, _, err := run(t, newSupportCmd())
	if err != nil || strings.Contains(plain, "make ") || strings.Contains(plain, "e2e-") {
		t.Errorf("support names tests without --evidence: %v\n%s", err, plain)
	}
	out, _, err = run(t, newSupportCmd(), "--evidence")
	if err != nil || !strings.Contains(out, "spec.kubernetes.type\n    kubexm     supported: make e2e-cluster\n") {
		t.Errorf("--evidence lacks the tests: %v\n%s", err, out)
	}
	out, _, err = run(t, newSupportCmd(), "--evidence", "-o", "json")
	if err != nil || !strings.Contains(out, `"tested": "make e2e-cluster"`) {
		t.Errorf("--evidence -o json lacks the tests: %v\n%s", err, out)
	}
	if _, _, err := run(t, newSupportCmd(), "-o", "xml"); err == nil || !strings.Contains(err.Error(), "text, markdown, json or yaml") {
		t.Errorf("-o xml: %v", err)
	}
}

// TestReadmeTableIsTheMatrix: README.md's table of choices is what
// `kubexm support -o markdown` prints from roles/support.yaml.
func TestReadmeTableIsTheMatrix(t *testing.T) {
	data, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- begin: kubexm support -o markdown -->\n", "<!-- end: kubexm support -o markdown -->"
	_, rest, ok1 := strings.Cut(string(data), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the markers %q ... %q", begin, end)
	}
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	if want := s.Markdown(); table != want {
		t.Errorf("README.md's table differs from roles/support.yaml: replace it with the output of `kubexm support -o markdown`:\n%s", want)
	}
}

const unsupportedCluster = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: refused}
spec:
  hosts:
  - {name: n1, address: 192.0.2.1}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
  kubernetes:
    type: kubeadm
    containerRuntime: {type: cri-o}
  network:
    plugin: cilium
`

// TestPlayRefusesUnsupportedBeforeAnyTask: play stops before connecting to
// any host, under --check too, naming every unsupported choice.
func TestPlayRefusesUnsupportedBeforeAnyTask(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("cluster.yaml", []byte(unsupportedCluster), 0o600); err != nil {
		t.Fatal(err)
	}
	connected := false
	a := newApp(lifecycle.Runner{LoadInventory: lifecycle.LoadInventory, Builtins: builtins.ByName(), BuiltinFS: kubexm.Content(),
		Connect: func(context.Context, *inventory.Host) (transport.Transport, error) {
			connected = true
			return nil, errors.New("no hosts in this test")
		}})
	var out bytes.Buffer
	err := a.play(context.Background(), &out, "create-cluster", playFlags{Inventory: "cluster.yaml", Check: true, Output: "text", Forks: 1})
	if err == nil {
		t.Fatal("play accepted cri-o and cilium")
	}
	for _, want := range []string{"2 problems", "spec.kubernetes.containerRuntime.type: cri-o is not supported yet", "cluster.yaml:12:13: spec.network.plugin: cilium is not supported yet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if connected || out.Len() > 0 {
		t.Errorf("something ran: connected %v, output %q", connected, out.String())
	}
	if _, err := os.Stat(".kubexm"); !os.IsNotExist(err) {
		t.Errorf("the refused run left a work directory: %v", err)
	}
}

// TestForkedMatrixOverrides: a fork's roles/support.yaml is the one play
// and config validate --roles-path use.
func TestForkedMatrixOverrides(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if _, err := kubexm.Export(kubexm.Content(), "site", false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("cluster.yaml", []byte(strings.Replace(unsupportedCluster, "    containerRuntime: {type: cri-o}\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := realApp()
	list := func() error {
		return a.play(context.Background(), &bytes.Buffer{}, filepath.Join("site", "playbooks", "create-cluster"), playFlags{Inventory: "cluster.yaml", ListHosts: true, Output: "text"})
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), "cilium is not supported yet") {
		t.Fatalf("fork with the built-in matrix: %v", err)
	}
	if _, _, err := run(t, newConfigValidateCmd(), "-f", "cluster.yaml", "--roles-path", "site/roles"); err == nil {
		t.Fatal("config validate accepted cilium")
	}
	m := filepath.Join("site", "roles", "support.yaml")
	data, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	// The fork installs cilium and its modes (says its matrix).
	forked := regexp.MustCompile(`cilium: \{status: not supported yet, reason: "[^"]*"\}`).
		ReplaceAllString(string(data), `cilium: {status: supported, tested: "the fork's e2e"}`)
	forked = regexp.MustCompile(`\{status: not supported yet, reason: "cilium is not installed"\}`).
		ReplaceAllString(forked, `{status: supported, tested: "the fork's e2e"}`)
	if forked == string(data) || strings.Contains(forked, "cilium is not installed") {
		t.Fatal("matrix has no cilium line to flip")
	}
	if err := os.WriteFile(m, []byte(forked), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := list(); err != nil {
		t.Errorf("fork whose matrix supports cilium: %v", err)
	}
	if out, _, err := run(t, newConfigValidateCmd(), "-f", "cluster.yaml", "--roles-path", "site/roles"); err != nil || !strings.Contains(out, "valid") {
		t.Errorf("config validate --roles-path: %q %v", out, err)
	}
	if _, _, err := run(t, newConfigValidateCmd(), "-f", "cluster.yaml"); err == nil {
		t.Error("config validate without --roles-path used the fork's matrix")
	}
	// A broken matrix is an error naming its file, not a silent fallback.
	if err := os.WriteFile(m, []byte("kubernetes: {minors: []}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), filepath.Join("site", "roles", "support.yaml")) {
		t.Errorf("broken fork matrix: %v", err)
	}
}

func TestVersionNamesTheSupportedRange(t *testing.T) {
	out, _, err := run(t, newRootCmd(), "--version")
	if err != nil || !strings.Contains(out, "installs Kubernetes v1.35 to v1.37 (any patch); default "+schema.DefaultKubernetesVersion) {
		t.Errorf("--version: %q %v", out, err)
	}
}

// TestDeleteOnlyWarns: delete installs nothing, so a cluster file from an
// older kubexm (an older Kubernetes, kubeadm) still reaches its hosts.
func TestDeleteOnlyWarns(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	old := strings.Replace(unsupportedCluster, "type: kubeadm", "type: kubeadm\n    version: v1.33.13", 1)
	if err := os.WriteFile("cluster.yaml", []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	a := realApp()
	var out bytes.Buffer
	if err := a.play(context.Background(), &out, "delete", playFlags{Inventory: "cluster.yaml", ListHosts: true, Output: "text"}); err != nil {
		t.Fatalf("delete refused: %v", err)
	}
	if !strings.Contains(out.String(), "n1") {
		t.Errorf("list-hosts: %s", out.String())
	}
	if err := a.play(context.Background(), &out, "create-cluster", playFlags{Inventory: "cluster.yaml", ListHosts: true, Output: "text"}); err == nil ||
		!strings.Contains(err.Error(), "Kubernetes v1.33.13 is not supported") {
		t.Errorf("create-cluster: %v", err)
	}
}
