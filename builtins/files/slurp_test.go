package files

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// TestSlurp reads a file into base64 content without changing anything, in
// check mode too; a missing file fails unless missing_ok, and a directory
// always does.
func TestSlurp(t *testing.T) {
	env, root := steptest.Env(t)
	key := filepath.Join(root, "id_ed25519")
	want := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n\x00\xffbinary\n")
	if err := os.WriteFile(key, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{false, true} {
		env.Check = check
		res, err := steptest.RunBuiltin(t.Context(), env, slurpBuiltin{}, step.Args{"src": key, "missing_ok": false})
		if err != nil {
			t.Fatalf("check %v: %v", check, err)
		}
		got, err := base64.StdEncoding.DecodeString(res.Data["content"].(string))
		if err != nil || string(got) != string(want) || res.Changed || res.Data["exists"] != true || res.Data["size"] != len(want) {
			t.Errorf("check %v: %+v (decoded %q, %v)", check, res, got, err)
		}
	}
	env.Check = false
	missing := filepath.Join(root, "nope")
	if _, err := steptest.RunBuiltin(t.Context(), env, slurpBuiltin{}, step.Args{"src": missing, "missing_ok": false}); err == nil || !strings.Contains(err.Error(), "missing_ok") {
		t.Errorf("missing file: %v, want an error naming missing_ok", err)
	}
	res, err := steptest.RunBuiltin(t.Context(), env, slurpBuiltin{}, step.Args{"src": missing, "missing_ok": true})
	if err != nil || res.Data["exists"] != false || res.Data["content"] != "" {
		t.Errorf("missing_ok: %+v, %v", res, err)
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, slurpBuiltin{}, step.Args{"src": root, "missing_ok": true}); err == nil {
		t.Error("a directory was read")
	}
}
