//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// operatorNodes is issue 52's worker added and removed through the Cluster
// resource, on TestNodes' cluster after its CLI steps (l: n1 and n5 masters,
// n2 a worker; n4, cleaned by delete-nodes in step 5, is free). `kubexm
// controller` runs on the control machine as it runs in its pod: a work
// directory of its own, empty as the pod's emptyDir is (it adopts the
// cluster's PKI from the masters and unpacks the bundle itself; the CLI's
// runs and its runs share the hosts' locks), and no tool beside kubexm, as
// in its image (bareArgs: no shell, no coreutils):
//   - the Cluster as cluster.yaml says (create-cluster --tags
//     cluster-resource: delete-nodes writes the status only), the
//     controller records it as applied, nothing run;
//   - `kubectl apply --server-side` of the Cluster with n4 as a worker (what
//     `kubexm config view --resource` prints for that cluster.yaml, as a
//     GitOps tool would apply it): the controller runs add-nodes with the
//     Secret's key; once n4's first tasks are journaled the controller is
//     stopped as a deleted pod is (SIGTERM) and its work directory taken
//     away; a new controller (a new pod: an empty work directory) resumes
//     the run from the journal Secret: every task that finished on a host
//     is taken from the journal, not run again, the control side's run
//     again; n4 is a Ready node, the status lists it Ready, 4/4 nodes, the
//     last run add-nodes Succeeded, the generation observed;
//   - the Cluster without n4: delete-nodes (drained, then removed) from the
//     applied spec; n4 is no node, nothing of kubexm's is left on it, the
//     status says 3/3 and delete-nodes Succeeded.
func operatorNodes(ctx context.Context, t *testing.T, k kubectlRunner, kx kubexm, set *testhosts.Set, bundle, create, runtime string, l nodesLayout) {
	t.Helper()
	start := time.Now()
	const name = "e2e-nodes"
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--tags", "cluster-resource")
	if res.err != nil {
		t.Fatalf("create-cluster --tags cluster-resource: %v%s", res.err, res.failures())
	}
	ctlRoot := filepath.Join(kx.dir, "controller-work")
	ctl := startController(ctx, t, k, kx, set, k.kubeconfig, ctlRoot, name, bundle, true)
	defer func() { ctl.stop() }()
	progressing := func(c clusterStatus) string {
		for _, cd := range c.Status.Conditions {
			if cd.Type == "Progressing" {
				return cd.Reason
			}
		}
		return ""
	}
	ctl.waitFor(ctx, t, "the applied spec recorded", 2*time.Minute, func(c clusterStatus, raw string) bool {
		return strings.Contains(raw, "kubexm.mensylisir.io/applied-spec") && progressing(c) == "AsSpecified"
	})
	// apply is the Cluster of layout applied as a user's tool would.
	apply := func(l nodesLayout) {
		t.Helper()
		file := filepath.Join(kx.dir, "cluster-resource.yaml")
		if err := os.WriteFile(file, []byte(nodesClusterYAML(name, set, l, runtime)), 0o600); err != nil {
			t.Fatal(err)
		}
		view, err := exec.CommandContext(ctx, kx.bin, "config", "view", "--resource", "-f", file).Output()
		if err != nil {
			t.Fatalf("kubexm config view --resource: %v", err)
		}
		if out, err := k.run(ctx, string(view), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply the Cluster: %v\n%s", err, out)
		}
	}
	// converged waits until the controller ran playbook and observed the
	// generation with every node Ready.
	converged := func(playbook, ready string) clusterStatus {
		t.Helper()
		c, _ := ctl.waitFor(ctx, t, playbook+" through the Cluster", 15*time.Minute, func(c clusterStatus, _ string) bool {
			st := c.Status
			return st.LastRun != nil && st.LastRun.Playbook == playbook && st.LastRun.Result == "Succeeded" && st.Phase == "Ready" &&
				st.ObservedGeneration == c.Metadata.Generation && progressing(c) == "AsSpecified" && st.ReadyNodes == ready
		})
		return c
	}
	n4 := set.Hosts[3].Name

	added := nodesLayout{hosts: []int{0, 1, 3, 4}, etcd: l.etcd, master: l.master, worker: []int{1, 3}}
	before, _ := getClusterStatus(ctx, t, k, name)
	begin := time.Now()
	apply(added)
	// A second change while add-nodes runs, the renewal annotation, waits
	// for it (one run at a time per cluster) and runs after it: the
	// journals of the two runs must not overlap.
	ctl.waitFor(ctx, t, "add-nodes running", 5*time.Minute, func(c clusterStatus, _ string) bool {
		return c.Status.LastRun != nil && c.Status.LastRun.Playbook == "add-nodes" && c.Status.LastRun.Result == ""
	})
	if out, err := k.run(ctx, "", "annotate", "clusters.kubexm.mensylisir.io/"+name, "kubexm.mensylisir.io/renew-certificates="+time.Now().UTC().Format("20060102T150405")); err != nil {
		t.Fatalf("annotate the renewal while add-nodes runs: %v\n%s", err, out)
	}
	killed := killMidRun(ctx, t, k, kx, ctl, filepath.Join(ctlRoot, name), filepath.Join(filepath.Dir(create), "certs-renew"), n4)
	c := converged("certs-renew", "4/4")
	add, renew := controllerRuns(t, filepath.Join(ctlRoot, name), begin, killed.id)
	checkResumed(t, filepath.Join(ctlRoot, name), add, killed)
	t.Logf("PERF operator mode: a worker added through the Cluster resource (kubectl apply to the end of add-nodes run by kubexm controller, stopped in the middle and resumed by a new one): %s; the resumed run: %s", add.End.Sub(begin).Round(time.Millisecond), add.End.Sub(add.Start).Round(time.Millisecond))
	t.Logf("PERF operator mode: certs-renew queued behind it by the renewal annotation (its run): %s", renew.End.Sub(renew.Start).Round(time.Millisecond))
	if _, raw := getClusterStatus(ctx, t, k, name); strings.Contains(raw, "kubexm.mensylisir.io/renew-certificates") {
		t.Errorf("the renewal annotation is still on the Cluster after certs-renew")
	}
	if c.Status.Certificates == nil || before.Status.Certificates == nil || c.Status.Certificates.EarliestExpiry <= before.Status.Certificates.EarliestExpiry {
		t.Errorf("the certificates' earliest expiry after the renewal: %+v, before %+v", c.Status.Certificates, before.Status.Certificates)
	}
	listed := false
	for _, n := range c.Status.Nodes {
		listed = listed || (n.Name == n4 && n.Ready && n.KubernetesVersion == kubernetesVersion)
	}
	if !listed {
		t.Errorf("the Cluster's status does not list %s Ready at %s: %+v", n4, kubernetesVersion, c.Status.Nodes)
	}
	checkMembership(ctx, t, k, set, added)

	begin = time.Now()
	apply(l)
	c = converged("delete-nodes", "3/3")
	t.Logf("PERF operator mode: the worker removed through the Cluster resource (drained, removed, cleaned by delete-nodes run by kubexm controller): %s", time.Since(begin).Round(time.Millisecond))
	for _, n := range c.Status.Nodes {
		if n.Name == n4 {
			t.Errorf("the Cluster's status still lists %s: %+v", n4, c.Status.Nodes)
		}
	}
	checkMembership(ctx, t, k, set, l)
	checkCleaned(ctx, t, set, n4)
	if out, _ := k.run(ctx, "", "get", "events", "-A", "--field-selector", "reason=RunResumed", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"); !strings.Contains(out, killed.id) {
		t.Errorf("no RunResumed Event for the run %s:\n%s", killed.id, out)
	}
	for _, reason := range []string{"RunStarted", "RunSucceeded"} {
		if out, _ := k.run(ctx, "", "get", "events", "-A", "--field-selector", "reason="+reason, "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"); !strings.Contains(out, "add-nodes") || !strings.Contains(out, "certs-renew") || !strings.Contains(out, "delete-nodes") {
			t.Errorf("no %s Event for add-nodes, certs-renew and delete-nodes:\n%s", reason, out)
		}
	}
	t.Logf("PERF operator mode step (a worker added and removed through the Cluster resource): %s; load %s", time.Since(start).Round(time.Millisecond), loadAverage())
}

