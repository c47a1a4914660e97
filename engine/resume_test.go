package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/run"
	"github.com/mensylisir/kubexm/engine/step"

	"github.com/mensylisir/kubexm/inventory"
)

const resumePlaybook = `
name: resumable
version: 1.0.0
plays:
  - hosts: web
    tasks:
      - name: first
        probe: {id: t1, data: {v: "{{ .inventory_hostname }}-v"}}
        register: r1
      - name: second
        set_fact: {sf: "{{ .inventory_hostname }}-fact"}
      - name: third
        probe: {id: t3, sleep: "{{ .sleep3 }}", fail: "{{ eq .inventory_hostname .broken }}"}
      - name: fourth
        probe: {id: t4, msg: "{{ .r1.v }} {{ .sf }}"}
        loop: [1, 2]
`

func TestResumeAfterFailure(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": resumePlaybook})
	work := t.TempDir()
	c := &calls{}
	pb, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	ev := map[string]any{"broken": "h2", "sleep3": "0s"}
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("first run: %v", err)
	}
	if c.count("h2:t4") != 0 || c.count("h1:t4") != 2 {
		t.Fatalf("first run calls: %v", c.sorted())
	}
	first := rc.RunID
	// A run of another playbook in between (an ad-hoc command looking at
	// the hosts) is not the last run a bare --resume continues.
	adhoc, err := LoadBytes(context.Background(), "adhoc", []byte("- {hosts: web, tasks: [{probe: adhoc}]}\n"), LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), adhoc, testInventory(), RunOptions{WorkDir: work}); err != nil {
		t.Fatal(err)
	}

	// Fixed: resume the last run. h1 finished everything; h2 redoes only
	// the failed task and what follows.
	c2 := &calls{}
	pb2, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c2)})
	if err != nil {
		t.Fatal(err)
	}
	ev["broken"] = "none"
	rc2, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: "last"})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	got := strings.Join(c2.sorted(), " ")
	want := "h2:t3 h2:t4=h2-v h2-fact h2:t4=h2-v h2-fact"
	if got != want {
		t.Errorf("resumed run executed %q, want %q", got, want)
	}
	if rc2.Hosts["h1"].OK != 4 || rc2.Hosts["h2"].OK != 4 {
		t.Errorf("recap after resume: h1 %+v h2 %+v", *rc2.Hosts["h1"], *rc2.Hosts["h2"])
	}
	// Resuming the resumed run by id skips everything.
	c3 := &calls{}
	pb3, _ := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c3)})
	if _, err := Run(context.Background(), pb3, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: rc2.RunID}); err != nil {
		t.Fatal(err)
	}
	if n := len(c3.sorted()); n != 0 {
		t.Errorf("second resume ran %d task-hosts: %v", n, c3.sorted())
	}
	_ = first
}

func TestResumeAfterCancel(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": resumePlaybook})
	work := t.TempDir()
	c := &calls{}
	pb, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	rc, err := Run(ctx, pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"broken": "none", "sleep3": "10s"}})
	if err == nil || !rc.Cancelled {
		t.Fatalf("want a cancelled run, got %v", err)
	}
	c2 := &calls{}
	pb2, _ := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c2)})
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"broken": "none", "sleep3": "0s"}, Resume: rc.RunID}); err != nil {
		t.Fatal(err)
	}
	if c2.count("h1:t1")+c2.count("h2:t1") != 0 {
		t.Errorf("finished task redone after resume: %v", c2.sorted())
	}
	if c2.count("h1:t3") != 1 || c2.count("h2:t3") != 1 || c2.count("h1:t4") != 2 {
		t.Errorf("resume did not finish the run: %v", c2.sorted())
	}
}

