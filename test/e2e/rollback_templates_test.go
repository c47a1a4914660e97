//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/eval"
)

// renderTask renders a task's text (its vars first, as the engine does).
func renderTask(t *testing.T, task map[string]any, text string, vars map[string]any) string {
	t.Helper()
	ev := eval.New()
	all := map[string]any{}
	for k, v := range vars {
		all[k] = v
	}
	if tv, ok := task["vars"].(map[string]any); ok {
		for k, v := range tv {
			r, err := ev.Render(v.(string), all)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			all[k] = r
		}
	}
	r, err := ev.Render(text, all)
	if err != nil {
		t.Fatalf("%s: %v", task["name"], err)
	}
	s, ok := r.(string)
	if !ok {
		t.Fatalf("%s rendered %T", task["name"], r)
	}
	return s
}

func runScript(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("%v: %s\n%s", err, out, script)
	}
	return string(out)
}

// fakeKube writes Kubernetes binaries of version into dir: each prints its
// version as the release's do.
func fakeKube(t *testing.T, dir, version string, names []string) {
	t.Helper()
	for _, n := range names {
		text := "#!/bin/sh\necho 'Kubernetes " + version + "'\n"
		if n == "kubectl" {
			text = "#!/bin/sh\necho 'Client Version: " + version + "'\n"
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRollbackKeepsAndPutsBack runs the shell of roles/upgrade's keep.yaml,
// rollback-check.yaml and rollback.yaml on a node laid out in a temporary
// directory (fake Kubernetes binaries that print a version, unit and
// configuration files): the upgrade keeps v1.36.3's binaries and files and
// a record, a resumed upgrade (the API server at the target already) keeps
// nothing new, the check sees what differs after the upgrade, the rollback
// puts it back, and a second rollback has nothing to do.
func TestRollbackKeepsAndPutsBack(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{bin, etc, filepath.Join(dir, "etcd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}
	fakeKube(t, bin, "v1.36.3", names)
	if err := os.WriteFile(filepath.Join(dir, "etcd", "etcd"), []byte("#!/bin/sh\necho 'etcd Version: 3.6.5'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeletConfig := filepath.Join(etc, "kubelet-config.yaml")
	unit := filepath.Join(etc, "kubelet.service")
	for f, text := range map[string]string{kubeletConfig: "old: config\n", unit: "[Service]\n"} {
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rdir := filepath.Join(dir, "rollback")
	vars := map[string]any{
		"rollback_dir": rdir, "kube_bin_dir": bin, "etcd_bin_dir": filepath.Join(dir, "etcd"),
		"upgrade_current_version": "v1.36.3", "kubernetes_version": "v1.37.3",
		"rollback_binaries": toAny(names),
		"rollback_files":    []any{kubeletConfig, unit, filepath.Join(etc, "absent.service")},
		"etcd_type":         "kubexm", "etcd_member_versions": map[string]any{"n1": "3.6.5"},
		"backup_archive":           "/work/.kubexm/c/backups/c-1.tar.gz",
		"kube_apiserver_unit_file": filepath.Join(etc, "kube-apiserver.service"), "kube_controller_manager_unit_file": filepath.Join(etc, "kcm.service"),
		"kube_scheduler_unit_file": filepath.Join(etc, "ks.service"), "kubelet_unit_file": unit, "kubelet_config_file": kubeletConfig,
		"kube_proxy_unit_file": filepath.Join(etc, "kube-proxy.service"), "kube_proxy_config_file": filepath.Join(etc, "kp.yaml"),
	}
	keep := roleTask(t, "upgrade", "keep.yaml", "upgrade - keep {{ .inventory_hostname }}'s {{ .upgrade_current_version }} binaries and files for a rollback")
	keepScript := func() string { return runScript(t, renderTask(t, keep, keep["shell"].(string), vars)) }

	out := keepScript()
	for _, want := range []string{"kept " + filepath.Join(bin, "kubelet"), "kept " + filepath.Join(bin, "kubectl"), "kept " + kubeletConfig, "record: v1.36.3 -> v1.37.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("keep: %q missing in\n%s", want, out)
		}
	}
	record, err := os.ReadFile(filepath.Join(rdir, "record"))
	if err != nil || string(record) != "from=v1.36.3\nto=v1.37.3\netcd=3.6.5\nbackup=/work/.kubexm/c/backups/c-1.tar.gz\n" {
		t.Errorf("record: %q %v", record, err)
	}
	if out := keepScript(); out != "" {
		t.Errorf("keep again: %q, want nothing", out)
	}

	// The upgrade replaces the binaries and the kubelet's configuration,
	// and is resumed: the API server says v1.37.3 now.
	fakeKube(t, bin, "v1.37.3", names)
	if err := os.WriteFile(kubeletConfig, []byte("new: config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars["upgrade_current_version"] = "v1.37.3"
	if out := keepScript(); out != "" {
		t.Errorf("keep in a resumed upgrade: %q, want nothing", out)
	}

	check := roleTask(t, "upgrade", "rollback-check.yaml", "rollback - what {{ .inventory_hostname }} runs and keeps")
	checkLines := func() []any {
		var l []any
		for _, s := range strings.Split(strings.TrimSpace(runScript(t, renderTask(t, check, check["shell"].(string), vars))), "\n") {
			if s != "" {
				l = append(l, s)
			}
		}
		return l
	}
	lines := checkLines()
	joined := strings.Join(toStrings(any(lines)), "\n")
	for _, want := range []string{"etcd_runs=3.6.5", "record_from=v1.36.3", "record_to=v1.37.3", "runs=kubelet v1.37.3", "differs=" + filepath.Join(bin, "kubelet"), "differs=" + kubeletConfig} {
		if !strings.Contains(joined, want) {
			t.Errorf("check: %q missing in\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "missing=") || strings.Contains(joined, "differs="+unit) {
		t.Errorf("check: nothing is missing and the unit is the same:\n%s", joined)
	}

	// The verdict on that node: one node to roll back, no problem.
	plan := rollbackPlan(t, map[string][]any{"n1": lines}, nil)
	if len(plan["problems"].([]any)) != 0 || plan["from"] != "v1.36.3" || len(plan["nodes"].([]any)) != 1 {
		t.Errorf("plan: %#v", plan)
	}

	put := roleTask(t, "upgrade", "rollback.yaml", "rollback - put {{ .inventory_hostname }}'s {{ .rollback_from }} files back")
	vars["rollback_from"] = "v1.36.3"
	out = runScript(t, renderTask(t, put, put["shell"].(string), vars))
	if !strings.Contains(out, filepath.Join(bin, "kubelet")) || !strings.Contains(out, kubeletConfig) {
		t.Errorf("put back: %s", out)
	}
	if v, _ := exec.Command(filepath.Join(bin, "kube-apiserver"), "--version").Output(); strings.TrimSpace(string(v)) != "Kubernetes v1.36.3" {
		t.Errorf("kube-apiserver after the rollback: %s", v)
	}
	if c, _ := os.ReadFile(kubeletConfig); string(c) != "old: config\n" {
		t.Errorf("kubelet config after the rollback: %q", c)
	}
	if out := runScript(t, renderTask(t, put, put["shell"].(string), vars)); out != "" {
		t.Errorf("put back again: %q, want nothing", out)
	}
	lines = checkLines()
	if j := "\n" + strings.Join(toStrings(any(lines)), "\n"); strings.Contains(j, "\nruns=") || strings.Contains(j, "\ndiffers=") {
		t.Errorf("check after the rollback:\n%s", j)
	}
	plan = rollbackPlan(t, map[string][]any{"n1": lines}, nil)
	if len(plan["problems"].([]any)) != 0 || len(plan["nodes"].([]any)) != 0 {
		t.Errorf("plan after the rollback: %#v", plan)
	}

	// The same upgrade again after the rollback (playbooks/rollback marked
	// the record): kept afresh, and the upgrade's end marks it finished.
	rec := filepath.Join(rdir, "record")
	f, err := os.OpenFile(rec, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("rolled_back=2026-12-03T23:00:00Z\n")
	f.Close()
	vars["upgrade_current_version"] = "v1.36.3"
	if out := keepScript(); !strings.Contains(out, "record: v1.36.3 -> v1.37.3") || !strings.Contains(out, "kept "+kubeletConfig) {
		t.Errorf("keep after a rollback: %q, want a new record and the files kept again", out)
	}
	finished := roleTask(t, "upgrade", "finished.yaml", "upgrade - the rollback record says the upgrade to {{ .kubernetes_version }} finished")
	if out := runScript(t, renderTask(t, finished, finished["shell"].(string), vars)); out != "finished\n" {
		t.Errorf("finished: %q", out)
	}
	if out := runScript(t, renderTask(t, finished, finished["shell"].(string), vars)); out != "" {
		t.Errorf("finished again: %q, want nothing", out)
	}
	if r, _ := os.ReadFile(rec); !strings.Contains(string(r), "\nfinished=") || strings.Contains(string(r), "rolled_back=") {
		t.Errorf("record: %q", r)
	}
}

// rollbackPlan renders rollback-check.yaml's per-host facts and verdict for
// hosts (name -> the check's output lines; n1 is the master and etcd
// member, the rest workers), over vars set.
func rollbackPlan(t *testing.T, hosts map[string][]any, set map[string]any) map[string]any {
	t.Helper()
	ev := eval.New()
	perHost := roleTask(t, "upgrade", "rollback-check.yaml", "rollback - {{ .inventory_hostname }}'s state as values")
	hostvars := map[string]any{}
	var k8s []any
	for _, h := range []string{"n1", "n2", "n3"} {
		lines, ok := hosts[h]
		if !ok {
			continue
		}
		k8s = append(k8s, h)
		r, err := ev.Render(perHost["set_fact"].(map[string]any)["rollback_host"].(string), map[string]any{"rollback_state": map[string]any{"stdout_lines": lines}})
		if err != nil {
			t.Fatal(err)
		}
		hostvars[h] = map[string]any{"rollback_host": r}
	}
	vars := map[string]any{
		"kubernetes_type": "kubexm", "etcd_type": "kubexm", "kubernetes_version": "v1.37.3", "rollback_dir": "/var/lib/kubexm/rollback", "rollback_unfinished_only": false,
		"groups":   map[string]any{"k8s_cluster": k8s, "etcd": []any{"n1"}},
		"hostvars": hostvars,
	}
	for k, v := range set {
		vars[k] = v
	}
	verdict := roleTask(t, "upgrade", "rollback-check.yaml", "rollback - what is to be done")
	r, err := ev.Render(verdict["set_fact"].(map[string]any)["rollback_plan_json"].(string), vars)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ev.Render("{{ .j | fromJson }}", map[string]any{"j": r})
	if err != nil {
		t.Fatal(err)
	}
	return plan.(map[string]any)
}

// TestRollbackRefusals renders the rollback's verdict for the cases it
// refuses, and for those it does.
func TestRollbackRefusals(t *testing.T) {
	rec := func(from, to, etcd string) []any {
		return []any{"etcd_runs=3.6.5", "record_from=" + from, "record_to=" + to, "record_etcd=" + etcd, "record_backup=/w/b.tar.gz"}
	}
	failed := slices.Concat(rec("v1.36.3", "v1.37.3", "3.6.5"), []any{"runs=kubelet v1.37.3", "differs=/usr/local/bin/kubelet", "restart=kubelet: not running"})
	back := rec("v1.36.3", "v1.37.3", "3.6.5")
	for _, c := range []struct {
		name  string
		hosts map[string][]any
		set   map[string]any
		want  []string
		nodes int
	}{
		{name: "a failed upgrade", hosts: map[string][]any{"n1": failed, "n2": back}, nodes: 1},
		{name: "cluster.yaml back at the old version", hosts: map[string][]any{"n1": failed}, set: map[string]any{"kubernetes_version": "v1.36.3"}, nodes: 1},
		{name: "every node back", hosts: map[string][]any{"n1": back, "n2": back}},
		{name: "no record", hosts: map[string][]any{"n1": {"etcd_runs=3.6.5"}, "n2": {}},
			want: []string{"no rollback record: no node has /var/lib/kubexm/rollback/record"}},
		{name: "kubeadm", hosts: map[string][]any{"n1": failed}, set: map[string]any{"kubernetes_type": "kubeadm"},
			want: []string{"kubernetes.type kubeadm: kubexm's rollback puts back the binaries of binary mode"}},
		{name: "records of two upgrades", hosts: map[string][]any{"n1": failed, "n2": rec("v1.35.4", "v1.36.3", "")},
			want: []string{"the nodes' rollback records disagree (v1.35.4 -> v1.36.3, v1.36.3 -> v1.37.3)"}},
		{name: "cluster.yaml names another version", hosts: map[string][]any{"n1": failed}, set: map[string]any{"kubernetes_version": "v1.35.4"},
			want: []string{"the rollback record is of the upgrade from v1.36.3 to v1.37.3, and cluster.yaml names v1.35.4: it is not the upgrade this cluster came from"}},
		{name: "a node at a third version", hosts: map[string][]any{"n1": failed, "n2": slices.Concat(rec("v1.36.3", "v1.37.3", "3.6.5"), []any{"runs=kubelet v1.38.0"})},
			want: []string{"node n2 runs kubelet v1.38.0: neither v1.36.3 nor v1.37.3"}},
		{name: "a record that names no version", hosts: map[string][]any{"n1": slices.Concat(rec("../../etc", "v1.37.3", "3.6.5"), []any{"runs=kubelet v1.37.3"})},
			want: []string{`the rollback record (/var/lib/kubexm/rollback/record) names "../../etc" -> "v1.37.3", which are not Kubernetes versions`}},
		{name: "a binary not kept", hosts: map[string][]any{"n1": slices.Concat(failed, []any{"missing=kube-proxy v1.37.3"})},
			want: []string{"node n1 runs kube-proxy v1.37.3, and no copy of its v1.36.3 binary is kept"}},
		{name: "a node without a record at the target", hosts: map[string][]any{"n1": failed, "n2": {"runs=kubelet v1.37.3"}},
			want: []string{"node n2 has no rollback record and runs kubelet v1.37.3"}},
		{name: "a finished upgrade, rolled back when asked", hosts: map[string][]any{"n1": slices.Concat(failed, []any{"record_finished=2026-12-03T23:00:00Z"})}, nodes: 1},
		{name: "a finished upgrade after --rollback-on-failure", hosts: map[string][]any{"n1": slices.Concat(failed, []any{"record_finished=2026-12-03T23:00:00Z"})}, set: map[string]any{"rollback_unfinished_only": true},
			want: []string{"node n1: the upgrade from v1.36.3 to v1.37.3 finished (2026-12-03T23:00:00Z), and rollback_unfinished_only (upgrade --rollback-on-failure) rolls back only an upgrade that did not"}},
		{name: "an unfinished upgrade after --rollback-on-failure", hosts: map[string][]any{"n1": failed}, set: map[string]any{"rollback_unfinished_only": true}, nodes: 1},
		{name: "etcd upgraded", hosts: map[string][]any{"n1": slices.Concat(rec("v1.36.3", "v1.37.3", "3.6.5")[1:], []any{"etcd_runs=3.7.3", "runs=kubelet v1.37.3"})},
			want: []string{"etcd member n1 runs etcd 3.7.3, and ran 3.6.5 before the upgrade: etcd's data must go back too. etcd does not run on data a newer minor wrote; kubexm rollback does not downgrade etcd: restore the snapshot the upgrade took (kubexm restore cluster --backup /w/b.tar.gz"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := rollbackPlan(t, c.hosts, c.set)
			var got []string
			got = append(got, toStrings(plan["problems"])...)
			wantProblems(t, strings.Join(got, "\n"), c.want)
			if len(c.want) == 0 && len(plan["nodes"].([]any)) != c.nodes {
				t.Errorf("nodes %v, want %d", plan["nodes"], c.nodes)
			}
		})
	}
}
