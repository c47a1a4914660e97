package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/spf13/cobra"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins/images"
	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/internal/testbin"
)

// realApp is kubexm as main builds it: the real builtins, the built-in
// roles and playbooks, cluster.yaml inventories, local hosts.
func realApp() *app {
	c := &lifecycle.Connector{}
	return newApp(lifecycle.Runner{LoadInventory: lifecycle.LoadInventory, Builtins: builtins.ByName(), Connect: c.Connect, BuiltinFS: kubexm.Content()})
}

// repoRoot is the repository's top directory (roles/ and playbooks/).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
}

func putFile(t *testing.T, p string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func hexSum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// recapOf runs a playbook with JSON output and returns the recap.
func recapOf(t *testing.T, a *app, ref string, f playFlags) (*model.Recap, string, error) {
	t.Helper()
	var out bytes.Buffer
	f.Output, f.Forks = "json", 10
	err := a.play(context.Background(), &out, ref, f)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var ev struct {
		Kind  string       `json:"kind"`
		Recap *model.Recap `json:"recap"`
	}
	if json.Unmarshal([]byte(lines[len(lines)-1]), &ev) != nil || ev.Recap == nil {
		return nil, out.String(), err
	}
	return ev.Recap, out.String(), err
}

func changed(rc *model.Recap) int {
	n := 0
	for _, h := range rc.Hosts {
		n += h.Changed
	}
	return n
}

// The download role reads the sum from sha256sum-format files and from
// bare-digest files (dl.k8s.io's <bin>.sha256), in a local directory and
// from mirrors (following redirects).
func TestDownloadRoleChecksumFiles(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{}
	put := func(name string, data []byte) string {
		files[name] = data
		putFile(t, filepath.Join(src, name), data)
		return hexSum(data)
	}
	bare := put("kubelet", bytes.Repeat([]byte("kubelet"), 5000))
	putFile(t, filepath.Join(src, "kubelet.sha256"), []byte(bare)) // no newline, as dl.k8s.io
	upper := put("kubectl", []byte("kubectl binary"))
	putFile(t, filepath.Join(src, "kubectl.sha256"), []byte("  "+strings.ToUpper(upper)+"\n"))
	listed := put("etcd.tar.gz", []byte("etcd archive"))
	other := put("other.tar.gz", []byte("other"))
	putFile(t, filepath.Join(src, "SHA256SUMS"), []byte(other+"  other.tar.gz\n"+listed+" *etcd.tar.gz\n"))
	prefixed := put("runc.amd64", []byte("runc"))
	putFile(t, filepath.Join(src, "runc.sha256sum"), []byte(prefixed+"  release/runc.amd64\r\n"))
	wrong := put("bad", []byte("bad file"))
	putFile(t, filepath.Join(src, "bad.sha256"), []byte(hexSum([]byte("something else"))))
	_ = wrong

	// A mirror with the files but no checksums, then one that redirects
	// (as GitHub and dl.k8s.io do): the sum comes from the second, the
	// file from the first.
	mux := http.NewServeMux()
	mux.Handle("/files/", http.StripPrefix("/files/", http.FileServer(http.Dir(src))))
	mux.HandleFunc("/nosums/", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "sha256") || strings.HasSuffix(r.URL.Path, "SHA256SUMS") {
			http.NotFound(w, r)
			return
		}
		http.StripPrefix("/nosums/", http.FileServer(http.Dir(src))).ServeHTTP(w, r)
	})
	mux.HandleFunc("/release/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/files/"+strings.TrimPrefix(r.URL.Path, "/release/"), http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	pb := putFile(t, filepath.Join(t.TempDir(), "playbook.yaml"), []byte(`
- hosts: localhost
  tasks:
    - include_role:
        name: download
        vars:
          download_component: "{{ .c.component }}"
          download_version: "1.0"
          download_arch: amd64
          download_file: "{{ .c.file }}"
          download_checksums: "{{ .c.sums }}"
          download_local_dir: "{{ .c.dir | default \"\" }}"
          download_mirrors: "{{ .c.mirrors | default (list) }}"
      loop: "{{ .cases }}"
      loop_control: {loop_var: c}
`))
	mirrors := []any{srv.URL + "/nosums", srv.URL + "/release/"}
	cases := []any{
		map[string]any{"component": "local", "file": "kubelet", "sums": "kubelet.sha256", "dir": src},
		map[string]any{"component": "local", "file": "kubectl", "sums": "kubectl.sha256", "dir": src},
		map[string]any{"component": "local", "file": "etcd.tar.gz", "sums": "SHA256SUMS", "dir": src},
		map[string]any{"component": "local", "file": "runc.amd64", "sums": "runc.sha256sum", "dir": src},
		map[string]any{"component": "mirror", "file": "kubelet", "sums": "kubelet.sha256", "mirrors": mirrors},
		map[string]any{"component": "mirror", "file": "etcd.tar.gz", "sums": "SHA256SUMS", "mirrors": mirrors},
	}
	extra, _ := json.Marshal(map[string]any{"cases": cases})
	work := t.TempDir()
	a := realApp()
	rc, out, err := recapOf(t, a, pb, playFlags{WorkDir: work, ExtraVars: []string{string(extra)}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, c := range cases {
		m := c.(map[string]any)
		p := filepath.Join(work, m["component"].(string), "1.0", "amd64", m["file"].(string))
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(data, files[m["file"].(string)]) {
			t.Errorf("%s: %v", p, err)
		}
	}
	if changed(rc) != 6 {
		t.Errorf("first run changed %d, want 6 downloads", changed(rc))
	}
	// A second run finds every file with its sum.
	if rc, out, err = recapOf(t, a, pb, playFlags{WorkDir: work, ExtraVars: []string{string(extra)}}); err != nil || changed(rc) != 0 {
		t.Fatalf("second run: changed %v, %v\n%s", rc, err, out)
	}

	// A bare digest that is not the file's is a sha256 mismatch; a
	// checksums file without the file is a clear failure.
	for _, c := range []struct {
		cs   map[string]any
		want string
	}{
		{map[string]any{"component": "x", "file": "bad", "sums": "bad.sha256", "dir": src}, "sha256 mismatch"},
		{map[string]any{"component": "x", "file": "kubelet", "sums": "SHA256SUMS", "dir": src}, "no sha256 for kubelet (" + src + "/SHA256SUMS does not list it): put kubelet and SHA256SUMS in download_local_dir"},
		{map[string]any{"component": "x", "file": "kubelet", "sums": "kubectl.sha256x", "mirrors": mirrors}, "kubectl.sha256x was not found"},
		{map[string]any{"component": "x", "file": "kubelet", "sums": "SHA256SUMS"}, "no source for x 1.0 (kubelet): give mirror base URLs in download_mirrors"},
	} {
		extra, _ := json.Marshal(map[string]any{"cases": []any{c.cs}})
		_, out, err := recapOf(t, a, pb, playFlags{WorkDir: t.TempDir(), ExtraVars: []string{string(extra)}})
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: error %v, want %q in\n%s", c.cs, err, c.want, out)
		}
	}
}

// testRegistry serves go-containerregistry's in-memory registry on
// 127.0.0.1 and pushes a small linux/amd64 image under each repository.
func testRegistry(t *testing.T, repos ...string) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, r := range repos {
		img, err := random.Image(1024, 1)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", "amd64"
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(host + "/" + r)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// exportFixture is a cluster.yaml and a set of sources like upstream's: a
// directory per component and a registry with the images.
type exportFixture struct {
	dir, cluster string
	vars         map[string]any
	registry     string
}

func newExportFixture(t *testing.T) *exportFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &exportFixture{dir: dir, vars: map[string]any{}}
	// node1 runs everything; node2 is an arm64 etcd member only, so etcd is
	// needed for both architectures and the rest for amd64 alone.
	fx.cluster = putFile(t, filepath.Join(dir, "cluster.yaml"), []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: offline}
spec:
  hosts:
    - {name: node1, address: localhost, internalAddress: 192.0.2.11}
    - {name: node2, address: 192.0.2.12, arch: arm64}
  roleGroups: {etcd: [node1, node2], master: [node1], worker: [node1]}
  kubernetes:
    type: kubexm
    version: v1.37.2
    containerRuntime: {type: containerd, version: 2.4.2}
  etcd: {type: kubexm, version: v3.6.16}
  network: {plugin: flannel}
  registry: {privateRegistry: "reg.example:5000"}
`))
	src := func(sub string) string { return filepath.Join(dir, "src", sub) }
	content := func(name string) []byte { return bytes.Repeat([]byte(name), 3000) }
	sumLine := func(name string) string { return hexSum(content(name)) + "  " + name + "\n" }
	var etcdSums string
	for _, arch := range []string{"amd64", "arm64"} {
		f := "etcd-v3.6.16-linux-" + arch + ".tar.gz"
		putFile(t, filepath.Join(src("etcd"), f), content(f))
		etcdSums += sumLine(f)
	}
	putFile(t, filepath.Join(src("etcd"), "SHA256SUMS"), []byte(etcdSums))
	for sub, files := range map[string][][2]string{
		"containerd": {{"containerd-2.4.2-linux-amd64.tar.gz", "containerd-2.4.2-linux-amd64.tar.gz.sha256sum"}},
		"runc":       {{"runc.amd64", "runc.sha256sum"}},
		"cni":        {{"cni-plugins-linux-amd64-v1.9.1.tgz", "cni-plugins-linux-amd64-v1.9.1.tgz.sha256"}},
		"crictl":     {{"crictl-v1.37.0-linux-amd64.tar.gz", "crictl-v1.37.0-linux-amd64.tar.gz.sha256"}},
		"flannel":    {{"cni-plugin-flannel-linux-amd64-v1.6.2-flannel1.tgz", "cni-plugin-flannel-linux-amd64-v1.6.2-flannel1.tgz.sha256"}},
	} {
		for _, f := range files {
			putFile(t, filepath.Join(src(sub), f[0]), content(f[0]))
			putFile(t, filepath.Join(src(sub), f[1]), []byte(sumLine(f[0])))
		}
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		putFile(t, filepath.Join(src("k8s"), b), content(b))
		putFile(t, filepath.Join(src("k8s"), b+".sha256"), []byte(hexSum(content(b)))) // bare digests
	}
	for k, sub := range map[string]string{"etcd_local_dir": "etcd", "containerd_local_dir": "containerd", "runc_local_dir": "runc",
		"cni_plugins_local_dir": "cni", "crictl_local_dir": "crictl", "kubernetes_local_dir": "k8s", "flannel_cni_plugin_local_dir": "flannel"} {
		fx.vars[k] = src(sub)
	}
	// The images come from a registry on 127.0.0.1 instead of upstream's.
	// Same repository paths as upstream's, so the names in the cluster
	// (reg.example:5000/<path>) are the ones the default catalogue gives.
	fx.registry = testRegistry(t, "pause:3.10", "coredns/coredns:v1.12.0", "flannel-io/flannel:v0.26.7")
	fx.vars["images_catalog"] = []any{
		map[string]any{"name": "pause", "repo": fx.registry + "/pause", "tag": "3.10"},
		map[string]any{"name": "coredns", "repo": fx.registry + "/coredns/coredns", "tag": "v1.12.0"},
		map[string]any{"name": "flannel", "repo": fx.registry + "/flannel-io/flannel", "tag": "v0.26.7"},
	}
	// No OS packages: their export asks the control machine's apt and
	// Debian's mirrors (the HA e2e suite exports them).
	fx.vars["os_bundle_packages"] = []any{}
	return fx
}

func (fx *exportFixture) extraVars(t *testing.T) []string {
	t.Helper()
	b, err := json.Marshal(fx.vars)
	if err != nil {
		t.Fatal(err)
	}
	return []string{string(b)}
}

// export runs kubexm artifact export of the fixture into bundle.tar.gz,
// failing the test if it fails; the arguments and the output.
func (fx *exportFixture) export(t *testing.T, a *app) ([]string, string) {
	t.Helper()
	args := []string{"export", "-f", fx.cluster, "-o", "bundle.tar.gz"}
	for _, e := range fx.extraVars(t) {
		args = append(args, "-e", e)
	}
	out, err := runArtifactCmd(t, a, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return args, out
}

func runArtifactCmd(t *testing.T, a *app, args ...string) (string, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "kubexm"}
	addGroupCmds(cmd, a)
	args = append([]string{"artifact"}, args...)
	var out bytes.Buffer
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// kubexm artifact export packs what the cluster needs, for the
// architectures of the hosts needing it, and kubexm play --offline-bundle
// installs from it without the network.
func TestArtifactExportAndOfflinePlay(t *testing.T) {
	fx := newExportFixture(t)
	t.Chdir(fx.dir)
	a := realApp()
	args, out := fx.export(t, a)
	if !strings.Contains(out, "wrote bundle.tar.gz: 16 files (7 binaries, 6 archives, 3 images) for cluster offline") {
		t.Errorf("summary:\n%s", out)
	}
	sumFile, err := os.ReadFile("bundle.tar.gz.sha256")
	if err != nil || !strings.HasSuffix(string(sumFile), "  bundle.tar.gz\n") {
		t.Errorf("bundle.tar.gz.sha256: %q %v", sumFile, err)
	}

	work := filepath.Join(fx.dir, "offline-work")
	dir, m, err := bundle.Open(context.Background(), "bundle.tar.gz", work, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bundle.Artifact{}
	for _, art := range m.Artifacts {
		paths[art.Path] = art
	}
	for _, want := range []string{
		"etcd/v3.6.16/amd64/etcd-v3.6.16-linux-amd64.tar.gz",
		"etcd/v3.6.16/arm64/etcd-v3.6.16-linux-arm64.tar.gz",
		"containerd/2.4.2/amd64/containerd-2.4.2-linux-amd64.tar.gz",
		"runc/1.5.2/amd64/runc.amd64",
		"cni-plugins/1.9.1/amd64/cni-plugins-linux-amd64-v1.9.1.tgz",
		"crictl/1.37.0/amd64/crictl-v1.37.0-linux-amd64.tar.gz",
		"kubernetes/v1.37.2/amd64/kubelet",
		"kubernetes/v1.37.2/amd64/kubectl",
		"flannel-cni-plugin/v1.6.2-flannel1/amd64/cni-plugin-flannel-linux-amd64-v1.6.2-flannel1.tgz",
		"images/pause/3.10/amd64/pause-3.10-amd64.tar",
		"images/flannel/v0.26.7/amd64/flannel-v0.26.7-amd64.tar",
	} {
		if _, ok := paths[want]; !ok {
			t.Errorf("bundle lacks %s", want)
		}
	}
	if len(paths) != 16 {
		t.Errorf("%d artifacts, want 16: %v", len(paths), paths)
	}
	// Images are named as the cluster pulls them: in the private registry.
	pause := paths["images/pause/3.10/amd64/pause-3.10-amd64.tar"]
	if pause.Kind != "image" || pause.Image != "reg.example:5000/pause:3.10" {
		t.Errorf("pause: %+v", pause)
	}
	if k := paths["kubernetes/v1.37.2/amd64/kubelet"]; k.Kind != "binary" || unpackedOK(t, dir, k) != nil {
		t.Errorf("kubelet: %+v", k)
	}
	if m.Cluster != "offline" || m.KubexmVersion != version {
		t.Errorf("manifest header %+v", m)
	}

	// A second export fetches nothing again and packs the same files.
	out, err = runArtifactCmd(t, a, append(args[:3:3], "-o", "again.tar.gz", "-e", fx.extraVars(t)[0])...)
	if err != nil || !strings.Contains(out, "16 files") || strings.Contains(out, "changed=") && !strings.Contains(out, "list for kubexm artifact export hosts=1/1 elapsed") {
		t.Fatalf("second export: %v\n%s", err, out)
	}
	if n := strings.Count(out, "changed=1"); n != 1 { // only the list file
		t.Errorf("second export changed %d tasks, want only the list:\n%s", n, out)
	}

	// Offline: every component's mirrors are unreachable (and kubelet's
	// local directory does not exist), and the files come from the bundle.
	// A direct download is refused.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	pb := putFile(t, filepath.Join(fx.dir, "offline", "playbook.yaml"), []byte(`
- hosts: etcd
  tasks:
    - import_role:
        name: download
      vars:
        download_component: etcd
        download_version: v3.6.16
        download_file: "etcd-v3.6.16-linux-{{ .arch }}.tar.gz"
        download_mirrors: ["`+dead.URL+`"]
      delegate_to: localhost
      when: inventory_hostname == "node1"
- hosts: localhost
  vars_files: [`+filepath.Join(repoRoot(t), "roles/artifacts/defaults/main.yaml")+`]
  tasks:
    - import_role:
        name: download
      vars:
        download_component: kubernetes
        download_version: "{{ .kubernetes_version }}"
        download_file: kubelet
        download_checksums: kubelet.sha256
        download_mirrors: ["`+dead.URL+`"]
        download_local_dir: "`+filepath.Join(fx.dir, "no-such-dir")+`"
        download_arch: amd64
    - name: a download that bypasses the role
      download: {url: "`+dead.URL+`/kubelet", dest: kubelet, sha256: "`+strings.Repeat("0", 64)+`"}
      when: bypass ?? false
`))
	offWork := filepath.Join(fx.dir, "w-offline")
	rc, out, err := recapOf(t, a, filepath.Dir(pb), playFlags{Inventory: fx.cluster, WorkDir: offWork, OfflineBundle: "bundle.tar.gz", ExtraVars: []string{"x=1"}})
	if err != nil {
		t.Fatalf("offline play: %v\n%s", err, out)
	}
	if changed(rc) != 2 {
		t.Errorf("offline play changed %d, want 2 copies from the bundle\n%s", changed(rc), out)
	}
	for _, p := range []string{"etcd/v3.6.16/amd64/etcd-v3.6.16-linux-amd64.tar.gz", "kubernetes/v1.37.2/amd64/kubelet"} {
		if _, err := os.Stat(filepath.Join(offWork, p)); err != nil {
			t.Errorf("not fetched from the bundle: %v", err)
		}
	}
	_, out, err = recapOf(t, a, filepath.Dir(pb), playFlags{Inventory: fx.cluster, WorkDir: offWork, OfflineBundle: "bundle.tar.gz", ExtraVars: []string{"bypass=true"}})
	if err == nil || !strings.Contains(out, "--offline-bundle: refusing to download from "+dead.URL+"/kubelet") {
		t.Errorf("a network download under --offline-bundle: %v\n%s", err, out)
	}
	// A file the bundle lacks is named, with the bundle directory.
	_, out, err = recapOf(t, a, filepath.Dir(pb), playFlags{Inventory: fx.cluster, WorkDir: offWork, OfflineBundle: "bundle.tar.gz", ExtraVars: []string{"kubernetes_version=v1.36.1"}})
	if err == nil || !strings.Contains(out, "the offline bundle has no kubelet for kubernetes v1.36.1 amd64") {
		t.Errorf("a file missing from the bundle: %v\n%s", err, out)
	}
	// A corrupt bundle stops the run before anything runs.
	raw, _ := os.ReadFile("bundle.tar.gz")
	os.WriteFile("cut.tar.gz", raw[:len(raw)*2/3], 0o644)
	rc, out, err = recapOf(t, a, filepath.Dir(pb), playFlags{Inventory: fx.cluster, WorkDir: t.TempDir(), OfflineBundle: "cut.tar.gz"})
	if err == nil || rc != nil || !strings.Contains(err.Error(), "offline bundle cut.tar.gz") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated bundle: %v\n%s", err, out)
	}

	t.Run("images role", func(t *testing.T) { testImagesRole(t, fx, a) })
}

// unpackedOK checks the unpacked file against the manifest.
func unpackedOK(t *testing.T, dir string, a bundle.Artifact) error {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(a.Path)))
	if err != nil {
		return err
	}
	if hexSum(data) != a.SHA256 {
		return fmt.Errorf("%s: sha256 differs", a.Path)
	}
	return nil
}

// The images role sends the tarballs from the bundle and imports each one
// that containerd lacks, once, pinned: a second run changes nothing, --check
// neither. ctr is a script recording what it imports and pins.
func testImagesRole(t *testing.T, fx *exportFixture, a *app) {
	state := filepath.Join(fx.dir, "ctr-state")
	ctr := putFile(t, filepath.Join(fx.dir, "bin", "ctr"), []byte(`#!/bin/sh
# A stand-in for ctr: --address A --namespace N images (ls --quiet [FILTER] |
# import --label L FILE | label REF L); pinned refs in state.pinned
while [ $# -gt 0 ]; do
  case $1 in
    --address|--namespace) shift 2 ;;
    images) shift; break ;;
    *) echo "unexpected argument $1" >&2; exit 2 ;;
  esac
