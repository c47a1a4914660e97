package builtins

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

type fileServer struct {
	body     []byte
	hits     atomic.Int32
	ranges   atomic.Int32
	failures atomic.Int32 // answer 500 this many times first
}

func (f *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	if r.Header.Get("Range") != "" {
		f.ranges.Add(1)
	}
	if f.failures.Add(-1) >= 0 {
		http.Error(w, "busy", http.StatusInternalServerError)
		return
	}
	if r.URL.Path == "/missing.tgz" {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(f.body))
}

func testDownload() downloadBuiltin {
	return downloadBuiltin{backoff: time.Millisecond, client: &http.Client{}}
}

func TestDownload(t *testing.T) {
	body := bytes.Repeat([]byte("kubexm"), 10000)
	fs := &fileServer{body: body}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	env, _ := testEnv(t)
	sum := sha256Hex(body)
	args := step.Args{"url": srv.URL + "/etcd-v3.5.tar.gz", "dest": "etcd/3.5/amd64/", "sha256": sum}
	res := converge(t, testDownload(), env, args, env.WorkDir)
	dest := filepath.Join(env.WorkDir, "etcd/3.5/amd64/etcd-v3.5.tar.gz")
	if res.Data["dest"] != dest || mustRead(t, dest) != string(body) {
		t.Fatalf("%+v", res)
	}
	if fs.hits.Load() != 1 {
		t.Errorf("hits %d, want 1 (cached afterwards)", fs.hits.Load())
	}
}

func TestDownloadMirrorsRetryResume(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 5000)
	fs := &fileServer{body: body}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	env, _ := testEnv(t)
	sum := sha256Hex(body)
	dest := filepath.Join(env.WorkDir, "f.bin")
	mustWrite(t, dest+".part", string(body[:1234]))
	fs.failures.Store(1)
	args := step.Args{"urls": []any{srv.URL + "/missing.tgz", srv.URL + "/f.bin"}, "dest": dest, "sha256": sum, "retries": 2}
	res := runB(t, testDownload(), env, args)
	if !res.Changed || res.Data["url"] != srv.URL+"/f.bin" || mustRead(t, dest) != string(body) {
		t.Fatalf("%+v", res)
	}
	if fs.ranges.Load() == 0 {
		t.Error("the partial file was not resumed with a Range request")
	}
	if _, err := os.Stat(dest + ".part"); !os.IsNotExist(err) {
		t.Error(".part left behind")
	}
	// Every mirror failing names each URL.
	args = step.Args{"urls": []any{srv.URL + "/missing.tgz", "http://127.0.0.1:1/x.tgz"}, "dest": filepath.Join(env.WorkDir, "g"), "sha256": sum, "retries": 1}
	_, err := runBuiltin(t.Context(), env, testDownload(), args)
	if err == nil || !strings.Contains(err.Error(), "/missing.tgz: HTTP 404") || !strings.Contains(err.Error(), "127.0.0.1:1/x.tgz") {
		t.Fatalf("got %v", err)
	}
	// A wrong checksum is an error and leaves nothing behind.
	args = step.Args{"url": srv.URL + "/f.bin", "dest": filepath.Join(env.WorkDir, "h"), "sha256": strings.Repeat("0", 64), "retries": 1}
	if _, err := runBuiltin(t.Context(), env, testDownload(), args); err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.WorkDir, "h")); !os.IsNotExist(err) {
		t.Error("bad file kept")
	}
}

func TestDownloadSharedAcrossHosts(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100000)
	fs := &fileServer{body: body}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	env, _ := testEnv(t)
	args := step.Args{"url": srv.URL + "/f", "dest": "c/", "sha256": sha256Hex(body)}
	var wg sync.WaitGroup
	changed := atomic.Int32{}
	for range 4 {
		wg.Go(func() {
			e := *env
			res, err := runBuiltin(t.Context(), &e, testDownload(), args)
			if err != nil {
				t.Error(err)
			}
			if res.Changed {
				changed.Add(1)
			}
		})
	}
	wg.Wait()
	if fs.hits.Load() != 1 || changed.Load() != 1 {
		t.Errorf("hits %d changed %d, want 1 and 1", fs.hits.Load(), changed.Load())
	}
}

func TestDownloadLocalSrcAndErrors(t *testing.T) {
	env, root := testEnv(t)
	src := filepath.Join(root, "bundle", "runc")
	mustWrite(t, src, "binary")
	converge(t, testDownload(), env, step.Args{"src": src, "dest": "runc/1.1/amd64/"}, env.WorkDir)
	if mustRead(t, filepath.Join(env.WorkDir, "runc/1.1/amd64/runc")) != "binary" {
		t.Error("content")
	}
	for _, bad := range []step.Args{
		{"url": "http://x/y", "dest": "a"},
		{"url": "ftp://x/y", "dest": "a", "sha256": strings.Repeat("a", 64)},
		{"url": "http://x/y", "dest": "a", "sha256": "abc"},
		{"dest": "a"},
		{"src": filepath.Join(root, "nope"), "dest": "a"},
	} {
		if _, err := runBuiltin(t.Context(), env, testDownload(), bad); err == nil {
			t.Errorf("%v: want error", bad)
		}
	}
}
