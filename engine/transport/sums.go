package transport

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// SumCache remembers sha256 sums of control-machine files, keyed by path,
// size and modification time, so a file sent to many hosts is read once.
// Safe for concurrent use; share one per run (ssh.Options.Sums,
// local.WithSums).
type SumCache struct {
	mu sync.Mutex
	m  map[sumKey]*sumEntry
}

type sumKey struct {
	path  string
	size  int64
	mtime time.Time
}

type sumEntry struct {
	done chan struct{}
	sum  string
	err  error
}

// Sum returns the hex sha256 of a local regular file.
func (c *SumCache) Sum(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("source %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("source %s is not a regular file", p)
	}
	key := sumKey{p, fi.Size(), fi.ModTime()}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[sumKey]*sumEntry{}
	}
	e, ok := c.m[key]
	if !ok {
		e = &sumEntry{done: make(chan struct{})}
		c.m[key] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		return e.sum, e.err
	}
	e.sum, e.err = hashFile(p)
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		delete(c.m, key)
		c.mu.Unlock()
	}
	return e.sum, e.err
}

func hashFile(p string) (string, error) {
	sum, err := FileSha256(p)
	if err == nil && sum == "" {
		err = fmt.Errorf("source %s does not exist", p)
	}
	return sum, err
}
