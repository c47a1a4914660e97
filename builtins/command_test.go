package builtins

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func TestSplitWords(t *testing.T) {
	cases := map[string][]string{
		`ls -l /tmp`:                {"ls", "-l", "/tmp"},
		`echo 'a b' "c \"d\"" e\ f`: {"echo", "a b", `c "d"`, "e f"},
		`  x   ''  `:                {"x", ""},
		`a"b"'c'`:                   {"abc"},
		`echo "$HOME"`:              {"echo", "$HOME"},
	}
	for in, want := range cases {
		got, err := splitWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`echo 'x`, `echo "x`} {
		if _, err := splitWords(bad); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
}

func TestCommand(t *testing.T) {
	env, root := steptest.Env(t)
	res := steptest.Run(t, commandBuiltin{}, env, step.Args{"cmd": "echo 'hello world'", "chdir": root})
	if !res.Changed || res.Failed || res.Data["stdout"] != "hello world" || res.Data["rc"] != 0 {
		t.Errorf("%+v", res)
	}
	res = steptest.Run(t, commandBuiltin{}, env, step.Args{"argv": []any{"sh", "-c", "cat; echo err >&2; exit 3"}, "stdin": "in\n"})
	if !res.Failed || res.Data["rc"] != 3 || res.Data["stdout"] != "in" || !strings.Contains(res.Msg, "3") || !strings.Contains(res.Msg, "err") {
		t.Errorf("%+v", res)
	}
	res = steptest.Run(t, commandBuiltin{}, env, step.Args{"cmd": "printenv FOO", "env": map[string]any{"FOO": 7}})
	if res.Data["stdout"] != "7" {
		t.Errorf("%+v", res)
	}
	// The task's environment: reaches the process; the builtin's own env
	// argument wins over it.
	env.Environment = map[string]string{"FOO": "task", "BAR": "task"}
	res = steptest.Run(t, commandBuiltin{shell: true}, env, step.Args{"cmd": "echo $FOO-$BAR", "env": map[string]any{"FOO": "arg"}})
	if res.Data["stdout"] != "arg-task" {
		t.Errorf("environment: %+v", res)
	}
	env.Environment = nil
	if _, err := steptest.RunBuiltin(t.Context(), env, commandBuiltin{}, step.Args{"cmd": "no-such-binary-kubexm"}); err == nil {
		t.Error("missing binary: want error")
	}
}

func TestShellCreatesRemovesCheck(t *testing.T) {
	env, root := steptest.Env(t)
	marker := filepath.Join(root, "marker")
	args := step.Args{"cmd": "echo x > " + marker + " && echo done", "creates": marker}
	env.Check = true
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, args); !res.Skipped {
		t.Errorf("check: %+v", res)
	}
	env.Check = false
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("check mode ran the command")
	}
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, args); !res.Changed || res.Data["stdout_lines"].([]any)[0] != "done" {
		t.Errorf("first: %+v", res)
	}
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, args); res.Changed {
		t.Errorf("second: %+v", res)
	}
	// Check mode after convergence: creates short-circuits, no skip.
	env.Check = true
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, args); res.Changed || res.Skipped {
		t.Errorf("check after: %+v", res)
	}
	env.Check = false
	rm := step.Args{"cmd": "rm " + marker, "removes": marker}
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, rm); !res.Changed {
		t.Errorf("%+v", res)
	}
	if res := steptest.Run(t, commandBuiltin{shell: true}, env, rm); res.Changed {
		t.Errorf("%+v", res)
	}
}

// TestCommandCheckMode: command (like shell) runs nothing in check mode and
// says what it would have run.
func TestCommandCheckMode(t *testing.T) {
	env, root := steptest.Env(t)
	marker := filepath.Join(root, "made")
	env.Check = true
	res := steptest.Run(t, commandBuiltin{}, env, step.Args{"argv": []any{"touch", marker}})
	env.Check = false
	if !res.Skipped || res.Changed || !strings.Contains(res.Msg, "touch") {
		t.Errorf("check: %+v", res)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("check mode ran the command")
	}
	args := step.Args{"argv": []any{"touch", marker}, "creates": marker}
	if res := steptest.Run(t, commandBuiltin{}, env, args); !res.Changed {
		t.Errorf("first: %+v", res)
	}
	if res := steptest.Run(t, commandBuiltin{}, env, args); res.Changed {
		t.Errorf("second: %+v", res)
	}
}
