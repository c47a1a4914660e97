package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// fakeBuiltin is a test builtin defined by a spec and a function.
type fakeBuiltin struct {
	spec step.Spec
	run  func(ctx context.Context, env *step.Env, args step.Args) (step.Result, error)
}

func (f fakeBuiltin) Spec() step.Spec { return f.spec }
func (f fakeBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	return f.run(ctx, env, args)
}

// calls records probe executions as "host:id" or "host:id=msg".
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

func (c *calls) sorted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.log)
	slices.Sort(out)
	return out
}

func (c *calls) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.log {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func testRegistry(c *calls) map[string]step.Builtin {
	return map[string]step.Builtin{
		"noop": fakeBuiltin{spec: step.Spec{Name: "noop"}, run: func(context.Context, *step.Env, step.Args) (step.Result, error) {
			return step.Result{}, nil
		}},
		"probe": fakeBuiltin{
			spec: step.Spec{Name: "probe", FreeForm: "id", Args: []step.Arg{
				{Name: "id", Type: step.String, Required: true, Doc: "what to record"},
				{Name: "msg", Type: step.Any},
				{Name: "changed", Type: step.Bool, Default: false},
				{Name: "fail", Type: step.Bool, Default: false},
				{Name: "skip", Type: step.Bool, Default: false},
				{Name: "error", Type: step.String},
				{Name: "sleep", Type: step.Duration},
				{Name: "data", Type: step.Map},
				{Name: "facts", Type: step.Map},
				{Name: "mode", Type: step.String, Choices: []string{"fast", "slow"}},
				{Name: "count", Type: step.Int, Aliases: []string{"n"}},
			}},
			run: func(ctx context.Context, env *step.Env, a step.Args) (step.Result, error) {
				rec := env.Host + ":" + a.String("id")
				if a.Has("msg") {
					rec += "=" + fmt.Sprint(a["msg"])
				}
				if env.Check {
					rec += "(check)"
				}
				// A check-mode builtin's transports write nothing on the host
				// (transport.ReadOnly), and only a check-mode one's.
				if transport.IsReadOnly(ctx) != env.Check {
					rec += "(read-only is not check mode)"
				}
				c.add(rec)
				if d := a.Duration("sleep"); d > 0 {
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return step.Result{}, ctx.Err()
					}
				}
				if e := a.String("error"); e != "" {
					return step.Result{}, fmt.Errorf("%s", e)
				}
				data := map[string]any{"host": env.Host}
				for k, v := range a.Map("data") {
					data[k] = v
				}
				msg := ""
				if a.Has("msg") {
					msg = fmt.Sprint(a["msg"])
				}
				return step.Result{Changed: a.Bool("changed"), Failed: a.Bool("fail"), Skipped: a.Bool("skip"), Msg: msg, Data: data, Facts: a.Map("facts")}, nil
			},
		},
		"set_fact": fakeBuiltin{spec: step.Spec{Name: "set_fact", Args: []step.Arg{{Name: "*", Type: step.Any}}},
			run: func(_ context.Context, _ *step.Env, a step.Args) (step.Result, error) {
				return step.Result{Facts: map[string]any(a)}, nil
			}},
		"shell": fakeBuiltin{spec: step.Spec{Name: "shell", FreeForm: "cmd", Args: []step.Arg{{Name: "cmd", Type: step.String, Required: true}}},
			run: func(ctx context.Context, env *step.Env, a step.Args) (step.Result, error) {
				res, err := env.Target.Run(ctx, transport.Command{Script: a.String("cmd"), Env: env.Environment})
				if err != nil {
					return step.Result{}, err
				}
				return step.Result{Changed: true, Failed: res.ExitCode != 0, Msg: fmt.Sprintf("rc=%d", res.ExitCode),
					Data: map[string]any{"rc": res.ExitCode, "stdout": string(res.Stdout), "stderr": string(res.Stderr)}}, nil
			}},
		"setup": fakeBuiltin{spec: step.Spec{Name: "setup"}, run: func(_ context.Context, env *step.Env, _ step.Args) (step.Result, error) {
			c.add(env.Host + ":setup")
			return step.Result{Facts: map[string]any{"facts": map[string]any{"hostname": env.Host, "os": "linux"}}}, nil
		}},
		// readfile finds a role's files/ or templates/ file as copy and
		// template do (a template rendered with its overlays' blocks), and
		// records "host:readfile=<content>".
		"readfile": fakeBuiltin{spec: step.Spec{Name: "readfile", Args: []step.Arg{
			{Name: "kind", Type: step.String, Required: true, Choices: []string{"files", "templates"}},
			{Name: "src", Type: step.String, Required: true},
		}}, run: func(_ context.Context, env *step.Env, a step.Args) (step.Result, error) {
			p, err := env.FindFile(a.String("kind"), a.String("src"))
			if err != nil {
				return step.Result{}, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return step.Result{}, err
			}
			text := string(b)
			if a.String("kind") == "templates" && env.RenderTemplate != nil {
				if text, err = env.RenderTemplate(a.String("src"), text, env.Vars); err != nil {
					return step.Result{}, err
				}
			}
			c.add(env.Host + ":readfile=" + strings.TrimSpace(text))
			return step.Result{}, nil
		}},
	}
}

