package bundle

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on p, waiting for other processes that
// hold it, and returns the function that releases it.
func lockFile(p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return func() { f.Close() }, nil
}
