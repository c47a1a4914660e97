//go:build e2e

package e2e

// roles/registry's proxy-cache mode (registry_proxy_remote_url) without
// machines: config.yml with and without it, create-cluster's push left out
// in it, and the upstream's password written to config.yml (0600) but never
// to the output, a --diff or the journal.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/lifecycle"
)

// registryProxyShared are the shared defaults (roles/artifacts) the
// registry and images roles read for the registry.
var registryProxyShared = []string{"registry_type", "registry_auths", "registry_proxy_remote_url", "registry_proxy",
	"images_registry", "images_registry_namespace", "images_from_registry", "images_push"}

// registryVars are the variables of the registry host r1 (registry.type
// registry, privateRegistry reg.local:5000) with the shared defaults above
// and roles/registry's defaults rendered over set (as -e would set them).
func registryVars(t *testing.T, auths map[string]any, set map[string]any) map[string]any {
	t.Helper()
	v := map[string]any{
		"inventory_hostname": "r1", "address": "10.0.0.9", "arch": "amd64", "check_mode": false,
		"groups": map[string]any{"registry": []any{"r1"}, "k8s_cluster": []any{"n1"}},
		"spec": map[string]any{"registry": map[string]any{
			"type": "registry", "privateRegistry": "reg.local:5000", "namespaceOverride": "",
			"registryDataDir": "/var/lib/kubexm-registry", "auths": auths,
		}},
	}
	for k, x := range set {
		v[k] = x
	}
	ev := eval.New()
	var items yaml.MapSlice
	for _, item := range readDefaults(t, "artifacts") {
		for _, name := range registryProxyShared {
			if fmt.Sprint(item.Key) == name {
				items = append(items, item)
			}
		}
	}
	for _, item := range append(items, readDefaults(t, "registry")...) {
		name := fmt.Sprint(item.Key)
		if _, ok := set[name]; ok {
			continue
		}
		x, err := ev.RenderValue(item.Value, v)
		if err != nil {
			t.Fatalf("default %s: %v", name, err)
		}
		v[name] = x
	}
	return v
}

var registryAuths = map[string]any{
	"reg.local:5000":          map[string]any{"username": "kubexm", "password": "Own-S3cret"},
	"mirror.example.org:8443": map[string]any{"username": "puller", "password": "Up\"stream S3cret"},
}

func TestRegistryConfigTemplateProxy(t *testing.T) {
	parse := func(out string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := yaml.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("config.yml: %v\n%s", err, out)
		}
		return m
	}
	// Without it: no proxy section, the push is create-cluster's.
	v := registryVars(t, registryAuths, nil)
	out := renderRoleTemplate(t, "registry", "config.yml.tmpl", v)
	if m := parse(out); m["proxy"] != nil || strings.Contains(out, "S3cret") {
		t.Errorf("without a proxy:\n%s", out)
	}
	if v["registry_proxy"] != false || v["images_push"] != true {
		t.Errorf("without a proxy: registry_proxy %v, images_push %v", v["registry_proxy"], v["images_push"])
	}

	// An upstream with an account in registry.auths: its credentials.
	v = registryVars(t, registryAuths, map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443"})
	out = renderRoleTemplate(t, "registry", "config.yml.tmpl", v)
	want := map[string]any{"remoteurl": "https://mirror.example.org:8443", "username": "puller", "password": "Up\"stream S3cret", "ttl": "168h"}
	if got := parse(out)["proxy"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("proxy = %v, want %v:\n%s", got, want, out)
	}
	if m := parse(out); fmt.Sprint(m["auth"]) != fmt.Sprint(map[string]any{"htpasswd": map[string]any{"realm": "kubexm-registry", "path": "/etc/kubexm/registry/htpasswd"}}) {
		t.Errorf("the nodes' account is kept: %v", m["auth"])
	}
	if v["registry_proxy"] != true || v["images_push"] != false {
		t.Errorf("proxy: registry_proxy %v, images_push %v", v["registry_proxy"], v["images_push"])
	}

	// An upstream without one (pulled anonymously), a ttl of its own.
	v = registryVars(t, registryAuths, map[string]any{"registry_proxy_remote_url": "https://registry-1.docker.io", "registry_proxy_ttl": "24h"})
	want = map[string]any{"remoteurl": "https://registry-1.docker.io", "ttl": "24h"}
	if got := parse(renderRoleTemplate(t, "registry", "config.yml.tmpl", v))["proxy"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("anonymous proxy = %v, want %v", got, want)
	}
}

