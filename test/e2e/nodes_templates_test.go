//go:build e2e

package e2e

// The fast part of the nodes suite, without machines: the
// per-node haproxy's backends that add-nodes and delete-nodes change, and
// the etcd members the API servers are moved to.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm/engine/eval"
)

// TestHaproxyBackends: every master of cluster.yaml is a backend by default
// (create-cluster, add-nodes), and lb_backends, which delete-nodes sets to
// the masters that stay, is exactly the list of both backends: the checked
// one and the one it fails open to, which also has each as an unchecked
// backup.
func TestHaproxyBackends(t *testing.T) {
	vars := func(backends []any) map[string]any {
		v := kubeVars("n2", nil)
		v["groups"].(map[string]any)["master"] = []any{"n1", "n3"}
		v["lb_bind"] = "127.0.0.1:6443"
		if backends != nil {
			v["lb_backends"] = backends
		}
		return withDefaults(t, "loadbalancer", v)
	}
	for _, c := range []struct {
		name      string
		backends  []any
		checked   []string
		listening []string
	}{
		{"every master", nil, []string{"server n1 10.0.0.1:6443", "server n3 10.0.0.3:6443"}, []string{
			"server n1 10.0.0.1:6443", "server n1-unchecked 10.0.0.1:6443 backup no-check",
			"server n3 10.0.0.3:6443", "server n3-unchecked 10.0.0.3:6443 backup no-check",
		}},
		{"the masters that stay", []any{"n1"}, []string{"server n1 10.0.0.1:6443"},
			[]string{"server n1 10.0.0.1:6443", "server n1-unchecked 10.0.0.1:6443 backup no-check"}},
	} {
		cfg := renderRoleTemplate(t, "loadbalancer", "haproxy.cfg.tmpl", vars(c.backends))
		for backend, want := range map[string][]string{"kube-apiserver": c.checked, "kube-apiserver-listening": c.listening} {
			if got := haproxyServers(cfg, backend); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s: backend %s has %q, want %q", c.name, backend, got, want)
			}
		}
	}
}

// haproxyServers are the server lines of one backend of a haproxy.cfg.
func haproxyServers(cfg, backend string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "backend" || f[0] == "frontend" || f[0] == "defaults" || f[0] == "global":
			in = f[0] == "backend" && len(f) > 1 && f[1] == backend
		case in && f[0] == "server":
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// nginxServers are the server lines of one upstream block of an
// nginx.conf, without their ";".
func nginxServers(cfg, upstream string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";"))
		switch {
		case len(f) == 0:
		case f[0] == "upstream":
			in = len(f) > 1 && f[1] == upstream
		case f[0] == "}":
			in = false
		case in && f[0] == "server":
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// roleTask returns the task named name of a role's tasks file.
func roleTask(t *testing.T, role, file, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", role, "tasks", file))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task["name"] == name {
			return task
		}
	}
	t.Fatalf("%s tasks/%s has no task %q", role, file, name)
	return nil
}

