//go:build e2e

package e2e

// etcd's upgrade rules and the parsing of etcdctl's status table, without
// machines (the e2e tag only for the helpers it shares with the template tests).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
)

// etcdUpgradeVars is the etcd role's defaults over kubeVars with
// cluster.yaml asking for target and the members running versions.
func etcdUpgradeVars(t *testing.T, target string, versions map[string]any, extra map[string]any) map[string]any {
	t.Helper()
	vars := kubeVars("n1", func(s map[string]any) {
		s["network"].(map[string]any)["plugin"] = "flannel"
		s["etcd"].(map[string]any)["version"] = target
		s["etcd"].(map[string]any)["dataDir"] = "/var/lib/etcd"
	})
	override := map[string]any{"etcd_member_versions": versions}
	if extra != nil {
		override["etcd_extra_config"] = extra
	}
	return withRoleDefaults(t, "etcd", vars, override)
}

// TestEtcdUpgradeRules: etcd's rules for a rolling upgrade, as the
// pre-checks of playbooks/upgrade and playbooks/upgrade-etcd apply them.
func TestEtcdUpgradeRules(t *testing.T) {
	for _, c := range []struct {
		name, target string
		versions     map[string]any
		extra        map[string]any
		needed       bool
		want         []string // substrings, one per problem; none: allowed
	}{
		{name: "one minor up", target: "v3.7.3", versions: map[string]any{"n1": "3.6.16", "n2": "3.6.16", "n3": "3.6.16"}, needed: true},
		{name: "a patch up", target: "v3.6.16", versions: map[string]any{"n1": "3.6.15", "n2": "3.6.16", "n3": "3.6.16"}, needed: true},
		{name: "resumed: some members at the target", target: "v3.7.3", versions: map[string]any{"n1": "3.7.3", "n2": "3.6.16", "n3": "3.6.16"}, needed: true},
		{name: "a re-run at the target", target: "v3.7.3", versions: map[string]any{"n1": "3.7.3", "n2": "3.7.3", "n3": "3.7.3"}},
		{name: "two minors", target: "v3.7.3", versions: map[string]any{"n1": "3.5.21", "n2": "3.6.16", "n3": "3.6.16"}, needed: true,
			want: []string{"etcd member n1 runs v3.5.21: v3.5.21 to v3.7.3 skips a minor; etcd upgrades one minor at a time (to v3.6 first)"}},
		{name: "downgrade", target: "v3.6.16", versions: map[string]any{"n1": "3.7.3", "n2": "3.7.3", "n3": "3.7.3"}, needed: true,
			want: []string{"etcd downgrade refused: member n1 runs etcd v3.7.3, cluster.yaml asks for v3.6.16", "member n2 runs etcd v3.7.3", "member n3 runs etcd v3.7.3"}},
		{name: "a patch down", target: "v3.7.1", versions: map[string]any{"n1": "3.7.3", "n2": "3.7.1", "n3": "3.7.1"}, needed: true,
			want: []string{"etcd downgrade refused: member n1 runs etcd v3.7.3, cluster.yaml asks for v3.7.1"}},
		{name: "a member not healthy", target: "v3.7.3", versions: map[string]any{"n1": "3.6.16", "n2": "", "n3": "3.6.16"}, needed: true,
			want: []string{"etcd member n2 does not answer healthy"}},
		{name: "a setting 3.7 removed", target: "v3.7.3", versions: map[string]any{"n1": "3.6.16", "n2": "3.6.16", "n3": "3.6.16"}, needed: true,
			extra: map[string]any{"experimental-initial-corrupt-check": true, "log-level": "warn"},
			want:  []string{"etcd_extra_config sets experimental-initial-corrupt-check, which etcd v3.7.3 no longer reads (3.6 deprecated the experimental- settings, 3.7 removed them): use feature-gates: InitialCorruptCheck=true"}},
		{name: "the same setting on 3.6", target: "v3.6.16", versions: map[string]any{"n1": "3.6.16", "n2": "3.6.16", "n3": "3.6.16"},
			extra: map[string]any{"experimental-initial-corrupt-check": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := etcdUpgradeVars(t, c.target, c.versions, c.extra)
			got := strings.TrimSpace(v["etcd_upgrade_problems"].(string))
			wantProblems(t, got, c.want)
			if needed := strings.TrimSpace(v["etcd_upgrade_needed"].(string)) == "true"; needed != c.needed {
				t.Errorf("etcd_upgrade_needed = %v, want %v", v["etcd_upgrade_needed"], c.needed)
			}
		})
	}
}

