package builtins

import (
	"runtime"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func TestSetup(t *testing.T) {
	env, _ := steptest.Env(t)
	env.Check = true
	res := steptest.Run(t, setupBuiltin{}, env, step.Args{})
	f, ok := res.Facts["facts"].(map[string]any)
	if !ok || res.Changed || len(f) == 0 {
		t.Fatalf("%+v", res)
	}
	if f["arch"] != runtime.GOARCH {
		t.Errorf("arch %v, want %s", f["arch"], runtime.GOARCH)
	}
}
