package api

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mensylisir/kubexm/bundle/bundletest"
)

// TestBundleInUseAcrossServers: two servers on one SQLite file and one data
// directory (two kubexm server processes) agree that a bundle is in use,
// whichever of them queued the job, and a delete through one racing a job
// through the other never leaves a queued job without its bundle.
func TestBundleInUseAcrossServers(t *testing.T) {
	dsn, dataDir := filepath.Join(t.TempDir(), "kubexm.db"), t.TempDir()
	a := newFixtureOn(t, dsn, dataDir, nil)
	b := newFixtureOn(t, dsn, dataDir, a)
	if code, body := a.call(t, "POST", "/api/v1/clusters", a.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	good := testBundle(t)
	sum := sha256.Sum256(good)
	hexSum := hex.EncodeToString(sum[:])
	upload := func() {
		t.Helper()
		if code, body := a.call(t, "POST", "/api/v1/clusters/c1/bundles", a.operator, string(good)); code != http.StatusCreated {
			t.Fatalf("upload: %d %s", code, body)
		}
	}
	queue := func(f *fixture) (int, string) {
		code, body := f.call(t, "POST", "/api/v1/jobs", f.operator, fmt.Sprintf(`{"cluster": "c1", "playbook": "create-cluster", "options": {"offline_bundle": %q}}`, hexSum))
		var acc struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(body, &acc)
		return code, acc.JobID
	}
	del := "/api/v1/clusters/c1/bundles/" + hexSum
	upload()
	code, id := queue(a)
	if code != http.StatusAccepted {
		t.Fatalf("queue through server a: %d", code)
	}
	code, body := b.call(t, "DELETE", del, b.operator, "")
	var conflict struct{ Error, JobID, Status string }
	_ = json.Unmarshal(body, &conflict)
	if code != http.StatusConflict || !strings.Contains(conflict.Error, "job "+id) || !strings.Contains(conflict.Error, "cluster c1") || conflict.Status != "queued" {
		t.Fatalf("delete through server b of the bundle server a's job uses: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "clusters", "c1", "bundle", hexSum)); err != nil {
		t.Fatalf("the refused delete removed the unpacked copy: %v", err)
	}
	if code, body := b.call(t, "POST", "/api/v1/jobs/"+id+"/cancel", b.operator, ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if code, body := b.call(t, "DELETE", del, b.operator, ""); code != http.StatusOK {
		t.Fatalf("delete once the job ended: %d %s", code, body)
	}
	if entries, _ := os.ReadDir(filepath.Join(dataDir, "clusters", "c1", "bundle")); len(entries) != 1 || entries[0].Name() != ".lock" {
		t.Errorf("left in the unpacked bundles' directory after the delete: %v", entries)
	}
	// The cancelled job names the deleted bundle: resuming it is refused.
	if code, body := a.call(t, "POST", "/api/v1/jobs/"+id+"/resume", a.operator, ""); code != http.StatusConflict || !strings.Contains(string(body), "no longer has") {
		t.Fatalf("resume of a job whose bundle was deleted: %d %s", code, body)
	}

	// A delete through b races a job through a: the job is queued with
	// its bundle there, or refused; never queued after the bundle went.
	outcomes := map[string]int{}
	for range 15 {
		upload()
		var wg sync.WaitGroup
		var qCode, dCode int
		var qID string
		wg.Add(2)
		go func() { defer wg.Done(); qCode, qID = queue(a) }()
		go func() { defer wg.Done(); dCode, _ = b.call(t, "DELETE", del, b.operator, "") }()
		wg.Wait()
		outcomes[fmt.Sprintf("job %d, delete %d", qCode, dCode)]++
		switch {
		case qCode == http.StatusAccepted && dCode == http.StatusConflict:
			if _, err := os.Stat(filepath.Join(dataDir, "clusters", "c1", "bundles", hexSum+".tar.gz")); err != nil {
				t.Fatalf("job %s queued, its bundle is gone: %v", qID, err)
			}
			if code, body := a.call(t, "POST", "/api/v1/jobs/"+qID+"/cancel", a.operator, ""); code != http.StatusAccepted {
				t.Fatalf("cancel: %d %s", code, body)
			}
		case qCode == http.StatusBadRequest && dCode == http.StatusOK:
		default:
			t.Fatalf("job %d (%s), delete %d: want one of them refused", qCode, qID, dCode)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestServiceUploadSpace: an upload that does not fit beside the uploads
// in progress is refused before its body is stored (issue 45: concurrent
// uploads each passed the free-space check); one of unknown length stops
// when the file system fills.
func TestServiceUploadSpace(t *testing.T) {
	f := newFixture(t)
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	var mu sync.Mutex
	free := uint64(uploadMargin + 3<<20)
	f.s.c.FreeSpace = func(string) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		return free, nil
	}
	url := f.srv.URL + "/api/v1/clusters/c1/bundles"
	post := func(body io.Reader, length int64) (int, string) {
		req, _ := http.NewRequest("POST", url, body)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+f.operator)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	// A 2 MiB upload in progress, its body held back.
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		code, _ := post(pr, 2<<20)
		first <- code
	}()
	if _, err := pw.Write([]byte{0x1f}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.s.uploadMu.Lock()
		r := f.s.reserved
		f.s.uploadMu.Unlock()
		if r > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first upload reserved nothing")
		}
	}
	if code, body := post(strings.NewReader(strings.Repeat("x", 2<<20)), 2<<20); code != http.StatusInsufficientStorage || !strings.Contains(body, "uploads in progress") {
		t.Errorf("a second 2 MiB upload into 3 MiB: %d %s", code, body)
	}
	pw.CloseWithError(errors.New("client gone"))
	<-first
	// The server's handler ends a moment after the client gave up.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.s.uploadMu.Lock()
		left := f.s.reserved
		f.s.uploadMu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved after the upload ended", left)
		}
	}
	if code, body := post(strings.NewReader(strings.Repeat("x", 2<<20)), 2<<20); code != http.StatusBadRequest {
		t.Errorf("2 MiB alone (not a bundle): %d %s", code, body)
	}
	// Unknown length: the file system fills after the first MiB.
	calls := 0
	f.s.c.FreeSpace = func(string) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls > 1 {
			return uploadMargin - 1, nil
		}
		return free, nil
	}
	if code, body := post(strings.NewReader(strings.Repeat("x", 3<<20)), -1); code != http.StatusInsufficientStorage || !strings.Contains(body, "full after") {
		t.Errorf("a chunked upload while the disk fills: %d %s", code, body)
	}
	if ents, _ := os.ReadDir(filepath.Join(f.s.c.DataDir, "clusters", "c1", "bundles")); len(ents) != 0 {
		t.Errorf("left in bundles/: %v", ents)
	}
}