// TestUpgradeVerdictNamesEtcdProblems: playbooks/upgrade's verdict
// refuses what etcd's rules refuse (etcd.type kubexm), with the rest.
func TestUpgradeVerdictNamesEtcdProblems(t *testing.T) {
	var problems string
	for _, task := range precheckTasks(t) {
		if task["name"] == "upgrade - every pre-check passed" {
			problems = task["vars"].(map[string]any)["upgrade_problems"].(string)
		}
	}
	const refusal = "etcd downgrade refused: member n1 runs etcd v3.7.3, cluster.yaml asks for v3.6.16"
	for _, etcdType := range []string{"kubexm", "kubeadm"} {
		vars := healthyVerdictVars()
		vars["etcd_type"] = etcdType
		vars["etcd_upgrade_problems"] = refusal + "\nanother"
		got, err := eval.New().RenderString(problems, vars)
		if err != nil {
			t.Fatal(err)
		}
		if named := strings.Contains(got, refusal) && strings.Contains(got, "another"); named != (etcdType == "kubexm") {
			t.Errorf("etcd.type %s: problems %q", etcdType, got)
		}
	}
}

// TestEtcdStatusAwk runs etcd_status_awk on `etcdctl endpoint status -w
// table` as etcdctl 3.6 (| borders) and 3.7 (│ borders) print it: the
// leader hand-over of the rolling restart, the version checks and
// delete-nodes read its columns.
func TestEtcdStatusAwk(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "etcd", "defaults", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	program := defaults["etcd_status_awk"].(string)
	v36 := `+------------------------+------------------+---------+-----------------+---------+--------+-----------------------+--------+-----------+------------+-----------+------------+--------------------+--------+--------------------------+-------------------+
|        ENDPOINT        |        ID        | VERSION | STORAGE VERSION | DB SIZE | IN USE | PERCENTAGE NOT IN USE | QUOTA  | IS LEADER | IS LEARNER | RAFT TERM | RAFT INDEX | RAFT APPLIED INDEX | ERRORS | DOWNGRADE TARGET VERSION | DOWNGRADE ENABLED |
+------------------------+------------------+---------+-----------------+---------+--------+-----------------------+--------+-----------+------------+-----------+------------+--------------------+--------+--------------------------+-------------------+
| https://10.0.0.1:2379 | e0a123b3b0169fcd |  3.6.16 |           3.6.0 |   20 kB |  16 kB |                   20% | 2.1 GB |      true |      false |         2 |          4 |                  4 |        |                          |             false |
| https://10.0.0.2:2379 | 8211f1d0f64f3269 |  3.6.16 |           3.6.0 |   20 kB |  16 kB |                   20% | 2.1 GB |     false |      false |         2 |          4 |                  4 |        |                          |             false |
+------------------------+------------------+---------+-----------------+---------+--------+-----------------------+--------+-----------+------------+-----------+------------+--------------------+--------+--------------------------+-------------------+
`
	v37 := `┌────────────────────────┬──────────────────┬─────────┬─────────────────┬─────────┬────────┬───────────────────────┬────────┬───────────┬────────────┬───────────┬────────────┬────────────────────┬────────┬──────────────────────────┬───────────────────┐
│        ENDPOINT        │        ID        │ VERSION │ STORAGE VERSION │ DB SIZE │ IN USE │ PERCENTAGE NOT IN USE │ QUOTA  │ IS LEADER │ IS LEARNER │ RAFT TERM │ RAFT INDEX │ RAFT APPLIED INDEX │ ERRORS │ DOWNGRADE TARGET VERSION │ DOWNGRADE ENABLED │
├────────────────────────┼──────────────────┼─────────┼─────────────────┼─────────┼────────┼───────────────────────┼────────┼───────────┼────────────┼───────────┼────────────┼────────────────────┼────────┼──────────────────────────┼───────────────────┤
│ https://10.0.0.1:2379 │ e0a123b3b0169fcd │   3.7.3 │           3.7.0 │   20 kB │  16 kB │                   20% │ 2.1 GB │      false │      false │         2 │          4 │                  4 │        │                          │             false │
│ https://10.0.0.2:2379 │ 8211f1d0f64f3269 │   3.6.16 │           3.6.0 │   20 kB │  16 kB │                   20% │ 2.1 GB │      true │      false │         2 │          4 │                  4 │        │                          │             false │
└────────────────────────┴──────────────────┴─────────┴─────────────────┴─────────┴────────┴───────────────────────┴────────┴───────────┴────────────┴───────────┴────────────┴────────────────────┴────────┴──────────────────────────┴───────────────────┘
`
	for _, c := range []struct{ name, table, want string }{
		{"etcdctl 3.6", v36, "e0a123b3b0169fcd https://10.0.0.1:2379 3.6.16 true false\n8211f1d0f64f3269 https://10.0.0.2:2379 3.6.16 false false\n"},
		{"etcdctl 3.7", v37, "e0a123b3b0169fcd https://10.0.0.1:2379 3.7.3 false false\n8211f1d0f64f3269 https://10.0.0.2:2379 3.6.16 true false\n"},
	} {
		cmd := exec.Command("awk", "-F|", program)
		cmd.Stdin = strings.NewReader(c.table)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: awk: %v", c.name, err)
		}
		if string(out) != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, out, c.want)
		}
	}
}

