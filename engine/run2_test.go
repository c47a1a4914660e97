package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/run"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

func TestUnreachableHost(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - probe: a
    - probe: b
- hosts: all
  tasks:
    - probe: c
`})
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	inv := testInventory()
	inv.Hosts[1].Local = false
	inv.Hosts[1].Address = "192.0.2.1"
	connects := 0
	var mu sync.Mutex
	rc, err := Run(context.Background(), pb, inv, RunOptions{
		Connect: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			mu.Lock()
			connects++
			mu.Unlock()
			// A typed nil beside the error, as a careless connector returns it:
			// the engine must neither use nor close it.
			var none *nilTransport
			return none, fmt.Errorf("dial tcp %s:22: connection refused", h.Address)
		},
	})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("err = %v, want ErrFailed", err)
	}
	checkRecap(t, rc, map[string]model.HostStats{"h1": stats(3, 0, 0, 0), "h2": {Unreachable: 1}, "h3": stats(3, 0, 0, 0)})
	if !strings.Contains(rc.Hosts["h2"].Error, "connection refused") {
		t.Errorf("h2 error = %q", rc.Hosts["h2"].Error)
	}
	if connects != 1 {
		t.Errorf("connected %d times to h2, want once per run", connects)
	}
}

// nilTransport panics on every use through a nil pointer.
type nilTransport struct{ transport.Transport }

func (n *nilTransport) Close() error { return n.Transport.Close() }

func TestFreeStrategyRunsAhead(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  strategy: free
  tasks:
    - probe: {id: a, sleep: "{{ if eq .inventory_hostname \"h1\" }}300ms{{ else }}0s{{ end }}"}
    - probe: b
    - probe: once
      run_once: true
`}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	// h2 and h3 finish both tasks while h1 still sleeps in the first.
	rr.calls.mu.Lock()
	log := strings.Join(rr.calls.log, " ")
	rr.calls.mu.Unlock()
	if strings.Index(log, "h2:b") > strings.Index(log, "h1:b") || strings.Index(log, "h3:b") > strings.Index(log, "h1:b") {
		t.Errorf("free strategy did not let fast hosts run ahead: %s", log)
	}
	if n := rr.calls.count("h"); n != 7 {
		t.Errorf("calls = %d (%s), want 7: run_once runs once", n, log)
	}
}

func TestLinearStrategyWaits(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - probe: {id: a, sleep: "{{ if eq .inventory_hostname \"h1\" }}100ms{{ else }}0s{{ end }}"}
    - probe: b
`}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	rr.calls.mu.Lock()
	defer rr.calls.mu.Unlock()
	for i, c := range rr.calls.log {
		if strings.HasSuffix(c, ":b") && i < 3 {
			t.Fatalf("linear strategy started b before every host finished a: %v", rr.calls.log)
		}
	}
}

func TestForksBound(t *testing.T) {
	var mu sync.Mutex
	cur, peak := 0, 0
	reg := testRegistry(&calls{})
	reg["track"] = fakeBuiltin{spec: specNamed("track"), run: func(context.Context, *stepEnv, stepArgs) (stepResult, error) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		cur--
		mu.Unlock()
		return stepResult{}, nil
	}}
	pb, err := LoadBytes(context.Background(), "forks.yaml", []byte("- hosts: all\n  tasks:\n    - track:\n"), LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{}
	for i := range 10 {
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: fmt.Sprintf("n%d", i), Local: true})
	}
	if _, err := Run(context.Background(), pb, inv, RunOptions{Forks: 3}); err != nil {
		t.Fatal(err)
	}
	if peak != 3 {
		t.Errorf("peak concurrency = %d, want 3 (--forks)", peak)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h3
  tasks:
    - probe: {id: a, msg: "password is s3cr3t-pass", fail: true}
      ignore_errors: true
      register: r
    - probe: {id: b, msg: "{{ .token }}", data: {stdout: "{{ .token }}"}}
      no_log: true
      register: nl
    - probe: {id: c, fail: true, msg: "{{ .token }}"}
      no_log: true
`}, RunOptions{WorkDir: dir, Verbosity: 2, ExtraVars: map[string]any{"token": "tok-123456"}})
	if rr.err == nil {
		t.Fatal("want failure of task c")
	}
	var buf bytes.Buffer
	for _, e := range rr.events {
		b, _ := json.Marshal(e)
		buf.Write(b)
	}
	out := buf.String()
	for _, secret := range []string{"s3cr3t-pass", "tok-123456"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q appears in events: %s", secret, out)
		}
	}
	j := readJournal(t, rr.recap.Journal)
	for _, secret := range []string{"s3cr3t-pass", "tok-123456"} {
		if strings.Contains(j, secret) {
			t.Errorf("secret %q appears in the journal", secret)
		}
	}
	if !strings.Contains(out, "********") {
		t.Errorf("inventory password was not masked in output: %s", out)
	}
}