done
pin='io.cri-containerd.pinned=pinned'
case $1 in
  ls)
    [ "$2" = --quiet ] || exit 2
    if [ $# -eq 3 ]; then
      [ "$3" = 'labels."io.cri-containerd.pinned"==pinned' ] || { echo "unexpected filter $3" >&2; exit 2; }
      [ -f '`+state+`.pinned' ] && sort -u '`+state+`.pinned'
    else
      [ -f '`+state+`' ] && sort -u '`+state+`'
    fi
    exit 0 ;;
  import)
    [ "$2 $3" = "--label $pin" ] || { echo "import without $pin: $*" >&2; exit 2; }
    ref=$(tar -xOf "$4" manifest.json | sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p')
    [ -n "$ref" ] || { echo "no RepoTags in $4" >&2; exit 1; }
    echo "$ref" >> '`+state+`'
    echo "$ref" >> '`+state+`.pinned'
    echo "$4" >> '`+state+`.imports' ;;
  label)
    [ "$3" = "$pin" ] || exit 2
    grep -qx "$2" '`+state+`' || { echo "no image $2" >&2; exit 1; }
    echo "$2" >> '`+state+`.pinned' ;;
  *) exit 2 ;;
esac
`))
	os.Chmod(ctr, 0o755)
	pb := putFile(t, filepath.Join(fx.dir, "images-play", "playbook.yaml"), []byte(`
