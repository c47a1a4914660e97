//go:build e2e

package e2e

// The Kubernetes binary-mode roles for every supported minor (v1.35, v1.36,
// v1.37), without machines: the shared versions file pins what kubeadm of
// that minor pins, the kubelet config carries failCgroupV1: false on cgroup
// v1 hosts only, the rendered units and configs are the same for every minor
// (no flag or config API version of ours changed between them), and where
// the minor's binaries were built (test/artifacts/kubernetes.sh) every flag
// the units render is one the binary knows.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
)

// minorRelease is a release the tests build, with its kubeadm pins.
type minorRelease struct {
	version, pause, coredns, etcdImage string
}

// supportedMinors are the patch releases the tests use for each minor, with
// what kubeadm of that release pins in cmd/kubeadm/app/constants
// (PauseVersion, CoreDNSVersion, DefaultEtcdVersion).
var supportedMinors = []minorRelease{
	{"v1.35.4", "3.10.1", "v1.13.1", "3.6.6-0"},
	{"v1.36.3", "3.10.2", "v1.14.2", "3.6.8-0"},
	{"v1.37.2", "3.10.2", "v1.14.6", "3.7.0-0"},
}

// minorPins is supportedMinors' entry for version.
func minorPins(t *testing.T, version string) minorRelease {
	t.Helper()
	for _, m := range supportedMinors {
		if m.version == version {
			return m
		}
	}
	t.Fatalf("Kubernetes %s is none of the tests' releases (supportedMinors)", version)
	return supportedMinors[0]
}

// withVersion is kubeVars for host at Kubernetes version.
func withVersion(host, version string) map[string]any {
	return kubeVars(host, func(s map[string]any) { s["kubernetes"].(map[string]any)["version"] = version })
}

func TestKubernetesMinorPins(t *testing.T) {
	for _, m := range supportedMinors {
		v := withDefaults(t, "kubernetes/node", withVersion("n2", m.version))
		for name, want := range map[string]string{
			"kube_version": m.version, "pause_version": m.pause, "coredns_version": m.coredns,
			"kubeadm_etcd_image_version": m.etcdImage,
		} {
			if got := fmt.Sprint(v[name]); got != want {
				t.Errorf("%s: %s = %s, want %s", m.version, name, got, want)
			}
		}
	}
	// A version without "v" is the same release.
	v := withDefaults(t, "kubernetes/node", withVersion("n2", "1.36.3"))
	if v["kube_version"] != "v1.36.3" || v["pause_version"] != "3.10.2" {
		t.Errorf("1.36.3: kube_version %v, pause_version %v", v["kube_version"], v["pause_version"])
	}
}

// An unsupported minor fails where the pins are read, naming the version and
// the supported minors (schema validation refuses it before a play runs;
// this is the roles' own guard for -e kubernetes_version=...).
func TestKubernetesMinorUnsupported(t *testing.T) {
	vars := withVersion("n2", "v1.34.4")
	out := map[string]any{}
	for k, v := range vars {
		out[k] = v
	}
	completeSpec(t, out)
	ev := eval.New()
	var err error
	for _, item := range readDefaults(t, "artifacts") {
		name := fmt.Sprint(item.Key)
		if !sharedKubeName(name) {
			continue
		}
		var v any
		if v, err = ev.RenderValue(item.Value, out); err != nil {
			break
		}
		out[name] = v
	}
	if err == nil {
		t.Fatalf("v1.34.4 rendered pins %v", out["kubernetes_pin"])
	}
	for _, want := range []string{"v1.34.4 is not supported", "1.35, 1.36, 1.37"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// failCgroupV1: false on cgroup v1 hosts, for every minor; absent on cgroup
// v2 and when the version is unknown; kubelet_extra_config still wins.
func TestKubeletConfigCgroupV1(t *testing.T) {
	for _, m := range supportedMinors {
		for _, tc := range []struct {
			facts map[string]any
			extra map[string]any
			want  any // nil: the key is absent
		}{
			{map[string]any{"cgroup_version": 1}, nil, false},
			{map[string]any{"cgroup_version": 2}, nil, nil},
			{nil, nil, nil},
			{map[string]any{"cgroup_version": 1}, map[string]any{"kubelet_extra_config": map[string]any{"failCgroupV1": true}}, true},
		} {
			vars := withVersion("n2", m.version)
			if tc.facts != nil {
				vars["facts"] = tc.facts
			}
			for k, v := range tc.extra {
				vars[k] = v
			}
			v := withDefaults(t, "kubernetes/node", vars)
			v["kubelet_resolv_conf"] = "/etc/resolv.conf"
			out := renderRoleTemplate(t, "kubernetes/node", "kubelet-config.yaml.tmpl", v)
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
				t.Fatalf("%s: %v\n%s", m.version, err, out)
			}
			got, ok := cfg["failCgroupV1"]
			switch {
			case tc.want == nil && ok:
				t.Errorf("%s, facts %v: failCgroupV1 %v is set", m.version, tc.facts, got)
			case tc.want != nil && got != tc.want:
				t.Errorf("%s, facts %v, extra %v: failCgroupV1 = %v, want %v", m.version, tc.facts, tc.extra, got, tc.want)
			}
		}
	}
}

// minorTemplates are the templates whose output may depend on the version.
var minorTemplates = []struct{ role, tmpl, bin string }{
	{"kubernetes/control-plane", "kube-apiserver.service.tmpl", "kube-apiserver"},
	{"kubernetes/control-plane", "kube-controller-manager.service.tmpl", "kube-controller-manager"},
	{"kubernetes/control-plane", "kube-scheduler.service.tmpl", "kube-scheduler"},
	{"kubernetes/node", "kubelet.service.tmpl", "kubelet"},
	{"kubernetes/node", "kubelet-config.yaml.tmpl", ""},
	{"kubernetes/node", "kube-proxy-config.yaml.tmpl", ""},
	{"kubernetes/node", "kube-proxy.service.tmpl", "kube-proxy"},
}

// renderFlags returns the --flags of a unit, in order.
func renderFlags(unit string) []string {
	var flags []string
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "ExecStart="))
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "--") {
				flags = append(flags, strings.SplitN(f, "=", 2)[0])
			}
		}
	}
	return flags
}

