package builtins

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func TestAssertFailDebug(t *testing.T) {
	env, _ := steptest.Env(t)
	env.Vars["ok"] = true
	env.Vars["bad"] = false
	env.Vars["n"] = 3
	if res := steptest.Run(t, assertBuiltin{}, env, step.Args{"that": []any{"ok", "true"}}); res.Failed || res.Msg != "All assertions passed" {
		t.Errorf("%+v", res)
	}
	res := steptest.Run(t, assertBuiltin{}, env, step.Args{"that": []any{"ok", "bad"}, "fail_msg": "need ok"})
	if !res.Failed || res.Msg != "need ok (bad)" {
		t.Errorf("%+v", res)
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, assertBuiltin{}, step.Args{"that": "n"}); err == nil || !strings.Contains(err.Error(), "not true or false") {
		t.Errorf("%v", err)
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, assertBuiltin{}, step.Args{"that": "undefined_x"}); err == nil || !strings.Contains(err.Error(), "undefined_x") {
		t.Errorf("%v", err)
	}
	if res := steptest.Run(t, failBuiltin{}, env, step.Args{"msg": "stop"}); !res.Failed || res.Msg != "stop" {
		t.Errorf("%+v", res)
	}
	if res := steptest.Run(t, debugBuiltin{}, env, step.Args{"var": "n"}); res.Msg != "n: 3" || res.Data["n"] != 3 {
		t.Errorf("%+v", res)
	}
	if res := steptest.Run(t, debugBuiltin{}, env, step.Args{"msg": map[string]any{"a": 1}}); res.Msg != "{\n  \"a\": 1\n}" {
		t.Errorf("%q", res.Msg)
	}
}

func TestSetFact(t *testing.T) {
	env, _ := steptest.Env(t)
	res := steptest.Run(t, setFactBuiltin{}, env, step.Args{"a": 1, "b_c": []any{"x"}})
	if res.Changed || res.Facts["a"] != 1 || len(res.Facts) != 2 {
		t.Errorf("%+v", res)
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, setFactBuiltin{}, step.Args{"bad-name": 1}); err == nil {
		t.Error("want invalid name error")
	}
	// cacheable is Ansible's keyword, not a variable.
	res = steptest.Run(t, setFactBuiltin{}, env, step.Args{"a": 1, "cacheable": true})
	if _, ok := res.Facts["cacheable"]; ok || res.Facts["a"] != 1 {
		t.Errorf("cacheable became a variable: %+v", res.Facts)
	}
	if (setFactBuiltin{}).Spec().Args[0].Name != AnyArgs {
		t.Error("set_fact must declare the any-args marker")
	}
}

func TestPause(t *testing.T) {
	env, _ := steptest.Env(t)
	start := time.Now()
	if res := steptest.Run(t, pauseBuiltin{}, env, step.Args{"seconds": "50ms"}); res.Changed || time.Since(start) < 50*time.Millisecond {
		t.Errorf("%+v", res)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := steptest.RunBuiltin(ctx, env, pauseBuiltin{}, step.Args{"minutes": 5}); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("not interrupted: %v", err)
	}
	env.Check = true
	if res := steptest.Run(t, pauseBuiltin{}, env, step.Args{"minutes": 5}); !res.Skipped {
		t.Errorf("%+v", res)
	}
}

// TestControlCheckModeAndRerun: assert, fail, debug and set_fact change
// nothing on the host, so check mode runs them as usual (a --check run
// still stops at a failing assert and sees the facts later tasks use), and
// running them again reports the same, unchanged result.
func TestControlCheckModeAndRerun(t *testing.T) {
	env, root := steptest.Env(t)
	env.Vars["ok"] = true
	env.Vars["bad"] = false
	before := steptest.Snapshot(t, root)
	cases := []struct {
		b    step.Builtin
		args step.Args
		fail bool
	}{
		{assertBuiltin{}, step.Args{"that": []any{"ok"}}, false},
		{assertBuiltin{}, step.Args{"that": []any{"bad"}, "fail_msg": "bad"}, true},
		{failBuiltin{}, step.Args{"msg": "stop"}, true},
		{debugBuiltin{}, step.Args{"var": "ok"}, false},
		{setFactBuiltin{}, step.Args{"x": 1}, false},
	}
	for _, c := range cases {
		name := c.b.Spec().Name
		var results []step.Result
		for _, check := range []bool{true, false, false} {
			env.Check = check
			res := steptest.Run(t, c.b, env, c.args)
			if res.Changed || res.Skipped || res.Failed != c.fail {
				t.Errorf("%s (check %v): %+v", name, check, res)
			}
			results = append(results, res)
		}
		env.Check = false
		if results[0].Msg != results[1].Msg || results[1].Msg != results[2].Msg {
			t.Errorf("%s: check mode and reruns differ: %q %q %q", name, results[0].Msg, results[1].Msg, results[2].Msg)
		}
		if name == "set_fact" && results[0].Facts["x"] != 1 {
			t.Errorf("set_fact in check mode: %+v", results[0])
		}
	}
	if after := steptest.Snapshot(t, root); after != before {
		t.Errorf("files changed:\n%s\n%s", before, after)
	}
}

// TestDebugVerbosity: debug with verbosity N prints only under -v N, as in
// Ansible; below it the task is skipped.
func TestDebugVerbosity(t *testing.T) {
	env, _ := steptest.Env(t)
	res := steptest.Run(t, debugBuiltin{}, env, step.Args{"msg": "hi", "verbosity": 1})
	if !res.Skipped {
		t.Errorf("verbosity 1 without -v: %+v", res)
	}
	env.Verbosity = 1
	res = steptest.Run(t, debugBuiltin{}, env, step.Args{"msg": "hi", "verbosity": 1})
	if res.Skipped || res.Msg != "hi" {
		t.Errorf("verbosity 1 with -v: %+v", res)
	}
}