func TestResumeRefusesOtherPlaybookOrInventory(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": resumePlaybook})
	work := t.TempDir()
	reg := testRegistry(&calls{})
	pb, _ := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: reg})
	ev := map[string]any{"broken": "h2", "sleep3": "0s"}
	rc, _ := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev})

	inv := testInventory()
	inv.Hosts[0].Vars["idx"] = 99
	if _, err := Run(context.Background(), pb, inv, RunOptions{WorkDir: work, ExtraVars: ev, Resume: rc.RunID}); err == nil || !strings.Contains(err.Error(), "another inventory") {
		t.Errorf("resume with another inventory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pb/playbook.yaml"), []byte(resumePlaybook+"      - probe: extra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb2, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: rc.RunID}); err == nil || !strings.Contains(err.Error(), "another version of playbook") {
		t.Errorf("resume with a changed playbook: %v", err)
	}
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, Resume: "nope"}); err == nil || !strings.Contains(err.Error(), `no run "nope"`) {
		t.Errorf("resume of an unknown run: %v", err)
	}
	// A run of another playbook is refused naming both playbooks.
	other, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatal(err)
	}
	other.Name = "other"
	if _, err := Run(context.Background(), other, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: rc.RunID}); err == nil ||
		!strings.Contains(err.Error(), `is a run of playbook "resumable", not "other"`) {
		t.Errorf("resume with another playbook: %v", err)
	}
}

func TestResumeFromAnotherDirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": resumePlaybook})
	work := t.TempDir()
	ev := map[string]any{"broken": "h2", "sleep3": "0s"}
	t.Chdir(dir)
	pb, err := Load(context.Background(), "pb", LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev})
	t.Chdir(filepath.Join(dir, "pb"))
	c := &calls{}
	pb2, err := Load(context.Background(), ".", LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	ev["broken"] = "none"
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: rc.RunID}); err != nil {
		t.Fatal(err)
	}
	if c.count("h1:") != 0 || c.count("h2:t1") != 0 {
		t.Errorf("resume from another directory redid work: %v", c.sorted())
	}
}

