package system

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// kernel.ostype is readable everywhere and already "Linux", so the runtime
// side needs no root; the file side runs in a temporary root.
func TestSysctlPersist(t *testing.T) {
	env, root := steptest.Env(t)
	file := filepath.Join(root, "sysctl.d", "99-kubexm.conf")
	steptest.MustWrite(t, file, "# keep\nkernel.ostype=Old\n")
	steptest.Converge(t, sysctlBuiltin{}, env, step.Args{"name": "kernel.ostype", "value": "Linux", "sysctl_file": file}, root)
	if got := steptest.MustRead(t, file); got != "# keep\nkernel.ostype = Linux\n" {
		t.Errorf("got %q", got)
	}
	steptest.Converge(t, sysctlBuiltin{}, env, step.Args{"name": "kernel.ostype", "state": "absent", "sysctl_file": file}, root)
	if got := steptest.MustRead(t, file); got != "# keep\n" {
		t.Errorf("got %q", got)
	}
}

func TestSysctlApplyErrors(t *testing.T) {
	env, root := steptest.Env(t)
	file := filepath.Join(root, "s.conf")
	// kernel.ostype is read-only: sysctl -w fails even for root.
	args := step.Args{"name": "kernel.ostype", "value": "Plan9", "sysctl_file": file}
	if _, err := runBuiltin(t.Context(), env, sysctlBuiltin{}, args); err == nil || !strings.Contains(err.Error(), "ignore_apply_errors") {
		t.Fatalf("want apply error with hint, got %v", err)
	}
	args["ignore_apply_errors"] = true
	res := steptest.Run(t, sysctlBuiltin{}, env, args)
	if !strings.Contains(res.Msg, "warning") {
		t.Errorf("%+v", res)
	}
	for _, bad := range []step.Args{
		{"name": "kernel.no_such_key_kubexm", "value": "1", "sysctl_file": file},
		{"name": "bad key", "value": "1", "sysctl_file": file},
		{"name": "kernel.ostype", "sysctl_file": file},
	} {
		if _, err := runBuiltin(t.Context(), env, sysctlBuiltin{}, bad); err == nil {
			t.Errorf("%v: want error", bad)
		}
	}
}

// TestSysctlDiff: the file it writes shows as a diff, in check mode too,
// and a second run shows none.
func TestSysctlDiff(t *testing.T) {
	env, root := steptest.Env(t)
	env.Diff = true
	steptest.Diffs(t, sysctlBuiltin{}, env, step.Args{"name": "kernel.ostype", "value": "Linux", "sysctl_file": filepath.Join(root, "sysctl.d", "99-kubexm.conf")}, "+kernel.ostype = Linux")
}