// controllerRuns returns the add-nodes and the certs-renew run the
// controller journaled in workDir since begin, each finished ok, and wants
// the renewal to have started after add-nodes ended. The journal of run
// restored, which the new controller wrote back from the journal Secret to
// resume it, is not one of its runs.
func controllerRuns(t *testing.T, workDir string, begin time.Time, restored string) (add, renew journal.RunInfo) {
	t.Helper()
	runs, err := journal.Runs(workDir)
	if err != nil {
		t.Fatalf("the controller's runs in %s: %v", workDir, err)
	}
	var seen []string
	for _, r := range runs {
		if r.Start.Before(begin) || r.ID == restored {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %s %s-%s %s", r.ID, r.Playbook, r.Start.Format(time.TimeOnly), r.End.Format(time.TimeOnly), r.Outcome))
		switch r.Playbook {
		case "add-nodes":
			add = r
		case "certs-renew":
			renew = r
		}
	}
	if add.Outcome != "ok" || renew.Outcome != "ok" || len(seen) != 2 {
		t.Fatalf("want one add-nodes and then one certs-renew run, both ok, since %s; the runs:\n%s", begin.Format(time.TimeOnly), strings.Join(seen, "\n"))
	}
	if renew.Start.Before(add.End) {
		t.Errorf("certs-renew started at %s, before add-nodes ended at %s: two runs at once on one cluster", renew.Start.Format(time.StampMilli), add.End.Format(time.StampMilli))
	}
	return add, renew
}

// killedRun is the add-nodes run the first controller left: its id and the
// keys of the results a resume takes from its journal (journal.Reusable, as the controller resumes),
// as the journal Secret holds them.
type killedRun struct {
	id       string
	reusable map[string]string // key -> host:task
	control  int               // control-side results, run again on resume
}

// killMidRun waits until the add-nodes run of the controller in dir has
// journaled ten results on host that a resume takes from the journal; a
// CLI run of certsRenew meanwhile (another work directory, as a control
// machine's beside the in-cluster controller) is refused at the cluster's
// lock, which the controller's run holds. Then it ends the controller as
// the kubelet ends a deleted pod (SIGTERM), takes its work directory away
// (a new pod's is empty: the journal must come from the cluster) and
// starts a new one.
func killMidRun(ctx context.Context, t *testing.T, k kubectlRunner, kx kubexm, ctl *controllerProc, dir, certsRenew, host string) killedRun {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n := 0
		files, _ := filepath.Glob(filepath.Join(dir, "runs", "*", journal.File))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if id, recs := parseJournal(data); id != "" && recs.playbook == "add-nodes" && !recs.ended {
				for _, r := range recs.results {
					if r.Host == host && journal.Reusable(r, true) {
						n++
					}
				}
			}
		}
		if n >= 10 {
			break
		}
		select {
		case <-ctl.exited:
			t.Fatalf("kubexm controller exited (%v) before add-nodes journaled tasks on %s", ctl.waitErr, host)
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatalf("add-nodes journaled %d tasks on %s after 10 minutes", n, host)
		}
	}
	res := kx.play(ctx, certsRenew, "--lock-wait", "5s")
	if res.err == nil || !strings.Contains(res.stderr, "lock of the cluster") || !strings.Contains(res.stderr, "(playbook add-nodes)") {
		t.Errorf("kubexm play certs-renew while the controller's add-nodes runs: %v, want a refusal at the cluster's lock naming add-nodes%s", res.err, res.failures())
	} else {
		t.Logf("PERF operator mode: a CLI run while the controller's add-nodes runs, refused at the cluster's lock after --lock-wait 5s: %s", res.wall.Round(time.Millisecond))
	}
	stop := time.Now()
	ctl.terminate()
	t.Logf("the controller stopped (SIGTERM) in the middle of add-nodes in %s", time.Since(stop).Round(time.Millisecond))
	out, err := k.run(ctx, "", "-n", "kube-system", "get", "secret", "kubexm-journal-"+ctl.name, "-o", `jsonpath={.data.journal\.jsonl\.gz}`)
	if err != nil {
		t.Fatalf("the journal Secret after the controller stopped: %v\n%s", err, out)
	}
	gz, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	id, recs := parseJournal(data)
	if id == "" || recs.playbook != "add-nodes" || recs.outcome == "ok" {
		t.Fatalf("the journal Secret holds run %q of %q (outcome %q), not the unfinished add-nodes", id, recs.playbook, recs.outcome)
	}
	killed := killedRun{id: id, reusable: map[string]string{}}
	onHost := 0
	for _, r := range recs.results {
		switch {
		case journal.Reusable(r, true):
			killed.reusable[r.Key] = r.Host + ": " + r.Task
			if r.Host == host {
				onHost++
			}
		case r.Control:
			killed.control++
		}
	}
	if onHost < 10 {
		t.Errorf("the journal Secret holds %d finished tasks on %s, the work directory had 10 or more", onHost, host)
	}
	if err := os.Rename(dir, dir+".killed"); err != nil {
		t.Fatal(err)
	}
	ctl.launch(t)
	t.Logf("add-nodes run %s stopped (journal outcome %q) with %d results a resume takes (%d on %s) and %d control-side ones; a new controller started with an empty work directory",
		id, recs.outcome, len(killed.reusable), onHost, host, killed.control)
	return killed
}