func TestKubernetesTemplatesPerMinor(t *testing.T) {
	rendered := map[string]map[string]string{} // template -> version -> output
	for _, m := range supportedMinors {
		for _, tpl := range minorTemplates {
			host := "n2"
			if tpl.role == "kubernetes/control-plane" {
				host = "n1"
			}
			v := withDefaults(t, tpl.role, withVersion(host, m.version))
			if _, ok := v["kubelet_resolv_conf"]; !ok {
				v["kubelet_resolv_conf"] = "/etc/resolv.conf"
			}
			out := renderRoleTemplate(t, tpl.role, tpl.tmpl, v)
			if rendered[tpl.tmpl] == nil {
				rendered[tpl.tmpl] = map[string]string{}
			}
			rendered[tpl.tmpl][m.version] = out
		}
		// The config API versions each minor serves (checked in the
		// staging modules k8s.io/kubelet and k8s.io/kube-proxy at
		// v0.35.4, v0.36.3 and v0.37.2: config/v1beta1 and
		// config/v1alpha1, with failCgroupV1 in v1beta1).
		for tmpl, api := range map[string]string{
			"kubelet-config.yaml.tmpl":    "apiVersion: kubelet.config.k8s.io/v1beta1",
			"kube-proxy-config.yaml.tmpl": "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
		} {
			if !strings.Contains(rendered[tmpl][m.version], api) {
				t.Errorf("%s %s lacks %q:\n%s", m.version, tmpl, api, rendered[tmpl][m.version])
			}
		}
	}
	// No flag or configuration key of ours was removed or renamed from
	// v1.35 to v1.37, so every minor renders the same files; a minor that
	// needs a difference must show up here with its reason.
	first := supportedMinors[0].version
	for tmpl, byVersion := range rendered {
		for _, m := range supportedMinors[1:] {
			if byVersion[m.version] != byVersion[first] {
				t.Errorf("%s differs between %s and %s:\n%s\n---\n%s", tmpl, first, m.version, byVersion[first], byVersion[m.version])
			}
		}
	}

	// Where a minor's binaries are built, every rendered flag is one the
	// binary lists in --help.
	cache := os.Getenv("KUBEXM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/kubexm-test"
	}
	checked := 0
	for _, m := range supportedMinors {
		dir := filepath.Join(cache, "artifacts", "kubernetes", m.version, "amd64")
		for _, tpl := range minorTemplates {
			if tpl.bin == "" {
				continue
			}
			bin := filepath.Join(dir, tpl.bin)
			if _, err := os.Stat(bin); err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			help, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("%s --help: %v\n%s", bin, err, help)
				continue
			}
			checked++
			for _, f := range renderFlags(rendered[tpl.tmpl][m.version]) {
				if !regexp.MustCompile(`(?m)^\s+(-[a-z], )?` + regexp.QuoteMeta(f) + `[ =]`).Match(help) {
					t.Errorf("%s %s renders %s, which %s --help does not list", m.version, tpl.tmpl, f, tpl.bin)
				}
			}
		}
	}
	if checked == 0 {
		t.Logf("no Kubernetes binaries under %s/artifacts/kubernetes: flags not checked against --help (test/artifacts/kubernetes.sh builds them)", cache)
	}
}
