//go:build integration

package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/facts"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

func TestKeyAuthAndCommand(t *testing.T) {
	tr := dialT(t, server.keyHost("n1"), server.opts(t))
	ctx := context.Background()
	res, err := tr.Run(ctx, transport.Command{
		Argv:  []string{"sh", "-c", `printf '%s|%s|%s|' "$1" "$GREETING" "$(pwd)"; cat; echo oops >&2; exit 7`, "sh", "it's a \"quoted\" $arg"},
		Env:   map[string]string{"GREETING": "hello world"},
		Dir:   "/tmp",
		Stdin: strings.NewReader("from stdin"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `it's a "quoted" $arg|hello world|/tmp|from stdin`
	root := dialT(t, server.rootHost("root"), server.opts(t))
	if res, err := root.Run(ctx, transport.Command{Argv: []string{"id", "-u"}, Become: true}); err != nil || string(res.Stdout) != "0\n" {
		t.Fatalf("root: %v %q", err, res.Stdout)
	}
	if string(res.Stdout) != want || strings.TrimSpace(string(res.Stderr)) != "oops" || res.ExitCode != 7 {
		t.Fatalf("got stdout %q stderr %q exit %d, want %q oops 7", res.Stdout, res.Stderr, res.ExitCode, want)
	}
}

func TestEncryptedKey(t *testing.T) {
	h := server.keyHost("enc")
	h.PrivateKeyPath, h.Passphrase = server.encKey, "pass phrase"
	tr := dialT(t, h, server.opts(t))
	res, err := tr.Run(context.Background(), transport.Command{Argv: []string{"id", "-un"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != testUser {
		t.Fatalf("id: %v %q", err, res.Stdout)
	}
	h.Passphrase = "wrong"
	_, err = Dial(context.Background(), h, server.opts(t))
	if err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Fatalf("wrong passphrase: got %v", err)
	}
}

func TestPasswordAuthAndSudo(t *testing.T) {
	tr := dialT(t, server.userHost(), server.opts(t))
	ctx := context.Background()
	res, err := tr.Run(ctx, transport.Command{Argv: []string{"id", "-un"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != testUser {
		t.Fatalf("whoami: %v %q", err, res.Stdout)
	}
	// The password goes to sudo, the stdin to the command, never mixed.
	res, err = tr.Run(ctx, transport.Command{Script: `id -u; cat`, Become: true, Stdin: strings.NewReader("payload")})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "0\npayload" || res.ExitCode != 0 {
		t.Fatalf("sudo: got %q exit %d stderr %q", res.Stdout, res.ExitCode, res.Stderr)
	}
	if bytes.Contains(res.Stderr, []byte(tr.prompt)) || bytes.Contains(res.Stdout, []byte(testPassword)) {
		t.Fatalf("sudo prompt or password leaked: %q %q", res.Stdout, res.Stderr)
	}
	// Files through sudo land owned by root with the asked mode.
	dst := "/root/kxtest-dir/sub/file.txt"
	defer os.RemoveAll("/root/kxtest-dir")
	if err := tr.Put(ctx, strings.NewReader("secret"), dst, transport.PutOptions{Mode: 0o600, Owner: "nobody", Become: true}); err != nil {
		t.Fatal(err)
	}
	fi, err := tr.Stat(ctx, dst, true)
	if err != nil || !fi.Exists || fi.Mode != 0o600 || fi.Owner != "nobody" || fi.Group != "root" || fi.Size != 6 {
		t.Fatalf("stat after sudo put: %+v %v", fi, err)
	}
	var buf bytes.Buffer
	if err := tr.Get(ctx, dst, &buf, true); err != nil || buf.String() != "secret" {
		t.Fatalf("get via sudo: %v %q", err, buf.String())
	}
	sum, err := tr.Sha256(ctx, dst, true)
	if err != nil || sum != hexSum([]byte("secret")) {
		t.Fatalf("sha256 via sudo: %v %q", err, sum)
	}

	// No password needed (NOPASSWD for nobody): nothing is written to sudo
	// and the stdin reaches the command intact.
	h := server.keyHost("nopasswd")
	res, err = dialT(t, h, server.opts(t)).Run(ctx, transport.Command{Script: "id -un; cat", Become: true, BecomeUser: "nobody", Stdin: strings.NewReader("in")})
	if err != nil || string(res.Stdout) != "nobody\nin" {
		t.Fatalf("NOPASSWD sudo: %v %q %q", err, res.Stdout, res.Stderr)
	}

	h = server.userHost()
	h.BecomePassword = "not-the-password"
	bad := dialT(t, h, server.opts(t))
	_, err = bad.Run(ctx, transport.Command{Argv: []string{"id"}, Become: true})
	var be *transport.BecomeError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "incorrect password") {
		t.Fatalf("wrong become password: got %v", err)
	}
	t.Logf("wrong password error: %v", err)

	h = server.userHost()
	h.PrivateKeyPath, h.Password = server.key, ""
	nopw := dialT(t, h, server.opts(t))
	_, err = nopw.Run(ctx, transport.Command{Argv: []string{"id"}, Become: true})
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "no become password") {
		t.Fatalf("missing become password: got %v", err)
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	h := server.userHost()
	h.Password = "nope"
	_, err := Dial(context.Background(), h, server.opts(t))
	var de *DialError
	if !errors.As(err, &de) || de.Cause != CauseAuth {
		t.Fatalf("got %v, want auth refused", err)
	}
	t.Logf("%v", err)
}

func TestHostKeys(t *testing.T) {
	o := server.opts(t)
	tr := dialT(t, server.rootHost("hk"), o)
	tr.Close()
	line, err := os.ReadFile(o.KnownHostsFile)
	if err != nil || !strings.Contains(string(line), fmt.Sprintf("[127.0.0.1]:%d", server.port)) {
		t.Fatalf("accept-new did not record the key: %v %q", err, line)
	}
	// Strict with the recorded key: fine.
	o.HostKeyChecking = Strict
	dialT(t, server.rootHost("hk"), o).Close()
	// Strict without: refused.
	so := server.opts(t)
	so.HostKeyChecking = Strict
	_, err = Dial(context.Background(), server.rootHost("hk"), so)
	var de *DialError
	if !errors.As(err, &de) || de.Cause != CauseHostKeyUnknown {
		t.Fatalf("strict unknown: got %v", err)
	}
	// A different key recorded for the address: refused under every policy.
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	pub, _ := os.ReadFile(other + ".pub")
	f := strings.Fields(string(pub))
	changed := fmt.Sprintf("[127.0.0.1]:%d %s %s\n", server.port, f[0], f[1])
	for _, policy := range []HostKeyChecking{Strict, AcceptNew, Off} {
		co := server.opts(t)
		co.HostKeyChecking = policy
		os.WriteFile(co.KnownHostsFile, []byte(changed), 0o600)
		_, err := Dial(context.Background(), server.rootHost("hk"), co)
		if !errors.As(err, &de) || de.Cause != CauseHostKeyChanged {
			t.Fatalf("%s: changed key: got %v", policy, err)
		}
		if policy == Strict {
			t.Logf("%v", err)
		}
	}
}

func TestConnectErrors(t *testing.T) {
	h := server.rootHost("dead")
	h.Port = 1 // nothing listens there
	_, err := Dial(context.Background(), h, server.opts(t))
	var de *DialError
	if !errors.As(err, &de) || de.Cause != CauseRefused || !strings.Contains(err.Error(), "hint:") || !strings.Contains(err.Error(), "dead") {
		t.Fatalf("got %v", err)
	}
	t.Logf("%v", err)
}

// pgrepGone waits until no process matches pattern.
func pgrepGone(t *testing.T, pattern string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		if exec.Command("pgrep", "-f", pattern).Run() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := exec.Command("pgrep", "-af", pattern).Output()
	t.Fatalf("still running after cancel: %s", out)
}

func TestCancelKillsRemoteProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		host *inventory.Host
		cmd  transport.Command
	}{
		{"argv", server.keyHost("c1"), transport.Command{Argv: []string{"sleep", "600.101"}}},
		{"script-child", server.keyHost("c2"), transport.Command{Script: "sleep 600.102; echo done"}},
		{"sudo", server.userHost(), transport.Command{Script: "sleep 600.103; echo done", Become: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := dialT(t, tc.host, server.opts(t))
			pattern := "sleep 600.10"
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			_, err := tr.Run(ctx, tc.cmd)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want canceled", err)
			}
			if exec.Command("pgrep", "-f", pattern).Run() == nil {
				t.Logf("a process still matched right after Run returned")
			}
			pgrepGone(t, pattern)
			t.Logf("cancel returned after %s", time.Since(start).Round(time.Millisecond))
		})
	}
	tr := dialT(t, server.keyHost("to"), server.opts(t))
	_, err := tr.Run(context.Background(), transport.Command{Argv: []string{"sleep", "600.201"}, Timeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("timeout: got %v", err)
	}
	pgrepGone(t, "sleep 600.201")
}

func TestPutFileSkipsByChecksum(t *testing.T) {
	const size = 200 << 20
	src := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := hex.EncodeToString(h.Sum(nil))
	dstDir := userDir(t)
	dst := filepath.Join(dstDir, "a", "b", "big.bin")

	tr := dialT(t, server.keyHost("up"), server.opts(t))
	ctx := context.Background()
	opts := transport.PutOptions{Mode: 0o640}
	start := time.Now()
	var changed bool
	upPeak := peakHeap(func() { changed, err = tr.PutFile(ctx, src, dst, opts) })
	first := time.Since(start)
	if err != nil || !changed {
		t.Fatalf("first upload: changed=%v err=%v", changed, err)
	}
	// Streamed: the file never sits in memory.
	if upPeak > 64<<20 {
		t.Errorf("the 200 MiB upload took the heap to %d MiB; it must stream", upPeak>>20)
	}
	start = time.Now()
	changed, err = tr.PutFile(ctx, src, dst, opts)
	second := time.Since(start)
	if err != nil || changed {
		t.Fatalf("second upload: changed=%v err=%v", changed, err)
	}
	t.Logf("200 MiB PutFile: first %s (%.0f MiB/s), second (checksum match, skipped) %s", first.Round(time.Millisecond),
		float64(size>>20)/first.Seconds(), second.Round(time.Millisecond))
	got, err := tr.Sha256(ctx, dst, false)
	if err != nil || got != want {
		t.Fatalf("remote sum %q %v, want %q", got, err, want)
	}
	fi, err := tr.Stat(ctx, dst, false)
	if err != nil || fi.Mode != 0o640 || fi.Owner != testUser || fi.Size != size {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	// Only the mode differs: fixed without a transfer.
	opts.Mode = 0o600
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || !changed {
		t.Fatalf("mode change: %v %v", changed, err)
	}
	if fi, _ := tr.Stat(ctx, dst, false); fi.Mode != 0o600 {
		t.Fatalf("mode not fixed: %v", fi.Mode)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Fatalf("temp files left beside the target: %v", entries)
	}
	var sink countWriter
	downPeak := peakHeap(func() { err = tr.Get(ctx, dst, &sink, false) })
	if err != nil || int64(sink) != size {
		t.Fatalf("get: %v, %d bytes", err, sink)
	}
	if downPeak > 64<<20 {
		t.Errorf("the 200 MiB download took the heap to %d MiB; it must stream", downPeak>>20)
	}
	t.Logf("peak heap: 200 MiB upload %d MiB, download %d MiB", upPeak>>20, downPeak>>20)
	missing, err := tr.Sha256(ctx, dst+".none", false)
	if err != nil || missing != "" {
		t.Fatalf("sha256 of a missing file: %q %v", missing, err)
	}
	if fi, err := tr.Stat(ctx, dst+".none", false); err != nil || fi.Exists {
		t.Fatalf("stat of a missing file: %+v %v", fi, err)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

func TestParallelSessionsQueue(t *testing.T) {
	o := server.opts(t)
	tr := dialT(t, server.keyHost("par"), o)
	dir := userDir(t)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	start := time.Now()
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each command marks itself present on the host; the peak count
			// is what the server saw at once.
			script := fmt.Sprintf(`touch %[1]s/%[2]d; ls %[1]s | wc -l; sleep 0.2; rm %[1]s/%[2]d`, dir, i)
			res, err := tr.Run(context.Background(), transport.Command{Script: script})
			if err != nil || res.ExitCode != 0 {
				errs <- fmt.Errorf("%d: %v %d %s", i, err, res.ExitCode, res.Stderr)
				return
			}
			var n int32
			fmt.Sscan(string(res.Stdout), &n)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			running.Add(1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(start)
	t.Logf("50 sessions over one connection: %s, peak concurrent on the host %d", elapsed.Round(time.Millisecond), peak.Load())
	if peak.Load() > int32(cap(tr.cmdSem)) || peak.Load() < 2 {
		t.Fatalf("peak %d, want 2..%d", peak.Load(), cap(tr.cmdSem))
	}
}

func TestReconnect(t *testing.T) {
	var mu sync.Mutex
	var seen []ConnEventKind
	o := server.opts(t)
	o.Observe = func(e ConnEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Host == "re" {
			seen = append(seen, e.Kind)
		}
	}
	tr := dialT(t, server.keyHost("re"), o)
	ctx := context.Background()
	tr.mu.Lock()
	old := tr.cur
	tr.mu.Unlock()
	old.client.Close() // the connection drops
	res, err := tr.Run(ctx, transport.Command{Argv: []string{"echo", "back"}})
	if err != nil || string(res.Stdout) != "back\n" {
		t.Fatalf("after drop: %v %q", err, res.Stdout)
	}
	if tr.cur == old {
		t.Fatal("no new connection")
	}
	// SFTP comes back too.
	if err := tr.Put(ctx, strings.NewReader("x"), filepath.Join(userDir(t), "f"), transport.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Options.Observe heard both dials and, once closed, both closes.
	tr.Close()
	mu.Lock()
	defer mu.Unlock()
	if want := []ConnEventKind{ConnDialed, ConnClosed, ConnDialed, ConnClosed}; !slices.Equal(seen, want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
}

func TestBastion(t *testing.T) {
	h := server.rootHost("behind")
	h.Bastion = &inventory.Bastion{Address: "127.0.0.1", Port: server.port, User: "root", PrivateKeyPath: server.key}
	tr := dialT(t, h, server.opts(t))
	res, err := tr.Run(context.Background(), transport.Command{Argv: []string{"echo", "via bastion"}})
	if err != nil || string(res.Stdout) != "via bastion\n" {
		t.Fatalf("%v %q", err, res.Stdout)
	}
}

func TestOutputCap(t *testing.T) {
	o := server.opts(t)
	o.OutputCap = 1000
	tr := dialT(t, server.keyHost("cap"), o)
	var all bytes.Buffer
	res, err := tr.Run(context.Background(), transport.Command{Script: "head -c 5000 /dev/zero", Stdout: &all})
	if err != nil || !res.Truncated || len(res.Stdout) != 1000 || all.Len() != 5000 {
		t.Fatalf("truncated=%v captured=%d streamed=%d err=%v", res.Truncated, len(res.Stdout), all.Len(), err)
	}
}

func TestFactsOverSSH(t *testing.T) {
	tr := dialT(t, server.keyHost("facts"), server.opts(t))
	f, err := facts.Gather(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if f["user"] != testUser || f["is_root"] != false || f["os_id"] == "" || f["cpus"].(int) < 1 {
		t.Fatalf("facts %v", f)
	}
	t.Logf("clock offset %.2f ms ± %.2f", f["clock_offset_ms"], f["clock_uncertainty_ms"])
}

// peakHeap runs f and returns the largest heap in use seen while it ran,
// sampled every 5 ms.
func peakHeap(f func()) uint64 {
	runtime.GC()
	done := make(chan struct{})
	var peak uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak
}

// An upload is never readable by others while it is being written: the
// temporary file beside the target is 0600 from its creation on, and gets
// its final mode only when complete.
func TestUploadNotWorldReadableWhileWritten(t *testing.T) {
	tr := dialT(t, server.keyHost("mode"), server.opts(t))
	dir := userDir(t)
	dst := filepath.Join(dir, "secret.conf")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- tr.Put(context.Background(), pr, dst, transport.PutOptions{Mode: 0o644}) }()
	if _, err := pw.Write([]byte("password = hunter2\n")); err != nil {
		t.Fatal(err)
	}
	// The first bytes have reached the temporary file once it has a size.
	var tmp string
	deadline := time.Now().Add(10 * time.Second)
	for tmp == "" && time.Now().Before(deadline) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".secret.conf.kubexm-") {
				tmp = filepath.Join(dir, e.Name())
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tmp == "" {
		t.Fatal("no temporary file appeared beside the target")
	}
	st, err := os.Stat(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("temporary file %s is %v while written; want no access for group and others", tmp, st.Mode().Perm())
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("final file: %v %v, want 0644", st.Mode(), err)
	}
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	out, _ := exec.Command("ps", "-e", "-o", "pid=,ppid=").Output()
	children := map[int][]int{}
	for _, l := range strings.Split(string(out), "\n") {
		var p, pp int
		if _, err := fmt.Sscan(l, &p, &pp); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var all []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			all = append(all, c)
			walk(c)
		}
	}
	walk(pid)
	return all
}

// Cancelling a command over a connection that stopped answering returns
// within a bounded time and says the command may still be running.
func TestCancelOverStalledConnection(t *testing.T) {
	tr := dialT(t, server.keyHost("stall"), server.opts(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tr.Run(ctx, transport.Command{Argv: []string{"sleep", "600.301"}})
		done <- err
	}()
	time.Sleep(time.Second)
	// Freeze every sshd process serving a connection (not the listener):
	// the TCP connection stays open and nothing answers.
	frozen := descendants(server.cmd.Process.Pid)
	for _, p := range frozen {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range frozen {
			syscall.Kill(p, syscall.SIGCONT)
		}
		exec.Command("pkill", "-f", "sleep 600.301").Run()
	}()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		el := time.Since(start)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "may still be running") {
			t.Errorf("err = %v", err)
		}
		if el > stopWait+3*time.Second {
			t.Errorf("cancel took %s", el)
		}
		t.Logf("cancel over a stalled connection returned after %s: %v", el.Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("cancel over a stalled connection did not return within 30 s")
	}
}

// TestPutFileRecordsTheSum: a file of 1 MiB or more that PutFile sends is
// recorded on the host with the sum of what was sent, logged in as root and
// through sudo, so the next read does not hash it; a byte changed
// afterwards is still found. A smaller file is left to the next read.
func TestPutFileRecordsTheSum(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		host   *inventory.Host
		become bool
	}{{"root", server.rootHost("rec"), false}, {"sudo", server.userHost(), true}} {
		t.Run(c.name, func(t *testing.T) {
			o := server.opts(t)
			o.SumRecords = filepath.Join(t.TempDir(), "sums")
			tr := dialT(t, c.host, o)
			dir := t.TempDir()
			data := make([]byte, 2<<20)
			rand.Read(data)
			big, small := filepath.Join(dir, "big"), filepath.Join(dir, "small")
			if err := os.WriteFile(big, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(small, data[:4096], 0o644); err != nil {
				t.Fatal(err)
			}
			dstDir := filepath.Join("/var/tmp", "kxrec-"+c.name)
			defer os.RemoveAll(dstDir)
			opts := transport.PutOptions{Mode: 0o755, Become: c.become}
			for _, f := range []string{big, small} {
				if changed, err := tr.PutFile(ctx, f, filepath.Join(dstDir, filepath.Base(f)), opts); err != nil || !changed {
					t.Fatalf("PutFile %s: %v %v", f, changed, err)
				}
			}
			want := hexSum(data)
			rec := tr.sumRecord(filepath.Join(dstDir, "big"), c.become)
			b, err := os.ReadFile(rec)
			if err != nil || !strings.HasSuffix(string(b), "\n"+want+"\n") {
				t.Fatalf("record of the sent file: %q %v", b, err)
			}
			if _, err := os.Stat(tr.sumRecord(filepath.Join(dstDir, "small"), c.become)); !os.IsNotExist(err) {
				t.Errorf("a 4 KiB file was recorded at the install: %v", err)
			}
			// The next read comes from the record (a forged sum shows it).
			lines := strings.SplitN(string(b), "\n", 2)
			forged := strings.Repeat("d", 64)
			if err := os.WriteFile(rec, []byte(lines[0]+"\n"+forged+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := tr.Sha256(ctx, filepath.Join(dstDir, "big"), c.become); err != nil || got != forged {
				t.Fatalf("sum after the install: %q %v, want the record's", got, err)
			}
			f, err := os.OpenFile(filepath.Join(dstDir, "big"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			data[100] ^= 0xff
			if _, err := f.WriteAt(data[100:101], 100); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got, err := tr.Sha256(ctx, filepath.Join(dstDir, "big"), c.become); err != nil || got != hexSum(data) {
				t.Fatalf("a byte changed after the install: sum %q %v, want the new content's", got, err)
			}
			entries, _ := os.ReadDir(dstDir)
			if len(entries) != 2 {
				t.Errorf("temporary files left beside the targets: %v", entries)
			}
		})
	}
}
