//go:build e2e

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm/engine/eval"
)

// TestUpgradeSkewRules renders the upgrade role's upgrade_skew_problems
// (what the pre-checks refuse) for the steps the issue names, with the skew
// rules of roles/support.yaml, without machines.
func TestUpgradeSkewRules(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "support.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var support map[string]any
	if err := yaml.Unmarshal(data, &support); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, current, target string
		nodes                 map[string]any
		want                  []string // substrings, one per problem; none: allowed
	}{
		{name: "one minor up", current: "v1.36.3", target: "v1.37.2", nodes: map[string]any{"n1": "v1.36.3", "n2": "v1.36.3"}},
		{name: "a patch", current: "v1.37.1", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.1"}},
		{name: "the same version (a re-run)", current: "v1.37.2", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.2"}},
		{name: "resumed: kubelets behind", current: "v1.37.2", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.2", "n2": "v1.36.3"}},
		{name: "two minors", current: "v1.35.4", target: "v1.37.2", nodes: map[string]any{"n1": "v1.35.4"},
			want: []string{"v1.35.4 to v1.37.2 skips a minor: upgrade one minor at a time (to v1.36 first)"}},
		{name: "downgrade", current: "v1.37.2", target: "v1.36.3", nodes: map[string]any{"n1": "v1.37.2"},
			want: []string{"downgrade refused: the API server runs v1.37.2, cluster.yaml asks for v1.36.3", "node n1 runs kubelet v1.37.2, newer than the target v1.36.3"}},
		{name: "a patch down", current: "v1.37.2", target: "v1.37.1", nodes: map[string]any{},
			want: []string{"downgrade refused"}},
		{name: "kubelet too old", current: "v1.36.3", target: "v1.37.2", nodes: map[string]any{"n1": "v1.36.3", "n3": "v1.33.13"},
			want: []string{"node n3 runs kubelet v1.33.13, more than 3 minors older than v1.37.2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := kubeVars("n1", func(s map[string]any) {
				s["kubernetes"].(map[string]any)["version"] = c.target
				s["network"].(map[string]any)["plugin"] = "flannel"
			})
			v := withRoleDefaults(t, "upgrade", vars, map[string]any{
				"kubernetes":              support["kubernetes"],
				"upgrade_current_version": c.current,
				"upgrade_node_versions":   c.nodes,
				// roles/containerd's, which the playbook loads beside.
				"containerd_version": "2.4.2",
			})
			got := strings.TrimSpace(v["upgrade_skew_problems"].(string))
			wantProblems(t, got, c.want)
		})
	}
}

// TestUpgradePrecheckReadsTheCluster renders the pre-checks' two set_fact
// tasks on what the k8s builtin registers for GET /version (content) and
// the Nodes (resources): the node versions must come out as a map, the
// NotReady nodes (and one without a Ready condition) as a list,
// upgrade_needed as a bool, which the skew rules, the verdict and the
// cordon tasks read as values.
func TestUpgradePrecheckReadsTheCluster(t *testing.T) {
	tasks := precheckTasks(t)
	facts := func(name string) map[string]any {
		for _, task := range tasks {
			if task["name"] == name {
				return task["set_fact"].(map[string]any)
			}
		}
		t.Fatalf("precheck.yaml has no task %q", name)
		return nil
	}
	node := func(name, version, ready string) map[string]any {
		conds := []any{map[string]any{"type": "MemoryPressure", "status": "False"}}
		if ready != "" {
			conds = append(conds, map[string]any{"type": "Ready", "status": ready})
		}
		return map[string]any{"metadata": map[string]any{"name": name},
			"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": version}, "conditions": conds}}
	}
	ev := eval.New()
	vars := map[string]any{
		"kubernetes_version": "v1.37.2",
		"upgrade_server":     map[string]any{"content": `{"major": "1", "minor": "36", "gitVersion": "v1.36.3"}`, "status": 200},
		"upgrade_nodes": map[string]any{"resources": []any{
			node("n1", "v1.37.2", "True"),
			node("n2", "v1.36.3", "True"),
			node("n3", "v1.36.3", "False"),
			node("n4", "v1.36.3", ""),
		}},
	}
	for k, v := range facts("upgrade - what the cluster runs") {
		r, err := ev.Render(v.(string), vars)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		vars[k] = r
	}
	if vars["upgrade_current_version"] != "v1.36.3" {
		t.Errorf("upgrade_current_version = %q", vars["upgrade_current_version"])
	}
	for k, v := range facts("upgrade - the cluster's versions as values") {
		r, err := ev.Render(v.(string), vars)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		vars[k] = r
	}
	nodes, ok := vars["upgrade_node_versions"].(map[string]any)
	if !ok || len(nodes) != 4 || nodes["n1"] != "v1.37.2" || nodes["n2"] != "v1.36.3" {
		t.Errorf("upgrade_node_versions = %#v, want the four nodes' kubelet versions", vars["upgrade_node_versions"])
	}
	if nr, ok := vars["upgrade_not_ready"].([]any); !ok || len(nr) != 2 || nr[0] != "n3" || nr[1] != "n4" {
		t.Errorf("upgrade_not_ready = %#v, want [n3 n4]", vars["upgrade_not_ready"])
	}
	if vars["upgrade_needed"] != true {
		t.Errorf("upgrade_needed = %#v, want true", vars["upgrade_needed"])
	}
}