func TestResumeSkipsFinishedLoopItems(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: {id: "i{{ .item }}", fail: "{{ eq .item .bad }}", data: {v: "{{ .item }}"}}
      loop: [1, 2, 3]
      register: r
    - probe: {id: after, msg: "{{ len .r.results }}"}
`})
	work := t.TempDir()
	c := &calls{}
	pb, _ := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"bad": 2}})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatal(err)
	}
	if got := strings.Join(c.sorted(), " "); got != "h1:i1 h1:i2 h1:i3" {
		t.Fatalf("first run: %s", got)
	}
	c2 := &calls{}
	pb2, _ := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c2)})
	if _, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"bad": 0}, Resume: rc.RunID}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c2.sorted(), " "); got != "h1:after=3 h1:i2" {
		t.Errorf("resume ran %s, want only the failed item and the next task", got)
	}
}

// A value that holds a secret is never restored from the journal (masked or
// not): the task that produced it runs again, so what later tasks write is
// the real value, never "********".
func TestResumeNeverRestoresMaskedValues(t *testing.T) {
	const pbText = `
- hosts: h1
  tasks:
    - name: keep the password
      set_fact: {reg_pw: "{{ .regpw }}"}
    - name: unrelated output
      probe: {id: out, data: {stdout: "/etc/kubernetes/admin.kubeconfig"}}
      register: cfg
    - name: loop
      probe: {id: "item-{{ .item }}", data: {v: "{{ .item }}"}}
      loop: ["{{ .regpw }}", "plain"]
      register: looped
    - name: gate
      probe: {id: gate, fail: "{{ .broken }}"}
    - name: write
      probe: {id: write, msg: "password = {{ .reg_pw }} {{ .cfg.stdout }} {{ (index .looped.results 0).v }}"}
`
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": pbText})
	work := t.TempDir()
	inv := func() *inventory.Inventory {
		i := testInventory()
		// A weak password that is part of ordinary words.
		i.OtherSecrets = []string{"Reg\"Pw\\S3cr3t", "kube"}
		return i
	}
	run := func(broken bool, resume string) *calls {
		c := &calls{}
		pb, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(c)})
		if err != nil {
			t.Fatal(err)
		}
		ev := map[string]any{"broken": broken, "regpw": "Reg\"Pw\\S3cr3t"}
		_, err = Run(context.Background(), pb, inv(), RunOptions{WorkDir: work, ExtraVars: ev, Resume: resume})
		if broken != (err != nil) {
			t.Fatalf("run (broken=%v): %v", broken, err)
		}
		return c
	}
	run(true, "")
	ents, _ := os.ReadDir(filepath.Join(work, "runs"))
	for _, e := range ents {
		j := readJournal(t, filepath.Join(work, "runs", e.Name()))
		if strings.Contains(j, "S3cr3t") || strings.Contains(j, "********") {
			t.Errorf("journal holds a secret or its mask:\n%s", j)
		}
	}
	c := run(false, "last")
	want := "h1:write=password = Reg\"Pw\\S3cr3t /etc/kubernetes/admin.kubeconfig Reg\"Pw\\S3cr3t"
	if c.count(want) != 1 {
		t.Errorf("resumed run wrote %v, want %q", c.sorted(), want)
	}
	// The tasks whose values held a secret ran again; the plain item did not.
	if c.count("h1:out") != 1 || c.count("h1:item-plain") != 0 {
		t.Errorf("resumed run executed %v", c.sorted())
	}
}

// The journal's inventory hash is computed without the secrets: it cannot
// be used to test password guesses, and a changed password does not stop a
// resume; any other change does.
func TestInventoryHashLeavesSecretsOut(t *testing.T) {
	hash := func(pw, addr string) string {
		inv := testInventory()
		inv.Hosts[2].Password = pw
		inv.Hosts[2].Address = addr
		inv.OtherSecrets = []string{"reg-" + pw}
		inv.Vars["registry_password"] = "reg-" + pw
		return journal.InventoryHash(inv, journal.NewMasker(inv.Secrets()))
	}
	if hash("first-password", "10.0.0.3") != hash("other-password", "10.0.0.3") {
		t.Error("the hash depends on the passwords")
	}
	if hash("first-password", "10.0.0.3") == hash("first-password", "10.0.0.4") {
		t.Error("the hash does not depend on the addresses")
	}
}

// The journal keeps what `kubexm logs` shows: each task-host's status,
// place, time and exit status, and for a task that failed its message and
// the end of its output; output holding a secret is left out, not masked.
func TestRunLog(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pb/playbook.yaml": `
name: logged
plays:
  - hosts: web
    tasks:
      - name: fine
        shell: "true"
      - name: boom
        shell: 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22; do echo "line $i"; done; echo oops >&2; exit 3'
        ignore_errors: true
      - name: leak
        shell: 'echo "{{ .pw }}"; exit 1'
`})
	work := t.TempDir()
	pb, err := Load(context.Background(), filepath.Join(dir, "pb"), LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"pw": "s3cr3t-pass"}})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("run: %v", err)
	}
	info, log, err := journal.RunLog(work, "last")
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != rc.RunID || info.Playbook != "logged" || info.Outcome != "failed" {
		t.Errorf("run info %+v", info)
	}
	got := map[string]journal.LogEntry{}
	for _, e := range log {
		got[e.Host+" "+e.Task] = e
	}
	fine, boom, leak := got["h1 fine"], got["h1 boom"], got["h2 leak"]
	if fine.Status != model.StatusChanged || fine.RC == nil || *fine.RC != 0 || fine.Message != "" || fine.Pos == "" || fine.Time.IsZero() {
		t.Errorf("fine: %+v", fine)
	}
	if boom.Status != model.StatusIgnored || boom.RC == nil || *boom.RC != 3 || !strings.Contains(boom.Message, "3") ||
		boom.StderrTail != "oops" || !strings.HasPrefix(boom.StdoutTail, "line 3\n") || !strings.HasSuffix(boom.StdoutTail, "line 22") {
		t.Errorf("boom: %+v", boom)
	}
	if leak.Status != model.StatusFailed || !leak.Hidden || leak.Message != "" || leak.StdoutTail != "" {
		t.Errorf("leak: %+v", leak)
	}
	data, err := os.ReadFile(filepath.Join(work, "runs", rc.RunID, "journal.jsonl"))
	if err != nil || strings.Contains(string(data), "s3cr3t-pass") || strings.Contains(string(data), "********") {
		t.Errorf("the journal holds the secret or its mask (%v)", err)
	}
	if _, _, err := journal.RunLog(work, "../x"); err == nil {
		t.Error("a path as run id was taken")
	}
}

// The resume decision with ResumeRerunsControl (operator mode's new
// leader, which may have another work directory): a task that finished on
// its host is taken from the journal; one that ran on the control machine
// (localhost, delegate_to: localhost, also per loop item) or whose builtin
// works there or writes there (Spec.Control, Spec.ControlProduct) runs
// again. Without it (the CLI's --resume) those are taken too.
func TestResumeRerunsControlSide(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: localhost
  gather_facts: false
  tasks:
    - probe: {id: local}
- hosts: web
  tasks:
    - probe: {id: remote}
    - probe: {id: delegated}
      delegate_to: localhost
    - control_probe: {id: control}
    - product_probe: {id: product}
    - probe: {id: item, msg: "{{ .item }}"}
      loop: [a, b]
      delegate_to: "{{ if eq .item \"a\" }}localhost{{ else }}{{ .inventory_hostname }}{{ end }}"
    - probe: {id: last, fail: "{{ .broken }}"}
`})
	registry := func(c *calls) map[string]step.Builtin {
		reg := testRegistry(c)
		probe := reg["probe"].(fakeBuiltin)
		control, product := probe, probe
		control.spec.Name, control.spec.Control = "control_probe", true
		product.spec.Name, product.spec.ControlProduct = "product_probe", true
		reg["control_probe"], reg["product_probe"] = control, product
		return reg
	}
	work := t.TempDir()
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: registry(c)})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"broken": true}})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("first run: %v", err)
	}
	if c.count("h1:remote") != 1 || c.count("h2:item=b") != 1 {
		t.Fatalf("first run calls: %v", c.sorted())
	}
	c2 := &calls{}
	pb2, _ := Load(context.Background(), dir, LoadOptions{Builtins: registry(c2)})
	rc2, err := Run(context.Background(), pb2, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"broken": false}, Resume: rc.RunID, ResumeRerunsControl: true})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	want := "h1:control h1:delegated h1:item=a h1:last h1:product h2:control h2:delegated h2:item=a h2:last h2:product localhost:local"
	if got := strings.Join(c2.sorted(), " "); got != want {
		t.Errorf("resumed run executed\n%s\nwant (the control side's tasks again, the hosts' finished ones not)\n%s", got, want)
	}
	// The journal says which results were taken from the earlier run.
	data, err := os.ReadFile(filepath.Join(work, "runs", rc2.RunID, journal.File))
	if err != nil {
		t.Fatal(err)
	}
	resumed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec journal.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type == "result" && rec.Resumed {
			if rec.Control {
				t.Errorf("a control-side result was taken from the journal: %+v", rec)
			}
			resumed[rec.Host+":"+rec.Task] = true
		}
	}
	for _, h := range []string{"h1", "h2"} {
		if !resumed[h+":probe"] {
			t.Errorf("%s's finished task is not journaled as resumed: %v", h, resumed)
		}
	}
	// The CLI's resume of the same run: only what did not finish.
	c3 := &calls{}
	pb3, _ := Load(context.Background(), dir, LoadOptions{Builtins: registry(c3)})
	if _, err := Run(context.Background(), pb3, testInventory(), RunOptions{WorkDir: work, ExtraVars: map[string]any{"broken": false}, Resume: rc.RunID}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := strings.Join(c3.sorted(), " "); got != "h1:last h2:last" {
		t.Errorf("the CLI's resume executed %q, want only the failed task", got)
	}
}

func TestReusable(t *testing.T) {
	for _, tc := range []struct {
		rec          journal.Record
		rerunControl bool
		want         bool
	}{
		{journal.Record{Status: model.StatusOK}, true, true},
		{journal.Record{Status: model.StatusChanged}, true, true},
		{journal.Record{Status: model.StatusSkipped}, true, true},
		{journal.Record{Status: model.StatusFailed}, false, false},
		{journal.Record{Status: model.StatusUnreachable}, true, false},
		{journal.Record{Status: model.StatusChanged, Omitted: true}, false, false},
		{journal.Record{Status: model.StatusChanged, Control: true}, true, false},
		{journal.Record{Status: model.StatusOK, Control: true}, true, false},
		{journal.Record{Status: model.StatusOK, Control: true}, false, true},
	} {
		if got := journal.Reusable(tc.rec, tc.rerunControl); got != tc.want {
			t.Errorf("Reusable(%+v, %v) = %v, want %v", tc.rec, tc.rerunControl, got, tc.want)
		}
	}
}