// TestEtcdMembersTheAPIServersUse renders roles/nodes tasks/etcd-members.yaml's
// fact on `etcdctl member list` output: a started voter counts, a learner
// and a member not started yet do not unless this run adds it
// (nodes_new_etcd: add-nodes under --check), a host named for removal
// (delete-nodes) never does; cluster.yaml's order is kept. The API
// server's unit then names exactly those members.
func TestEtcdMembersTheAPIServersUse(t *testing.T) {
	fact := roleTask(t, "nodes", "etcd-members.yaml", "nodes - the etcd members the API servers use")["set_fact"].(map[string]any)["nodes_etcd_serving"].(string)
	list := "8e9e05c52164694d, started, n2, https://10.0.0.2:2380, https://10.0.0.2:2379, false\n" +
		"91bc3c398fb3c146, started, n1, https://10.0.0.1:2380, https://10.0.0.1:2379, false\n" +
		"fd422379fda50e48, started, n3, https://10.0.0.3:2380, https://10.0.0.3:2379, true\n"
	ev := eval.New()
	for _, c := range []struct {
		name   string
		list   string
		new    string // the host with nodes_new_etcd
		remove []any
		want   []string
	}{
		{"every member a started voter", strings.ReplaceAll(list, ", true\n", ", false\n"), "", nil, []string{"n1", "n2", "n3"}},
		{"a learner is not used yet", list, "", nil, []string{"n1", "n2"}},
		{"a member not started, not added by this run", strings.ReplaceAll(list, "started, n3", "unstarted, n3"), "", nil, []string{"n1", "n2"}},
		{"the member this run adds (--check: not in etcd yet)", strings.Join(strings.SplitAfter(list, "\n")[:2], ""), "n3", nil, []string{"n1", "n2", "n3"}},
		{"a member named for removal", strings.ReplaceAll(list, ", true\n", ", false\n"), "", []any{"n2"}, []string{"n1", "n3"}},
	} {
		v := kubeVars("n1", nil)
		if c.new != "" {
			v["hostvars"].(map[string]any)[c.new].(map[string]any)["nodes_new_etcd"] = true
		}
		v["nodes_remove"] = c.remove
		if c.remove == nil {
			v["nodes_remove"] = []any{}
		}
		v["nodes_etcd_now"] = map[string]any{"stdout": c.list}
		out, err := ev.RenderString(fact, v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %q: %v", c.name, out, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		// The unit the masters get with those members.
		hosts := make([]any, len(got))
		for i, h := range got {
			hosts[i] = h
		}
		uv := kubeVars("n1", nil)
		uv["kube_etcd_hosts"] = hosts
		unit := renderRoleTemplate(t, "kubernetes/control-plane", "kube-apiserver.service.tmpl", withDefaults(t, "kubernetes/control-plane", uv))
		var urls []string
		for _, h := range got {
			urls = append(urls, "https://10.0.0."+strings.TrimPrefix(h, "n")+":2379")
		}
		if want := "--etcd-servers=" + strings.Join(urls, ",") + " "; !strings.Contains(unit, want) {
			t.Errorf("%s: the unit lacks %q:\n%s", c.name, want, unit)
		}
	}
}

// TestKubeadmEtcdServersConfigMap renders the patch roles/kubernetes/kubeadm
// tasks/etcd-servers.yaml sends to kubeadm-config and its condition:
// ClusterConfiguration keeps every other field and gets the members as
// etcd.external.endpoints; once it has them, nothing is sent.
func TestKubeadmEtcdServersConfigMap(t *testing.T) {
	task := roleTask(t, "kubernetes/kubeadm", "etcd-servers.yaml", "kubeadm - ClusterConfiguration names the etcd members")
	stdin := task["command"].(map[string]any)["stdin"].(string)
	when := task["when"].(string)
	stored := `apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
clusterName: c1
controlPlaneEndpoint: lb.kubexm.local:6443
etcd:
  external:
    caFile: /etc/kubernetes/pki/etcd/ca.crt
    certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt
    endpoints:
    - https://10.0.0.1:2379
    keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
`
	v := kubeVars("n1", func(s map[string]any) { s["kubernetes"].(map[string]any)["type"] = "kubeadm" })
	v["kube_etcd_servers"] = "https://10.0.0.1:2379,https://10.0.0.2:2379"
	v["kubeadm_etcd_cluster_config"] = map[string]any{"stdout": stored}
	ev := eval.New()
	if ok, err := ev.EvalBool(when, v); err != nil || !ok {
		t.Fatalf("a new member: condition %v (%v), want true", ok, err)
	}
	out, err := ev.RenderString(stdin, v)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &patch); err != nil || len(patch.Data) != 1 {
		t.Fatalf("patch %q: %v", out, err)
	}
	var got map[string]any
	if err := yaml.Unmarshal([]byte(patch.Data["ClusterConfiguration"]), &got); err != nil {
		t.Fatal(err)
	}
	ext := got["etcd"].(map[string]any)["external"].(map[string]any)
	if fmt.Sprint(ext["endpoints"]) != "[https://10.0.0.1:2379 https://10.0.0.2:2379]" || ext["certFile"] != "/etc/kubernetes/pki/apiserver-etcd-client.crt" ||
		got["clusterName"] != "c1" || got["kubernetesVersion"] != "v1.37.2" || got["controlPlaneEndpoint"] != "lb.kubexm.local:6443" {
		t.Errorf("ClusterConfiguration after the patch:\n%s", patch.Data["ClusterConfiguration"])
	}
	v["kubeadm_etcd_cluster_config"] = map[string]any{"stdout": patch.Data["ClusterConfiguration"]}
	if ok, err := ev.EvalBool(when, v); err != nil || ok {
		t.Errorf("the members in place: condition %v (%v), want false", ok, err)
	}
	// The manifest's line.
	line := roleTask(t, "kubernetes/kubeadm", "etcd-servers.yaml", "kubeadm - the API server's manifest names the etcd members")["lineinfile"].(map[string]any)["line"].(string)
	if got, err := ev.RenderString(line, v); err != nil || got != "    - --etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379" {
		t.Errorf("manifest line %q (%v)", got, err)
	}
}