// TestUpgradeRefusesAnEtcdItCannotBackUp: with an external etcd the backup
// before the upgrade cannot be taken, so the verdict refuses until
// -e upgrade_backup=false; a re-run at the target (nothing needed), kubexm's
// own etcd and kubeadm's stacked one (the backup role reads both) are not
// refused.
func TestUpgradeRefusesAnEtcdItCannotBackUp(t *testing.T) {
	tasks := precheckTasks(t)
	var problems string
	for _, task := range tasks {
		if task["name"] == "upgrade - every pre-check passed" {
			problems = task["vars"].(map[string]any)["upgrade_problems"].(string)
		}
	}
	if problems == "" {
		t.Fatal("precheck.yaml has no verdict task with upgrade_problems")
	}
	ev := eval.New()
	for _, c := range []struct {
		etcd           string
		backup, needed bool
		refused        bool
	}{
		{"kubeadm", true, true, false},
		{"external", true, true, true},
		{"external", false, true, false},
		{"external", true, false, false},
		{"kubexm", true, true, false},
	} {
		vars := healthyVerdictVars()
		vars["etcd_type"] = c.etcd
		vars["upgrade_backup"], vars["upgrade_needed"] = c.backup, c.needed
		got, err := ev.RenderString(problems, vars)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if refused := strings.Contains(got, "upgrade_backup=false"); refused != c.refused {
			t.Errorf("%+v: problems %q, want refused=%v", c, got, c.refused)
		}
	}
}

// TestUpgradeRefusesWithoutTheNodes: a Node list the API server did not
// answer refuses the upgrade with the builtin's error, rather than calling
// every node unregistered.
func TestUpgradeRefusesWithoutTheNodes(t *testing.T) {
	var problems string
	for _, task := range precheckTasks(t) {
		if task["name"] == "upgrade - every pre-check passed" {
			problems = task["vars"].(map[string]any)["upgrade_problems"].(string)
		}
	}
	vars := healthyVerdictVars()
	vars["upgrade_nodes"] = map[string]any{"failed": true, "msg": "nodes: connection refused"}
	got, err := eval.New().RenderString(problems, vars)
	if err != nil {
		t.Fatal(err)
	}
	wantProblems(t, strings.TrimSpace(got), []string{"the API server does not list the nodes on n1: nodes: connection refused"})
}