func testInventory() *inventory.Inventory {
	return &inventory.Inventory{
		Hosts: []inventory.Host{
			{Name: "h1", Local: true, Vars: map[string]any{"role": "web", "idx": 1}},
			{Name: "h2", Local: true, Vars: map[string]any{"role": "web", "idx": 2}},
			{Name: "h3", Local: true, Password: "s3cr3t-pass", Vars: map[string]any{"role": "db", "idx": 3}},
		},
		Groups:    map[string][]string{"web": {"h1", "h2"}, "db": {"h3"}},
		GroupVars: map[string]map[string]any{"web": {"port": 80, "gv": "web"}, "db": {"port": 5432, "gv": "db"}},
		Vars:      map[string]any{"spec": map[string]any{"name": "test", "etcd": map[string]any{"type": "kubexm"}}, "port": 1},
		Source:    "test",
	}
}

// writeFiles writes files under a temp dir and returns the dir.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type runResult struct {
	recap  *model.Recap
	err    error
	events []model.Event
	calls  *calls
}

func (rr *runResult) eventsOf(kind model.EventKind) []model.Event {
	var out []model.Event
	for _, e := range rr.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// runFiles loads dir/playbook.yaml and runs it on the test inventory.
func runFiles(t testing.TB, files map[string]string, opts RunOptions) *runResult {
	t.Helper()
	return runFilesInv(t, files, testInventory(), opts)
}

// runFilesInv loads dir/playbook.yaml and runs it on inv, recording events.
func runFilesInv(t testing.TB, files map[string]string, inv *inventory.Inventory, opts RunOptions) *runResult {
	t.Helper()
	dir := writeFiles(t, files)
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return runLoaded(pb, inv, c, opts)
}

// runLoaded runs pb on inv, recording events; c is what its builtins record.
func runLoaded(pb *Playbook, inv *inventory.Inventory, c *calls, opts RunOptions) *runResult {
	rr := &runResult{calls: c}
	var mu sync.Mutex
	opts.Output = model.SinkFunc(func(e model.Event) {
		mu.Lock()
		rr.events = append(rr.events, e)
		mu.Unlock()
	})
	rr.recap, rr.err = Run(context.Background(), pb, inv, opts)
	logEvents(rr.events)
	return rr
}

func stats(ok, changed, skipped, failed int) model.HostStats {
	return model.HostStats{OK: ok, Changed: changed, Skipped: skipped, Failed: failed}
}

func checkRecap(t *testing.T, rc *model.Recap, want map[string]model.HostStats) {
	t.Helper()
	for h, w := range want {
		got, ok := rc.Hosts[h]
		if !ok {
			t.Errorf("recap has no host %s (has %v)", h, rc.Order)
			continue
		}
		g := *got
		g.Error = ""
		if g != w {
			t.Errorf("recap %s = %+v, want %+v (error: %s)", h, g, w, got.Error)
		}
	}
	for h := range rc.Hosts {
		if _, ok := want[h]; !ok {
			t.Errorf("recap has unexpected host %s: %+v", h, *rc.Hosts[h])
		}
	}
}

type (
	stepEnv    = step.Env
	stepArgs   = step.Args
	stepResult = step.Result
)

func specNamed(n string) step.Spec { return step.Spec{Name: n} }

func readJournal(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, journal.File))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func specWithFree(name, free string) step.Spec {
	return step.Spec{Name: name, FreeForm: free, Args: []step.Arg{{Name: free, Type: step.String}}}
}