// TestEtcdUpgradeCheckReadsTheMembers renders the pre-check's set_facts on
// what the members answered: a version per member, "" for one whose
// `endpoint health` failed and for one that has no result (unreachable).
func TestEtcdUpgradeCheckReadsTheMembers(t *testing.T) {
	ev := eval.New()
	vars := map[string]any{
		"groups": map[string]any{"etcd": []any{"n1", "n2", "n3"}},
		"hostvars": map[string]any{
			"n1": map[string]any{"etcd_running": map[string]any{"rc": 0, "stdout": "3.6.16\n"}},
			"n2": map[string]any{"etcd_running": map[string]any{"rc": 1, "stdout": "", "stderr": "context deadline exceeded"}},
			"n3": map[string]any{},
		},
	}
	for _, name := range []string{"etcd upgrade - the versions the members run", "etcd upgrade - the versions as values"} {
		for k, v := range roleTask(t, "etcd", "upgrade-check.yaml", name)["set_fact"].(map[string]any) {
			r, err := ev.Render(v.(string), vars)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			vars[k] = r
		}
	}
	got, ok := vars["etcd_member_versions"].(map[string]any)
	if !ok || len(got) != 3 || got["n1"] != "3.6.16" || got["n2"] != "" || got["n3"] != "" {
		t.Errorf("etcd_member_versions = %#v", vars["etcd_member_versions"])
	}
}

