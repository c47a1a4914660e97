package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A second run on the same work dir is refused with the holder's pid, host
// and start time; a lock file left by a dead run does not block.
func TestWorkDirLock(t *testing.T) {
	work := filepath.Join(t.TempDir(), "c1")
	l, err := LockWorkDir(work, "play create-cluster")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = LockWorkDir(work, "play delete")
	for _, want := range []string{"in use by another kubexm run", "pid " + strconv.Itoa(os.Getpid()), "on " + host, "since 20", "play create-cluster"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("second lock: %v, want it to say %q", err, want)
		}
	}
	l.Release()
	l2, err := LockWorkDir(work, "play delete")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()

	// A run killed with SIGKILL leaves its holder record behind, but not
	// the flock: the next run takes over.
	stale, _ := json.Marshal(lockHolder{PID: 1 << 22, Host: host, Start: "2020-01-01T00:00:00Z", Command: "play create-cluster"})
	if err := os.WriteFile(filepath.Join(work, "lock"), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	l3, err := LockWorkDir(work, "play create-cluster")
	if err != nil {
		t.Fatalf("stale lock of a dead run blocked: %v", err)
	}
	l3.Release()
}

// A work directory others may write could hold a planted lock (a link to
// a root-owned file a root run would truncate): refused before any use.
func TestLockWorkDirRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if l, err := LockWorkDir(dir, "play x"); err == nil {
		l.Release()
		t.Fatal("a work directory writable by others was locked")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := LockWorkDir(dir, "play x")
	if err != nil {
		t.Fatalf("a private work directory: %v", err)
	}
	l.Release()
}
