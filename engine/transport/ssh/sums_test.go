package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// kxsum runs sumFunc's kxsum as the hosts do (with /bin/sh) and returns the
// sum it printed and its status.
func kxsum(t *testing.T, file, record string, ro ...string) (string, int) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", sumFunc+`kxsum "$1" "$2" "$3"`, "sh", file, record, strings.Join(ro, "")).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 64 {
		t.Fatalf("kxsum printed %q", out)
	}
	return string(out[:64]), 0
}

func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// The record saves reading a file only while the file is the one that was
// hashed: a byte changed in place (same size) is hashed again.
func TestSumRecord(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kubelet")
	record := filepath.Join(dir, "sums", "rec")
	content := []byte(strings.Repeat("binary ", 1000))
	if err := os.WriteFile(file, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if sum, st := kxsum(t, file, record); st != 0 || sum != hexSum(content) {
		t.Fatalf("fresh file: %q %d", sum, st)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Fatalf("a file changed less than 2 s ago was recorded (a write in the same tick would go unseen): %v", err)
	}
	time.Sleep(2100 * time.Millisecond)
	// A --check run (transport.ReadOnly) leaves the host as it is.
	if sum, st := kxsum(t, file, record, "ro"); st != 0 || sum != hexSum(content) {
		t.Fatalf("read-only: %q %d", sum, st)
	}
	if _, err := os.Stat(filepath.Dir(record)); !os.IsNotExist(err) {
		t.Fatalf("a read-only sum wrote on the host: %v", err)
	}
	if sum, st := kxsum(t, file, record); st != 0 || sum != hexSum(content) {
		t.Fatalf("settled file: %q %d", sum, st)
	}
	rec, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("settled file not recorded: %v", err)
	}
	if fi, err := os.Stat(filepath.Dir(record)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("record directory: %v %v", fi, err)
	}
	// A record that matches the file's stat is what the sum comes from: the
	// file is not read.
	lines := strings.SplitN(string(rec), "\n", 2)
	forged := strings.Repeat("a", 64)
	if err := os.WriteFile(record, []byte(lines[0]+"\n"+forged+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, _ := kxsum(t, file, record); sum != forged {
		t.Fatalf("the record was not used: %q", sum)
	}
	if sum, _ := kxsum(t, file, record, "ro"); sum != forged {
		t.Fatalf("a read-only sum did not use the record: %q", sum)
	}
	// One byte changed in place, size kept: ctime moves, the file is hashed.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("B"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	content[0] = 'B'
	if sum, st := kxsum(t, file, record); st != 0 || sum != hexSum(content) {
		t.Fatalf("changed file: %q %d, want the new content's sum", sum, st)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Fatalf("the stale record survived a change: %v", err)
	}
	// Without a record the file is hashed every time.
	if sum, st := kxsum(t, file, ""); st != 0 || sum != hexSum(content) {
		t.Fatalf("no record: %q %d", sum, st)
	}
	// No state directory (a host before create-cluster or after delete):
	// nothing is written.
	orphan := filepath.Join(dir, "no-state-dir", "sums", "rec")
	if sum, st := kxsum(t, file, orphan); st != 0 || sum != hexSum(content) {
		t.Fatalf("without a state directory: %q %d", sum, st)
	}
	time.Sleep(2100 * time.Millisecond)
	if sum, st := kxsum(t, file, orphan); st != 0 || sum != hexSum(content) {
		t.Fatalf("without a state directory: %q %d", sum, st)
	}
	if _, err := os.Stat(filepath.Join(dir, "no-state-dir")); !os.IsNotExist(err) {
		t.Fatalf("a record made the state directory: %v", err)
	}
	if _, st := kxsum(t, filepath.Join(dir, "absent"), record); st != 3 {
		t.Fatalf("absent file: status %d, want 3", st)
	}
	if _, st := kxsum(t, dir, record); st != 4 {
		t.Fatalf("directory: status %d, want 4", st)
	}
}

func TestSumRecordOnlyAsRoot(t *testing.T) {
	tr := &Transport{user: "admin", opts: Options{SumRecords: "/var/lib/kubexm/sums"}}
	if a := tr.sumArgs(transport.ReadOnly(context.Background()), "/x", true); len(a) != 3 || a[2] == "" {
		t.Errorf("a --check run's arguments %q do not say read-only", a)
	}
	if a := tr.sumArgs(context.Background(), "/x", true); len(a) != 3 || a[2] != "" {
		t.Errorf("arguments %q say read-only", a)
	}
	if r := tr.sumRecord("/usr/local/bin/kubelet", false); r != "" {
		t.Errorf("a command run as the login user admin got record %q", r)
	}
	r := tr.sumRecord("/usr/local/bin/kubelet", true)
	if want := "/var/lib/kubexm/sums/" + hexSum([]byte("/usr/local/bin/kubelet")); r != want {
		t.Errorf("record %q, want %q", r, want)
	}
	if r := (&Transport{user: "root"}).sumRecord("/x", false); r != "" {
		t.Errorf("records off, got %q", r)
	}
}

// kxmv runs recordFunc's kxmv as the hosts do.
func kxmv(t testing.TB, tmp, file, record, sum string) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", recordFunc+`kxmv "$1" "$2" "$3" "$4"`, "sh", tmp, file, record, sum).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("kxmv: %v %s", err, out)
	}
}