func TestCancelStopsRemoteCommandsAndRecaps(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: localhost
  tasks:
    - shell: sleep 30
    - probe: never
`})
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	rc, err := Run(ctx, pb, testInventory(), RunOptions{})
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("cancel took %s", el)
	}
	if err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if rc == nil || !rc.Cancelled || rc.Hosts["localhost"].Failed != 1 {
		t.Fatalf("recap = %+v", rc)
	}
	// The recap says which task was interrupted where.
	if len(rc.Interrupted) != 1 || rc.Interrupted[0].Host != "localhost" || rc.Interrupted[0].Task != "shell" ||
		!strings.Contains(rc.Interrupted[0].Pos, "playbook.yaml:4") {
		t.Errorf("interrupted = %+v", rc.Interrupted)
	}
	if e := rc.Hosts["localhost"].Error; !strings.Contains(e, `interrupted (context canceled) during task "shell" at `) {
		t.Errorf("host error = %q", e)
	}
	if c.count("localhost:never") != 0 {
		t.Error("a task ran after cancellation")
	}
}

func TestJSONEvents(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- name: p
  hosts: h1
  tasks:
    - name: t1
      probe: {id: a, changed: true}
`}, RunOptions{})
	var host *model.Event
	for i, e := range rr.events {
		if e.Kind == model.EventHostResult {
			host = &rr.events[i]
		}
	}
	if host == nil {
		t.Fatal("no host_result event")
	}
	b, err := json.Marshal(host)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "run", "play", "task", "host", "status", "duration_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("event JSON lacks %q: %s", k, b)
		}
	}
	if m["status"] != "changed" || m["play"] != "p" || m["task"] != "t1" {
		t.Errorf("event = %s", b)
	}
	last := rr.events[len(rr.events)-1]
	if last.Kind != model.EventRecap || last.Recap == nil {
		t.Errorf("last event = %+v, want the recap", last)
	}
}

func TestRuntimeErrorsNameTheTaskAndHost(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: "web:nosuchgroup"
  tasks:
    - name: undefined in template
      probe: {id: "{{ .nope.deeper }}"}
      when: inventory_hostname == "h1"
    - name: loop over a mapping
      probe: a
      loop: "{{ .spec }}"
      when: inventory_hostname == "h2"
- hosts: h3
  tasks:
    - name: bad when
      probe: b
      when: missing_var > 1
    - probe: c
- hosts: localhost
  tasks:
    - name: ignored template error
      probe: {id: "{{ .nope }}"}
      ignore_errors: true
    - name: templated argument of the wrong type
      probe: {id: x, count: "{{ .spec.name }}"}
`}, RunOptions{})
	if !errors.Is(rr.err, run.ErrFailed) {
		t.Fatalf("err = %v", rr.err)
	}
	checkRecap(t, rr.recap, map[string]model.HostStats{"h1": {Failed: 1}, "h2": {Skipped: 1, Failed: 1}, "h3": {Failed: 1}, "localhost": {OK: 1, Ignored: 1, Failed: 1}})
	msgs := map[string]string{}
	for _, e := range rr.eventsOf(model.EventHostResult) {
		if e.Status == model.StatusFailed || e.Status == model.StatusIgnored {
			msgs[e.Host] = e.Pos + " " + e.Message
		}
	}
	for host, want := range map[string][]string{
		"h1":        {"playbook.yaml:4:7", `undefined variable "nope"`},
		"h2":        {"playbook.yaml:7:7", "not a list"},
		"h3":        {"playbook.yaml:15:13", "missing_var"},
		"localhost": {"count", `"test" is not a number`},
	} {
		for _, w := range want {
			if !strings.Contains(msgs[host], w) {
				t.Errorf("%s: message %q lacks %q", host, msgs[host], w)
			}
		}
	}
	warned := false
	for _, e := range rr.eventsOf(model.EventWarning) {
		if strings.Contains(e.Message, `"nosuchgroup"`) {
			warned = true
		}
	}
	if !warned {
		t.Error("no warning about the unknown group")
	}
}

// A --limit or --start-at-task that matches nothing is a mistake, not a
// successful run of nothing.
func TestNothingMatchedIsAnError(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - {name: first, probe: a}
`})
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), pb, testInventory(), RunOptions{Limit: "nosuchhost"})
	if err == nil || !strings.Contains(err.Error(), `--limit "nosuchhost" matches no host`) {
		t.Errorf("limit: %v", err)
	}
	_, err = Run(context.Background(), pb, testInventory(), RunOptions{StartAt: "no such task", NoJournal: true})
	if err == nil || !strings.Contains(err.Error(), `--start-at-task "no such task" names no task of playbook`) {
		t.Errorf("start-at: %v", err)
	}
	if got := c.sorted(); len(got) != 0 {
		t.Errorf("tasks ran: %v", got)
	}
	if _, err := Run(context.Background(), pb, testInventory(), RunOptions{StartAt: "fir*", NoJournal: true}); err != nil {
		t.Errorf("a matching glob: %v", err)
	}
}