- hosts: k8s_cluster
  vars_files: [`+filepath.Join(repoRoot(t), "roles/artifacts/defaults/main.yaml")+`]
  roles: [images]
`))
	hostDir := filepath.Join(fx.dir, "host-images")
	// The cluster names a private registry; side-loading its images as
	// well is asked for (the nodes would otherwise pull them from it).
	vars := map[string]any{"images_ctr": ctr, "images_dir": hostDir, "images_containerd_address": "/nonexistent.sock", "images_distribute": true}
	for k, v := range fx.vars {
		vars[k] = v
	}
	ev, _ := json.Marshal(vars)
	flags := playFlags{Inventory: fx.cluster, WorkDir: filepath.Join(fx.dir, "w-images"), OfflineBundle: "bundle.tar.gz", ExtraVars: []string{string(ev)}}

	check := flags
	check.Check = true
	if rc, out, err := recapOf(t, a, filepath.Dir(pb), check); err != nil || rc.Hosts["node1"].Failed > 0 {
		t.Fatalf("--check on a fresh host: %v\n%s", err, out)
	}
	if _, err := os.Stat(hostDir); !os.IsNotExist(err) {
		t.Errorf("--check created %s", hostDir)
	}
	rc, out, err := recapOf(t, a, filepath.Dir(pb), flags)
	if err != nil {
		st, _ := os.ReadFile(state)
		t.Fatalf("%v\n%s\nctr state:\n%s", err, out, st)
	}
	imports, _ := os.ReadFile(state + ".imports")
	refs, _ := os.ReadFile(state)
	if n := strings.Count(string(imports), "\n"); n != 3 || !strings.Contains(string(refs), "reg.example:5000/flannel-io/flannel:v0.26.7") {
		t.Fatalf("imports:\n%s\nrefs:\n%s\n%s", imports, refs, out)
	}
	if rc.Hosts["node1"].Changed == 0 {
		t.Error("first run changed nothing")
	}
	for _, again := range []playFlags{flags, check} {
		rc, out, err = recapOf(t, a, filepath.Dir(pb), again)
		if err != nil || rc.Hosts["node1"].Changed != 0 {
			t.Fatalf("re-run (check %v): changed %d, %v\n%s", again.Check, rc.Hosts["node1"].Changed, err, out)
		}
	}
	if imports2, _ := os.ReadFile(state + ".imports"); !bytes.Equal(imports, imports2) {
		t.Errorf("re-runs imported again:\n%s", imports2)
	}

	// An image imported without the pin (an earlier kubexm) is labelled,
	// not imported again.
	pinned := strings.Fields(string(refs))
	putFile(t, state+".pinned", []byte(strings.Join(pinned[1:], "\n")+"\n"))
	rc, out, err = recapOf(t, a, filepath.Dir(pb), flags)
	if err != nil || rc.Hosts["node1"].Changed != 1 {
		t.Fatalf("run with %s unpinned: changed %d, want 1; %v\n%s", pinned[0], rc.Hosts["node1"].Changed, err, out)
	}
	if got, _ := os.ReadFile(state + ".pinned"); !strings.Contains(string(got), pinned[0]+"\n") {
		t.Errorf("%s is not pinned again:\n%s", pinned[0], got)
	}
	if imports2, _ := os.ReadFile(state + ".imports"); !bytes.Equal(imports, imports2) {
		t.Errorf("pinning imported again:\n%s", imports2)
	}
}

// A site's own network role (network.plugin custom) brings its files and
// images into the bundle through artifacts_extra and images_extra; an
// images_extra entry named like a catalogue image replaces it (flannel,
// off in the catalogue without plugin flannel), and an artifacts_extra
// entry without a file is refused before anything is fetched.
func TestArtifactExportExtra(t *testing.T) {
	fx := newExportFixture(t)
	t.Chdir(fx.dir)
	raw, err := os.ReadFile(fx.cluster)
	if err != nil {
		t.Fatal(err)
	}
	custom := strings.Replace(string(raw), "network: {plugin: flannel}", "network: {plugin: custom, customRole: site-cni}", 1)
	putFile(t, fx.cluster, []byte(custom))
	roles := filepath.Join(fx.dir, "site-roles")
	putFile(t, filepath.Join(roles, "site-cni", "tasks", "main.yaml"), []byte("[]\n"))
	putFile(t, filepath.Join(roles, "site-cni", "tasks", "delete.yaml"), []byte("[]\n"))

	srcDir := filepath.Join(fx.dir, "src", "site")
	blob := bytes.Repeat([]byte("site-cni"), 1000)
	putFile(t, filepath.Join(srcDir, "site-cni-amd64.tgz"), blob)
	putFile(t, filepath.Join(srcDir, "SHA256SUMS"), []byte(hexSum(blob)+"  site-cni-amd64.tgz\n"))
	fx.vars["artifacts_extra"] = []any{map[string]any{
		"component": "site-cni", "version": "v2.0.1", "file": "site-cni-amd64.tgz", "local_dir": srcDir,
	}}
	fx.vars["images_extra"] = []any{map[string]any{"name": "flannel", "repo": fx.registry + "/flannel-io/flannel", "tag": "v0.26.7"}}
	a := realApp()
	export := func(out string) (string, error) {
		args := []string{"export", "-f", fx.cluster, "-o", out, "--roles-path", roles}
		for _, e := range fx.extraVars(t) {
			args = append(args, "-e", e)
		}
		return runArtifactCmd(t, a, args...)
	}
	out, err := export("bundle.tar.gz")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, m, err := bundle.Open(context.Background(), "bundle.tar.gz", filepath.Join(fx.dir, "unpacked"), func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, art := range m.Artifacts {
		paths[art.Path] = true
	}
	for _, want := range []string{"site-cni/v2.0.1/amd64/site-cni-amd64.tgz", "images/flannel/v0.26.7/amd64/flannel-v0.26.7-amd64.tar"} {
		if !paths[want] {
			t.Errorf("bundle lacks %s: %v", want, paths)
		}
	}
	for p := range paths {
		if strings.HasPrefix(p, "flannel-cni-plugin/") || strings.HasPrefix(p, "site-cni/v2.0.1/arm64/") {
			t.Errorf("bundle has %s, which this cluster does not need", p)
		}
	}

	fx.vars["artifacts_extra"] = []any{map[string]any{"component": "site-cni", "version": "v2.0.1"}}
	out, err = export("bad.tar.gz")
	if err == nil || !strings.Contains(out, "every entry of artifacts_extra needs component, version and file") {
		t.Errorf("an artifacts_extra entry without a file: %v\n%s", err, out)
	}
	if _, err := os.Stat("bad.tar.gz"); err == nil {
		t.Error("a refused export wrote bad.tar.gz")
	}
}

// With spec.operator.enabled the bundle carries the controller's image,
// built from this kubexm binary for the masters' architecture (only: node2,
// an arm64 etcd member, gets none), named as create-cluster names it, so
// that kubexm artifact images push puts it in a registry too.
func TestArtifactExportControllerImage(t *testing.T) {
	fx := newExportFixture(t)
	key := putFile(t, filepath.Join(fx.dir, "id_ed25519"), []byte("not read by the export"))
	data, err := os.ReadFile(fx.cluster)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "address: 192.0.2.12, arch: arm64}", "address: 192.0.2.12, arch: arm64, privateKeyPath: "+key+"}", 1)
	putFile(t, fx.cluster, []byte(text+"  operator: {enabled: true}\n"))
	t.Chdir(fx.dir)
	a := realApp()
	exe := testbin.Static(t)
	a.Builtins["controller_image"] = images.NewControllerImage(func() (string, error) { return exe, nil })
	_, out := fx.export(t, a)
	if !strings.Contains(out, "17 files (7 binaries, 6 archives, 4 images)") {
		t.Errorf("summary:\n%s", out)
	}
	_, m, err := bundle.Open(context.Background(), "bundle.tar.gz", filepath.Join(fx.dir, "offline-work"), func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	var got []bundle.Artifact
	for _, art := range m.Artifacts {
		if art.Component == "images/kubexm-controller" {
			got = append(got, art)
		}
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	tag := version + "-" + hex.EncodeToString(sum[:])[:12]
	if len(got) != 1 || got[0].Arch != "amd64" || got[0].Kind != "image" || got[0].Version != tag || got[0].Image != "kubexm.local/kubexm-controller:"+tag {
		t.Errorf("the controller's image in the bundle: %+v, want one for amd64 tagged %s", got, tag)
	}
}