// TestAPIServerEtcdServersOnlyWhenTheyDiffer: the unit (binary mode) and the
// manifest line (kubeadm) are written, and the API server restarted, only
// when what the file names (grep -o's output) is not the members: an
// add-nodes or delete-nodes that changes no member touches no master.
func TestAPIServerEtcdServersOnlyWhenTheyDiffer(t *testing.T) {
	ev := eval.New()
	for _, c := range []struct {
		role, task, register string
	}{
		{"kubernetes/control-plane", "Kubernetes control plane - kube-apiserver unit on the etcd members", "kube_apiserver_etcd_now"},
		{"kubernetes/kubeadm", "kubeadm - the API server's manifest names the etcd members", "kubeadm_etcd_now"},
	} {
		when := roleTask(t, c.role, "etcd-servers.yaml", c.task)["when"].(string)
		for _, tc := range []struct {
			now  string
			want bool
		}{
			{"--etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379\n", false},
			{"--etcd-servers=https://10.0.0.1:2379\n", true},
			{"--etcd-servers=https://10.0.0.2:2379,https://10.0.0.1:2379\n", true},
		} {
			v := map[string]any{"kube_etcd_servers": "https://10.0.0.1:2379,https://10.0.0.2:2379", c.register: map[string]any{"stdout": tc.now}}
			got, err := ev.EvalBool(when, v)
			if err != nil || got != tc.want {
				t.Errorf("%s %q with %q: %v (%v), want %v", c.role, c.task, tc.now, got, err, tc.want)
			}
		}
	}
}

// TestRemoveMembersWantsTheList: delete-nodes' removal of etcd members
// stops when etcd does not give its member list (a leader change, a full
// disk), instead of reading it as empty and leaving the member in; with
// the list, the member named is removed.
func TestRemoveMembersWantsTheList(t *testing.T) {
	script, _ := roleTask(t, "nodes", "remove-members.yaml", "nodes - remove the etcd members")["shell"].(string)
	if script == "" {
		t.Fatal("remove-members.yaml has no shell task named \"nodes - remove the etcd members\"")
	}
	dir := t.TempDir()
	ctl := filepath.Join(dir, "etcdctl")
	if err := os.WriteFile(ctl, []byte(`#!/bin/sh
echo "$*" >>"$(dirname "$0")/calls"
case "$*" in
*"member list"*) [ -e "$(dirname "$0")/down" ] && { echo "etcdserver: leader changed" >&2; exit 1; }
  echo "8e9e05c52164694d, started, n1, https://10.0.0.1:2380, https://10.0.0.1:2379, false"
  echo "91bc3c398fb3c146, started, n3, https://10.0.0.3:2380, https://10.0.0.3:2379, false" ;;
esac
`), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() (string, error) {
		c := exec.Command("sh", "-c", script)
		c.Env = append(os.Environ(), "ETCDCTL="+ctl, "ETCD_STATUS_AWK={ print }", "MEMBERS=n3=https://10.0.0.3:2380 ")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	calls := func() string { b, _ := os.ReadFile(filepath.Join(dir, "calls")); return string(b) }

	if err := os.WriteFile(filepath.Join(dir, "down"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(); err == nil || strings.Contains(calls(), "member remove") {
		t.Errorf("without a member list: exit %v, calls %q, want a failure and no removal; output %s", err, calls(), out)
	}
	os.Remove(filepath.Join(dir, "down"))
	if out, err := run(); err != nil || !strings.Contains(calls(), "member remove 91bc3c398fb3c146") || !strings.Contains(out, "removed etcd member: n3") {
		t.Errorf("with the list: exit %v, calls %q, output %s; want n3's member removed", err, calls(), out)
	}
}