// A proxy cache refuses pushes: create-cluster pushes nothing to it, even
// with -e images_push=true, and asks it for every image after its play
// (which fetches them from the upstream); the preflight, before the
// registry exists, does not.
func TestRegistryProxySkipsThePush(t *testing.T) {
	ev := eval.New()
	when := func(role, name string) string {
		return fmt.Sprint(roleTask(t, role, "main.yaml", name)["when"])
	}
	push := when("images", "images - pushed to the private registry")
	serves := when("images", "images - the private registry serves every image")
	preflight := when("preflight", "Registry - reachable, credentials accepted, every image there")
	for _, tc := range []struct {
		name                    string
		set                     map[string]any
		push, serves, preflight bool
	}{
		{"deployed registry", nil, true, true, false},
		{"proxy cache", map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443"}, false, true, false},
		{"proxy cache, -e images_push=true", map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443", "images_push": true}, false, true, false},
	} {
		v := registryVars(t, registryAuths, tc.set)
		v["images_distribute"] = false
		v["hostvars"] = map[string]any{"r1": map[string]any{}}
		for _, c := range []struct {
			what, expr string
			want       bool
		}{{"push", push, tc.push}, {"serves", serves, tc.serves}, {"preflight", preflight, tc.preflight}} {
			got, err := ev.EvalBool(c.expr, v)
			if err != nil || got != c.want {
				t.Errorf("%s: %s (%s) = %v, %v; want %v", tc.name, c.what, c.expr, got, err, c.want)
			}
		}
	}
}

// The upstream's password reaches config.yml (0600) and nothing else: the
// role's configuration tasks (tasks/config.yaml) run for real on this
// machine from a cluster.yaml, with --diff and a journal, once and again
// after the password changed (whose --diff would show the old one).
func TestRegistryProxyPasswordNeverShown(t *testing.T) {
	dir := t.TempDir()
	const oldPw, newPw = "Old-Upstream-S3cret", "New-Upstream-S3cret"
	cluster := func(pw string) string {
		return `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: proxy}
spec:
  hosts:
  - {name: n1, address: 127.0.0.1, connection: local}
  roleGroups:
    etcd: [n1]
    master: [n1]
    worker: [n1]
    registry: [n1]
  kubernetes: {version: v1.37.2}
  registry:
    type: registry
    privateRegistry: reg.local:5000
    auths:
      reg.local:5000: {username: kubexm, password: Own-S3cret}
      mirror.example.org:8443: {username: puller, password: ` + pw + `}
  roleGroupVars:
    registry:
      registry_proxy_remote_url: https://mirror.example.org:8443
`
	}
	conf := filepath.Join(dir, "etc")
	pb := `name: t
defaults_files:
  - ` + filepath.Join(moduleRoot(t), "roles/artifacts/defaults/main.yaml") + `
  - ` + filepath.Join(moduleRoot(t), "roles/registry/defaults/main.yaml") + `
plays:
  - name: t
    hosts: registry
    gather_facts: false
    vars:
      registry_config_dir: ` + conf + `
      registry_data_dir: ` + filepath.Join(dir, "data") + `
      # the handler restarts only a registry this run did not start
      registry_started: {changed: true}
    tasks:
      - include_role: {name: registry, tasks_from: config}
`
	if err := os.WriteFile(filepath.Join(dir, "pb.yaml"), []byte(pb), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	r := lifecycle.Runner{Builtins: reg, Version: "0.1.0", LoadInventory: lifecycle.LoadInventory}
	work := filepath.Join(dir, "w")
	for _, pw := range []string{oldPw, newPw} {
		if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(cluster(pw)), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		_, err := r.Run(context.Background(), lifecycle.Request{Playbook: filepath.Join(dir, "pb.yaml"), Inventory: filepath.Join(dir, "cluster.yaml"),
			RolesPath: []string{filepath.Join(moduleRoot(t), "roles")}, WorkDir: work, Diff: true, Verbose: 3, Output: "json", Stdout: &out})
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), `"changed"`) {
			t.Errorf("config.yml not written:\n%s", out.String())
		}
		b, err := os.ReadFile(filepath.Join(conf, "config.yml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `password: "`+pw+`"`) {
			t.Errorf("config.yml lacks the upstream's password:\n%s", b)
		}
		if st, _ := os.Stat(filepath.Join(conf, "config.yml")); st == nil || st.Mode().Perm() != 0o600 {
			t.Errorf("config.yml mode: %v", st)
		}
		for _, s := range []string{oldPw, newPw, "Upstream-S3"} {
			if strings.Contains(out.String(), s) {
				t.Errorf("the output shows %q:\n%s", s, out.String())
			}
		}
	}
	// The journal and whatever else the runs left in the work directory.
	err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range []string{oldPw, newPw, "Upstream-S3"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The role's own check of the upstream (for -e, which kubexm config
// validate does not see): https://, http:// only with plainHTTP, not
// privateRegistry, a ttl the registry parses.
func TestRegistryProxyUpstreamChecked(t *testing.T) {
	ev := eval.New()
	task := roleTask(t, "registry", "main.yaml", "registry - proxy-cache upstream")
	that := task["assert"].(map[string]any)["that"].([]any)
	plain := map[string]any{"reg.local:5000": registryAuths["reg.local:5000"], "10.0.0.5:5000": map[string]any{"plainHTTP": true}}
	for _, tc := range []struct {
		name  string
		auths map[string]any
		set   map[string]any
		ok    bool
	}{
		{"https", registryAuths, map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443"}, true},
		{"http with plainHTTP", plain, map[string]any{"registry_proxy_remote_url": "http://10.0.0.5:5000"}, true},
		{"http without it", registryAuths, map[string]any{"registry_proxy_remote_url": "http://mirror.example.org:8443"}, false},
		{"itself", registryAuths, map[string]any{"registry_proxy_remote_url": "https://reg.local:5000"}, false},
		{"a ttl in days", registryAuths, map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443", "registry_proxy_ttl": "7d"}, false},
		{"a ttl in hours and minutes", registryAuths, map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443", "registry_proxy_ttl": "1h30m"}, true},
	} {
		v := registryVars(t, tc.auths, tc.set)
		ok := true
		for _, c := range that {
			got, err := ev.EvalBool(fmt.Sprint(c), v)
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, c, err)
			}
			ok = ok && got
		}
		if ok != tc.ok {
			t.Errorf("%s: the assert passes %v, want %v", tc.name, ok, tc.ok)
		}
	}
	if w := fmt.Sprint(task["when"]); w != `registry_proxy_remote_url != ""` {
		t.Errorf("the check runs when %s", w)
	}
}

// An upstream whose CA is its own (its auths entry's certsPath): the role
// sends that directory to registry_proxy_ca_dir and the unit names it in
// SSL_CERT_DIR beside Go's default directories; without proxy mode or
// without certsPath, neither.
func TestRegistryProxyUpstreamCA(t *testing.T) {
	withCA := map[string]any{
		"reg.local:5000":          registryAuths["reg.local:5000"],
		"mirror.example.org:8443": map[string]any{"username": "puller", "password": "x", "certsPath": "/cp/certs/mirror"},
	}
	const env = `Environment="SSL_CERT_DIR=/etc/kubexm/registry/upstream-ca:/etc/ssl/certs:/etc/pki/tls/certs"`
	proxy := map[string]any{"registry_proxy_remote_url": "https://mirror.example.org:8443"}
	for _, tc := range []struct {
		name  string
		auths map[string]any
		set   map[string]any
		certs string
	}{
		{"proxy, upstream with certsPath", withCA, proxy, "/cp/certs/mirror"},
		{"proxy, upstream without certsPath", registryAuths, proxy, ""},
		{"no proxy, certsPath of another registry", withCA, nil, ""},
	} {
		v := registryVars(t, tc.auths, tc.set)
		if v["registry_proxy_certs"] != tc.certs || v["registry_proxy_ca_dir"] != "/etc/kubexm/registry/upstream-ca" {
			t.Errorf("%s: registry_proxy_certs %q, registry_proxy_ca_dir %q; want %q", tc.name, v["registry_proxy_certs"], v["registry_proxy_ca_dir"], tc.certs)
		}
		unit := renderRoleTemplate(t, "registry", "registry.service.tmpl", v)
		if got := strings.Count(unit, env); got != map[bool]int{true: 1, false: 0}[tc.certs != ""] {
			t.Errorf("%s: the unit has %d %s lines:\n%s", tc.name, got, env, unit)
		}
		if strings.Contains(unit, "SSL_CERT_DIR") != (tc.certs != "") {
			t.Errorf("%s: SSL_CERT_DIR in the unit:\n%s", tc.name, unit)
		}
	}
	// The CA goes (sync_dir, the host's extra files removed) only with
	// certsPath; otherwise the directory is removed.
	sync := roleTask(t, "registry", "main.yaml", "registry - the proxy upstream's CA (certsPath)")
	absent := roleTask(t, "registry", "main.yaml", "registry - no upstream CA without one")
	if args := sync["sync_dir"].(map[string]any); args["delete"] != true || args["direction"] != "push" || fmt.Sprint(sync["when"]) != `registry_proxy_certs != ""` ||
		fmt.Sprint(absent["when"]) != `registry_proxy_certs == ""` || sync["notify"] != "registry restarted" || absent["notify"] != "registry restarted" {
		t.Errorf("the CA tasks: %v\n%v", sync, absent)
	}
}
