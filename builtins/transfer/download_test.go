package transfer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/builtins/onhost"
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
	env, _ := steptest.Env(t)
	sum := onhost.SHA256Hex(body)
	args := step.Args{"url": srv.URL + "/etcd-v3.5.tar.gz", "dest": "etcd/3.5/amd64/", "sha256": sum}
	res := steptest.Converge(t, testDownload(), env, args, env.WorkDir)
	dest := filepath.Join(env.WorkDir, "etcd/3.5/amd64/etcd-v3.5.tar.gz")
	if res.Data["dest"] != dest || steptest.MustRead(t, dest) != string(body) {
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
	env, _ := steptest.Env(t)
	sum := onhost.SHA256Hex(body)
	dest := filepath.Join(env.WorkDir, "f.bin")
	steptest.MustWrite(t, dest+".part", string(body[:1234]))
	fs.failures.Store(1)
	args := step.Args{"urls": []any{srv.URL + "/missing.tgz", srv.URL + "/f.bin"}, "dest": dest, "sha256": sum, "retries": 2}
	res := steptest.Run(t, testDownload(), env, args)
	if !res.Changed || res.Data["url"] != srv.URL+"/f.bin" || steptest.MustRead(t, dest) != string(body) {
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
	_, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args)
	if err == nil || !strings.Contains(err.Error(), "/missing.tgz: HTTP 404") || !strings.Contains(err.Error(), "127.0.0.1:1/x.tgz") {
		t.Fatalf("got %v", err)
	}
	// A wrong checksum is an error and leaves nothing behind.
	args = step.Args{"url": srv.URL + "/f.bin", "dest": filepath.Join(env.WorkDir, "h"), "sha256": strings.Repeat("0", 64), "retries": 1}
	if _, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args); err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
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
	env, _ := steptest.Env(t)
	args := step.Args{"url": srv.URL + "/f", "dest": "c/", "sha256": onhost.SHA256Hex(body)}
	var wg sync.WaitGroup
	changed := atomic.Int32{}
	for range 4 {
		wg.Go(func() {
			e := *env
			res, err := steptest.RunBuiltin(t.Context(), &e, testDownload(), args)
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
	env, root := steptest.Env(t)
	src := filepath.Join(root, "bundle", "runc")
	steptest.MustWrite(t, src, "binary")
	steptest.Converge(t, testDownload(), env, step.Args{"src": src, "dest": "runc/1.1/amd64/"}, env.WorkDir)
	if steptest.MustRead(t, filepath.Join(env.WorkDir, "runc/1.1/amd64/runc")) != "binary" {
		t.Error("content")
	}
	for _, bad := range []step.Args{
		{"url": "http://x/y", "dest": "a"},
		{"url": "ftp://x/y", "dest": "a", "sha256": strings.Repeat("a", 64)},
		{"url": "http://x/y", "dest": "a", "sha256": "abc"},
		{"dest": "a"},
		{"src": filepath.Join(root, "nope"), "dest": "a"},
	} {
		if _, err := steptest.RunBuiltin(t.Context(), env, testDownload(), bad); err == nil {
			t.Errorf("%v: want error", bad)
		}
	}
}

// sumsServer serves files by path and counts the requests of each.
type sumsServer struct {
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
}

func newSumsServer(t *testing.T, files map[string][]byte) (*sumsServer, string) {
	s := &sumsServer{files: files, hits: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *sumsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	b, ok := s.files[r.URL.Path]
	s.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/err/") {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/redirect/") {
		http.Redirect(w, r, strings.TrimPrefix(r.URL.Path, "/redirect"), http.StatusFound)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(b))
}

func (s *sumsServer) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[p]
}

func TestDownloadChecksumsFormats(t *testing.T) {
	etcd := []byte("etcd archive")
	kubelet := []byte("kubelet binary")
	s, url := newSumsServer(t, map[string][]byte{
		"/rel/etcd.tar.gz": etcd,
		// sha256sum format: other files, a directory and binary mode.
		"/rel/SHA256SUMS": []byte(onhost.SHA256Hex([]byte("x")) + "  other.tar.gz\n" + onhost.SHA256Hex(etcd) + " *dist/etcd.tar.gz\r\n"),
	})
	env, root := steptest.Env(t)
	args := step.Args{"url": url + "/rel/etcd.tar.gz", "checksums": []any{url + "/redirect/rel/SHA256SUMS"}, "dest": "etcd/1/amd64/"}
	res := steptest.Converge(t, testDownload(), env, args, env.WorkDir)
	if res.Data["sha256"] != onhost.SHA256Hex(etcd) || steptest.MustRead(t, filepath.Join(env.WorkDir, "etcd/1/amd64/etcd.tar.gz")) != string(etcd) {
		t.Fatalf("%+v", res)
	}
	// converge ran it four times (check, real, again, check): the file
	// itself was fetched once.
	if n := s.count("/rel/etcd.tar.gz"); n != 1 {
		t.Errorf("the file was fetched %d times, want 1", n)
	}

	// A file holding only the digest (dl.k8s.io's <file>.sha256), upper
	// case and without a newline, beside a local source.
	dir := filepath.Join(root, "release")
	steptest.MustWrite(t, filepath.Join(dir, "kubelet"), string(kubelet))
	steptest.MustWrite(t, filepath.Join(dir, "kubelet.sha256"), strings.ToUpper(onhost.SHA256Hex(kubelet)))
	args = step.Args{"src": filepath.Join(dir, "kubelet"), "checksums": []any{filepath.Join(dir, "kubelet.sha256")}, "dest": "kubernetes/1/amd64/"}
	res = steptest.Converge(t, testDownload(), env, args, env.WorkDir)
	if res.Data["sha256"] != onhost.SHA256Hex(kubelet) || steptest.MustRead(t, filepath.Join(env.WorkDir, "kubernetes/1/amd64/kubelet")) != string(kubelet) {
		t.Fatalf("%+v", res)
	}

	// A given sha256 wins: no checksums file is read.
	args = step.Args{"url": url + "/rel/etcd.tar.gz", "sha256": onhost.SHA256Hex(etcd), "checksums": []any{url + "/rel/NONE"}, "dest": "etcd/2/"}
	steptest.Run(t, testDownload(), env, args)
	if s.count("/rel/NONE") != 0 {
		t.Error("checksums read although sha256 was given")
	}
}

func TestDownloadChecksumsErrors(t *testing.T) {
	body := []byte("the file")
	env, root := steptest.Env(t)
	dir := filepath.Join(root, "bundle")
	steptest.MustWrite(t, filepath.Join(dir, "f"), string(body))
	steptest.MustWrite(t, filepath.Join(dir, "SHA256SUMS"), onhost.SHA256Hex(body)+"  g\n"+onhost.SHA256Hex(body)+"  f.orig\n")
	steptest.MustWrite(t, filepath.Join(dir, "WRONG"), strings.Repeat("0", 64)+"  f\n")
	src := filepath.Join(dir, "f")
	for _, c := range []struct {
		args step.Args
		want string
	}{
		// The file's entry is missing: each file read is named, then the hint.
		{step.Args{"src": src, "checksums": []any{filepath.Join(dir, "SHA256SUMS")}, "dest": "a/", "hint": "give the sum"},
			"download: no sha256 for f (" + dir + "/SHA256SUMS does not list it): give the sum"},
		{step.Args{"src": src, "checksums": []any{filepath.Join(dir, "NOPE"), filepath.Join(dir, "SHA256SUMS")}, "dest": "a/"},
			"no sha256 for f (" + dir + "/NOPE was not found; " + dir + "/SHA256SUMS does not list it)"},
		// The checksums file lists it, the file is not there.
		{step.Args{"src": filepath.Join(dir, "gone"), "sha256": onhost.SHA256Hex(body), "dest": "c/", "hint": "export a bundle"},
			"download: src " + dir + "/gone does not exist on the control machine: export a bundle"},
		{step.Args{"dest": "d/", "hint": "give mirrors"}, "give url/urls or src (one of them): give mirrors"},
		{step.Args{"src": src, "sha256": onhost.SHA256Hex(body), "dest": "e/", "extract": true}, "extract needs creates"},
	} {
		for _, check := range []bool{true, false} {
			env.Check = check
			_, err := steptest.RunBuiltin(t.Context(), env, testDownload(), c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("check=%v %v: got %v, want %q", check, c.args, err, c.want)
			}
		}
	}
	env.Check = false
	// A wrong sum: the copy is refused (check mode does not read the
	// source: it would report the download, and the real run fails).
	args := step.Args{"src": src, "checksums": []any{filepath.Join(dir, "WRONG")}, "dest": "b/"}
	if _, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args); err == nil || !strings.Contains(err.Error(), "sha256 mismatch: got "+onhost.SHA256Hex(body)) {
		t.Errorf("got %v", err)
	}
	if left := steptest.Snapshot(t, env.WorkDir); strings.Contains(left, " -") {
		t.Errorf("files left behind after the failures:\n%s", left)
	}
}