// TestEtcdRestartOrder: the members to restart, the leader last, as the
// looped include reads them.
func TestEtcdRestartOrder(t *testing.T) {
	ev := eval.New()
	vars := map[string]any{
		"groups": map[string]any{"etcd": []any{"n1", "n2", "n3", "n4"}},
		"hostvars": map[string]any{
			"n1": map[string]any{"etcd_restart_needed": true, "etcd_leads": map[string]any{"stdout": "true\n"}},
			"n2": map[string]any{"etcd_restart_needed": "true", "etcd_leads": map[string]any{"stdout": "false\n"}},
			"n3": map[string]any{"etcd_restart_needed": "false"},
			"n4": map[string]any{"etcd_restart_needed": true, "etcd_leads": map[string]any{"stdout": "false\n"}},
		},
	}
	task := roleTask(t, "etcd", "main.yaml", "etcd - the members to restart, the leader last")
	r, err := ev.Render(task["set_fact"].(map[string]any)["etcd_restart_order"].(string), vars)
	if err != nil {
		t.Fatal(err)
	}
	vars["etcd_restart_order"] = r
	loop := roleTask(t, "etcd", "main.yaml", "etcd - restart changed members one at a time, the leader last")["loop"].(string)
	order, err := ev.Render(loop, vars)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(order); got != "[n2 n4 n1]" {
		t.Errorf("restart order %s, want [n2 n4 n1] (the leader n1 last, n3 unchanged)", got)
	}
}

// TestEtcdVersionChangeRules: create-cluster and add-nodes keep the etcd
// minor a member runs (roles/etcd's etcd_version_change_problems), so a
// new spec.etcd.version or a newer kubexm default never upgrades etcd
// without the upgrade playbooks' pre-checks and snapshot; those playbooks
// allow the minor change, and nothing allows a downgrade.
func TestEtcdVersionChangeRules(t *testing.T) {
	for _, c := range []struct {
		name, target string
		running      map[string]any
		allowed      bool
		want         []string
	}{
		{name: "a fresh member", target: "v3.7.3", running: map[string]any{"n1": ""}},
		{name: "the same version", target: "v3.7.3", running: map[string]any{"n1": "3.7.3"}},
		{name: "a patch up", target: "v3.6.16", running: map[string]any{"n1": "3.6.15"}},
		{name: "a minor up from create-cluster", target: "v3.7.3", running: map[string]any{"n1": "3.6.16", "n2": "3.7.3"},
			want: []string{"etcd member n1 runs v3.6.16 and cluster.yaml asks for v3.7.3 (spec.etcd.version, or kubexm's default when it is unset): create-cluster and add-nodes keep etcd's minor version. Upgrade with `kubexm play upgrade-etcd -i cluster.yaml` (pre-checks, a verified snapshot, the members one at a time, the leader last), or keep v3.6.16 with spec.etcd.version: v3.6.16"}},
		{name: "a minor up from an upgrade playbook", target: "v3.7.3", running: map[string]any{"n1": "3.6.16"}, allowed: true},
		{name: "a downgrade", target: "v3.6.16", running: map[string]any{"n1": "3.7.3"}, allowed: true,
			want: []string{"etcd downgrade refused: member n1 runs etcd v3.7.3, cluster.yaml asks for v3.6.16 (spec.etcd.version, or kubexm's default when it is unset); kubexm never downgrades etcd: set spec.etcd.version: v3.7.3"}},
		{name: "a patch down", target: "v3.7.1", running: map[string]any{"https://10.0.0.2:2379": "3.7.3"},
			want: []string{"etcd downgrade refused: member https://10.0.0.2:2379 runs etcd v3.7.3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := kubeVars("n1", func(s map[string]any) {
				s["network"].(map[string]any)["plugin"] = "flannel"
				s["etcd"].(map[string]any)["version"] = c.target
				s["etcd"].(map[string]any)["dataDir"] = "/var/lib/etcd"
			})
			v := withRoleDefaults(t, "etcd", vars, map[string]any{"etcd_running_versions": c.running, "etcd_version_change_allowed": c.allowed})
			wantProblems(t, strings.TrimSpace(v["etcd_version_change_problems"].(string)), c.want)
		})
	}
}