// TestUpgradeRemovedAPIsStopOnAFailedRequest runs the pre-check that lists
// the objects of API versions the target removes against a fake kubectl:
// it lists them, passes over a group/version no longer served and a
// resource that cannot be listed, and stops on any other failed request
// rather than reporting nothing to migrate, which the verdict then refuses.
func TestUpgradeRemovedAPIsStopOnAFailedRequest(t *testing.T) {
	tasks := precheckTasks(t)
	var script, problems string
	for _, task := range tasks {
		switch task["name"] {
		case "upgrade - objects served by API versions the target removes":
			script, _ = task["shell"].(string)
		case "upgrade - every pre-check passed":
			problems, _ = task["vars"].(map[string]any)["upgrade_problems"].(string)
		}
	}
	if script == "" || problems == "" {
		t.Fatal("precheck.yaml lacks the removed-API listing or the verdict")
	}
	dir := t.TempDir()
	kubectl := filepath.Join(dir, "kubectl")
	// $1-$3 are --kubeconfig PATH --request-timeout=20s.
	fake := `#!/bin/sh
shift 3
[ "$*" = "$FAIL" ] && { echo "Unable to connect to the server: i/o timeout" >&2; exit 1; }
case "$*" in
api-versions) printf 'v1\nflowcontrol.apiserver.k8s.io/v1beta3\nstorage.k8s.io/v1\n' ;;
"get --raw /metrics") printf '%s\n' '# HELP x' 'apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs",subresource="",version="v1beta1"} 1' 'apiserver_requested_deprecated_apis{group="apps",removed_release="1.99",resource="x",subresource="",version="v9"} 1' ;;
"get --raw /apis/flowcontrol.apiserver.k8s.io/v1beta3") echo '{"kind":"APIResourceList","resources":[{"name":"flowschemas","verbs":["list"]},{"name":"flowschemas/status"},{"name":"prioritylevelconfigurations"},{"name":"reviews"}]}' ;;
"get --raw /apis/batch/v1beta1") echo 'Error from server (NotFound): the server could not find the requested resource' >&2; exit 1 ;;
"get flowschemas.v1beta3.flowcontrol.apiserver.k8s.io -A --no-headers -o custom-columns=NS:.metadata.namespace,N:.metadata.name") printf '<none>   exempt\n<none>   catch-all\n' ;;
"get prioritylevelconfigurations.v1beta3.flowcontrol.apiserver.k8s.io -A --no-headers -o custom-columns=NS:.metadata.namespace,N:.metadata.name") echo 'No resources found' >&2 ;;
"get reviews.v1beta3.flowcontrol.apiserver.k8s.io -A --no-headers -o custom-columns=NS:.metadata.namespace,N:.metadata.name") echo 'Error from server (MethodNotAllowed): the server does not allow this method on the requested resource' >&2; exit 1 ;;
*) echo "fake kubectl: unexpected $*" >&2; exit 3 ;;
esac
`
	if err := os.WriteFile(kubectl, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	ev := eval.New()
	rendered, err := ev.RenderString(script, map[string]any{
		"kubectl_bin": kubectl, "kubernetes_admin_kubeconfig": filepath.Join(dir, "admin.conf"), "kubernetes_minor": "1.37",
		"upgrade_removed_gvs": "flowcontrol.apiserver.k8s.io/v1beta3 flowcontrol.apiserver.k8s.io/v1beta2",
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(fail string) (stdout, stderr string, rc int) {
		t.Helper()
		cmd := exec.Command("sh", "-c", rendered)
		cmd.Env = append(os.Environ(), "FAIL="+fail)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			rc = ee.ExitCode()
		}
		return o.String(), e.String(), rc
	}
	out, stderr, rc := run("")
	want := "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas exempt\nflowcontrol.apiserver.k8s.io/v1beta3 flowschemas catch-all\n"
	if rc != 0 || out != want {
		t.Errorf("every request answered: rc %d, stdout %q, want %q (stderr %q)", rc, out, want, stderr)
	}
	verdict := func(stdout, stderr string, rc int) string {
		t.Helper()
		vars := healthyVerdictVars()
		vars["upgrade_removed"] = map[string]any{"rc": rc, "stderr": stderr, "stdout_lines": toAny(strings.Split(strings.TrimSpace(stdout), "\n"))}
		vars["upgrade_allow_removed_apis"] = true
		got, err := ev.RenderString(problems, vars)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := verdict(out, stderr, rc); got != "" {
		t.Errorf("every request answered, removed APIs allowed: problems %q, want none", got)
	}
	for _, fail := range []string{
		"api-versions",
		"get --raw /metrics",
		"get --raw /apis/flowcontrol.apiserver.k8s.io/v1beta3",
		"get flowschemas.v1beta3.flowcontrol.apiserver.k8s.io -A --no-headers -o custom-columns=NS:.metadata.namespace,N:.metadata.name",
	} {
		out, stderr, rc := run(fail)
		if rc == 0 || !strings.Contains(stderr, "i/o timeout") {
			t.Errorf("%s failed: rc %d, stdout %q, stderr %q; want a failure with kubectl's error", fail, rc, out, stderr)
			continue
		}
		if got := verdict(out, stderr, rc); !strings.Contains(got, "could not be listed on n1") || !strings.Contains(got, "i/o timeout") {
			t.Errorf("%s failed: problems %q, want a refusal with kubectl's error", fail, got)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// precheckTasks is roles/upgrade tasks/precheck.yaml's task list.
func precheckTasks(t *testing.T) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "upgrade", "tasks", "precheck.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	return tasks
}

// healthyVerdictVars are the pre-checks' results of a healthy kubeadm
// cluster at v1.36.3 going to v1.37.2, for the verdict's upgrade_problems:
// each test changes the ones it is about.
func healthyVerdictVars() map[string]any {
	return map[string]any{
		"etcd_type":               "kubeadm",
		"upgrade_target_conflict": "", "upgrade_backup": true, "upgrade_needed": true, "etcd_upgrade_problems": "",
		"upgrade_current_version": "v1.36.3", "upgrade_skew_problems": "", "upgrade_node_versions": map[string]any{},
		"upgrade_not_ready": []any{}, "upgrade_nodes": map[string]any{"resources": []any{}}, "upgrade_etcd": map[string]any{"rc": 0}, "upgrade_removed": map[string]any{},
		"upgrade_allow_removed_apis": false, "upgrade_min_free_mib": 0, "kube_bin_dir": "/usr/local/bin", "kubectl_host": "n1",
		"kubernetes_version": "v1.37.2", "groups": map[string]any{"master": []any{}, "k8s_cluster": []any{}}, "hostvars": map[string]any{},
	}
}

// wantProblems checks a pre-check's problem list, one line each, in order:
// line i contains want[i], and there are no others.
func wantProblems(t *testing.T, got string, want []string) {
	t.Helper()
	var lines []string
	if got != "" {
		lines = strings.Split(got, "\n")
	}
	if len(lines) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d: %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d = %q, want %q", i, lines[i], w)
		}
	}
}

// TestUpgradeRuntimeVersions renders the pre-checks' verdict on the
// container runtime (issues 53 and 54) from each node's `--version` lines
// as the shell task prints them: the pieces to upgrade per node (only the
// nodes whose runtime differs are drained), and the refusals: a downgrade,
// another runtime than containerRuntime.type, a node without kubexm's
// containerd. A custom runtime is not looked at.
func TestUpgradeRuntimeVersions(t *testing.T) {
	tasks := precheckTasks(t)
	facts := map[string]map[string]any{}
	var problems string
	for _, task := range tasks {
		name, _ := task["name"].(string)
		if f, ok := task["set_fact"].(map[string]any); ok {
			facts[name] = f
		}
		if name == "upgrade - every pre-check passed" {
			problems = task["vars"].(map[string]any)["upgrade_problems"].(string)
		}
	}
	needs, values := facts["upgrade - what the container runtime needs"], facts["upgrade - the container runtime's changes as values"]
	if needs == nil || values == nil || problems == "" {
		t.Fatal("precheck.yaml lacks the runtime's set_fact tasks or the verdict")
	}
	at := func(containerd, runc, crictl, docker, dockerd, criDockerd string) map[string]any {
		return map[string]any{"upgrade_runtime": map[string]any{"stdout_lines": toAny([]string{
			"containerd=" + containerd, "runc=" + runc, "cni-plugins=1.9.1", "crictl=" + crictl, "docker=" + docker, "dockerd=" + dockerd, "cri-dockerd=" + criDockerd}),
		}}
	}
	ev := eval.New()
	for _, c := range []struct {
		name, typ string
		hosts     map[string]any
		changes   map[string]string
		problems  []string
	}{
		{name: "containerd behind on one node", typ: "containerd",
			hosts:   map[string]any{"n1": at("2.3.7", "1.5.2", "1.37.0", "", "", ""), "n2": at("2.4.2", "1.5.2", "1.37.0", "", "", "")},
			changes: map[string]string{"n1": "containerd 2.3.7 -> 2.4.2"}},
		{name: "every piece at the target (a re-run)", typ: "containerd",
			hosts: map[string]any{"n1": at("2.4.2", "1.5.2", "1.37.0", "", "", "")}, changes: map[string]string{}},
		{name: "runc behind, crictl missing", typ: "containerd",
			hosts:   map[string]any{"n1": at("2.4.2", "1.4.0", "", "", "", "")},
			changes: map[string]string{"n1": "runc 1.4.0 -> 1.5.2, crictl (none) -> 1.37.0"}},
		{name: "a downgrade", typ: "containerd",
			hosts:    map[string]any{"n1": at("2.5.0", "1.5.2", "1.37.0", "", "", "")},
			changes:  map[string]string{},
			problems: []string{"downgrade refused: node n1 runs containerd 2.5.0, cluster.yaml asks for 2.4.2"}},
		{name: "docker on a containerd cluster", typ: "containerd",
			hosts:    map[string]any{"n1": at("2.4.2", "1.5.2", "1.37.0", "29.9.3", "29.9.3", "0.4.3")},
			changes:  map[string]string{},
			problems: []string{"node n1 has docker (dockerd 29.9.3), and containerRuntime.type is containerd: kubexm does not change a node's container runtime"}},
		{name: "containerd alone on a docker cluster", typ: "docker",
			hosts:    map[string]any{"n1": at("2.4.2", "1.5.2", "1.37.0", "", "", "")},
			changes:  map[string]string{},
			problems: []string{"node n1 runs containerd without docker, and containerRuntime.type is docker"}},
		{name: "docker behind", typ: "docker",
			hosts:   map[string]any{"n1": at("2.4.2", "1.5.2", "1.37.0", "29.9.3", "2.0.0-beta.24", "0.4.3"), "n2": at("2.4.2", "1.5.2", "1.37.0", "29.10.0", "2.0.0-beta.24", "0.4.3")},
			changes: map[string]string{"n1": "docker 29.9.3 -> 29.10.0"}},
		{name: "cri-dockerd behind", typ: "docker",
			hosts:   map[string]any{"n1": at("2.4.2", "1.5.2", "1.37.0", "29.10.0", "29.10.0", "0.4.2")},
			changes: map[string]string{"n1": "cri-dockerd 0.4.2 -> 0.4.3"}},
		{name: "no containerd", typ: "containerd",
			hosts:    map[string]any{"n1": at("", "", "", "", "", "")},
			changes:  map[string]string{},
			problems: []string{"node n1 has no containerd in /usr/local/bin"}},
		{name: "a custom runtime is the site's", typ: "custom",
			hosts: map[string]any{"n1": map[string]any{"upgrade_runtime": map[string]any{"skipped": true}}}, changes: map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hosts []any
			for h := range c.hosts {
				hosts = append(hosts, h)
			}
			slices.SortFunc(hosts, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			vars := map[string]any{
				"container_runtime_type": c.typ, "containerd_version": "2.4.2", "runc_version": "1.5.2", "crictl_version": "1.37.0", "cni_plugins_version": "1.9.1",
				"docker_version": "29.10.0", "cri_dockerd_version": "0.4.3", "containerd_bin_dir": "/usr/local/bin",
				"groups": map[string]any{"k8s_cluster": hosts}, "hostvars": c.hosts,
			}
			for _, f := range []map[string]any{needs, values} {
				for k, v := range f {
					r, err := ev.Render(v.(string), vars)
					if err != nil {
						t.Fatalf("%s: %v", k, err)
					}
					vars[k] = r
				}
			}
			got, ok := vars["upgrade_runtime_changes"].(map[string]any)
			if !ok || len(got) != len(c.changes) {
				t.Fatalf("upgrade_runtime_changes = %#v, want %v", vars["upgrade_runtime_changes"], c.changes)
			}
			for h, w := range c.changes {
				if got[h] != w {
					t.Errorf("changes of %s = %q, want %q", h, got[h], w)
				}
			}
			verdict := healthyVerdictVars()
			verdict["upgrade_runtime_problems"] = vars["upgrade_runtime_problems"]
			out, err := ev.RenderString(problems, verdict)
			if err != nil {
				t.Fatal(err)
			}
			wantProblems(t, strings.TrimSpace(out), c.problems)
		})
	}
}

// TestUpgradeNodeWant: uncordon.yaml's wait wants the target, Ready and,
// with containerd, the kubelet reporting the new daemon (CRI gives its
// version with or without the v).
func TestUpgradeNodeWant(t *testing.T) {
	for _, c := range []struct {
		typ, state string
		ok         bool
	}{
		{"containerd", "v1.37.2 True containerd://2.4.2", true},
		{"containerd", "v1.37.2 True containerd://v2.4.2", true},
		{"containerd", "v1.37.2 True containerd://2.3.7", false},
		{"containerd", "v1.37.2 False containerd://2.4.2", false},
		{"containerd", "v1.36.3 True containerd://2.4.2", false},
		{"containerd", "v1.37.2 True containerd://2.4.20", false},
		{"docker", "v1.37.2 True docker://2.0.0-beta.24", true},
		{"docker", "v1.37.2 Unknown docker://2.0.0-beta.24", false},
	} {
		vars := kubeVars("n1", func(s map[string]any) {
			s["kubernetes"].(map[string]any)["version"] = "v1.37.2"
			s["network"].(map[string]any)["plugin"] = "flannel"
		})
		v := withRoleDefaults(t, "upgrade", vars, map[string]any{
			"container_runtime_type": c.typ, "containerd_version": "2.4.2", "kubernetes_version": "v1.37.2",
			"kubernetes": map[string]any{"skew": map[string]any{"upgrade_max_minors": 1, "node_max_older_minors": 3}},
		})
		re, err := regexp.Compile(v["upgrade_node_want"].(string))
		if err != nil {
			t.Fatalf("upgrade_node_want %q: %v", v["upgrade_node_want"], err)
		}
		if re.MatchString(c.state) != c.ok {
			t.Errorf("%s: %q matches %q: %v, want %v", c.typ, v["upgrade_node_want"], c.state, !c.ok, c.ok)
		}
	}
}

// TestUpgradeDrainKeep: the drain leaves the in-cluster controller's own
// pod (kubexm_controller_pod, which the controller passes to its runs),
// and nothing from the CLI.
func TestUpgradeDrainKeep(t *testing.T) {
	for _, c := range []struct{ pod, want string }{{"", ""}, {"kubexm-system/kubexm-controller-7d9f-abcde", "kubexm-system/kubexm-controller-7d9f-abcde"}} {
		vars := kubeVars("n1", nil)
		extra := map[string]any{"container_runtime_type": "containerd", "containerd_version": "2.4.2", "kubernetes_version": "v1.37.2",
			"kubernetes": map[string]any{"skew": map[string]any{"upgrade_max_minors": 1, "node_max_older_minors": 3}}}
		if c.pod != "" {
			extra["kubexm_controller_pod"] = c.pod
		}
		if got := withRoleDefaults(t, "upgrade", vars, extra)["upgrade_drain_keep"]; got != c.want {
			t.Errorf("kubexm_controller_pod %q: upgrade_drain_keep %q, want %q", c.pod, got, c.want)
		}
	}
}
