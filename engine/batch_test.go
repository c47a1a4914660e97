package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
)

// batchProbe is the probe builtin that also takes batches: each RunBatch
// call is recorded as "host:batch=id,id,...", each Run as "host:run=id".
type batchProbe struct {
	mu  sync.Mutex
	log []string
	// short makes RunBatch return one result too few.
	short bool
}

func (*batchProbe) Spec() step.Spec {
	return step.Spec{Name: "bprobe", Args: []step.Arg{
		{Name: "id", Type: step.String, Required: true},
		{Name: "changed", Type: step.Bool, Default: false},
		{Name: "error", Type: step.String},
	}}
}

func (b *batchProbe) record(s string) {
	b.mu.Lock()
	b.log = append(b.log, s)
	b.mu.Unlock()
}

func (b *batchProbe) one(a step.Args) (step.Result, error) {
	if e := a.String("error"); e != "" {
		return step.Result{}, fmt.Errorf("%s", e)
	}
	return step.Result{Changed: a.Bool("changed"), Data: map[string]any{"id": a.String("id")}}, nil
}

func (b *batchProbe) Run(_ context.Context, env *step.Env, a step.Args) (step.Result, error) {
	b.record(env.Host + ":run=" + a.String("id"))
	return b.one(a)
}

func (b *batchProbe) RunBatch(_ context.Context, items []step.BatchItem) ([]step.Result, []error) {
	ids := make([]string, len(items))
	res, errs := make([]step.Result, len(items)), make([]error, len(items))
	for i, it := range items {
		ids[i] = it.Args.String("id")
		res[i], errs[i] = b.one(it.Args)
	}
	b.record(items[0].Env.Host + ":batch=" + strings.Join(ids, ","))
	if b.short {
		return res[1:], errs[1:]
	}
	return res, errs
}

func runBatchPlay(t *testing.T, bp *batchProbe, play string, opts RunOptions) *runResult {
	t.Helper()
	c := &calls{}
	reg := testRegistry(c)
	reg["bprobe"] = bp
	pb, err := LoadBytes(context.Background(), "playbook.yaml", []byte(play), LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	inv := testInventory()
	inv.Hosts, inv.Groups = inv.Hosts[:1], map[string][]string{"web": {"h1"}}
	return runLoaded(pb, inv, c, opts)
}

// TestLoopBatch: the items of a looped task whose builtin takes batches go
// to it in one call per host (those whose when holds), and what each item
// registers, changed_when included, is what running them one by one gives.
func TestLoopBatch(t *testing.T) {
	bp := &batchProbe{}
	rr := runBatchPlay(t, bp, `
- hosts: web
  tasks:
    - name: batched
      bprobe: {id: "{{ .item }}", changed: "{{ eq .item \"b\" }}"}
      loop: [a, b, c, d]
      when: item != "c"
      register: r
    - name: results as one by one
      probe: {id: results}
      when:
          - r.changed
          - r.results[0].id == "a" and not r.results[0].changed
          - r.results[1].changed
          - r.results[2].skipped
          - r.results[3].item == "d"
    - name: changed_when per item
      bprobe: {id: "{{ .item }}"}
      loop: [x, y]
      changed_when: item == "y"
      register: cw
    - probe: {id: changed_when}
      when:
          - not cw.results[0].changed
          - cw.results[1].changed
    - name: until runs item by item
      bprobe: {id: "{{ .item }}"}
      loop: [u1, u2]
      until: true
      retries: 1
    - name: one item runs by itself
      bprobe: {id: "{{ .item }}"}
      loop: [s1, s2]
      when: item == "s1"
`, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	want := []string{"h1:batch=a,b,d", "h1:batch=x,y", "h1:run=u1", "h1:run=u2", "h1:run=s1"}
	if strings.Join(bp.log, " ") != strings.Join(want, " ") {
		t.Errorf("calls %v, want %v", bp.log, want)
	}
	if got := strings.Join(rr.calls.sorted(), " "); got != "h1:changed_when h1:results" {
		t.Errorf("checks that held: %s", got)
	}
}

// TestLoopBatchFailures: an item's error fails that item only (the others'
// results stand, as one by one), and a builtin that answers for the wrong
// number of items fails the task instead of misattributing results.
func TestLoopBatchFailures(t *testing.T) {
	bp := &batchProbe{}
	rr := runBatchPlay(t, bp, `
- hosts: web
  tasks:
    - name: one bad item
      bprobe: {id: "{{ .item }}", error: "{{ if eq .item \"b\" }}boom{{ end }}", changed: true}
      loop: [a, b, c]
      register: r
      ignore_errors: true
    - probe: {id: results}
      when:
          - r.results[0].changed
          - r.results[1].failed
          - r.results[2].changed
          - 'r.msg == "item b: boom"'
`, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := strings.Join(rr.calls.sorted(), " "); got != "h1:results" {
		t.Errorf("checks that held: %s", got)
	}
	short := &batchProbe{short: true}
	rr = runBatchPlay(t, short, `
- hosts: web
  tasks:
    - bprobe: {id: "{{ .item }}"}
      loop: [a, b]
`, RunOptions{})
	if rr.recap.Hosts["h1"].Failed != 1 || !strings.Contains(rr.recap.Hosts["h1"].Error, "returned 1 results for 2 items") {
		t.Errorf("short batch: %+v", *rr.recap.Hosts["h1"])
	}
}
