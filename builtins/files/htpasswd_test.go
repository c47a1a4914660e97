package files

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// TestHtpasswd: the file is written once (check mode changes nothing, a
// second run nothing), a changed password rewrites it, --diff and the result
// hold neither the password nor a hash, and the file holds a salted bcrypt
// hash, never an unsalted digest of the account.
func TestHtpasswd(t *testing.T) {
	env, root := steptest.Env(t)
	dir := filepath.Join(root, "reg")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "htpasswd")
	args := step.Args{"path": path, "username": "pusher", "password": "s3cret-One", "mode": "0600"}
	env.Diff = true
	res := steptest.Converge(t, htpasswdBuiltin{}, env, args, dir)
	first := steptest.MustRead(t, path)
	checkEntry(t, first, "pusher", "s3cret-One")
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	noSecret(t, res, first, "s3cret-One")

	// The password changes: rewritten, and the diff names the account only.
	args["password"] = "s3cret-Two"
	res = steptest.Run(t, htpasswdBuiltin{}, env, args)
	second := steptest.MustRead(t, path)
	if !res.Changed || second == first {
		t.Fatalf("a changed password did not rewrite the file: %+v", res)
	}
	checkEntry(t, second, "pusher", "s3cret-Two")
	noSecret(t, res, second, "s3cret-Two")
	if !strings.Contains(res.Diff, "-pusher:(its old hash)") || !strings.Contains(res.Diff, "+pusher:(a new bcrypt hash)") {
		t.Errorf("diff %q", res.Diff)
	}
	if again := steptest.Run(t, htpasswdBuiltin{}, env, args); again.Changed {
		t.Errorf("a second run after the change: %+v", again)
	}

	// Another account in the file, or another user name: rewritten to the
	// one account.
	steptest.MustWrite(t, path, second+"intruder:$2y$05$abcdefghijklmnopqrstuv\n")
	if res := steptest.Run(t, htpasswdBuiltin{}, env, args); !res.Changed {
		t.Errorf("a file with a second account was left: %+v", res)
	}
	checkEntry(t, steptest.MustRead(t, path), "pusher", "s3cret-Two")
	args["username"] = "puller"
	if res := steptest.Run(t, htpasswdBuiltin{}, env, args); !res.Changed {
		t.Errorf("another user name was left: %+v", res)
	}
	checkEntry(t, steptest.MustRead(t, path), "puller", "s3cret-Two")

	// Another cost: a hash that verifies but is of another cost is
	// rewritten at the asked one, then left.
	args["cost"] = 5
	if res := steptest.Run(t, htpasswdBuiltin{}, env, args); !res.Changed {
		t.Errorf("a hash of cost %d was left when cost 5 is asked: %+v", bcrypt.DefaultCost, res)
	}
	_, hash, _ := strings.Cut(strings.TrimSpace(steptest.MustRead(t, path)), ":")
	if c, err := bcrypt.Cost([]byte(hash)); err != nil || c != 5 {
		t.Errorf("the hash's cost: %d %v, want 5", c, err)
	}
	checkEntry(t, steptest.MustRead(t, path), "puller", "s3cret-Two")
	if again := steptest.Run(t, htpasswdBuiltin{}, env, args); again.Changed {
		t.Errorf("a second run at cost 5: %+v", again)
	}

	for _, bad := range []step.Args{
		{"path": path, "username": "a", "password": "x", "cost": 3},
		{"path": path, "username": "a", "password": "x", "cost": 32},
		{"path": path, "username": "a:b", "password": "x"},
		{"path": path, "username": "a", "password": "x\ny"},
		{"path": path, "username": "a", "password": strings.Repeat("p", 73)},
	} {
		if _, err := steptest.RunBuiltin(t.Context(), env, htpasswdBuiltin{}, bad); err == nil {
			t.Errorf("%v: want an error", bad["username"])
		} else if strings.Contains(err.Error(), bad["password"].(string)) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

func checkEntry(t *testing.T, content, user, pw string) {
	t.Helper()
	name, hash, ok := strings.Cut(strings.TrimSuffix(content, "\n"), ":")
	if !ok || name != user || strings.Contains(hash, "\n") {
		t.Fatalf("htpasswd %q: want one entry for %s", content, user)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)); err != nil {
		t.Errorf("the stored hash does not verify the password: %v", err)
	}
}

// noSecret wants the password, the file's hash and the account's unsalted
// sha256 out of the result.
func noSecret(t *testing.T, res step.Result, file, pw string) {
	t.Helper()
	_, hash, _ := strings.Cut(strings.TrimSpace(file), ":")
	user, _, _ := strings.Cut(file, ":")
	sum := sha256.Sum256([]byte(user + ":" + pw))
	for _, s := range []string{pw, hash, hex.EncodeToString(sum[:])} {
		for what, v := range map[string]string{"msg": res.Msg, "diff": res.Diff, "data": strings.TrimSpace(strings.Join(mapValues(res.Data), " "))} {
			if strings.Contains(v, s) {
				t.Errorf("the result's %s holds a secret form: %q", what, v)
			}
		}
	}
}

func mapValues(m map[string]any) []string {
	var out []string
	for k, v := range m {
		if s, ok := v.(string); ok {
			out = append(out, k+"="+s)
		}
	}
	return out
}
