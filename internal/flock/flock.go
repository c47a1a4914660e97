// Package flock is kubexm's one advisory lock on the control machine: an
// flock(2) on a file or a directory, which the kernel drops when its holder
// dies, however it dies, so a lock is never left behind by a killed run and
// no stale-lock detection is needed. It imports nothing of kubexm.
//
// (The lock a run takes on each host is another thing: it is held by a
// shell on that host for as long as the run's connection lives, see
// engine/hostlock.)
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
//
// A lock file is written (who holds it), so Open never reaches another file
// through it: a missing file is created with O_EXCL, an existing one opened
// with O_NOFOLLOW, and it must be a regular file of this process's user. A
// symlink planted as the lock by another user makes Open fail rather than
// hand out the file it points to. A symlink to a directory is followed: a
// directory lock writes nothing.
func Open(p string) (*os.File, error) {
	for range 3 {
		f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			if err := ownRegular(f); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		case errors.Is(err, syscall.EISDIR):
			return os.Open(p)
		case errors.Is(err, syscall.ELOOP):
			if st, serr := os.Stat(p); serr == nil && st.IsDir() {
				return os.Open(p)
			}
			return nil, fmt.Errorf("%s is a symbolic link, not a lock file: remove it", p)
		case errors.Is(err, os.ErrNotExist):
			f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
			if errors.Is(err, os.ErrExist) {
				continue // made by another run meanwhile: open that one
			}
			return f, err
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: created and removed while opening it", p)
}

// ownRegular refuses a lock file that is no regular file of this user.
func ownRegular(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a lock file: remove it", f.Name(), st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): remove it", f.Name(), sys.Uid, os.Geteuid())
	}
	return nil
}

// CheckPrivateDir refuses a directory whose files another user could plant
// or swap (a lock, a journal, a kubeconfig): one owned by another user, or
// writable by its group or by others. For a cluster's work directory,
// before its lock is taken.
func CheckPrivateDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): another user could change what kubexm reads there; use a directory of your own", dir, sys.Uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by its group or by others (mode %04o): another user could plant files there; chmod go-w %s", dir, perm, dir)
	}
	return nil
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