// journalRecords is what parseJournal reads of a journal.
type journalRecords struct {
	playbook, outcome, resumedFrom string
	ended                          bool
	results                        []journal.Record
}

// parseJournal reads a run's journal: its id ("" without a header) and
// records.
func parseJournal(data []byte) (string, journalRecords) {
	var id string
	var jr journalRecords
	for _, line := range strings.Split(string(data), "\n") {
		var r journal.Record
		if json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		switch r.Type {
		case "header":
			id, jr.playbook, jr.resumedFrom = r.Run, r.Playbook, r.ResumedFrom
		case "result":
			jr.results = append(jr.results, r)
		case "end":
			jr.ended, jr.outcome = true, r.Outcome
		}
	}
	return id, jr
}

// checkResumed wants the new controller's add-nodes to be the resume of
// the killed run: every result that finished on its host taken from the
// journal (resumed), none of them run again.
func checkResumed(t *testing.T, dir string, add journal.RunInfo, killed killedRun) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "runs", add.ID, journal.File))
	if err != nil {
		t.Fatal(err)
	}
	_, recs := parseJournal(data)
	if recs.resumedFrom != killed.id {
		t.Fatalf("add-nodes run %s resumed %q, not the stopped run %s", add.ID, recs.resumedFrom, killed.id)
	}
	resumed, ran := map[string]bool{}, map[string]bool{}
	control := 0
	for _, r := range recs.results {
		if r.Resumed {
			resumed[r.Key] = true
		} else {
			ran[r.Key] = true
			if _, was := killed.reusable[r.Key]; !was && r.Control {
				control++
			}
		}
	}
	again := 0
	for key, what := range killed.reusable {
		// A loop item's result (key#i) is taken with its task's when
		// the whole task finished: only the task's record is written.
		task, _, item := strings.Cut(key, "#")
		switch {
		case ran[key]:
			again++
			t.Errorf("%s finished in run %s and ran again in %s", what, killed.id, add.ID)
		case !resumed[key] && !(item && resumed[task]):
			t.Errorf("%s finished in run %s is not in the resumed run's journal", what, killed.id)
		}
	}
	t.Logf("PERF operator mode resume: add-nodes run %s resumed %s: %d results taken from the journal, %d run again, %d control-side tasks run again (the new work directory's downloads, PKI, kubeconfigs)",
		add.ID, killed.id, len(killed.reusable)-again, again, control)
}
