package flock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Another process's lock is seen, waited for (until the context ends), and
// gone as soon as that process is: no stale lock survives a killed holder.
func TestLockAcrossProcesses(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) to hold a lock from another process")
	}
	for _, kind := range []string{"file", "dir"} {
		t.Run(kind, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "lock")
			if kind == "dir" {
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// -o: the lock stays with flock(1), not with the sleep it starts.
			holder := exec.Command("flock", "-o", p, "sleep", "60")
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			defer holder.Process.Kill()
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			deadline := time.Now().Add(5 * time.Second)
			for !Held(f) {
				if time.Now().After(deadline) {
					t.Fatal("flock(1)'s lock is never seen")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if ok, err := TryLock(f); ok || err != nil {
				t.Fatalf("TryLock while held: %v %v", ok, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			if _, err := Lock(ctx, p); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Lock while held: %v", err)
			}
			// Killed, not released: the kernel drops the lock.
			waited := make(chan error, 1)
			go func() {
				release, err := Lock(context.Background(), p)
				if err == nil {
					release()
				}
				waited <- err
			}()
			time.Sleep(100 * time.Millisecond)
			holder.Process.Kill()
			holder.Wait()
			select {
			case err := <-waited:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the lock of a killed holder was not taken")
			}
			if Held(f) {
				t.Error("released lock still held")
			}
		})
	}
}

// Within one process, a second Lock waits for the first to be released
// (flock locks belong to open files, not to processes).
func TestLockWaitsForRelease(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		r2, err := Lock(context.Background(), p)
		if err != nil {
			t.Error(err)
		} else {
			r2()
		}
		got <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	release()
	if at := <-got; at.Before(released) {
		t.Error("the second lock was taken while the first was held")
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		t.Errorf("lock file: %v %v", st, err)
	}
}
