package helm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// writeChart writes a one-ConfigMap chart of the given version into dir.
func writeChart(t *testing.T, dir, version string) string {
	t.Helper()
	c := filepath.Join(dir, "tiny")
	files := map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: tiny\nversion: " + version + "\n",
		"values.yaml":           "greeting: hello\npassword: \"\"\n",
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
	}
	for name, text := range files {
		p := filepath.Join(c, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// fakeCluster is Helm's in-memory release storage and a Kubernetes client
// that accepts everything: what the builtin decides, without an API server.
type fakeCluster struct {
	mem *driver.Memory
}

func (f *fakeCluster) builtin() Builtin {
	return Builtin{newConfig: func(_, namespace string, logf func(string, ...any)) (*action.Configuration, error) {
		f.mem.SetNamespace(namespace)
		return &action.Configuration{
			Releases:     storage.Init(f.mem),
			KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
			Capabilities: chartutil.DefaultCapabilities,
			Log:          logf,
		}, nil
	}}
}

func run(t *testing.T, b Builtin, env *step.Env, args step.Args) step.Result {
	t.Helper()
	res, err := b.Run(context.Background(), env, b.Spec().WithDefaults(args))
	if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	return res
}

func TestHelmInstallUpgradeIdempotent(t *testing.T) {
	dir := t.TempDir()
	chartDir := writeChart(t, dir, "0.1.0")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(valuesFile, []byte("greeting: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{mem: driver.NewMemory()}
	b := fc.builtin()
	env := &step.Env{WorkDir: dir, Diff: true}
	args := step.Args{"chart": chartDir, "release": "tiny", "namespace": "demo", "kubeconfig": "kubeconfig",
		"values_files": []any{"values.yaml"}, "set": []any{"password=s3cr3t-value"}}

	// --check on an empty cluster: would install, installs nothing.
	check := &step.Env{WorkDir: dir, Check: true, Diff: true}
	if res := run(t, b, check, args); !res.Changed || !strings.Contains(res.Msg, "would install") {
		t.Fatalf("check: %+v", res)
	}
	if h, _ := fc.mem.Query(map[string]string{"name": "tiny"}); len(h) != 0 {
		t.Fatalf("--check installed a release: %v", h)
	}

	res := run(t, b, env, args)
	if !res.Changed || res.Data["revision"] != 1 {
		t.Fatalf("install: %+v", res)
	}
	rel, err := fc.mem.Get("sh.helm.release.v1.tiny.v1")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Config["greeting"] != "from-file" || rel.Config["password"] != "s3cr3t-value" || rel.Labels[ManagedLabel] != "true" {
		t.Fatalf("release config %v labels %v", rel.Config, rel.Labels)
	}
	if !strings.Contains(rel.Manifest, `greeting: "from-file"`) {
		t.Fatalf("rendered manifest:\n%s", rel.Manifest)
	}

	// The same chart and values: unchanged, under --check too.
	for _, e := range []*step.Env{env, check} {
		if res := run(t, b, e, args); res.Changed {
			t.Fatalf("second run (check %v) changed: %+v", e.Check, res)
		}
	}

	// KubeKey's list form of values is helm --set.
	args["values"] = []any{"extra=1"}
	if res := run(t, b, env, args); !res.Changed || res.Data["revision"] != 2 {
		t.Fatalf("values as key=value: %+v", res)
	}
	if rel, err := fc.mem.Get("sh.helm.release.v1.tiny.v2"); err != nil || rel.Config["extra"] != int64(1) {
		t.Fatalf("release v2 config: %v %v", rel, err)
	}

	// New values: an upgrade; the secret is in no message or diff.
	args["values"] = map[string]any{"greeting": "inline", "replicas": 2}
	res = run(t, b, env, args)
	if !res.Changed || res.Data["revision"] != 3 || !strings.Contains(res.Msg, "the values changed") {
		t.Fatalf("values upgrade: %+v", res)
	}
	for _, s := range []string{res.Msg, res.Diff} {
		if strings.Contains(s, "s3cr3t") || strings.Contains(s, "inline") {
			t.Errorf("a value reached the output: %q", s)
		}
	}
	if res := run(t, b, env, args); res.Changed {
		t.Fatalf("re-run after the upgrade changed (numbers from the task vs the stored release?): %+v", res)
	}

	// A new chart version: an upgrade.
	if err := os.RemoveAll(chartDir); err != nil {
		t.Fatal(err)
	}
	writeChart(t, dir, "0.2.0")
	res = run(t, b, env, args)
	if !res.Changed || res.Data["revision"] != 4 || !strings.Contains(res.Diff, "tiny-0.1.0 -> tiny-0.2.0") {
		t.Fatalf("chart upgrade: %+v", res)
	}

	// Removal: once, then nothing to do.
	absent := step.Args{"release": "tiny", "namespace": "demo", "kubeconfig": kubeconfig, "state": "absent"}
	if res := run(t, b, check, absent); !res.Changed {
		t.Fatalf("check absent: %+v", res)
	}
	if res := run(t, b, env, absent); !res.Changed {
		t.Fatalf("absent: %+v", res)
	}
	if res := run(t, b, env, absent); res.Changed {
		t.Fatalf("absent again: %+v", res)
	}
}

// A release kubexm did not install is not uninstalled.
func TestHelmAbsentLeavesForeignRelease(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{mem: driver.NewMemory()}
	fc.mem.SetNamespace("demo")
	foreign := &release.Release{Name: "theirs", Namespace: "demo", Version: 1, Info: &release.Info{Status: release.StatusDeployed}}
	if err := fc.mem.Create("sh.helm.release.v1.theirs.v1", foreign); err != nil {
		t.Fatal(err)
	}
	res := run(t, fc.builtin(), &step.Env{WorkDir: dir}, step.Args{"release": "theirs", "namespace": "demo", "kubeconfig": kubeconfig, "state": "absent"})
	if res.Changed || !strings.Contains(res.Msg, "left alone") {
		t.Fatalf("foreign release: %+v", res)
	}
	if _, err := fc.mem.Get("sh.helm.release.v1.theirs.v1"); err != nil {
		t.Fatalf("the foreign release is gone: %v", err)
	}
}

func TestHelmRefusals(t *testing.T) {
	dir := t.TempDir()
	b := (&fakeCluster{mem: driver.NewMemory()}).builtin()
	env := &step.Env{WorkDir: dir, Check: true}
	for name, tc := range map[string]struct {
		args step.Args
		want string
	}{
		"bad release":   {step.Args{"chart": dir, "release": "Not_A_Name"}, "release \"Not_A_Name\""},
		"no chart":      {step.Args{"release": "x"}, "chart is required"},
		"missing chart": {step.Args{"chart": "nowhere.tgz", "release": "x"}, "nowhere.tgz"},
		"bad set": {step.Args{"chart": writeChart(t, dir, "0.1.0"), "release": "x",
			"set": []any{"password"}}, "set[0]"},
		"other version": {step.Args{"chart": filepath.Join(dir, "tiny"), "release": "x", "chart_version": "9.9.9"}, "not tiny 9.9.9"},
		"bad values":    {step.Args{"chart": filepath.Join(dir, "tiny"), "release": "x", "values": "a=b"}, "values: a mapping"},
	} {
		_, err := b.Run(context.Background(), env, b.Spec().WithDefaults(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}
