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

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/builtins/images"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	kxschema "github.com/mensylisir/kubexm/schema"
)

// fakeControllerKubectl answers what roles/kubexm-controller asks: diff
// says "differs" until the Secret was applied; apply says unchanged the
// second time; the Cluster's annotation is what annotate set.
const fakeControllerKubectl = `#!/bin/sh
echo "$*" >> "$FAKE/calls"
stdin=$(cat 2>/dev/null)
case " $* " in
  *" diff "*) [ -e "$FAKE/secret" ] && [ "$(cat "$FAKE/secret")" = "$stdin" ] && exit 0; echo differs; exit 1 ;;
  *" apply --server-side "*) printf '%s' "$stdin" > "$FAKE/secret"; echo "secret/kubexm-ssh serverside-applied" ;;
  *" apply -f "*) f=$(echo "$*" | sed 's/.* -f //'); if [ -e "$f.applied" ]; then echo "x/y unchanged"; else touch "$f.applied"; echo "x/y created"; fi ;;
  *" rollout "*) echo "successfully rolled out" ;;
  *" get clusters"*) cat "$FAKE/annotation" 2>/dev/null ;;
  *" annotate "*credentials-*) rm -f "$FAKE/annotation"; echo annotated ;;
  *" annotate "*) echo "$*" | sed 's/.*credentials=//' | tr -d '\n' > "$FAKE/annotation"; echo annotated ;;
  *" delete "*) [ -e "$FAKE/secret" ] && { rm -f "$FAKE/secret"; echo 'namespace "kubexm-system" deleted'; } ;;
esac
exit 0
`

const fakeCtr = `#!/bin/sh
echo "ctr $*" >> "$FAKE/calls"
case " $* " in
  *" import "*) for f; do :; done; t=${f##*/kubexm-controller-}; echo "kubexm.local/kubexm-controller:${t%-*}" > "$FAKE/imported" ;;
  *" ls "*) cat "$FAKE/imported" 2>/dev/null ;;
esac
exit 0
`

// The whole role on the control machine with a fake kubectl and ctr: the
// image built and imported, the Secret holding the key (base64) and the
// known hosts applied from stdin, the manifests applied, the Cluster
// annotated; a re-run changes nothing; without spec.operator.enabled the
// objects and the annotation go, and a second such run changes nothing.
func TestKubexmControllerRoleRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE", dir)
	t.Setenv("KUBEXM_HOME", filepath.Join(dir, "home"))
	roles, err := filepath.Abs("../roles")
	if err != nil {
		t.Fatal(err)
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
		"kubectl":          fakeControllerKubectl,
		"ctr":              fakeCtr,
		"id":               key,
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
      kubectl_bin: ` + dir + `/kubectl
      images_ctr: ` + dir + `/ctr
      images_dir: ` + dir + `/images
      kubernetes_admin_kubeconfig: ` + dir + `/inv.ini
      kubexm_controller_dir: ` + dir + `/manifests
      kubexm_controller_ssh_key_file: ` + dir + `/id
      kubexm_controller_enabled: ` + e + `
      cluster_name: c1
      spec: {kubernetes: {containerRuntime: {type: containerd}}}
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
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: func(f *lifecycle.ClusterFile, _ *kxschema.Support) (*inventory.Inventory, error) {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, err
		}
		return inventory.ParseAnsibleINI(f.Path, data)
	}}
	play := func(enabled, check bool) (changed []string, calls, output string) {
		t.Helper()
		os.Remove(filepath.Join(dir, "calls"))
		if err := os.WriteFile(filepath.Join(dir, "pb.yaml"), []byte(pb(enabled)), 0o600); err != nil {
			t.Fatal(err)
		}
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
		return changed, string(data), out.String()
	}
	if _, calls, _ := play(true, true); strings.Contains(calls, " apply ") || strings.Contains(calls, " import ") || strings.Contains(calls, " annotate ") {
		t.Errorf("--check applied, imported or annotated:\n%s", calls)
	}
	changed, calls, output := play(true, false)
	if len(changed) == 0 || !strings.Contains(calls, "images import --label io.cri-containerd.pinned=pinned "+dir+"/images/kubexm-controller-") ||
		!strings.Contains(calls, "apply -f "+dir+"/manifests/controller.yaml") || !strings.Contains(calls, "rollout status deployment/kubexm-controller") {
		t.Errorf("the first run changed %v with the calls:\n%s", changed, calls)
	}
	var secret struct {
		Type     string
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "secret"))
	if err := json.Unmarshal(raw, &secret); err != nil {
		t.Fatalf("the Secret applied: %v\n%s", err, raw)
	}
	pk, _ := base64.StdEncoding.DecodeString(secret.Data["ssh-privatekey"])
	kh, _ := base64.StdEncoding.DecodeString(secret.Data["known_hosts"])
	if string(pk) != key || string(kh) != files["home/known_hosts"] || secret.Type != "kubernetes.io/ssh-auth" || secret.Metadata.Namespace != "kubexm-system" {
		t.Errorf("the Secret: %s", raw)
	}
	if a, _ := os.ReadFile(filepath.Join(dir, "annotation")); string(a) != "kubexm-system/kubexm-ssh" {
		t.Errorf("the Cluster's annotation %q", a)
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
		if changed, calls, _ := play(true, check); len(changed) > 0 || strings.Contains(calls, "apply --server-side") || strings.Contains(calls, " import ") {
			t.Errorf("re-run (check %v) changed %v:\n%s", check, changed, calls)
		}
	}
	changed, calls, _ = play(false, false)
	if len(changed) == 0 || !strings.Contains(calls, "delete --ignore-not-found --timeout=120s namespace,clusterrole,clusterrolebinding --selector app.kubernetes.io/name=kubexm-controller,app.kubernetes.io/managed-by=kubexm") {
		t.Errorf("disabled: changed %v with the calls:\n%s", changed, calls)
	}
	if _, err := os.Stat(filepath.Join(dir, "annotation")); err == nil {
		t.Error("the credentials annotation is left")
	}
	// With the manifests gone nothing is left to remove: no kubectl call.
	if changed, calls, _ := play(false, false); len(changed) > 0 || strings.Contains(calls, "delete") || strings.Contains(calls, "get clusters") {
		t.Errorf("disabled again: changed %v with the calls:\n%s", changed, calls)
	}
}
