package funcs

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"text/template"
)

func TestMergeConfig(t *testing.T) {
	base := map[string]any{
		"a":     uint64(1),
		"keep":  "x",
		"auth":  map[string]any{"webhook": map[string]any{"enabled": true, "cacheTTL": "2m"}, "x509": map[string]any{"clientCAFile": "/ca"}},
		"list":  []any{"a", "b"},
		"gone":  "y",
		"table": map[string]any{"k": "v"},
	}
	extra := map[string]any{
		"a":     uint64(2),
		"auth":  map[string]any{"webhook": map[string]any{"cacheTTL": "10s"}},
		"list":  []any{"c"},
		"gone":  nil,
		"table": "scalar replaces a mapping",
		"new":   map[string]any{"n": true},
	}
	got, err := mergeConfig("x_extra_config", base, extra)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a":     uint64(2),
		"keep":  "x",
		"auth":  map[string]any{"webhook": map[string]any{"enabled": true, "cacheTTL": "10s"}, "x509": map[string]any{"clientCAFile": "/ca"}},
		"list":  []any{"c"},
		"table": "scalar replaces a mapping",
		"new":   map[string]any{"n": true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged:\n got %#v\nwant %#v", got, want)
	}
	// Neither input is modified.
	if base["a"] != uint64(1) || base["gone"] != "y" || base["auth"].(map[string]any)["webhook"].(map[string]any)["cacheTTL"] != "2m" {
		t.Errorf("base modified: %#v", base)
	}
	got["new"].(map[string]any)["n"] = false
	if extra["new"].(map[string]any)["n"] != true {
		t.Error("the result shares a mapping with extra")
	}
	for _, empty := range []any{nil, "", map[string]any{}} {
		got, err := mergeConfig("x_extra_config", base, empty)
		if err != nil || !reflect.DeepEqual(got, base) {
			t.Errorf("extra %#v: %v, %#v", empty, err, got)
		}
	}
}

func TestMergeConfigRefusesNonMappings(t *testing.T) {
	for _, bad := range []any{[]any{"--v=4"}, "v: 4", uint64(3), true} {
		_, err := mergeConfig("containerd_extra_config", map[string]any{}, bad)
		if err == nil || !strings.Contains(err.Error(), "containerd_extra_config must be a mapping") {
			t.Errorf("%#v: got %v", bad, err)
		}
	}
	// Through a template, the error names the variable too.
	tm := template.Must(template.New("t").Funcs(Template()).Parse(`{{ mergeConfig "etcd_extra_config" .base .extra | toYaml }}`))
	err := tm.Execute(io.Discard, map[string]any{"base": map[string]any{}, "extra": []any{"a"}})
	if err == nil || !strings.Contains(err.Error(), "etcd_extra_config must be a mapping of settings (key: value), not a list") {
		t.Errorf("template: %v", err)
	}
}

func TestMergeFlags(t *testing.T) {
	base := map[string]any{"v": 2, "bind-address": "127.0.0.1", "profiling": "true"}
	got, err := mergeFlags("kube_scheduler_extra_config", base, map[string]any{
		"v": uint64(4), "profiling": nil, "tls-cipher-suites": []any{"A", "B"}, "kube-api-qps": 50.5, "leader-elect": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"v": "4", "bind-address": "127.0.0.1", "tls-cipher-suites": "A,B", "kube-api-qps": "50.5", "leader-elect": "false"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	for extra, msg := range map[string]map[string]any{
		`kube_scheduler_extra_config: flag "feature-gates": a mapping has no command-line form`:         {"feature-gates": map[string]any{"A": true}},
		`kube_scheduler_extra_config: flag "--v": write the flag's name without its leading dashes (v)`: {"--v": 4},
	} {
		if _, err := mergeFlags("kube_scheduler_extra_config", base, msg); err == nil || !strings.Contains(err.Error(), extra) {
			t.Errorf("%v: got %v, want %q", msg, err, extra)
		}
	}
}

func TestSystemdArg(t *testing.T) {
	for in, want := range map[string]string{
		"--v=2":      "--v=2",
		"--a=b c":    `"--a=b c"`,
		`--x="q"`:    `"--x=\"q\""`,
		"--p=100%":   "--p=100%%",
		"--e=$HOME":  "--e=$$HOME",
		`--w=C:\dir`: `"--w=C:\\dir"`,
		"--semi=a;b": `"--semi=a;b"`,
		"":           `""`,
	} {
		got, err := systemdArg(in)
		if err != nil || got != want {
			t.Errorf("systemdArg(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := systemdArg("a\nExecStartPre=/bin/true"); err == nil {
		t.Error("a line break was accepted")
	}
}

func TestToTOML(t *testing.T) {
	got, err := toTOML(map[string]any{
		"version": uint64(3),
		"root":    "/var/lib/containerd",
		"ratio":   1.5,
		"count":   float64(100), // -e JSON's numbers
		"skip":    nil,
		"plugins": map[string]any{
			"io.containerd.cri.v1.images": map[string]any{"snapshotter": "overlayfs", "list": []any{"a", "b"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `count = 100
ratio = 1.5
root = '/var/lib/containerd'
version = 3

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    list = ['a', 'b']
    snapshotter = 'overlayfs'`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := toTOML([]any{1}); err == nil || !strings.Contains(err.Error(), "not a list") {
		t.Errorf("a list: %v", err)
	}
}