// TestDownloadMirrorOrder: the mirrors' checksums files are read in order
// and the first that lists the file gives the sum; later ones are not
// fetched. The file then comes from the first mirror that serves it.
func TestDownloadMirrorOrder(t *testing.T) {
	good, other := []byte("release v1"), []byte("something else")
	s, url := newSumsServer(t, map[string][]byte{
		"/m2/f.tgz":       good,
		"/m1/SHA256SUMS":  []byte(onhost.SHA256Hex(other) + "  g.tgz\n"),
		"/m2/SHA256SUMS":  []byte(onhost.SHA256Hex(good) + "  f.tgz\n"),
		"/m3/SHA256SUMS":  []byte(onhost.SHA256Hex(other) + "  f.tgz\n"),
		"/bad/SHA256SUMS": []byte(onhost.SHA256Hex(other) + "  f.tgz\n"),
	})
	env, _ := steptest.Env(t)
	args := step.Args{
		"urls":      []any{url + "/m1/f.tgz", url + "/m2/f.tgz", url + "/m3/f.tgz"},
		"checksums": []any{url + "/m0/SHA256SUMS", url + "/m1/SHA256SUMS", url + "/m2/SHA256SUMS", url + "/m3/SHA256SUMS"},
		"dest":      "c/",
		"retries":   1,
	}
	res := steptest.Run(t, testDownload(), env, args)
	if !res.Changed || res.Data["url"] != url+"/m2/f.tgz" || res.Data["sha256"] != onhost.SHA256Hex(good) {
		t.Fatalf("%+v", res)
	}
	if s.count("/m0/SHA256SUMS") != 1 || s.count("/m1/SHA256SUMS") != 1 || s.count("/m3/SHA256SUMS") != 0 || s.count("/m3/f.tgz") != 0 {
		t.Errorf("requests %v: want m0 and m1's sums read once, nothing of m3", s.hits)
	}
	// The first match wins even when it is wrong: the file from every
	// mirror is then a mismatch, named per URL.
	args["checksums"] = []any{url + "/bad/SHA256SUMS", url + "/m2/SHA256SUMS"}
	args["dest"] = "d/"
	if _, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args); err == nil || !strings.Contains(err.Error(), url+"/m2/f.tgz: sha256 mismatch") {
		t.Errorf("got %v", err)
	}
	// A server error is tried retries times; a 404 once.
	args = step.Args{"urls": []any{url + "/m2/f.tgz"}, "checksums": []any{url + "/m4/SHA256SUMS", url + "/err/SHA256SUMS"}, "dest": "e/", "retries": 3}
	_, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args)
	if err == nil || !strings.Contains(err.Error(), url+"/m4/SHA256SUMS was not found (HTTP 404 Not Found); "+url+"/err/SHA256SUMS: HTTP 503") ||
		s.count("/m4/SHA256SUMS") != 1 || s.count("/err/SHA256SUMS") != 3 {
		t.Errorf("got %v after %d and %d requests", err, s.count("/m4/SHA256SUMS"), s.count("/err/SHA256SUMS"))
	}
}

