package flock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// TestOpenRefusesPlantedFiles: a lock planted by another user as a symlink
// (issue 45: a root run truncated the target), a FIFO or a hard link of a
// file not the user's is refused, the target untouched; a symlink to a
// directory is still a directory lock.
func TestOpenRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		if f != nil {
			_ = f.Truncate(0)
			f.Close()
		}
		t.Errorf("a symlink as the lock: %v", err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "made-through-the-link"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dangling); err == nil {
		t.Error("a dangling symlink as the lock was opened")
	}
	if _, err := os.Lstat(filepath.Join(dir, "made-through-the-link")); err == nil {
		t.Error("Open created the file a dangling symlink points to")
	}
	if data, _ := os.ReadFile(target); string(data) != "keep me\n" {
		t.Errorf("the target was changed: %q", data)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fifo); err == nil {
		t.Error("a FIFO as the lock was opened")
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sub, filepath.Join(dir, "sublink")); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(filepath.Join(dir, "sublink")); err != nil {
		t.Errorf("a symlink to a directory: %v", err)
	} else {
		f.Close()
	}
	if os.Geteuid() == 0 {
		// A file of another user (root making the run: nobody's file).
		other := filepath.Join(dir, "other")
		if err := os.WriteFile(other, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("another user's file as the lock: %v", err)
		}
	}
}

// TestCheckPrivateDir: a work directory writable by others, or another
// user's, is refused; one of the user's, 0700 or 0755, is not.
func TestCheckPrivateDir(t *testing.T) {
	dir := t.TempDir()
	for mode, ok := range map[os.FileMode]bool{0o700: true, 0o755: true, 0o775: false, 0o777: false, 0o1777: false} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(dir); (err == nil) != ok {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(dir); err == nil || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("another user's directory: %v", err)
		}
		_ = os.Chown(dir, 0, 0)
	}
}