// TestServiceBundleVerifiedBeforeUnpack: an uploaded bundle is checked
// whole (issue 45: a bundle was unpacked, and stored under its sha256,
// before its files' checksums were checked): a bundle whose file does not
// match its manifest, or a body whose sha256 is not the one the client
// gave, is refused with nothing unpacked or stored, not even for a while,
// and nothing is left behind.
func TestServiceBundleVerifiedBeforeUnpack(t *testing.T) {
	f := newFixture(t)
	if code, body := f.call(t, "POST", "/api/v1/clusters", f.operator, testCluster); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	workDir := filepath.Join(f.s.c.DataDir, "clusters", "c1")
	unpacked, stored := filepath.Join(workDir, "bundle"), filepath.Join(workDir, "bundles")
	for _, d := range []string{unpacked, stored} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Every file made in the two directories while the uploads run: only
	// the hidden upload itself may appear.
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	watched := map[int]string{}
	for _, d := range []string{unpacked, stored} {
		wd, err := unix.InotifyAddWatch(in, d, unix.IN_CREATE|unix.IN_MOVED_TO)
		if err != nil {
			t.Fatal(err)
		}
		watched[wd] = d
	}
	made := func() []string {
		var out []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(in, buf)
			if n <= 0 || err != nil {
				return out
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				if !strings.HasPrefix(name, ".upload-") {
					out = append(out, filepath.Join(watched[int(ev.Wd)], name))
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}

	good := testBundle(t)
	goodSum := sha256.Sum256(good)
	// The last byte of its one file changed: the sizes agree, the
	// manifest's sha256 is found wrong only once the file was read whole.
	src := filepath.Join(t.TempDir(), "good.tar.gz")
	if err := os.WriteFile(src, good, 0o600); err != nil {
		t.Fatal(err)
	}
	tampered, err := os.ReadFile(bundletest.Rewrite(t, src, func(h *tar.Header, data []byte) (*tar.Header, []byte) {
		if strings.HasSuffix(h.Name, "/kubelet") {
			data[len(data)-1] ^= 0xff
		}
		return h, data
	}))
	if err != nil {
		t.Fatal(err)
	}
	tamperedSum := sha256.Sum256(tampered)
	for _, c := range []struct {
		what, query, body, want string
	}{
		{"a file that does not match the manifest", "", string(tampered), "the manifest says"},
		{"the same, with its own sha256", "?sha256=" + hex.EncodeToString(tamperedSum[:]), string(tampered), "the manifest says"},
		{"a good bundle under another sha256", "?sha256=" + strings.Repeat("ab", 32), string(good), "the client gave " + strings.Repeat("ab", 32)},
		{"a malformed sha256", "?sha256=../x", string(good), "64 lower-case hex digits"},
	} {
		code, body := f.call(t, "POST", "/api/v1/clusters/c1/bundles"+c.query, f.operator, c.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) || !isJSONError(body) {
			t.Errorf("%s: %d %s; want 400 saying %q", c.what, code, body, c.want)
		}
		if m := made(); len(m) > 0 {
			t.Errorf("%s: made %v before it was refused", c.what, m)
		}
		for _, d := range []string{unpacked, stored} {
			if ents, _ := os.ReadDir(d); len(ents) > 0 {
				t.Errorf("%s: left in %s: %v", c.what, d, ents)
			}
		}
	}
	code, body := f.call(t, "POST", "/api/v1/clusters/c1/bundles?sha256="+hex.EncodeToString(goodSum[:]), f.operator, string(good))
	if code != http.StatusCreated {
		t.Fatalf("the good bundle with its sha256: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(stored, hex.EncodeToString(goodSum[:])+".tar.gz")); err != nil {
		t.Fatalf("the good bundle was not stored: %v", err)
	}
}