type tarMember struct {
	name, body, link string
	mode             int64
	dir              bool
}

func writeTarGz(t *testing.T, p string, members []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Mode: m.mode, Size: int64(len(m.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(1700000000, 0)}
		switch {
		case m.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case m.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, m.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(m.body))
		}
	}
	tw.Close()
	gz.Close()
	steptest.MustWrite(t, p, buf.String())
	return buf.Bytes()
}

func TestDownloadExtract(t *testing.T) {
	env, root := steptest.Env(t)
	src := filepath.Join(root, "rel", "etcd-v1.tar.gz")
	v1 := writeTarGz(t, src, []tarMember{
		{name: "etcd-v1/", dir: true, mode: 0o755},
		{name: "etcd-v1/etcd", body: "etcd 1", mode: 0o755},
		{name: "etcd-v1/etcdctl", body: "etcdctl 1", mode: 0o755},
		{name: "etcd-v1/README.md", body: "readme", mode: 0o644},
		{name: "etcd-v1/Documentation/dev.md", body: "deep", mode: 0o644},
		{name: "etcd-v1/etcd-link", link: "etcd"},
		{name: "../escape", body: "no", mode: 0o644},
	})
	args := step.Args{"src": src, "sha256": onhost.SHA256Hex(v1), "dest": "etcd/v1/amd64/", "extract": true, "strip_components": 1, "creates": "etcd"}
	dir := filepath.Join(env.WorkDir, "etcd/v1/amd64")
	res := steptest.Converge(t, testDownload(), env, args, env.WorkDir)
	if res.Data["extracted"] != 3 {
		t.Errorf("%+v", res)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "README.md etcd etcd-v1.tar.gz etcdctl" {
		t.Errorf("unpacked %v: want the top-level regular files only, no temporary files", names)
	}
	if fi, err := os.Stat(filepath.Join(dir, "etcd")); err != nil || fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("etcd: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(root, "escape")); !os.IsNotExist(err) {
		t.Error("a ../ member was written outside the directory")
	}

	// creates missing: unpacked again without fetching.
	os.Remove(filepath.Join(dir, "etcd"))
	env.Check = true
	res = steptest.Run(t, testDownload(), env, args)
	env.Check = false
	if !res.Changed || !strings.Contains(res.Msg, "would extract") {
		t.Errorf("check: %+v", res)
	}
	if res = steptest.Run(t, testDownload(), env, args); !res.Changed || steptest.MustRead(t, filepath.Join(dir, "etcd")) != "etcd 1" {
		t.Errorf("%+v", res)
	}

	// Another archive under the same name (a corrupt copy replaced): it is
	// unpacked again although creates exists.
	v2 := writeTarGz(t, src, []tarMember{{name: "etcd-v1/etcd", body: "etcd 2", mode: 0o755}, {name: "etcd-v1/etcdctl", body: "etcdctl 2", mode: 0o755}})
	args["sha256"] = onhost.SHA256Hex(v2)
	if res = steptest.Run(t, testDownload(), env, args); !res.Changed || steptest.MustRead(t, filepath.Join(dir, "etcdctl")) != "etcdctl 2" {
		t.Errorf("%+v", res)
	}

	// A creates the archive does not hold (a wrong strip_components).
	args = step.Args{"src": src, "sha256": onhost.SHA256Hex(v2), "dest": "other/", "extract": true, "creates": "etcd"}
	if _, err := steptest.RunBuiltin(t.Context(), env, testDownload(), args); err == nil || !strings.Contains(err.Error(), "extracted 0 files") || !strings.Contains(err.Error(), "strip_components=0") {
		t.Errorf("got %v", err)
	}
}

// TestDownloadExtractSharedAcrossHosts: hosts of one architecture running
// the task at once fetch and unpack once; the others find it done.
func TestDownloadExtractSharedAcrossHosts(t *testing.T) {
	env, root := steptest.Env(t)
	src := filepath.Join(root, "cni.tgz")
	// As the CNI plugins' archive: members under "./".
	arc := writeTarGz(t, src, []tarMember{{name: "./", dir: true, mode: 0o755}, {name: "./bridge", body: strings.Repeat("b", 1<<20), mode: 0o755}, {name: "./host-local", body: "h", mode: 0o755}})
	steptest.MustWrite(t, filepath.Join(root, "cni.tgz.sha256"), onhost.SHA256Hex(arc)+"  cni.tgz\n")
	args := step.Args{"src": src, "checksums": []any{filepath.Join(root, "cni.tgz.sha256")}, "dest": "cni/1/amd64/", "extract": true, "strip_components": 1, "creates": "bridge"}
	var wg sync.WaitGroup
	changed := atomic.Int32{}
	for range 4 {
		wg.Go(func() {
			e := *env
			res, err := steptest.RunBuiltin(t.Context(), &e, testDownload(), args)
			if err != nil {
				t.Error(err)
			}
			if res.Changed {
				changed.Add(1)
			}
		})
	}
	wg.Wait()
	if changed.Load() != 1 {
		t.Errorf("changed on %d hosts, want 1", changed.Load())
	}
	if steptest.MustRead(t, filepath.Join(env.WorkDir, "cni/1/amd64/host-local")) != "h" {
		t.Error("not unpacked")
	}
}

func TestFindSum(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct{ text, want string }{
		{sum + "  f", sum},
		{sum + " *f\n", sum},
		{sum + "\tdir/sub/f\r\n", sum},
		{"x\n" + strings.ToUpper(sum) + "  ./f  \n", sum},
		{sum + "  f.sig", ""},
		{sum + "  xf", ""},
		{sum + "  a b/f", ""},
		{sum + "f", ""},
		{"  " + strings.ToUpper(sum), sum}, // a bare digest
		{sum + "\n" + sum, ""},
		{"", ""},
	} {
		if got := findSum(c.text, "f"); got != c.want {
			t.Errorf("findSum(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestTopName(t *testing.T) {
	for _, c := range []struct {
		member string
		strip  int
		want   string
	}{
		{"etcd-v1/etcd", 1, "etcd"},
		{"etcd-v1/etcd", 0, ""},
		{"./bridge", 1, "bridge"},
		{"./bridge", 0, "bridge"},
		{"././bridge", 1, "bridge"},
		{"bin/sub/x", 1, ""},
		{"a/../x", 1, ""},
		{"../x", 1, ""},
		{"/abs", 0, "abs"},
		{"x", 1, ""},
	} {
		got, ok := topName(c.member, c.strip)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("topName(%q, %d) = %q %v, want %q", c.member, c.strip, got, ok, c.want)
		}
	}
}
