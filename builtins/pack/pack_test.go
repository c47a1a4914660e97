package pack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// packFixture writes a small tree and a snapshot-sized file into the work dir.
func packFixture(t *testing.T, env *step.Env) {
	t.Helper()
	for name, body := range map[string]string{
		"certs/etcd/ca.crt":        "CA",
		"certs/etcd/ca.key":        "KEY",
		"staging/etcd/snapshot.db": strings.Repeat("etcd", 700000), // more than two encryption chunks
	} {
		p := filepath.Join(env.WorkDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func packArgs(dest string, extra step.Args) step.Args {
	a := step.Args{
		"dest":     dest,
		"format":   "kubexm-backup",
		"metadata": map[string]any{"cluster": "c1"},
		"files": []any{
			map[string]any{"src": "staging/etcd/snapshot.db", "name": "etcd/snapshot.db"},
			map[string]any{"src": "certs", "name": "pki"},
		},
	}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

func TestPackUnpackRoundTrip(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		env, _ := steptest.Env(t)
		packFixture(t, env)
		extra := step.Args{}
		if encrypted {
			keyFile := filepath.Join(env.WorkDir, "backup.key")
			if err := os.WriteFile(keyFile, []byte("s3cret-material\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			extra["key_file"] = keyFile
		}
		res := steptest.Run(t, packBuiltin{}, env, packArgs("backups/b1.tar.gz", extra))
		if !res.Changed || res.Data["files"] != 3 || res.Data["encrypted"] != encrypted {
			t.Fatalf("pack: %+v", res)
		}
		archive := filepath.Join(env.WorkDir, "backups/b1.tar.gz")
		raw, _ := os.ReadFile(archive)
		if encrypted && (bytes.Contains(raw, []byte("manifest.json")) || bytes.Contains(raw, []byte("s3cret"))) {
			t.Fatal("the encrypted archive shows its content or its key")
		}
		if _, err := steptest.RunBuiltin(t.Context(), env, packBuiltin{}, packArgs("backups/b1.tar.gz", extra)); err == nil || !strings.Contains(err.Error(), "never overwritten") {
			t.Fatalf("second pack into the same file: %v", err)
		}

		u := step.Args{"src": "backups/b1.tar.gz", "dest": "restore/b1", "format": "kubexm-backup"}
		for k, v := range extra {
			u[k] = v
		}
		res = steptest.Run(t, unpackBuiltin{}, env, u)
		if !res.Changed || res.Data["metadata"].(map[string]any)["cluster"] != "c1" {
			t.Fatalf("unpack: %+v", res)
		}
		got, err := os.ReadFile(filepath.Join(env.WorkDir, "restore/b1/pki/etcd/ca.key"))
		if err != nil || string(got) != "KEY" {
			t.Fatalf("extracted ca.key = %q, %v", got, err)
		}
		if res := steptest.Run(t, unpackBuiltin{}, env, u); res.Changed {
			t.Error("a second unpack of the same archive changed something")
		}

		// Wrong format, wrong key, missing key.
		bad := step.Args{}
		for k, v := range u {
			bad[k] = v
		}
		bad["dest"] = "restore/other"
		bad["format"] = "other"
		if _, err := steptest.RunBuiltin(t.Context(), env, unpackBuiltin{}, bad); err == nil || !strings.Contains(err.Error(), "format") {
			t.Errorf("wrong format: %v", err)
		}
		if encrypted {
			t.Setenv("KXM_TEST_KEY", "another key")
			delete(bad, "key_file")
			bad["format"] = "kubexm-backup"
			bad["key_env"] = "KXM_TEST_KEY"
			if _, err := steptest.RunBuiltin(t.Context(), env, unpackBuiltin{}, bad); err == nil || !strings.Contains(err.Error(), "wrong key") {
				t.Errorf("wrong key: %v", err)
			}
			delete(bad, "key_env")
			if _, err := steptest.RunBuiltin(t.Context(), env, unpackBuiltin{}, bad); err == nil || !strings.Contains(err.Error(), "encrypted") {
				t.Errorf("no key: %v", err)
			}
		}

		// One changed byte is refused by the checksum, and with a matching
		// checksum by the content checks.
		for i, at := range []int{len(raw) / 2, len(raw) - 5} {
			changed := bytes.Clone(raw)
			changed[at] ^= 0x01
			p := filepath.Join(env.WorkDir, "backups", "bad.tar.gz")
			os.Remove(p)
			if err := os.WriteFile(p, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(p+".sha256", []byte(strings.Fields(readSha(t, archive))[0]+"  bad.tar.gz\n"), 0o600)
			b := step.Args{"src": p, "dest": "restore/bad", "format": "kubexm-backup"}
			for k, v := range extra {
				b[k] = v
			}
			if _, err := steptest.RunBuiltin(t.Context(), env, unpackBuiltin{}, b); err == nil || !strings.Contains(err.Error(), "changed") {
				t.Errorf("changed byte %d: %v", i, err)
			}
			sum, _, _ := controlfs.FileSHA256(p)
			b["sha256"] = sum
			if _, err := steptest.RunBuiltin(t.Context(), env, unpackBuiltin{}, b); err == nil {
				t.Errorf("changed byte %d with its own checksum: accepted", i)
			}
			if _, err := os.Stat(filepath.Join(env.WorkDir, "restore/bad")); err == nil {
				t.Errorf("a refused archive left restore/bad")
			}
		}
	}
}

func readSha(t *testing.T, archive string) string {
	t.Helper()
	b, err := os.ReadFile(archive + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPackOptionalAndKeep: an optional entry whose src is missing is left
// out (a required one is an error), and keep leaves the last archives of
// keep_glob in name order, each with its .sha256, and no other file.
func TestPackOptionalAndKeep(t *testing.T) {
	env, _ := steptest.Env(t)
	packFixture(t, env)
	files := []any{
		map[string]any{"src": "staging/etcd/snapshot.db", "name": "etcd/snapshot.db"},
		map[string]any{"src": "no-certs", "name": "pki", "optional": true},
	}
	dir := filepath.Join(env.WorkDir, "backups")
	other := filepath.Join(dir, "notes.txt")
	for i, stamp := range []string{"20261201", "20261202", "20261203", "20261204"} {
		a := step.Args{"dest": "backups/c1-" + stamp + ".tar.gz", "files": files, "keep": 2, "keep_glob": "c1-*.tar.gz"}
		res := steptest.Run(t, packBuiltin{}, env, a)
		if !res.Changed || res.Data["files"] != 1 {
			t.Fatalf("pack %s: %+v", stamp, res)
		}
		if i == 0 {
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if removed, _ := res.Data["removed"].([]any); i >= 2 && (len(removed) != 1 || !strings.HasSuffix(removed[0].(string), fmt.Sprintf("c1-2026120%d.tar.gz", i-1))) {
			t.Errorf("pack %s removed %v", stamp, res.Data["removed"])
		}
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	want := []string{"c1-20261203.tar.gz", "c1-20261203.tar.gz.sha256", "c1-20261204.tar.gz", "c1-20261204.tar.gz.sha256", "notes.txt"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("left %v, want %v", names, want)
	}
	files[1].(map[string]any)["optional"] = false
	if _, err := steptest.RunBuiltin(t.Context(), env, packBuiltin{}, step.Args{"dest": "backups/x.tar.gz", "files": files}); err == nil {
		t.Error("a missing src that is not optional: want an error")
	}
	if _, err := steptest.RunBuiltin(t.Context(), env, packBuiltin{}, step.Args{"dest": "backups/x.tar.gz", "files": files[:1], "keep": 1, "keep_glob": "c1-*"}); err == nil || !strings.Contains(err.Error(), "does not match the archive's name") {
		t.Errorf("keep_glob not matching dest: %v", err)
	}
}
