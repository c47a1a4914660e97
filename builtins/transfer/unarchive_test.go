package transfer

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func makeTarGz(t *testing.T, p string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	f.Close()
}

func TestUnarchiveTar(t *testing.T) {
	env, root := steptest.Env(t)
	makeTarGz(t, filepath.Join(env.WorkDir, "etcd", "etcd-v3.tar.gz"), map[string]string{
		"etcd-v3/etcd": "E", "etcd-v3/etcdctl": "C", "etcd-v3/README.md": "R",
	})
	dest := filepath.Join(root, "bin")
	args := step.Args{"src": "etcd/etcd-v3.tar.gz", "dest": dest, "strip_components": 1, "include": []any{"etcd-v3/etcd", "etcd-v3/etcdctl"}}
	steptest.Converge(t, unarchiveBuiltin{}, env, args, dest)
	if steptest.MustRead(t, filepath.Join(dest, "etcd")) != "E" || steptest.MustRead(t, filepath.Join(dest, "etcdctl")) != "C" {
		t.Error("content")
	}
	if _, err := os.Stat(filepath.Join(dest, "README.md")); !os.IsNotExist(err) {
		t.Error("include ignored")
	}
	// A new archive version is extracted again.
	makeTarGz(t, filepath.Join(env.WorkDir, "etcd", "etcd-v3.tar.gz"), map[string]string{"etcd-v3/etcd": "E2", "etcd-v3/etcdctl": "C2"})
	if res := steptest.Run(t, unarchiveBuiltin{}, env, args); !res.Changed || steptest.MustRead(t, filepath.Join(dest, "etcd")) != "E2" {
		t.Errorf("%+v", res)
	}
	// creates short-circuits.
	if res := steptest.Run(t, unarchiveBuiltin{}, env, step.Args{"src": "nope.tgz", "dest": dest, "creates": filepath.Join(dest, "etcd")}); res.Changed {
		t.Errorf("%+v", res)
	}
}

func TestUnarchiveZipRemote(t *testing.T) {
	env, root := steptest.Env(t)
	zp := filepath.Join(root, "host", "a.zip")
	os.MkdirAll(filepath.Dir(zp), 0o755)
	f, _ := os.Create(zp)
	zw := zip.NewWriter(f)
	w, _ := zw.Create("dir/x.txt")
	w.Write([]byte("X"))
	zw.Close()
	f.Close()
	dest := filepath.Join(root, "out")
	steptest.Converge(t, unarchiveBuiltin{}, env, step.Args{"src": zp, "dest": dest, "remote_src": true}, dest)
	if steptest.MustRead(t, filepath.Join(dest, "dir", "x.txt")) != "X" {
		t.Error("content")
	}
	env.Check = true
	if res := steptest.Run(t, unarchiveBuiltin{}, env, step.Args{"src": "later.tgz", "dest": dest}); !res.Changed {
		t.Errorf("check mode, archive not downloaded yet: %+v", res)
	}
	env.Check = false
	for _, bad := range []step.Args{
		{"src": zp, "dest": dest, "remote_src": true, "strip_components": 1},
		{"src": "a.rar", "dest": dest},
		{"src": filepath.Join(root, "none.tgz"), "dest": dest},
	} {
		_, err := steptest.RunBuiltin(t.Context(), env, unarchiveBuiltin{}, bad)
		if err == nil {
			t.Errorf("%v: want error", bad)
		} else if !strings.Contains(err.Error(), "unarchive") {
			t.Errorf("error does not say which builtin: %v", err)
		}
	}
}
