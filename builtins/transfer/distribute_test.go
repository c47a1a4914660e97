package transfer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func TestDistribute(t *testing.T) {
	env, root := steptest.Env(t)
	steptest.MustWrite(t, filepath.Join(env.WorkDir, "kubernetes", "kubelet"), "ELF")
	dest := filepath.Join(root, "host", "bin") + "/"
	steptest.Converge(t, distributeBuiltin{}, env, step.Args{"src": "kubernetes/kubelet", "dest": dest, "mode": "0755"}, filepath.Join(root, "host"))
	p := filepath.Join(root, "host", "bin", "kubelet")
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 || steptest.MustRead(t, p) != "ELF" {
		t.Fatalf("%v %v", fi, err)
	}
	// A mode change alone is detected in check mode and fixed.
	args := step.Args{"src": "kubernetes/kubelet", "dest": p, "mode": "0700"}
	steptest.Converge(t, distributeBuiltin{}, env, args, filepath.Join(root, "host"))
	if _, err := steptest.RunBuiltin(t.Context(), env, distributeBuiltin{}, step.Args{"src": "nope", "dest": p}); err == nil {
		t.Error("missing src: want error")
	}
	// In check mode a missing src is what an earlier download would make.
	env.Check = true
	if res := steptest.Run(t, distributeBuiltin{}, env, step.Args{"src": "nope", "dest": p}); !res.Changed || !strings.Contains(res.Msg, "earlier task") {
		t.Errorf("%+v", res)
	}
}
