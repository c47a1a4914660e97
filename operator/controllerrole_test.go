package operator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/builtins/images"
	"github.com/mensylisir/kubexm/builtins/kube/kubefake"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

const fakeCtr = `#!/bin/sh
echo "ctr $*" >> "$FAKE/calls"
case " $* " in
  *" import "*) for f; do :; done; t=${f##*/kubexm-controller-}; echo "kubexm.local/kubexm-controller:${t%-*}" > "$FAKE/imported" ;;
  *" ls "*) cat "$FAKE/imported" 2>/dev/null ;;
esac
exit 0
`

// The whole role on the control machine against an in-memory API server
// (kubefake, through the k8s builtin) and a fake ctr: the image built and
// imported, the namespace, the Secret holding the key (base64) and the
// known hosts, the offline bundle sent to the master, the RBAC and the
// Deployment (mounting the bundle, the site's -e values in its arguments)
// applied, the rollout waited for, the Cluster annotated; a re-run stores
// nothing; without spec.operator.enabled the objects, the annotation and
// the bundle go, and a second such run makes no API call at all.
func TestKubexmControllerRoleRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE", dir)
	t.Setenv("KUBEXM_HOME", filepath.Join(dir, "home"))
	roles, err := filepath.Abs("../roles")
	if err != nil {
		t.Fatal(err)
	}
	srv := kubefake.New()
	defer srv.Close()
	cluster := kubefake.Kind{Group: "kubexm.mensylisir.io", Version: "v1alpha1", Kind: "Cluster", Resource: "clusters"}
	deployment := kubefake.Kind{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespaced: true}
	for _, obj := range []map[string]any{
		{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "clusters.kubexm.mensylisir.io"},
			"spec": map[string]any{"group": "kubexm.mensylisir.io", "scope": "Cluster", "names": map[string]any{"kind": "Cluster", "plural": "clusters"},
				"versions": []any{map[string]any{"name": "v1alpha1"}}}},
		{"apiVersion": "kubexm.mensylisir.io/v1alpha1", "kind": "Cluster", "metadata": map[string]any{"name": "c1"}},
		// What the Deployment's controller and the kubelet will have
		// reported: one replica rolled out (kubefake runs no pods).
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "kubexm-controller", "namespace": "kubexm-system"},
			"status": map[string]any{"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1}},
	} {
		if err := srv.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	// A static binary stands in for kubexm (the test binary is not).
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600)
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module x\n\ngo 1.22\n"), 0o600)
	exe := filepath.Join(dir, "kubexm")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-line\n-----END OPENSSH PRIVATE KEY-----\n"
	files := map[string]string{
		"admin.conf":       string(srv.Kubeconfig()),
		"ctr":              fakeCtr,
		"id":               key,
		"bundle.tar.gz":    "the offline bundle",
		"home/known_hosts": "10.0.0.1 ssh-ed25519 AAAAhostkey\n",
		"inv.ini":          "[all:vars]\narch=" + runtime.GOARCH + "\n[master]\nn1 ansible_connection=local\n[etcd]\nn1 ansible_connection=local\n[worker]\n[k8s_cluster:children]\nmaster\n",
	}
	pb := func(enabled bool) string {
		e := "false"
		if enabled {
			e = "true"
		}
		return `name: t
plays:
  - name: t
    hosts: master
    gather_facts: false
    vars:
      images_ctr: ` + dir + `/ctr
      images_dir: ` + dir + `/images
      kubernetes_admin_kubeconfig: ` + dir + `/admin.conf
      kubexm_controller_dir: ` + dir + `/manifests
      kubexm_controller_ssh_key_file: ` + dir + `/id
      kubexm_controller_enabled: ` + e + `
      kubexm_controller_rollout_timeout: 20s
      kubexm_controller_bundle: ` + dir + `/bundle.tar.gz
      kubexm_controller_bundle_sha256: 0123abcd
      kubexm_controller_bundle_dir: ` + dir + `/masters-bundle
      kubexm_controller_extra_vars: ['{"os_packages": ["curl"]}', os_sysctl_ignore_readonly=true]
      cluster_name: c1
      spec: {kubernetes: {containerRuntime: {type: containerd}}}
      container_runtime_type: containerd
    roles:
      - kubexm-controller
`
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	reg["controller_image"] = images.NewControllerImage(func() (string, error) { return exe, nil })
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: func(f *lifecycle.ClusterFile, _ *matrix.Support) (*inventory.Inventory, error) {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, err
		}
		return inventory.ParseAnsibleINI(f.Path, data)
	}}
	// play runs the role; the ctr calls and the API server's calls during it.
	play := func(enabled, check bool) (changed []string, ctr string, api []string, output string) {
		t.Helper()
		os.Remove(filepath.Join(dir, "calls"))
		if err := os.WriteFile(filepath.Join(dir, "pb.yaml"), []byte(pb(enabled)), 0o600); err != nil {
			t.Fatal(err)
		}
		before := len(srv.Calls())
		var out bytes.Buffer
		_, err := r.Run(context.Background(), lifecycle.Request{Playbook: filepath.Join(dir, "pb.yaml"), Inventory: filepath.Join(dir, "inv.ini"),
			RolesPath: []string{roles}, WorkDir: filepath.Join(dir, "w"), Check: check, Output: "json", Stdout: &out})
		if err != nil {
			t.Fatalf("enabled %v, check %v: %v\n%s", enabled, check, err, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			var ev struct{ Kind, Task, Status string }
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "host_result" && ev.Status == "changed" {
				changed = append(changed, ev.Task)
			}
		}
		data, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return changed, string(data), srv.Calls()[before:], out.String()
	}
	stored := srv.Changes()
	if _, ctr, _, _ := play(true, true); strings.Contains(ctr, " import ") || srv.Changes() != stored {
		t.Errorf("--check imported (%q) or stored %d objects", ctr, srv.Changes()-stored)
	}
	changed, ctr, api, output := play(true, false)
	writes := strings.Join(api, "\n")
	for _, want := range []string{
		"PATCH /api/v1/namespaces/kubexm-system application/apply-patch+yaml",
		"PATCH /api/v1/namespaces/kubexm-system/secrets/kubexm-ssh application/apply-patch+yaml",
		"PATCH /apis/rbac.authorization.k8s.io/v1/clusterroles/kubexm-controller application/apply-patch+yaml",
		"PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/kubexm-system/rolebindings/kubexm-controller application/apply-patch+yaml",
		"PATCH /apis/apps/v1/namespaces/kubexm-system/deployments/kubexm-controller application/apply-patch+yaml",
		"PATCH /apis/kubexm.mensylisir.io/v1alpha1/clusters/c1 application/merge-patch+json",
	} {
		if !strings.Contains(writes, want) {
			t.Errorf("the first run made no %s; its API calls:\n%s", want, writes)
		}
	}
	if len(changed) == 0 || !strings.Contains(ctr, "images import --label io.cri-containerd.pinned=pinned "+dir+"/images/kubexm-controller-") {
		t.Errorf("the first run changed %v with the ctr calls:\n%s", changed, ctr)
	}
	imported, _ := os.ReadFile(filepath.Join(dir, "imported"))
	var d struct {
		Spec struct {
			Template struct {
				Metadata struct{ Annotations map[string]string }
				Spec     struct {
					Containers []struct {
						Image        string
						Args         []string
						VolumeMounts []struct {
							Name, MountPath string
							ReadOnly        bool
						}
					}
					Volumes []struct {
						Name     string
						HostPath *struct{ Path, Type string }
					}
				}
			}
		}
	}
	if b, _ := json.Marshal(srv.Get(deployment, "kubexm-system", "kubexm-controller")); json.Unmarshal(b, &d) != nil ||
		len(d.Spec.Template.Spec.Containers) != 1 || d.Spec.Template.Spec.Containers[0].Image != strings.TrimSpace(string(imported)) {
		t.Fatalf("the Deployment does not run the image imported (%s): %+v", imported, d)
	}
	// The offline bundle: on the master, mounted read-only, the runs' flag;
	// the site's -e values, one argument each.
	if b, err := os.ReadFile(filepath.Join(dir, "masters-bundle", "bundle.tar.gz")); err != nil || string(b) != files["bundle.tar.gz"] {
		t.Errorf("the bundle on the master: %q %v", b, err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, "\n")
	for _, want := range []string{"--offline-bundle=/var/lib/kubexm-bundle/bundle.tar.gz", "--extra-vars=kubexm_controller_pod=$(POD_NAMESPACE)/$(POD_NAME)", `--extra-vars={"os_packages": ["curl"]}`, "--extra-vars=os_sysctl_ignore_readonly=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("the controller's args have no %s:\n%s", want, args)
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "bundle" && m.MountPath == "/var/lib/kubexm-bundle" && m.ReadOnly)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "bundle" && (v.HostPath == nil || v.HostPath.Path != filepath.Join(dir, "masters-bundle") || v.HostPath.Type != "Directory") {
			mounted = false
		}
	}
	if !mounted || d.Spec.Template.Metadata.Annotations["kubexm.mensylisir.io/offline-bundle-sha256"] != "0123abcd" {
		t.Errorf("the bundle's volume, mount or annotation: %+v", d.Spec.Template)
	}
	var secret struct {
		Type     string
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	raw, _ := json.Marshal(srv.Get(kubefake.Kind{Version: "v1", Kind: "Secret", Resource: "secrets", Namespaced: true}, "kubexm-system", "kubexm-ssh"))
	if err := json.Unmarshal(raw, &secret); err != nil {
		t.Fatalf("the Secret applied: %v\n%s", err, raw)
	}
	pk, _ := base64.StdEncoding.DecodeString(secret.Data["ssh-privatekey"])
	kh, _ := base64.StdEncoding.DecodeString(secret.Data["known_hosts"])
	if string(pk) != key || string(kh) != files["home/known_hosts"] || secret.Type != "kubernetes.io/ssh-auth" {
		t.Errorf("the Secret: %s", raw)
	}
	annotation := func() any {
		md, _ := srv.Get(cluster, "", "c1")["metadata"].(map[string]any)
		a, _ := md["annotations"].(map[string]any)
		return a["kubexm.mensylisir.io/credentials"]
	}
	if a := annotation(); a != "kubexm-system/kubexm-ssh" {
		t.Errorf("the Cluster's annotation %v", a)
	}
	if strings.Contains(output, "secret-key-line") || strings.Contains(output, secret.Data["ssh-privatekey"]) {
		t.Errorf("the key is in the run's output")
	}
	_ = filepath.WalkDir(filepath.Join(dir, "w"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".tar") {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("secret-key-line")) || bytes.Contains(b, []byte(secret.Data["ssh-privatekey"])) {
				t.Errorf("the key is in %s", p)
			}
		}
		return nil
	})
	for _, check := range []bool{false, true} {
		stored := srv.Changes()
		if changed, ctr, _, _ := play(true, check); len(changed) > 0 || srv.Changes() != stored || strings.Contains(ctr, " import ") {
			t.Errorf("re-run (check %v) changed %v, stored %d objects:\n%s", check, changed, srv.Changes()-stored, ctr)
		}
	}
	changed, _, api, _ = play(false, false)
	if len(changed) == 0 {
		t.Errorf("disabled: changed nothing; the API calls:\n%s", strings.Join(api, "\n"))
	}
	for _, k := range []struct {
		kind   kubefake.Kind
		ns, nm string
	}{{deployment, "kubexm-system", "kubexm-controller"}, {kubefake.Kind{Version: "v1", Kind: "Namespace", Resource: "namespaces"}, "", "kubexm-system"},
		{kubefake.Kind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding", Resource: "clusterrolebindings"}, "", "kubexm-controller"}} {
		if srv.Get(k.kind, k.ns, k.nm) != nil {
			t.Errorf("disabled: %s %s/%s is left", k.kind.Kind, k.ns, k.nm)
		}
	}
	if a := annotation(); a != nil {
		t.Errorf("the credentials annotation is left: %v", a)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifests")); err == nil {
		t.Error("the manifests are left")
	}
	if _, err := os.Stat(filepath.Join(dir, "masters-bundle")); err == nil {
		t.Error("the offline bundle is left on the master")
	}
	// With the manifests gone nothing is left to remove: no API call.
	if changed, _, api, _ := play(false, false); len(changed) > 0 || len(api) > 0 {
		t.Errorf("disabled again: changed %v with the API calls:\n%s", changed, strings.Join(api, "\n"))
	}
}
