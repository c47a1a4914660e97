// Package flock is kubexm's one advisory lock on the control machine: an
// flock(2) on a file or a directory, which the kernel drops when its holder
// dies, however it dies, so a lock is never left behind by a killed run and
// no stale-lock detection is needed. It imports nothing of kubexm.
//
// (The lock a run takes on each host is another thing: it is held by a
// shell on that host for as long as the run's connection lives, see
// engine/hostlock.go.)
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// pollInterval is how often Lock tries again while another process holds
// the lock: flock(2) cannot wait and be interrupted by a context at once.
const pollInterval = 50 * time.Millisecond

// Open opens p for locking: an existing directory as it is (no lock file is
// left in it), else a file, created when missing.
func Open(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EISDIR) {
		return os.Open(p)
	}
	return f, err
}

// Lock takes an exclusive lock on p (see Open), waiting while other
// processes hold it until ctx ends, and returns the function that releases
// it.
func Lock(ctx context.Context, p string) (func(), error) {
	f, err := Open(p)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	for {
		ok, err := TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if ok {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, ctx.Err())
		case <-t.C:
		}
	}
}

// TryLock takes an exclusive lock on f without waiting. It reports false
// when another process holds one; the lock ends when f is closed.
func TryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

// Held reports whether another process holds a lock on f's file, without
// taking it.
func Held(f *os.File) bool {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
