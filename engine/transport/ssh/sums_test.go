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