// Secrets are masked in every form kubexm can emit them: loop labels,
// JSON/TOML/Go/shell escapes, base64, and prefixes cut short.
func TestSecretsMaskedInEveryEncoding(t *testing.T) {
	const pw = "Reg\"Pw\\S3cr3t'x"
	const plain = "PlainS3cr3tValue"
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - name: loop with secrets in its items
      probe: {id: "i"}
      loop: ["{{ .pw }}", {user: u, pass: "{{ .plain }}", pad: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, "short-{{ .plain }}"]
    - name: labelled loop
      probe: {id: "l"}
      loop: [1]
      loop_control: {label: "{{ .plain }}"}
    - name: encodings
      probe:
        id: enc
        msg: >-
          json={{ toJson .pw }} quote={{ quote .pw }} b64={{ b64enc .pw }}
          b64long={{ printf "prefix-%s-suffix" .plain | b64enc }}
          toml=password = {{ quote .plain }} cut={{ trunc 7 .plain }}...
    - name: failure with a cut message
      probe: {id: f, error: "login failed for {{ trunc 9 .plain }}..."}
      ignore_errors: true
`})
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	inv := testInventory()
	inv.OtherSecrets = []string{pw, plain}
	var events []model.Event
	var mu sync.Mutex
	_, err = Run(context.Background(), pb, inv, RunOptions{Verbosity: 2, ExtraVars: map[string]any{"pw": pw, "plain": plain},
		Output: model.SinkFunc(func(e model.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
	if err != nil {
		t.Fatal(err)
	}
	var js, text strings.Builder
	for _, e := range events {
		b, _ := json.Marshal(e)
		js.Write(b)
		fmt.Fprintf(&text, "%s|%s|%s|%s|%s|%s\n", e.Task, e.Item, e.Message, e.Stdout, e.Stderr, e.Diff)
	}
	leaks := []string{"S3cr3t", "UGxhaW5TM2NyM3RWYWx1", "bGFpblMzY3IzdFZhbHVl", "UmVnIlB3XFMzY3IzdCd4", "PlainS3", "Plain..."}
	for _, l := range leaks {
		if strings.Contains(text.String(), l) || strings.Contains(js.String(), l) {
			t.Errorf("%q leaks:\n%s", l, text.String())
		}
	}
	if !strings.Contains(text.String(), "********") {
		t.Errorf("nothing masked:\n%s", text.String())
	}
}

// TestUntilSaysWhatItLastSaw: an until that gives up names the result it
// last saw: the message, or else the exit status and the end of the output.
func TestUntilSaysWhatItLastSaw(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: {id: quiet, data: {rc: 1, stderr: "line 0\nline 1\nline 2\nError from server (NotFound): nodes \"n2\" not found\n", stdout: ""}}
      register: r
      until: r.rc == 0
      retries: 2
      delay: 0
- hosts: h2
  tasks:
    - probe: {id: told, msg: "status 503"}
      register: r
      until: false
      retries: 1
      delay: 0
`}, RunOptions{})
	if !errors.Is(rr.err, run.ErrFailed) {
		t.Fatalf("err = %v", rr.err)
	}
	msgs := map[string]string{}
	for _, e := range rr.eventsOf(model.EventHostResult) {
		if e.Status == model.StatusFailed {
			msgs[e.Host] = e.Message
		}
	}
	for host, want := range map[string]string{
		"h1": `until "r.rc == 0" still false after 3 attempts in 0s; last seen: rc=1, stderr: line 1 | line 2 | Error from server (NotFound): nodes "n2" not found`,
		"h2": `until "false" still false after 2 attempts in 0s; last seen: status 503`,
	} {
		if msgs[host] != want {
			t.Errorf("%s: message\n  %q\nwant\n  %q", host, msgs[host], want)
		}
	}
}

// A panic in a builtin fails that task on that host, with a recap; the
// other hosts go on, and -vvv shows the stack.
func TestBuiltinPanicFailsOnlyThatTaskHost(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: web
  tasks:
    - boom: {}
      when: inventory_hostname == "h1"
    - probe: after
`})
	c := &calls{}
	reg := testRegistry(c)
	reg["boom"] = fakeBuiltin{spec: step.Spec{Name: "boom"}, run: func(context.Context, *step.Env, step.Args) (step.Result, error) {
		var m map[string]int
		m["x"] = 1 // a nil map write: a real bug
		return step.Result{}, nil
	}}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatal(err)
	}
	var events []model.Event
	var mu sync.Mutex
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{Verbosity: 3,
		Output: model.SinkFunc(func(e model.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
	if !errors.Is(err, run.ErrFailed) {
		t.Fatalf("err = %v", err)
	}
	if rc.Hosts["h1"].Failed != 1 || !strings.Contains(rc.Hosts["h1"].Error, "internal error") || !strings.Contains(rc.Hosts["h1"].Error, "assignment to entry in nil map") {
		t.Errorf("h1 = %+v", rc.Hosts["h1"])
	}
	if c.count("h2:after") != 1 {
		t.Errorf("h2 did not go on: %v", c.sorted())
	}
	stack := false
	for _, e := range events {
		if e.Kind == model.EventLog && strings.Contains(e.Message, "goroutine") {
			stack = true
		}
	}
	if !stack {
		t.Error("no stack at -vvv")
	}
}