// A file put in place by kxmv has its sum recorded at once: the next read
// takes the sum from the record without reading the file, and a byte
// changed in place afterwards is found.
func TestInstallRecord(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bin", "kubelet")
	record := filepath.Join(dir, "sums", "rec")
	content := []byte(strings.Repeat("binary ", 1000))
	tmp := filepath.Join(dir, "kubelet.tmp")
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	// A sum other than the content's shows that the record is what a
	// read returns (kxmv is given the sum of what kubexm verified).
	forged := strings.Repeat("c", 64)
	start := time.Now()
	kxmv(t, tmp, file, record, forged)
	took := time.Since(start)
	if got, err := os.ReadFile(file); err != nil || string(got) != string(content) {
		t.Fatalf("not moved: %v", err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is still there: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(record)
	if err != nil {
		if st.Ctim.Nsec == 0 {
			t.Skipf("the file system has second timestamps: no record at install (%v)", err)
		}
		t.Fatalf("no record after the install: %v", err)
	}
	if !strings.HasSuffix(string(rec), "\n"+forged+"\n") {
		t.Fatalf("record %q", rec)
	}
	if fi, err := os.Stat(filepath.Dir(record)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("record directory: %v %v", fi, err)
	}
	// The record was written once the clock had passed the file's ctime by
	// a timer tick.
	if now := time.Now(); now.Sub(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)) < 10*time.Millisecond {
		t.Fatalf("recorded %s after the rename (took %s)", now.Sub(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)), took)
	}
	if sum, st := kxsum(t, file, record); st != 0 || sum != forged {
		t.Fatalf("the install's record was not used: %q %d", sum, st)
	}
	// One byte changed in place, size kept: found.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("B"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	content[0] = 'B'
	if sum, st := kxsum(t, file, record); st != 0 || sum != hexSum(content) {
		t.Fatalf("changed file: %q %d, want the new content's sum", sum, st)
	}
	// Without a record path (records off) kxmv only moves; no state
	// directory: nothing is written.
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		t.Fatal(err)
	}
	kxmv(t, tmp, file+"2", "", forged)
	orphan := filepath.Join(dir, "no-state-dir", "sums", "rec")
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		t.Fatal(err)
	}
	kxmv(t, tmp, file+"3", orphan, forged)
	if _, err := os.Stat(file + "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no-state-dir")); !os.IsNotExist(err) {
		t.Fatalf("a record made the state directory: %v", err)
	}
	// A directory at the target is not moved into, as rename(2) would not.
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", recordFunc+`kxmv "$1" "$2" "$3" "$4"`, "sh", tmp, dir, "", forged).CombinedOutput(); err == nil {
		t.Fatalf("kxmv onto a directory succeeded: %s", out)
	}
	// A failed move is an error, and records nothing.
	out, err := exec.Command("/bin/sh", "-c", recordFunc+`kxmv "$1" "$2" "$3" "$4"`, "sh", filepath.Join(dir, "absent"), file, record+"x", forged).CombinedOutput()
	if err == nil {
		t.Fatalf("kxmv of a missing file succeeded: %s", out)
	}
	if _, err := os.Stat(record + "x"); !os.IsNotExist(err) {
		t.Fatalf("a failed move left a record: %v", err)
	}
}

// BenchmarkRerunSum is what a re-run pays on a host for one 64 MiB binary
// that the install before it put in place: hashed (no record: what every
// file cost the first re-run after a create) against the record kxmv wrote
// at the install, and what kxmv itself adds to the install.
func BenchmarkRerunSum(b *testing.B) {
	dir := b.TempDir()
	content := make([]byte, 64<<20)
	for i := range content {
		content[i] = byte(i * 7)
	}
	sum := hexSum(content)
	file := filepath.Join(dir, "kube-apiserver")
	record := filepath.Join(dir, "sums", "rec")
	if err := os.WriteFile(file, content, 0o755); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, rec string) {
		for b.Loop() {
			out, err := exec.Command("/bin/sh", "-c", sumFunc+`kxsum "$1" "$2" "$3"`, "sh", file, rec, "ro").Output()
			if err != nil || string(out[:64]) != sum {
				b.Fatalf("kxsum: %v %q", err, out)
			}
		}
	}
	b.Run("hashed", func(b *testing.B) { run(b, "") })
	// The install's own cost does not depend on the size: a 1 MiB file.
	b.Run("install", func(b *testing.B) {
		small, tmp := filepath.Join(dir, "small"), filepath.Join(dir, "small.tmp")
		for b.Loop() {
			if err := os.WriteFile(tmp, content[:1<<20], 0o755); err != nil {
				b.Fatal(err)
			}
			kxmv(b, tmp, small, record+"-small", sum)
		}
	})
	kxmv(b, file, file+".installed", record, sum)
	file += ".installed"
	if _, err := os.Stat(record); err != nil {
		b.Skipf("no record (a file system with second timestamps?): %v", err)
	}
	b.Run("recorded", func(b *testing.B) { run(b, record) })
}

// kxsum's sum is OpenSSL's where the host has a working openssl and
// coreutils' where it has none or it fails: the same digest either way.
func TestSumWithoutOpenSSL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "blob")
	content := []byte("kubexm\n")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// An openssl that prints a wrong digest and fails, first in PATH.
	stub := "#!/bin/sh\necho 0000000000000000000000000000000000000000000000000000000000000000\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "openssl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{os.Getenv("PATH"), bin + ":" + os.Getenv("PATH")} {
		cmd := exec.Command("/bin/sh", "-c", sumFunc+`kxsum "$1" "" ""`, "sh", file)
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("PATH=%s: %v", path, err)
		}
		if len(out) < 64 || string(out[:64]) != hexSum(content) {
			t.Errorf("PATH=%s: kxsum printed %q, want %s first", path, out, hexSum(content))
		}
	}
}
